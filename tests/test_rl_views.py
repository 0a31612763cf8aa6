"""RL views (fedbandit_env.rl): features, the PettingZoo observation wrapper and the Gymnasium
single-agent view FedBandit/OneLearner-v0 (SB3's check_env, seeding, peers)."""

from __future__ import annotations

import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest
from pettingzoo.test import parallel_api_test

import fedbandit_env
from fedbandit_env import ConfigError
from fedbandit_env.reset_args import SeedContinuation
from fedbandit_env.rl import (
    STATISTICS_PROTOCOL,
    StatisticsObservationWrapper,
    declared_protocol,
    statistics_channel,
)

KW = {"num_agents": 4, "num_arms": 3, "horizon": 30, "topology": "ring"}


def _wrapped(**kw):
    env = fedbandit_env.make(
        "FedBandit/Heterogeneous-v0", **{**KW, "channels": statistics_channel(3), **kw}
    )
    return StatisticsObservationWrapper(env)


def test_parallel_wrapper_passes_pettingzoo_api_test():
    parallel_api_test(_wrapped(), num_cycles=40)


def test_features_are_the_statistics():
    env = _wrapped()
    obs, _ = env.reset(seed=2)
    assert all(o.shape == (13,) and o.dtype == np.float32 for o in obs.values())
    assert not any(o.any() for o in obs.values())
    arms = {"agent_0": 1, "agent_1": 2, "agent_2": 2, "agent_3": 0}
    total = {a: 0.0 for a in arms}
    for _ in range(5):
        obs, rewards, *_ = env.step(arms)
        total = {a: total[a] + rewards[a] for a in arms}
    o = obs["agent_0"]
    assert o[1] == pytest.approx(np.log1p(5) / np.log1p(30))  # own count of arm 1
    assert o[0] == o[2] == 0.0
    assert o[3 + 1] == pytest.approx(total["agent_0"] / 5)  # own mean of arm 1 (Bernoulli)
    # neighbours of agent_0 on the ring are agents 1 and 3; their latest message is one step old
    assert o[6 + 2] == pytest.approx(np.log1p(4) / np.log1p(2 * 30))
    assert o[6 + 0] == pytest.approx(np.log1p(4) / np.log1p(2 * 30))
    assert o[6 + 1] == 0.0
    assert o[12] == pytest.approx(5 / 30)


def test_without_channel_nothing_is_shared_and_sharing_requires_the_channel():
    env = StatisticsObservationWrapper(
        fedbandit_env.make("FedBandit/Heterogeneous-v0", **KW, channels=())
    )
    env.reset(seed=0)
    for _ in range(5):
        obs, *_ = env.step(dict.fromkeys(env.agents, 0))
    assert not obs["agent_0"][6:12].any()
    with pytest.raises(ConfigError, match="channels.neighbors"):
        StatisticsObservationWrapper(
            fedbandit_env.make("FedBandit/Heterogeneous-v0", **KW, channels=()), share=True
        )


def _one_learner(**kw):
    return gym.make("FedBandit/OneLearner-v0", **{**KW, **kw})


def test_single_agent_view_passes_sb3_check_env():
    check_env = pytest.importorskip("stable_baselines3.common.env_checker").check_env
    env = _one_learner()
    check_env(env.unwrapped, warn=True)
    check_env(env)  # through gymnasium.make's wrappers too


def _episode(env, seed, arms):
    obs, _ = env.reset(seed=seed)
    out = [np.append(obs, [0.0, 0.0])]
    for a in arms:
        obs, r, term, trunc, info = env.step(a)
        out.append(np.append(obs, [r, info["cumulative_regret"]]))
    assert trunc and not term
    return np.stack(out)


def test_single_agent_view_is_seeded_and_matches_the_team_run():
    arms = [t % 3 for t in range(30)]
    a = _episode(_one_learner(), 5, arms)
    b = _episode(_one_learner(), 5, arms)
    c = _episode(_one_learner(), 6, arms)
    assert np.array_equal(a, b) and not np.array_equal(a, c)
    # peers are ucb1_shared and the learner speaks its protocol: if the learner plays exactly
    # what ucb1_shared would have played, the run equals ucb1_shared on all agents
    venv = fedbandit_env.make_vec(
        "FedBandit/Heterogeneous-v0", num_runs=1, **KW, channels=statistics_channel(3)
    )
    team = fedbandit_env.make_agent("ucb1_shared")
    obs, _ = venv.reset(seed=5)
    team.reset(venv.facts, venv.agent_rng())
    team_arms = []
    for _ in range(30):
        action = team.act(obs)
        team_arms.append(int(action.arms[0, 0]))
        obs, _, _, _, info = venv.step(action.arms, action.messages)
    d = _episode(_one_learner(), 5, team_arms)
    assert d[-1, -1] == pytest.approx(info.cumulative_regret[0, 0])


def test_single_agent_view_regret_reward_and_errors():
    env = _one_learner(reward_mode="regret", learner=2)
    env.reset(seed=0)
    _, r, _, _, info = env.step(0)
    assert r == -info["instant_regret"]
    with pytest.raises(ConfigError, match="learner"):
        _one_learner(learner=4)
    with pytest.raises(ConfigError, match="reward_mode"):
        _one_learner(reward_mode="bonus")
    with pytest.raises(ConfigError, match="agent_2: arm"):
        env.step(7)


def test_single_agent_view_does_not_mix_statistics_into_another_protocol():
    # dp_dec_ucb sends consensus estimates over a 'neighbors' channel of dim 2M: the statistics
    # channel's name, kind and dim, but not its protocol
    kw = {**KW, "env_id": "FedBandit/Homogeneous-v0", "peers": "dp_dec_ucb"}
    assert declared_protocol(fedbandit_env.make_agent("dp_dec_ucb")) is None
    assert declared_protocol(fedbandit_env.make_agent("ucb1_shared")) == STATISTICS_PROTOCOL
    env = _one_learner(**kw).unwrapped
    assert env.venv.facts.channels["neighbors"]["dim"] == 6 and not env.features.share
    obs, _ = env.reset(seed=1)
    topology = env.venv.facts.topology
    around = topology.neighbors[0][topology.neighbors[0] >= 0]  # agent 0's neighbours
    degrees = np.asarray(topology.degrees)
    heard_by_learner = 0
    for t in range(12):
        obs, *_ = env.step(t % 3)
        # dp_dec_ucb asks for the aggregating delivery: per receiver, the sum and the count of
        # the messages that arrived
        delivered = env._obs.deliveries["neighbors"]
        # the learner is silent: its neighbours hear from their other neighbours only ...
        assert np.all(delivered.count[0][around] <= degrees[around] - 1)
        heard_by_learner += int(delivered.count[0, 0])
        # ... and it does not read the peers' consensus estimates as counts and sums
        assert not obs[6:12].any()
    assert heard_by_learner == 2 * 12  # its two ring neighbours did talk to it every step
    with pytest.raises(ConfigError, match="agent_0: channels.neighbors: the peers 'dp_dec_ucb'"):
        _one_learner(**kw, share=True)
    with pytest.raises(ConfigError, match="share: expected None, True or False"):
        _one_learner(share=1)
    # peers that declare the statistics protocol (or use no channel) are shared with
    assert _one_learner().unwrapped.features.share
    assert _one_learner(peers="ucb1").unwrapped.features.share


@pytest.mark.filterwarnings("ignore:.*render_mode='rgb_array'")  # SB3 tries it first
def test_single_agent_view_works_with_sb3_make_vec_env():
    env_util = pytest.importorskip("stable_baselines3.common.env_util")
    venv = env_util.make_vec_env(
        "FedBandit/OneLearner-v0", n_envs=2, seed=4, env_kwargs={**KW, "horizon": 5}
    )
    obs = venv.reset()
    assert obs.shape == (2, 13) and obs.dtype == np.float32
    for _ in range(5):
        obs, rewards, dones, infos = venv.step(np.array([0, 1]))
    assert dones.all() and "terminal_observation" in infos[0]
    # seeds 4, 5, then the autoreset continues each sub-env's seeded stream (not 4 + 1, 5 + 1)
    expected = []
    for seed in (4, 5):
        stream = SeedContinuation()
        stream.next(seed)
        expected.append(stream.next())
    assert [e.unwrapped.run_seed for e in venv.envs] == expected
    assert [i["run_seed"] for i in venv.reset_infos] == expected


def _fresh_python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)


def test_gymnasium_id_is_registered_by_importing_fedbandit_env_or_the_module_prefix():
    # Gymnasium >= 1.0 loads no env plugins from entry points; an id is known once the package
    # that registers it is imported, or when gymnasium.make gets the "module:id" form
    make = "gymnasium.make({!r}, num_agents=3, num_arms=3, horizon=5).reset(seed=0)"
    done = _fresh_python(
        "import gymnasium\n"
        "assert 'FedBandit/OneLearner-v0' not in gymnasium.registry\n"
        + make.format("fedbandit_env:FedBandit/OneLearner-v0")
        + "\nassert 'FedBandit/OneLearner-v0' in gymnasium.registry\n"
        + make.format("FedBandit/OneLearner-v0")
    )
    assert done.returncode == 0, done.stderr
    done = _fresh_python(
        "import gymnasium, fedbandit_env\n"
        "assert gymnasium.spec('FedBandit/OneLearner-v0').entry_point == "
        "'fedbandit_env.rl.single_agent:OneLearnerEnv'\n" + make.format("FedBandit/OneLearner-v0")
    )
    assert done.returncode == 0, done.stderr
    # without either, Gymnasium's own error names the namespace (documented in docs/rl.md)
    done = _fresh_python("import gymnasium\n" + make.format("FedBandit/OneLearner-v0"))
    assert done.returncode == 1 and "Namespace FedBandit not found" in done.stderr
