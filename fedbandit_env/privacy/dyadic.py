"""Dyadic (binary-tree) decompositions of prefixes ``1..t`` and integer bit helpers: Algorithm 2
("Create partial sums") of Zhu, Zhu, Liu & Liu 2021, the partial sums of Chan, Shi & Song 2011
(docs/privacy.md, "Binary-tree counter")."""

from __future__ import annotations

from typing import Any

import numpy as np

from fedbandit_env.privacy.calibration import check_index
from fedbandit_env.xp import is_jax


def dyadic_blocks(t: int) -> list[tuple[int, int]]:
    """The blocks ``(q, t']`` (rounds ``q+1..t'``, ``q = t' & (t'-1)``) whose union is ``1..t``,
    latest first: ``dyadic_blocks(7) == [(6, 7), (4, 6), (0, 4)]``, ``popcount(t)`` of them. Round
    t closes only ``(t & (t-1), t]``, at level ctz(t); the others were closed earlier."""
    t = check_index(t, "t", minimum=0)
    blocks = []
    while t:
        q = t & (t - 1)
        blocks.append((q, t))
        t = q
    return blocks


def floor_levels(capacity: int) -> int:
    """``floor(log2 capacity) + 1``: the number of levels of a tree over indices ``1..capacity``
    (the most distinct blocks one index can enter)."""
    return check_index(capacity, "capacity").bit_length()


def paper_levels(horizon: int) -> int:
    """``ceil(log2 horizon)`` (at least 1): the paper's ``ceil(log T)`` (Zhu, Zhu, Liu & Liu 2021,
    Section 4.1)."""
    horizon = check_index(horizon, "horizon")
    return max(1, (horizon - 1).bit_length())


def bit_length(x: Any) -> Any:
    """Element-wise ``int.bit_length`` of non-negative integers, for either engine: numpy
    int64 below 2^53 (the float64 exponent), JAX int32 (32 minus the leading zeros)."""
    if is_jax(x):
        import jax

        return 32 - jax.lax.clz(x.astype("int32"))
    x = np.asarray(x, dtype=np.int64)
    return np.frexp(x.astype(np.float64))[1].astype(np.int64)


def trailing_zeros(x: Any) -> Any:
    """Element-wise number of trailing zero bits of positive integers (``ctz``: the level of
    the block that index ``x`` closes), for either engine."""
    return bit_length(x & -x) - 1


def is_power_of_two(x: Any) -> Any:
    """Element-wise ``x`` in {1, 2, 4, ...}, for either engine."""
    return (x > 0) & ((x & (x - 1)) == 0)


def popcount(x: np.ndarray) -> np.ndarray:
    """Element-wise number of set bits of non-negative integers (int64)."""
    return np.asarray(np.bitwise_count(np.asarray(x, dtype=np.int64)), dtype=np.int64)


def lowest_bit_cleared(x: Any) -> Any:
    """``x & (x - 1)``: the prefix above the block that index ``x`` closes (its other set bits,
    the blocks it keeps), for either engine."""
    return x & (x - 1)


def take_level(blocks: Any, level: Any) -> Any:
    """``blocks[level]`` of a JAX level-first array (levels, *shape, *entry): one dynamic slice
    for a scalar ``level`` (the round of a round-indexed tree), a gather of one entry per
    position for ``level`` (*shape) (each counter or tree its own clock). Reads nothing else."""
    import jax
    import jax.numpy as jnp

    if level.ndim == 0:
        return jax.lax.dynamic_index_in_dim(blocks, level, axis=0, keepdims=False)
    return blocks[(level, *jnp.indices(level.shape, sparse=True))]


def put_level(blocks: Any, level: Any, value: Any, active: Any = True) -> Any:
    """``blocks`` (levels, *shape, *entry) with ``value`` (*shape, *entry) written at ``level``
    where ``active`` holds (a JAX array, functionally): one dynamic update of one slice for a
    scalar ``level`` (``active`` then masks the value, not the level), a scatter of one entry
    per active position for ``level`` (*shape). The other levels are not touched."""
    import jax
    import jax.numpy as jnp

    value = value.astype(blocks.dtype)
    if level.ndim == 0:
        if active is not True:
            here = jax.lax.dynamic_index_in_dim(blocks, level, axis=0, keepdims=False)
            value = jnp.where(active, value, here)
        return jax.lax.dynamic_update_index_in_dim(blocks, value, level, 0)
    at = jnp.where(active, level, blocks.shape[0])  # out of range: dropped
    return blocks.at[(at, *jnp.indices(level.shape, sparse=True))].set(value, mode="drop")
