"""The agents-as-VecEnv adapter (fedbandit_env.rl.sb3_vec_env): SB3 VecEnv contract (reset and
reset infos, step/autoreset infos, seeding, attribute plumbing, render, SB3's VecMonitor),
shapes and dtypes."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("stable_baselines3")

from stable_baselines3.common.monitor import Monitor  # noqa: E402
from stable_baselines3.common.vec_env import VecEnv, VecMonitor  # noqa: E402

import fedbandit_env  # noqa: E402
from fedbandit_env.reset_args import SeedContinuation  # noqa: E402
from fedbandit_env.rl import statistics_channel  # noqa: E402
from fedbandit_env.rl.sb3_vec_env import AgentsVecEnv  # noqa: E402

C, N, M, T = 3, 4, 5, 12
KW = {"num_agents": N, "num_arms": M, "horizon": T, "instance_seed": None, "topology": "ring"}


def _env(**kw):
    return AgentsVecEnv("FedBandit/Heterogeneous-v0", num_copies=C, **{**KW, **kw})


def _continued(seed, autoresets=1):
    """Run seeds of the copies after ``autoresets`` autoresets: the stream seeded by ``seed``
    continues (Gymnasium's convention), so they are drawn, not ``seed + C``."""
    stream = SeedContinuation()
    seeds = stream.batch(seed, C)
    for _ in range(autoresets):
        seeds = stream.batch(None, C)
    return seeds


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
    assert env.run_seeds == _continued(7, autoresets=2)


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


def test_reset_returns_only_obs_and_stores_reset_infos():
    env = _env()
    env.seed(5)
    obs = env.reset()
    assert isinstance(obs, np.ndarray) and obs.shape == (C * N, 4 * M + 1)
    assert env.reset_infos == [{"run_seed": 5 + k // N} for k in range(C * N)]
    for t in range(T):  # the last step autoresets: the reset infos are the next episode's
        env.step(np.full(C * N, t % M))
    assert env.reset_infos == [{"run_seed": _continued(5)[k // N]} for k in range(C * N)]
    # reset cancels a pending step_async
    env.step_async(np.zeros(C * N, dtype=np.int64))
    env.reset()
    with pytest.raises(fedbandit_env.ConfigError, match="call step_async"):
        env.step_wait()
    # reset options are not supported: a clear error, and they are consumed
    env.set_options({"instance": 3})
    unknown = r"reset \(set_options\): options: unknown key\(s\) \['instance'\]; accepted: none"
    with pytest.raises(fedbandit_env.ConfigError, match=unknown):
        env.reset()
    assert env.reset().shape == (C * N, 4 * M + 1)
    with pytest.raises(fedbandit_env.ConfigError, match=f"actions: expected {C * N} integer"):
        env.step(np.zeros(C * N - 1, dtype=np.int64))
    with pytest.raises(fedbandit_env.ConfigError, match="actions: expected"):
        env.step(np.zeros(C * N))  # floats are not arms


def test_attribute_plumbing_acts_once_on_the_shared_engine():
    env = _env()
    env.seed(20)
    out = env.env_method("reset", indices=[0, 1, 2])
    assert len(out) == 3 and all(np.array_equal(o, out[0]) for o in out)
    assert env.run_seeds == [20 + c for c in range(C)]  # one reset, not three
    assert env.get_attr("num_copies", indices=[1, 2]) == [C, C]
    assert env.has_attr("num_agents") and not env.has_attr("no_such_attribute")
    with pytest.raises(fedbandit_env.ConfigError, match=r"indices: expected .* got \[12\]"):
        env.get_attr("num_copies", indices=[C * N])
    env.set_attr("reward_mode", "regret")
    assert env.get_attr("reward_mode", indices=0) == ["regret"]
    with pytest.raises(fedbandit_env.ConfigError, match="set_attr: indices"):
        env.set_attr("reward_mode", "local", indices=[0])
    assert env.reward_mode == "regret"
    assert env.env_is_wrapped(Monitor, indices=3) == [False]
    with pytest.warns(UserWarning, match="no `render_mode`"):
        assert env.render() is None


def test_sb3_vec_monitor_sees_whole_episodes():
    env = VecMonitor(_env(reward_mode="regret"))
    env.seed(0)
    env.reset()
    total = np.zeros(C * N)
    for t in range(T):
        _, rewards, dones, infos = env.step((np.arange(C * N) + t) % M)
        total += rewards
    assert dones.all()
    episodes = [i["episode"] for i in infos]
    assert all(e["l"] == T for e in episodes)
    assert np.allclose([e["r"] for e in episodes], total, atol=1e-4)
