"""Calibrate and check `fedbandit suites`' time estimates: run suites serially, measure each
learner's cost per agent-step (clean and under attack), the cost of building a cell and of
checking a candidate cell, and print the estimate next to the measured time, side by side.

    OMP_NUM_THREADS=1 python benchmarks/bench_suite_estimates.py [--suites quick robust]

For each suite: the seconds `Suite.split()` takes to decide which cells run (each candidate's
learner and environment built and reset), then every available cell run serially into a
temporary store (`run_suite`, the path of `fedbandit suite`). The rows' wall times give the
learner's seconds per agent-step (agent-steps = horizon x runs x agents); the rest of the run's
wall time is the per-cell overhead (building the environment, the store write). The tables
printed are the constants of `fedbandit_env.bench.suites` (`LEARNER_COST_US`,
`ADVERSARY_FACTOR`, `CELL_OVERHEAD_S`, `CHECK_S_PER_CANDIDATE`), and the last table the estimate
those constants give against the measured time, as a ratio (docs/bench.md, "Command line": the
estimate must stay within 2x for quick and robust).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import record

from fedbandit_env.bench.executors import run_suite
from fedbandit_env.bench.store import ResultsStore
from fedbandit_env.bench.suites import (
    ADVERSARY_FACTOR,
    CELL_OVERHEAD_S,
    CHECK_S_PER_CANDIDATE,
    Suite,
    cell_agent_steps,
    estimated_seconds,
    get_suite,
)


def measure(name: str, keep: Path | None = None) -> dict:
    """Split time, run time and the per-learner costs of one suite, run serially (into
    ``keep``, a store that must not hold the suite's rows yet, or a temporary one)."""
    suite = get_suite(name)
    start = time.perf_counter()
    cells, _skipped = suite.split()
    split_s = time.perf_counter() - start
    candidates = len(suite.candidates())
    with tempfile.TemporaryDirectory() as tmp:
        store = ResultsStore(keep if keep is not None else Path(tmp) / "s.sqlite")
        if store.rows_for(cells):
            raise SystemExit(f"bench_suite_estimates: {keep} already holds rows of {name}")
        start = time.perf_counter()
        run_suite(Suite(name, tuple(cells), suite.baseline, suite.description), store,
                  quiet=True)  # fmt: skip
        run_s = time.perf_counter() - start
        rows = store.rows_for(cells)
    by_cell = defaultdict(float)
    for r in rows:
        by_cell[r.cell_hash] += r.wall_time
    learner = defaultdict(lambda: [0.0, 0.0, 0.0, 0.0])  # clean s, clean steps, adv s, adv steps
    for cell in cells:
        attacked = 2 if "adversary" in cell.env_kwargs else 0
        learner[cell.agent_id][attacked] += by_cell[cell.config_hash]
        learner[cell.agent_id][attacked + 1] += cell_agent_steps(cell)
    rows_s = sum(by_cell.values())
    return {
        "suite": name,
        "candidates": candidates,
        "cells": len(cells),
        "split_s": split_s,
        "run_s": run_s,
        "rows_s": rows_s,
        "learner": {k: list(v) for k, v in learner.items()},
        "estimate_s": estimated_seconds(cells, candidates),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suites", nargs="*", default=["quick", "robust"])
    parser.add_argument("--store", type=Path, default=None,
                        help="keep the rows in this (new) store (default: a temporary one)")  # fmt: skip
    record.add_json_option(parser)
    args = parser.parse_args()
    record.start(__file__, args)
    results = [measure(name, args.store) for name in args.suites]
    # per learner: microseconds per agent-step, clean, over every suite measured
    totals = defaultdict(lambda: [0.0, 0.0, 0.0, 0.0])
    for res in results:
        for agent, v in res["learner"].items():
            totals[agent] = [a + b for a, b in zip(totals[agent], v, strict=True)]
    print("Learner cost per agent-step (clean cells; LEARNER_COST_US):\n")
    print("| learner | µs per agent-step | agent-steps measured | µs under attack |")
    print("|---|---|---|---|")
    clean_cost, attack_cost = {}, {}
    for agent in sorted(totals):
        cs, cn, as_, an = totals[agent]
        if cn:
            clean_cost[agent] = 1e6 * cs / cn
        if an:
            attack_cost[agent] = 1e6 * as_ / an
        print(f"| {agent} | {clean_cost.get(agent, float('nan')):.3f} | {cn:.3g} | "
              f"{attack_cost.get(agent, float('nan')):.3f} |")  # fmt: skip
        if agent in clean_cost:
            record.row("learner cost", {"learner": agent, "us_per_agent_step": clean_cost[agent]})
    ratios = [attack_cost[a] / clean_cost[a] for a in attack_cost if a in clean_cost]
    factor = sorted(ratios)[len(ratios) // 2] if ratios else float("nan")
    print(f"\nmedian cost under attack / clean: {factor:.3f} (ADVERSARY_FACTOR)")
    record.figure("adversary factor (median)", factor)
    print("\nSuites, serial (estimate with the constants in fedbandit_env.bench.suites: "
          f"ADVERSARY_FACTOR {ADVERSARY_FACTOR}, CELL_OVERHEAD_S {CELL_OVERHEAD_S}, "
          f"CHECK_S_PER_CANDIDATE {CHECK_S_PER_CANDIDATE}):\n")  # fmt: skip
    print("| suite | candidates | cells | split s | run s | rows s | overhead s per cell | "
          "measured s | estimate s | estimate / measured |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|")
    for res in results:
        measured = res["split_s"] + res["run_s"]
        per_cell = (res["run_s"] - res["rows_s"]) / max(res["cells"], 1)
        per_candidate = res["split_s"] / max(res["candidates"], 1)
        print(f"| {res['suite']} | {res['candidates']} | {res['cells']} | {res['split_s']:.1f} | "
              f"{res['run_s']:.1f} | {res['rows_s']:.1f} | {per_cell:.3f} | {measured:.1f} | "
              f"{res['estimate_s']:.1f} | {res['estimate_s'] / measured:.2f} |")  # fmt: skip
        record.figure(f"{res['suite']} measured s", measured)
        record.figure(f"{res['suite']} estimate s", res["estimate_s"])
        record.figure(f"{res['suite']} check s per candidate", per_candidate)
        record.figure(f"{res['suite']} overhead s per cell", per_cell)
    print("\n" + json.dumps({"LEARNER_COST_US": {k: round(v, 3) for k, v in
                                                 sorted(clean_cost.items())}}))  # fmt: skip


if __name__ == "__main__":
    main()
