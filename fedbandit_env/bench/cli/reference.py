"""``fedbandit reference build | check``: the reference results shipped with fedbandit
(docs/bench.md, "Reference results").

fedbandit reference build [--out PATH] [--executor joblib] [--jobs 2] [--store PATH] [--quiet]
fedbandit reference check [--reference PATH] [--sample K] [--seeds N] [--seed S] [--suite NAME]
"""

from __future__ import annotations

from fedbandit_env.bench.cli.args import (
    NON_NEGATIVE,
    POSITIVE,
    REFERENCE_FILE,
    SUITE,
    HelpFormatter,
    command,
    debug_option,
    note,
)
from fedbandit_env.bench.executors import EXECUTORS, require_executor
from fedbandit_env.bench.reference import REFERENCE_PATH
from fedbandit_env.errors import FedBanditError


def cmd_reference(args) -> None:
    from fedbandit_env.bench.reference import build_reference, check_reference, load_reference

    if args.action == "build":
        require_executor(args.executor)
        report = build_reference(
            args.out,
            args.executor,
            args.jobs,
            store=args.store,
            note=(lambda _msg: None) if args.quiet else note,
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
        note=(lambda _msg: None) if args.quiet else note,
    )
    for name in report.skipped:
        note(f"reference check: skipped {name}")
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


def add(sub) -> None:
    """The parser of ``reference`` and its actions ``build`` and ``check``."""
    ref = command(sub, "reference", "build or check the reference results shipped with fedbandit")
    ref_sub = ref.add_subparsers(dest="action", required=True, metavar="ACTION")
    ref_build = ref_sub.add_parser(
        "build",
        help="run every reference cell and write the reference file",
        description="run the standard suite and each paper suite's headline cells on fixed "
        "seeds and write the reference file (deterministic: same code, same bytes)",
        formatter_class=HelpFormatter,
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
        formatter_class=HelpFormatter,
    )
    ref_check.add_argument(
        "--reference",
        type=REFERENCE_FILE,
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
        type=SUITE,
        default=None,
        help="only cells of this suite (default: every suite in the file)",
    )
    ref_check.add_argument("--quiet", action="store_true", help="no progress notes")
    for action in (ref_build, ref_check):
        debug_option(action)
