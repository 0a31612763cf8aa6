"""Field coverage: the sanity experiments of the field agents (docs/field.md).

    fedbandit reproduce field                       # CI scale (each module < 1 min)
    fedbandit reproduce field --full                # the agents' papers' scale
    fedbandit reproduce field --claims out.json     # also write the claims file
    python -m fedbandit_env.reproductions.field ... # the same

Runs every module ``fedbandit_env/reproductions/field_sanity/sanity_*.py`` (one per field agent,
each exposing ``run(full: bool = False) -> list[Claim]``) as one work unit each through the bench
executors (``--executor``), and prints one "claim | ours" Markdown table in module-name order
(claims taken from memory rather than read in a paper or code are marked unverified; every
verdict is computed by a check function of fedbandit_env.bench.claims from the measured numbers).
"""

from __future__ import annotations

import importlib
import sys
import time
from pathlib import Path

from fedbandit_env.bench.claims import to_markdown
from fedbandit_env.reproductions import harness

SANITY = "fedbandit_env.reproductions.field_sanity"


def run_module(task: tuple[str, bool]) -> tuple[list, float]:
    """One sanity module's claims and its wall time."""
    name, full = task
    t0 = time.perf_counter()
    rows = importlib.import_module(f"{SANITY}.{name}").run(full=full)
    return rows, time.perf_counter() - t0


# ---------------------------------------------------------------- parameters (one block)
parser = harness.parser("field", __doc__)
parser.add_argument(
    "--only", default=None, help="comma-separated module names (e.g. sanity_fed1_ucb)"
)

if __name__ == "__main__":
    args = parser.parse_args()
    SCALE = "full" if args.full else "CI"

    # ------------------------------------------------------------ the sanity modules
    names = sorted(p.stem for p in (Path(__file__).parent / "field_sanity").glob("sanity_*.py"))
    if args.only:
        wanted = set(args.only.split(","))
        unknown = wanted - set(names)
        if unknown:
            parser.error(f"--only: unknown module(s) {sorted(unknown)}; found {names}")
        names = [n for n in names if n in wanted]

    by_module: list[list] = [[] for _ in names]
    start = time.perf_counter()
    units = [(name, args.full) for name in names]
    for i, (rows, seconds) in harness.fan_out(run_module, units, args.executor, args.jobs):
        print(f"{names[i]}: {len(rows)} claims in {seconds:.1f} s", file=sys.stderr)
        by_module[i] = rows
    claims = [row for rows in by_module for row in rows]
    wall = time.perf_counter() - start

    # ------------------------------------------------------------ the table and the file
    print(f"# Field coverage sanity experiments ({SCALE} scale, {len(names)} modules)\n")
    print(to_markdown(claims))
    harness.write_claims(
        args,
        claims,
        {
            "title": "Field coverage sanity experiments",
            "scale_name": SCALE,
            "command": "fedbandit reproduce field" + (" --full" if args.full else ""),
            "wall_time_s": wall,
            "modules": names,
        },
    )
