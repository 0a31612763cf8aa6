"""Tree-based Gaussian mechanism over Gram matrices (Dubey & Pentland, Section 4.3 and Algorithm
2; docs/privacy.md)."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fedbandit_env.linear_kernels import linear_privacy_constants
from fedbandit_env.privacy import GramTreePrivatizer, PrivacyBudgetWarning, PrivacyError
from fedbandit_env.privacy.accountant import zcdp_to_dp
from fedbandit_env.privacy.dyadic import popcount
from fedbandit_env.seeding import BatchedRNG

PROPERTY = settings(max_examples=30, deadline=None)

# Reference table of the constants (docs/privacy.md): L = B = S = 1, sigma = 0.5,
# delta = alpha = 0.1, d = 10, T = 10^7; columns eps, M, n_max, m, sigma_N, Lambda, kappa, D,
# Prop-1 bound, beta(1), width(1)
TABLE = [
    (0.1, 10, None, 25, 1198, 5.789e5, 128, 7.83e7, 6.8, 4572, 1.90),
    (0.1, 100, None, 25, 1198, 6.269e5, 134, 7.92e7, 6.8, 1.505e4, 1.90),
    (1, 10, None, 25, 119.8, 5.789e4, 40.3, 4.99e7, 8.9, 1447, 1.90),
    (1, 100, None, 25, 119.8, 6.269e4, 42.3, 5.07e7, 8.8, 4761, 1.90),
    (10, 10, None, 25, 11.98, 5789, 12.8, 3.24e7, 12.0, 458, 1.90),
    (10, 100, None, 25, 11.98, 6269, 13.4, 3.28e7, 11.9, 1506, 1.90),
    (1, 100, 16, 5, 53.59, 6969, 13.0, 3.34e7, 11.7, 1577, 1.89),
]


def agrees_to_3_sf(ours: float, ref: float) -> bool:
    """``ours`` is within half a unit of the third significant figure of ``ref``."""
    unit = 10.0 ** (math.floor(math.log10(abs(ref))) - 2)
    return abs(ours - ref) <= 0.5 * unit


@pytest.mark.parametrize("row", TABLE)
def test_constants_reproduce_the_reference_table(row):
    eps, M, n_max, m, sigma_n, lam, kappa, D, bound, beta, width = row
    c = linear_privacy_constants(eps, 0.1, 10, M, 10**7, alpha=0.1, n_max=n_max)
    assert c.m == m
    assert agrees_to_3_sf(c.sigma_N, sigma_n)
    assert agrees_to_3_sf(c.Lambda, lam) and c.rho_min == c.Lambda
    assert c.rho_max == pytest.approx(3 * c.Lambda)
    assert agrees_to_3_sf(c.kappa, kappa)
    assert agrees_to_3_sf(c.sync_threshold, D)
    assert round(c.sync_bound(), 1) == bound
    b1 = c.initial_beta(sigma=0.5, S=1.0)
    assert agrees_to_3_sf(b1, beta)
    assert round(b1 / math.sqrt(M * c.rho_min), 2) == width


def test_constant_options():
    c = linear_privacy_constants(1.0, 0.1, 10, 100, 10**7)
    assert c.capacity == 2**24 and c.shift == 2 * c.Lambda and c.L_tilde_sq == 2.0
    alt = linear_privacy_constants(1.0, 0.1, 10, 100, 10**7, lambda_form="sqrt2m")
    ratio = math.log(2 / 0.1) / math.log(4 / 0.1)  # sqrt(2m) form: ln(2/delta), not ln(4/delta)
    assert alt.Lambda == pytest.approx(c.Lambda * ratio)
    dec = linear_privacy_constants(1.0, 0.1, 10, 100, 10**7, gamma=4)
    assert dec.n == 2_500_000 and dec.m == 1 + math.ceil(math.log2(2_500_000))
    b2 = linear_privacy_constants(1.0, 0.1, 10, 100, 10**7, B=2.0)
    assert b2.L_tilde_sq == 5.0  # L^2 + B^2
    with pytest.raises(PrivacyError, match="^lambda_form: expected 'paper' or 'sqrt2m'"):
        linear_privacy_constants(1.0, 0.1, 10, 100, 10**7, lambda_form="x")


@pytest.mark.parametrize("eps,delta", [(0.1, 0.1), (1.0, 1e-5), (10.0, 0.01)])
def test_node_noise_meets_the_claim_under_zcdp_accounting(eps, delta):
    c = linear_privacy_constants(eps, delta, 10, 10, 10**5)
    assert c.zcdp_rho == pytest.approx(eps**2 / (16 * math.log(2 / delta) ** 2))
    assert float(zcdp_to_dp(c.zcdp_rho, delta)) <= eps


def rng(seeds=(0,), name="gram"):
    return BatchedRNG.for_runs(list(seeds), "agents").child(name)


def random_leaf(g, lead, d):
    x = g.uniform(-1, 1, (*lead, 3, d)) / math.sqrt(d)
    y = g.uniform(-1, 1, (*lead, 3, 1))
    z = np.concatenate([x, y], axis=-1)
    return np.einsum("...ti,...tj->...ij", z, z), x, y


@PROPERTY
@given(seed=st.integers(0, 2**31), releases=st.integers(1, 40))
def test_exact_part_is_the_whole_history_and_noise_count_is_popcount(seed, releases):
    d = 3
    p = GramTreePrivatizer((2,), d, sigma=1.0, shift=0.5, levels=7, rng=rng((seed % 1013, 1)))
    g = np.random.default_rng(seed)
    gram = np.zeros((2, 2, d + 1, d + 1))
    for _ in range(releases):
        mask = g.random((2, 2)) < 0.6
        Q, _, _ = random_leaf(g, (2, 2), d)
        out = p.release(Q, mask)
        gram += np.where(mask[..., None, None], Q, 0.0)
        np.testing.assert_allclose(p.exact(), gram, atol=1e-12)
        assert np.array_equal(p.num_noise_terms(), popcount(out.index))
        assert np.array_equal(out.released, mask)
        noisy = p.exact() + p.noise()
        np.testing.assert_allclose(
            out.U_hat[mask], noisy[mask][:, :d, :d] + 0.5 * np.eye(d), atol=1e-12
        )
        np.testing.assert_allclose(out.u_hat[mask], noisy[mask][:, :d, d], atol=1e-12)


def test_consecutive_releases_share_nodes():
    d = 2
    p = GramTreePrivatizer((1,), d, sigma=1.0, shift=0.0, levels=4, rng=rng())
    Q = np.zeros((1, 1, d + 1, d + 1))
    noise = []
    for _ in range(4):
        p.release(Q)
        noise.append(p.noise()[0, 0])
    n1, n2, n3, n4 = noise
    node3 = n3 - n2  # release 3 = node(1..2) + node(3)
    assert not np.allclose(node3, 0)
    assert not np.allclose(n2, n1)  # node(1..2) replaces node(1)
    np.testing.assert_allclose(n3, n2 + node3)
    assert not np.allclose(n4, n3) and not np.allclose(n4, n2)  # node(1..4) is fresh
    for n in noise:
        assert np.array_equal(n, n.T)


def test_entry_variance_is_popcount_times_sigma_squared():
    d, sigma, k = 3, 2.0, 7  # release 7 carries popcount(7) = 3 nodes
    p = GramTreePrivatizer((4000,), d, sigma=sigma, shift=0.0, levels=4, rng=rng())
    Q = np.zeros((1, 4000, d + 1, d + 1))
    for _ in range(k):
        p.release(Q)
    noise = p.noise()[0]
    off = noise[:, 0, 1].var() / (3 * sigma**2)
    diag = noise[:, 2, 2].var() / (2 * 3 * sigma**2)
    assert off == pytest.approx(1, abs=0.06) and diag == pytest.approx(1, abs=0.06)


def test_noise_off_gives_gram_plus_lambda_identity():
    d, lam = 3, 1.0
    p = GramTreePrivatizer((2,), d, sigma=0.0, shift=lam, levels=5, num_runs=1)
    g = np.random.default_rng(3)
    total_x = np.zeros((1, 2, d, d))
    total_yx = np.zeros((1, 2, d))
    for _ in range(9):
        Q, x, y = random_leaf(g, (1, 2), d)
        out = p.release(Q)
        total_x += np.einsum("...ti,...tj->...ij", x, x)
        total_yx += np.einsum("...t,...ti->...i", y[..., 0], x)
    np.testing.assert_allclose(out.U_hat, total_x + lam * np.eye(d), atol=1e-12)
    np.testing.assert_allclose(out.u_hat, total_yx, atol=1e-12)


def test_capacity_refuses_releases_and_warns():
    p = GramTreePrivatizer((2,), 2, sigma=1.0, shift=0.0, levels=2, rng=rng())
    Q = np.ones((1, 2, 3, 3))
    first = p.release(Q)
    p.release(Q, np.array([[True, False]]))
    assert p.release_count.tolist() == [[2, 1]] and p.exhausted.tolist() == [[True, False]]
    before = p.exact().copy()
    with pytest.warns(PrivacyBudgetWarning, match="capacity of 2 releases"):
        out = p.release(Q)
    assert out.released.tolist() == [[False, True]]
    assert np.array_equal(p.exact()[0, 0], before[0, 0])
    assert not np.array_equal(out.U_hat[0, 0], first.U_hat[0, 0])  # repeats release 2
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        p.release(Q, np.array([[False, False]]))  # no request on exhausted trees: no warning


def test_runs_with_different_sync_times_match_runs_alone():
    d = 2
    g = np.random.default_rng(8)
    masks = [g.random((3, 2)) < 0.5 for _ in range(30)]
    leaves = [random_leaf(g, (3, 2), d)[0] for _ in range(30)]
    batch = GramTreePrivatizer((2,), d, sigma=1.0, shift=0.1, levels=6, rng=rng((4, 5, 6)))
    alone = GramTreePrivatizer((2,), d, sigma=1.0, shift=0.1, levels=6, rng=rng((4, 5, 6)).run(0))
    for Q, mask in zip(leaves, masks, strict=True):
        b = batch.release(Q, mask)
        if mask[0].any():  # run 0 alone is asked only when it syncs
            a = alone.release(Q[:1], mask[:1])
            assert np.array_equal(a.U_hat[0], b.U_hat[0])
    assert np.array_equal(alone.noise()[0], batch.noise()[0])


def test_from_constants_and_validation():
    c = linear_privacy_constants(1.0, 0.1, 2, 3, 100, n_max=8)
    p = GramTreePrivatizer.from_constants(c, (3,), rng=rng())
    assert p.levels == c.m == 4 and p.capacity == 8 and p.sigma == c.sigma_N
    with pytest.raises(PrivacyError, match=r"^Q: expected an array of shape \(1, 3, 3, 3\)"):
        p.release(np.zeros((3, 3, 3)))
    with pytest.raises(PrivacyError, match="^rng: expected a BatchedRNG when sigma > 0"):
        GramTreePrivatizer((3,), 2, sigma=1.0, shift=0.0, levels=3)
    with pytest.raises(PrivacyError, match="^sigma: expected a non-negative finite number"):
        GramTreePrivatizer((3,), 2, sigma=-1.0, shift=0.0, levels=3, rng=rng())
