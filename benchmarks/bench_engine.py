"""Engine throughput: vector view vs the PettingZoo dict loop, and scaling in N on a ring.

Prints figures; does not assert (the machines are shared and noisy). Ratios are measured side by
side in one run. Run on one core:

    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 python benchmarks/bench_engine.py

Targets (issue "Foundation"): vector view >= 2e6 agent-steps/s at B=100, N=10, M=10 with the
neighbors channel, >= 20x the dict loop, and per-agent-step cost flat from N=10 to N=1000 on a ring.
"""

from __future__ import annotations

import argparse
import time

import fedbandit_env
from baselines.trivial import UniformRandom
from fedbandit_env.policy import ParallelPolicyAdapter

ENV = "FedBandit/Homogeneous-v0"


def vector_rate(num_runs: int, num_agents: int, steps: int, topology: str = "complete") -> float:
    venv = fedbandit_env.make_vec(
        ENV,
        num_runs=num_runs,
        num_agents=num_agents,
        num_arms=10,
        horizon=steps,
        topology=topology,
        channels=("neighbors",),
    )
    policy = UniformRandom()
    obs, _ = venv.reset(seed=0)
    policy.reset(venv.facts, venv.agent_rng())
    start = time.perf_counter()
    for _ in range(steps):
        action = policy.act(obs)
        obs, *_ = venv.step(action.arms, action.messages)
    return num_runs * num_agents * steps / (time.perf_counter() - start)


def dict_rate(num_agents: int, steps: int) -> float:
    env = fedbandit_env.make(
        ENV, num_agents=num_agents, num_arms=10, horizon=steps, channels=("neighbors",)
    )
    adapter = ParallelPolicyAdapter(UniformRandom(), env)
    obs, _ = env.reset(seed=0)
    adapter.reset(0)
    start = time.perf_counter()
    while env.agents:
        obs, *_ = env.step(adapter(obs))
    return num_agents * steps / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2000, help="vector-view steps")
    args = parser.parse_args()
    vec = vector_rate(100, 10, args.steps)
    dic = dict_rate(10, max(200, args.steps // 4))
    print("| view | B | N | M | agent-steps/s |")
    print("|---|---|---|---|---|")
    print(f"| vector (uniform, neighbors) | 100 | 10 | 10 | {vec:,.0f} |")
    print(f"| ParallelEnv dict loop | 1 | 10 | 10 | {dic:,.0f} |")
    print(f"\nvector / dict = {vec / dic:.1f}x   (target >= 20x; vector target >= 2e6/s)\n")
    print("| ring N | B | microseconds per step | microseconds per agent-step |")
    print("|---|---|---|---|")
    per_step = {}
    for n in (10, 100, 1000):
        rate = vector_rate(10, n, max(200, args.steps // 4), topology="ring")
        per_step[n] = 10 * n / rate * 1e6
        print(f"| {n} | 10 | {per_step[n]:.1f} | {per_step[n] / (10 * n):.4f} |")
    growth = per_step[1000] / per_step[100]
    print(f"\nstep cost N=1000 / N=100 = {growth:.1f} (linear in N: <= 10; N x N work: ~100)")


if __name__ == "__main__":
    main()
