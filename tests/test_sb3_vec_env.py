"""The agents-as-VecEnv adapter (fedbandit_env.rl.sb3_vec_env): SB3 VecEnv contract, shapes,
dtypes, autoreset and seeding."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("stable_baselines3")

from stable_baselines3.common.vec_env import VecEnv  # noqa: E402

import fedbandit_env  # noqa: E402
from fedbandit_env.rl import statistics_channel  # noqa: E402
from fedbandit_env.rl.sb3_vec_env import AgentsVecEnv  # noqa: E402

C, N, M, T = 3, 4, 5, 12
KW = {"num_agents": N, "num_arms": M, "horizon": T, "instance_seed": None, "topology": "ring"}


def _env(**kw):
    return AgentsVecEnv("FedBandit/Heterogeneous-v0", num_copies=C, **{**KW, **kw})


def _play(env, seed, episodes=2):
    env.seed(seed)
    obs = [env.reset()]
    rewards, dones, infos = [], [], []
    for t in range(episodes * T):
        actions = (np.arange(C * N) + t) % M
        o, r, d, i = env.step(actions)
        obs.append(o)
        rewards.append(r)
        dones.append(d)
        infos.append(i)
    return np.stack(obs), np.stack(rewards), np.stack(dones), infos


def test_shapes_dtypes_and_spaces():
    env = _env()
    assert isinstance(env, VecEnv) and env.num_envs == C * N
    assert env.observation_space.shape == (4 * M + 1,) and env.action_space.n == M
    obs, rewards, dones, infos = _play(env, 0, episodes=1)
    assert obs.shape == (T + 1, C * N, 4 * M + 1) and obs.dtype == np.float32
    assert rewards.shape == (T, C * N) and rewards.dtype == np.float32
    assert dones.shape == (T, C * N) and dones.dtype == bool
    assert all(isinstance(i, list) and len(i) == C * N for i in infos)
    assert all(env.observation_space.contains(o) for o in obs.reshape(-1, 4 * M + 1))
    assert env.get_attr("num_agents") == [N] * (C * N)
    assert env.env_is_wrapped(object) == [False] * (C * N)


def test_autoreset_at_the_horizon():
    env = _env()
    obs, _, dones, infos = _play(env, 7, episodes=2)
    assert not dones[: T - 1].any() and dones[T - 1].all() and not dones[T : 2 * T - 1].any()
    last = infos[T - 1]
    assert all(i["TimeLimit.truncated"] for i in last)
    terminal = np.stack([i["terminal_observation"] for i in last])
    assert np.allclose(terminal[:, -1], 1.0)  # time fraction t / T = 1 at the end
    assert not obs[T].any()  # the returned observation is the next episode's first
    assert env.run_seeds == [7 + 2 * C + c for c in range(C)]  # two autoresets: s + C, s + 2C


def test_seeding_is_forwarded_and_reproducible():
    env = _env()
    seeds = env.seed(11)
    assert seeds == [11 + c for c in range(C) for _ in range(N)]
    a = _play(_env(), 11)
    b = _play(_env(), 11)
    c = _play(_env(), 12)
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])
    assert not np.array_equal(a[1], c[1])
    # copy c of the adapter is run seed 11 + c of the plain vector view
    venv = fedbandit_env.make_vec(
        "FedBandit/Heterogeneous-v0", num_runs=1, **KW, channels=statistics_channel(M)
    )
    venv.reset(seed=12)
    for t in range(T):
        arms = ((np.arange(C * N) + t) % M).reshape(C, N)[1:2]
        _, rewards, *_ = venv.step(arms)
        assert np.array_equal(rewards[0].astype(np.float32), a[1][t, N : 2 * N])


def test_regret_reward_mode():
    env = _env(reward_mode="regret")
    _, rewards, _, _ = _play(env, 0, episodes=1)
    assert (rewards <= 0).all() and (rewards < 0).any()
    with pytest.raises(fedbandit_env.ConfigError, match="reward_mode"):
        _env(reward_mode="bonus")
    with pytest.raises(fedbandit_env.ConfigError, match="num_copies"):
        AgentsVecEnv("FedBandit/Heterogeneous-v0", num_copies=0)
