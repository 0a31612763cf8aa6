"""Privacy accountant: per-agent, per-channel ledger; basic, advanced and zCDP composition."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fedbandit_env.privacy import (
    GaussianMechanism,
    LaplaceMechanism,
    PrivacyAccountant,
    PrivacyError,
)
from fedbandit_env.privacy.accountant import advanced_composition, basic_composition, zcdp_to_dp

PROPERTY = settings(max_examples=50, deadline=None)


def test_basic_composition_per_agent_and_channel():
    acc = PrivacyAccountant(num_agents=3, num_runs=2)
    acc.record("gossip", 0.5, count=np.array([[1, 2, 0], [4, 0, 0]]))
    acc.record("server", 0.1, 1e-6, count=np.array([True, False, True]))
    assert acc.channels == ("gossip", "server")
    gossip = acc.spent("gossip")
    assert gossip.epsilon.tolist() == [[0.5, 1.0, 0.0], [2.0, 0.0, 0.0]]
    assert not np.any(gossip.delta)
    total = acc.spent()
    np.testing.assert_allclose(total.epsilon, [[0.6, 1.0, 0.1], [2.1, 0.0, 0.1]])
    np.testing.assert_allclose(total.delta, [[1e-6, 0, 1e-6], [1e-6, 0, 1e-6]])
    assert total.releases.tolist() == [[2, 2, 1], [5, 0, 1]]
    assert basic_composition([0.5, 0.1], [0, 1e-6]) == (0.6, 1e-6)


def test_advanced_composition_matches_drv():
    eps, k, dp = 0.1, 400, 1e-6
    expected = math.sqrt(2 * k * math.log(1 / dp)) * eps + k * eps * math.expm1(eps)
    assert advanced_composition(eps, k, dp) == pytest.approx((expected, dp))
    acc = PrivacyAccountant(1)
    acc.record("c", eps, count=k)
    adv = acc.spent(composition="advanced", delta_prime=dp)
    assert adv.epsilon[0, 0] == pytest.approx(expected) and adv.delta[0, 0] == pytest.approx(dp)
    assert adv.epsilon[0, 0] < acc.spent().epsilon[0, 0] == pytest.approx(40.0)


def test_zcdp_composition_of_gaussian_releases():
    mech = GaussianMechanism(0.5, 1e-6, sensitivity=1.0)
    acc = PrivacyAccountant(2)
    acc.record_mechanism("grad", mech, count=np.array([[100, 1]]))
    z = acc.spent(composition="zcdp", delta_prime=1e-5)
    rho = 100 * 1.0 / (2 * mech.sigma**2)
    assert z.epsilon[0, 0] == pytest.approx(rho + 2 * math.sqrt(rho * math.log(1e5)))
    assert z.epsilon[0, 0] < acc.spent().epsilon[0, 0]  # zCDP beats basic for many releases
    assert float(zcdp_to_dp(0.0, 1e-5)) == 0.0


def test_pure_releases_enter_zcdp_as_eps_squared_over_two():
    acc = PrivacyAccountant(1)
    acc.record_mechanism("lap", LaplaceMechanism(0.2), count=50)
    z = acc.spent(composition="zcdp", delta_prime=1e-6)
    rho = 50 * 0.2**2 / 2
    assert z.epsilon[0, 0] == pytest.approx(rho + 2 * math.sqrt(rho * math.log(1e6)))


@PROPERTY
@given(
    eps=st.lists(st.floats(0.01, 2.0), min_size=1, max_size=5),
    counts=st.lists(st.integers(0, 300), min_size=5, max_size=5),
    log_dp=st.floats(-12, -2),
)
def test_best_is_the_minimum_and_never_exceeds_basic(eps, counts, log_dp):
    acc = PrivacyAccountant(1)
    for i, e in enumerate(eps):
        acc.record(f"c{i}", e, count=counts[i])
    dp = 10**log_dp
    methods = {m: acc.spent(composition=m, delta_prime=dp) for m in ("advanced", "zcdp")}
    methods["basic"] = acc.spent()
    best = acc.spent(composition="best", delta_prime=dp)
    assert best.epsilon[0, 0] == pytest.approx(min(m.epsilon[0, 0] for m in methods.values()))
    assert best.epsilon[0, 0] <= methods["basic"].epsilon[0, 0] + 1e-12
    assert best.delta[0, 0] <= dp + 1e-15


def test_accountant_validation():
    acc = PrivacyAccountant(2)
    with pytest.raises(PrivacyError, match="^epsilon: expected a positive finite number"):
        acc.record("c", -1.0)
    with pytest.raises(PrivacyError, match="^delta: expected a number in \\[0, 1\\)"):
        acc.record("c", 1.0, 1.5)
    with pytest.raises(PrivacyError, match="^count: expected an array broadcastable to"):
        acc.record("c", 1.0, count=np.ones(3, dtype=int))
    with pytest.raises(PrivacyError, match="^count: expected non-negative integers"):
        acc.record("c", 1.0, count=-1)
    acc.record("c", 1.0)
    with pytest.raises(PrivacyError, match="^delta_prime: expected a number in \\(0, 1\\)"):
        acc.spent(composition="advanced")
    with pytest.raises(PrivacyError, match="^channel: expected one of"):
        acc.spent("nope")
    with pytest.raises(PrivacyError, match="^num_agents: expected an int >= 1"):
        PrivacyAccountant(0)


@pytest.mark.parametrize("epsilon", [709.0, 800.0, 1e200])
def test_huge_epsilon_with_zero_counts_is_not_nan(epsilon):
    """e^eps - 1 (and eps^2 for 1e200) overflow to inf; an agent that recorded 0 releases must
    still have spent exactly 0 under every composition, never 0 * inf = NaN."""
    acc = PrivacyAccountant(num_agents=2)
    with np.errstate(all="raise"):
        acc.record("c", epsilon, count=np.array([[1, 0]]))
        acc.record("c", epsilon, count=np.array([[0, 0]]))
    for composition in ("basic", "advanced", "zcdp", "best"):
        s = acc.spent(composition=composition, delta_prime=1e-6)
        assert not np.any(np.isnan(s.epsilon)), composition
        assert s.epsilon[0, 1] == 0.0 and s.delta[0, 1] == 0.0, composition
    assert acc.spent(composition="advanced", delta_prime=1e-6).epsilon[0, 0] == math.inf
    assert acc.spent(composition="best", delta_prime=1e-6).epsilon[0, 0] == epsilon  # basic


def test_spent_if_recorded_is_bit_identical_to_recording():
    """The budget check's preview equals copy + record + spent exactly, for a channel already
    in the ledger and for a new one, under every composition."""
    import copy

    rng = np.random.default_rng(0)
    acc = PrivacyAccountant(num_agents=4, num_runs=3)
    acc.record("a", 0.3, count=rng.integers(0, 5, (3, 4)))
    acc.record("b", 0.7, 1e-6, rho=0.05, count=rng.integers(0, 5, (3, 4)))
    acc.record("c", 0.11, 1e-7, count=rng.integers(0, 5, (3, 4)))
    for channel, args, kw in [
        ("a", (0.3,), {}),
        ("b", (0.7, 1e-6), {"rho": 0.05}),
        ("c", (0.11, 1e-7), {}),
        ("new", (0.9,), {}),
    ]:
        count = rng.random((3, 4)) < 0.5
        trial = copy.deepcopy(acc)
        trial.record(channel, *args, **kw, count=count)
        for composition in ("basic", "advanced", "zcdp", "best"):
            opts = {"composition": composition, "delta_prime": 1e-5}
            preview = acc.spent_if_recorded(channel, *args, **kw, count=count, **opts)
            expected = trial.spent(**opts)
            assert np.array_equal(preview.epsilon, expected.epsilon), (channel, composition)
            assert np.array_equal(preview.delta, expected.delta), (channel, composition)
            assert np.array_equal(preview.releases, expected.releases)
    assert acc.channels == ("a", "b", "c")  # nothing was recorded
