"""Privacy wrappers' accounting (docs/privacy.md, "Privacy wrappers"): per-step reports computed
once and vectorized give the same numbers as the per-agent reference; totals over two channels and
the advanced / zCDP compositions against closed forms; epsilon and delta budgets; the vector wrapper
reports the same figures as the PettingZoo wrapper."""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest

import fedbandit_env
from fedbandit_env.privacy.calibration import gaussian_sigma
from fedbandit_env.wrappers import MessagePrivatizer, PrivacyVectorWrapper, PrivacyWrapper

CHANNELS = {
    "n": {"kind": "neighbors", "dim": 3},
    "s": {"kind": "server", "dim": 3, "aggregate": "sum"},
}
LAPLACE = {"epsilon": 0.4, "sensitivity": 1.0}
GAUSS = {"epsilon": 0.8, "delta": 1e-4, "mechanism": "gaussian"}
N = 4


def make_env(horizon):
    return fedbandit_env.make(
        "FedBandit/Heterogeneous-v0",
        num_agents=N,
        num_arms=3,
        horizon=horizon,
        topology="ring",
        channels=CHANNELS,
    )


def make_vec(horizon, num_runs):
    return fedbandit_env.make_vec(
        "FedBandit/Heterogeneous-v0",
        num_runs=num_runs,
        num_agents=N,
        num_arms=3,
        horizon=horizon,
        topology="ring",
        channels=CHANNELS,
    )


def random_actions(steps, num_runs, seed=0):
    """Arms (T, B, N), per channel sends (T, B, N) (each agent sends about 2/3 of the time) and
    payloads (T, B, N, 3)."""
    rng = np.random.default_rng(seed)
    arms = rng.integers(0, 3, (steps, num_runs, N))
    sends = {c: rng.random((steps, num_runs, N)) < 2 / 3 for c in CHANNELS}
    payloads = {c: rng.uniform(-1, 1, (steps, num_runs, N, 3)) for c in CHANNELS}
    return arms, sends, payloads


def agent_actions(arms, sends, payloads, t, b):
    return {
        f"agent_{i}": {
            "arm": int(arms[t, b, i]),
            "messages": {
                c: {"send": int(sends[c][t, b, i]), "payload": payloads[c][t, b, i]}
                for c in CHANNELS
            },
        }
        for i in range(N)
    }


class SlowPrivatizer(MessagePrivatizer):
    """Reference: the budget check on a deep copy of the accountant (the pre-vectorization
    code), one channel at a time."""

    def _within_budget(self, name, send):
        trial = copy.deepcopy(self.accountant)
        trial.record(name, **self._release(name, send))
        after = trial.spent(composition=self.composition, delta_prime=self.delta_prime)
        ok = np.ones(send.shape, dtype=bool)
        if self.budget is not None:
            ok &= after.epsilon <= self.budget + 1e-12
        if self.delta_budget is not None:
            ok &= after.delta <= self.delta_budget * (1 + 1e-9)
        return ok


def slow_report(p: MessagePrivatizer, b: int, i: int) -> dict:
    """Reference: agent i's report recomputing every total for every agent."""
    total = p.spent()
    per_channel = {}
    for name in p.channels:
        eps = p.spent(name).epsilon if p.messages[name].any() else None
        per_channel[name] = {
            "messages": int(p.messages[name][b, i]),
            "epsilon": 0.0 if eps is None else float(eps[b, i]),
        }
    return {
        "epsilon_spent": float(total.epsilon[b, i]),
        "delta_spent": float(total.delta[b, i]),
        "composition": p.composition,
        "per_channel": per_channel,
        "budget": p.budget,
        "delta_budget": p.delta_budget,
        "budget_exhausted": bool(p.exhausted[b, i]),
        "messages_suppressed": int(p.suppressed[b, i]),
    }


BUDGETED = {
    "budget": 5.0,
    "delta_budget": 1e-3,
    "composition": "best",
    "delta_prime": 1e-5,
}


@pytest.mark.parametrize(
    "options",
    [
        BUDGETED,
        {"budget": 9.0, "composition": "advanced", "delta_prime": 1e-6},
        {"delta_budget": 5e-4},
    ],
)
def test_reports_and_budget_checks_equal_the_slow_reference(options):
    """Same seed, same actions: the wrapper's reports (computed once per step) and sends (budget
    checked without copying the accountant) equal the per-agent deep-copy reference exactly."""
    steps = 40
    arms, sends, payloads = random_actions(steps, 1)
    fast = PrivacyWrapper(make_env(steps), {"n": LAPLACE, "s": GAUSS}, **options)
    slow = PrivacyWrapper(make_env(steps), {"n": LAPLACE, "s": GAUSS}, **options)
    slow.privatizer.__class__ = SlowPrivatizer
    fast.reset(seed=5)
    slow.reset(seed=5)
    for t in range(steps):
        obs_f, _, _, _, infos = fast.step(agent_actions(arms, sends, payloads, t, 0))
        obs_s, *_ = slow.step(agent_actions(arms, sends, payloads, t, 0))
        for i in range(N):
            a = f"agent_{i}"
            assert infos[a]["privacy"] == slow_report(slow.privatizer, 0, i), (t, a)
            for c, key in (("n", "payload"), ("s", "aggregate")):
                got, ref = obs_f[a]["channels"][c][key], obs_s[a]["channels"][c][key]
                assert np.array_equal(got, ref), (t, a, c)
    suppressed = [infos[f"agent_{i}"]["privacy"]["messages_suppressed"] for i in range(N)]
    assert sum(suppressed) > 0  # the budgets did bite in these runs


def test_totals_across_two_channels_basic_composition():
    """Laplace on n (0.4 per message) and Gaussian on s ((0.8, 1e-4) per message): the total
    is the sum of the two channels; per_channel holds each channel's own epsilon."""
    steps = 12
    arms, sends, payloads = random_actions(steps, 1, seed=1)
    env = PrivacyWrapper(make_env(steps), {"n": LAPLACE, "s": GAUSS})
    env.reset(seed=0)
    for t in range(steps):
        _, _, _, _, infos = env.step(agent_actions(arms, sends, payloads, t, 0))
    k_n, k_s = sends["n"][:, 0].sum(axis=0), sends["s"][:, 0].sum(axis=0)
    assert len(set(k_n.tolist())) > 1  # agents sent different numbers of messages
    for i in range(N):
        r = infos[f"agent_{i}"]["privacy"]
        assert r["per_channel"]["n"] == {"messages": k_n[i], "epsilon": pytest.approx(0.4 * k_n[i])}
        assert r["per_channel"]["s"] == {"messages": k_s[i], "epsilon": pytest.approx(0.8 * k_s[i])}
        assert r["epsilon_spent"] == pytest.approx(0.4 * k_n[i] + 0.8 * k_s[i])
        assert r["delta_spent"] == pytest.approx(1e-4 * k_s[i])


def _advanced(eps_counts, dp):
    """Dwork-Rothblum-Vadhan, heterogeneous: sqrt(2 ln(1/dp) sum k e^2) + sum k e (e^e - 1)."""
    sq = sum(k * e**2 for e, k in eps_counts)
    return math.sqrt(2 * math.log(1 / dp) * sq) + sum(k * e * math.expm1(e) for e, k in eps_counts)


def _zcdp(rho, dp):
    return rho + 2 * math.sqrt(rho * math.log(1 / dp))


@pytest.mark.parametrize("composition", ["advanced", "zcdp"])
def test_advanced_and_zcdp_composition_through_the_wrapper(composition):
    steps, dp = 30, 1e-6
    arms, sends, payloads = random_actions(steps, 1, seed=2)
    env = PrivacyWrapper(
        make_env(steps), {"n": LAPLACE, "s": GAUSS}, composition=composition, delta_prime=dp
    )
    env.reset(seed=0)
    for t in range(steps):
        _, _, _, _, infos = env.step(agent_actions(arms, sends, payloads, t, 0))
    sigma = gaussian_sigma(1.0, 0.8, 1e-4)
    rho_gauss = 1.0 / (2 * sigma**2)
    for i in range(N):
        k_n, k_s = int(sends["n"][:, 0, i].sum()), int(sends["s"][:, 0, i].sum())
        r = infos[f"agent_{i}"]["privacy"]
        if composition == "advanced":
            total = _advanced([(0.4, k_n), (0.8, k_s)], dp)
            per_n, per_s = _advanced([(0.4, k_n)], dp), _advanced([(0.8, k_s)], dp)
            delta = k_s * 1e-4 + dp
        else:  # Laplace: eps^2/2 per message; Gaussian: Delta^2/(2 sigma^2)
            total = _zcdp(k_n * 0.4**2 / 2 + k_s * rho_gauss, dp)
            per_n, per_s = _zcdp(k_n * 0.4**2 / 2, dp), _zcdp(k_s * rho_gauss, dp)
            delta = dp
        assert r["epsilon_spent"] == pytest.approx(total, rel=1e-12)
        assert r["delta_spent"] == pytest.approx(delta, rel=1e-12)
        assert r["per_channel"]["n"]["epsilon"] == pytest.approx(per_n, rel=1e-12)
        assert r["per_channel"]["s"]["epsilon"] == pytest.approx(per_s, rel=1e-12)
        if composition == "zcdp":
            assert r["epsilon_spent"] < 0.4 * k_n + 0.8 * k_s  # zCDP beats basic here


def test_huge_epsilon_does_not_block_sending_under_a_budget():
    """epsilon = 800 per message, 'best' composition, budget 1700: every agent may send two
    messages (basic composition is the best here), including one that skipped the first step
    (a zero count at epsilon >= 709 once stored NaN and blocked it forever)."""
    env = PrivacyWrapper(
        make_env(6),
        {"n": {"epsilon": 800.0}},
        budget=1700.0,
        composition="best",
        delta_prime=1e-6,
    )
    env.reset(seed=0)
    for t in range(6):
        action = {a: {"arm": 0, "messages": {"n": np.zeros(3)}} for a in env.possible_agents}
        if t == 0:
            action["agent_0"]["messages"] = {"n": None}
        _, _, _, _, infos = env.step(action)
    for i in range(N):
        r = infos[f"agent_{i}"]["privacy"]
        assert r["per_channel"]["n"]["messages"] == 2
        assert r["epsilon_spent"] == 1600.0
    assert infos["agent_0"]["privacy"]["messages_suppressed"] == 3
    assert infos["agent_1"]["privacy"]["messages_suppressed"] == 4


def test_delta_budget_stops_gaussian_messages_and_laplace_ones_go_on():
    """delta_budget caps the delta total (basic: sum of deltas): three (1, 1e-3) Gaussian
    messages fit in 3.5e-3; the pure Laplace channel (delta 0) keeps sending; stepping on to the
    horizon never raises."""
    steps = 10
    env = PrivacyWrapper(
        make_env(steps),
        {"n": {"epsilon": 1.0}, "s": {"epsilon": 1.0, "delta": 1e-3, "mechanism": "gaussian"}},
        delta_budget=3.5e-3,
    )
    env.reset(seed=0)
    payload = np.array([0.1, 0.0, 0.0])
    for _ in range(steps):
        action = {a: {"arm": 0, "messages": {"n": payload, "s": payload}} for a in env.agents}
        obs, _, _, truncs, infos = env.step(action)
    r = infos["agent_1"]["privacy"]
    assert r["per_channel"]["s"]["messages"] == 3 and r["per_channel"]["n"]["messages"] == 10
    assert r["budget_exhausted"] and r["messages_suppressed"] == 7
    assert r["delta_spent"] == pytest.approx(3e-3) and r["delta_budget"] == 3.5e-3
    assert r["epsilon_spent"] == pytest.approx(13.0)  # no epsilon budget
    assert obs["agent_1"]["channels"]["s"]["count"] == 0  # nothing reaches the server
    assert obs["agent_1"]["channels"]["n"]["mask"].all()
    assert all(truncs.values()) and not env.agents


def test_delta_budget_below_delta_prime_is_a_config_error():
    with pytest.raises(fedbandit_env.ConfigError, match=r"^privacy\.delta_budget: expected at"):
        PrivacyWrapper(
            make_env(5),
            {"s": GAUSS},
            delta_budget=1e-7,
            composition="zcdp",
            delta_prime=1e-6,
        )


@pytest.mark.parametrize(
    ("privacy", "options"),
    [
        ({"n": LAPLACE, "s": GAUSS}, BUDGETED),
        ({"n": LAPLACE, "s": {"epsilon": 2.0, "running_sum": True}}, {"budget": 30.0}),
        ({"n": LAPLACE}, {"composition": "zcdp", "delta_prime": 1e-6}),
    ],
)
def test_vector_wrapper_reports_the_same_numbers_as_the_parallel_wrapper(privacy, options):
    """Run b of the vector wrapper (same options) equals the PettingZoo wrapper at that run
    seed: delivered payloads and every privacy figure, as arrays in ``info.privacy``."""
    steps, seeds = 30, [2, 3]
    arms, sends, payloads = random_actions(steps, len(seeds), seed=4)
    venv = PrivacyVectorWrapper(make_vec(steps, len(seeds)), privacy, **options)
    _, vinfo = venv.reset(seed=seeds)
    assert not vinfo.privacy.epsilon_spent.any()
    envs = [PrivacyWrapper(make_env(steps), privacy, **options) for _ in seeds]
    for env, seed in zip(envs, seeds, strict=True):
        env.reset(seed=seed)
    for t in range(steps):
        messages = {c: (sends[c][t], payloads[c][t]) for c in CHANNELS}
        vobs, _, _, _, vinfo = venv.step(arms[t], messages)
        p = vinfo.privacy
        for b, env in enumerate(envs):
            obs, _, _, _, infos = env.step(agent_actions(arms, sends, payloads, t, b))
            reports = [infos[f"agent_{i}"]["privacy"] for i in range(N)]
            assert p.agent_reports(b) == reports, (t, b)
            assert p.epsilon_spent[b].tolist() == [r["epsilon_spent"] for r in reports]
            assert p.delta_spent[b].tolist() == [r["delta_spent"] for r in reports]
            for c in privacy:
                got = p.per_channel[c]["epsilon"][b].tolist()
                assert got == [r["per_channel"][c]["epsilon"] for r in reports]
            heard = np.stack([obs[f"agent_{i}"]["channels"]["n"]["payload"] for i in range(N)])
            assert np.array_equal(vobs.deliveries["n"].payload[b], heard)
            assert np.array_equal(
                vobs.deliveries["s"].aggregate[b], obs["agent_0"]["channels"]["s"]["aggregate"]
            )
    assert p.epsilon_spent.shape == (2, N) and p.epsilon_spent.min() > 0
    assert vinfo.cumulative_regret.shape == (2, N)  # still the view's info
