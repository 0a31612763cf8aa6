"""Does every learner of a suite learn within it? Per cell: final regret, its spread over the
seeds, how much the regret curve bends, and the wall time.

    OMP_NUM_THREADS=1 python benchmarks/bench_quick_suite.py [--suite quick] [--agents a b ...]

``bend`` is the regret added in the second half of the horizon divided by the regret of the first
half (seed means of the per-agent regret): 1 for a learner whose regret grows linearly (it does
not learn within the horizon), near 0 for one whose curve has flattened. ``spread`` is the
standard deviation of the final regret over the seeds (0 when every seed gives the same number).
The last line prints the serial wall time of all cells and the agent-steps per second of each
family (the constants of ``fedbandit suites``' time estimate, docs/bench.md).
"""

from __future__ import annotations

import argparse

import numpy as np
import record

from fedbandit_env.bench import evaluate
from fedbandit_env.bench.suites import cell_agent_steps, env_family, get_suite


def bend(steps: np.ndarray, regret: np.ndarray) -> float:
    """Second-half regret over first-half regret of the seed-mean curve (1: linear)."""
    mean = regret.mean(axis=0)
    half = float(np.interp(steps[-1] / 2, steps, mean))
    return float((mean[-1] - half) / half) if half > 0 else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", default="quick")
    parser.add_argument("--agents", nargs="*", default=None, help="only these learner ids")
    record.add_json_option(parser)
    args = parser.parse_args()
    record.start(__file__, args)
    cells = get_suite(args.suite).available(lambda _m: None)
    if args.agents:
        cells = [c for c in cells if c.agent_id in args.agents]
    print("| environment | learner | T | final regret | spread | bend | wall s |")
    print("|---|---|---|---|---|---|---|")
    steps_by_family: dict[str, float] = {}
    time_by_family: dict[str, float] = {}
    total = 0.0
    for cell in cells:
        res = evaluate(
            cell.env_id,
            cell.agent_id,
            runs=cell.runs,
            seed=cell.seed,
            env_kwargs={**cell.env_kwargs, "horizon": cell.horizon},
            agent_kwargs=cell.agent_kwargs,
        )
        final = res.regret_per_agent[:, -1]
        family = "linear" if env_family(cell.env_id, cell.env_kwargs) == "linear" else "multi-armed"
        steps_by_family[family] = steps_by_family.get(family, 0.0) + cell_agent_steps(cell)
        time_by_family[family] = time_by_family.get(family, 0.0) + res.wall_time
        total += res.wall_time
        print(
            f"| {cell.env_id.split('/')[1]} | {cell.name} | {cell.horizon} | {final.mean():.1f} "
            f"| {final.std():.1f} | {bend(res.steps, res.regret_per_agent):.2f} "
            f"| {res.wall_time:.2f} |",
            flush=True,
        )
    rates = ", ".join(
        f"{family} {steps_by_family[family] / time_by_family[family] / 1e6:.2f} M"
        for family in sorted(steps_by_family)
    )
    print(f"\n{len(cells)} cells, {total:.1f} s of runs; agent-steps/s: {rates}")
    record.figure("cells", len(cells))
    record.figure("seconds of runs", total)
    for family in sorted(steps_by_family):
        record.figure(f"agent-steps/s {family}", steps_by_family[family] / time_by_family[family])


if __name__ == "__main__":
    main()
