"""baselines.SB3Policy and the PPO path: PPO trains through the adapter, the saved model runs in
the bench (as a class and as the registered id ``sb3_policy``, through evaluate, a suite and the
CLI), bad models fail before the first step, and the policy passes the light-cone and determinism
tests."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("stable_baselines3")

import torch  # noqa: E402
from gymnasium import spaces as gym_spaces  # noqa: E402
from stable_baselines3 import PPO  # noqa: E402

import fedbandit_env  # noqa: E402
from baselines import SB3Policy  # noqa: E402
from fedbandit_env import ConfigError  # noqa: E402
from fedbandit_env.bench import evaluate  # noqa: E402
from fedbandit_env.bench.cli import main as cli_main  # noqa: E402
from fedbandit_env.bench.executors import run_suite  # noqa: E402
from fedbandit_env.bench.leaderboard import build  # noqa: E402
from fedbandit_env.bench.store import ResultsStore  # noqa: E402
from fedbandit_env.bench.suites import Cell, Suite  # noqa: E402
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


@pytest.fixture(scope="module")
def saved(model, tmp_path_factory):
    path = tmp_path_factory.mktemp("sb3") / "ppo.zip"
    model.save(path)
    return str(path)


def test_saved_ppo_model_runs_in_the_bench(saved):
    path = saved
    for deterministic in (True, False):
        res = evaluate(
            "FedBandit/Heterogeneous-v0",
            SB3Policy,
            runs=3,
            seed=0,
            env_kwargs=KW,
            agent_kwargs={"model_path": path, "trust_model": True, "deterministic": deterministic},
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
        agent_kwargs={"model_path": path, "trust_model": True, "deterministic": False},
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


def test_registered_id_runs_in_the_bench_and_is_deterministic(model, saved):
    assert "sb3_policy" in fedbandit_env.list_agents()
    kwargs = {"runs": 3, "env_kwargs": KW, "agent_kwargs": {"model_path": saved, "trust_model": True}}
    res = evaluate("FedBandit/Heterogeneous-v0", "sb3_policy", seed=0, **kwargs)
    again = evaluate("FedBandit/Heterogeneous-v0", "sb3_policy", seed=0, **kwargs)
    other = evaluate("FedBandit/Heterogeneous-v0", "sb3_policy", seed=3, **kwargs)
    assert res.agent_id == "sb3_policy" and res.regret_per_agent.shape == (3, 40)
    assert np.array_equal(res.regret_network, again.regret_network)
    assert np.array_equal(res.messages, again.messages)
    assert not np.array_equal(res.regret_network, other.regret_network)
    # the saved file plays exactly like the in-memory model it was saved from (sampled: default)
    direct = evaluate(
        "FedBandit/Heterogeneous-v0", SB3Policy(model=model), runs=3, seed=0, env_kwargs=KW
    )
    assert np.array_equal(res.regret_network, direct.regret_network)


def test_registered_id_reaches_the_leaderboard_through_a_suite_and_the_cli(saved, tmp_path, capsys):
    cells = tuple(
        Cell("FedBandit/Heterogeneous-v0", agent, 40, 3, KW, kwargs, label=agent)
        for agent, kwargs in (("sb3_policy", {"model_path": saved, "trust_model": True}), ("ucb1", {}))
    )
    store = ResultsStore(tmp_path / "r.sqlite")
    assert run_suite(Suite("ppo", cells, baseline="ucb1"), store, quiet=True) == 6
    entries = {e.label: e for e in build(store.rows_for(cells), "ucb1")}
    assert set(entries) == {"sb3_policy", "ucb1"}
    direct = evaluate(
        "FedBandit/Heterogeneous-v0",
        "sb3_policy",
        runs=3,
        env_kwargs=KW,
        agent_kwargs={"model_path": saved, "trust_model": True},
    )
    assert entries["sb3_policy"].mean == pytest.approx(direct.final_regret_per_agent.mean())
    cli_main(
        [
            "run",
            "FedBandit/Heterogeneous-v0",
            "sb3_policy",
            "--runs",
            "3",
            "--env-kwargs",
            json.dumps(KW),
            "--agent-kwargs",
            json.dumps({"model_path": saved, "trust_model": True}),
        ]
    )
    summary = json.loads(capsys.readouterr().out)
    assert summary["agent_id"] == "sb3_policy"
    assert summary["final_regret_per_agent_mean"] == pytest.approx(
        direct.final_regret_per_agent.mean()
    )


def test_bad_path_or_mismatched_model_fails_before_the_first_step(model, saved, tmp_path):
    env = "FedBandit/Heterogeneous-v0"
    with pytest.raises(ConfigError, match="sb3_policy: model_path: required"):
        evaluate(env, "sb3_policy", runs=1, env_kwargs=KW)
    with pytest.raises(ConfigError, match="sb3_policy: model_path: no saved model at .*nope"):
        evaluate(
            env,
            "sb3_policy",
            runs=1,
            env_kwargs=KW,
            agent_kwargs={"model_path": str(tmp_path / "nope.zip"), "trust_model": True},
        )
    junk = tmp_path / "junk.zip"
    junk.write_text("not a model")
    with pytest.raises(ConfigError, match="sb3_policy: model_path: could not load .*junk.zip"):
        evaluate(
            env,
            "sb3_policy",
            runs=1,
            env_kwargs=KW,
            agent_kwargs={"model_path": str(junk), "trust_model": True},
        )
    with pytest.raises(ConfigError, match="sb3_policy: model_path/model"):
        SB3Policy(model_path=saved, model=model)

    class NoStep(SB3Policy):
        def act(self, obs):
            raise AssertionError("stepped with a mismatched model")

    with pytest.raises(ConfigError, match=r"sb3_policy: model.observation_space: .*\(25,\)"):
        evaluate(
            env,
            NoStep,
            runs=1,
            env_kwargs={**KW, "num_arms": 6},
            agent_kwargs={"model_path": saved, "trust_model": True},
        )
    with pytest.raises(ConfigError, match="sb3_policy: model.observation_space: expected bounds"):
        evaluate(
            env,
            NoStep,
            runs=1,
            env_kwargs={**KW, "reward": {"kind": "gaussian"}},
            agent_kwargs={"model_path": saved, "trust_model": True},
        )
    wrong_actions = PPO("MlpPolicy", model.get_env(), device="cpu")
    wrong_actions.action_space = gym_spaces.Discrete(M + 1)
    with pytest.raises(
        ConfigError, match=r"sb3_policy: model.action_space: expected Discrete\(4\)"
    ):
        evaluate(env, NoStep(model=wrong_actions), runs=1, env_kwargs=KW)


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
    assert re.search(r"PPO: \d+ agent-steps in [\d.]+ s = \d+ agent-steps/s", done.stdout)
    rows = re.findall(r"^\| ([^|]+) \| ([\d.]+) \| ±([\d.]+) \| (\d+) \|$", done.stdout, re.M)
    table = {name: (float(mean), int(msgs)) for name, mean, _, msgs in rows}
    # docs/rl.md: the trained policy against UCB1 and GossipUCB on the training distribution
    expected = {"ppo (sampled)", "ppo (greedy)", "ucb1", "ucb1_shared", "gossip_ucb", "uniform"}
    assert set(table) == expected and len(rows) == len(expected)
    means = [float(mean) for _, mean, _, _ in rows]
    assert means == sorted(means) and all(np.isfinite(means))
    assert table["ucb1"][1] == 0 and table["gossip_ucb"][1] > 0 and table["ucb1_shared"][1] > 0
    assert (tmp_path / "ppo_results.md").read_text().count("| gossip_ucb |") == 1
    for name in ("ppo_regret.png", "ppo_results.md", "ppo_fedbandit.zip"):
        assert (tmp_path / name).stat().st_size > 0


def test_train_ppo_script_rejects_an_unregistered_comparison_before_training(tmp_path):
    cmd = [
        sys.executable,
        str(ROOT / "benchmarks" / "train_ppo.py"),
        "--compare",
        "ucb1",
        "gossip_ucbb",
        f"--out={tmp_path}",
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert done.returncode == 2 and "--compare: ['gossip_ucbb'] not registered" in done.stderr
    assert not (tmp_path / "ppo_fedbandit.zip").exists()
