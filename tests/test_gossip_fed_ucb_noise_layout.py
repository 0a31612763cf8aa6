"""Fed_UCB's tree-counter noise layout (results version 4 of ``gossip_fed_ucb``, docs/bench.md
"Results versions"): leaf rounds draw one standard Laplace per (run, agent) for the pulled arm's
level-0 block, instead of one per arm of which K - 1 went unused. The stream changed, so
trajectories differ; regret must agree with the version-3 layout within 3 standard errors on a
fixed instance (the paper's synthetic setting: Gaussian(1) rewards, ring)."""

from __future__ import annotations

import numpy as np
import pytest

from agents import gossip_ucb
from agents.gossip_ucb import GossipFedUCB
from fedbandit_env.privacy import TreeCounter
from tests.helpers import assert_means_within_3se, gossip_venv


def _final_regret(rounds: int = 300, runs: int = 48, epsilon: float = 1.0) -> np.ndarray:
    venv = gossip_venv(4, 3, rounds, "ring", runs)
    policy = GossipFedUCB(epsilon=epsilon)
    obs, _ = venv.reset(seed=11)
    policy.reset(venv.facts, venv.agent_rng())
    while not venv.engine.truncated:
        action = policy.act(obs)
        obs, *_ = venv.step(action.arms, action.messages, action.pull)
    return venv.engine.cumulative_regret.mean(axis=1)  # (B,) agent-averaged


@pytest.mark.parametrize("epsilon", [1.0, 100.0])  # near uniform play / visibly learning
def test_row_layout_agrees_with_the_per_arm_layout_within_3_se(epsilon, monkeypatch):
    new = _final_regret(epsilon=epsilon)
    original = TreeCounter.__init__

    def per_counter(self, *args, **kwargs):  # the version-3 layout: one draw per arm and round
        kwargs["noise_per"] = "counter"
        original(self, *args, **kwargs)

    monkeypatch.setattr(gossip_ucb.TreeCounter, "__init__", per_counter)
    old = _final_regret(epsilon=epsilon)
    assert not np.array_equal(new, old)  # the stream did change
    assert_means_within_3se(new, old)


def test_fed_ucb_uses_the_row_layout():
    venv = gossip_venv(4, 3, 20, "ring", 2)
    policy = GossipFedUCB(epsilon=1.0)
    venv.reset(seed=0)
    policy.reset(venv.facts, venv.agent_rng())
    assert policy.counter.noise_per == "row" and policy.version >= 4
