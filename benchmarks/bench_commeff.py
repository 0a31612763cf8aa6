"""Speed of the commeff agents: the full Fig. 4 sweep (docs/commeff.md) and agent-steps/s.

M = 50 agents, K = 100 arms, T = 10^4, eps in {0.1, 0.3, 0.5, 1}, 20 seeds per cell (one batch of
20 runs per epsilon through the vector view). Prints the wall time of the sweep and the throughput
in agent-steps per second (runs x agents x steps / wall time). Also times one batch of DDP-MAB on a
ring and HDP-MAB on five ER(20, 0.2) components (M = 100). Run on one core:

    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 python benchmarks/bench_commeff.py
"""

from __future__ import annotations

import argparse
import time

import record

from agents import CDPMAB, DDPMAB, HDPMAB
from fedbandit_env.bench import evaluate

parser = argparse.ArgumentParser()
parser.add_argument("--seeds", type=int, default=20)
parser.add_argument("--horizon", type=int, default=10_000)
record.add_json_option(parser)
args = parser.parse_args()
record.start(__file__, args)

M, K, T, SEEDS = 50, 100, args.horizon, args.seeds
ENV = "FedBandit/Homogeneous-v0"
BASE = dict(num_arms=K, horizon=T, instance_seed=None)
LAST = [T]


def timed(policy, num_agents, **env):
    start = time.perf_counter()
    evaluate(
        ENV,
        policy,
        runs=SEEDS,
        env_kwargs=dict(BASE, num_agents=num_agents, **env),
        checkpoints=LAST,
    )
    return time.perf_counter() - start


start = time.perf_counter()
for eps in (0.1, 0.3, 0.5, 1.0):
    timed(CDPMAB(epsilon=eps), M, c1=25.0)
sweep = time.perf_counter() - start
steps = 4 * SEEDS * M * T
record.row("wall time", {"what": "Fig. 4 sweep", "wall s": sweep, "agent-steps/s": steps / sweep})
print(
    f"Fig. 4 sweep (M={M}, K={K}, T={T}, 4 eps x {SEEDS} seeds): {sweep:.1f} s, "
    f"{steps / sweep:,.0f} agent-steps/s"
)
wall = timed(DDPMAB(), M, topology="ring")
record.row(
    "wall time", {"what": "DDP-MAB ring", "wall s": wall, "agent-steps/s": SEEDS * M * T / wall}
)
print(
    f"DDP-MAB ring (M={M}, {SEEDS} seeds): {wall:.1f} s, {SEEDS * M * T / wall:,.0f} agent-steps/s"
)
hybrid = {"sizes": [20] * 5, "component_graph": "erdos_renyi", "p": 0.2}
wall = timed(HDPMAB(), 100, topology="hybrid", topology_kwargs=hybrid)
record.row(
    "wall time",
    {"what": "HDP-MAB case 4", "wall s": wall, "agent-steps/s": SEEDS * 100 * T / wall},
)
print(
    f"HDP-MAB case 4 (M=100, {SEEDS} seeds): {wall:.1f} s, "
    f"{SEEDS * 100 * T / wall:,.0f} agent-steps/s"
)
