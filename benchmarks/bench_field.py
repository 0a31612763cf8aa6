"""Field agents' speed: agent-steps/s of each field agent next to gossip_ucb, in one run.

    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 python benchmarks/bench_field.py

Each learner is stepped through the vector view (engine, channels, validation and its
communication-only steps included; a run's horizon counts pulls, so agent-steps are B x N x T
pulls) on B = 100 runs of N = 10 agents on a ring (``--runs``, ``--agents``, ``--steps``), best
of ``--repeats``, the learners interleaved. ``CELLS`` lists (id, env id, env kwargs): one line per
agent, so that adding a field agent is a one-line change. Ids not registered here are reported
as skipped. Does not assert: the machines are shared and noisy.
"""

from __future__ import annotations

import argparse
import time

import record

import fedbandit_env
from fedbandit_env.agent_registry import is_known, make_agent
from fedbandit_env.bench.evaluate import env_kwargs_for

HETERO, HOMO, LINEAR = (
    "FedBandit/Heterogeneous-v0",
    "FedBandit/Homogeneous-v0",
    "FedBandit/LinearContextual-v0",
)
MAB = {"num_arms": 10, "topology": "ring"}

# (learner id, environment id, env kwargs): the reference first, then one line per field agent
CELLS = [
    ("gossip_ucb", HETERO, MAB),
    ("dducb", HOMO, MAB),
    ("coop_ucb2", HOMO, MAB),
    ("gosine", HOMO, MAB),
    ("ldp_ucb", HOMO, MAB),
    ("fed1_ucb", HETERO, MAB),
    ("fed2_ucb", HETERO, MAB),
    ("dislinucb", LINEAR, {"num_arms": 10, "dim": 10, "topology": "ring"}),
    ("linucb", LINEAR, {"num_arms": 10, "dim": 10, "topology": "ring"}),  # dislinucb's reference
]

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--runs", type=int, default=100)
parser.add_argument("--agents", type=int, default=10)
parser.add_argument("--steps", type=int, default=2000)
parser.add_argument("--repeats", type=int, default=2)
record.add_json_option(parser)
args = parser.parse_args()
record.start(__file__, args)


def rate(agent_id: str, env_id: str, kwargs: dict) -> float:
    """Agent-steps (pulls) per second of one episode of ``args.steps`` pulls."""
    policy = make_agent(agent_id)
    kw = env_kwargs_for(
        policy, env_id, {**kwargs, "num_agents": args.agents, "horizon": args.steps}
    )
    venv = fedbandit_env.make_vec(env_id, num_runs=args.runs, **kw)
    obs, _ = venv.reset(seed=0)
    policy.reset(venv.facts, venv.agent_rng())
    start = time.perf_counter()
    while not venv.engine.truncated:
        action = policy.act(obs)
        obs, *_ = venv.step(action.arms, action.messages, action.pull)
    return args.runs * args.agents * args.steps / (time.perf_counter() - start)


cells = [c for c in CELLS if is_known(c[0])]
for agent_id, *_ in CELLS:
    if not is_known(agent_id):
        print(f"skipping {agent_id}: not registered in this installation")
best = {c[0]: 0.0 for c in cells}
for _ in range(args.repeats):
    for agent_id, env_id, kwargs in cells:
        best[agent_id] = max(best[agent_id], rate(agent_id, env_id, kwargs))

reference = best.get("gossip_ucb")
print(
    f"B = {args.runs} runs, N = {args.agents} agents (ring), T = {args.steps} pulls, "
    f"best of {args.repeats}\n"
)
print("| learner | environment | agent-steps/s | vs gossip_ucb |")
print("|---|---|---|---|")
for agent_id, env_id, _ in cells:
    ratio = f"{best[agent_id] / reference:.2f}" if reference else "—"
    print(f"| `{agent_id}` | {env_id.split('/')[1]} | {best[agent_id]:,.0f} | {ratio} |")
