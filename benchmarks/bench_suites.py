"""Wall time of the quick and standard suites under each executor, and the store's overhead.

    python benchmarks/bench_suites.py [--suites quick standard] [--executors serial joblib ray]

Each (suite, executor) pair runs into a fresh SQLite store (2 workers for joblib and Ray). The
store overhead is the time to write one cell's rows (one transaction), measured on the quick
suite's rows.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import record

from fedbandit_env.bench.executors import run_suite
from fedbandit_env.bench.store import ResultsStore
from fedbandit_env.bench.suites import get_suite


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suites", nargs="+", default=["quick", "standard"])
    parser.add_argument("--executors", nargs="+", default=["serial", "joblib", "ray"])
    record.add_json_option(parser)
    args = parser.parse_args()
    record.start(__file__, args)
    tmp = Path(tempfile.mkdtemp())
    print("| suite | cells | executor | wall s |")
    print("|---|---|---|---|")
    for name in args.suites:
        suite = get_suite(name)
        cells = len(suite.available(lambda _m: None))
        for executor in args.executors:
            store = ResultsStore(tmp / f"{name}-{executor}.sqlite")
            start = time.perf_counter()
            run_suite(suite, store, executor, n_jobs=2, chunk=10, quiet=True)
            print(
                f"| {name} | {cells} | {executor} | {time.perf_counter() - start:.1f} |", flush=True
            )
    rows = ResultsStore(tmp / f"{args.suites[0]}-{args.executors[0]}.sqlite").rows()
    by_cell: dict[str, list] = {}
    for r in rows:
        by_cell.setdefault(r.cell_hash, []).append(
            r._asdict() if hasattr(r, "_asdict") else r.__dict__
        )
    store = ResultsStore(tmp / "overhead.sqlite")
    start = time.perf_counter()
    for cell_rows in by_cell.values():
        store.append([dict(row) for row in cell_rows])
    per_cell = (time.perf_counter() - start) / max(1, len(by_cell))
    record.figure("store overhead ms per cell", per_cell * 1e3)
    print(
        f"\nstore overhead: {per_cell * 1e3:.2f} ms per cell "
        f"({len(rows) // max(1, len(by_cell))} rows per cell, one transaction)"
    )


if __name__ == "__main__":
    main()
