"""Engine throughput: vector view vs the PettingZoo dict loop, and scaling in N on a ring.

Prints figures; does not assert (the machines are shared and noisy). Ratios are measured side by
side in one run. Run on one core:

    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 python benchmarks/bench_engine.py

Targets (issue "Foundation"): vector view >= 2e6 agent-steps/s at B=100, N=10, M=10 with the
neighbors channel, >= 20x the dict loop, and per-agent-step cost flat from N=10 to N=1000 on a ring.
The ring rows run two agents: ``uniform`` sends nothing (engine and reward cost only) and
``flooding`` sends its M pull counts to both neighbours every step (channel cost included). The
last table is the ``flood`` channel alone on a ring with its default ttl (the diameter, N/2),
after ttl warm-up steps so that every hop is in flight.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import fedbandit_env
from baselines.trivial import Flooding, UniformRandom
from fedbandit_env.policy import ParallelPolicyAdapter

ENV = "FedBandit/Homogeneous-v0"


def vector_rate(
    num_runs: int, num_agents: int, steps: int, topology: str = "complete", policy=UniformRandom
) -> float:
    venv = fedbandit_env.make_vec(
        ENV,
        num_runs=num_runs,
        num_agents=num_agents,
        num_arms=10,
        horizon=steps,
        topology=topology,
        channels=("neighbors",),
    )
    policy = policy()
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


def flood_step_cost(num_agents: int, send_prob: float, steps: int) -> tuple[int, float, float]:
    """(ttl, milliseconds per step, deliveries per step) of the flood channel on a ring, B = 1,
    each agent sending with probability ``send_prob`` per step, measured after ttl steps."""
    venv = fedbandit_env.make_vec(
        ENV,
        num_runs=1,
        num_agents=num_agents,
        num_arms=10,
        horizon=10**6,
        topology="ring",
        channels={"f": {"kind": "flood", "dim": 10}},
    )
    ttl = venv.channels["f"].ttl
    venv.reset(seed=0)
    rng = np.random.default_rng(0)
    arms = np.zeros((1, num_agents), dtype=np.int64)
    payload = np.ones((1, num_agents, 10))
    sends = rng.random((ttl + steps, 1, num_agents)) < send_prob
    for t in range(ttl):
        venv.step(arms, {"f": (sends[t], payload)})
    rows = 0
    start = time.perf_counter()
    for t in range(ttl, ttl + steps):
        obs, *_ = venv.step(arms, {"f": (sends[t], payload)})
        rows += len(obs.deliveries["f"].run)
    return ttl, (time.perf_counter() - start) / steps * 1e3, rows / steps


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
    print("| agent | ring N | B | microseconds per step | microseconds per agent-step |")
    print("|---|---|---|---|---|")
    per_step = {}
    for policy in (UniformRandom, Flooding):
        for n in (10, 100, 1000):
            rate = vector_rate(10, n, max(200, args.steps // 4), topology="ring", policy=policy)
            per_step[policy, n] = 10 * n / rate * 1e6
            us = per_step[policy, n]
            print(f"| {policy.agent_id} | {n} | 10 | {us:.1f} | {us / (10 * n):.4f} |")
    print()
    for policy in (UniformRandom, Flooding):
        growth = per_step[policy, 1000] / per_step[policy, 100]
        print(
            f"{policy.agent_id}: step cost N=1000 / N=100 = {growth:.1f} "
            "(linear in N: <= 10; N x N work: ~100)"
        )
    print("\n| flood channel, ring N | ttl | senders per step | ms per step | deliveries per step |")
    print("|---|---|---|---|---|")
    for n, p in ((100, 1.0), (1000, 0.01), (1000, 0.1)):
        ttl, ms, rows = flood_step_cost(n, p, max(20, args.steps // 100))
        print(f"| {n} | {ttl} | {p * n:g} | {ms:.2f} | {rows:,.0f} |")


if __name__ == "__main__":
    main()
