"""Chan–Shi–Song hybrid counter (the DP recommender agents of Li, Song & Fragouli 2020;
docs/privacy.md, "Hybrid counter")."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fedbandit_env.privacy import HybridCounter, PrivacyError, hybrid_noise_variance
from fedbandit_env.privacy.hybrid_counter import hybrid_noise_std
from fedbandit_env.seeding import BatchedRNG

PROPERTY = settings(max_examples=40, deadline=None)


def rng(seeds=(0,), name="hybrid"):
    return BatchedRNG.for_runs(list(seeds), "agents").child(name)


def test_closed_form_matches_the_spec_table():
    # docs/privacy.md, "Hybrid counter": std at eps = 1, D = 1
    std = hybrid_noise_std(np.array([10, 100, 1000, 10**4]), 1.0)
    assert np.round(std, 1).tolist() == [10.2, 25.1, 57.6, 74.3]
    assert hybrid_noise_variance(0, 1.0) == 0.0
    assert hybrid_noise_variance(1, 2.0, 0.5) == pytest.approx(8 * 0.25 / 4)  # one Lap(2D/eps)
    assert hybrid_noise_variance(10, math.inf) == 0.0


@pytest.mark.parametrize("n", [10, 100, 1000])
def test_empirical_variance_matches_the_closed_form_within_5_percent(n):
    eps = 2.0
    c = HybridCounter((100, 100), n, eps, rng=rng(name=f"v{n}"))  # 10^4 independent counters
    g = np.random.default_rng(n)
    for _ in range(n):
        c.insert(g.random((1, 100, 100)))
    noise = (c.release() - c.exact()).ravel()
    ratio = noise.var() / float(hybrid_noise_variance(n, eps))
    assert abs(ratio - 1) < 0.05, ratio
    assert np.allclose(hybrid_noise_variance(c.counts, eps), hybrid_noise_variance(n, eps))


@PROPERTY
@given(seed=st.integers(0, 2**31), n=st.integers(1, 300))
def test_exact_part_is_the_clipped_running_sum_and_queries_are_stable(seed, n):
    c = HybridCounter((3,), n, 1.0, rng=rng((seed % 1009,)), bounds=(0.0, 1.0))
    g = np.random.default_rng(seed)
    total = np.zeros((1, 3))
    for _ in range(n):
        x = g.normal(0.5, 1.0, (1, 3))
        out = c.insert(x)
        total += np.clip(x, 0, 1)
        assert np.array_equal(out, c.release()) and np.array_equal(c.release(), c.release())
    np.testing.assert_allclose(c.exact(), total)
    np.testing.assert_allclose(c.release() - c.noise(), total)


def test_noise_restarts_the_binary_half_at_powers_of_two():
    eps = 1.0
    c = HybridCounter((1,), 64, eps, rng=rng())
    log_noise = []
    for n in range(1, 65):
        c.insert(np.full((1, 1), 0.3))
        binary = c.state.alpha_noise.sum(axis=-1)
        if n & (n - 1) == 0:
            assert binary[0, 0] == 0.0  # only the logarithmic half at c = 2^k
            log_noise.append(c.noise()[0, 0])
        else:
            assert binary[0, 0] != 0.0
    assert len(set(log_noise)) == 7  # a new increment at 1, 2, 4, ..., 64


def test_counters_not_inserted_are_unchanged():
    c = HybridCounter((4,), 10, 1.0, rng=rng())
    c.insert(np.full((1, 4), 0.5))
    before = c.release()
    c.insert(np.full((1, 4), 0.5), np.array([[True, False, True, False]]))
    after = c.release()
    assert after[0, 1] == before[0, 1] and after[0, 3] == before[0, 3]
    assert after[0, 0] != before[0, 0]
    assert c.counts.tolist() == [[2, 1, 2, 1]]


def test_batch_equals_runs_alone():
    g = np.random.default_rng(5)
    xs = [g.random((3, 2, 5)) for _ in range(40)]
    masks = [g.random((3, 2, 5)) < 0.4 for _ in range(40)]
    batch = HybridCounter((2, 5), 40, 1.0, rng=rng((1, 2, 3)))
    alone = HybridCounter((2, 5), 40, 1.0, rng=rng((1, 2, 3)).run(2))
    for x, m in zip(xs, masks, strict=True):
        batch.insert(x, m)
        alone.insert(x[2:], m[2:])
    assert np.array_equal(batch.release()[2], alone.release()[0])


def test_infinite_epsilon_gives_exact_sums():
    c = HybridCounter((2,), 20, math.inf, num_runs=1)
    for _ in range(20):
        c.insert(np.array([[0.25, 2.0]]))
    np.testing.assert_allclose(c.release(), [[5.0, 20.0]])  # 2.0 is clipped to 1


def test_insert_validation():
    c = HybridCounter((2,), 2, 1.0, rng=rng())
    with pytest.raises(PrivacyError, match=r"^values: expected an array of shape \(1, 2\)"):
        c.insert(np.zeros(2))
    with pytest.raises(PrivacyError, match="^mask: expected a bool array"):
        c.insert(np.zeros((1, 2)), np.ones((1, 2)))
    c.insert(np.zeros((1, 2)))
    c.insert(np.zeros((1, 2)))
    with pytest.raises(PrivacyError, match="^mask: expected at most 2 items per counter"):
        c.insert(np.zeros((1, 2)))


def flat_of(counter: HybridCounter, index: tuple[np.ndarray, ...]) -> np.ndarray:
    """Flat positions of (B, *shape) of an index tuple."""
    return np.ravel_multi_index(index, (counter.num_runs, *counter.shape))


def test_insert_flat_equals_masked_insert_and_draws():
    """insert_flat (the DP recommender agents' form) gives exactly the masked insert's releases
    and noise."""
    runs, n, k, horizon = 3, 4, 5, 300
    full = HybridCounter((n, k), horizon, 1.5, rng=BatchedRNG.for_runs([1, 2, 3], "agents"))
    fast = HybridCounter((n, k), horizon, 1.5, rng=BatchedRNG.for_runs([1, 2, 3], "agents"))
    gen = np.random.default_rng(0)
    b, i = np.indices((runs, n))
    for _ in range(horizon):
        arms = gen.integers(k, size=(runs, n))
        rewards = gen.random((runs, n)) * 1.4 - 0.2  # some values need clipping
        mask = arms[..., None] == np.arange(k)
        released = full.insert(np.where(mask, rewards[..., None], 0.0), mask)
        got = fast.insert_flat(flat_of(fast, (b, i, arms)), rewards)
        assert np.array_equal(got, released[b, i, arms])
    assert np.array_equal(fast.release(), full.release())
    assert np.array_equal(fast.counts, full.counts)


def test_row_noise_insert_flat_equals_masked_insert_and_batch():
    """noise_per="row" (one draw per agent and step): insert_flat and the masked insert agree
    bit for bit, and a run inside a batch equals the run alone."""
    runs, n, k, horizon = 3, 4, 5, 200
    make = lambda seeds: HybridCounter(  # noqa: E731
        (n, k), horizon, 1.5, rng=BatchedRNG.for_runs(seeds, "agents"), noise_per="row"
    )
    full, fast, alone = make([1, 2, 3]), make([1, 2, 3]), make([2])
    gen = np.random.default_rng(0)
    b, i = np.indices((runs, n))
    for _ in range(horizon):
        arms = gen.integers(k, size=(runs, n))
        rewards = gen.random((runs, n))
        mask = arms[..., None] == np.arange(k)
        released = full.insert(np.where(mask, rewards[..., None], 0.0), mask)
        got = fast.insert_flat(flat_of(fast, (b, i, arms)), rewards)
        alone.insert_flat(flat_of(alone, (b[1:2] * 0, i[1:2], arms[1:2])), rewards[1:2])
        assert np.array_equal(got, released[b, i, arms])
    assert np.array_equal(fast.release(), full.release())
    assert np.array_equal(alone.release()[0], full.release()[1])


def test_row_noise_has_the_closed_form_variance():
    """One draw per row still gives every item a fresh Laplace: the noise variance of counters
    filled through rows matches the closed form within 5 %."""
    n_items, rows, k = 100, 5000, 2
    c = HybridCounter((rows, k), n_items, 2.0, rng=rng(name="rowvar"), noise_per="row")
    r = np.arange(rows)
    for t in range(2 * n_items):  # alternate the two arms of each row: n_items each
        c.insert_flat(
            flat_of(c, (np.zeros(rows, np.int64), r, np.full(rows, t % 2))), np.zeros(rows)
        )
    var = c.noise().var()
    assert var == pytest.approx(float(hybrid_noise_variance(n_items, 2.0)), rel=0.05)


def test_row_noise_refuses_two_items_in_one_row():
    c = HybridCounter((2, 3), 10, 1.0, rng=rng(), noise_per="row")
    with pytest.raises(PrivacyError, match="at most one item per row"):
        c.insert_flat(
            flat_of(c, (np.array([0, 0]), np.array([1, 1]), np.array([0, 2]))), np.zeros(2)
        )
    mask = np.zeros((1, 2, 3), dtype=bool)
    mask[0, 0, :2] = True
    with pytest.raises(PrivacyError, match="at most one item per row"):
        c.insert(np.zeros((1, 2, 3)), mask)
    with pytest.raises(PrivacyError, match="noise_per"):
        HybridCounter((2, 3), 10, 1.0, rng=rng(), noise_per="arm")


def test_insert_flat_returns_what_release_reads():
    """insert_flat returns exactly the releases read afterwards, with every row at once or a
    subset of the runs."""
    runs, n, k, horizon = 3, 4, 5, 150
    for noise_per in ("counter", "row"):
        c = HybridCounter(
            (n, k), horizon, 1.5, rng=BatchedRNG.for_runs([4, 5, 6], "agents"), noise_per=noise_per
        )
        gen = np.random.default_rng(1)
        b, i = np.indices((runs, n))
        for t in range(horizon):
            arms = gen.integers(k, size=(runs, n))
            rewards = gen.random((runs, n)) * 1.4 - 0.2
            some = gen.random(runs) < 0.5 if t % 3 else np.ones(runs, dtype=bool)
            index = (b[some], i[some], arms[some])
            got = c.insert_flat(flat_of(c, index), rewards[some])
            assert np.array_equal(got, c.release()[index])


def test_insert_flat_validation():
    c = HybridCounter((2, 3), 10, 1.0, rng=rng())
    with pytest.raises(PrivacyError, match="flat"):
        c.insert_flat(np.array([6]), np.zeros(1))
    with pytest.raises(PrivacyError, match="flat"):
        c.insert_flat(np.array([-1]), np.zeros(1))
    with pytest.raises(PrivacyError, match="flat"):
        c.insert_flat(np.array([0.0]), np.zeros(1))
    with pytest.raises(PrivacyError, match="shape of values"):
        c.insert_flat(np.array([0]), np.zeros(2))
    with pytest.raises(PrivacyError, match="finite"):
        c.insert_flat(np.array([0]), np.array([np.nan]))
    rows = HybridCounter((2, 3), 2, 1.0, rng=rng(), noise_per="row")
    with pytest.raises(PrivacyError, match="one item per row"):
        rows.insert_flat(np.array([0, 1]), np.zeros(2))
    for _ in range(2):
        rows.insert_flat(np.array([0]), np.zeros(1))
    with pytest.raises(PrivacyError, match="at most 2 items"):
        rows.insert_flat(np.array([0]), np.zeros(1))
    assert rows.counts[0, 0, 0] == 2  # the refused insertion changed nothing


def test_params_are_what_both_engines_read():
    """hybrid_params: the noise scales and levels of the numpy counter (hand-computed), and the
    checks of the options."""
    from fedbandit_env.privacy.hybrid_counter import hybrid_params

    p = hybrid_params((2, 3), 100, 0.5, bounds=(0.0, 2.0))
    c = HybridCounter((2, 3), 100, 0.5, rng=rng(), bounds=(0.0, 2.0))
    assert c.params == p and (p.sensitivity, p.log_scale, p.binary_levels) == (2.0, 8.0, 6)
    assert hybrid_params((1,), 1, math.inf).log_scale == 0.0
    with pytest.raises(PrivacyError, match="^bounds"):
        hybrid_params((2,), 10, 1.0, bounds=(1.0, 0.0))
    with pytest.raises(PrivacyError, match="^epsilon"):
        hybrid_params((2,), 10, 0.0)
