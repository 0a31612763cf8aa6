"""Chan–Shi–Song hybrid continual counter (Laplace), batched over runs and counters.

Implements the hybrid mechanism of Chan, Shi & Song 2011 (Algorithms 2–4), the counter of the DP
recommender agents (Li, Song & Fragouli 2020, Figure 1 and Fact 1): one counter per (agent, arm),
whose clock is its own insertion count. The budget is split ``epsilon/2 + epsilon/2`` (decision:
the exact construction; the paper's "Lap(1/epsilon) per node" is not epsilon-DP and is not
offered; docs/privacy.md, "Decisions"):

* logarithmic half: at every count ``c = 2^k`` a fresh ``Lap(2 D/epsilon)`` is added to an
  accumulated noise Z and ``base = S + Z`` is released;
* binary half: inside the block ``c in (2^k, 2^{k+1})`` a binary mechanism over the block's items
  (offsets ``tau = c - 2^k`` in ``1..2^k-1``, k bits) whose p-sums each get ``Lap(2 D k/epsilon)``.

``D = hi - lo`` is the sensitivity after clipping inputs to ``bounds = (lo, hi)`` (default
(0, 1)). The private sum is not clipped (the paper does not clip it either). The noise at count
``n = 2^k + tau`` is a sum of ``k+1`` i.i.d. ``Lap(2D/epsilon)`` and ``popcount(tau)`` i.i.d.
``Lap(2Dk/epsilon)``: :func:`hybrid_noise_variance` is its closed-form variance.

Seeding: every insertion needs exactly one Laplace draw (one logarithmic increment at a power of
two, one new p-sum otherwise), so one fixed-shape standard Laplace draw per counter per
``insert`` call covers it; it is used only where a counter receives an item. With
``noise_per="row"`` (a row is a vector of counters along the last axis, e.g. one agent's arms,
of which one receives the item of a step), one draw per row and call covers it instead: no
per-step draw is left unused. Runs of a batch are bit-identical to the same runs alone.
``epsilon = inf`` draws nothing and is exact.
"""

from __future__ import annotations

import math

import numpy as np

from fedbandit_env.privacy._random import LaplaceStream
from fedbandit_env.privacy._validation import (
    check_bounds,
    check_horizon,
    check_mask,
    check_shape,
    check_values,
    resolve_runs,
)
from fedbandit_env.privacy.calibration import check_epsilon, check_noise_scale
from fedbandit_env.privacy.dyadic import bit_length, floor_levels, popcount, trailing_zeros
from fedbandit_env.privacy.errors import PrivacyError
from fedbandit_env.seeding import BatchedRNG
from fedbandit_env.validation import check_memory


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
    scale = check_noise_scale(
        2.0 * float(sensitivity) / epsilon, epsilon, what="Laplace scale 2 D / epsilon"
    )
    del scale  # checked only; the variance keeps its closed form, bit for bit
    with np.errstate(over="ignore", under="ignore", divide="ignore"):
        d2, e2 = np.float64(sensitivity) ** 2, np.float64(epsilon) ** 2
        var = 8.0 * d2 / e2 * ((k + 1) + k**2 * popcount(tau))
    if not np.all(np.isfinite(var)):
        raise PrivacyError("epsilon", "a value whose noise variance is a finite float", epsilon)
    return np.where(n > 0, var, 0.0)


def _check_one_per_row(rows: np.ndarray) -> None:
    """``noise_per="row"``: two items in one row would share a Laplace draw (correlated noise,
    not the mechanism), so it is refused. Rows given in increasing order (the usual (run,
    agent) order) are checked without sorting."""
    r = rows.reshape(-1)
    if r.size > 1 and not bool((r[1:] > r[:-1]).all()):
        if np.any(np.diff(np.sort(r)) == 0):
            raise PrivacyError("index", "at most one item per row (noise_per='row')", "two")


def hybrid_noise_std(n: np.ndarray | int, epsilon: float, sensitivity: float = 1.0) -> np.ndarray:
    """Square root of :func:`hybrid_noise_variance`."""
    return np.sqrt(hybrid_noise_variance(n, epsilon, sensitivity))


class HybridCounter:
    """Hybrid continual counters over (B, *shape), e.g. (N agents, K arms).

    ``insert(values, mask)`` adds one item to every counter where ``mask`` is True (default:
    all); ``release()`` is the private running sum s(c) of each counter (0 before any item).
    ``horizon`` is the most items one counter may receive. The whole output stream of a counter
    is pure epsilon-DP with respect to its inputs (event level).

    ``noise_per``: ``"counter"`` (default) draws one standard Laplace per counter and call;
    ``"row"`` one per row of the last axis, for callers that insert at most one item per row
    and call (the DP recommender agents: each agent pulls one arm per step). Both give each
    inserted item one fresh Laplace draw; only the stream layout differs.
    """

    def __init__(
        self,
        shape: tuple[int, ...],
        horizon: int,
        epsilon: float,
        *,
        rng: BatchedRNG | None = None,
        num_runs: int | None = None,
        bounds: tuple[float, float] = (0.0, 1.0),
        noise_per: str = "counter",
    ):
        self.shape = check_shape(shape)
        if noise_per not in ("counter", "row"):
            raise PrivacyError("noise_per", "'counter' or 'row'", repr(noise_per))
        self.noise_per = noise_per
        self.horizon = check_horizon(horizon)
        self.epsilon = check_epsilon(epsilon)
        checked = check_bounds(bounds)
        if checked is None:
            raise PrivacyError("bounds", "a pair (lo, hi) with lo < hi", bounds)
        self.bounds = checked
        self.sensitivity = checked[1] - checked[0]
        noisy = not math.isinf(self.epsilon)
        self.num_runs = resolve_runs(rng, num_runs, noisy)
        draw_shape = self.shape[:-1] if noise_per == "row" else self.shape
        self._stream = LaplaceStream(rng, draw_shape) if noisy and rng is not None else None
        # the binary half of block k has k levels; the largest block is k = floor(log2 horizon)
        self.binary_levels = max(1, floor_levels(self.horizon) - 1)
        if noisy:
            check_noise_scale(self.log_scale, self.epsilon, what="Laplace scale 2 D / epsilon")
            check_noise_scale(
                self.log_scale * self.binary_levels, self.epsilon, what="binary-half Laplace scale"
            )
        check_memory(
            "shape/num_runs",
            8.0 * self.num_runs * math.prod(self.shape) * (self.binary_levels + 3),
            "float64 arrays (B, *shape, levels + 3)",
        )

        full = (self.num_runs, *self.shape)
        self._count = np.zeros(full, dtype=np.int64)
        self._sum = np.zeros(full)  # S: the exact part of every release
        self._log_noise = np.zeros(full)  # Z, the accumulated noise of the logarithmic half
        # noise of the open p-sums of the binary half, one per level (their exact parts add up
        # to S minus the sum at the last power of two, so only the noise is stored)
        self._alpha_noise = np.zeros((*full, self.binary_levels))
        self._levels = np.arange(self.binary_levels)

    @property
    def log_scale(self) -> float:
        """Laplace scale of the logarithmic half, 2 D / epsilon."""
        return 0.0 if math.isinf(self.epsilon) else 2.0 * self.sensitivity / self.epsilon

    @property
    def counts(self) -> np.ndarray:
        return self._count.copy()

    def exact(self) -> np.ndarray:
        """The exact running sums S of the clipped inputs (B, *shape)."""
        return self._sum.copy()

    def noise(self) -> np.ndarray:
        """The noise of the current release (B, *shape)."""
        return self._log_noise + self._alpha_noise.sum(axis=-1)

    def noise_parts(self) -> tuple[np.ndarray, np.ndarray]:
        """The noise of the logarithmic half and of the binary half (each (B, *shape))."""
        return self._log_noise.copy(), self._alpha_noise.sum(axis=-1)

    def release(self) -> np.ndarray:
        """The private running sums (B, *shape); the same until the next insertion."""
        return self._sum + self.noise()

    def noise_variance(self) -> np.ndarray:
        """Closed-form variance of each counter's current noise (B, *shape)."""
        return hybrid_noise_variance(self._count, self.epsilon, self.sensitivity)

    def insert_at(self, index: tuple[np.ndarray, ...], values: np.ndarray) -> np.ndarray:
        """Insert one item into each counter at ``index`` (distinct positions of (B, *shape),
        e.g. ``(b, i, pulled_arm)``); returns the new private sums of those counters. The same
        result and the same random draws as :meth:`insert` with the matching one-hot mask, with
        work proportional to the number of items, not of counters."""
        try:
            flat = self._flat_index(index)
        except (ValueError, TypeError) as err:
            raise PrivacyError("index", f"int positions in {self._count.shape}", str(err)) from None
        return self.insert_flat(flat, values)

    def insert_flat(self, flat: np.ndarray, values: np.ndarray) -> np.ndarray:
        """:meth:`insert_at` at distinct flat positions of (B, *shape) (C order), e.g.
        ``(b * N + i) * K + arm``."""
        flat = np.asarray(flat)
        values = np.asarray(values, dtype=np.float64)
        if not np.isfinite(values).all():
            raise PrivacyError("values", "finite numbers", "an array with NaN or inf")
        if flat.shape != values.shape or flat.dtype.kind not in "iu":
            raise PrivacyError(
                "flat",
                f"integer positions of the shape of values {values.shape}",
                f"{flat.dtype} {flat.shape}",
            )
        shape = flat.shape
        flat, values = flat.reshape(-1), values.reshape(-1)
        size = self._count.size
        if flat.size and (int(flat.min()) < 0 or int(flat.max()) >= size):
            raise PrivacyError("flat", f"positions in [0, {size})", "an out-of-range position")
        if self._stream is not None and self.noise_per == "row":
            _check_one_per_row(flat // self.shape[-1])
        count = self._count.reshape(-1)[flat] + 1
        if np.any(count > self.horizon):
            raise PrivacyError(
                "index", f"at most {self.horizon} items per counter", int(count.max())
            )
        return self._insert_items(flat, values).reshape(shape)

    def _insert_items(self, flat: np.ndarray, values: np.ndarray) -> np.ndarray:
        """Algorithm 4 (the hybrid mechanism) for the counters at the flat positions ``flat``
        (1-D, distinct, checked) with ``values``: the item count becomes ``2^k + tau``; at a power
        of two (``tau = 0``) the logarithmic half adds a fresh ``Lap(2D/epsilon)`` and the binary
        half restarts; else the binary half closes the p-sum at level ``ctz(tau)`` with a fresh
        ``Lap(2Dk/epsilon)``, absorbing the levels below. Returns the new releases there."""
        if self._stream is None:
            lap = np.zeros(values.shape)
        else:
            at = flat // self.shape[-1] if self.noise_per == "row" else flat
            lap = self._stream.next().reshape(-1)[at]
        L = self.binary_levels
        counts, sums = self._count.reshape(-1), self._sum.reshape(-1)
        log_noise = self._log_noise.reshape(-1)
        alpha_rows = self._alpha_noise.reshape(-1, L)
        count = counts[flat] + 1
        counts[flat] = count
        exact = sums[flat] + np.clip(values, *self.bounds)
        sums[flat] = exact
        k = bit_length(count) - 1
        power = (count & (count - 1)) == 0
        log_part = log_noise[flat] + np.where(power, self.log_scale * lap, 0.0)
        log_noise[flat] = log_part
        level = np.where(power, L, trailing_zeros(count))[:, None]
        alpha = alpha_rows[flat]
        closed = np.where(power[:, None], 0.0, (self.log_scale * k * lap)[:, None])
        alpha = np.where(self._levels < level, 0.0, np.where(self._levels == level, closed, alpha))
        alpha_rows[flat] = alpha
        return exact + (log_part + alpha.sum(axis=-1))

    def _flat_index(self, index: tuple[np.ndarray, ...]) -> np.ndarray:
        """Flat positions in (B, *shape) of a tuple of index arrays (C order)."""
        return np.ravel_multi_index(tuple(np.asarray(x) for x in index), self._count.shape)

    def release_at(self, index: tuple[np.ndarray, ...]) -> np.ndarray:
        """The private running sums of the counters at ``index``."""
        flat = self._flat_index(index)
        sums, log_noise = self._sum.reshape(-1), self._log_noise.reshape(-1)
        alpha = self._alpha_noise.reshape(-1, self.binary_levels)[flat]
        return sums[flat] + (log_noise[flat] + alpha.sum(axis=-1))

    def insert(self, values: np.ndarray, mask: np.ndarray | None = None) -> np.ndarray:
        """Insert one item into every counter where ``mask`` holds; returns :meth:`release`."""
        full = (self.num_runs, *self.shape)
        values = check_values(values, full)
        mask = check_mask(mask, full)
        if np.any(self._count + mask > self.horizon):
            raise PrivacyError(
                "mask", f"at most {self.horizon} items per counter", int((self._count + mask).max())
            )
        # one standard Laplace draw per counter (or row) and call, used where an item arrives
        if self._stream is None:
            lap = np.zeros(full)
        elif self.noise_per == "row":
            if np.any(mask.sum(axis=-1) > 1):
                raise PrivacyError(
                    "mask", "at most one item per row (noise_per='row')", "two in one row"
                )
            lap = self._stream.next()[..., None]
        else:
            lap = self._stream.next()
        x = np.where(mask, np.clip(values, *self.bounds), 0.0)
        count = self._count + mask
        self._count[...] = count
        self._sum += x

        k = bit_length(np.maximum(count, 1)) - 1
        power = mask & ((count & (count - 1)) == 0)
        inside = mask & ~power
        # logarithmic half: a new Lap(2D/eps) at every power of two; the binary block restarts
        self._log_noise[...] = np.where(
            power, self._log_noise + self.log_scale * lap, self._log_noise
        )
        # binary half: offset tau = c - 2^k closes the p-sum at level ctz(tau), absorbing the
        # lower levels, with a fresh Lap(2Dk/eps)
        tau = np.where(inside, count - (np.int64(1) << k), 1)
        # at a power of two every level is cleared (no level is above binary_levels)
        level = np.where(power, self.binary_levels, trailing_zeros(tau))[..., None]
        levels = self._levels
        keep = (levels > level) | ~mask[..., None]
        p_noise = (self.log_scale * k * lap)[..., None]
        self._alpha_noise[...] = np.where(
            keep, self._alpha_noise, np.where(levels == level, p_noise, 0.0)
        )
        return self.release()
