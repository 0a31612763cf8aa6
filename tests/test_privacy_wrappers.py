"""Privacy wrappers (docs/privacy.md, "Privacy wrappers"): calibrated noise on wrapped channels
only, exact accounting, budgets that stop sending without crashing, clear errors for bad
parameters."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

import fedbandit_env
from fedbandit_env.errors import ConfigError
from fedbandit_env.privacy.calibration import gaussian_sigma
from fedbandit_env.privacy.errors import PrivacyConfigError, PrivacyError
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
    """Zhu, Zhu, Liu & Liu 2021, Section 4.1: the release at t carries popcount(t) Laplace terms
    of scale levels * sensitivity / epsilon; blocks are reused, so consecutive releases share
    noise."""
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


def make_vec(horizon=10, num_runs=2):
    return fedbandit_env.make_vec(
        "FedBandit/Heterogeneous-v0",
        num_runs=num_runs,
        num_agents=4,
        num_arms=3,
        horizon=horizon,
        topology="ring",
        channels=CHANNELS,
    )


BAD_CHANNEL = [
    ({"epsilon": 0}, "epsilon: expected a positive finite number, got 0"),
    ({"epsilon": -1}, "epsilon: expected a positive finite number, got -1"),
    (
        {"epsilon": 1, "sensitivity": -2.0},
        "sensitivity: expected a positive finite number, got -2.0",
    ),
    ({"epsilon": 1, "sensitivity": 0}, "sensitivity: expected a positive finite number, got 0"),
    (
        {"epsilon": 1, "mechanism": "gaussian", "delta": 1.0},
        "delta: expected a number in the open interval (0, 1), got 1.0",
    ),
    (
        {"epsilon": 1, "mechanism": "gaussian", "delta": 0.0},
        "delta: expected a number in the open interval (0, 1), got 0.0",
    ),
    (
        {"epsilon": 1, "mechanism": "gaussian"},  # delta defaults to 0
        "delta: expected a number in the open interval (0, 1), got 0.0",
    ),
    ({"epsilon": 1, "delta": 0.1}, "delta: expected 0 for the Laplace mechanism, got 0.1"),
    (
        {"epsilon": 1, "mechanism": "exponential"},
        "mechanism: expected 'laplace' or 'gaussian', got 'exponential'",
    ),
    (
        {"epsilon": 1, "mechanism": "gaussian", "delta": 1e-5, "running_sum": True},
        "running_sum: expected False for the Gaussian mechanism (the tree counter is Laplace), "
        "got True",
    ),
    ({"epsilon": 1, "clip": "yes"}, "clip: expected True or False, got 'yes'"),
    (
        {"epsilon": 1, "center": [0.0, np.nan, 0.0]},
        "center: expected a finite number or a 1-d sequence of finite numbers",
    ),
    ({"epsilon": 1, "center": [0.5, 0.5]}, "center: expected a number or a vector of length 3"),
]


@pytest.mark.parametrize("wrapper", ["parallel", "vector"])
@pytest.mark.parametrize(("cfg", "message"), BAD_CHANNEL)
def test_bad_channel_options_name_the_channel_and_field(wrapper, cfg, message):
    """Every channel option error is one class (a PrivacyError and a ConfigError)
    whose message starts with privacy.channels.<channel>.<field> and says what was expected."""
    with pytest.raises(PrivacyConfigError) as info:
        if wrapper == "parallel":
            PrivacyWrapper(make_env(), {"n": {"epsilon": 1.0}, "s": cfg})
        else:
            PrivacyVectorWrapper(make_vec(), {"n": {"epsilon": 1.0}, "s": cfg})
    assert str(info.value).startswith(f"privacy.channels.s.{message}")
    assert isinstance(info.value, PrivacyError) and isinstance(info.value, ConfigError)


@pytest.mark.parametrize(
    ("channels", "options", "message"),
    [
        (
            {"zz": {"epsilon": 1}},
            {},
            "privacy.channels.zz: expected a channel of the environment ['n', 's'], got 'zz'",
        ),
        ({"n": {"epsilon": 1, "eps": 2}}, {}, "privacy.channels.n: expected options among"),
        ({"n": 0.5}, {}, "privacy.channels.n: expected a ChannelPrivacy or a dict of options"),
        ({"n": {}}, {"budget": -2}, "privacy.budget: expected a positive finite number, got -2"),
        ({"n": {}}, {"delta_budget": 1.0}, "privacy.delta_budget: expected a number in [0, 1)"),
        ({"n": {}}, {"composition": "rdp"}, "privacy.composition: expected 'basic', 'advanced'"),
        ({"n": {}}, {"composition": "zcdp"}, "privacy.delta_prime: expected a number in (0, 1)"),
        (
            {"n": {}},
            {"composition": "best", "delta_prime": 2.0},
            "privacy.delta_prime: expected a number in the open interval (0, 1), got 2.0",
        ),
    ],
)
def test_bad_wrapper_options_name_the_option(channels, options, message):
    with pytest.raises(PrivacyConfigError) as info:
        PrivacyWrapper(make_env(), channels, **options)
    assert str(info.value).startswith(message)
    with pytest.raises(PrivacyConfigError) as info:
        PrivacyVectorWrapper(make_vec(), channels, **options)
    assert str(info.value).startswith(message)


def test_channel_privacy_alone_names_its_field():
    with pytest.raises(PrivacyConfigError, match=r"^ChannelPrivacy\.epsilon: expected a positive"):
        ChannelPrivacy(epsilon=0.0)


def test_noise_scale_and_rho_are_computed_once(monkeypatch):
    """The analytic-Gaussian bisection runs once per channel config, not once per step."""
    import fedbandit_env.wrappers.privacy as module

    calls = []

    def counting_sigma(*args, **kw):
        calls.append(args)
        return gaussian_sigma(*args, **kw)

    monkeypatch.setattr(module, "gaussian_sigma", counting_sigma)
    cfg = ChannelPrivacy(epsilon=1.0, delta=1e-5, mechanism="gaussian")
    assert len(calls) == 1
    assert cfg.noise_scale == gaussian_sigma(1.0, 1.0, 1e-5)
    assert cfg.rho == 1.0 / (2 * cfg.noise_scale**2)
    env = PrivacyWrapper(make_env(horizon=20), {"n": cfg})
    play(env, 20)
    assert len(calls) == 1


def _heard(center, payloads, sensitivity=1.0, mechanism="laplace", dim=1):
    """What agent_0 hears over a dim-`dim` neighbors channel, run seed 3, payloads (T, dim)
    sent by every agent. Noise depends only on the seed, not on the payload or the center."""
    cfg = {"epsilon": 2.0, "sensitivity": sensitivity, "mechanism": mechanism, "center": center}
    if mechanism == "gaussian":
        cfg["delta"] = 1e-5
    env = fedbandit_env.make(
        "FedBandit/Heterogeneous-v0",
        num_agents=4,
        num_arms=3,
        horizon=len(payloads),
        topology="ring",
        channels={"c": {"kind": "neighbors", "dim": dim}},
    )
    env = PrivacyWrapper(env, {"c": cfg})
    env.reset(seed=3)
    heard = []
    for p in payloads:
        obs, *_ = env.step({a: {"arm": 0, "messages": {"c": p}} for a in env.agents})
        heard.append(obs["agent_0"]["channels"]["c"]["payload"][0])  # from agent_1
    return np.array(heard)


def test_center_lets_unit_interval_payloads_through_unchanged():
    """Payloads in [0, 1], center 0.5, sensitivity 1: the clip ball is [0, 1] itself, so what
    arrives is the payload plus the same noise as a zero payload gets; a ball around 0 (the
    default) would cut everything above 0.5."""
    u = np.random.default_rng(0).uniform(0, 1, (200, 1))
    noise = _heard(0.0, np.zeros_like(u))
    centered = _heard(0.5, u)
    assert np.allclose(centered - noise, u, rtol=0, atol=1e-12)
    around_zero = _heard(0.0, u)
    assert np.allclose(around_zero - noise, np.minimum(u, 0.5), rtol=0, atol=1e-12)
    assert (u > 0.5).sum() > 50  # the default does distort these payloads


def test_vector_center_clips_to_the_ball_around_it():
    """Gaussian (L2) with center c = (1, 2, 3), sensitivity 2: a payload far from c arrives as
    the point at distance 1 from c towards it; one inside the ball is unchanged."""
    c = np.array([1.0, 2.0, 3.0])
    far, near = c + np.array([30.0, 0.0, -40.0]), c + np.array([0.2, -0.3, 0.1])
    payloads = np.stack([far, near] * 5)
    noise = _heard(0.0, np.zeros_like(payloads), 2.0, "gaussian", dim=3)
    got = _heard(tuple(c), payloads, 2.0, "gaussian", dim=3) - noise
    assert np.allclose(got[0::2], c + np.array([0.6, 0.0, -0.8]), atol=1e-12)
    assert np.allclose(got[1::2], near, atol=1e-12)


def test_center_applies_to_running_sum_increments():
    """running_sum: increments in [0, 1] pass the ball around center 0.5 unchanged, so the
    tree counter's exact part is the true running sum; around 0 they are cut at 0.5."""
    rng = np.random.default_rng(1)
    inc = rng.uniform(0, 1, (16, 2, 1, 1))
    exact = {}
    for center in (0.5, 0.0):
        cfg = ChannelPrivacy(epsilon=1.0, running_sum=True, center=center)
        core = MessagePrivatizer({"c": cfg}, {"c": 1}, num_agents=1, horizon=16)
        core.reset([0, 1])
        send = np.ones((2, 1), dtype=bool)
        for t in range(16):
            core.privatize(t + 1, {"c": (send, inc[: t + 1].sum(axis=0))})
        exact[center] = core._trees["c"].exact()
    assert np.allclose(exact[0.5], inc.sum(axis=0), atol=1e-12)
    assert np.allclose(exact[0.0], np.minimum(inc, 0.5).sum(axis=0), atol=1e-12)


def test_wrapper_over_another_wrapper_gives_the_same_steps():
    """With a wrapper in between, the noisy messages go through its step() as action dicts;
    the result equals the direct path (arrays straight to the environment)."""
    from pettingzoo.utils.wrappers import BaseParallelWrapper

    cfg = {"n": {"epsilon": 0.7}, "s": {"epsilon": 1.0, "delta": 1e-5, "mechanism": "gaussian"}}
    direct = PrivacyWrapper(make_env(horizon=5), cfg, budget=3.0)
    stacked = PrivacyWrapper(BaseParallelWrapper(make_env(horizon=5)), cfg, budget=3.0)
    a, _ = play(direct, 5)
    b, infos = play(stacked, 5)
    for t in range(5):
        for c, key in (("n", "payload"), ("s", "aggregate")):
            assert np.array_equal(
                a[t]["agent_2"]["channels"][c][key], b[t]["agent_2"]["channels"][c][key]
            )
    assert infos["agent_2"]["privacy"]["messages_suppressed"] == 7
    with pytest.raises(fedbandit_env.HorizonError):
        stacked.step({ag: 0 for ag in stacked.possible_agents})
    with pytest.raises(fedbandit_env.HorizonError):
        direct.step({ag: 0 for ag in direct.possible_agents})
    assert direct.privatizer.messages["n"].sum() == 4 * 2  # nothing accounted after the end
