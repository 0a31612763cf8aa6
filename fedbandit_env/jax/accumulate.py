"""Exact accumulators for long horizons without 64-bit JAX types (docs/jax.md, "Numbers").

JAX computes in 32 bits unless ``jax_enable_x64`` is set, and a float32 running sum of 10^7
increments has lost the digits that matter. Counts therefore accumulate as an int32 pair
(:class:`Count`, exact up to 2^61) and real totals (cost, the linear family's regret) as a
compensated float32 sum (:class:`Total`, Kahan's algorithm: error of order one float32 rounding
of the total, whatever the number of terms). Both are pytrees and work under ``jit`` and
``vmap``; :func:`count_value` and :func:`total_value` read them back as numpy int64/float64.
"""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp
import numpy as np

_SHIFT = 30
_LOW = (1 << _SHIFT) - 1


class Count(NamedTuple):
    """A non-negative integer total ``hi * 2^30 + lo`` held in two int32 arrays."""

    hi: jnp.ndarray
    lo: jnp.ndarray


class Total(NamedTuple):
    """A float32 running sum ``total`` and its Kahan compensation ``carry``."""

    total: jnp.ndarray
    carry: jnp.ndarray


def count_zeros(shape: tuple[int, ...] = ()) -> Count:
    return Count(jnp.zeros(shape, jnp.int32), jnp.zeros(shape, jnp.int32))


def count_add(count: Count, x: jnp.ndarray) -> Count:
    """Add ``x`` (non-negative int32, below 2^30 per call) exactly."""
    lo = count.lo + x.astype(jnp.int32)
    return Count(count.hi + (lo >> _SHIFT), lo & _LOW)


def count_value(count: Count) -> np.ndarray:
    """The totals as numpy int64 (outside ``jit``)."""
    return np.asarray(count.hi, np.int64) * (1 << _SHIFT) + np.asarray(count.lo, np.int64)


def total_zeros(shape: tuple[int, ...] = ()) -> Total:
    return Total(jnp.zeros(shape, jnp.float32), jnp.zeros(shape, jnp.float32))


def total_add(total: Total, x: jnp.ndarray) -> Total:
    """Kahan's compensated addition of ``x`` (float32) to the running sum."""
    y = x.astype(jnp.float32) - total.carry
    t = total.total + y
    return Total(t, (t - total.total) - y)


def total_value(total: Total) -> np.ndarray:
    """The sums as numpy float64 (outside ``jit``)."""
    return np.asarray(total.total, np.float64) - np.asarray(total.carry, np.float64)
