"""Concurrent writers on one results store: K trials of P `fedbandit suite` processes racing.

    python benchmarks/bench_store_concurrency.py [--trials 10] [--processes 3] [--runs 6]

docs/reliability.md, "Concurrent writers". Each trial starts P processes of the real CLI
(`fedbandit suite race --store S`, a small suite of three learners registered by the launcher)
together on a fresh store S, with a reader polling the store meanwhile, and compares S with a
clean single-process run: same (cell, seed) keys, same numbers (all but wall time and creation
time), no duplicates. Prints trials run, rows compared, mismatches, failures (a process that
did not exit 0, or a reader error), and the units each trial computed against the minimum (how
much work the claims saved).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import record

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fedbandit_env.bench.executors import run_suite  # noqa: E402
from fedbandit_env.bench.store import ResultsStore  # noqa: E402
from fedbandit_env.bench.suites import Cell, Suite  # noqa: E402

ENV = "FedBandit/Heterogeneous-v0"
KW = {"num_agents": 4, "num_arms": 4, "topology": "ring"}
AGENTS = ("ucb1", "ucb1_shared", "epsilon_greedy")
LAUNCH = f"""
import sys
from fedbandit_env.bench import executors, suites
from fedbandit_env.bench.suites import Cell, Suite
horizon, runs = int(sys.argv[1]), int(sys.argv[2])
suites.SUITES["race"] = Suite(
    "race", tuple(Cell({ENV!r}, a, horizon, runs, {KW!r}) for a in {AGENTS!r})
)
run_unit = executors.run_unit
def counted(unit):
    print("unit", file=sys.stderr, flush=True)
    return run_unit(unit)
executors.run_unit = counted
from fedbandit_env.bench.cli import main
main(sys.argv[3:])
"""


def race_suite(horizon: int, runs: int) -> Suite:
    return Suite("race", tuple(Cell(ENV, a, horizon, runs, KW) for a in AGENTS))


def table(path: Path) -> list[tuple]:
    store = ResultsStore(path, create=False)
    rows = [r.numbers for r in store.rows()]
    store.close()
    return rows


def trial(folder: Path, processes: int, horizon: int, runs: int, chunk: int):
    path = folder / "shared.sqlite"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    argv = [str(horizon), str(runs), "suite", "race", "--store", str(path), "--chunk", str(chunk)]
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", LAUNCH, *argv, "--quiet"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(processes)
    ]
    reader_errors: list[str] = []

    def reader():
        while any(p.poll() is None for p in procs):
            if path.exists():
                try:
                    table(path)
                except Exception as err:
                    reader_errors.append(repr(err))
            time.sleep(0.01)

    thread = threading.Thread(target=reader)
    thread.start()
    outputs = [p.communicate(timeout=600) for p in procs]
    thread.join()
    failed = [
        err.strip().splitlines()[-1:]
        for p, (_, err) in zip(procs, outputs, strict=True)
        if p.returncode
    ]
    units = sum(err.count("unit\n") for _, err in outputs)
    return table(path), failed + reader_errors, units


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--processes", type=int, default=3)
    parser.add_argument("--runs", type=int, default=6, help="seeds per cell")
    parser.add_argument("--horizon", type=int, default=300)
    parser.add_argument("--chunk", type=int, default=2, help="seeds per work unit")
    record.add_json_option(parser)
    args = parser.parse_args()
    record.start(__file__, args)
    with tempfile.TemporaryDirectory() as tmp:
        run(args, Path(tmp))


def run(args: argparse.Namespace, tmp: Path) -> None:
    clean_path = tmp / "clean.sqlite"
    clean_store = ResultsStore(clean_path)
    run_suite(race_suite(args.horizon, args.runs), clean_store, quiet=True, chunk=args.chunk)
    clean_store.close()
    clean = table(clean_path)
    min_units = len(AGENTS) * -(-args.runs // args.chunk)
    compared = mismatches = failures = units = 0
    for k in range(args.trials):
        folder = tmp / f"trial{k}"
        folder.mkdir()
        rows, failed, trial_units = trial(
            folder, args.processes, args.horizon, args.runs, args.chunk
        )
        compared += len(clean)
        mismatches += len(set(clean) ^ set(rows)) + (len(rows) - len(set(rows)))
        failures += len(failed)
        units += trial_units
        for line in failed:
            print(f"trial {k}: failure: {line}", flush=True)
    for name, value in (
        ("processes per trial", args.processes),
        ("rows per store", len(clean)),
        ("trials", args.trials),
        ("rows compared", compared),
        ("mismatches", mismatches),
        ("failures", failures),
        ("units computed", units),
        ("units needed per trial", min_units),
    ):
        record.figure(name, value)
    print(f"{args.processes} processes per trial, {len(clean)} rows per store")
    print(f"trials run: {args.trials}")
    print(f"rows compared: {compared}")
    print(f"mismatches: {mismatches}")
    print(f"failures: {failures}")
    print(f"units computed: {units} ({units / args.trials:.1f} per trial; {min_units} needed)")


if __name__ == "__main__":
    main()
