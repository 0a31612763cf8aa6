"""The ``fedbandit`` command line (docs/bench.md, "Command line").

fedbandit envs | agents | suites [--verbose]
fedbandit run ENV AGENT [--runs 10] [--seed 0] [--horizon T] [--env-kwargs JSON] [--agent-kwargs JSON]
              [--backend numpy|jax]
fedbandit suite NAME [--store PATH] [--executor serial|joblib|ray] [--jobs 2] [--quiet] [--verbose]
                [--backend numpy|jax]
fedbandit leaderboard [--store PATH] [--suite NAME] [--baseline AGENT] [--format markdown|latex]
                      [--latex] [--html DIR] [--log-time] [--audit] [--reference [PATH]]
fedbandit reference build [--out PATH] [--executor joblib] [--jobs 2] [--store PATH] [--quiet]
fedbandit reference check [--reference PATH] [--sample K] [--seeds N] [--seed S] [--suite NAME]
fedbandit reproduce FIGURE [script args...]
fedbandit audit (laplace|gaussian|AGENT) [--epsilon 1] [--kwargs JSON] [--trials N]
fedbandit --version | [--debug] COMMAND ...

Every option is checked where it is parsed: a bad value exits with status 2 and one line naming
the option, before anything runs or is printed on stdout. Errors while running are one line on
stderr (status 2 for the project's input errors, 1 for store conflicts and I/O errors); --debug
shows the traceback instead (docs/reliability.md, "Errors"). The exit statuses are listed in
``fedbandit --help`` (:data:`EXIT_STATUSES`) and docs/bench.md, "Command line".
"""

from __future__ import annotations

import argparse
import difflib
import json
import math
import re
import sqlite3
import subprocess
import sys
import traceback
import warnings
from pathlib import Path

from fedbandit_env.agent_registry import agent_class, list_agents
from fedbandit_env.bench.backends import (
    BACKENDS,
    JAX,
    NUMPY,
    jax_backend,
    jax_installed,
    list_jax_learners,
)
from fedbandit_env.bench.evaluate import evaluate
from fedbandit_env.bench.executors import EXECUTORS, require_executor, run_suite
from fedbandit_env.bench.leaderboard import build, current_rows, to_latex, to_markdown
from fedbandit_env.bench.reference import REFERENCE_PATH
from fedbandit_env.bench.robust_metrics import robust_markdown
from fedbandit_env.bench.store import ResultsStore
from fedbandit_env.bench.suites import (
    SUITES,
    AttackSweep,
    Cell,
    Suite,
    cell_agent_steps,
    estimated_seconds,
    get_suite,
)
from fedbandit_env.errors import (
    ConfigError,
    FedBanditError,
    LearnerError,
    StoreConflictError,
    StoreWriteError,
)
from fedbandit_env.registration import list_envs, spec

DEFAULT_STORE = "fedbandit_results.sqlite"
EXIT_STATUSES = (
    "exit status: 0 success; 2 bad input (a usage error, an invalid option value, an unknown id, "
    "a configuration the project rejects, or a file that is not what fedbandit writes: one line "
    "on stderr naming it); 1 failure (a learner that raised, an audit that refutes a privacy "
    "claim, failed units of --keep-going, a store conflict, a store that cannot be written, an "
    "I/O error, an unexpected error, or differences found by `reference check`); 130 "
    "interrupted. --debug shows the traceback instead of the one line."
)
# NAME -> (module of fedbandit_env.reproductions, what it reproduces); the CLI names the modules
# and never imports them (the reproductions import the bench, not the other way round)
REPRODUCTIONS = "fedbandit_env.reproductions"
FIGURES = {
    "gossip": ("gossip", "gossip paper, Fig. 2 and Sec. 5.2"),
    "gossip-fig2": ("gossip", "alias of gossip"),
    "dp-recsys": ("dp_recsys", "DP recommender paper, Section IV experiment"),
    "commeff": ("commeff", "commeff paper, Figs. 4-12"),
    "linear": ("linear", "DP federated linear bandits, Fig. 1A-C"),
    "field": ("field", "field agents' sanity experiments (docs/field.md)"),
    "byzres": ("byzres", "Byzantine-resilient decentralized UCB (Zhu et al., TMLR)"),
    "fed-mom": ("fed_mom", "Fed-MoM-UCB under Byzantine clients (Demirel et al.)"),
    "vial": ("vial", "robust gossip recommendations with blocking (Vial et al. 2021)"),
}


def _note(message: str) -> None:
    print(message, file=sys.stderr)


def cmd_envs(args) -> None:
    for env_id in list_envs():
        print(f"{env_id:32s} {spec(env_id).description}")


def cmd_agents(args) -> None:
    print("\n".join(list_agents() if args.backend == NUMPY else jax_backend().list_jax_agents()))


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def cmd_suites(args) -> None:
    """One row per suite: its cells and learners in this installation and a serial time estimate
    (agent-steps over the measured per-family rates, docs/bench.md "Command line")."""
    print("| suite | cells | learners | agent-steps | estimated serial time | description |")
    print("|---|---|---|---|---|---|")
    listing = []
    for name, suite in SUITES.items():
        cells = suite.available(lambda _msg: None)
        learners = sorted({c.agent_id for c in cells})
        steps = sum(cell_agent_steps(c) for c in cells)
        seconds = estimated_seconds(cells, len(suite.candidates()))
        print(
            f"| {name} | {len(cells)} | {len(learners)} | {steps:.2e} | "
            f"~{_duration(seconds)} | {suite.description} |"
        )
        listing.append(f"{name}: {', '.join(learners)}")
    print(
        "\nestimated serial time = each cell's agent-steps (horizon x runs x agents) at its "
        "learner's measured cost per agent-step (x the adversary factor under attack), plus a "
        "per-cell and a per-candidate overhead, as benchmarks/bench_suite_estimates.py measured "
        "them on a shared 2-core machine (within 2x of its runs of quick and robust; a "
        "learner without a measured cost takes its family's rate); an idle or faster machine "
        "is faster"
    )
    if args.verbose:
        print("\nlearners:\n" + "\n".join(listing))


def _check_backend_options(args) -> None:
    """``--backend jax``: JAX is installed and no numpy-only option is given (before anything
    runs or is created)."""
    if args.backend != JAX:
        return
    jax_backend()  # a ConfigError naming the extra without JAX
    if args.privacy:
        raise ConfigError(
            "--privacy: the privacy wrappers are numpy-only; drop --privacy or use --backend numpy"
        )


def cmd_run(args) -> None:
    """One cell: its JSON summary; with ``--store`` its rows are kept (suite name ``run``)."""
    from fedbandit_env.bench.rank import resolve_learner

    _check_backend_options(args)
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


def _agent_list(text: str) -> list[str]:
    ids = [t.strip() for t in text.split(",") if t.strip()]
    if not ids:
        raise ValueError(f"expected learner ids separated by commas, got {text!r}")
    for agent_id in ids:
        _agent_id(agent_id)
    return ids


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
        mine = learner_cells(suite, agent_id, privacy=dict(args.privacy or {}), note=_note,
                             backend=args.backend)  # fmt: skip
        if not mine:
            _note(f"suite {suite.name}: no cell of {agent_id} (its reset refuses every "
                  "environment of the suite)")  # fmt: skip
        cells += mine
    if not cells:
        raise FedBanditError(f"suite {suite.name}: no cell to run for {', '.join(agents)}")
    return cells


def cmd_suite(args) -> None:
    require_executor(args.executor)  # a missing extra is an error before the store is created
    _check_backend_options(args)
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
        rows = current_rows(store.rows_for(cells), _note)
        if rows:
            print(board_markdown(build(rows, suite.baseline_for), get_suite(args.name),
                                 args.verbose))  # fmt: skip
    _report_failures(failures)


def board_markdown(entries: list, suite: Suite | None, verbose: bool) -> str:
    """The Markdown leaderboard; for a suite of attack sweeps (``robust``) only the matrix of
    each graph (regret under attack / clean), the per-attack tables with ``verbose``."""
    if suite is None or verbose or not any(isinstance(sw, AttackSweep) for sw in suite.sweeps):
        return to_markdown(entries)
    matrices = robust_markdown(entries)
    if not matrices:
        return to_markdown(entries)
    return matrices + "\n(one table per environment and attack: --verbose)"


def _report_failures(failures: list[str]) -> None:
    if failures:
        for line in failures:
            _note(f"failed: {line}")
        raise LearnerError(
            f"{len(failures)} work unit(s) failed (listed above); the other cells' rows are "
            "stored, and re-running the command retries only the missing seeds"
        )


def cmd_rank(args) -> None:
    """``fedbandit rank ID``: the learner's cells of a suite into a store, ranked against the
    shipped reference in the tables where it ran (docs/bench.md, "Ranking a new learner")."""
    from fedbandit_env.bench.rank import learner_cells, rank_rows, resolve_learner

    if args.html:
        from fedbandit_env.bench.plotting import pyplot

        pyplot("rank --html")  # a missing matplotlib is an error before anything runs
    require_executor(args.executor)
    _check_backend_options(args)
    suite = get_suite(args.suite)
    agent_id = resolve_learner(args.agent, args.backend)
    cells = learner_cells(suite, agent_id, dict(args.agent_kwargs), dict(args.privacy),
                          note=_note, backend=args.backend)  # fmt: skip
    if not cells:
        raise FedBanditError(
            f"rank: {agent_id} runs on no environment of suite {suite.name!r} (the notes above "
            "say why); try another suite (`fedbandit suites`)"
        )
    mine = Suite(f"rank:{suite.name}", tuple(cells), suite.baseline, suite.description)
    store = ResultsStore(args.store)
    failures: list[str] = []
    run_suite(mine, store, args.executor, args.jobs, args.chunk, None, args.quiet,
              failures=failures if args.keep_going else None)  # fmt: skip
    ranking = rank_rows(store, cells, args.reference, _note)
    if not ranking.rows:
        raise FedBanditError(f"rank: no rows of {agent_id} in {args.store}")
    entries = build(ranking.rows, suite.baseline_for)
    highlight = {c.name for c in cells}
    mark_entries(entries, ranking.rows[: ranking.mine], highlight)
    print(to_markdown(entries))
    _note(f"rank: {ranking.mine} row(s) of {agent_id} from {args.store}, {ranking.reference} "
          f"reference row(s) from {ranking.reference_path} (fedbandit "
          f"{ranking.reference_version})")  # fmt: skip
    if args.html:
        sources = (("store", args.store, ranking.mine),
                   ("reference", f"{ranking.reference_path} (fedbandit "
                    f"{ranking.reference_version})", ranking.reference))  # fmt: skip
        _write_page(entries, ranking.rows, args, f"fedbandit rank {agent_id} ({suite.name})",
                    suite.name, sources)  # fmt: skip
    _report_failures(failures)


def cmd_leaderboard(args) -> None:
    if args.html:
        from fedbandit_env.bench.plotting import pyplot

        pyplot()  # a missing matplotlib is an error before any output
    store = ResultsStore(args.store, create=False)
    if args.resolve:
        from fedbandit_env.bench.rank import resolve_learner

        for agent_id in args.resolve:  # named on the command line: imported, as rank does
            resolve_learner(agent_id, NUMPY)
    everything = store.rows()
    if args.suite:
        suite = get_suite(args.suite)
        rows = store.rows_for(_suite_tables_cells(suite))
        baseline = args.baseline or suite.baseline_for
        rows += _unregistered_suite_rows(everything, rows, suite, args.include_unregistered)
    else:
        rows, baseline = everything, args.baseline
    held = rows
    rows = current_rows(rows, _note, include_unregistered=args.include_unregistered)
    if held and not rows and not args.reference:
        raise FedBanditError(unranked_message(held, args.store))
    mine = len(rows)
    sources = [("store", args.store, mine)]
    if args.reference:
        rows, ref_path, ref_version = _with_reference(rows, args)
        sources.append(("reference", f"{ref_path} (fedbandit {ref_version})", len(rows) - mine))
    if not rows:
        which = f" of suite {args.suite!r}" if args.suite else ""
        raise FedBanditError(
            f"leaderboard: no results{which} in {args.store}; run `fedbandit suite` first"
        )
    entries = build(rows, baseline)
    highlight = set(args.highlight or ())
    if args.reference and not highlight:
        highlight = {r.label for r in rows[:mine]}  # your rows, beside the reference's
    mark_entries(entries, rows[:mine] if args.reference else [], highlight)
    refuted = []
    if args.audit:
        from fedbandit_env.bench.audit_agent import leaderboard_audits
        from fedbandit_env.bench.leaderboard import attach_audits

        attach_audits(entries, leaderboard_audits(rows, trials=args.audit_trials, note=_note))
        refuted = sorted({e.label for e in entries if e.audit is not None and e.audit.exceeds})
    suite = get_suite(args.suite) if args.suite else None
    if args.format == "latex":
        print(to_latex(entries))
    else:
        print(board_markdown(entries, suite, args.verbose))
    if args.html:
        _write_page(entries, rows, args, f"fedbandit leaderboard ({args.store})", args.suite,
                    tuple(sources))  # fmt: skip
    if refuted:
        raise Refuted(
            f"leaderboard --audit: the audit refutes the privacy claim of {', '.join(refuted)} "
            "(audited lower bound above the declared epsilon)"
        )


def unranked_message(rows: list, store: str) -> str:
    """Why none of a store's rows can be ranked here: each learner id with its rows and the
    reason (not registered in this process, or a stale results version), and what to do."""
    from fedbandit_env.bench.versions import registered_results_version, row_version_key

    unknown: dict[str, int] = {}
    stale: dict[str, int] = {}
    for row in rows:
        want = registered_results_version(*row_version_key(row))
        side = unknown if want is None else stale
        side[row.agent_id] = side.get(row.agent_id, 0) + 1
    parts = []
    if unknown:
        ids = ", ".join(f"{a} ({n} rows)" for a, n in sorted(unknown.items()))
        modules = [a for a in sorted(unknown) if ":" in a and a.partition(":")[0] not in
                   ("mabwiser", "smpybandits")]  # fmt: skip
        fix = (f"name them with --resolve {','.join(modules)} (imported from the current "
               "folder, as `rank` does) or " if modules else "")  # fmt: skip
        parts.append(f"learners not registered in this process: {ids}; {fix}rank them by their "
                     "stored id with --include-unregistered")  # fmt: skip
    if stale:
        ids = ", ".join(f"{a} ({n} rows)" for a, n in sorted(stale.items()))
        parts.append(f"rows of another results version: {ids}; re-run their cells")
    return f"leaderboard: none of the {len(rows)} rows of {store} can be ranked here: " + "; ".join(
        parts
    )


class Refuted(Exception):
    """An audit refuted a privacy claim: exit status 1 (docs/bench.md, "Command line")."""


def _suite_tables_cells(suite: Suite) -> list[Cell]:
    """The cells whose rows ``leaderboard --suite`` shows: the suite's available cells, and
    with JAX installed the same cells on the JAX backend (by hash only: nothing is built), so
    that a suite run with ``--backend jax`` shows beside the numpy one."""
    cells = suite.available(lambda _msg: None)
    if jax_installed():
        cells += suite.with_backend(JAX).candidates()
    return cells


def _unregistered_suite_rows(everything, selected, suite, include: bool) -> list:
    """Rows of ``everything`` not selected by ``suite`` whose learner is not registered here
    but whose table is one of the suite's (a learner registered at run time in the process
    that ran the suite): counted on stderr, and returned with ``include``."""
    from fedbandit_env.bench.backends import lookup_learner

    tables = {c.env_key for c in suite.candidates()}
    chosen = {(r.cell_hash, r.results_version, r.seed) for r in selected}
    extra = [r for r in everything if (r.cell_hash, r.results_version, r.seed) not in chosen
             and r.env_key in tables and lookup_learner(r.agent_id, r.backend) is None]  # fmt: skip
    other = len(everything) - len(selected) - len(extra)
    if extra:
        labels = ", ".join(sorted({r.label for r in extra}))
        _note(f"leaderboard: {len(extra)} row(s) of {labels} on suite {suite.name}'s "
              "environments: learner not registered here; "
              + ("ranked by their stored id (--include-unregistered)" if include
                 else "left out (--include-unregistered ranks them)"))  # fmt: skip
    if other > 0:
        _note(f"leaderboard: {other} row(s) of the store are not cells of suite {suite.name}: "
              "left out (drop --suite to rank them)")  # fmt: skip
    return extra if include else []


def mark_entries(entries, mine_rows, highlight: set[str]) -> None:
    """Mark each entry's source ("store" for the user's rows when ranked beside a reference,
    "reference" for the reference's) and whether it is highlighted."""
    mine = {(r.cell_hash, r.results_version) for r in mine_rows}
    for e in entries:
        if mine_rows:
            e.source = "store" if (e.cell_hash, e.results_version) in mine else "reference"
        e.highlight = e.label in highlight or e.agent_id in highlight


def _write_page(entries, rows, args, title: str, suite: str | None, sources: tuple) -> None:
    from datetime import datetime, timezone

    from fedbandit_env.bench.html import RunInfo, write_html

    info = RunInfo(
        suite=suite,
        seeds=tuple(sorted({r.seed for r in rows})),
        date=datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        sources=sources,
    )
    page = write_html(entries, Path(args.html), title, info=info, log_time=args.log_time,
                      curves=_curve_choice(args))  # fmt: skip
    (page.parent / "leaderboard.tex").write_text(to_latex(entries))
    print(f"HTML: {page}")


def _curve_choice(args):
    """Which learners get a curve in the regret panels: ``--agents`` ids, or the ``--top K``
    best of each table (the baseline and highlighted learners always)."""
    from fedbandit_env.bench.figures import CurveChoice

    return CurveChoice(agents=tuple(getattr(args, "curve_agents", None) or ()),
                       top=getattr(args, "top", None))  # fmt: skip


def _with_reference(rows: list, args) -> tuple[list, Path, str]:
    """The store's current rows plus the shipped reference's current rows of the cells the
    store does not hold (docs/bench.md, "Reference results"): reference rows of another
    results version are left out with a note, never pooled. Also the reference's path and
    package version (the page's header names them)."""
    from dataclasses import replace

    from fedbandit_env.bench.reference import (
        JAX_SEED_OFFSET,
        current_reference_rows,
        load_reference,
        merge_rows,
        rows_of_cells,
    )

    reference = load_reference(args.reference)
    ref_rows = reference.rows()
    if args.suite:
        suite = get_suite(args.suite)
        selected = rows_of_cells(ref_rows, suite.available(lambda _msg: None))
        if jax_installed():  # the reference's JAX cells are on their own seeds
            jax_cells = [replace(c, seed=c.seed + JAX_SEED_OFFSET)
                         for c in suite.with_backend(JAX).candidates()]  # fmt: skip
            selected += rows_of_cells(ref_rows, jax_cells)
        ref_rows = selected
    merged = merge_rows(rows, current_reference_rows(ref_rows, _note))
    return merged, reference.path, reference.package_version


def cmd_reference(args) -> None:
    from fedbandit_env.bench.reference import build_reference, check_reference, load_reference

    if args.action == "build":
        require_executor(args.executor)
        report = build_reference(
            args.out,
            args.executor,
            args.jobs,
            store=args.store,
            note=(lambda _msg: None) if args.quiet else _note,
            progress=not args.quiet,
            jax=args.jax,
        )
        print(
            f"reference: {report.cells} cells, {report.rows} rows, {report.size:,} bytes "
            f"written to {report.path} in {report.wall_time:.1f} s"
        )
        return
    reference = load_reference(args.reference)
    report = check_reference(
        reference,
        sample=args.sample,
        seeds=args.seeds,
        seed=args.seed,
        suites=[args.suite] if args.suite else None,
        note=(lambda _msg: None) if args.quiet else _note,
    )
    for name in report.skipped:
        _note(f"reference check: skipped {name}")
    if not report.checked:
        raise FedBanditError(f"reference check: no cell of {reference.path} could be re-run here")
    if report.differences:
        for line in report.differences:
            print(line)
        raise SystemExit(
            f"reference check: {len(report.differences)} difference(s) in "
            f"{len(report.checked)} re-run cell(s) of {reference.path}; if the change is "
            "intended, bump the versions that moved and rebuild the file with `fedbandit "
            "reference build` (docs/bench.md, reference results)"
        )
    print(f"reference check: {len(report.checked)} cell(s) re-run, every row bit-identical")


def reproduce_help() -> str:
    """``fedbandit reproduce --help``: the papers it reproduces and how to get a script's own
    options."""
    width = max(len(name) for name in FIGURES)
    lines = [
        "usage: fedbandit reproduce PAPER [the script's arguments]",
        "",
        "Run a paper's reproduction (python -m fedbandit_env.reproductions.MODULE); every "
        "later argument, --help included, goes to its script: `fedbandit reproduce PAPER "
        "--help` lists its options (--full, --claims FILE, ...; docs/reproductions.md).",
        "",
        "papers:",
        *(f"  {name:<{width}}  {what}" for name, (_module, what) in FIGURES.items()),
    ]
    return "\n".join(lines)


def cmd_reproduce(args, extra: list[str]) -> None:
    """Run reproduction ``args.figure`` (``python -m fedbandit_env.reproductions.NAME``) with
    the remaining arguments; its exit status is the command's."""
    module = f"{REPRODUCTIONS}.{FIGURES[args.figure][0]}"
    raise SystemExit(subprocess.call([sys.executable, "-m", module, *extra]))


def cmd_audit(args) -> None:
    from fedbandit_env.bench.privacy_audit import audit_output_mechanism
    from fedbandit_env.privacy import GaussianMechanism, LaplaceMechanism

    kwargs = dict(args.kwargs)
    if args.target in ("laplace", "gaussian"):
        epsilon = 1.0 if args.epsilon is None else args.epsilon
        if args.target == "laplace":
            mech = LaplaceMechanism(epsilon=epsilon, **kwargs)
        else:
            mech = GaussianMechanism(epsilon=epsilon, **{"delta": 1e-5, **kwargs})
        result = audit_output_mechanism(mech, trials=args.trials, seed=args.seed)
        claim: float | None = epsilon
    else:
        _audit_learner(args, kwargs)
        return
    bound = f"empirical lower bound {result.epsilon_lower:.3f} (95% confidence)"
    verdict = "EXCEEDS the claim" if result.epsilon_lower > claim else "consistent with the claim"
    print(f"{args.target} {kwargs}: claimed epsilon {claim:g}, {bound}: {verdict}")
    if result.epsilon_lower > claim:
        raise Refuted(f"audit: the audit refutes the claim of {args.target} (epsilon {claim:g})")


class _Parser(argparse.ArgumentParser):
    """Usage errors are one line on stderr and exit status 2 (argparse's convention)."""

    def error(self, message: str):
        match = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)", message)
        if match:
            choices = re.findall(r"'([^']*)'", match.group(2))
            close = difflib.get_close_matches(match.group(1), choices, n=1)
            if close:
                message += f"; did you mean {close[0]!r}?"
        self.exit(2, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows each option's default, unless the help already says it or there is none."""

    def _get_help_string(self, action):
        text = action.help or ""
        if action.default is None or action.default is False or "default" in text:
            return text
        return super()._get_help_string(action)


DEBUG = {"on": False}
"""Whether ``--debug`` was given (set by :func:`main` before parsing, so that an option's
check can show the traceback of what failed underneath)."""


def _arg_type(name: str, check):
    """An argparse ``type`` from ``check(text) -> value`` that raises ValueError / KeyError
    with the message the user sees (``argument --opt: <message>``)."""

    def convert(text: str):
        try:
            return check(text)
        except (ValueError, KeyError) as err:
            if DEBUG["on"] and err.__cause__ is not None:  # what failed underneath (an import)
                traceback.print_exception(err.__cause__, file=sys.stderr)
            msg = err.args[0] if isinstance(err, KeyError) and err.args else str(err)
            raise argparse.ArgumentTypeError(str(msg)) from None

    convert.__name__ = name  # argparse names the type in some messages
    return convert


def _integer(text: str, low: int, what: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"expected {what}, got {text!r}") from None
    if value < low:
        raise ValueError(f"expected {what}, got {text!r}")
    return value


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"expected a positive finite number, got {text!r}")
    return value


def _json_object(text: str) -> dict:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as err:
        raise ValueError(f"expected a JSON object, got {text!r} ({err})") from None
    if not isinstance(value, dict):
        raise ValueError(f"expected a JSON object such as '{{\"epsilon\": 1}}', got {text!r}")
    return value


def _env_id(text: str) -> str:
    spec(text)  # raises UnknownIdError with suggestions
    return text


def _agent_id(text: str) -> str:
    """A learner id of either backend (registered, or a ``module:attr`` that imports); which
    backend runs it is checked when it runs."""
    if text in list_agents() or (jax_installed() and text in list_jax_learners()):
        return text
    agent_class(text)  # raises UnknownIdError with suggestions
    return text


def _audit_target(text: str) -> str:
    return text if text in ("laplace", "gaussian") else _agent_id(text)


def _suite_name(text: str) -> str:
    get_suite(text)
    return text


def _html_dir(text: str) -> str:
    if Path(text).exists() and not Path(text).is_dir():
        raise ValueError(f"expected a folder for the HTML page, {text!r} is a file")
    return text


def _reference_file(text: str) -> str:
    if not Path(text).is_file():
        raise ValueError(f"expected a reference file, {text!r} is not a file")
    return text


def _figure(text: str) -> str:
    if text not in FIGURES:
        known = ", ".join(f"{k} ({v[1]})" for k, v in FIGURES.items())
        raise ValueError(f"unknown figure {text!r}; known: {known}")
    return text


POSITIVE = _arg_type("positive int", lambda t: _integer(t, 1, "a positive integer"))
NON_NEGATIVE = _arg_type("non-negative int", lambda t: _integer(t, 0, "an integer >= 0"))
TRIALS = _arg_type("trials", lambda t: _integer(t, 100, "an integer >= 100"))
EPSILON = _arg_type("epsilon", _positive_float)
JSON_OBJECT = _arg_type("JSON object", _json_object)
ENV_ID = _arg_type("environment id", _env_id)
AGENT_ID = _arg_type("learner id", _agent_id)
ID_LIST = _arg_type("learner ids", lambda t: [x.strip() for x in t.split(",") if x.strip()])
AGENT_HELP = (
    "a learner id: registered (`fedbandit agents`), or module:Class of a file in the current "
    "folder or an installed module, or mabwiser:POLICY / smpybandits:POLICY; with --backend "
    "jax: a JAX learner id (`fedbandit agents --backend jax`) or module:Class of a JaxLearner"
)
PRIVACY_HELP = (
    "wrap the learner's channels with the privacy wrapper, a JSON object: the options of every "
    'channel (\'{"epsilon": 1}\'), or {"channels": {NAME: options}} with "budget", '
    '"composition", "delta_prime", "delta_budget" (docs/privacy.md, "Privacy wrappers"); {}: '
    "no wrapper"
)


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("fedbandit")
    except Exception:  # not installed as a distribution (a bare checkout on the path)
        from fedbandit_env import __version__

        return __version__


def _audit_learner(args, kwargs: dict) -> None:
    """``fedbandit audit AGENT``: the targeted audit of docs/privacy.md "Auditing learners"."""
    from fedbandit_env.bench.audit_agent import TARGETS, audit_learner

    wrapper_epsilon = args.wrapper_epsilon
    tgt = TARGETS.get(args.target)
    if args.epsilon is not None:
        if tgt is not None and tgt.wrapper is not None and wrapper_epsilon is None:
            wrapper_epsilon = args.epsilon  # a *_shared learner: the wrapper's epsilon
        else:  # shorthand for the learner's own epsilon kwarg
            kwargs.setdefault("epsilon", args.epsilon)
    audit = audit_learner(
        args.target,
        kwargs,
        trials=args.trials,
        seed=args.seed,
        broken=args.broken,
        wrapper_epsilon=wrapper_epsilon,
        scope=args.scope,
        require_claim=args.epsilon is not None,
    )
    result = audit.result
    name = args.target + (" (broken: noise scale reduced)" if args.broken else "")
    if wrapper_epsilon is not None:
        name += f" under the privacy wrapper (epsilon {wrapper_epsilon:g} per message)"
    bound = f"empirical lower bound {result.epsilon_lower:.3f} (95% confidence)"
    detail = f"{result.trials} trials per input, {audit.seconds:.1f} s; event {result.event}"
    if audit.declared is None or math.isinf(audit.declared):
        print(f"{name} {kwargs}: claims no privacy (not private); {bound}; {detail}")
        return
    claim = audit.claim
    verdict = "EXCEEDS the claim" if audit.exceeds_claim() else "consistent with the claim"
    what = "per-release epsilon" if args.scope == "release" else "transcript epsilon"
    print(
        f"{name} {kwargs}: declared epsilon {audit.declared:g}, {what} {claim:.4g}, {bound}: "
        f"{verdict}; {detail}"
    )
    if audit.exceeds_claim():
        raise Refuted(
            f"audit: the audit refutes the privacy claim of {name} (lower bound "
            f"{result.epsilon_lower:.3f} above {claim:.4g})"
        )


def parser() -> argparse.ArgumentParser:
    fmt = _HelpFormatter
    p = _Parser(
        prog="fedbandit",
        description="Federated bandit benchmark.",
        epilog=EXIT_STATUSES,
        formatter_class=fmt,
    )
    p.add_argument("--version", action="version", version=f"fedbandit {_version()}")
    p.add_argument("--debug", action="store_true", help="show the full traceback of an error")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, help: str, **kwargs) -> argparse.ArgumentParser:
        cmd = sub.add_parser(name, help=help, description=help, formatter_class=fmt, **kwargs)
        if kwargs.get("add_help", True):
            cmd.add_argument(
                "--debug",
                action="store_true",
                default=argparse.SUPPRESS,
                help="show the full traceback of an error",
            )
        return cmd

    command("envs", "list registered environments")
    _backend_option(command("agents", "list registered learners (of a backend)"))
    suites = command(
        "suites",
        "list the suites: cells and learners in this installation, agent-steps and an estimated "
        "serial time",
    )
    suites.add_argument("--verbose", action="store_true", help="also list each suite's learners")
    run = command("run", "evaluate one cell and print its summary (JSON)")
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
    _backend_option(run)
    suite = command("suite", f"run a suite into the store ({', '.join(SUITES)})")
    suite.add_argument(
        "name",
        type=_arg_type("suite", _suite_name),
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
        type=_arg_type("learner ids", _agent_list),
        default=None,
        metavar="ID[,ID...]",
        help="run only these learners' cells (default: every cell of the suite)",
    )
    suite.add_argument("--privacy", type=JSON_OBJECT, default={}, help=PRIVACY_HELP)
    _backend_option(suite)
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
    rank = command(
        "rank",
        "run a learner's cells of a suite into a store and rank it against the shipped "
        "reference results, in the tables where it ran",
    )
    rank.add_argument("agent", type=AGENT_ID, help=AGENT_HELP)
    rank.add_argument(
        "--suite",
        type=_arg_type("suite", _suite_name),
        default="standard",
        help=f"the suite whose environments it runs on: {', '.join(SUITES)}",
    )
    rank.add_argument(
        "--store", default=DEFAULT_STORE, help="results store (SQLite file, created if missing)"
    )
    rank.add_argument(
        "--agent-kwargs", type=JSON_OBJECT, default={}, help="learner kwargs, a JSON object"
    )
    rank.add_argument("--privacy", type=JSON_OBJECT, default={}, help=PRIVACY_HELP)
    _backend_option(rank)
    rank.add_argument(
        "--reference",
        type=_arg_type("reference file", _reference_file),
        default=None,
        metavar="PATH",
        help="rank against this reference file (default: the one shipped with fedbandit)",
    )
    rank.add_argument(
        "--executor", choices=EXECUTORS, default="serial", help="where work units run"
    )
    rank.add_argument("--jobs", type=POSITIVE, default=2, help="workers for joblib / ray")
    rank.add_argument("--chunk", type=POSITIVE, default=10, help="seeds per work unit")
    rank.add_argument(
        "--keep-going", action="store_true", help="record failed work units and go on"
    )
    rank.add_argument("--quiet", action="store_true", help="no skip note and no progress bar")
    _page_options(rank)
    board = command("leaderboard", "render the leaderboard from the store (read-only)")
    board.add_argument("--store", default=DEFAULT_STORE, help="results store (SQLite file)")
    board.add_argument(
        "--suite",
        type=_arg_type("suite", _suite_name),
        default=None,
        help="only this suite's cells (default: every row in the store)",
    )
    board.add_argument(
        "--baseline",
        default=None,
        help="normalize every table to this learner (default: the suite's baseline; without "
        "--suite, linucb on linear environments and ucb1 otherwise)",
    )
    board.add_argument(
        "--format",
        choices=("markdown", "latex"),
        default="markdown",
        help="table format: markdown, or latex (booktabs tables, best per column in bold)",
    )
    board.add_argument(
        "--latex",
        dest="format",
        action="store_const",
        const="latex",
        help="shorthand for --format latex",
    )
    _page_options(board)
    board.add_argument(
        "--highlight",
        type=ID_LIST,
        default=None,
        metavar="ID[,ID...]",
        help="mark and highlight these learners (default with --reference: your own rows)",
    )
    board.add_argument(
        "--verbose",
        action="store_true",
        help="for the robust suite: every per-attack table, not only the matrix of each graph",
    )
    board.add_argument(
        "--resolve",
        type=ID_LIST,
        default=None,
        metavar="MODULE:CLASS[,...]",
        help="import these module:Class learners from the current folder, as `rank` does, so "
        "that their rows are ranked (ids read from the store are never imported; default: "
        "none)",
    )
    board.add_argument(
        "--include-unregistered",
        action="store_true",
        help="rank rows whose learner is not registered here by their stored id (default: "
        "left out and counted on stderr)",
    )
    board.add_argument(
        "--audit",
        action="store_true",
        help="audit every private learner on the board and show the bound beside its claim "
        "(flagged when the audit exceeds it)",
    )
    board.add_argument(
        "--audit-trials", type=TRIALS, default=3000, help="trials per audit (>= 100)"
    )
    board.add_argument(
        "--reference",
        nargs="?",
        const=str(REFERENCE_PATH),
        type=_arg_type("reference file", _reference_file),
        default=None,
        metavar="PATH",
        help="also rank the reference results shipped with fedbandit (or those of PATH) "
        "without re-running them; your rows of the same cells take precedence (default: "
        "off; without PATH: the shipped file)",
    )
    ref = command("reference", "build or check the reference results shipped with fedbandit")
    ref_sub = ref.add_subparsers(dest="action", required=True, metavar="ACTION")
    ref_build = ref_sub.add_parser(
        "build",
        help="run every reference cell and write the reference file",
        description="run the standard suite and each paper suite's headline cells on fixed "
        "seeds and write the reference file (deterministic: same code, same bytes)",
        formatter_class=fmt,
    )
    ref_build.add_argument("--out", default=str(REFERENCE_PATH), help="the reference file to write")
    ref_build.add_argument(
        "--executor", choices=EXECUTORS, default="joblib", help="where units run"
    )
    ref_build.add_argument("--jobs", type=POSITIVE, default=2, help="workers for joblib / ray")
    ref_build.add_argument(
        "--store",
        default=None,
        help="keep the runs in this results store (default: a temporary one)",
    )
    ref_build.add_argument("--quiet", action="store_true", help="no progress bar and no notes")
    ref_build.add_argument(
        "--jax",
        action="store_true",
        help="also run the standard and headline cells that have a JAX learner on the JAX "
        "backend "
        "(their own seeds; needs the jax extra)",
    )
    ref_check = ref_sub.add_parser(
        "check",
        help="re-run a sample of reference cells; every row must be bit-identical",
        description="re-run a sample of the reference cells and report every cell whose rows "
        "differ from the file (exit status 1 if any does)",
        formatter_class=fmt,
    )
    ref_check.add_argument(
        "--reference",
        type=_arg_type("reference file", _reference_file),
        default=str(REFERENCE_PATH),
        help="the reference file to check",
    )
    ref_check.add_argument(
        "--sample", type=POSITIVE, default=None, help="cells to re-run (default: every cell)"
    )
    ref_check.add_argument(
        "--seeds", type=POSITIVE, default=None, help="first seeds of each cell (default: all)"
    )
    ref_check.add_argument("--seed", type=NON_NEGATIVE, default=0, help="the sample's seed")
    ref_check.add_argument(
        "--suite",
        type=_arg_type("suite", _suite_name),
        default=None,
        help="only cells of this suite (default: every suite in the file)",
    )
    ref_check.add_argument("--quiet", action="store_true", help="no progress notes")
    for action in (ref_build, ref_check):
        action.add_argument(
            "--debug",
            action="store_true",
            default=argparse.SUPPRESS,
            help="show the full traceback of an error",
        )
    rep = command(
        "reproduce",
        f"reproduce a paper ({', '.join(FIGURES)}); later arguments, --help included, go to "
        "the script (docs/reproductions.md)",
        add_help=False,
    )
    rep.add_argument("figure", type=_arg_type("figure", _figure), help="the figure's name")
    rep.add_argument("script_args", nargs=argparse.REMAINDER, help="the script's arguments")
    audit = command("audit", "empirical privacy audit of a mechanism or a learner")
    audit.add_argument(
        "target",
        type=_arg_type("audit target", _audit_target),
        help="laplace, gaussian or a learner id",
    )
    audit.add_argument(
        "--epsilon",
        type=EPSILON,
        default=None,
        help="a mechanism's epsilon (default 1); for a learner, shorthand for its epsilon kwarg "
        "(for a *_shared learner: --wrapper-epsilon). "
        "A learner's claim is its declared privacy_epsilon, read after reset",
    )
    audit.add_argument(
        "--kwargs", type=JSON_OBJECT, default={}, help="mechanism or learner kwargs (JSON object)"
    )
    audit.add_argument(
        "--trials", type=TRIALS, default=20000, help="audit trials per input (>= 100)"
    )
    audit.add_argument("--seed", type=NON_NEGATIVE, default=0, help="the audit's seed")
    audit.add_argument(
        "--wrapper-epsilon",
        type=EPSILON,
        default=None,
        help="audit a *_shared learner under the privacy wrapper at this per-message epsilon "
        "(default: no wrapper)",
    )
    audit.add_argument(
        "--scope",
        choices=("release", "transcript"),
        default="release",
        help="release: the first release carrying the changed reward; transcript: all of them",
    )
    audit.add_argument(
        "--broken", action="store_true", help="audit the broken variant (noise scale reduced)"
    )
    return p


def _backend_option(cmd: argparse.ArgumentParser) -> None:
    cmd.add_argument(
        "--backend",
        choices=BACKENDS,
        default=NUMPY,
        help="where the cells run: numpy (every learner), or jax, the compiled JAX backend for "
        "JAX learners (the ports, or your own JaxLearner; needs the jax extra; docs/bench.md, "
        "Backends)",
    )


def _page_options(cmd: argparse.ArgumentParser) -> None:
    """The options of an HTML page (leaderboard and rank)."""
    cmd.add_argument(
        "--html",
        type=_arg_type("folder", _html_dir),
        default=None,
        help="also write a static HTML page (index.html and PNGs) into this folder (default: none)",
    )
    cmd.add_argument(
        "--log-time",
        action="store_true",
        help="with --html: log-scale time axis in the regret-vs-t plots (default: linear)",
    )
    cmd.add_argument(
        "--agents",
        dest="curve_agents",
        type=ID_LIST,
        default=None,
        metavar="ID[,ID...]",
        help="with --html: draw regret curves of these learners only (and the baseline; "
        "default: every learner)",
    )
    cmd.add_argument(
        "--top",
        type=POSITIVE,
        default=None,
        metavar="K",
        help="with --html: draw regret curves of the K best learners of each table (and the "
        "baseline and highlighted ones; default: every learner)",
    )


def _one_line_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """A warning as one line on stderr (``fedbandit: warning: ...``), without the source line."""
    print(f"fedbandit: warning: {_one_line(Exception(str(message)))}", file=sys.stderr)


def _one_line(err: BaseException) -> str:
    return " ".join(str(err).split()) or type(err).__name__


def main(argv: list[str] | None = None) -> None:
    """Run a command. A usage error exits with status 2 and one line on stderr; an input error
    of the project (:class:`FedBanditError`) with status 2, a store conflict or an I/O error
    with status 1, each as one line; ``--debug`` shows the traceback instead
    (docs/reliability.md, "Errors")."""
    from fedbandit_env.bench.rank import current_folder_on_path

    current_folder_on_path()  # module:Class ids resolve from the current folder, as `-m` does
    words = sys.argv[1:] if argv is None else list(argv)
    DEBUG["on"] = "--debug" in words
    if words[:1] == ["reproduce"] and words[1:] in ([], ["-h"], ["--help"]):
        print(reproduce_help())  # the script's own --help follows its name
        raise SystemExit(0 if words[1:] else 2)
    args = parser().parse_args(argv)
    commands = {
        "rank": cmd_rank,
        "envs": cmd_envs,
        "agents": cmd_agents,
        "run": cmd_run,
        "suite": cmd_suite,
        "suites": cmd_suites,
        "leaderboard": cmd_leaderboard,
        "audit": cmd_audit,
        "reference": cmd_reference,
    }
    try:
        with warnings.catch_warnings():  # a warning is one line, as an error is
            warnings.showwarning = _one_line_warning
            if args.command == "reproduce":
                cmd_reproduce(args, args.script_args)
            else:
                commands[args.command](args)
    except KeyboardInterrupt:
        if args.debug:
            raise
        print("fedbandit: interrupted", file=sys.stderr)
        raise SystemExit(130) from None
    except Exception as err:
        if args.debug:
            raise
        what = "error"
        if isinstance(err, StoreConflictError | StoreWriteError | LearnerError | Refuted):
            status = 1
        elif isinstance(err, FedBanditError):
            status = 2
        elif isinstance(err, OSError | sqlite3.Error):
            status = 1
        else:  # not an input error: a bug, or a library's error the project does not wrap
            status, what = 1, f"unexpected {type(err).__name__} (--debug shows the traceback)"
        print(f"fedbandit: {what}: {_one_line(err)}", file=sys.stderr)
        raise SystemExit(status) from None


if __name__ == "__main__":
    main()
