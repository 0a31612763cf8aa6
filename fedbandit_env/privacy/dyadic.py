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
