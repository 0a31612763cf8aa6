"""Speed and communication of the DP recommender agents (docs/dp-recsys.md, "Speed and messages").

Prints, does not assert (the machines are shared and noisy):

* agent-steps/s of ``dp_mw_ucb`` and ``dp_dec_ucb`` (private, epsilon = 2, and non-private) at
  B = 100 runs, N = 20 agents, K = 10 arms (ring C_20, Gaussian rewards), environment included,
  and the agent's own share of the time;
* messages sent per 10^4 rounds by ``dp_mw_ucb`` (M = 20, K = 10, Bernoulli, the means of the paper's experiments)
  against an agent that uploads every round (2 M messages per round: M uploads + M broadcasts).

    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 python benchmarks/bench_dp_recsys.py
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np
import record

import fedbandit_env
from agents import DPDecentralizedUCB, DPMasterWorkerUCB
from fedbandit_env.bench import evaluate
from fedbandit_env.network.ledger import AGENT_SERVER

parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
parser.add_argument("--runs", type=int, default=100, help="B")
parser.add_argument("--agents", type=int, default=20, help="N (the paper's M)")
parser.add_argument("--arms", type=int, default=10, help="K")
parser.add_argument("--steps", type=int, default=1000, help="steps timed per agent")
parser.add_argument("--rounds", type=int, default=10_000, help="horizon of the message count")
parser.add_argument("--seeds", type=int, default=5, help="runs of the message count")
record.add_json_option(parser)
args = parser.parse_args()
record.start(__file__, args)

MEANS = np.linspace(0.9, 0.0, args.arms)


def rate(policy) -> tuple[float, float]:
    """(agent-steps/s of env + agent, share of the time spent in act)."""
    venv = fedbandit_env.make_vec(
        "FedBandit/Homogeneous-v0",
        num_runs=args.runs,
        num_agents=args.agents,
        means=MEANS,
        horizon=args.steps,
        topology="ring",
        reward={"kind": "gaussian", "sigma": 0.1},
        channels=policy.channel_spec(_preview()),
    )
    obs, _ = venv.reset(seed=0)
    policy.reset(venv.facts, venv.agent_rng())
    in_act = 0.0
    start = time.perf_counter()
    while not venv.engine.truncated:  # engine steps, communication steps included
        t0 = time.perf_counter()
        action = policy.act(obs)
        in_act += time.perf_counter() - t0
        obs, *_ = venv.step(action.arms, action.messages, action.pull)
    total = time.perf_counter() - start
    # agent-steps: pulls (the horizon), so communication steps count as overhead
    return args.runs * args.agents * args.steps / total, in_act / total


def _preview():
    return fedbandit_env.make_vec(
        "FedBandit/Homogeneous-v0", num_runs=1, num_agents=args.agents, means=MEANS
    ).config


print(f"agent-steps/s at B={args.runs}, N={args.agents}, K={args.arms} ({args.steps} steps)")
for name, policy in [
    ("dp_mw_ucb  eps=2  ", DPMasterWorkerUCB(epsilon=2.0)),
    ("dp_mw_ucb  eps=inf", DPMasterWorkerUCB(epsilon=math.inf)),
    ("dp_mw_ucb  eps=2   latency", DPMasterWorkerUCB(epsilon=2.0, timing="latency")),
    ("dp_mw_ucb  eps=inf latency", DPMasterWorkerUCB(epsilon=math.inf, timing="latency")),
    ("dp_dec_ucb eps=2  ", DPDecentralizedUCB(epsilon=2.0)),
    ("dp_dec_ucb eps=inf", DPDecentralizedUCB(epsilon=math.inf)),
]:
    r, share = rate(policy)
    record.row("agent-steps/s", {"learner": name.strip(), "agent-steps/s": r, "act share": share})
    print(f"  {name}: {r:12,.0f} agent-steps/s  (agent act: {100 * share:.0f}% of the time)")

print(f"\ndp_mw_ucb messages per {args.rounds} rounds (M={args.agents}, K={args.arms}, Bernoulli)")
every = 2 * args.agents * args.rounds
for eps in (1.5, 2.0, 5.0, math.inf):
    res = evaluate(
        "FedBandit/Homogeneous-v0",
        DPMasterWorkerUCB(epsilon=eps),
        runs=args.seeds,
        seed=0,
        env_kwargs={
            "num_agents": args.agents,
            "means": MEANS,
            "horizon": args.rounds,
            "topology": "ring",
            "reward": "bernoulli",
        },
        checkpoints=np.array([args.rounds]),
    )
    sent = res.messages[:, AGENT_SERVER].mean()
    record.row(
        "dp_mw_ucb messages",
        {"eps": eps, "messages": sent, "uploading every round": every, "share": sent / every},
    )
    print(
        f"  eps={eps:<4}: {sent:10,.0f} messages ({sent / (2 * args.agents):6,.0f} decision "
        f"rounds) vs {every:,} when uploading every round: {100 * sent / every:.1f}%"
    )
