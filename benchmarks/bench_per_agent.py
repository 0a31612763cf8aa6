"""Agent-steps per second of a per-agent learner (a plain-Python UCB1 class, one instance per
agent) against the batched ``ucb1`` team policy, on the same cell, side by side in one run.

Also times ``mabwiser:UCB1`` (when the ``mabwiser`` extra is installed) and a parallel-view
policy callable doing the same plain-Python UCB1. Each learner is timed through the bench
(``evaluate``): agent-steps/s = runs x agents x steps / wall. docs/writing-agents.md quotes it.

    python benchmarks/bench_per_agent.py
"""

from __future__ import annotations

import argparse
import importlib.util
import math
from types import SimpleNamespace

import record

from fedbandit_env import PerAgentLearner
from fedbandit_env.bench import evaluate
from fedbandit_env.per_agent import last_pull


class PlainUCB1(PerAgentLearner):
    """UCB1 for one agent with Python lists (the docs/writing-agents.md example)."""

    agent_id = "plain_ucb1"

    def reset(self, agent, facts, rng):
        self.n = [0] * facts.num_arms
        self.s = [0.0] * facts.num_arms

    def act(self, observation):
        pull = last_pull(observation)
        if pull is not None:
            self.n[pull[0]] += 1
            self.s[pull[0]] += pull[1]
        if 0 in self.n:
            return self.n.index(0)
        t = sum(self.n)
        ucb = [s / n + math.sqrt(2 * math.log(t) / n) for s, n in zip(self.s, self.n, strict=True)]
        return ucb.index(max(ucb))


class PlainUCB1Policy:
    """The same UCB1 as a parallel-view policy callable (one call per run and step)."""

    def __init__(self, num_arms: int):
        self.facts = SimpleNamespace(num_arms=num_arms)

    def reset(self):
        self.learners = {}

    def __call__(self, observations, infos):
        actions = {}
        for agent, obs in observations.items():
            if agent not in self.learners:
                self.learners[agent] = PlainUCB1()
                self.learners[agent].reset(agent, self.facts, None)
            actions[agent] = self.learners[agent].act(obs)
        return actions


parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--runs", type=int, default=10)
parser.add_argument("--horizon", type=int, default=2000)
parser.add_argument("--num-agents", type=int, default=10)
parser.add_argument("--num-arms", type=int, default=10)
record.add_json_option(parser)
args = parser.parse_args()
record.start(__file__, args)

ENV = "FedBandit/Homogeneous-v0"
env_kwargs = {
    "num_agents": args.num_agents,
    "num_arms": args.num_arms,
    "horizon": args.horizon,
    "topology": "ring",
}
learners = [("ucb1 (batched team policy)", "ucb1", {}), ("PlainUCB1 (per-agent)", PlainUCB1, {})]
learners.append(("PlainUCB1Policy (policy callable)", PlainUCB1Policy(args.num_arms), {}))
if importlib.util.find_spec("mabwiser") is not None:
    learners.append(("mabwiser:UCB1 (library adapter)", "mabwiser:UCB1", {"alpha": 1.0}))

print(f"{ENV} {env_kwargs}, {args.runs} runs\n")
print("| learner | wall s | agent-steps/s | vs batched | final regret / agent |")
print("|---|---|---|---|---|")
batched = None
for label, agent, kwargs in learners:
    res = evaluate(ENV, agent, runs=args.runs, seed=0, env_kwargs=env_kwargs, agent_kwargs=kwargs)
    rate = args.runs * args.num_agents * args.horizon / res.wall_time
    batched = batched or rate
    print(
        f"| {label} | {res.wall_time:.2f} | {rate:,.0f} | {rate / batched:.3f} | "
        f"{res.final_regret_per_agent.mean():.1f} |"
    )
