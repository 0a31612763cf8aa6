"""Ecosystem conformance (docs/rl.md): PettingZoo's own checkers on every registered
id (parallel and AEC API, seed, render, max_cycles, state), seeding across vectorized copies
(Gymnasium ``SyncVectorEnv``, SB3 ``make_vec_env``), flat spaces and infos, the RL views on the
linear family, garbage collection, and TorchRL's PettingZoo wrapper."""

from __future__ import annotations

import functools
import gc
import inspect
import types
import warnings
import weakref
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.spaces import flatdim
from pettingzoo.test import api_test, max_cycles_test, parallel_seed_test, render_test
from pettingzoo.test.state_test import state_test

import fedbandit_env
from fedbandit_env import ConfigError
from fedbandit_env.rl import GYM_ID, OneLearnerEnv, StatisticsObservationWrapper

SAMPLE_CSV = str(Path(__file__).parent / "data" / "diabetic_data_sample.csv")
EXTRA = {"FedBandit/DiabetesHospitals-v0": {"data_path": SAMPLE_CSV}}
# small sizes where the id allows them (the gossip and diabetes presets fix N and M)
SMALL = {
    "FedBandit/LinearPaper-v0": {"num_agents": 4},
    "FedBandit/Heterogeneous-v0": {"num_agents": 3},
    "FedBandit/Homogeneous-v0": {"num_agents": 3},
    "FedBandit/LinearContextual-v0": {"num_agents": 3},
    "FedBandit/ClassificationContextual-v0": {"num_agents": 3},
}
IDS = fedbandit_env.list_envs()
MULTI_ARMED_IDS = [i for i in IDS if fedbandit_env.make(i, **EXTRA.get(i, {})).config.linear is None]
LINEAR_IDS = [i for i in IDS if i not in MULTI_ARMED_IDS]


def _kwargs(env_id, horizon=12):
    return {"horizon": horizon, **SMALL.get(env_id, {}), **EXTRA.get(env_id, {})}


# ------------------------------------------------------------------ PettingZoo's checkers
@pytest.mark.parametrize("env_id", IDS)
def test_pettingzoo_checkers_on_every_id(env_id):
    kw = _kwargs(env_id)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the checkers' style hints
        make = functools.partial(fedbandit_env.make, env_id, **kw)
        if "num_cycles" in inspect.signature(parallel_seed_test).parameters:
            parallel_seed_test(make, num_cycles=10)
        else:  # pettingzoo < 1.25
            parallel_seed_test(make)
        api_test(fedbandit_env.make_aec(env_id, **kw), num_cycles=10)
        state_test(
            fedbandit_env.make_aec(env_id, **kw), fedbandit_env.make(env_id, **kw), num_cycles=10
        )
        max_cycles_test(
            types.SimpleNamespace(
                parallel_env=functools.partial(fedbandit_env.make, env_id, **EXTRA.get(env_id, {})),
                env=functools.partial(fedbandit_env.make_aec, env_id, **EXTRA.get(env_id, {})),
            )
        )


@pytest.mark.parametrize("env_id", IDS)
def test_render_checker_and_per_id_metadata(env_id, capsys):
    render_test(functools.partial(fedbandit_env.make_aec, env_id, **_kwargs(env_id)))
    assert "agent_0" in capsys.readouterr().out  # "human" prints
    meta = fedbandit_env.make(env_id, **_kwargs(env_id)).metadata
    assert meta["render_fps"] > 0 and set(meta["render_modes"]) == {"human", "ansi"}


def test_metadata_names_are_per_id():
    names = [fedbandit_env.make(i, **_kwargs(i)).metadata["name"] for i in IDS]
    assert len(set(names)) == len(IDS)
    assert fedbandit_env.make("FedBandit/Heterogeneous-v0").metadata["name"] == (
        "fedbandit_heterogeneous_v0"
    )


def test_pettingzoo_registry_has_both_apis():
    pz = pytest.importorskip("pettingzoo.env_registry.registration")
    aec = pz.make("aec", "FedBandit/GossipTriangle-v0", max_cycles=3)
    aec.reset(seed=0)
    assert aec.unwrapped.config.horizon == 3 and aec.agent_selection == "agent_0"
    par = pz.make("parallel", "FedBandit/GossipTriangle-v0", max_cycles=3)
    assert par.config.horizon == 3
    from fedbandit_env.parallel_env import env, parallel_env, raw_env

    assert env(max_cycles=2).unwrapped.config.horizon == 2
    assert raw_env(horizon=2).possible_agents == parallel_env(horizon=2).possible_agents


def test_max_cycles_is_an_alias_of_horizon():
    assert fedbandit_env.make("FedBandit/GossipPath10-v0", max_cycles=7).config.horizon == 7
    assert fedbandit_env.make_vec("FedBandit/Homogeneous-v0", max_cycles=7).horizon == 7
    assert fedbandit_env.FedBanditParallelEnv(max_cycles=5).config.horizon == 5
    assert fedbandit_env.make("FedBandit/Heterogeneous-v0", horizon=5, max_cycles=5)
    with pytest.raises(ConfigError, match=r"max_cycles: an alias of horizon.*horizon=5.*=6"):
        fedbandit_env.make("FedBandit/Heterogeneous-v0", horizon=5, max_cycles=6)
    with pytest.raises(ConfigError, match="max_cycles"):
        fedbandit_env.FedBanditParallelEnv(horizon=5, max_cycles=6)


# ------------------------------------------------------------------ spaces and infos
@pytest.mark.parametrize("env_id", IDS)
def test_flattened_observation_is_small_at_default_sizes(env_id):
    env = fedbandit_env.make(env_id, **EXTRA.get(env_id, {}))
    assert flatdim(env.observation_space("agent_0")) < 10**4
    assert flatdim(env.action_space("agent_0")) < 10**4


def test_infos_are_flat_numbers_and_last_arm_is_non_negative():
    env = fedbandit_env.make("FedBandit/Heterogeneous-v0", horizon=4, num_agents=3)
    obs, infos = env.reset(seed=3)
    space = env.observation_space("agent_0")
    assert space["last_arm"].start == 0 and space["step"].shape == ()
    assert all(o["pulled"] == 0 and o["last_arm"] == 0 for o in obs.values())
    for _ in range(4):
        actions = {a: {"arm": 2} for a in env.agents}
        obs, _, _, _, infos = env.step(actions)
        for agent, o in obs.items():
            assert o["pulled"] == 1 and o["last_arm"] == 2 and space.contains(o)
            assert all(type(v) in (int, float) for v in infos[agent].values()), infos[agent]
            assert infos[agent]["run_seed"] == 3
    assert env.ledger["total"]["messages"] == 0  # the run-level ledger accessor
    assert env.state_space.contains(env.state())


def test_policy_adapter_rebuilds_no_pull_as_minus_one():
    env = fedbandit_env.make("FedBandit/Heterogeneous-v0", horizon=2, num_agents=2)
    obs, _ = env.reset(seed=0)
    assert (obs["agent_0"]["last_arm"], obs["agent_0"]["pulled"]) == (0, 0)
    decoded = fedbandit_env.ParallelPolicyAdapter(None, env).observation_from_dicts(obs)
    assert decoded.last_arm.tolist() == [[-1, -1]] and decoded.step == 0
    obs, *_ = env.step({"agent_0": 0, "agent_1": 1})
    decoded = fedbandit_env.ParallelPolicyAdapter(None, env).observation_from_dicts(obs)
    assert decoded.last_arm.tolist() == [[0, 1]] and decoded.step == 1


# ------------------------------------------------------------------ seeding
def test_gymnasium_sync_vector_env_plays_distinct_run_seeds():
    venv = gym.vector.SyncVectorEnv(
        [functools.partial(gym.make, GYM_ID, peers="ucb1_shared", horizon=3) for _ in range(4)]
    )
    _, info = venv.reset(seed=0)
    played = {(k, int(s)) for k, s in enumerate(info["run_seed"])}
    assert sorted(s for _, s in played) == [0, 1, 2, 3]
    for _ in range(4 * 4 - 1):  # horizon 3 + the autoreset step: four episodes per sub-env
        _, _, _, _, info = venv.step(venv.action_space.sample())
        played |= {(k, int(s)) for k, s in enumerate(info["run_seed"])}
    seeds = [s for _, s in played]
    assert len(played) == 16 and len(set(seeds)) == 16, sorted(played)


def test_sb3_make_vec_env_plays_distinct_run_seeds():
    pytest.importorskip("stable_baselines3")
    from stable_baselines3.common.env_util import make_vec_env

    venv = make_vec_env(
        OneLearnerEnv, n_envs=4, seed=0, env_kwargs={"peers": "ucb1_shared", "horizon": 3}
    )
    venv.reset()
    played = {(k, int(info["run_seed"])) for k, info in enumerate(venv.reset_infos)}
    for _ in range(4 * 3 - 1):  # SB3 autoresets within the last step of an episode
        _, _, dones, _ = venv.step(np.array([venv.action_space.sample() for _ in range(4)]))
        for k, info in enumerate(venv.reset_infos if dones.any() else []):
            played.add((k, int(info["run_seed"])))
    seeds = [s for _, s in played]
    assert len(played) == 16 and len(set(seeds)) == 16, sorted(played)


def test_agents_vec_env_and_vector_view_continue_the_seeded_stream():
    pytest.importorskip("stable_baselines3")
    from fedbandit_env.rl.sb3_vec_env import AgentsVecEnv

    seen = []
    for seed in (0, 2):  # two adapters of 2 copies: seeded run seeds 0, 1 and 2, 3
        env = AgentsVecEnv("FedBandit/Heterogeneous-v0", num_copies=2, horizon=2)
        env.seed(seed)
        env.reset()
        seen += env.run_seeds
        for _ in range(3 * 2):  # three autoresets
            env.step(np.zeros(env.num_envs, dtype=np.int64))
            if env.run_seeds not in [seen[-2:]]:
                seen += env.run_seeds
    assert len(seen) == 16 and len(set(seen)) == 16, seen
    venv = fedbandit_env.make_vec("FedBandit/Heterogeneous-v0", num_runs=3)
    venv.reset(seed=[4, 5, 6])
    venv.reset()
    first = list(venv.seeds)
    venv.reset(seed=[4, 5, 6])
    venv.reset()
    assert venv.seeds == first and not set(first) & {4, 5, 6, 7, 8, 9}


def _views():
    kw = {"num_agents": 2, "horizon": 3}
    yield "parallel", fedbandit_env.make("FedBandit/Heterogeneous-v0", **kw).reset
    yield "vector", fedbandit_env.make_vec("FedBandit/Heterogeneous-v0", num_runs=2, **kw).reset
    yield "aec", fedbandit_env.make_aec("FedBandit/Heterogeneous-v0", **kw).reset
    wrapper = StatisticsObservationWrapper(fedbandit_env.make("FedBandit/Heterogeneous-v0", **kw))
    yield "wrapper", wrapper.reset
    yield "one_learner", OneLearnerEnv(**kw).reset


@pytest.mark.parametrize("bad", [-1, 1.5, "3", True, [1], None])
def test_every_view_accepts_only_non_negative_integer_seeds(bad):
    for name, reset in _views():
        reset(seed=np.uint8(3))
        reset(seed=np.int64(2**40))
        if bad is None:
            reset(seed=None)
            continue
        with pytest.raises((TypeError, ValueError), match="seed") as err:
            reset(seed=bad)
        if name != "vector" or not isinstance(bad, list):  # a list is the vector's run seeds
            assert isinstance(err.value, TypeError) == (bad != -1), (name, bad)


def test_agents_vec_env_validates_its_seed():
    pytest.importorskip("stable_baselines3")
    from fedbandit_env.rl.sb3_vec_env import AgentsVecEnv

    env = AgentsVecEnv("FedBandit/Heterogeneous-v0", num_copies=1, horizon=2)
    with pytest.raises(ValueError, match="seed"):
        env.seed(-3)
    with pytest.raises(TypeError, match="seed"):
        env.seed(2.5)
    assert env.seed(np.int32(4)) == [4, 4, 4]


def test_reset_options_are_validated():
    kw = {"num_agents": 2, "horizon": 3}
    venv = fedbandit_env.make_vec("FedBandit/Heterogeneous-v0", **kw)
    with pytest.raises(ConfigError, match=r"options: unknown key\(s\) \['mask'\]; accepted: none"):
        venv.reset(seed=0, options={"mask": 1})
    with pytest.raises(ConfigError, match=r"options: unknown key\(s\) \['x'\]"):
        OneLearnerEnv(**kw).reset(seed=0, options={"x": 1})
    env = fedbandit_env.make("FedBandit/Heterogeneous-v0", **kw)
    with pytest.warns(UserWarning, match=r"options: unknown key\(s\) \['x'\].*ignored"):
        env.reset(seed=0, options={"x": 1})
    with pytest.raises(TypeError, match="options"):
        env.reset(seed=0, options=3)
    venv.reset(seed=0, options={})


# ------------------------------------------------------------------ RL views on the linear family
@pytest.mark.parametrize("env_id", LINEAR_IDS)
def test_rl_views_refuse_the_linear_family(env_id):
    kw = _kwargs(env_id)
    with pytest.raises(ConfigError, match=r"family: expected 'heterogeneous' or 'homogeneous'"):
        StatisticsObservationWrapper(fedbandit_env.make(env_id, **kw))
    with pytest.raises(ConfigError, match="family"):
        OneLearnerEnv(env_id, peers="linucb", **kw)
    pytest.importorskip("stable_baselines3")
    from fedbandit_env.rl.sb3_vec_env import AgentsVecEnv

    with pytest.raises(ConfigError, match="family"):
        AgentsVecEnv(env_id, **kw)


# ------------------------------------------------------------------ memory
def test_environments_are_garbage_collected():
    refs = []
    for _ in range(50):
        env = fedbandit_env.make("FedBandit/Heterogeneous-v0", horizon=3)
        env.observation_space("agent_0"), env.action_space("agent_1")
        wrapper = StatisticsObservationWrapper(env)
        wrapper.observation_space("agent_0"), wrapper.action_space("agent_0")
        refs.append(weakref.ref(env))
        del env, wrapper
    gc.collect()
    assert sum(r() is not None for r in refs) == 0


# ------------------------------------------------------------------ TorchRL
def test_torchrl_pettingzoo_wrapper_rollout():
    pytest.importorskip("torchrl", reason="torchrl is not installed (optional, test extra)")
    from torchrl.envs.libs.pettingzoo import PettingZooWrapper

    channels = ("neighbors", "gossip", "server", "flood")
    env = fedbandit_env.make("FedBandit/Heterogeneous-v0", num_agents=3, horizon=5, channels=channels)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "tested with PettingZoo 1.24.3"
        wrapped = PettingZooWrapper(env, return_state=True, categorical_actions=True)
        td = wrapped.rollout(5, break_when_any_done=False)
    assert td.batch_size[0] == 5 and "state" in td.keys()
