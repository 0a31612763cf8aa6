"""``fedbandit rank`` (a learner's cells of a suite, ranked against the shipped reference) and
``fedbandit leaderboard`` (the store's tables, read-only), with their HTML page (docs/bench.md,
"Command line", "Ranking a new learner").

fedbandit rank AGENT [--suite standard] [--store PATH] [--agent-kwargs JSON] [--privacy JSON]
                     [--reference PATH] [--executor serial|joblib|ray] [--jobs 2] [--keep-going]
                     [--html DIR] [--log-time] [--agents ID,...] [--top K] [--backend numpy|jax]
fedbandit leaderboard [--store PATH] [--suite NAME] [--baseline AGENT] [--format markdown|latex]
                      [--latex] [--html DIR] [--log-time] [--audit] [--reference [PATH]]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from fedbandit_env.bench.backends import JAX, NUMPY, jax_installed
from fedbandit_env.bench.cli.args import (
    AGENT_HELP,
    AGENT_ID,
    DEFAULT_STORE,
    ID_LIST,
    JSON_OBJECT,
    POSITIVE,
    PRIVACY_HELP,
    REFERENCE_FILE,
    SUITE,
    TRIALS,
    Refuted,
    arg_type,
    backend_option,
    check_backend_options,
    command,
    note,
    report_failures,
)
from fedbandit_env.bench.executors import EXECUTORS, require_executor, run_suite
from fedbandit_env.bench.leaderboard import build, current_rows, to_latex, to_markdown
from fedbandit_env.bench.reference import REFERENCE_PATH
from fedbandit_env.bench.robust_metrics import robust_markdown
from fedbandit_env.bench.store import ResultsStore
from fedbandit_env.bench.suites import SUITES, AttackSweep, Cell, Suite, get_suite
from fedbandit_env.errors import FedBanditError


def board_markdown(entries: list, suite: Suite | None, verbose: bool) -> str:
    """The Markdown leaderboard; for a suite of attack sweeps (``robust``) only the matrix of
    each graph (regret under attack / clean), the per-attack tables with ``verbose``."""
    if suite is None or verbose or not any(isinstance(sw, AttackSweep) for sw in suite.sweeps):
        return to_markdown(entries)
    matrices = robust_markdown(entries)
    if not matrices:
        return to_markdown(entries)
    return matrices + "\n(one table per environment and attack: --verbose)"


def cmd_rank(args) -> None:
    """``fedbandit rank ID``: the learner's cells of a suite into a store, ranked against the
    shipped reference in the tables where it ran (docs/bench.md, "Ranking a new learner")."""
    from fedbandit_env.bench.rank import learner_cells, rank_rows, resolve_learner

    if args.html:
        from fedbandit_env.bench.plotting import pyplot

        pyplot("rank --html")  # a missing matplotlib is an error before anything runs
    require_executor(args.executor)
    check_backend_options(args)
    suite = get_suite(args.suite)
    agent_id = resolve_learner(args.agent, args.backend)
    cells = learner_cells(suite, agent_id, dict(args.agent_kwargs), dict(args.privacy),
                          note=note, backend=args.backend)  # fmt: skip
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
    ranking = rank_rows(store, cells, args.reference, note)
    if not ranking.rows:
        raise FedBanditError(f"rank: no rows of {agent_id} in {args.store}")
    entries = build(ranking.rows, suite.baseline_for)
    highlight = {c.name for c in cells}
    mark_entries(entries, ranking.rows[: ranking.mine], highlight)
    print(to_markdown(entries))
    note(f"rank: {ranking.mine} row(s) of {agent_id} from {args.store}, {ranking.reference} "
          f"reference row(s) from {ranking.reference_path} (fedbandit "
          f"{ranking.reference_version})")  # fmt: skip
    if args.html:
        sources = (("store", args.store, ranking.mine),
                   ("reference", f"{ranking.reference_path} (fedbandit "
                    f"{ranking.reference_version})", ranking.reference))  # fmt: skip
        _write_page(entries, ranking.rows, args, f"fedbandit rank {agent_id} ({suite.name})",
                    suite.name, sources)  # fmt: skip
    report_failures(failures)


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
    rows = current_rows(rows, note, include_unregistered=args.include_unregistered)
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

        attach_audits(entries, leaderboard_audits(rows, trials=args.audit_trials, note=note))
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
        note(f"leaderboard: {len(extra)} row(s) of {labels} on suite {suite.name}'s "
              "environments: learner not registered here; "
              + ("ranked by their stored id (--include-unregistered)" if include
                 else "left out (--include-unregistered ranks them)"))  # fmt: skip
    if other > 0:
        note(f"leaderboard: {other} row(s) of the store are not cells of suite {suite.name}: "
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
    merged = merge_rows(rows, current_reference_rows(ref_rows, note))
    return merged, reference.path, reference.package_version


def _html_dir(text: str) -> str:
    if Path(text).exists() and not Path(text).is_dir():
        raise ValueError(f"expected a folder for the HTML page, {text!r} is a file")
    return text


def _page_options(cmd: argparse.ArgumentParser) -> None:
    """The options of an HTML page (leaderboard and rank)."""
    cmd.add_argument(
        "--html",
        type=arg_type("folder", _html_dir),
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


def add(sub) -> None:
    """The parsers of ``rank`` and ``leaderboard``."""
    rank = command(
        sub,
        "rank",
        "run a learner's cells of a suite into a store and rank it against the shipped "
        "reference results, in the tables where it ran",
    )
    rank.add_argument("agent", type=AGENT_ID, help=AGENT_HELP)
    rank.add_argument(
        "--suite",
        type=SUITE,
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
    backend_option(rank)
    rank.add_argument(
        "--reference",
        type=REFERENCE_FILE,
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
    board = command(sub, "leaderboard", "render the leaderboard from the store (read-only)")
    board.add_argument("--store", default=DEFAULT_STORE, help="results store (SQLite file)")
    board.add_argument(
        "--suite",
        type=SUITE,
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
        type=REFERENCE_FILE,
        default=None,
        metavar="PATH",
        help="also rank the reference results shipped with fedbandit (or those of PATH) "
        "without re-running them; your rows of the same cells take precedence (default: "
        "off; without PATH: the shipped file)",
    )
