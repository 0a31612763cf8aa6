"""PettingZoo API compliance of every registered id, and the registry's behaviour."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest
from pettingzoo.test import parallel_api_test

import fedbandit_env
from fedbandit_env import ConfigError, UnknownIdError
from tests.helpers import random_actions

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
    arrived = dict.fromkeys(["n", "g", "s", "f"], 0)
    for _ in range(20):
        for agent, o in obs.items():
            assert env.observation_space(agent).contains(o), agent
        actions = random_actions(env, rng)
        for agent, a in actions.items():
            assert env.action_space(agent).contains(a), agent
        obs, *_ = env.step(actions)
        for o in obs.values():
            ch = o["channels"]
            arrived["n"] += int(ch["n"]["mask"].sum())
            arrived["g"] += int(ch["g"]["received"])
            arrived["s"] += int(ch["s"]["count"] > 0)
            arrived["f"] += int(ch["f"]["mask"].sum())
    # the spaces were checked on observations that carry messages, not only empty ones
    assert all(count > 0 for count in arrived.values()), arrived


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


@pytest.fixture
def scratch_ids():
    """Ids registered by a test, removed from both registries afterwards."""
    from fedbandit_env import registration

    ids: list[str] = []
    yield ids
    pz = pytest.importorskip("pettingzoo.env_registry.registration")
    for env_id in ids:
        registration._REGISTRY.pop(env_id, None)
        pz.parallel_registry.pop(env_id, None)
        pz.aec_registry.pop(env_id, None)


def _register_scratch(env_id, num_agents):
    from fedbandit_env.envs import ACCEPTED, PARALLEL, VECTOR

    return fedbandit_env.register(
        env_id,
        PARALLEL,
        vector_entry_point=VECTOR,
        kwargs={"num_agents": num_agents, "num_arms": 4, "horizon": 7},
        accepted_kwargs=ACCEPTED,
    )


def test_register_adds_an_id_to_both_registries(scratch_ids):
    pz = pytest.importorskip("pettingzoo.env_registry.registration")
    scratch_ids.append("FedBanditTest/Scratch-v0")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a new id registers silently
        spec = _register_scratch("FedBanditTest/Scratch-v0", 2)
    assert fedbandit_env.spec("FedBanditTest/Scratch-v0") is spec
    assert "FedBanditTest/Scratch-v0" in fedbandit_env.list_envs()
    ours = fedbandit_env.make("FedBanditTest/Scratch-v0")
    theirs = pz.make("parallel", "FedBanditTest/Scratch-v0")
    vec = fedbandit_env.make_vec("FedBanditTest/Scratch-v0", num_runs=3)
    for env in (ours, theirs):
        assert isinstance(env, fedbandit_env.FedBanditParallelEnv)
        assert (env.config.num_agents, env.config.num_arms, env.config.horizon) == (2, 4, 7)
    assert (vec.num_runs, vec.num_agents) == (3, 2)
    assert pz.make("parallel", "FedBanditTest/Scratch-v0", horizon=3).config.horizon == 3
    aec = pz.make("aec", "FedBanditTest/Scratch-v0", max_cycles=3)
    assert aec.unwrapped.config.horizon == 3 and aec.possible_agents == ["agent_0", "agent_1"]


def test_reregistering_overrides_in_both_registries_with_one_warning(scratch_ids):
    pz = pytest.importorskip("pettingzoo.env_registry.registration")
    scratch_ids.append("FedBanditTest/Scratch-v0")
    _register_scratch("FedBanditTest/Scratch-v0", 2)
    with pytest.warns(UserWarning, match="Overriding environment 'FedBanditTest/Scratch-v0'") as rec:
        _register_scratch("FedBanditTest/Scratch-v0", 5)
    assert len(rec) == 1
    assert fedbandit_env.make("FedBanditTest/Scratch-v0").config.num_agents == 5
    assert pz.make("parallel", "FedBanditTest/Scratch-v0").config.num_agents == 5
    assert fedbandit_env.make_vec("FedBanditTest/Scratch-v0").num_agents == 5


def test_register_rejects_a_malformed_id():
    with pytest.raises(ConfigError, match=r"id: expected 'Namespace/Name-vN', got 'Scratch'"):
        fedbandit_env.register("Scratch", "fedbandit_env.parallel_env:FedBanditParallelEnv")


def test_pettingzoo_registry_applies_our_defaults_and_kwarg_check():
    pz = pytest.importorskip("pettingzoo.env_registry.registration")
    tri = pz.make("parallel", "FedBandit/GossipTriangle-v0", horizon=5)
    assert (tri.config.num_agents, tri.config.num_arms, tri.config.horizon) == (3, 5, 5)
    with pytest.raises(ConfigError, match=r"unknown keyword argument\(s\) \['num_arm'\].*num_arms"):
        pz.make("parallel", "FedBandit/Heterogeneous-v0", num_arm=3)
    with pytest.raises(ConfigError, match=r"unknown keyword argument\(s\) \['means'\]"):
        pz.make("parallel", "FedBandit/LinearContextual-v0", means=[0.1, 0.2])


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
