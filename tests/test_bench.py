"""The minimal runner: shapes, checkpoints, ledger totals and batch independence."""

from __future__ import annotations

import numpy as np
import pytest

from baselines.trivial import Flooding
from fedbandit_env import ConfigError, UnknownIdError
from fedbandit_env.bench import default_checkpoints, evaluate


def test_evaluate_shapes_and_totals():
    res = evaluate(
        "FedBandit/Heterogeneous-v0",
        "flooding",
        runs=3,
        seed=5,
        env_kwargs={"num_agents": 4, "num_arms": 3, "horizon": 50, "topology": "ring"},
    )
    assert res.seeds == [5, 6, 7]
    assert res.regret_per_agent.shape == (3, 50)
    assert np.allclose(res.regret_network, 4 * res.regret_per_agent)
    assert np.all(np.diff(res.regret_network, axis=1) >= 0)
    # each agent's own curve: the per-agent average and the network total are built from it
    assert res.regret_by_agent.shape == (3, 50, 4)
    assert np.allclose(res.regret_by_agent.mean(axis=2), res.regret_per_agent)
    assert np.allclose(res.regret_by_agent.sum(axis=2), res.regret_network)
    assert np.any(res.regret_by_agent[:, -1, 0] != res.regret_by_agent[:, -1, 1])
    # flooding sends to both ring neighbours every step: 4 agents * 2 * 50 steps
    assert np.all(res.messages[:, 0] == 400) and np.all(res.floats[:, 0] == 1200)
    assert res.summary()["messages_mean"] == 400


def test_channels_follow_the_agent_when_env_names_none():
    res = evaluate(
        "FedBandit/Heterogeneous-v0", Flooding, runs=1, env_kwargs={"horizon": 5, "num_arms": 7}
    )
    assert res.floats[0, 0] == res.messages[0, 0] * 7


def test_results_do_not_depend_on_batching():
    kw = {"num_agents": 3, "num_arms": 4, "horizon": 200, "instance_seed": None}
    together = evaluate("FedBandit/Heterogeneous-v0", "flooding", runs=4, seed=0, env_kwargs=kw)
    first = evaluate("FedBandit/Heterogeneous-v0", "flooding", runs=2, seed=0, env_kwargs=kw)
    second = evaluate("FedBandit/Heterogeneous-v0", "flooding", runs=2, seed=2, env_kwargs=kw)
    assert np.array_equal(
        together.regret_network, np.vstack([first.regret_network, second.regret_network])
    )


def test_checkpoints_for_long_horizons():
    steps = default_checkpoints(1_000_000)
    assert steps[0] == 1 and steps[-1] == 1_000_000 and len(steps) <= 400
    assert np.all(np.diff(steps) > 0)
    assert np.array_equal(default_checkpoints(20), np.arange(1, 21))


def test_bad_agent_and_kwargs():
    with pytest.raises(UnknownIdError, match="registered agents"):
        evaluate("FedBandit/Heterogeneous-v0", "no-such-agent")
    with pytest.raises(ConfigError, match="uniform: bad keyword arguments"):
        evaluate("FedBandit/Heterogeneous-v0", "uniform", agent_kwargs={"epsilon": 1})
    with pytest.raises(ConfigError, match="checkpoints"):
        evaluate(
            "FedBandit/Heterogeneous-v0",
            "uniform",
            env_kwargs={"horizon": 5},
            checkpoints=np.array([10]),
        )
