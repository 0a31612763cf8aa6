"""Binary-tree continual counter (Zhu, Zhu, Liu & Liu 2021, Algorithms 2–3): dyadic
decomposition, exact part, block reuse, noise count, per-observation budget, noise law, batching."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from fedbandit_env.privacy import PrivacyError, TreeCounter, dyadic_blocks
from fedbandit_env.privacy.dyadic import floor_levels, paper_levels, popcount
from fedbandit_env.seeding import BatchedRNG

PROPERTY = settings(max_examples=50, deadline=None)


def rng(seeds=(0,), name="privacy"):
    return BatchedRNG.for_runs(list(seeds), "agents").child(name)


# -- dyadic decomposition ---------------------------------------------------------------------
@PROPERTY
@given(t=st.integers(0, 10**9))
def test_blocks_partition_the_prefix_and_number_popcount(t):
    blocks = dyadic_blocks(t)
    assert len(blocks) == bin(t).count("1")
    covered = 0
    for q, end in reversed(blocks):
        assert q == covered  # contiguous, disjoint, in order
        length = end - q
        assert length & (length - 1) == 0 and q % length == 0  # aligned dyadic interval
        covered = end
    assert covered == t


def block_level(block: tuple[int, int]) -> int:
    """Level ``j`` of a dyadic block of length ``2^j``."""
    q, t = block
    return (t - q).bit_length() - 1


def blocks_containing(tau: int, horizon: int) -> list[tuple[int, int]]:
    """Every block that holds round ``tau`` and is closed by round ``horizon``, lowest level
    first. A block ``(s, s + 2^j]`` is closed (at round ``s + 2^j``) only when ``s / 2^j`` is
    even; the other aligned intervals are absorbed before they close. At most one per level."""
    out = []
    j = 0
    while (1 << j) <= horizon:
        index = (tau - 1) >> j
        start, end = index << j, (index + 1) << j
        if index % 2 == 0 and end <= horizon:
            out.append((start, end))
        j += 1
    return out


@PROPERTY
@given(t=st.integers(1, 10**6))
def test_round_t_closes_exactly_one_new_block_and_reuses_the_rest(t):
    new = set(dyadic_blocks(t)) - set().union(*(dyadic_blocks(s) for s in range(max(0, t - 1), t)))
    assert new == {(t & (t - 1), t)}
    assert set(dyadic_blocks(t)) - {(t & (t - 1), t)} == set(dyadic_blocks(t & (t - 1)))


@PROPERTY
@given(horizon=st.integers(1, 5000), data=st.data())
def test_each_round_enters_at_most_one_block_per_level(horizon, data):
    tau = data.draw(st.integers(1, horizon))
    blocks = blocks_containing(tau, horizon)
    levels = [block_level(b) for b in blocks]
    assert len(levels) == len(set(levels)) <= floor_levels(horizon)
    seen = {b for t in range(tau, horizon + 1) for b in dyadic_blocks(t) if b[0] < tau <= b[1]}
    assert seen == set(blocks)


def test_level_counts():
    assert floor_levels(10**6) == 20 and paper_levels(10**6) == 20
    assert floor_levels(1024) == 11 and paper_levels(1024) == 10
    assert floor_levels(1) == 1 and paper_levels(1) == 1
    assert list(popcount(np.array([0, 1, 6, 7, 1023]))) == [0, 1, 2, 3, 10]


# -- the counter ------------------------------------------------------------------------------
def simulate(counter, arms_rewards):
    """Insert rounds 1..T of (arms, rewards); return releases, exact parts and true sums."""
    truth = np.zeros((counter.num_runs, *counter.shape))
    out = []
    for t, (arms, rewards) in enumerate(arms_rewards, start=1):
        counter.insert_arms(t, arms, rewards)
        b, i = np.indices(arms.shape)
        truth[b, i, arms] += rewards
        out.append((counter.release(), counter.exact(), truth.copy(), counter.block_noise))
    return out


def random_plays(seed, runs, agents, arms, horizon, integer=True):
    g = np.random.default_rng(seed)
    plays = []
    for _ in range(horizon):
        a = g.integers(0, arms, (runs, agents))
        r = g.integers(0, 3, (runs, agents)).astype(float) if integer else g.random((runs, agents))
        plays.append((a, r))
    return plays


@PROPERTY
@given(
    seed=st.integers(0, 2**31),
    horizon=st.integers(1, 70),
    arms=st.integers(1, 4),
    tree_index=st.sampled_from(["round", "pull"]),
)
def test_exact_part_equals_the_true_prefix_sum(seed, horizon, arms, tree_index):
    c = TreeCounter((2, arms), horizon, 1.0, rng=rng((seed % 1000, 5)), tree_index=tree_index)
    for _, exact, truth, _ in simulate(c, random_plays(seed, 2, 2, arms, horizon)):
        assert np.array_equal(exact, truth)  # integer rewards: exact arithmetic
    assert np.array_equal(c.release(), c.exact() + c.noise())


@PROPERTY
@given(
    seed=st.integers(0, 2**31),
    horizon=st.integers(1, 40),
    arms=st.integers(1, 4),
    tree_index=st.sampled_from(["round", "pull"]),
    init_round=st.booleans(),
)
def test_noise_at_reads_the_noise_at_the_given_arms(seed, horizon, arms, tree_index, init_round):
    c = TreeCounter(
        (3, arms),
        horizon,
        0.5,
        rng=rng((seed % 1000, 7)),
        tree_index=tree_index,
        init_round=init_round,
    )
    g = np.random.default_rng(seed)
    if init_round:
        c.insert(0, g.random((2, 3, arms)))
    for t, (a, r) in enumerate(random_plays(seed, 2, 3, arms, horizon, integer=False), start=1):
        c.insert_arms(t, a, r)
        probe = g.integers(0, arms, (2, 3))
        expected = np.take_along_axis(c.noise(), probe[..., None], axis=-1)[..., 0]
        assert np.array_equal(c.noise_at(probe), expected)  # same sums, bit for bit


def test_noise_at_rejects_bad_arms():
    c = TreeCounter((2, 3), 10, 1.0, rng=rng())
    with pytest.raises(PrivacyError, match="arms"):
        c.noise_at(np.zeros((1, 3), dtype=np.int64))
    with pytest.raises(PrivacyError, match="arms"):
        c.noise_at(np.zeros((1, 2)))
    with pytest.raises(PrivacyError, match="out-of-range"):
        c.noise_at(np.array([[0, -1]]))


@PROPERTY
@given(seed=st.integers(0, 2**31), horizon=st.integers(1, 200))
def test_noise_terms_equal_popcount_when_every_block_holds_a_pull(seed, horizon):
    c = TreeCounter((3,), horizon, 2.0, rng=rng((seed % 997,)))
    g = np.random.default_rng(seed)
    for t in range(1, horizon + 1):
        c.insert(t, g.random((1, 3)))  # every counter observes every round
        assert np.all(c.num_noise_terms() == bin(t).count("1"))
        assert np.count_nonzero(c.noise()) == 3


@PROPERTY
@given(seed=st.integers(0, 2**31), horizon=st.integers(2, 150))
def test_reused_blocks_carry_the_same_noise(seed, horizon):
    c = TreeCounter((2, 3), horizon, 1.0, rng=rng((seed % 991,)), tree_index="round")
    g = np.random.default_rng(seed)
    previous = None
    for t in range(1, horizon + 1):
        c.insert_arms(t, g.integers(0, 3, (1, 2)), g.random((1, 2)))
        noise, noised = c.block_noise, c.block_noised
        new_level = (t & -t).bit_length() - 1
        if previous is not None:
            # levels above the new block are the same blocks as at round t - 1: identical noise
            assert np.array_equal(noise[..., new_level + 1 :], previous[..., new_level + 1 :])
            # levels below were absorbed into the new block
            assert not np.any(noise[..., :new_level]) and not np.any(noised[..., :new_level])
        # a block carries noise iff it holds a pull
        assert np.array_equal(noised, noise != 0)
        previous = noise
        first = c.release()
        assert np.array_equal(first, c.release())  # releasing again reuses the cached noise


@PROPERTY
@given(seed=st.integers(0, 2**31), horizon=st.integers(2, 100))
def test_pull_indexed_counter_counts_popcount_of_own_pulls(seed, horizon):
    c = TreeCounter((2, 3), horizon, 1.0, rng=rng((seed % 983,)), tree_index="pull")
    g = np.random.default_rng(seed)
    for t in range(1, horizon + 1):
        c.insert_arms(t, g.integers(0, 3, (1, 2)), g.random((1, 2)))
        assert np.array_equal(c.num_noise_terms(), popcount(c.counts))


def test_noise_only_on_blocks_that_hold_a_pull():
    c = TreeCounter((2,), 8, 1.0, rng=rng())
    pulled_at = {1, 2, 3}  # counter 0 is pulled in rounds 1..3 only; counter 1 never
    for t in range(1, 9):
        mask = np.array([[t in pulled_at, False]])
        c.insert(t, np.ones((1, 2)), mask)
    # t = 8: decomposition is the single block (0, 8], which holds pulls of counter 0 only
    assert list(c.num_noise_terms()[0]) == [1, 0]
    assert c.release()[0, 1] == 0.0 and c.exact()[0, 0] == 3.0
    printed = TreeCounter((2,), 8, 1.0, rng=rng(), noise_on_empty_blocks=True)
    for t in range(1, 8):
        printed.insert(t, np.zeros((1, 2)), np.zeros((1, 2), dtype=bool))
        assert np.all(printed.num_noise_terms() == bin(t).count("1"))


def test_per_observation_budget_sums_to_epsilon():
    horizon, eps = 100, 1.5
    c = TreeCounter((1,), horizon, eps, rng=rng())
    assert c.budget_levels == c.storage_levels == 7
    spent = np.zeros(horizon + 1)  # epsilon spent on each round's observation
    for t in range(1, horizon + 1):
        c.insert(t, np.ones((1, 1)))
        level = (t & -t).bit_length() - 1
        assert c.block_noised[0, 0, level]
        spent[t - (1 << level) + 1 : t + 1] += c.epsilon_per_block  # the closed block's rounds
    assert spent[1:].max() == pytest.approx(eps)
    assert spent[1] == pytest.approx(eps)  # round 1 enters a block at every level
    assert np.all(spent[1:] <= eps + 1e-12)
    assert c.effective_epsilon == pytest.approx(eps)
    for tau in range(1, horizon + 1):  # the same figure from the decomposition alone
        blocks = len(blocks_containing(tau, horizon))
        assert spent[tau] == pytest.approx(blocks * c.epsilon_per_block)


def test_paper_levels_overspend_when_horizon_is_a_power_of_two():
    c = TreeCounter((1,), 1024, 1.0, rng=rng(), levels="paper")
    assert c.budget_levels == 10 and c.storage_levels == 11
    assert c.effective_epsilon == pytest.approx(1.1)
    assert c.scale == pytest.approx(10.0)
    d = TreeCounter((1,), 10**6, 1.0, rng=rng(), levels="paper")
    assert d.effective_epsilon == pytest.approx(1.0) and d.scale == pytest.approx(20.0)


def test_block_noise_is_laplace_with_the_calibrated_scale():
    horizon, eps, sens = 16, 2.0, 0.5
    c = TreeCounter((200, 50), horizon, eps, rng=rng(), sensitivity=sens)
    scale = sens * floor_levels(horizon) / eps
    assert c.scale == pytest.approx(scale)
    for t in range(1, horizon + 1):
        c.insert(t, np.zeros((1, 200, 50)))
    # t = 16 is a single block: its noise is one Laplace draw per counter
    noise = c.noise().ravel()
    assert stats.kstest(noise, stats.laplace(scale=scale).cdf).pvalue > 0.01
    # t = 15 would carry four blocks: check the release variance 2 b^2 popcount
    d = TreeCounter((200, 50), 15, eps, rng=rng(name="other"), sensitivity=sens)
    for t in range(1, 16):
        d.insert(t, np.zeros((1, 200, 50)))
    scale15 = sens * floor_levels(15) / eps
    assert d.noise().var() == pytest.approx(2 * scale15**2 * 4, rel=0.05)


def test_batch_run_equals_the_run_alone():
    plays = random_plays(3, 3, 2, 4, 60, integer=False)
    for mode in ("round", "pull"):
        batch = TreeCounter((2, 4), 60, 1.0, rng=rng((7, 8, 9)), tree_index=mode)
        alone = TreeCounter((2, 4), 60, 1.0, rng=rng((7, 8, 9)).run(1), tree_index=mode)
        for t, (a, r) in enumerate(plays, start=1):
            batch.insert_arms(t, a, r)
            alone.insert_arms(t, a[1:2], r[1:2])
            assert np.array_equal(batch.release()[1], alone.release()[0])
        assert not np.array_equal(batch.noise()[0], batch.noise()[1])


def test_infinite_epsilon_is_exact_and_needs_no_rng():
    c = TreeCounter((2, 3), 30, math.inf, num_runs=2)
    outs = simulate(c, random_plays(4, 2, 2, 3, 30, integer=False))
    for release, _, truth, _ in outs:
        np.testing.assert_allclose(release, truth)
    assert not np.any(c.noise()) and c.scale == 0.0


def test_init_round_is_one_extra_noised_leaf():
    c = TreeCounter((1, 2), 8, 1.0, rng=rng(), init_round=True)
    c.insert_arms(0, np.array([[1]]), np.array([[0.5]]))
    assert list(c.num_noise_terms()[0, 0]) == [0, 1]
    init_noise = c.noise()[0, 0, 1]
    assert init_noise != 0
    for t in range(1, 9):
        c.insert_arms(t, np.array([[0]]), np.array([[1.0]]))
    assert c.noise()[0, 0, 1] == init_noise  # the init leaf keeps its noise
    assert list(c.exact()[0, 0]) == [8.0, 0.5]
    assert list(c.counts[0, 0]) == [8, 1]
    p = TreeCounter((1, 2), 8, 1.0, rng=rng(), init_round=True, tree_index="pull")
    assert p.capacity == 9 and p.storage_levels == 4


def test_bounds_clip_and_set_the_sensitivity():
    c = TreeCounter((2,), 4, 1.0, rng=rng(), bounds=(0.0, 2.0))
    assert c.sensitivity == 2.0
    c.insert(1, np.array([[5.0, -3.0]]))
    assert list(c.exact()[0]) == [2.0, 0.0]


def test_insert_validation():
    c = TreeCounter((2, 3), 3, 1.0, rng=rng())
    with pytest.raises(PrivacyError, match="^t: expected the next round 1, got 2"):
        c.insert(2, np.zeros((1, 2, 3)))
    with pytest.raises(PrivacyError, match=r"^values: expected an array of shape \(1, 2, 3\)"):
        c.insert(1, np.zeros((2, 3)))
    with pytest.raises(PrivacyError, match="^pulled: expected a bool array"):
        c.insert(1, np.zeros((1, 2, 3)), np.zeros((1, 2, 3)))
    with pytest.raises(PrivacyError, match="^arms: expected indices in"):
        c.insert_arms(1, np.array([[0, 3]]), np.zeros((1, 2)))
    with pytest.raises(PrivacyError, match="^values: expected finite numbers"):
        c.insert(1, np.full((1, 2, 3), np.inf))
    for t in range(1, 4):
        c.insert(t, np.zeros((1, 2, 3)))
    with pytest.raises(PrivacyError, match="^t: expected a round <= horizon 3"):
        c.insert(4, np.zeros((1, 2, 3)))


# -- noise_per="row" (one draw per row in leaf rounds) ----------------------------------------
@PROPERTY
@given(seed=st.integers(0, 2**31), horizon=st.integers(1, 70), init_round=st.booleans())
def test_row_layout_insert_arms_equals_the_one_hot_insert(seed, horizon, init_round):
    """With ``noise_per="row"`` the pulled-index insertion and the masked insertion give the same
    releases and block noise, bit for bit, and use the same streams."""
    make = lambda: TreeCounter(  # noqa: E731
        (3, 4), horizon, 1.0, rng=rng((seed % 1000, 5)), init_round=init_round, noise_per="row"
    )
    a, b = make(), make()
    g = np.random.default_rng(seed)
    if init_round:
        first = g.random((2, 3, 4))
        a.insert(0, first)
        b.insert(0, first)
    for t, (arms, r) in enumerate(random_plays(seed, 2, 3, 4, horizon, integer=False), start=1):
        a.insert_arms(t, arms, r)
        pulled = arms[..., None] == np.arange(4)
        b.insert(t, np.where(pulled, r[..., None], 0.0), pulled)
        assert np.array_equal(a.release(), b.release())
        assert np.array_equal(a.block_noise, b.block_noise)


def test_row_layout_draws_per_row_in_leaf_rounds_only():
    c = TreeCounter((3, 5), 16, 1.0, rng=rng((1, 2)), noise_per="row")
    assert c._row_stream._stream._shape == (2, 3)  # E1, E2 per row (agent)
    assert c._stream._stream._shape == (2, 3, 5)  # the other rounds: per counter
    arms = np.array([[0, 1, 4], [2, 2, 3]])
    for t in range(1, 5):
        c.insert_arms(t, arms, np.ones((2, 3)))
    # two leaf rounds took one row draw each; two block rounds took one counter draw each
    assert (c._row_stream._stream._pos == 2).all() and (c._stream._stream._pos == 2).all()
    # a leaf round's noise lands on the pulled counter only, with the row's draw
    d = TreeCounter((3, 5), 16, 1.0, rng=rng((1, 2)), noise_per="row")
    d.insert_arms(1, arms, np.ones((2, 3)))
    noised = d.block_noised[..., 0]
    assert np.array_equal(noised, arms[..., None] == np.arange(5))
    row = TreeCounter((3, 5), 16, 1.0, rng=rng((1, 2)), noise_per="row")._row_stream.next()
    assert np.array_equal(d.block_noise[..., 0][noised], (d.scale * row).reshape(-1))


def test_row_layout_refuses_two_pulls_in_one_row_of_a_leaf_round():
    c = TreeCounter((2, 3), 8, 1.0, rng=rng(), noise_per="row")
    pulled = np.array([[[True, True, False], [False, False, True]]])
    with pytest.raises(PrivacyError, match="one pulled counter per row"):
        c.insert(1, np.ones((1, 2, 3)), pulled)
    c.insert(1, np.ones((1, 2, 3)), pulled & [[[True, False, True]]])  # one per row: fine
    c.insert(2, np.ones((1, 2, 3)), pulled)  # round 2 closes a level-1 block: per counter
    with pytest.raises(PrivacyError, match="noise_per"):
        TreeCounter((2, 3), 8, 1.0, rng=rng(), noise_per="arm")


def test_row_layout_keeps_the_noise_distribution_and_batch_identity():
    """Leaf blocks still carry one Laplace(scale) each: the release noise after 7 rounds of
    pulls (blocks of 4, 2 and 1 rounds: three noised blocks) has variance 3 * 2 b^2, as in the
    per-counter layout; run b of a batch equals the run alone."""
    runs = 3000
    c = TreeCounter((1, 4), 8, 2.0, rng=rng(range(runs)), noise_per="row")
    arms = np.zeros((runs, 1), dtype=np.int64)
    for t in range(1, 8):
        c.insert_arms(t, arms, np.zeros((runs, 1)))
    noise = c.noise()[:, 0, 0]
    assert noise.var() == pytest.approx(3 * 2 * c.scale**2, rel=0.15)
    assert np.all(c.noise()[:, 0, 1:] == 0.0)  # never pulled: never noised
    plays = random_plays(3, 3, 2, 4, 40, integer=False)
    batch = TreeCounter((2, 4), 40, 1.0, rng=rng((7, 8, 9)), noise_per="row")
    alone = TreeCounter((2, 4), 40, 1.0, rng=rng((7, 8, 9)).run(1), noise_per="row")
    for t, (a, r) in enumerate(plays, start=1):
        batch.insert_arms(t, a, r)
        alone.insert_arms(t, a[1:2], r[1:2])
        assert np.array_equal(batch.release()[1], alone.release()[0])


def test_round_mode_blocks_live_only_at_the_set_bits_of_the_round():
    """What release_flat relies on: after round t (round mode), every level whose bit of t is
    clear holds no block (exact 0, no noise), whatever was pulled."""
    c = TreeCounter((3, 4), 300, 1.0, rng=rng((0, 1)), init_round=True)
    g = np.random.default_rng(3)
    c.insert(0, g.random((2, 3, 4)))
    for t in range(1, 301):
        c.insert_arms(t, g.integers(4, size=(2, 3)), g.standard_normal((2, 3)))
        clear = [j for j in range(c.storage_levels) if not t >> j & 1]
        assert not c.state.exact[..., clear].any() and not c.block_noise[..., clear].any()
        assert not c.block_noised[..., clear].any()


@pytest.mark.parametrize("tree_index", ["round", "pull"])
def test_reads_at_the_pulled_arms_equal_the_whole_release(tree_index):
    """noise_at (the Fed_UCB agents' read) is noise() read at one arm per agent, bit for bit,
    in both tree modes."""
    c = TreeCounter((3, 4), 200, 1.0, rng=rng((0, 1)), tree_index=tree_index, init_round=True)
    g = np.random.default_rng(5)
    c.insert(0, g.random((2, 3, 4)))
    for t in range(1, 201):
        arms, rewards = g.integers(4, size=(2, 3)), g.standard_normal((2, 3))
        c.insert_arms(t, arms, rewards)
        at = arms[..., None]
        assert c.noise_at(arms).tobytes() == np.take_along_axis(c.noise(), at, -1)[..., 0].tobytes()
    with pytest.raises(PrivacyError, match="next round"):
        c.insert_arms(5, arms, rewards)


def test_params_are_what_both_engines_read():
    """tree_params: the levels and the Laplace scale per block (hand-computed), the numpy
    counter's params and attributes, and the checks of the options."""
    from fedbandit_env.privacy.tree_counter import tree_params

    p = tree_params((2, 3), 100, 0.7, bounds=(0.0, 2.0), tree_index="pull", init_round=True)
    assert (p.capacity, p.storage_levels, p.budget_levels, p.sensitivity) == (101, 7, 7, 2.0)
    assert p.scale == 2.0 / (0.7 / 7) and p.effective_epsilon == pytest.approx(0.7)
    c = TreeCounter((2, 3), 100, 0.7, rng=rng(), bounds=(0.0, 2.0), tree_index="pull",
                    init_round=True)  # fmt: skip
    assert c.params == p and (c.scale, c.storage_levels, c.shape) == (p.scale, 7, (2, 3))
    paper = tree_params((1,), 1024, 1.0, levels="paper")
    assert (paper.storage_levels, paper.budget_levels) == (11, 10)
    assert paper.effective_epsilon == pytest.approx(1.1)
    assert tree_params((1,), 8, math.inf).scale == 0.0
    with pytest.raises(PrivacyError, match="^levels"):
        tree_params((1,), 8, 1.0, levels=0)
    with pytest.raises(PrivacyError, match="^tree_index"):
        tree_params((1,), 8, 1.0, tree_index="arm")
