"""``fedbandit run`` (one cell) and ``fedbandit suite`` (a suite into the store; docs/bench.md,
"Command line").

fedbandit run ENV AGENT [--runs 10] [--seed 0] [--horizon T] [--env-kwargs JSON] [--agent-kwargs JSON]
              [--backend numpy|jax]
fedbandit suite NAME [--store PATH] [--executor serial|joblib|ray] [--jobs 2] [--quiet] [--verbose]
                [--backend numpy|jax]
"""

from __future__ import annotations

import json

from fedbandit_env.bench.backends import JAX
from fedbandit_env.bench.cli.args import (
    AGENT_HELP,
    AGENT_ID,
    AGENT_LIST,
    DEFAULT_STORE,
    ENV_ID,
    JSON_OBJECT,
    NON_NEGATIVE,
    POSITIVE,
    PRIVACY_HELP,
    SUITE,
    backend_option,
    check_backend_options,
    command,
    note,
    report_failures,
)
from fedbandit_env.bench.cli.board import board_markdown
from fedbandit_env.bench.evaluate import evaluate
from fedbandit_env.bench.executors import EXECUTORS, require_executor, run_suite
from fedbandit_env.bench.leaderboard import build, current_rows
from fedbandit_env.bench.store import ResultsStore
from fedbandit_env.bench.suites import SUITES, Cell, Suite, get_suite
from fedbandit_env.errors import FedBanditError


def cmd_run(args) -> None:
    """One cell: its JSON summary; with ``--store`` its rows are kept (suite name ``run``)."""
    from fedbandit_env.bench.rank import resolve_learner

    check_backend_options(args)
    env_kwargs = dict(args.env_kwargs)
    if args.horizon is not None:
        env_kwargs["horizon"] = args.horizon
    privacy = dict(args.privacy) or None
    if args.backend == JAX:
        resolve_learner(args.agent, JAX)  # a module:attr JAX learner is registered, as in rank
    if args.store is None:
        res = evaluate(args.env, args.agent, runs=args.runs, seed=args.seed,
                       env_kwargs=env_kwargs, agent_kwargs=dict(args.agent_kwargs),
                       privacy=privacy, backend=args.backend)  # fmt: skip
        print(json.dumps(res.summary(), indent=2))
        return
    from fedbandit_env.bench.store import log_checkpoints, rows_from_result
    from fedbandit_env.registration import make_vec

    horizon = env_kwargs.pop("horizon", None) or make_vec(args.env, 1, **env_kwargs).horizon
    cell = Cell(args.env, args.agent, int(horizon), args.runs, env_kwargs,
                dict(args.agent_kwargs), args.seed, privacy=privacy or {},
                backend=args.backend)  # fmt: skip
    store = ResultsStore(args.store)
    res = evaluate(args.env, args.agent, runs=args.runs, seed=args.seed,
                   env_kwargs={**env_kwargs, "horizon": cell.horizon},
                   agent_kwargs=dict(args.agent_kwargs), privacy=privacy,
                   checkpoints=log_checkpoints(cell.horizon), backend=args.backend)  # fmt: skip
    written = store.append(rows_from_result(cell, "run", res))
    print(json.dumps({**res.summary(), "store": args.store, "rows_written": written,
                      "cell_hash": cell.config_hash}, indent=2))  # fmt: skip


def _suite_cells(suite, args) -> list[Cell]:
    """The cells ``fedbandit suite`` runs: every available cell, or with ``--agents`` only those
    learners' cells (:func:`~fedbandit_env.bench.rank.learner_cells`), with ``--privacy`` as
    wrapped copies."""
    from fedbandit_env.bench.rank import learner_cells, resolve_learner

    if not args.agents and not args.privacy:
        return []  # run_suite plans the whole suite
    agents = args.agents or sorted({c.agent_id for c in suite.available(lambda _m: None)})
    cells = []
    for agent_id in agents:
        resolve_learner(agent_id, args.backend)
        mine = learner_cells(suite, agent_id, privacy=dict(args.privacy or {}), note=note,
                             backend=args.backend)  # fmt: skip
        if not mine:
            note(f"suite {suite.name}: no cell of {agent_id} (its reset refuses every "
                  "environment of the suite)")  # fmt: skip
        cells += mine
    if not cells:
        raise FedBanditError(f"suite {suite.name}: no cell to run for {', '.join(agents)}")
    return cells


def cmd_suite(args) -> None:
    require_executor(args.executor)  # a missing extra is an error before the store is created
    check_backend_options(args)
    suite = get_suite(args.name).with_backend(args.backend)
    cells = _suite_cells(suite, args)
    if cells:
        agents = {c.agent_id for c in cells}
        left_out = tuple(x for x in suite.left_out if x[1].agent_id in agents)
        suite = Suite(suite.name, tuple(cells), suite.baseline, suite.description, (), left_out)
    store = ResultsStore(args.store)
    failures: list[str] = []
    written = run_suite(
        suite,
        store,
        args.executor,
        args.jobs,
        args.chunk,
        args.ray_address,
        args.quiet,
        verbose=args.verbose,
        failures=failures if args.keep_going else None,
    )
    if args.quiet:  # only the final line
        print(f"{written} new rows in {args.store} ({store.count()} in total)")
    else:
        print(f"\n{written} new rows in {args.store} ({store.count()} in total)\n")
        cells = suite.available(lambda _msg: None)
        rows = current_rows(store.rows_for(cells), note)
        if rows:
            print(board_markdown(build(rows, suite.baseline_for), get_suite(args.name),
                                 args.verbose))  # fmt: skip
    report_failures(failures)


def add(sub) -> None:
    """The parsers of ``run`` and ``suite``."""
    run = command(sub, "run", "evaluate one cell and print its summary (JSON)")
    run.add_argument("env", type=ENV_ID, help="a registered environment id (`fedbandit envs`)")
    run.add_argument("agent", type=AGENT_ID, help=AGENT_HELP)
    run.add_argument("--runs", type=POSITIVE, default=10, help="number of seeds (runs)")
    run.add_argument("--seed", type=NON_NEGATIVE, default=0, help="first seed")
    run.add_argument(
        "--horizon", type=POSITIVE, default=None, help="rounds T (default: the environment's)"
    )
    run.add_argument(
        "--env-kwargs", type=JSON_OBJECT, default={}, help="environment kwargs, a JSON object"
    )
    run.add_argument(
        "--agent-kwargs",
        type=JSON_OBJECT,
        default={},
        help='learner kwargs, a JSON object (a saved model needs {"trust_model": true}, '
        "docs/rl.md)",
    )
    run.add_argument(
        "--store",
        default=None,
        help="also keep the cell's rows in this results store "
        "(default: none, print the summary only)",
    )
    run.add_argument("--privacy", type=JSON_OBJECT, default={}, help=PRIVACY_HELP)
    backend_option(run)
    suite = command(sub, "suite", f"run a suite into the store ({', '.join(SUITES)})")
    suite.add_argument(
        "name",
        type=SUITE,
        help=f"the suite's name: {', '.join(SUITES)} (`fedbandit suites` describes them)",
    )
    suite.add_argument(
        "--store", default=DEFAULT_STORE, help="results store (SQLite file, created if missing)"
    )
    suite.add_argument(
        "--executor",
        choices=EXECUTORS,
        default="serial",
        help="where work units run: in this process, local processes (joblib) or Ray",
    )
    suite.add_argument("--jobs", type=POSITIVE, default=2, help="workers for joblib / ray")
    suite.add_argument(
        "--chunk",
        type=POSITIVE,
        default=10,
        help="seeds per work unit (a unit is one cell's contiguous seeds, written in one "
        "transaction)",
    )
    suite.add_argument("--ray-address", default=None, help="a Ray cluster (default: local Ray)")
    suite.add_argument(
        "--agents",
        type=AGENT_LIST,
        default=None,
        metavar="ID[,ID...]",
        help="run only these learners' cells (default: every cell of the suite)",
    )
    suite.add_argument("--privacy", type=JSON_OBJECT, default={}, help=PRIVACY_HELP)
    backend_option(suite)
    suite.add_argument(
        "--keep-going",
        action="store_true",
        help="when a learner raises, record the failed work unit and go on; the failures are "
        "listed at the end (exit status 1)",
    )
    suite.add_argument(
        "--quiet",
        action="store_true",
        help="only the final line (rows written): no skip note, no progress bar, no table",
    )
    suite.add_argument(
        "--verbose",
        action="store_true",
        help="one line per skipped environment and reason (default: one summary line); for "
        "the robust suite also every per-attack table (default: the matrix of each graph)",
    )
