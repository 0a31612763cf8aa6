"""Paper timing against latency timing: decision or sync rounds and messages per run of the
reference agents next to the numbers of their specs (docs/architecture.md, "Communication
steps").

``timing="paper"`` (the default) runs a paper's "communicate, then pull" rounds as
communication-only steps; ``timing="latency"`` sends with the pulls and uses the replies one
step later. Prints, does not assert. Runs all agents converted so far:

* ``dp_mw_ucb`` (dp-recsys.md §3.4, §6.5): M = 20, K = 10, means 0.9..0.0 (Bernoulli),
  T = 10^4, decision rounds per run (the spec's prototype: about 2.4k / 2.7k / 2.8k / 3.3k for
  eps = 1.5 / 2 / 5 / inf) and messages (M uploads + M broadcasts per decision round), and the
  network regret R(T) (prototype: 54,045 / 46,805 / 26,373 / 6,976).

    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 python benchmarks/bench_timing.py [--runs 10]
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from agents import DPMasterWorkerUCB
from fedbandit_env.bench import evaluate
from fedbandit_env.network.ledger import AGENT_SERVER

DP_MW_SPEC = {1.5: (2425, 54045), 2.0: (2698, 46805), 5.0: (2836, 26373), math.inf: (3340, 6976)}


def dp_mw_ucb(runs: int, horizon: int) -> None:
    print(f"dp_mw_ucb: M=20, K=10, means 0.9..0.0 Bernoulli, T={horizon}, {runs} runs")
    print("| eps | timing | decision rounds | spec | messages | R(T) | spec R(T) | engine steps | s |")
    print("|---|---|---|---|---|---|---|---|---|")
    for eps, (spec_rounds, spec_regret) in DP_MW_SPEC.items():
        for timing in ("paper", "latency"):
            policy = DPMasterWorkerUCB(epsilon=eps, timing=timing)
            start = time.perf_counter()
            res = evaluate(
                "FedBandit/Homogeneous-v0",
                policy,
                runs=runs,
                seed=0,
                env_kwargs={
                    "num_agents": 20,
                    "means": np.linspace(0.9, 0.0, 10),
                    "horizon": horizon,
                    "reward": "bernoulli",
                },
                checkpoints=np.array([horizon]),
            )
            wall = time.perf_counter() - start
            rounds = res.messages[:, AGENT_SERVER].mean() / 40  # 20 uploads + 20 broadcasts
            messages = res.messages.sum(axis=1).mean()
            steps = horizon + (rounds if timing == "paper" else 0)
            regret = res.regret_network[:, -1]
            se = regret.std(ddof=1) / math.sqrt(runs)
            print(
                f"| {eps:g} | {timing} | {rounds:,.0f} | {spec_rounds:,} | {messages:,.0f} | "
                f"{regret.mean():,.0f} ± {se:,.0f} | {spec_regret:,} | {steps:,.0f} | {wall:.1f} |"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--horizon", type=int, default=10_000)
    args = parser.parse_args()
    dp_mw_ucb(args.runs, args.horizon)


if __name__ == "__main__":
    main()
