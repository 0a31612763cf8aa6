"""Pseudo-regret from the global means (docs/architecture.md, "One step"); uniform play in closed
form."""

from __future__ import annotations

import numpy as np
import pytest

from fedbandit_env.bench import evaluate


@pytest.mark.parametrize(
    ("env_id", "kwargs"),
    [
        ("FedBandit/Heterogeneous-v0", {"num_agents": 4, "num_arms": 6, "instance": "commeff"}),
        ("FedBandit/Homogeneous-v0", {"num_agents": 3, "num_arms": 5}),
        (
            "FedBandit/Heterogeneous-v0",
            {"num_agents": 3, "num_arms": 4, "reward": {"kind": "clipped_gaussian", "sigma": 0.5}},
        ),
    ],
)
def test_uniform_play_matches_closed_form(env_id, kwargs):
    horizon, runs = 300, 200
    res = evaluate(
        env_id,
        "uniform",
        runs=runs,
        seed=0,
        env_kwargs={**kwargs, "horizon": horizon, "instance_seed": 0},
    )
    from fedbandit_env import make

    env = make(env_id, **kwargs, horizon=horizon)
    env.reset(seed=0)
    gaps = env.engine.best_expected[0] - env.engine.global_expected[0]
    expected = horizon * gaps.mean()
    final = res.final_regret_per_agent
    stderr = final.std(ddof=1) / np.sqrt(runs)
    assert abs(final.mean() - expected) < 4 * stderr, (final.mean(), expected, stderr)
    assert expected > 10 * stderr  # the check has power


def test_regret_uses_global_not_local_means():
    means = np.array([[0.9, 0.1, 0.5], [0.0, 0.6, 0.5], [0.0, 0.5, 0.5]])  # global: .3 .4 .5
    from fedbandit_env import make

    env = make("FedBandit/Heterogeneous-v0", means=means, horizon=2, channels=())
    env.reset(seed=0)
    _, _, _, _, infos = env.step({"agent_0": 0, "agent_1": 1, "agent_2": 2})
    assert [infos[a]["instant_regret"] for a in env.possible_agents] == pytest.approx(
        [0.2, 0.1, 0.0]
    )
