"""Laplace and Gaussian mechanisms and symmetric Gaussian matrix noise: noise laws at fixed
seeds (KS / variance), batching, validation."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from scipy import stats

from fedbandit_env.privacy import (
    GaussianMechanism,
    LaplaceMechanism,
    PrivacyError,
    symmetric_gaussian_noise,
)
from fedbandit_env.privacy.mechanisms import symmetric_from_upper, upper_triangle_size
from fedbandit_env.seeding import BatchedRNG

PROPERTY = settings(max_examples=40, deadline=None)


def gen(seed=0):
    return np.random.default_rng(seed)


@pytest.mark.parametrize("eps,sens", [(1.0, 1.0), (0.5, 2.0), (4.0, 0.25)])
def test_laplace_noise_matches_its_calibration(eps, sens):
    mech = LaplaceMechanism(eps, sens)
    noise = mech.privatize(np.zeros(20_000), gen(1))
    assert mech.scale == sens / eps
    ks = stats.kstest(noise, stats.laplace(scale=sens / eps).cdf)
    assert ks.pvalue > 0.01
    assert noise.var() == pytest.approx(mech.variance, rel=0.05)


def test_laplace_with_wrong_scale_fails_the_ks_check():
    noise = LaplaceMechanism(1.0).privatize(np.zeros(20_000), gen(1))
    assert stats.kstest(noise, stats.laplace(scale=0.8).cdf).pvalue < 1e-6


@pytest.mark.parametrize("eps,delta,cal", [(0.5, 1e-5, "classic"), (2.0, 1e-6, "analytic")])
def test_gaussian_noise_matches_its_calibration(eps, delta, cal):
    mech = GaussianMechanism(eps, delta, sensitivity=1.5, calibration=cal)
    noise = mech.privatize(np.zeros((100, 200)), gen(2)).ravel()
    ks = stats.kstest(noise, stats.norm(scale=mech.sigma).cdf)
    assert ks.pvalue > 0.01
    assert noise.var() == pytest.approx(mech.sigma**2, rel=0.05)
    assert mech.rho == pytest.approx(1.5**2 / (2 * mech.sigma**2))


def test_infinite_epsilon_releases_values_unchanged_without_drawing():
    values = np.arange(6.0).reshape(2, 3)
    g = gen(3)
    state = g.bit_generator.state
    assert np.array_equal(LaplaceMechanism(math.inf).privatize(values, g), values)
    assert np.array_equal(GaussianMechanism(math.inf, 0.1).privatize(values, g), values)
    assert g.bit_generator.state == state


@PROPERTY
@given(
    values=hnp.arrays(
        np.float64, hnp.array_shapes(max_dims=4, max_side=5), elements=st.floats(-1e6, 1e6)
    ),
    eps=st.floats(0.05, 20),
    seed=st.integers(0, 2**32 - 1),
)
def test_laplace_noise_is_scale_times_a_standard_draw(values, eps, seed):
    out = LaplaceMechanism(eps, 2.0).privatize(values, gen(seed))
    unit = LaplaceMechanism(1.0, 1.0).privatize(np.zeros(values.shape), gen(seed))
    assert out.shape == values.shape
    np.testing.assert_allclose(out - values, unit * 2.0 / eps, rtol=1e-9, atol=1e-6)


def test_batched_rng_run_b_equals_run_alone():
    rng = BatchedRNG.for_runs([11, 12, 13], "agents")
    mech = GaussianMechanism(1.0, 1e-5)
    batch = mech.privatize(np.zeros((3, 4, 5)), rng.child("p"))
    alone = mech.privatize(np.zeros((1, 4, 5)), rng.child("p").run(2))
    assert np.array_equal(batch[2], alone[0])
    assert not np.array_equal(batch[0], batch[1])
    with pytest.raises(PrivacyError, match="values: expected a leading run axis of length 3"):
        mech.privatize(np.zeros((2, 4)), rng)


def test_non_finite_values_are_rejected():
    with pytest.raises(PrivacyError, match="^values: expected finite numbers"):
        LaplaceMechanism(1.0).privatize(np.array([0.0, np.nan]), gen())


def test_symmetric_gaussian_noise_law():
    d, sigma = 4, 2.0
    m = symmetric_gaussian_noise(d, sigma, (20_000,), gen(5))
    assert m.shape == (20_000, d, d)
    assert np.array_equal(m, np.swapaxes(m, -1, -2))
    rows, cols = np.triu_indices(d)
    upper = m[:, rows, cols]
    assert np.allclose(upper.var(axis=0), sigma**2, rtol=0.05)
    corr = np.corrcoef(upper.T) - np.eye(upper.shape[1])
    assert np.abs(corr).max() < 0.04  # independent entries
    assert stats.kstest(upper[:, 1], stats.norm(scale=sigma).cdf).pvalue > 0.01


def test_diagonal_scale_sqrt2_is_the_law_of_n_plus_nt_over_sqrt2():
    d, sigma = 3, 1.0
    ours = symmetric_gaussian_noise(d, sigma, (40_000,), gen(6), diagonal_scale=math.sqrt(2))
    n = gen(7).normal(0, sigma, (40_000, d, d))
    ref = (n + np.swapaxes(n, -1, -2)) / math.sqrt(2)
    np.testing.assert_allclose(ours.var(axis=0), ref.var(axis=0), rtol=0.05)
    assert ours[:, 0, 0].var() == pytest.approx(2 * sigma**2, rel=0.05)
    assert ours[:, 0, 1].var() == pytest.approx(sigma**2, rel=0.05)


def test_symmetric_noise_validation():
    with pytest.raises(PrivacyError, match="^d: expected a positive int"):
        symmetric_gaussian_noise(0, 1.0, (2,), gen())
    with pytest.raises(PrivacyError, match="^sigma: expected a non-negative finite number"):
        symmetric_gaussian_noise(3, -1.0, (2,), gen())
    with pytest.raises(PrivacyError, match="^upper: expected a last axis of length 6"):
        symmetric_from_upper(np.zeros((2, 5)), 3, 1.0)
    assert upper_triangle_size(3) == 6
