"""Dyadic (binary-tree) decompositions of prefixes ``1..t`` and integer bit helpers.

Algorithm 2 ("Create partial sums") of Zhu, Zhu, Liu & Liu 2021, the partial sums of Chan, Shi &
Song 2011: the prefix ``1..t`` splits into ``popcount(t)`` aligned dyadic blocks ``(q, t']``,
``q = t' & (t'-1)``.
Round ``t`` closes exactly one new block, ``(t & (t-1), t]``, at level ``ctz(t)`` (its length is
``2^ctz(t)``); every other block of the decomposition of ``t`` was closed earlier and is reused.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from fedbandit_env.privacy.errors import PrivacyError
from fedbandit_env.validation import is_integral
from fedbandit_env.xp import is_jax


def _check_index(t: int, name: str = "t", minimum: int = 1) -> int:
    if not is_integral(t) or t < minimum:
        raise PrivacyError(name, f"an int >= {minimum}", t)
    return int(t)


def dyadic_blocks(t: int) -> list[tuple[int, int]]:
    """The blocks ``(q, t']`` (rounds ``q+1..t'``) whose union is ``1..t``, latest first.

    ``dyadic_blocks(7) == [(6, 7), (4, 6), (0, 4)]``; ``len(dyadic_blocks(t)) == popcount(t)``.
    """
    t = _check_index(t, minimum=0)
    blocks = []
    while t:
        q = t & (t - 1)
        blocks.append((q, t))
        t = q
    return blocks


def block_level(block: tuple[int, int]) -> int:
    """Level ``j`` of a dyadic block of length ``2^j``."""
    q, t = block
    return (t - q).bit_length() - 1


def blocks_containing(tau: int, horizon: int) -> list[tuple[int, int]]:
    """Every block that holds round ``tau`` and is closed by round ``horizon``, lowest level
    first. A block ``(s, s + 2^j]`` is closed (at round ``s + 2^j``) only when ``s / 2^j`` is
    even; the other aligned intervals are absorbed before they close. At most one per level."""
    tau = _check_index(tau, "tau")
    horizon = _check_index(horizon, "horizon")
    out = []
    j = 0
    while (1 << j) <= horizon:
        index = (tau - 1) >> j
        start, end = index << j, (index + 1) << j
        if index % 2 == 0 and end <= horizon:
            out.append((start, end))
        j += 1
    return out


def floor_levels(capacity: int) -> int:
    """``floor(log2 capacity) + 1``: the number of levels of a tree over indices ``1..capacity``
    (the most distinct blocks one index can enter)."""
    return _check_index(capacity, "capacity").bit_length()


def paper_levels(horizon: int) -> int:
    """``ceil(log2 horizon)`` (at least 1): the paper's ``ceil(log T)`` (Zhu, Zhu, Liu & Liu 2021,
    Section 4.1)."""
    horizon = _check_index(horizon, "horizon")
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
    """Element-wise number of set bits of non-negative integers."""
    x = np.array(x, dtype=np.int64)
    count = np.zeros_like(x)
    while np.any(x):
        count += x & 1
        x >>= 1
    return count
