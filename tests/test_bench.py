"""The minimal runner: shapes, checkpoints, ledger totals and batch independence."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from baselines.trivial import Flooding
from fedbandit_env import ConfigError, UnknownIdError
from fedbandit_env.bench import default_checkpoints, evaluate
from fedbandit_env.bench.evaluate import incompatibility


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


HOMO = {"num_agents": 5, "num_arms": 3, "horizon": 300, "topology": "ring"}


@pytest.mark.parametrize(
    ("env_id", "agent", "kwargs", "declared"),
    [
        # an exploration rate called epsilon is no privacy claim
        ("FedBandit/Homogeneous-v0", "epsilon_greedy", {"epsilon": 0.3}, None),
        ("FedBandit/Homogeneous-v0", "ucb1", {}, None),
        # private agents left at their default epsilon still declare it
        ("FedBandit/Homogeneous-v0", "dp_mw_ucb", {}, 2.0),
        ("FedBandit/Homogeneous-v0", "dp_dec_ucb", {"epsilon": 1.5}, 1.5),
        ("FedBandit/Homogeneous-v0", "gossip_fed_ucb", {"epsilon": 3}, 3.0),
        ("FedBandit/Homogeneous-v0", "gossip_ucb", {}, math.inf),
        # commeff paper mode: every message is N_eff * epsilon-DP, known after reset (docs/commeff.md)
        ("FedBandit/Homogeneous-v0", "cdp_mab", {}, 5.0),
        ("FedBandit/Homogeneous-v0", "ddp_mab", {"epsilon": 0.5}, 2.5),
        ("FedBandit/Homogeneous-v0", "hdp_mab", {"privacy": "per_message", "epsilon": 0.5}, 0.5),
        ("FedBandit/LinearContextual-v0", "fed_lin_ucb", {"private": False}, math.inf),
        ("FedBandit/LinearContextual-v0", "fed_lin_ucb", {}, 1.0),
        ("FedBandit/LinearContextual-v0", "fed_lin_ucb_decentralized", {"epsilon": 0.5}, 0.5),
    ],
)
def test_evaluate_reports_the_declared_privacy_epsilon(env_id, agent, kwargs, declared):
    env_kwargs = HOMO if "Homogeneous" in env_id else {"num_agents": 3, "horizon": 50}
    res = evaluate(env_id, agent, runs=1, env_kwargs=env_kwargs, agent_kwargs=kwargs)
    assert res.privacy_epsilon == declared
    expected = "inf" if declared == math.inf else declared
    assert json.loads(json.dumps(res.summary()))["privacy_epsilon"] == expected


def test_incompatibility_is_decided_by_the_learner():
    env, linear = "FedBandit/Heterogeneous-v0", "FedBandit/LinearContextual-v0"
    assert incompatibility(env, "ucb1", {"num_agents": 4, "horizon": 20}) is None
    assert incompatibility(linear, "linucb", {"num_agents": 4, "horizon": 20}) is None
    reason = incompatibility(env, "linucb", {"num_agents": 4, "horizon": 20})
    assert reason is not None and "family: expected 'linear'" in reason
    # the learner's own horizon check, before any step
    reason = incompatibility("FedBandit/Homogeneous-v0", "cdp_mab", {"horizon": 20})
    assert reason is not None and "cdp_mab: horizon" in reason
    # kwargs the learner does not take
    reason = incompatibility(env, "uniform", {"horizon": 20}, {"epsilon": 1})
    assert reason is not None and "uniform: bad keyword arguments" in reason


def test_default_checkpoints_bound_memory_and_keep_exact_finals():
    for horizon in (401, 1000, 10_000, 123_457):
        steps = default_checkpoints(horizon)
        assert len(steps) <= 400 and steps[0] == 1 and steps[-1] == horizon
    kw = {"num_agents": 3, "num_arms": 4, "horizon": 1000, "topology": "ring"}
    grid = evaluate("FedBandit/Heterogeneous-v0", "flooding", runs=2, seed=1, env_kwargs=kw)
    full = evaluate(
        "FedBandit/Heterogeneous-v0",
        "flooding",
        runs=2,
        seed=1,
        env_kwargs=kw,
        checkpoints=np.arange(1, 1001),
    )
    assert len(grid.steps) < 1000
    assert np.array_equal(grid.regret_by_agent, full.regret_by_agent[:, grid.steps - 1])
    assert np.array_equal(grid.final_regret_network, full.final_regret_network)


def test_evaluate_builds_the_topology_once(monkeypatch):
    from fedbandit_env import config

    calls = []
    real = config.Topology.from_graph

    def counting(*args, **kwargs):
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(config.Topology, "from_graph", counting)
    kw = {"num_agents": 4, "num_arms": 3, "horizon": 20, "topology": "ring"}
    res = evaluate("FedBandit/Heterogeneous-v0", Flooding, runs=2, env_kwargs=kw)
    assert len(calls) == 1
    assert res.floats[0, 0] == res.messages[0, 0] * 3  # the learner's channel spec still applies
    assert "topology" in res.env_kwargs and res.env_kwargs["topology"] == "ring"
