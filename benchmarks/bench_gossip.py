"""Throughput of GossipUCB and GossipFedUCB in the vector view (environment included).

    OMP_NUM_THREADS=1 python benchmarks/bench_gossip.py [--steps 2000]

Prints agent-steps/s at (B=100, N=10, M=10) on the path P10 (docs/gossip.md, speed) and at the
Fig. 2(a) setting (B=100, N=3, M=5, K3), plus the extrapolated wall time of one Fig. 2(a) curve
(100 runs x 10^6 rounds) on one core.
"""

from __future__ import annotations

import argparse
import time

import record

import fedbandit_env
from agents.gossip_ucb import GossipFedUCB, GossipUCB


def rate(policy, env_id: str, runs: int, steps: int) -> float:
    venv = fedbandit_env.make_vec(env_id, num_runs=runs)
    obs, _ = venv.reset(seed=0)
    policy.reset(venv.facts, venv.agent_rng())
    start = time.perf_counter()
    for _ in range(steps):
        action = policy.act(obs)
        obs, *_ = venv.step(action.arms, action.messages, action.pull)
    return runs * venv.num_agents * steps / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2000)
    record.add_json_option(parser)
    args = parser.parse_args()
    record.start(__file__, args)
    print("| agent | setting | agent-steps/s | one Fig. 2 curve (100 runs x 1e6), 1 core |")
    print("|---|---|---|---|")
    for name, make in (
        ("gossip_ucb", GossipUCB),
        ("gossip_fed_ucb eps=1", lambda: GossipFedUCB(1.0)),
    ):
        for env_id, n in (("FedBandit/GossipPath10-v0", 10), ("FedBandit/GossipTriangle-v0", 3)):
            r = rate(make(), env_id, 100, args.steps)
            minutes = 100 * n * 1e6 / r / 60
            print(f"| {name} | {env_id} B=100 | {r:,.0f} | {minutes:.1f} min |")


if __name__ == "__main__":
    main()
