"""The JAX counters' prefix layout: how the tree counter, the hybrid counter and the Gram tree
(fedbandit_env/jax/tree_counter.py, hybrid_counter.py, gram_tree.py) store their open dyadic
blocks. The mechanisms are the numpy counters' (fedbandit_env/privacy: which level closes, which
blocks are noised, the noise scales: Zhu, Zhu, Liu & Liu 2021, Algorithms 2-3; Chan, Shi & Song
2011, Algorithm 4; Dubey & Pentland 2020, Algorithm 2), which keep numpy's
per-level layout; the shared functions take this module's layout operations as arguments
(``tree_insert(..., close=prefix_close)``, ``hybrid_insert(..., close=hybrid_close)``,
``insert_leaf(..., close=prefix_leaf)``, ``tree_exact(..., total=prefix_total)``).

Prefix layout: an array with the levels first (levels, *shape, *entry); for a counter whose clock
k (the round, a pull count, an item or release count) has bit j set, level j holds the sum of the
open blocks at levels >= j, and the other levels are stale and never read. A release reads the
one level ctz(k); an insertion reads the prefix of the blocks it keeps (level ctz(k & (k - 1)))
and writes the one level it closes, with a dynamic index (one slice for a scalar clock, one entry
per counter otherwise), not a ``where`` over every level.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from fedbandit_env.privacy.dyadic import is_power_of_two, trailing_zeros
from fedbandit_env.privacy.gram_tree import GramTrees
from fedbandit_env.privacy.hybrid_counter import HybridCounterState
from fedbandit_env.privacy.tree_counter import TreeCounterState, TreeParams

__all__ = [
    "hybrid_close",
    "hybrid_prefix_noise",
    "lowest_bit_cleared",
    "node_prefix",
    "prefix_at",
    "prefix_close",
    "prefix_leaf",
    "prefix_total",
    "put_level",
    "take_level",
    "tree_blocks",
    "tree_clock",
]


def lowest_bit_cleared(x: Any) -> Any:
    """``x & (x - 1)``: the prefix above the block that index ``x`` closes (its other set bits,
    the blocks it keeps)."""
    return x & (x - 1)


def take_level(blocks: Any, level: Any) -> Any:
    """``blocks[level]`` of a level-first array (levels, *shape, *entry): one dynamic slice for
    a scalar ``level`` (the round of a round-indexed tree), a gather of one entry per position
    for ``level`` (*shape) (each counter or tree its own clock). Reads nothing else."""
    if level.ndim == 0:
        return jax.lax.dynamic_index_in_dim(blocks, level, axis=0, keepdims=False)
    return blocks[(level, *jnp.indices(level.shape, sparse=True))]


def put_level(blocks: Any, level: Any, value: Any, active: Any = True) -> Any:
    """``blocks`` (levels, *shape, *entry) with ``value`` (*shape, *entry) written at ``level``
    where ``active`` holds (functionally): one dynamic update of one slice for a scalar
    ``level`` (``active`` then masks the value, not the level), a scatter of one entry per
    active position for ``level`` (*shape). The other levels are not touched."""
    value = value.astype(blocks.dtype)
    if level.ndim == 0:
        if active is not True:
            here = jax.lax.dynamic_index_in_dim(blocks, level, axis=0, keepdims=False)
            value = jnp.where(active, value, here)
        return jax.lax.dynamic_update_index_in_dim(blocks, value, level, 0)
    at = jnp.where(active, level, blocks.shape[0])  # out of range: dropped
    return blocks.at[(at, *jnp.indices(level.shape, sparse=True))].set(value, mode="drop")


# -- tree counter (Zhu et al. 2021, Algorithms 2-3) -------------------------------------------------------
def tree_clock(p: TreeParams, s: TreeCounterState) -> Any:
    """The clock whose set bits are the open blocks: the round (0 before round 1) or, in pull
    mode, each counter's pull count."""
    if p.tree_index == "pull":
        return s.counts
    return jnp.maximum(s.t, 0)


def prefix_at(blocks: Any, clock: Any) -> Any:
    """The prefix layout read at ``clock`` (a scalar or one per counter): the sum of the open
    blocks of ``clock``'s decomposition, ``blocks[ctz(clock)]``, 0 where ``clock`` is 0."""
    got = take_level(blocks, trailing_zeros(jnp.maximum(clock, 1)))
    return jnp.where(clock > 0, got, jnp.zeros((), got.dtype))


def prefix_total(p: TreeParams, s: TreeCounterState, blocks: Any) -> Any:
    """The sum of the open blocks of ``blocks`` (``s.exact``, ``s.noise`` or ``s.noised``): the
    layout operation of :func:`~fedbandit_env.privacy.tree_counter.tree_exact` and
    :func:`~fedbandit_env.privacy.tree_counter.tree_noise`."""
    return prefix_at(blocks, tree_clock(p, s))


def prefix_close(s: TreeCounterState, clock: Any, active: Any, values: Any, noise: Any,
                 noised: Any) -> TreeCounterState:  # fmt: skip
    """The layout operation of :func:`~fedbandit_env.privacy.tree_counter.tree_insert`: each
    ``active`` counter (True: all) whose clock reaches ``clock`` (>= 1; a scalar in round mode,
    one per counter in pull mode) closes the block at level ctz(clock) (Algorithm 3; Algorithm
    2's merge): the blocks below are absorbed, those above kept, so the new prefix there is the
    prefix of the blocks above (``clock & (clock - 1)``'s, :func:`prefix_at`) plus the new
    block's ``noise`` and ``noised`` flag, and the exact prefix is the release before (``clock -
    1``'s) plus ``values``. Reads the levels of those two clocks, writes the closing level only
    (:func:`put_level`); the absorbed levels go stale."""
    level = trailing_zeros(jnp.maximum(clock, 1))
    above = lowest_bit_cleared(clock)

    def write(blocks: Any, value: Any) -> Any:
        return put_level(blocks, level, value, active)

    exact = s.exact
    if exact is not None:
        exact = write(exact, prefix_at(exact, clock - 1) + values)
    flags = prefix_at(s.noised, above) + noised.astype(s.noised.dtype)
    return s._replace(exact=exact, noise=write(s.noise, prefix_at(s.noise, above) + noise),
                      noised=write(s.noised, flags))  # fmt: skip


def tree_blocks(p: TreeParams, s: TreeCounterState) -> tuple[Any, Any]:
    """``(noise, noised)`` (..., levels) of the open blocks in numpy's per-level layout (0 /
    False on levels not in the decomposition): the prefix layout's level j minus its next open
    level above (rounding aside, the block's own draw). For reports and tests."""
    clock = tree_clock(p, s)
    levels = s.noise.shape[0]
    bit = ((clock[..., None] if jnp.ndim(clock) else clock) >> jnp.arange(levels)) & 1
    noise, noised = jnp.moveaxis(s.noise, 0, -1), jnp.moveaxis(s.noised, 0, -1).astype("int32")
    open_ = bit == 1
    # the next open level above j: the prefix there (0 above the highest)
    above_noise, above_noised = jnp.zeros_like(noise[..., 0]), jnp.zeros_like(noised[..., 0])
    block_noise, block_noised = [], []
    for j in reversed(range(levels)):
        here = open_[..., j]
        block_noise.append(jnp.where(here, noise[..., j] - above_noise, 0.0))
        block_noised.append(here & (noised[..., j] > above_noised))
        above_noise = jnp.where(here, noise[..., j], above_noise)
        above_noised = jnp.where(here, noised[..., j], above_noised)
    return jnp.stack(block_noise[::-1], axis=-1), jnp.stack(block_noised[::-1], axis=-1)


# -- hybrid counter (Chan, Shi & Song 2011, Algorithm 4) ----------------------------------------------------------
def hybrid_prefix_noise(s: HybridCounterState) -> Any:
    """The noise of the current release: Z plus the open p-sums' noise, the prefix at level
    ctz(c) (none at c = 0 or a power of two, where the binary half restarts)."""
    c = jnp.maximum(s.count, 1)
    alpha = take_level(s.alpha_noise, trailing_zeros(c))
    return s.log_noise + jnp.where(is_power_of_two(c), 0.0, alpha)


def hybrid_close(alpha: Any, c: Any, active: Any, p_sum: Any) -> Any:
    """The layout operation of :func:`~fedbandit_env.privacy.hybrid_counter.hybrid_insert`:
    each ``active`` counter at count ``c = 2^k + tau`` (tau > 0) closes the p-sum at level
    ctz(c) with noise ``p_sum``; the p-sums below are absorbed, those above (``c & (c - 1)``'s
    set bits under 2^k; none when that is 2^k itself) kept, so the new prefix there is theirs
    plus ``p_sum``. Reads one level and writes one level per counter (:func:`put_level`)."""
    above = lowest_bit_cleared(c)
    kept = take_level(alpha, trailing_zeros(jnp.maximum(above, 1)))
    kept = jnp.where(is_power_of_two(above), 0.0, kept)
    return put_level(alpha, trailing_zeros(c), kept + p_sum, active)


# -- Gram tree (Dubey & Pentland 2020, Algorithm 2) -------------------------------
def node_prefix(blocks: Any, k: Any) -> Any:
    """The Gram trees' prefix layout read at release count ``k``: level ctz(k), zeros before a
    release (each tree its (d+1) x (d+1) node sum)."""
    got = take_level(blocks, trailing_zeros(jnp.maximum(k, 1)))
    return jnp.where((k > 0)[..., None, None], got, 0.0)


def prefix_leaf(trees: GramTrees, k: Any, Q: Any, node: Any, active: Any) -> tuple[Any, Any, Any]:
    """The layout operation of :func:`~fedbandit_env.privacy.gram_tree.insert_leaf`: release
    ``k`` (>= 1 where ``active``) closes the node at level ctz(k), which holds the leaves since
    the nodes above it, so the exact prefix there is the previous release's (release k - 1's,
    level ctz(k - 1)) plus ``Q``, and the noise prefix is the nodes above's (``k & (k - 1)``'s)
    plus the fresh ``node``. Reads those two levels and writes the closing level of each active
    tree only. Returns ``(exact, noise, P)``, P the released prefix sum (exact + noise; junk
    where not active)."""
    level = trailing_zeros(jnp.maximum(k, 1))
    exact = node_prefix(trees.exact, k - 1) + Q
    noise = node_prefix(trees.noise, lowest_bit_cleared(k)) + node
    return (put_level(trees.exact, level, exact, active),
            put_level(trees.noise, level, noise, active), exact + noise)  # fmt: skip
