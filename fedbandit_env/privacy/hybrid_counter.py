"""Chan–Shi–Song hybrid continual counter (Laplace), batched over runs and counters: the hybrid
mechanism of Chan, Shi & Song 2011 (Algorithms 2–4) with the ``epsilon/2 + epsilon/2`` split, the
counter of the DP recommender agents (Li, Song & Fragouli 2020, Figure 1 and Fact 1), one per
(agent, arm), clocked by its own insertion count. Its halves, noise variance, seeding and decisions:
docs/privacy.md, "Hybrid counter" and "Decisions". One source for both engines:
:func:`hybrid_params` and :func:`hybrid_insert` (Algorithm 4) on the array namespace.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from fedbandit_env.privacy import _validation as check
from fedbandit_env.privacy._random import LaplaceStream
from fedbandit_env.privacy.calibration import check_epsilon, check_noise_scale
from fedbandit_env.privacy.dyadic import (
    bit_length,
    floor_levels,
    is_power_of_two,
    popcount,
    trailing_zeros,
)
from fedbandit_env.privacy.errors import PrivacyError
from fedbandit_env.seeding import BatchedRNG
from fedbandit_env.validation import check_memory
from fedbandit_env.xp import is_inf, namespace


def hybrid_noise_variance(
    n: np.ndarray | int, epsilon: float, sensitivity: float = 1.0
) -> np.ndarray:
    """Closed-form noise variance of the hybrid counter after ``n`` insertions
    (docs/privacy.md, "Hybrid counter"): with ``n = 2^k + tau``, ``0 <= tau < 2^k``,
    ``(8 D^2/epsilon^2) * ((k + 1) + k^2 * popcount(tau))``; 0 at n = 0 or epsilon = inf."""
    epsilon = check_epsilon(epsilon)
    n = np.asarray(n, dtype=np.int64)
    if np.any(n < 0):
        raise PrivacyError("n", "non-negative counts", "a negative count")
    if math.isinf(epsilon):
        return np.zeros(n.shape)
    k = np.maximum(bit_length(n) - 1, 0)
    tau = np.where(n > 0, n - (np.int64(1) << k), 0)
    check_noise_scale(
        2.0 * float(sensitivity) / epsilon, epsilon, what="Laplace scale 2 D / epsilon"
    )
    with np.errstate(over="ignore", under="ignore", divide="ignore"):
        d2, e2 = np.float64(sensitivity) ** 2, np.float64(epsilon) ** 2
        var = 8.0 * d2 / e2 * ((k + 1) + k**2 * popcount(tau))
    if not np.all(np.isfinite(var)):
        raise PrivacyError("epsilon", "a value whose noise variance is a finite float", epsilon)
    return np.where(n > 0, var, 0.0)


def hybrid_noise_std(n: np.ndarray | int, epsilon: float, sensitivity: float = 1.0) -> np.ndarray:
    """Square root of :func:`hybrid_noise_variance`."""
    return np.sqrt(hybrid_noise_variance(n, epsilon, sensitivity))


@dataclass(frozen=True)
class HybridParams:
    """A hybrid counter's validated options (:func:`hybrid_params`): ``horizon`` the most items
    one counter may receive, ``bounds`` the clipping range, ``sensitivity`` D = hi - lo,
    ``binary_levels`` = max(1, floor(log2 horizon)) the levels of the largest binary block."""

    shape: tuple[int, ...]
    horizon: int
    epsilon: float
    bounds: tuple[float, float]
    sensitivity: float
    binary_levels: int

    @property
    def noisy(self) -> bool:
        """epsilon is finite (a traced epsilon is: :func:`fedbandit_env.xp.is_inf`)."""
        return not is_inf(self.epsilon)

    @property
    def log_scale(self) -> float:
        """Laplace scale of the logarithmic half, 2 D / epsilon (0 when epsilon is inf); a
        p-sum of block k of the binary half has ``log_scale * k``."""
        return 2.0 * self.sensitivity / self.epsilon if self.noisy else 0.0


def hybrid_params(shape: tuple[int, ...], horizon: int, epsilon: float, *,
                  bounds: tuple[float, float] = (0.0, 1.0)) -> HybridParams:  # fmt: skip
    """The :class:`HybridParams` of a counter's options, or a :class:`PrivacyError` naming the
    bad one. Pure: the numpy and JAX counters call it."""
    shape, horizon = check.check_shape(shape), check.check_horizon(horizon)
    epsilon, checked = check_epsilon(epsilon), check.check_bounds(bounds)
    if checked is None:
        raise PrivacyError("bounds", "a pair (lo, hi) with lo < hi", bounds)
    levels = max(1, floor_levels(horizon) - 1)  # block k has k bits; the largest k = floor(log2 T)
    p = HybridParams(shape, horizon, epsilon, checked, checked[1] - checked[0], levels)
    if p.noisy:
        check_noise_scale(p.log_scale, epsilon, what="Laplace scale 2 D / epsilon")
        check_noise_scale(p.log_scale * levels, epsilon, what="binary-half Laplace scale")
    return p


class HybridCounterState(NamedTuple):
    """The counters (any leading batch axes, then ``shape``): ``count`` c, the items so far;
    ``exact`` S, the clipped running sums (JAX: a compensated
    :class:`~fedbandit_env.jax.accumulate.Total`); ``log_noise`` Z, the logarithmic half's
    accumulated noise; ``alpha_noise`` (..., binary_levels) the noise of the binary half's open
    p-sums, one per level (their exact parts add up to S minus the sum at the last power of two,
    so only the noise is kept; 0 on levels not in the current decomposition). This per-level
    layout is numpy's; the JAX counter keeps its own (fedbandit_env/jax/prefix_layout.py)."""

    count: Any
    exact: Any
    log_noise: Any
    alpha_noise: Any


def hybrid_noise(s: HybridCounterState) -> Any:
    """The noise of the current release: Z plus the open p-sums' noise."""
    return s.log_noise + s.alpha_noise.sum(axis=-1)


def hybrid_release(s: HybridCounterState, exact: Any) -> Any:
    """The private running sums, Algorithm 4's output ``S + Z + alpha`` (``exact`` S)."""
    return exact + hybrid_noise(s)


def hybrid_insert(p: HybridParams, s: HybridCounterState, values: Any, mask: Any, lap: Any,
                  add: Callable[[Any, Any], Any] = operator.add,
                  close: Any = None) -> HybridCounterState:  # fmt: skip
    """Algorithm 4 (the hybrid mechanism) for the counters where ``mask`` holds, each receiving
    ``values`` (clipped to ``bounds``; ``add`` folds them into S) with the standard Laplace draw
    ``lap``: the count becomes ``c = 2^k + tau``; at a power of two (``tau = 0``) the
    logarithmic half adds a fresh ``Lap(2D/epsilon)`` to Z and the binary half restarts (every
    level cleared); otherwise the binary half closes the p-sum at level ``ctz(c)`` with a fresh
    ``Lap(2Dk/epsilon)``, absorbing (clearing) the levels below. ``close(alpha, c, active,
    p_sum)`` closes the p-sums in another layout (the JAX counter's); None: numpy's per-level."""
    xp = namespace(s.count, values, mask, lap)
    x = xp.where(mask, xp.clip(values, *p.bounds), 0.0)
    count = s.count + mask
    c = xp.maximum(count, 1)
    power = mask & is_power_of_two(count)
    log_noise = xp.where(power, s.log_noise + p.log_scale * lap, s.log_noise)
    p_sum = p.log_scale * (bit_length(c) - 1) * lap
    if close is not None:
        alpha = close(s.alpha_noise, c, mask & ~power, p_sum)
        return HybridCounterState(count, add(s.exact, x), log_noise, alpha)
    level = xp.where(power, p.binary_levels, trailing_zeros(c))[..., None]
    levels = xp.arange(p.binary_levels)
    keep = (levels > level) | ~mask[..., None]
    alpha = xp.where(keep, s.alpha_noise, xp.where(levels == level, p_sum[..., None], 0.0))
    return HybridCounterState(count, add(s.exact, x), log_noise, alpha)


class HybridCounter:
    """Hybrid continual counters over (B, *shape), e.g. (N agents, K arms), each a pure
    epsilon-DP output stream (docs/privacy.md, "Hybrid counter"): :func:`hybrid_params`' fields
    and constants read as attributes; the arrays are ``state``; ``noise_per`` "counter" or "row"."""

    def __init__(self, shape: tuple[int, ...], horizon: int, epsilon: float, *,
                 rng: BatchedRNG | None = None, num_runs: int | None = None,
                 bounds: tuple[float, float] = (0.0, 1.0), noise_per: str = "counter"):  # fmt: skip
        self.params = p = hybrid_params(shape, horizon, epsilon, bounds=bounds)
        if noise_per not in ("counter", "row"):
            raise PrivacyError("noise_per", "'counter' or 'row'", repr(noise_per))
        self.noise_per = noise_per
        self.num_runs = check.resolve_runs(rng, num_runs, p.noisy)
        draw_shape = p.shape[:-1] if noise_per == "row" else p.shape
        self._stream = LaplaceStream(rng, draw_shape) if p.noisy and rng is not None else None
        full = (self.num_runs, *p.shape)
        size = 8.0 * math.prod(full) * (p.binary_levels + 3)
        check_memory("shape/num_runs", size, "float64 arrays (B, *shape, levels + 3)")
        zeros = np.zeros(full)
        self.state = HybridCounterState(np.zeros(full, np.int64), zeros, zeros.copy(),
                                        np.zeros((*full, p.binary_levels)))  # fmt: skip

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or name in ("params", "state"):
            raise AttributeError(name)
        return getattr(self.params, name)

    @property
    def counts(self) -> np.ndarray:
        return self.state.count.copy()

    def exact(self) -> np.ndarray:
        """The exact running sums S of the clipped inputs (B, *shape)."""
        return self.state.exact.copy()

    def noise(self) -> np.ndarray:
        """The noise of the current release (B, *shape)."""
        return hybrid_noise(self.state)

    def release(self) -> np.ndarray:
        """The private running sums (B, *shape); the same until the next insertion."""
        return hybrid_release(self.state, self.state.exact)

    def insert(self, values: np.ndarray, mask: np.ndarray | None = None) -> np.ndarray:
        """Insert one item into every counter where ``mask`` holds (:func:`hybrid_insert`, with
        one standard Laplace draw per counter, or row, and call, used where an item arrives);
        returns :meth:`release`."""
        full = (self.num_runs, *self.shape)
        values, mask = check.check_values(values, full), check.check_mask(mask, full)
        flat = np.flatnonzero(mask)
        self._insert_at(flat, values.reshape(-1)[flat], "mask")
        return self.release()

    def insert_flat(self, flat: np.ndarray, values: np.ndarray) -> np.ndarray:
        """:meth:`insert` at the distinct flat positions ``flat`` of (B, *shape) (C order, e.g.
        ``(b * N + i) * K + arm``) with ``values`` of the same shape: the same draws and sums
        as the matching mask; returns the new private sums there (the DP recommender agents)."""
        flat, values = np.asarray(flat), np.asarray(values, dtype=np.float64)
        if flat.shape != values.shape or flat.dtype.kind not in "iu":
            got = f"{flat.dtype} {flat.shape}"
            raise PrivacyError("flat", f"int positions of the shape of values {values.shape}", got)
        size = self.state.count.size
        if flat.size and (int(flat.min()) < 0 or int(flat.max()) >= size):
            raise PrivacyError("flat", f"positions in [0, {size})", "an out-of-range position")
        check.check_values(values)
        return self._insert_at(flat.reshape(-1), values.reshape(-1), "flat").reshape(flat.shape)

    def _insert_at(self, flat: np.ndarray, values: np.ndarray, name: str) -> np.ndarray:
        """:func:`hybrid_insert` at the distinct flat positions ``flat`` only (work per item,
        not per counter); the new releases there."""
        rows = [x.reshape(-1, *x.shape[1 + len(self.shape) :]) for x in self.state]
        count = rows[0][flat] + 1
        if np.any(count > self.horizon):
            raise PrivacyError(name, f"at most {self.horizon} items per counter", int(count.max()))
        at, lap = flat // self.shape[-1] if self.noise_per == "row" else flat, np.zeros(flat.shape)
        if self._stream is not None:
            if self.noise_per == "row" and (np.diff(np.sort(at)) == 0).any():
                raise PrivacyError(name, "at most one item per row (noise_per='row')", "two")
            lap = self._stream.next().reshape(-1)[at]
        new = hybrid_insert(self.params, HybridCounterState(*(x[flat] for x in rows)), values,
                            np.ones(flat.shape, bool), lap)  # fmt: skip
        for x, value in zip(rows, new, strict=True):
            x[flat] = value
        return hybrid_release(new, new.exact)
