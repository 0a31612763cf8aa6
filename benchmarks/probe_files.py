"""Files are data: run every damaged-store and malformed-reference case of
``tests/file_probes.py`` through ``fedbandit leaderboard`` and count the outcomes, then time
loading the shipped reference file with and without validation.

    python benchmarks/probe_files.py            # prints the tables
    python benchmarks/probe_files.py --repeats 20

Outcomes per case: "read" (the reader accepted the file as it is), "refused" (one line on
stderr naming the file, exit status 1 or 2), or a defect: "bug-style" (an "unexpected ..."
error or a traceback), "unnamed" (the error does not name the file), "files created" (a
read-only command left something new beside the store).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import record

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fedbandit_env.bench.cli import main  # noqa: E402
from fedbandit_env.bench.executors import run_suite  # noqa: E402
from fedbandit_env.bench.reference import REFERENCE_PATH, load_reference  # noqa: E402
from fedbandit_env.bench.store import ResultsStore  # noqa: E402
from fedbandit_env.bench.suites import Cell, Suite  # noqa: E402
from tests.file_probes import reference_damage, store_damage  # noqa: E402

ENV = "FedBandit/Heterogeneous-v0"
KW = {"num_agents": 3, "num_arms": 3, "topology": "ring"}
TINY = Suite("tiny", (Cell(ENV, "ucb1", 200, 3, KW), Cell(ENV, "ucb1_shared", 200, 3, KW)))


def outcome(argv: list[str], path: Path, folder: Path) -> str:
    before = sorted(p.name for p in folder.iterdir())
    out, err = io.StringIO(), io.StringIO()
    status = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(argv)
        except SystemExit as exit_:
            status = exit_.code
    text = err.getvalue()
    if sorted(p.name for p in folder.iterdir()) != before:
        return "files created"
    if status == 0:
        return "read"
    if "unexpected" in text or "Traceback" in text:
        return "bug-style"
    if str(path) not in text:
        return "unnamed"
    return "refused"


def main_() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=10, help="timed loads of the reference")
    record.add_json_option(parser)
    args = parser.parse_args()
    record.start(__file__, args)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        valid = folder / "valid.sqlite"
        store = ResultsStore(valid)
        run_suite(TINY, store, quiet=True)
        store.close()
        good = valid.read_bytes()
        valid.unlink()
        results: dict[str, Counter] = {"store": Counter(), "reference": Counter()}
        cases = store_damage(len(good))
        for i, (name, damage) in enumerate(cases.items()):
            case_dir = folder / f"s{i}"
            case_dir.mkdir()
            path = case_dir / "r.sqlite"
            path.write_bytes(good)
            damage(path)
            kind = outcome(["leaderboard", "--store", str(path)], path, case_dir)
            results["store"][kind] += 1
            record.row("cases", {"file": "store", "case": name, "outcome": kind})
            print(f"store     | {name:45s} | {kind}")
        mine = folder / "mine"
        mine.mkdir()
        (mine / "r.sqlite").write_bytes(good)
        for name, content in reference_damage(REFERENCE_PATH.read_text()).items():
            ref = folder / "theirs.json"
            (ref.write_bytes if isinstance(content, bytes) else ref.write_text)(content)
            argv = ["leaderboard", "--store", str(mine / "r.sqlite"), "--reference", str(ref)]
            kind = outcome(argv, ref, mine)
            results["reference"][kind] += 1
            record.row("cases", {"file": "reference", "case": name, "outcome": kind})
            print(f"reference | {name:45s} | {kind}")
    print()
    for what, counts in results.items():
        total = sum(counts.values())
        print(f"{what}: {total} cases: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    text = REFERENCE_PATH.read_text()

    def best(fn) -> float:
        times = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            fn()
            times.append(time.perf_counter() - start)
        return min(times)

    plain = best(lambda: json.loads(text))
    checked = best(lambda: load_reference())
    record.figure("reference bytes", len(text))
    record.figure("json.loads ms", plain * 1e3)
    record.figure("load_reference (validated) ms", checked * 1e3)
    print(
        f"\nshipped reference ({len(text):,} bytes): json.loads {plain * 1e3:.1f} ms, "
        f"load_reference (validated) {checked * 1e3:.1f} ms, best of {args.repeats}"
    )


if __name__ == "__main__":
    main_()
