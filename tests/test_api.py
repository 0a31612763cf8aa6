"""PettingZoo API compliance of every registered id, and the registry's behaviour."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from pettingzoo.test import parallel_api_test

import fedbandit_env
from fedbandit_env import ConfigError, UnknownIdError

SMALL = {"horizon": 60}
SAMPLE_CSV = str(Path(__file__).parent / "data" / "diabetic_data_sample.csv")
EXTRA = {"FedBandit/DiabetesHospitals-v0": {"data_path": SAMPLE_CSV}}


@pytest.mark.parametrize("env_id", fedbandit_env.list_envs())
def test_parallel_api_every_registered_id(env_id):
    env = fedbandit_env.make(env_id, **SMALL, **EXTRA.get(env_id, {}))
    parallel_api_test(env, num_cycles=100)
    assert env.agents == []  # truncated at the horizon


@pytest.mark.parametrize(
    "channels",
    [
        ("neighbors", "gossip"),
        ("server",),
        {"f": {"kind": "flood", "ttl": 2}},
        {"h": {"kind": "hierarchical", "dim": 3}},
        (),
    ],
)
def test_parallel_api_each_channel_kind(channels):
    kwargs = {"num_agents": 6, "num_arms": 4, "horizon": 30, "topology": "ring"}
    if isinstance(channels, dict) and "h" in channels:
        kwargs.update(topology="hybrid", topology_kwargs={"sizes": [3, 3]})
    env = fedbandit_env.make("FedBandit/Heterogeneous-v0", channels=channels, **kwargs)
    parallel_api_test(env, num_cycles=40)


def test_observations_are_in_their_spaces():
    env = fedbandit_env.make(
        "FedBandit/Heterogeneous-v0",
        num_agents=5,
        num_arms=3,
        horizon=20,
        topology="star",
        channels={"n": "neighbors", "g": "gossip", "s": "server", "f": "flood"},
    )
    obs, _ = env.reset(seed=1)
    rng = np.random.default_rng(0)
    for _ in range(20):
        for agent, o in obs.items():
            assert env.observation_space(agent).contains(o), agent
        actions = {a: env.action_space(a).sample() for a in env.agents}
        obs, *_ = env.step(actions)
    assert rng is not None


def test_registry_lists_and_makes_presets():
    ids = fedbandit_env.list_envs()
    for expected in [
        "FedBandit/Heterogeneous-v0",
        "FedBandit/Homogeneous-v0",
        "FedBandit/GossipTriangle-v0",
        "FedBandit/GossipPath10-v0",
    ]:
        assert expected in ids
    tri = fedbandit_env.make("FedBandit/GossipTriangle-v0")
    assert tri.num_agents_total == 3 and tri.config.num_arms == 5
    assert tri.config.topology.lambda2 == pytest.approx(0.5)
    path = fedbandit_env.make("FedBandit/GossipPath10-v0")
    assert path.config.topology.lambda2 == pytest.approx(0.9946, abs=1e-4)


def test_registered_in_pettingzoo_registry():
    pz = pytest.importorskip("pettingzoo.env_registry.registration")
    env = pz.make("parallel", "FedBandit/Heterogeneous-v0", horizon=5)
    assert isinstance(env, fedbandit_env.FedBanditParallelEnv)


def test_unknown_id_lists_registered_ids():
    with pytest.raises(UnknownIdError, match="FedBandit/Heterogeneous-v0"):
        fedbandit_env.make("FedBandit/Heterogenous-v0")


def test_unknown_kwarg_lists_accepted_kwargs():
    with pytest.raises(ConfigError, match=r"unknown keyword argument\(s\) \['num_arm'\].*num_arms"):
        fedbandit_env.make("FedBandit/Heterogeneous-v0", num_arm=3)


def test_render_ansi_shows_agents_and_ledger():
    env = fedbandit_env.make(
        "FedBandit/Homogeneous-v0", num_agents=2, horizon=3, render_mode="ansi"
    )
    env.reset(seed=0)
    env.step({"agent_0": 1, "agent_1": {"arm": 0, "messages": {"neighbors": np.ones(5)}}})
    text = env.render()
    assert "step 1/3" in text and "agent_1" in text and "messages 1" in text


def test_env_pickles_for_multiprocess_use():
    import pickle

    env = fedbandit_env.make("FedBandit/GossipTriangle-v0", horizon=10)
    clone = pickle.loads(pickle.dumps(env))
    a, _ = env.reset(seed=4)
    b, _ = clone.reset(seed=4)
    assert clone.config.num_agents == 3
    assert np.array_equal(a["agent_1"]["last_reward"], b["agent_1"]["last_reward"])
    ra = env.step(dict.fromkeys(env.agents, 2))[1]
    rb = clone.step(dict.fromkeys(clone.agents, 2))[1]
    assert ra == rb
