"""Calibration formulas and parameter validation (fedbandit_env.privacy.calibration)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import optimize, stats

from fedbandit_env.errors import FedBanditError
from fedbandit_env.linear_kernels import linear_privacy_constants
from fedbandit_env.privacy import (
    GaussianMechanism,
    HybridCounter,
    LaplaceMechanism,
    PrivacyError,
    TreeCounter,
    gaussian_sigma,
)
from fedbandit_env.privacy.calibration import (
    analytic_gaussian_sigma,
    check_delta,
    check_epsilon,
    check_sensitivity,
    classic_gaussian_sigma,
    gaussian_delta,
    laplace_scale,
)
from fedbandit_env.seeding import BatchedRNG

PROPERTY = settings(max_examples=40, deadline=None)


def scipy_delta(sigma, eps, sens=1.0):
    a, b = sens / (2 * sigma), eps * sigma / sens
    return stats.norm.cdf(a - b) - math.exp(eps) * stats.norm.cdf(-a - b)


def test_laplace_scale_is_sensitivity_over_epsilon():
    assert laplace_scale(2.0, 0.5) == 4.0
    assert laplace_scale(1.0, math.inf) == 0.0


def test_classic_gaussian_formula():
    sigma = classic_gaussian_sigma(1.0, 0.5, 1e-5)
    assert sigma == pytest.approx(math.sqrt(2 * math.log(1.25 / 1e-5)) / 0.5)
    with pytest.raises(PrivacyError, match="epsilon: expected a number in \\(0, 1\\)"):
        classic_gaussian_sigma(1.0, 1.0, 1e-5)


@pytest.mark.parametrize("eps,delta", [(0.1, 1e-5), (1.0, 1e-5), (4.0, 1e-8), (0.5, 0.1)])
def test_analytic_gaussian_matches_scipy_root(eps, delta):
    ours = analytic_gaussian_sigma(1.0, eps, delta)
    ref = optimize.brentq(lambda s: scipy_delta(s, eps) - delta, 1e-3, 1e4, xtol=1e-14)
    assert ours == pytest.approx(ref, rel=1e-9)
    assert gaussian_delta(ours, 1.0, eps) <= delta * (1 + 1e-9)


def test_analytic_gaussian_known_value():
    # Balle & Wang (2018): eps = 1, delta = 1e-5 needs sigma ~ 3.73 (classic would give 4.84)
    assert analytic_gaussian_sigma(1.0, 1.0, 1e-5) == pytest.approx(3.7306, abs=1e-3)


@PROPERTY
@given(
    eps=st.floats(0.01, 0.99),
    log_delta=st.floats(-12, -1),
    sens=st.floats(0.1, 10),
)
def test_analytic_never_exceeds_classic_and_scales_with_sensitivity(eps, log_delta, sens):
    delta = 10**log_delta
    analytic = analytic_gaussian_sigma(sens, eps, delta)
    assert analytic <= classic_gaussian_sigma(sens, eps, delta) * (1 + 1e-9)
    assert analytic == pytest.approx(sens * analytic_gaussian_sigma(1.0, eps, delta), rel=1e-8)


def test_gaussian_sigma_dispatch_and_infinite_epsilon():
    assert gaussian_sigma(1.0, 0.5, 1e-5, "classic") == classic_gaussian_sigma(1.0, 0.5, 1e-5)
    assert gaussian_sigma(1.0, 2.0, 1e-5) == analytic_gaussian_sigma(1.0, 2.0, 1e-5)
    assert gaussian_sigma(1.0, math.inf, 1e-5) == 0.0
    with pytest.raises(PrivacyError, match="calibration"):
        gaussian_sigma(1.0, 0.5, 1e-5, "bogus")


@pytest.mark.parametrize("bad", [0, -1, -0.5, math.nan, "1", None, True])
def test_bad_epsilon_is_rejected_with_a_clear_message(bad):
    with pytest.raises(PrivacyError) as info:
        check_epsilon(bad)
    assert str(info.value).startswith("epsilon: expected a positive number (or inf), got")
    assert isinstance(info.value, ValueError) and isinstance(info.value, FedBanditError)


def test_epsilon_message_matches_the_issue_example():
    with pytest.raises(
        PrivacyError, match=r"^epsilon: expected a positive number \(or inf\), got -1$"
    ):
        check_epsilon(-1)


@pytest.mark.parametrize("bad", [0, 1, -0.1, 1.5, math.nan, math.inf])
def test_bad_delta_is_rejected(bad):
    with pytest.raises(
        PrivacyError, match=r"^delta: expected a number in the open interval \(0, 1\)"
    ):
        check_delta(bad)
    assert check_delta(0, allow_zero=True) == 0.0


@pytest.mark.parametrize("bad", [0, -2, math.inf, math.nan])
def test_bad_sensitivity_is_rejected(bad):
    with pytest.raises(PrivacyError, match="^sensitivity: expected a positive finite number"):
        check_sensitivity(bad)


@pytest.mark.parametrize(
    "build,param",
    [
        (lambda: LaplaceMechanism(0.0), "epsilon"),
        (lambda: LaplaceMechanism(-1.0), "epsilon"),
        (lambda: LaplaceMechanism(1.0, sensitivity=0.0), "sensitivity"),
        (lambda: GaussianMechanism(1.0, 0.0), "delta"),
        (lambda: GaussianMechanism(1.0, 1.0), "delta"),
        (lambda: GaussianMechanism(math.inf, 1.2), "delta"),
        (lambda: GaussianMechanism(-1.0, 0.1), "epsilon"),
        (lambda: GaussianMechanism(1.0, 0.1, sensitivity=-1.0), "sensitivity"),
        (lambda: TreeCounter((2, 3), 10, 0.0, num_runs=1), "epsilon"),
        (lambda: TreeCounter((2, 3), 10, 1.0, sensitivity=-1.0, rng=_rng()), "sensitivity"),
        (lambda: TreeCounter((2, 3), 10, 1.0), "rng"),
        (lambda: TreeCounter((2, 3), 0, 1.0, rng=_rng()), "horizon"),
        (lambda: TreeCounter((2, 3), 10, 1.0, rng=_rng(), levels=0), "levels"),
        (lambda: TreeCounter((2, 3), 10, 1.0, rng=_rng(), tree_index="arm"), "tree_index"),
        (lambda: HybridCounter((2,), 10, -3.0, rng=_rng()), "epsilon"),
        (lambda: HybridCounter((2,), 10, 1.0, rng=_rng(), bounds=(1, 0)), "bounds"),
        (lambda: linear_privacy_constants(0.0, 0.1, 10, 10, 100), "epsilon"),
        (lambda: linear_privacy_constants(1.0, 1.0, 10, 10, 100), "delta"),
        (lambda: linear_privacy_constants(1.0, 0.1, 10, 10, 100, alpha=0.0), "alpha"),
        (lambda: linear_privacy_constants(1.0, 0.1, 10, 10, 100, L=0.0), "L"),
    ],
)
def test_constructors_name_the_bad_parameter(build, param):
    with pytest.raises(PrivacyError) as info:
        build()
    assert info.value.parameter == param
    assert str(info.value).startswith(f"{param}: expected ")


def _rng():
    return BatchedRNG.for_runs([0], "agents")


def test_gaussian_delta_is_decreasing_in_sigma():
    sigmas = np.geomspace(0.1, 20, 50)
    deltas = [gaussian_delta(s, 1.0, 1.0) for s in sigmas]
    assert all(a >= b for a, b in zip(deltas, deltas[1:], strict=False))
    assert deltas[0] > 0.3 and deltas[-1] < 1e-10
