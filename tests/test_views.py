"""The ParallelEnv view and the vector view give bit-identical trajectories (DESIGN.md §2)."""

from __future__ import annotations

import numpy as np
import pytest

import fedbandit_env
from baselines.trivial import Flooding, UniformRandom
from fedbandit_env.policy import run_episode
from tests.helpers import GreedyFlood

ENV = "FedBandit/Heterogeneous-v0"
KWARGS = {
    "num_agents": 6,
    "num_arms": 4,
    "horizon": 120,
    "topology": "grid",
    "reward": {"kind": "gaussian", "sigma": 0.5},
    "instance_seed": None,
    "channels": {
        "neighbors": {"kind": "neighbors", "dim": 4, "drop_prob": 0.1},
        "g": {"kind": "gossip", "dim": 2},
        "f": {"kind": "flood", "dim": 3, "ttl": 2},
    },
}


def _vector_trajectory(policy, seeds):
    venv = fedbandit_env.make_vec(ENV, num_runs=len(seeds), **KWARGS)
    obs, _ = venv.reset(seed=seeds)
    policy.reset(venv.facts, venv.agent_rng())
    steps = []
    while True:
        action = policy.act(obs)
        obs, rewards, _, truncated, info = venv.step(action.arms, action.messages)
        steps.append(
            (
                action.arms.copy(),
                rewards.copy(),
                info.instant_regret.copy(),
                info.ledger.total.messages.sum(axis=1).copy(),
            )
        )
        if truncated.all():
            return steps


@pytest.mark.parametrize("policy_cls", [UniformRandom, Flooding, GreedyFlood])
def test_parallel_view_equals_vector_view(policy_cls):
    seeds = [5, 6, 7]
    vec = _vector_trajectory(policy_cls(), seeds)
    env = fedbandit_env.make(ENV, **KWARGS)
    trajectory = run_episode(env, policy_cls(), seed=6)
    assert len(trajectory) == len(vec) == KWARGS["horizon"]
    agents = env.possible_agents
    for t, ((actions, _, rewards, infos), (arms, vrew, vreg, vmsg)) in enumerate(
        zip(trajectory, vec, strict=True)
    ):
        assert [actions[a]["arm"] for a in agents] == list(arms[1]), t
        assert np.array_equal([rewards[a] for a in agents], vrew[1]), t
        assert np.array_equal([infos[a]["instant_regret"] for a in agents], vreg[1]), t
        assert infos[agents[0]]["ledger"]["total"]["messages"] == vmsg[1], t


def test_batch_member_equals_run_alone():
    batch = _vector_trajectory(GreedyFlood(), [10, 11, 12, 13])
    alone = _vector_trajectory(GreedyFlood(), [12])
    for (arms_b, rew_b, reg_b, msg_b), (arms_a, rew_a, reg_a, msg_a) in zip(
        batch, alone, strict=True
    ):
        assert np.array_equal(arms_b[2], arms_a[0])
        assert np.array_equal(rew_b[2], rew_a[0])
        assert np.array_equal(reg_b[2], reg_a[0])
        assert msg_b[2] == msg_a[0]


def test_runs_of_a_batch_differ():
    batch = _vector_trajectory(UniformRandom(), [1, 2])
    arms = np.stack([s[0] for s in batch])
    assert not np.array_equal(arms[:, 0], arms[:, 1])
