"""Privacy wrappers (issue "Privacy" item 6): calibrated noise on wrapped channels only, exact
accounting, budgets that stop sending without crashing, clear errors for bad parameters."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

import fedbandit_env
from fedbandit_env.privacy.calibration import gaussian_sigma
from fedbandit_env.privacy.errors import PrivacyError
from fedbandit_env.wrappers import (
    ChannelPrivacy,
    MessagePrivatizer,
    PrivacyVectorWrapper,
    PrivacyWrapper,
)

CHANNELS = {
    "n": {"kind": "neighbors", "dim": 3},
    "s": {"kind": "server", "dim": 3, "aggregate": "sum"},
}
RAW = np.array([0.3, -0.2, 0.1])  # L1 norm 0.6: inside every clip bound used below


def make_env(horizon=400, **kw):
    return fedbandit_env.make(
        "FedBandit/Heterogeneous-v0",
        num_agents=4,
        num_arms=3,
        horizon=horizon,
        topology="ring",
        channels=CHANNELS,
        **kw,
    )


def play(env, steps, payload=RAW):
    obs, infos = env.reset(seed=3)
    received = []
    for _ in range(steps):
        action = {a: {"arm": 0, "messages": {"n": payload, "s": payload}} for a in env.agents}
        obs, _, _, _, infos = env.step(action)
        received.append(obs)
    return received, infos


def neighbour_payloads(received):
    """Every payload agent_0 heard over 'n' (it has two ring neighbours)."""
    return np.concatenate([o["agent_0"]["channels"]["n"]["payload"] for o in received])


def test_laplace_noise_matches_calibration_and_other_channels_untouched():
    env = PrivacyWrapper(make_env(), {"n": {"epsilon": 0.5, "sensitivity": 2.0}})
    received, infos = play(env, 400)
    noise = (neighbour_payloads(received) - RAW).ravel()
    scale = 2.0 / 0.5
    assert stats.kstest(noise, "laplace", args=(0, scale)).pvalue > 0.01
    assert noise.var() == pytest.approx(2 * scale**2, rel=0.1)
    server = np.array([o["agent_0"]["channels"]["s"]["aggregate"] for o in received])
    assert np.allclose(server, 4 * RAW)  # the unwrapped channel carries the exact sum
    report = infos["agent_0"]["privacy"]
    assert report["per_channel"]["n"]["messages"] == 400
    assert report["epsilon_spent"] == pytest.approx(400 * 0.5)  # basic composition


def test_gaussian_noise_matches_calibration_and_zcdp_accounting():
    cfg = {"epsilon": 1.0, "delta": 1e-5, "sensitivity": 1.0, "mechanism": "gaussian"}
    env = PrivacyWrapper(make_env(), {"n": cfg}, composition="zcdp", delta_prime=1e-5)
    received, infos = play(env, 400)
    noise = (neighbour_payloads(received) - RAW).ravel()
    sigma = gaussian_sigma(1.0, 1.0, 1e-5)
    assert stats.kstest(noise / sigma, "norm").pvalue > 0.01
    rho = 400 * 1.0 / (2 * sigma**2)
    expected = rho + 2 * np.sqrt(rho * np.log(1e5))
    report = infos["agent_0"]["privacy"]
    assert report["epsilon_spent"] == pytest.approx(expected)
    assert report["delta_spent"] == pytest.approx(1e-5)  # delta' of the conversion
    assert report["epsilon_spent"] < 400 * 1.0  # zCDP beats basic composition here
    basic = PrivacyWrapper(make_env(horizon=10), {"n": cfg})
    _, infos = play(basic, 10)
    assert infos["agent_0"]["privacy"]["epsilon_spent"] == pytest.approx(10.0)
    assert infos["agent_0"]["privacy"]["delta_spent"] == pytest.approx(10 * 1e-5)


def test_clipping_bounds_every_message():
    env = PrivacyWrapper(make_env(horizon=50), {"n": {"epsilon": 500.0, "sensitivity": 1.0}})
    received, _ = play(env, 50, payload=np.array([10.0, 0.0, -10.0]))
    heard = neighbour_payloads(received)
    assert np.allclose(np.abs(heard).sum(axis=1), 0.5, atol=0.05)  # L1 norm sensitivity / 2
    assert np.allclose(heard[:, 0], 0.25, atol=0.03) and np.allclose(heard[:, 2], -0.25, atol=0.03)


def _tree_errors(runs: int, horizon: int, eps: float, sensitivity: float) -> np.ndarray:
    """Release minus true running sum for many runs of one agent sending +0.1 per step."""
    cfg = ChannelPrivacy(epsilon=eps, sensitivity=sensitivity, running_sum=True)
    core = MessagePrivatizer({"c": cfg}, {"c": 1}, num_agents=1, horizon=horizon)
    core.reset(list(range(runs)))
    send = np.ones((runs, 1), dtype=bool)
    errors = []
    for t in range(1, horizon + 1):
        truth = np.full((runs, 1, 1), 0.1 * t)
        _, noisy = core.privatize(t, {"c": (send, truth)})["c"]
        errors.append((noisy - truth)[:, 0, 0])
    return np.array(errors)  # (horizon, runs)


def test_running_sum_tree_counter_noise_terms_and_reuse():
    """gossip.md §2.4: the release at t carries popcount(t) Laplace terms of scale
    levels * sensitivity / epsilon; blocks are reused, so consecutive releases share noise."""
    horizon, eps, sens = 16, 2.0, 1.0
    errors = _tree_errors(4000, horizon, eps, sens)
    scale = 5 * sens / eps  # floor(log2 16) + 1 = 5 levels
    popcount = np.array([bin(t).count("1") for t in range(1, horizon + 1)])
    assert np.allclose(errors.var(axis=1) / (2 * scale**2), popcount, rtol=0.12)
    # t = 6 -> blocks (4,6], (0,4]; t = 7 adds (6,7]: the difference is one fresh term
    assert np.var(errors[6] - errors[5]) == pytest.approx(2 * scale**2, rel=0.1)
    # t = 8 -> the single block (0,8]: independent of the (0,4] noise used at t = 4..7
    assert abs(np.corrcoef(errors[7], errors[3])[0, 1]) < 0.06


def test_running_sum_exact_part_and_budget():
    errors = _tree_errors(3, 32, 600.0, 1.0)  # per-block scale 6/600: the sums are 0.1 .. 3.2
    assert np.abs(errors).max() < 0.3  # the release is the true running sum plus small noise
    env = PrivacyWrapper(make_env(horizon=8), {"s": {"epsilon": 2.0, "running_sum": True}})
    _, infos = play(env, 8)
    assert infos["agent_2"]["privacy"]["epsilon_spent"] == pytest.approx(2.0)


def test_budget_stops_sending_without_crashing():
    env = PrivacyWrapper(make_env(horizon=10), {"n": {"epsilon": 1.0}}, budget=3.5)
    received, infos = play(env, 10)
    report = infos["agent_3"]["privacy"]
    assert report["per_channel"]["n"]["messages"] == 3
    assert report["budget_exhausted"] and report["messages_suppressed"] == 7
    assert report["epsilon_spent"] == pytest.approx(3.0) and report["epsilon_spent"] <= 3.5
    assert received[-1]["agent_0"]["channels"]["n"]["mask"].sum() == 0  # nothing arrives
    assert env.unwrapped.engine.ledger.total.messages[0, 0] == 3 * 4 * 2


def test_vector_wrapper_matches_parallel_wrapper():
    cfg = {"n": {"epsilon": 0.7, "sensitivity": 1.0}}
    env = PrivacyWrapper(make_env(horizon=20), cfg)
    received, _ = play(env, 20)
    venv = PrivacyVectorWrapper(
        fedbandit_env.make_vec(
            "FedBandit/Heterogeneous-v0",
            num_runs=2,
            num_agents=4,
            num_arms=3,
            horizon=20,
            topology="ring",
            channels=CHANNELS,
        ),
        cfg,
    )
    venv.reset(seed=[2, 3])
    arms = np.zeros((2, 4), dtype=np.int64)
    payload = np.broadcast_to(RAW, (2, 4, 3)).copy()
    for t in range(20):
        obs, *_ = venv.step(arms, {"n": payload, "s": payload})
        heard = obs.deliveries["n"].payload[1, 0]  # run seed 3, agent_0
        assert np.array_equal(heard, received[t]["agent_0"]["channels"]["n"]["payload"])


@pytest.mark.parametrize(
    ("cfg", "match"),
    [
        ({"epsilon": 0}, r"epsilon: expected a positive finite number, got 0"),
        ({"epsilon": -1}, r"epsilon: expected"),
        ({"epsilon": 1, "sensitivity": 0}, r"sensitivity: expected a positive finite number"),
        (
            {"epsilon": 1, "mechanism": "gaussian", "delta": 1.5},
            r"delta: expected a number in the open interval \(0, 1\)",
        ),
        ({"epsilon": 1, "mechanism": "gaussian", "delta": 0.0}, r"delta: expected"),
        ({"epsilon": 1, "mechanism": "exponential"}, r"privacy\.mechanism"),
    ],
)
def test_bad_parameters_raise_clear_errors(cfg, match):
    with pytest.raises((PrivacyError, fedbandit_env.ConfigError), match=match):
        PrivacyWrapper(make_env(), {"n": cfg})


def test_unknown_channel_and_bad_budget():
    with pytest.raises(fedbandit_env.ConfigError, match=r"privacy\.channels\.zz: unknown channel"):
        PrivacyWrapper(make_env(), {"zz": {"epsilon": 1}})
    with pytest.raises(PrivacyError, match="budget"):
        PrivacyWrapper(make_env(), {"n": {"epsilon": 1}}, budget=-2)
