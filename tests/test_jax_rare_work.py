"""Rare work only when it happens (docs/jax.md, "Rare work"), for the JAX counters and the
federated linear learner's trigger, against plain loops written here:

* the closing level of index k is the number of trailing zeros of k, and an insertion writes
  that level only (the prefix layouts of fedbandit_env.jax.prefix_layout, fed to the shared
  insertions of fedbandit_env.privacy.tree_counter, hybrid_counter and gram_tree): every other
  level is unchanged bit for bit;
* releases equal a plain dictionary of open blocks fed the same noise;
* the tree counter's ``insert_arms`` draws one Laplace per row where only the pulled counter can
  close a noised block, with the law of ``Lap(scale)``;
* fed_lin_ucb's trigger log-determinant without a new factor (V's factor and the determinant
  lemma; a factor of V + cI updated by rank one) equals numpy's slogdet of the trigger matrix.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

jax = pytest.importorskip("jax")

import jax.numpy as jnp  # noqa: E402

from fedbandit_env.jax.gram_tree import GramTree  # noqa: E402
from fedbandit_env.jax.hybrid_counter import HybridCounter  # noqa: E402
from fedbandit_env.jax.linear_kernels import (  # noqa: E402
    cholesky,
    cholesky_update,
    logdet_plus_rank_one,
)
from fedbandit_env.jax.prefix_layout import (  # noqa: E402
    lowest_bit_cleared,
    prefix_close,
    prefix_leaf,
)
from fedbandit_env.jax.tree_counter import TreeCounter  # noqa: E402
from fedbandit_env.privacy.dyadic import trailing_zeros  # noqa: E402
from fedbandit_env.privacy.gram_tree import insert_leaf  # noqa: E402
from fedbandit_env.privacy.tree_counter import tree_insert  # noqa: E402


def plain_ctz(k: int) -> int:
    """Trailing zero bits of k >= 1, by halving."""
    zeros = 0
    while k % 2 == 0:
        k //= 2
        zeros += 1
    return zeros


def changed_levels(before: np.ndarray, after: np.ndarray) -> set[int]:
    """The levels (first axis) where two level-first arrays differ."""
    diff = np.asarray(before) != np.asarray(after)
    return {int(j) for j in np.nonzero(diff.reshape(diff.shape[0], -1).any(axis=1))[0]}


def test_the_closing_level_is_the_number_of_trailing_zeros():
    """Hand-computed cases, then every k up to 4096 against halving; ``k & (k - 1)`` drops the
    closing block (the prefix of the blocks kept)."""
    ks = np.array([1, 2, 3, 4, 6, 8, 12, 96, 1024, 1025], np.int32)
    assert trailing_zeros(ks).tolist() == [0, 1, 0, 2, 1, 3, 2, 5, 10, 0]
    assert lowest_bit_cleared(ks).tolist() == [0, 0, 2, 0, 4, 0, 8, 64, 0, 1024]
    every = np.arange(1, 4097)
    assert trailing_zeros(jnp.asarray(every, jnp.int32)).tolist() == [plain_ctz(k) for k in every]
    assert trailing_zeros(every).tolist() == [plain_ctz(k) for k in every]


# ---------------------------------------------------------------- the tree counter
class PlainTree:
    """One counter's open blocks as a dict level -> (noise, noised) over its clock k: index k
    closes the block (k - 2^ctz(k), k], absorbing the blocks below."""

    def __init__(self) -> None:
        self.blocks: dict[int, tuple[float, bool]] = {}

    def close(self, k: int, noise: float, noised: bool) -> None:
        level = plain_ctz(k)
        self.blocks = {j: b for j, b in self.blocks.items() if j > level}
        self.blocks[level] = (noise if noised else 0.0, noised)

    def noise(self) -> float:
        return sum(b[0] for b in self.blocks.values())


@pytest.mark.parametrize("tree_index", ["round", "pull"])
def test_tree_insertion_writes_only_the_closing_level_and_releases_the_open_blocks(tree_index):
    """Integer noise fed to the shared insertion (so every float32 sum is exact): each counter's
    release noise is the sum of its open blocks in a plain loop (round mode: a block is noised
    iff it holds a pull), and each insertion changes the prefix arrays at the closing level
    only (round mode: level ctz(t); pull mode: ctz(count) of each pulled counter)."""
    shape, rounds = (2, 3), 70
    counter = TreeCounter(shape, rounds, 1.0, exact_blocks=True, tree_index=tree_index)
    p = counter.params
    insert = jax.jit(lambda s, v, pulled, noise: tree_insert(p, s, v, pulled, noise,
                                                             close=prefix_close))  # fmt: skip
    g = np.random.default_rng(5)
    plain = [[PlainTree() for _ in range(3)] for _ in range(2)]
    pulls = np.zeros(shape, np.int64)
    last = np.zeros(shape, np.int64)
    exact = np.zeros(shape)
    state = counter.init()
    for t in range(1, rounds + 1):
        pulled = g.random(shape) < 0.4
        values = g.integers(0, 5, shape).astype(np.float32)
        noise = g.integers(-50, 50, shape).astype(np.float32)
        new = insert(state, jnp.asarray(values), jnp.asarray(pulled), jnp.asarray(noise))
        pulls += pulled
        last = np.where(pulled, t, last)
        exact += np.where(pulled, values, 0.0)
        for i, k in np.ndindex(*shape):
            if tree_index == "round":
                plain[i][k].close(t, noise[i, k], last[i, k] > t - 2 ** plain_ctz(t))
            elif pulled[i, k]:
                plain[i][k].close(int(pulls[i, k]), noise[i, k], True)
        want = np.array([[plain[i][k].noise() for k in range(3)] for i in range(2)])
        np.testing.assert_array_equal(np.asarray(counter.noise(new)), want)
        np.testing.assert_array_equal(np.asarray(counter.exact(new)), exact)
        if tree_index == "round":
            allowed = {plain_ctz(t)}
        else:
            allowed = {plain_ctz(int(c)) for c in pulls[pulled]}
        for before, after in ((state.noise, new.noise), (state.noised, new.noised),
                              (state.exact, new.exact)):  # fmt: skip
            assert changed_levels(before, after) <= allowed, (t, allowed)
        blocks, noised = counter.blocks(new)  # numpy's per-level view
        for i, k in np.ndindex(*shape):
            open_ = plain[i][k].blocks
            for j in range(p.storage_levels):
                assert float(blocks[i, k, j]) == (open_[j][0] if j in open_ else 0.0)
                assert bool(noised[i, k, j]) == (j in open_ and open_[j][1])
        state = new


def test_insert_arms_draws_only_for_the_blocks_that_close_noised():
    """Round mode: a leaf round (t = 1) uses one draw per row, at the pulled counter only (the
    others close an empty level-0 block); rounds 2 and 4 close (0, 2] and (0, 4], which noise
    every counter pulled in them, one draw per counter. Over 20,000 keys every noised block is
    Lap(scale): sd sqrt(2) scale, mean |x| = scale (5 standard errors)."""
    counter = TreeCounter((3, 4), 64, 2.0, bounds=(0.0, 1.0), exact_blocks=False)
    plays = jnp.array([[1, 3, 0], [2, 3, 1], [0, 0, 0], [3, 3, 2]], jnp.int32)
    ones = jnp.ones(3, jnp.float32)

    def four_rounds(key):
        state, noise, draws = counter.init(), [], []
        for r, k in enumerate(jax.random.split(key, 4)):
            draws.append(counter.draw_arms(k, state))
            state = counter.insert_arms(k, state, plays[r], ones)
            noise.append(counter.noise(state))
        return jnp.stack(noise), jnp.stack(draws)

    draws_n = 20_000
    noise, draws = jax.jit(jax.vmap(four_rounds))(jax.random.split(jax.random.PRNGKey(11), draws_n))
    noise, draws = np.asarray(noise, np.float64), np.asarray(draws, np.float64)
    hit = [np.asarray(plays[r])[:, None] == np.arange(4) for r in range(4)]
    assert (noise[:, 0][:, ~hit[0]] == 0).all() and (noise[:, 0][:, hit[0]] != 0).all()
    assert (draws[:, 0] == draws[:, 0, :, :1]).all()  # one draw per row
    noised2 = hit[0] | hit[1]  # rows: arms {1, 2}, {3}, {0, 1}
    assert (noise[:, 1][:, ~noised2] == 0).all() and (noise[:, 1][:, noised2] != 0).all()
    for r in (1, 3):  # rounds 2 and 4: per counter
        assert (draws[:, r] != draws[:, r, :, :1]).any(axis=(1, 2)).all()
    noised4 = hit[0] | hit[1] | hit[2] | hit[3]
    assert (noise[:, 3][:, ~noised4] == 0).all() and (noise[:, 3][:, noised4] != 0).all()
    scale = counter.scale
    se = math.sqrt(5 / (4 * draws_n))
    for x in (noise[:, 0][:, hit[0]], noise[:, 1][:, noised2], noise[:, 3][:, noised4]):
        for column in x.T:
            assert abs(column.std() / (math.sqrt(2) * scale) - 1) < 5 * se
            assert abs(np.abs(column).mean() / scale - 1) < 5 / math.sqrt(draws_n)


# ---------------------------------------------------------------- the hybrid counter
def test_hybrid_insertion_writes_one_level_and_matches_a_plain_loop():
    """Algorithm 4 with integer draws: at a power of two the logarithmic half adds
    ``log_scale * lap`` and the binary half restarts; otherwise the p-sum at level ctz(c)
    closes with ``log_scale * k * lap`` (c = 2^k + tau), absorbing those below. The release
    noise is Z plus the open p-sums; each item changes one level of the prefix layout."""
    counter = HybridCounter((4,), 200, 1.0, bounds=(0.0, 1.0))
    p = counter.params
    insert = jax.jit(lambda s, m, lap: counter.insert_with(s, jnp.ones(4), m, lap))
    g = np.random.default_rng(2)
    Z, psums, count = np.zeros(4), [dict() for _ in range(4)], np.zeros(4, np.int64)
    state = counter.init()
    for _ in range(150):
        mask = g.random(4) < 0.7
        lap = g.integers(-3, 4, 4).astype(np.float32)
        new = insert(state, jnp.asarray(mask), jnp.asarray(lap))
        changed = set()
        for i in np.nonzero(mask)[0]:
            count[i] += 1
            c = int(count[i])
            k = c.bit_length() - 1
            if c == 2**k:
                Z[i] += p.log_scale * lap[i]
                psums[i] = {}
            else:
                level = plain_ctz(c)
                psums[i] = {j: v for j, v in psums[i].items() if j > level}
                psums[i][level] = p.log_scale * k * lap[i]
                changed.add(level)
        want = Z + np.array([sum(ps.values()) for ps in psums])
        np.testing.assert_allclose(np.asarray(counter.noise(new)), want, rtol=1e-6, atol=1e-4)
        assert changed_levels(state.alpha_noise, new.alpha_noise) <= changed
        state = new


# ---------------------------------------------------------------- the Gram tree
def test_gram_tree_release_writes_only_the_closing_level():
    """Integer leaves and nodes: release k of a tree is the sum of its leaves 1..k plus the
    node matrices of the open nodes of k's decomposition (a plain dict), and it changes the
    prefix arrays at level ctz(k) of the releasing trees only."""
    tree = GramTree((3,), 2, sigma=0.0, shift=0.0, levels=6)
    insert = jax.jit(lambda s, Q, node, m: insert_leaf(s, Q, node, m, 0.0, close=prefix_leaf))
    g = np.random.default_rng(9)
    nodes = [dict() for _ in range(3)]
    leaves, k = np.zeros((3, 3, 3)), np.zeros(3, np.int64)
    state = tree.init()
    for _ in range(25):
        mask = g.random(3) < 0.6
        Q = g.integers(-3, 4, (3, 3, 3)).astype(np.float32)
        node = g.integers(-9, 10, (3, 3, 3)).astype(np.float32)
        new = insert(state, jnp.asarray(Q), jnp.asarray(node), jnp.asarray(mask))
        changed = set()
        for i in np.nonzero(mask)[0]:
            k[i] += 1
            level = plain_ctz(int(k[i]))
            nodes[i] = {j: v for j, v in nodes[i].items() if j > level}
            nodes[i][level] = node[i]
            leaves[i] += Q[i]
            changed.add(level)
        np.testing.assert_array_equal(np.asarray(GramTree.exact_sum(new)), leaves)
        noise = np.array([sum(n.values()) if n else np.zeros((3, 3)) for n in nodes])
        np.testing.assert_array_equal(np.asarray(GramTree.noise_sum(new)), noise)
        released = np.asarray(new.U)[mask]
        np.testing.assert_array_equal(released, (leaves + noise)[mask][:, :2, :2])
        assert changed_levels(state.exact, new.exact) <= changed
        assert changed_levels(state.noise, new.noise) <= changed
        state = new


# ---------------------------------------------------------------- fed_lin_ucb's trigger
def test_rank_one_update_and_the_determinant_lemma_match_numpy():
    """The rank-1 updated factor is numpy's Cholesky of ``L L^T + x x^T``, and the lemma's
    log-determinant numpy's slogdet (float64), within float32 rounding; ``x = 0`` keeps the
    factor bit for bit."""
    g = np.random.default_rng(0)
    A = g.standard_normal((6, 5, 5))
    A = A @ np.swapaxes(A, -1, -2) + 2 * np.eye(5)
    x = g.standard_normal((6, 5))
    L = cholesky(jnp.asarray(A, jnp.float32))
    up = A + x[:, :, None] * x[:, None, :]
    got = cholesky_update(L, jnp.asarray(x, jnp.float32))
    np.testing.assert_allclose(np.asarray(got), np.linalg.cholesky(up), atol=2e-5)
    logdet = logdet_plus_rank_one(L, jnp.asarray(x, jnp.float32), 3.0)
    np.testing.assert_allclose(np.asarray(logdet), np.linalg.slogdet(up)[1] - 5 * math.log(3.0),
                               atol=2e-5)  # fmt: skip
    same = cholesky_update(L, jnp.zeros((6, 5), jnp.float32))
    np.testing.assert_array_equal(np.asarray(same), np.asarray(L))


@pytest.mark.slow
@pytest.mark.parametrize("private", [True, False])
def test_fed_lin_ucb_trigger_logdet_is_the_trigger_matrix_slogdet(private):
    """Along 60 trials of a run with syncs, the trigger's log-determinant (paper timing: with
    the pull about to be played) equals numpy's slogdet of ``W + flight + U + x x^T + M
    (rho_max - rho_min) I`` minus ``d ln(M rho_min)`` (float64), and the kept factor (private)
    is a factor of ``W + flight + U + cI``."""
    import fedbandit_env.jax as fj
    from agents.jax.fed_lin_ucb import trigger_logdet

    channels = {"sync": {"kind": "server", "dim": 1, "aggregate": "sum"},
                "stats": {"kind": "server", "dim": 12, "aggregate": "sum"}}  # fmt: skip
    env = fj.make("FedBandit/LinearContextual-v0", num_agents=4, num_arms=5, dim=3,
                  horizon=80, channels=channels)  # fmt: skip
    learner = fj.make_jax_agent("fed_lin_ucb", private=private, sync_threshold=0.5)
    params = learner.make_params(fj.facts_of(env))
    init, act = fj.bind(learner, fj.facts_of(env))
    act, step = jax.jit(act), jax.jit(env.step)
    key = jax.random.PRNGKey(0)
    obs, env_state = env.reset(key)
    state = init(key)
    n, d = 4, 3
    inflate = n * (params.rho_max - params.rho_min) * np.eye(d)
    syncs = 0
    for _ in range(60):
        key, k_act, k_step = jax.random.split(key, 3)
        action, state = act(k_act, state, obs)
        V = np.asarray(state.W + state.flight_U + state.U, np.float64)
        chol = cholesky(state.W + state.flight_U + state.U)  # V's factor, as act made it
        x = np.asarray(obs.context)[np.arange(n), np.asarray(action.arms)]
        got = trigger_logdet(chol, state.trigger, jnp.asarray(x, jnp.float32), params)
        want = np.linalg.slogdet(V + x[:, :, None] * x[:, None, :] + inflate)[1]
        want -= d * math.log(n * params.rho_min)
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-4, atol=1e-3)
        if private:
            L = np.asarray(state.trigger, np.float64)
            np.testing.assert_allclose(L @ np.swapaxes(L, -1, -2), V + inflate, rtol=1e-4)
        else:
            assert state.trigger == ()
        obs, env_state, *_ = step(k_step, env_state, action)
        syncs = int(state.n_sync)
    assert syncs >= 2  # the kept factor was refactored at syncs
