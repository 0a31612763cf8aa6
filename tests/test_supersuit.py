"""The optional SuperSuit path (docs/rl.md): StatisticsObservationWrapper ->
pettingzoo_env_to_vec_env_v1 -> concat_vec_envs_v1(base_class="stable_baselines3").

Skipped unless supersuit and stable-baselines3 are installed (the ``supersuit`` extra). Checked
against supersuit 3.11.0: seeding through SB3 (``vec.seed``, ``vec.reset(seed=...)``,
``PPO(seed=...)``) raises AttributeError because ConcatVecEnv has no ``seed``; seeding the inner
ConcatVecEnv (``vec.venv.reset(seed=s)``) works, and then the path plays the same runs as our
own adapter."""

from __future__ import annotations

import numpy as np
import pytest

ss = pytest.importorskip("supersuit")
pytest.importorskip("stable_baselines3")

from stable_baselines3 import PPO  # noqa: E402

import fedbandit_env  # noqa: E402
from fedbandit_env.rl import StatisticsObservationWrapper, statistics_channel  # noqa: E402
from fedbandit_env.rl.sb3_vec_env import AgentsVecEnv  # noqa: E402

KW = {"num_agents": 4, "num_arms": 3, "horizon": 20, "instance_seed": None, "topology": "ring"}


def _supersuit(copies=2):
    env = fedbandit_env.make("FedBandit/Heterogeneous-v0", **KW, channels=statistics_channel(3))
    vec = ss.pettingzoo_env_to_vec_env_v1(StatisticsObservationWrapper(env))
    return ss.concat_vec_envs_v1(vec, copies, num_cpus=0, base_class="stable_baselines3")


def _rewards(vec, first_obs, steps=20):
    obs, rewards = [first_obs], []
    for t in range(steps):
        o, r, d, _ = vec.step((np.arange(8) + t) % 3)
        obs.append(o)
        rewards.append(r)
    assert np.asarray(d).astype(bool).all()  # supersuit's dones are uint8, ours bool
    return np.stack(obs[:-1]), np.stack(rewards)


def test_supersuit_path_matches_our_adapter_when_seeded_through_the_inner_env():
    vec = _supersuit()
    assert vec.num_envs == 8
    ss_obs, ss_rewards = _rewards(vec, vec.venv.reset(seed=5)[0])
    ours = AgentsVecEnv("FedBandit/Heterogeneous-v0", num_copies=2, **KW)
    ours.seed(5)
    our_obs, our_rewards = _rewards(ours, ours.reset())
    assert np.array_equal(ss_rewards, our_rewards)
    assert np.array_equal(ss_obs, our_obs)


def test_ppo_trains_on_the_supersuit_path_unseeded():
    model = PPO("MlpPolicy", _supersuit(), n_steps=20, batch_size=160, n_epochs=1, device="cpu")
    model.learn(total_timesteps=320)
    assert model.num_timesteps >= 320
