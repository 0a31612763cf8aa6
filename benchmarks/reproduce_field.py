"""Field coverage: the sanity experiments of the field agents (shared/specs/field-coverage.md).

    python benchmarks/reproduce_field.py                       # CI scale (each module < 1 min)
    python benchmarks/reproduce_field.py --full                # the spec's scale
    python benchmarks/reproduce_field.py --claims out.json     # also write the claims file
    fedbandit reproduce field [--full] [--claims FILE]         # the same through the CLI

Imports every module ``benchmarks/field/sanity_*.py`` (one per field agent, each exposing
``run(full: bool = False) -> list[Claim]``), runs them in name order, and prints one "claim |
ours" Markdown table (claims the spec took from memory are marked unverified; every verdict is
computed by a check function of fedbandit_env.bench.claims from the measured numbers).
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # benchmarks.field.* and the checkout's packages

from fedbandit_env.bench.claims import to_markdown, write_claims  # noqa: E402

# ---------------------------------------------------------------- parameters (one block)
parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--full", action="store_true", help="the spec's scale instead of CI scale")
parser.add_argument("--claims", type=Path, default=None, help="write the claims file (JSON)")
parser.add_argument(
    "--only", default=None, help="comma-separated module names (e.g. sanity_fed1_ucb)"
)
args = parser.parse_args()
SCALE = "full" if args.full else "CI"

# ---------------------------------------------------------------- the sanity modules
names = sorted(p.stem for p in (ROOT / "benchmarks" / "field").glob("sanity_*.py"))
if args.only:
    wanted = set(args.only.split(","))
    unknown = wanted - set(names)
    if unknown:
        parser.error(f"--only: unknown module(s) {sorted(unknown)}; found {names}")
    names = [n for n in names if n in wanted]

claims = []
start = time.perf_counter()
for name in names:
    module = importlib.import_module(f"benchmarks.field.{name}")
    t0 = time.perf_counter()
    rows = module.run(full=args.full)
    print(f"{name}: {len(rows)} claims in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    claims.extend(rows)
wall = time.perf_counter() - start

# ---------------------------------------------------------------- the table and the file
print(f"# Field coverage sanity experiments ({SCALE} scale, {len(names)} modules)\n")
print(to_markdown(claims))
if args.claims is not None:
    command = "fedbandit reproduce field" + (" --full" if args.full else "")
    write_claims(
        args.claims,
        claims,
        {
            "title": "Field coverage sanity experiments",
            "scale_name": SCALE,
            "command": command,
            "wall_time_s": wall,
            "modules": names,
        },
    )
    print(f"\nclaims: {args.claims}", file=sys.stderr)
