"""Light cone (docs/architecture.md, "One step"): information moves no faster than the network.

Changing agent j's rewards from step t on must leave agent i's arms and messages unchanged at
every step s <= t + d(i, j) (a message computed from reward t leaves j at step t + 1 and needs one
step per hop), and, to show the test can fail, the change must reach every agent eventually.
"""

from __future__ import annotations

import numpy as np
import pytest

import fedbandit_env
from baselines.trivial import Flooding
from tests.helpers import GreedyFlood


class PausingFlood(GreedyFlood):
    """GreedyFlood that takes a communication-only step (no pull) every third step in runs 0 and
    2: information must still move one hop per step, pulls or not."""

    def reset(self, facts, rng):
        super().reset(facts, rng)
        self.steps = 0

    def act(self, obs):
        action = super().act(obs)
        self.steps += 1
        action.pull = np.array([self.steps % 3 != 0, True, self.steps % 3 != 0, True])
        return action


HORIZON = 80
T_CHANGE = 20


def _run(topology, n, policy, perturb_agent=None, **topo):
    venv = fedbandit_env.make_vec(
        "FedBandit/Heterogeneous-v0",
        num_runs=4,
        num_agents=n,
        num_arms=4,
        horizon=HORIZON,
        topology=topology,
        topology_kwargs=topo,
        reward={"kind": "gaussian", "sigma": 0.1},
        channels={"neighbors": {"kind": "neighbors", "dim": 4}},
    )
    obs, _ = venv.reset(seed=3)
    policy.reset(venv.facts, venv.agent_rng())
    arms, msgs = [], []
    for t in range(1, HORIZON + 1):
        if perturb_agent is not None and t == T_CHANGE:
            venv.engine.means[:, perturb_agent, :] = 1.0 - venv.engine.means[:, perturb_agent, :]
            venv.engine.means[:, perturb_agent, 0] += 3.0
        action = policy.act(obs)
        arms.append(action.arms.copy())
        msgs.append(action.messages["neighbors"][1].copy())
        obs, *_ = venv.step(action.arms, action.messages, action.pull)
    return np.stack(arms), np.stack(msgs), venv.config.topology.hop_distances


@pytest.mark.parametrize(
    ("topology", "n", "topo"),
    [("ring", 9, {}), ("star", 7, {}), ("grid", 12, {"rows": 3, "cols": 4})],
)
@pytest.mark.parametrize("j", [0, 4])
@pytest.mark.parametrize("policy", [GreedyFlood, PausingFlood])
def test_light_cone_greedy_flood(topology, n, topo, j, policy):
    base_arms, base_msgs, dist = _run(topology, n, policy(), **topo)
    arms, msgs, _ = _run(topology, n, policy(), perturb_agent=j, **topo)
    for i in range(n):
        changed = np.nonzero(
            (arms[:, :, i] != base_arms[:, :, i]).any(axis=1)
            | (msgs[:, :, i] != base_msgs[:, :, i]).any(axis=(1, 2))
        )[0]
        assert changed.size > 0, f"agent {i} never saw agent {j}'s change (test would be vacuous)"
        first_step = changed[0] + 1  # arms[k] is the action of step k + 1
        assert first_step > T_CHANGE + dist[i, j], (i, j, first_step)


def test_flooding_max_consensus_is_exactly_one_hop_per_step():
    """Flooding's view of the counts equals max_j counts_j(s - 1 - d(i, j)) (Zhu, Zhu, Liu & Liu
    2021, Lemma 1)."""
    policy = Flooding()
    horizon = 15
    venv = fedbandit_env.make_vec(
        "FedBandit/Homogeneous-v0",
        num_runs=2,
        num_agents=6,
        num_arms=3,
        horizon=horizon,
        topology="path",
        channels=("neighbors",),
    )
    obs, _ = venv.reset(seed=0)
    policy.reset(venv.facts, venv.agent_rng())
    history = []  # history[k] = counts after k steps
    for _ in range(horizon):
        action = policy.act(obs)
        history.append(policy.counts.copy())
        obs, *_ = venv.step(action.arms, action.messages)
    dist = venv.config.topology.hop_distances
    s = horizon  # the last act() happened at step s and used counts after s - 1 steps
    for i in range(6):
        expected = np.max(
            [
                history[s - 1 - dist[i, j]][:, j] if s - 1 - dist[i, j] >= 0 else np.zeros((2, 3))
                for j in range(6)
            ],
            axis=0,
        )
        assert np.array_equal(policy.known[:, i], expected), i
