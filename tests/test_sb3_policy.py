"""baselines.SB3Policy and the PPO path: PPO trains through the adapter, the saved model runs in
the bench, and the policy passes the light-cone and determinism tests."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("stable_baselines3")

import torch  # noqa: E402
from stable_baselines3 import PPO  # noqa: E402

import fedbandit_env  # noqa: E402
from baselines import SB3Policy  # noqa: E402
from fedbandit_env import ConfigError  # noqa: E402
from fedbandit_env.bench import evaluate  # noqa: E402
from fedbandit_env.rl import statistics_channel  # noqa: E402
from fedbandit_env.rl.sb3_vec_env import AgentsVecEnv  # noqa: E402

M = 4
KW = {"num_agents": 4, "num_arms": M, "horizon": 40, "topology": "ring", "instance_seed": None}
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def model():
    torch.set_num_threads(1)
    venv = AgentsVecEnv("FedBandit/Heterogeneous-v0", num_copies=4, reward_mode="regret", **KW)
    ppo = PPO(
        "MlpPolicy",
        venv,
        n_steps=40,
        batch_size=320,
        n_epochs=2,
        policy_kwargs={"net_arch": [16]},
        seed=0,
        device="cpu",
    )
    ppo.learn(total_timesteps=3200)
    assert ppo.num_timesteps >= 3200
    return ppo


def test_saved_ppo_model_runs_in_the_bench(model, tmp_path):
    path = tmp_path / "ppo.zip"
    model.save(path)
    for deterministic in (True, False):
        res = evaluate(
            "FedBandit/Heterogeneous-v0",
            SB3Policy,
            runs=3,
            seed=0,
            env_kwargs=KW,
            agent_kwargs={"path": str(path), "deterministic": deterministic},
        )
        assert res.regret_per_agent.shape == (3, 40)
        assert np.all(res.final_regret_per_agent >= 0)
        assert res.messages.sum(axis=1).min() == 8 * 40  # statistics over every ring edge
    again = evaluate(
        "FedBandit/Heterogeneous-v0",
        SB3Policy,
        runs=3,
        seed=0,
        env_kwargs=KW,
        agent_kwargs={"path": str(path), "deterministic": False},
    )
    assert np.array_equal(again.regret_network, res.regret_network)


def _arms(model, perturb_agent=None, runs=8, seed=3, t_change=10, horizon=60):
    venv = fedbandit_env.make_vec(
        "FedBandit/Heterogeneous-v0",
        num_runs=runs,
        **{**KW, "horizon": horizon, "instance_seed": 0},
        reward={"kind": "clipped_gaussian", "sigma": 0.3},
        channels=statistics_channel(M),
    )
    policy = SB3Policy(model=model, deterministic=False)
    obs, _ = venv.reset(seed=seed)
    policy.reset(venv.facts, venv.agent_rng())
    arms, msgs = [], []
    for t in range(1, horizon + 1):
        if perturb_agent is not None and t == t_change:
            venv.engine.means[:, perturb_agent] = 1.0 - venv.engine.means[:, perturb_agent]
        action = policy.act(obs)
        arms.append(action.arms.copy())
        msgs.append(action.messages["neighbors"][1].copy())
        obs, *_ = venv.step(action.arms, action.messages)
    return np.stack(arms), np.stack(msgs), venv.config.topology.hop_distances


@pytest.fixture(scope="module")
def sharp_model():
    """An untrained PPO model with a scaled-up action head, so its arm choice reacts strongly
    to its features (a nearly uniform policy would make the light-cone test vacuous)."""
    venv = AgentsVecEnv("FedBandit/Heterogeneous-v0", num_copies=1, **KW)
    ppo = PPO(
        "MlpPolicy",
        venv,
        n_steps=40,
        batch_size=160,
        policy_kwargs={"net_arch": [16]},
        seed=1,
        device="cpu",
    )
    with torch.no_grad():
        for param in ppo.policy.action_net.parameters():
            param.mul_(100.0)
    return ppo


def test_light_cone_and_batch_independence(sharp_model):
    model = sharp_model
    base, base_msgs, dist = _arms(model)
    arms, msgs, _ = _arms(model, perturb_agent=0)
    reached = 0
    for i in range(4):
        changed = np.nonzero(
            (arms[:, :, i] != base[:, :, i]).any(axis=1)
            | (msgs[:, :, i] != base_msgs[:, :, i]).any(axis=(1, 2))
        )[0]
        if changed.size:
            reached += 1
            assert changed[0] + 1 > 10 + dist[i, 0], (i, changed[0] + 1)
    assert reached >= 2
    again, _, _ = _arms(model)
    alone, _, _ = _arms(model, runs=1, seed=4)
    assert np.array_equal(again, base) and np.array_equal(alone[:, 0], base[:, 1])


def test_model_must_match_the_env(model):
    with pytest.raises(ConfigError, match="sb3: model.observation_space"):
        evaluate(
            "FedBandit/Heterogeneous-v0",
            SB3Policy(model=model),
            runs=1,
            env_kwargs={**KW, "num_arms": 6},
        )
    with pytest.raises(ConfigError, match="sb3: path/model"):
        SB3Policy()


def test_train_ppo_script_runs_at_tiny_scale(tmp_path):
    cmd = [
        sys.executable,
        str(ROOT / "benchmarks" / "train_ppo.py"),
        "--total-timesteps=1000",
        "--num-copies=2",
        "--horizon=30",
        "--n-steps=30",
        "--batch-size=300",
        "--n-epochs=1",
        "--net",
        "8",
        "--eval-runs=3",
        f"--out={tmp_path}",
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert "agent-steps/s" in done.stdout and "| ucb1 |" in done.stdout
    for name in ("ppo_regret.png", "ppo_results.md", "ppo_fedbandit.zip"):
        assert (tmp_path / name).stat().st_size > 0
