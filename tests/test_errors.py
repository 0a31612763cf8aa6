"""Bad input raises a clear error naming the agent and the field."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

import fedbandit_env
from fedbandit_env import ActionError, ConfigError, HorizonError


@pytest.fixture
def env():
    e = fedbandit_env.make(
        "FedBandit/Heterogeneous-v0",
        num_agents=3,
        num_arms=4,
        horizon=2,
        channels={"n": {"kind": "neighbors", "dim": 2}},
    )
    e.reset(seed=0)
    return e


def act(arm1=0, msg1=None):
    a = {"agent_0": 0, "agent_1": {"arm": arm1}, "agent_2": 1}
    if msg1 is not None:
        a["agent_1"]["messages"] = {"n": msg1}
    return a


@pytest.mark.parametrize(
    ("action", "match"),
    [
        (act(arm1=4), r"agent_1: arm: expected an int in \[0, 3\], got 4"),
        (act(arm1=-1), r"agent_1: arm: expected an int in \[0, 3\], got -1"),
        (act(arm1=1.5), r"agent_1: arm: expected an int"),
        (act(msg1=np.ones(3)), r"agent_1: messages\.n\.payload: expected shape \(2,\), got \(3,\)"),
        (act(msg1=np.array(["a", "b"])), r"agent_1: messages\.n\.payload: expected 2 numbers"),
        (act(msg1=np.array([1.0, np.nan])), r"agent_1: messages\.n\.payload: expected finite"),
        (act(msg1=np.array([np.inf, 0.0])), r"agent_1: messages\.n\.payload: expected finite"),
        (
            {"agent_0": 0, "agent_1": {"arm": 0, "messages": {"zz": [1, 2]}}, "agent_2": 0},
            r"agent_1: messages\.zz: unknown channel",
        ),
        ({"agent_0": 0, "agent_2": 1}, r"agent_1: action: missing"),
        ({"agent_0": 0, "agent_1": 0, "agent_2": 0, "agent_9": 0}, r"agent_9: agent: unknown"),
    ],
)
def test_bad_actions_name_agent_and_field(env, action, match):
    with pytest.raises(ActionError, match=match):
        env.step(action)


@pytest.mark.parametrize("payload", [np.array([np.nan, np.nan]), np.ones(7), "junk", None])
def test_send_zero_ignores_payload(env, payload):
    """send = 0 with any payload (NaN, wrong shape, not numbers) is accepted, delivers nothing
    and costs nothing; only agent_0's message arrives."""
    actions = act(msg1={"send": 0, "payload": payload})
    actions["agent_0"] = {"arm": 0, "messages": {"n": {"send": 1, "payload": [1.5, -2.0]}}}
    obs, _, _, _, infos = env.step(actions)
    n1 = obs["agent_1"]["channels"]["n"]
    assert n1["senders"].tolist() == [0, 2]  # complete graph K3
    assert n1["mask"].tolist() == [1, 0]
    assert n1["payload"].tolist() == [[1.5, -2.0], [0.0, 0.0]]
    n0 = obs["agent_0"]["channels"]["n"]
    assert n0["mask"].tolist() == [0, 0] and not n0["payload"].any()
    assert infos["agent_1"]["messages_sent"] == 0
    assert infos["agent_0"]["messages_sent"] == 2
    step = env.ledger["step"]
    assert step["messages"] == 2 and step["floats"] == 4 and step["cost"] == 2.0


@pytest.mark.parametrize(
    ("send", "match"),
    [
        (7, r"agent_1: messages\.n\.send: expected 0 or 1 \(Discrete\(2\)\), got 7"),
        (-1, r"agent_1: messages\.n\.send: expected 0 or 1.*got -1"),
        (0.5, r"agent_1: messages\.n\.send: expected 0 or 1.*got 0\.5"),
        ("yes", r"agent_1: messages\.n\.send: expected 0 or 1.*got 'yes'"),
        (np.array(2), r"agent_1: messages\.n\.send: expected 0 or 1.*got 2"),
    ],
)
def test_send_outside_discrete_2_is_rejected(env, send, match):
    with pytest.raises(ActionError, match=match):
        env.step(act(msg1={"send": send, "payload": np.ones(2)}))


@pytest.mark.parametrize("send", [1, True, np.int64(1), np.array(1), np.bool_(True)])
def test_send_accepts_discrete_2_values(env, send):
    obs, *_ = env.step(act(msg1={"send": send, "payload": np.array([3.0, 4.0])}))
    n0 = obs["agent_0"]["channels"]["n"]  # agent_0's neighbours: agents 1 and 2
    assert n0["mask"].tolist() == [1, 0] and n0["payload"][0].tolist() == [3.0, 4.0]


def test_unknown_message_key_is_rejected(env):
    with pytest.raises(ActionError, match=r"agent_1: messages\.n: unknown keys \['sned'\]"):
        env.step(act(msg1={"sned": 0, "payload": np.ones(2)}))


def test_stepping_after_the_horizon(env):
    env.step(act())
    env.step(act())
    assert env.agents == []
    with pytest.raises(HorizonError, match="horizon exceeded: the episode ended after 2 steps"):
        env.step(act())


def test_step_before_reset():
    e = fedbandit_env.make("FedBandit/Heterogeneous-v0")
    with pytest.raises(HorizonError, match="reset"):
        e.step({})


def test_vector_view_errors_name_run_and_agent():
    v = fedbandit_env.make_vec(
        "FedBandit/Heterogeneous-v0",
        num_runs=2,
        num_agents=3,
        num_arms=4,
        horizon=2,
        channels={"n": {"kind": "neighbors"}},
    )
    v.reset(seed=0)
    arms = np.zeros((2, 3), dtype=np.int64)
    arms[1, 2] = 7
    with pytest.raises(ActionError, match=r"run 1, agent_2: arm: expected an int in \[0, 3\]"):
        v.step(arms)
    payload = np.zeros((2, 3, 4))
    payload[0, 1, 2] = np.nan
    with pytest.raises(ActionError, match=r"run 0, agent_1: messages\.n\.payload: expected finite"):
        v.step(np.zeros((2, 3), dtype=np.int64), {"n": payload})
    with pytest.raises(ActionError, match=r"messages\.n\.payload: expected shape \(2, 3, 4\)"):
        v.step(np.zeros((2, 3), dtype=np.int64), {"n": np.zeros((2, 3, 5))})
    v.step(np.zeros((2, 3), dtype=np.int64))
    v.step(np.zeros((2, 3), dtype=np.int64))
    with pytest.raises(HorizonError):
        v.step(np.zeros((2, 3), dtype=np.int64))


def test_vector_view_send_mask_is_bool_or_0_1():
    def venv():
        v = fedbandit_env.make_vec(
            "FedBandit/Heterogeneous-v0",
            num_runs=2,
            num_agents=3,
            num_arms=4,
            channels={"n": {"kind": "neighbors", "dim": 2}},
        )
        v.reset(seed=0)
        return v

    arms = np.zeros((2, 3), dtype=np.int64)
    payload = np.arange(12.0).reshape(2, 3, 2)
    send = np.array([[1, 0, 1], [0, 7, 1]])
    with pytest.raises(
        ActionError, match=r"run 1, agent_1: messages\.n\.send: expected 0 or 1 \(or bool\), got 7"
    ):
        venv().step(arms, {"n": (send, payload)})
    with pytest.raises(ActionError, match=r"run 0, agent_0: messages\.n\.send: .*got -1"):
        venv().step(arms, {"n": (-send, payload)})
    with pytest.raises(
        ActionError, match=r"all agents: messages\.n\.send: expected bool .*got dtype float64"
    ):
        venv().step(arms, {"n": (send.astype(float), payload)})
    send[1, 1] = 1
    as_int = venv().step(arms, {"n": (send, payload)})[0].deliveries["n"]
    as_bool = venv().step(arms, {"n": (send.astype(bool), payload)})[0].deliveries["n"]
    assert np.array_equal(as_int.mask, as_bool.mask) and as_int.mask.sum() == 8
    assert np.array_equal(as_int.payload, as_bool.payload)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"num_agents": 0}, r"num_agents: expected an int >= 1, got 0"),
        ({"num_arms": 1}, r"num_arms: expected an int >= 2, got 1"),
        ({"horizon": -5}, r"horizon: expected an int >= 1"),
        ({"family": "mixed"}, r"family: expected one of"),
        ({"reward": "cauchy"}, r"reward\.kind: expected one of"),
        ({"reward": {"kind": "gaussian", "sigma": -1}}, r"reward\.sigma"),
        ({"means": [[0.1, 2.0], [0.3, 0.4], [0.5, 0.6]]}, r"means: expected values in \[0, 1\]"),
        ({"c2": -1}, r"c2: expected a finite non-negative number"),
        ({"topology": "hypercube"}, r"topology: .*hypercube"),
        (
            {"topology": nx.Graph([(0, 1), (2, 3), (3, 4)]), "num_agents": 5},
            r"topology: .*disconnected",
        ),
        (
            {"topology": "hybrid", "topology_kwargs": {"sizes": [2, 2]}},
            r"topology_kwargs\.sizes: expected component sizes summing to num_agents=3",
        ),
        ({"instance": "zipf"}, r"instance: expected one of"),
    ],
)
def test_bad_config_names_the_field(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        fedbandit_env.make("FedBandit/Heterogeneous-v0", **kwargs)


@pytest.mark.parametrize(
    ("env_id", "kwargs", "match"),
    [
        (
            "FedBandit/Heterogeneous-v0",
            {"means": [[0.1, 0.2], [0.3, 0.4]], "num_agents": 3},
            r"num_agents: means has shape \(2, 2\), so expected num_agents=2 .*got 3",
        ),
        (
            "FedBandit/Heterogeneous-v0",
            {"means": [[0.1, 0.2], [0.3, 0.4]], "num_arms": 5},
            r"num_arms: means has shape \(2, 2\), so expected num_arms=2 .*got 5",
        ),
        (
            "FedBandit/Homogeneous-v0",
            {"means": [0.1, 0.2, 0.3], "num_arms": 4},
            r"num_arms: means has shape \(3,\), so expected num_arms=3 .*got 4",
        ),
        (  # the preset fixes N=3, M=5
            "FedBandit/GossipTriangle-v0",
            {"means": [[0.1, 0.2], [0.3, 0.4], [0.5, 0.6]]},
            r"num_arms: means has shape \(3, 2\), so expected num_arms=2 .*got 5",
        ),
        ("FedBandit/Heterogeneous-v0", {"means": [[[0.5, 0.5]]]}, r"means: expected a vector"),
    ],
)
def test_means_conflicting_with_sizes_names_the_field(env_id, kwargs, match):
    with pytest.raises(ConfigError, match=match):
        fedbandit_env.make(env_id, **kwargs)


def test_means_set_the_sizes_and_agreeing_sizes_are_accepted():
    means = [[0.1, 0.2, 0.9], [0.3, 0.4, 0.2]]
    implied = fedbandit_env.make("FedBandit/Heterogeneous-v0", means=means).config
    explicit = fedbandit_env.make(
        "FedBandit/Heterogeneous-v0", means=means, num_agents=2, num_arms=np.int64(3)
    ).config
    for c in (implied, explicit):
        assert (c.num_agents, c.num_arms) == (2, 3)
        assert np.array_equal(c.fixed.means, means)
    vec = fedbandit_env.make("FedBandit/Homogeneous-v0", means=[0.2, 0.7], num_agents=4).config
    assert (vec.num_agents, vec.num_arms) == (4, 2) and vec.fixed.means.shape == (4, 2)
    default = fedbandit_env.make("FedBandit/Heterogeneous-v0").config
    assert (default.num_agents, default.num_arms) == (3, 5)


def test_homogeneous_rejects_heterogeneous_means():
    with pytest.raises(ConfigError, match="homogeneous family expects one mean vector"):
        fedbandit_env.make("FedBandit/Homogeneous-v0", means=[[0.1, 0.2], [0.3, 0.4]])


def test_agent_missing_channel_fails_before_first_step():
    from baselines.trivial import Flooding
    from fedbandit_env.policy import ParallelPolicyAdapter

    env = fedbandit_env.make("FedBandit/Heterogeneous-v0", channels=("gossip",))
    env.reset(seed=0)
    with pytest.raises(ConfigError, match=r"flooding: channels\.neighbors: expected a 'neighbors'"):
        ParallelPolicyAdapter(Flooding(), env).reset(0)
