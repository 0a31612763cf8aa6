"""The ParallelEnv view and the vector view give bit-identical trajectories (docs/architecture.md).

Run b of a vector batch, turned into per-agent dicts, must equal the ParallelEnv episode with the
same run seed in every observation entry (channel deliveries and senders included), every info
entry (regret, run seed), the run-level ledger, every reward, and every action the team policy
takes.
"""

from __future__ import annotations

import numpy as np
import pytest

import fedbandit_env
from baselines.trivial import Flooding, UniformRandom
from fedbandit_env.parallel_env import agent_info, agent_observation
from fedbandit_env.policy import ParallelPolicyAdapter
from tests.helpers import Chatty, GreedyFlood, Pausing, assert_tree_equal

ENV = "FedBandit/Heterogeneous-v0"
GRID = {
    "num_agents": 6,
    "num_arms": 4,
    "horizon": 120,
    "topology": "grid",
    "reward": {"kind": "gaussian", "sigma": 0.5},
    "instance_seed": None,
    "channels": {
        "neighbors": {"kind": "neighbors", "dim": 4, "drop_prob": 0.1},
        "g": {"kind": "gossip", "dim": 2, "drop_prob": 0.2},
        "gp": {"kind": "gossip", "dim": 2, "mode": "pull_one_neighbour", "drop_prob": 0.2},
        "f": {"kind": "flood", "dim": 3, "ttl": 2, "drop_prob": 0.1},
        "s": {"kind": "server", "dim": 4, "participation": 0.5, "drop_prob": 0.1},
        "h": {"kind": "hierarchical", "dim": 2, "drop_prob": 0.1},  # one component, sink
    },
}
HYBRID = {
    "num_agents": 7,
    "num_arms": 3,
    "horizon": 80,
    "topology": "hybrid",
    "topology_kwargs": {"sizes": [2, 5], "component_graph": "path"},
    "reward": "bernoulli",
    "instance": "commeff",
    "channels": {
        "neighbors": {"kind": "neighbors", "dim": 3},
        "g": {"kind": "gossip", "dim": 3},
        "gp": {"kind": "gossip", "dim": 1, "mode": "pull_one_neighbour"},
        "f": {"kind": "flood", "dim": 2, "cost_model": "gis"},
        "s": {"kind": "server", "dim": 3, "aggregate": "sum", "charge_broadcast": True},
        "h": {"kind": "hierarchical", "dim": 3, "aggregate": "unweighted", "cost_model": "path"},
    },
}
JOINING = {  # a server channel with a participation schedule (agents join over time)
    **GRID,
    "channels": {
        "s": {"kind": "server", "dim": 3, "participation": 0.5, "join_round": [0, 0, 1, 1, 2, 4]},
        "neighbors": {"kind": "neighbors", "dim": 4},
    },
}
CONFIGS = {"grid": GRID, "hybrid": HYBRID, "joining": JOINING}
POLICIES = {
    "uniform": UniformRandom,
    "flooding": Flooding,
    "greedy": GreedyFlood,
    "chatty": Chatty,
    "pausing": Pausing,  # communication-only steps, a different number in every run
}
SEEDS = [5, 6, 7]


def _agent_dicts(engine, obs, info, b):
    """Per-agent observation and info dicts of run b, as the ParallelEnv view builds them, with
    the run's ledger summary (the ParallelEnv's ``ledger``) in the infos under ``None``."""
    n = engine.num_agents
    observations = {f"agent_{i}": agent_observation(engine, obs, b, i) for i in range(n)}
    infos = {
        f"agent_{i}": agent_info(info, b, i, engine.seeds[b], obs.phase[b]) for i in range(n)
    }
    infos[None] = engine.ledger.summary(b)
    return observations, infos


def _vector_trajectory(policy, kwargs, seeds, b):
    """Run b's reset dicts, then per step of run b (until it has made its pulls; the others may
    go on longer): (arms, sends, payloads, obs, rewards, infos, pull)."""
    venv = fedbandit_env.make_vec(ENV, num_runs=len(seeds), **kwargs)
    obs, info = venv.reset(seed=seeds)
    policy.reset(venv.facts, venv.agent_rng())
    start = _agent_dicts(venv.engine, obs, info, b)
    steps = []
    while True:
        live = not venv.engine.done_runs[b]
        action = policy.act(obs)
        obs, rewards, _, truncated, info = venv.step(action.arms, action.messages, action.pull)
        if live:
            dicts = _agent_dicts(venv.engine, obs, info, b)
            sends = {k: s[b].astype(np.int64) for k, (s, _) in action.messages.items()}
            payloads = {k: p[b].copy() for k, (_, p) in action.messages.items()}
            pull = True if action.pull is None else bool(action.pull[b])
            steps.append(
                (action.arms[b].copy(), sends, payloads, *dicts, rewards[b].copy(), pull)
            )
        if truncated.all():
            return start, steps


def _parallel_trajectory(policy, kwargs, seed):
    env = fedbandit_env.make(ENV, **kwargs)
    adapter = ParallelPolicyAdapter(policy, env)
    obs, infos = env.reset(seed=seed)
    adapter.reset(seed)
    start, steps = (obs, {**infos, None: env.ledger}), []
    while env.agents:
        actions = adapter(obs)
        obs, rewards, terms, truncs, infos = env.step(actions)
        assert not any(terms.values())
        steps.append((actions, obs, {**infos, None: env.ledger}, rewards, truncs))
    return env, start, steps


@pytest.mark.parametrize("policy", sorted(POLICIES))
@pytest.mark.parametrize("config", sorted(CONFIGS))
def test_parallel_view_equals_vector_view(config, policy):
    kwargs = CONFIGS[config]
    b = 1
    vec_start, vec = _vector_trajectory(POLICIES[policy](), kwargs, SEEDS, b)
    env, par_start, par = _parallel_trajectory(POLICIES[policy](), kwargs, SEEDS[b])
    assert len(par) == len(vec)
    pulls = sum(step[-1] for step in vec)
    assert pulls == kwargs["horizon"]
    if policy == "pausing":
        assert len(vec) > pulls  # the run took communication steps
    else:
        assert len(vec) == pulls
    assert_tree_equal(par_start[0], vec_start[0], "reset obs")
    assert_tree_equal(par_start[1], vec_start[1], "reset infos")
    agents = env.possible_agents
    delivered = dict.fromkeys(kwargs["channels"], 0)
    for t, (p, v) in enumerate(zip(par, vec, strict=True)):
        actions, obs, infos, rewards, truncs = p
        arms, sends, payloads, vobs, vinfos, vrewards, pull = v
        assert [actions[a]["arm"] for a in agents] == arms.tolist(), t
        assert [actions[a].get("pull", 1) for a in agents] == [int(pull)] * len(agents), t
        for name in sends:
            assert [actions[a]["messages"][name]["send"] for a in agents] == sends[name].tolist()
            assert np.array_equal(
                np.stack([actions[a]["messages"][name]["payload"] for a in agents]), payloads[name]
            ), (t, name)
        assert_tree_equal(obs, vobs, f"step {t} obs")
        assert_tree_equal(infos, vinfos, f"step {t} infos")
        vrew = {a: float(r) for a, r in zip(agents, vrewards, strict=True)}
        assert_tree_equal(rewards, vrew, f"step {t} rewards")
        assert all(truncs.values()) == (t == len(vec) - 1)
        for name in delivered:
            delivered[name] += infos[None]["step"]["messages"] > 0
        if policy in ("chatty", "pausing"):  # every channel delivered something
            for name, ch in obs[agents[0]]["channels"].items():
                delivered[name] += int(any(np.any(v) for v in ch.values() if v is not None))
    if policy in ("chatty", "pausing"):
        assert all(delivered.values()), delivered


def test_chatty_reads_every_channel():
    """Chatty's arms depend on each channel's deliveries: dropping a channel changes them."""
    arms = {}
    for drop in [None, *sorted(HYBRID["channels"])]:
        channels = {k: v for k, v in HYBRID["channels"].items() if k != drop}
        _, steps = _vector_trajectory(Chatty(), {**HYBRID, "channels": channels}, [3], 0)
        arms[drop] = np.stack([s[0] for s in steps])
    for drop in HYBRID["channels"]:
        assert not np.array_equal(arms[drop], arms[None]), drop


@pytest.mark.parametrize("policy", [Chatty, Pausing])
def test_batch_member_equals_run_alone(policy):
    _, batch = _vector_trajectory(policy(), GRID, [10, 11, 12, 13], 2)
    _, alone = _vector_trajectory(policy(), GRID, [12], 0)
    for t, (x, y) in enumerate(zip(batch, alone, strict=True)):
        assert_tree_equal(list(x), list(y), f"step {t}")


def test_runs_of_a_batch_differ():
    _, batch = _vector_trajectory(UniformRandom(), GRID, [1, 2], 0)
    _, other = _vector_trajectory(UniformRandom(), GRID, [1, 2], 1)
    assert not np.array_equal(np.stack([s[0] for s in batch]), np.stack([s[0] for s in other]))
