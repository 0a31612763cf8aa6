"""The DP recommender agents' counter noise layout (results version 3, docs/bench.md "Results
versions"): one standard Laplace per (run, agent) and step instead of one per arm. The random
stream changed, so trajectories differ; regret must agree with the version-2 layout within 3
standard errors on a fixed instance (the reproduction's means, Gaussian rewards)."""

from __future__ import annotations

import numpy as np
import pytest

from agents import DPDecentralizedUCB, DPMasterWorkerUCB, dp_recsys_common
from fedbandit_env.privacy import HybridCounter
from tests.dp_recsys_helpers import MEANS, rollout
from tests.helpers import assert_means_within_3se


def _final_regret(policy, **kwargs) -> np.ndarray:
    out = rollout(policy, runs=48, seed=3, means=MEANS[:4], horizon=300, **kwargs)
    return out["venv"].engine.cumulative_regret.mean(axis=1)  # (B,) agent-averaged


@pytest.mark.parametrize("cls", [DPMasterWorkerUCB, DPDecentralizedUCB])
def test_row_layout_agrees_with_the_per_arm_layout_within_3_se(cls, monkeypatch):
    new = _final_regret(cls(epsilon=1.0))
    original = HybridCounter.__init__

    def per_counter(self, *args, **kwargs):  # the version-2 layout: one draw per arm and step
        kwargs["noise_per"] = "counter"
        original(self, *args, **kwargs)

    monkeypatch.setattr(dp_recsys_common.HybridCounter, "__init__", per_counter)
    old = _final_regret(cls(epsilon=1.0))
    assert not np.array_equal(new, old)  # the stream did change
    assert_means_within_3se(new, old)


def test_agents_draw_one_laplace_per_agent_and_step():
    policy = DPMasterWorkerUCB(epsilon=1.0)
    out = rollout(policy, runs=2, horizon=40)
    counter = policy.sums.counter
    assert counter.noise_per == "row"
    venv = out["venv"]
    assert counter._stream._stream._shape == (2, venv.facts.num_agents)  # E1, E2 per agent
