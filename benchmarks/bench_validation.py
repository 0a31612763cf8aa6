"""Step-loop throughput before and after the boundary validation (docs/limits.md).

Validation runs once, at construction; the step loop must not slow down. This script measures
the vector view's agent-steps/s with a simple learner (``ucb1``, default B=100, N=10, M=10, the
``neighbors`` channel) for this tree and for a checkout of the code before the change, side by
side in one run: each measurement is a fresh subprocess whose ``PYTHONPATH`` points at one tree,
the two trees alternate, and the median of the repeats is printed with the ratio.

    git worktree add /tmp/base-ed75d5a ed75d5a       # the code before the change
    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 python benchmarks/bench_validation.py \\
        --base /tmp/base-ed75d5a
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

import record

ROOT = Path(__file__).resolve().parents[1]

CHILD = r"""
import json, sys, time
import fedbandit_env
B, N, M, T, agent = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
policy = fedbandit_env.make_agent(agent)
venv = fedbandit_env.make_vec("FedBandit/Heterogeneous-v0", num_runs=B, num_agents=N,
                              num_arms=M, horizon=T, channels=("neighbors",))
obs, _ = venv.reset(seed=0)
policy.reset(venv.facts, venv.agent_rng())
for _ in range(20):  # warm-up
    action = policy.act(obs)
    obs, *_ = venv.step(action.arms, action.messages)
steps = T - 20
start = time.perf_counter()
for _ in range(steps):
    action = policy.act(obs)
    obs, *_ = venv.step(action.arms, action.messages)
print(json.dumps({"rate": B * N * steps / (time.perf_counter() - start),
                  "module": fedbandit_env.__file__}))
"""


def measure(tree: Path, args: argparse.Namespace) -> float:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    cmd = [
        sys.executable,
        "-c",
        CHILD,
        str(args.runs),
        str(args.agents),
        str(args.arms),
        str(args.horizon),
        args.agent,
    ]
    out = subprocess.run(cmd, env=env, cwd=tree, capture_output=True, text=True, check=True)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["module"].startswith(str(tree)), result["module"]
    return result["rate"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--base",
        type=Path,
        default=Path("/tmp/base-ed75d5a"),
        help="checkout of the code before the change",
    )
    parser.add_argument("--runs", type=int, default=100, help="B")
    parser.add_argument("--agents", type=int, default=10, help="N")
    parser.add_argument("--arms", type=int, default=10, help="M")
    parser.add_argument("--horizon", type=int, default=1000, help="steps per measurement")
    parser.add_argument("--agent", default="ucb1")
    parser.add_argument("--repeats", type=int, default=5)
    record.add_json_option(parser)
    args = parser.parse_args()
    record.start(__file__, args)
    trees = {"before": args.base.resolve(), "after": ROOT}
    rates: dict[str, list[float]] = {name: [] for name in trees}
    for _ in range(args.repeats):
        for name, tree in trees.items():
            rates[name].append(measure(tree, args))
    print(
        f"vector view, {args.agent}, B={args.runs}, N={args.agents}, M={args.arms}, "
        f"{args.horizon} steps, {args.repeats} alternating repeats (agent-steps/s)"
    )
    for name, values in rates.items():
        record.row(
            "agent-steps/s",
            {
                "code": name,
                "median": statistics.median(values),
                "min": min(values),
                "max": max(values),
            },
        )
        print(
            f"  {name:<7} median {statistics.median(values):>12,.0f}   "
            f"min {min(values):>12,.0f}   max {max(values):>12,.0f}"
        )
    ratio = statistics.median(rates["after"]) / statistics.median(rates["before"])
    print(f"  after / before = {ratio:.3f}")
    record.figure("after / before", ratio)


if __name__ == "__main__":
    main()
