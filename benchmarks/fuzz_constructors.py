"""Fuzz every public constructor and print the outcomes by class (docs/limits.md, "Errors").

    python benchmarks/fuzz_constructors.py [--examples N] [--show K]

Runs N derandomized hypothesis examples per target (``tests/fuzz_harness.py``: ``make`` of every
registered id, ``make_vec``, ``make_agent`` of every learner, channel and privacy-wrapper configs,
the RL views) and prints, per target and in total, how many built (``ok``) and how many were
refused with a ``ValueError`` or ``TypeError`` naming an argument; ``other`` counts any other
outcome (another exception class, a message naming no argument, a hang) and is listed.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

import record

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.fuzz_harness import fuzz, targets  # noqa: E402

CLASSES = ("ok", "ValueError", "TypeError", "other")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=100, help="examples per target")
    parser.add_argument("--show", type=int, default=20, help="'other' outcomes to list")
    parser.add_argument("--only", default="", help="substring of the targets to run")
    record.add_json_option(parser)
    args = parser.parse_args()
    record.start(__file__, args)
    total: Counter[str] = Counter()
    others: list[str] = []
    start = time.perf_counter()
    names = [n for n in targets() if args.only in n]
    print(f"{'target':<48}" + "".join(f"{c:>11}" for c in CLASSES))
    for name in names:
        counts: Counter[str] = Counter()

        def tally(target, kwargs, outcome, detail, counts=counts):
            counts[outcome] += 1
            if outcome == "other":
                others.append(f"{target} {kwargs!r}: {detail[:300]}")

        fuzz(name, args.examples, tally)
        total.update(counts)
        record.row("outcomes", {"target": name, **{c: counts[c] for c in CLASSES}})
        print(f"{name:<48}" + "".join(f"{counts[c]:>11}" for c in CLASSES), flush=True)
    print(f"{'total':<48}" + "".join(f"{total[c]:>11}" for c in CLASSES))
    print(
        f"{sum(total.values())} examples over {len(names)} targets in "
        f"{time.perf_counter() - start:.1f} s"
    )
    for line in others[: args.show]:
        print("OTHER", line)
    return 1 if total["other"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
