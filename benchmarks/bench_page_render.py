"""Time to render the leaderboard page (``index.html`` and every figure as PNG, PDF and SVG) for
the quick suite, and optionally the standard suite (docs/bench.md, "Figures").

    python benchmarks/bench_page_render.py [--standard] [--store-dir DIR] [--jobs 2]

Each suite is first run into ``DIR/<suite>.sqlite`` (a temporary folder by default; an existing
store is reused, so a second call only renders). The standard suite takes minutes to run, hence
``--standard``. Rendering is timed once per suite and split into the tables (building the
entries) and the page with its figures.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import record

from fedbandit_env.bench.executors import run_suite
from fedbandit_env.bench.html import RunInfo, write_html
from fedbandit_env.bench.leaderboard import build, current_rows
from fedbandit_env.bench.store import ResultsStore
from fedbandit_env.bench.suites import get_suite


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--standard", action="store_true", help="also the standard suite")
    parser.add_argument("--store-dir", type=Path, default=None, help="where the stores go")
    parser.add_argument("--jobs", type=int, default=2, help="joblib workers for the suite runs")
    record.add_json_option(parser)
    args = parser.parse_args()
    record.start(__file__, args)
    folder = args.store_dir or Path(tempfile.mkdtemp())
    folder.mkdir(parents=True, exist_ok=True)
    print("| suite | cells | runs | build entries s | page + figures s | files |")
    print("|---|---|---|---|---|---|")
    for name in ["quick"] + (["standard"] if args.standard else []):
        suite = get_suite(name)
        store = ResultsStore(folder / f"{name}.sqlite")
        run_suite(suite, store, "joblib", n_jobs=args.jobs, chunk=10, quiet=True)
        cells = suite.available(lambda _m: None)
        start = time.perf_counter()
        rows = current_rows(store.rows_for(cells), lambda _m: None)
        entries = build(rows, suite.baseline_for)
        built = time.perf_counter()
        out = folder / f"{name}-html"
        info = RunInfo(name, tuple(sorted({r.seed for r in rows})), "benchmark")
        write_html(entries, out, f"fedbandit leaderboard ({name})", info=info)
        done = time.perf_counter()
        files = len(list(out.iterdir()))
        print(
            f"| {name} | {len(entries)} | {len(rows)} | {built - start:.2f} | "
            f"{done - built:.1f} | {files} |",
            flush=True,
        )
    print(f"\npages in {folder}")


if __name__ == "__main__":
    main()
