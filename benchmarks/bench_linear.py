"""Throughput of FedLinUCB and the cost of one sync (docs/linear.md, "Reproduction and speed").

    OMP_NUM_THREADS=1 python benchmarks/bench_linear.py [--steps 300]

Agent-steps/s of FedLinUCB at (B=20, M=100, d=10, K=10), environment included, with the Theorem-1
threshold (rare syncs) and with D = 0 (a sync every trial); the difference per step is the cost
of one sync (releases through the Gram-tree privatizer, upload, sum, and the new W).
"""

from __future__ import annotations

import argparse
import time

import record

import fedbandit_env
from agents.fed_lin_ucb import FedLinUCB

ENV = "FedBandit/LinearPaper-v0"


def seconds_per_step(policy: FedLinUCB, runs: int, steps: int) -> float:
    preview = fedbandit_env.make_vec(ENV, num_runs=1)
    venv = fedbandit_env.make_vec(
        ENV, num_runs=runs, horizon=10_000_000, channels=policy.channel_spec(preview.config)
    )
    obs, _ = venv.reset(seed=0)
    policy.reset(venv.facts, venv.agent_rng())
    start = time.perf_counter()
    for _ in range(steps):
        action = policy.act(obs)
        obs, *_ = venv.step(action.arms, action.messages, action.pull)
    return (time.perf_counter() - start) / steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300)
    record.add_json_option(parser)
    args = parser.parse_args()
    record.start(__file__, args)
    runs, agents = 20, 100
    rare = seconds_per_step(FedLinUCB(epsilon=1.0), runs, args.steps)
    every = seconds_per_step(FedLinUCB(epsilon=1.0, sync_threshold=0.0), runs, args.steps)
    print("| FedLinUCB, B=20, M=100, d=10, K=10 | ms per step | agent-steps/s |")
    print("|---|---|---|")
    print(f"| Theorem-1 D (rare syncs) | {rare * 1e3:.1f} | {runs * agents / rare:,.0f} |")
    print(f"| D = 0 (a sync every trial) | {every * 1e3:.1f} | {runs * agents / every:,.0f} |")
    record.figure("cost of one sync ms", (every - rare) * 1e3)
    print(
        f"\ncost of one sync (20 runs x 100 agents): {(every - rare) * 1e3:.1f} ms "
        f"= {(every - rare) / runs * 1e3:.2f} ms per run"
    )


if __name__ == "__main__":
    main()
