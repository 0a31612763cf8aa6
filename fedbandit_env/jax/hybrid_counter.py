"""The Chan–Shi–Song hybrid continual counter in JAX (Laplace noise), for one run.

Port of :class:`fedbandit_env.privacy.HybridCounter`: the hybrid mechanism of Chan, Shi & Song
2011 (Algorithms 2-4), the mechanism ``H_ij`` of the DP recommender agents (Li, Song &
Fragouli, Figure 1 and Fact 1; docs/dp-recsys.md, "Privacy"; docs/privacy.md, "Hybrid
counter"). One counter per position of ``shape`` (typically (N agents, K arms)); a counter's
clock is its own insertion count. The budget is split ``epsilon/2 + epsilon/2``:

* logarithmic half: at every count ``c = 2^k`` a fresh ``Lap(2 D/epsilon)`` is added to the
  accumulated noise ``Z`` and the release restarts from ``S + Z``;
* binary half: inside the block ``c in (2^k, 2^{k+1})`` a binary mechanism over the block's
  items (offsets ``tau = c - 2^k``, ``k`` bits) whose p-sums each carry ``Lap(2 D k/epsilon)``;
  item ``c`` closes the p-sum at level ``ctz(c)``, which absorbs the levels below it.

``D = hi - lo`` is the sensitivity after clipping inputs to ``bounds``. The release after ``n =
2^k + tau`` items is ``S + Z + sum of the open p-sums' noise``: ``k + 1`` i.i.d.
``Lap(2D/epsilon)`` and ``popcount(tau)`` i.i.d. ``Lap(2Dk/epsilon)``
(:func:`fedbandit_env.privacy.hybrid_counter.hybrid_noise_variance` is its variance).

Names (the twin's): ``count`` c, ``exact`` S (the clipped running sum), ``log_noise`` Z,
``alpha_noise`` the noise of the open p-sums of the binary half, one slot per level
(``binary_levels = max(1, floor(log2 horizon))`` slots: the largest block has that many bits).

The constants and the validation are the twin's: the counter is built from (or builds) a
:class:`fedbandit_env.privacy.HybridCounter` of the same options and reads its
``log_scale``, ``binary_levels``, ``bounds``, ``sensitivity`` and ``horizon``, so the Laplace
scale of every block is the twin's to the bit; a bad option raises the twin's
:class:`~fedbandit_env.privacy.errors.PrivacyError`.

Differences from the twin, all in how it is driven, none in the mechanism:

* the Laplace draws come from the ``key`` of each insertion: :meth:`HybridCounter.insert` draws
  one standard Laplace per counter (the twin's ``noise_per="counter"``),
  :meth:`HybridCounter.insert_arms` one per row of the last axis, used at the row's one
  inserted position (``noise_per="row"``); :meth:`HybridCounter.insert_with` takes the standard
  draws as an argument (a test feeds the twin the same draws);
* a count past ``horizon`` or a NaN input cannot raise inside ``jit``: the callers never insert
  more than ``horizon`` items (one per pull);
* ``exact`` is a compensated float32 sum (:class:`~fedbandit_env.jax.accumulate.Total`), the
  noise float32, the counts int32 (the twin: float64 and int64).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from fedbandit_env.jax.accumulate import Total, total_add
from fedbandit_env.privacy import HybridCounter as NumpyHybridCounter
from fedbandit_env.seeding import BatchedRNG


class HybridCounterState(NamedTuple):
    """The counters of one run: ``count`` (*shape) int32 items so far; ``exact`` the clipped
    running sums S (a compensated float32 :class:`Total` over *shape); ``log_noise`` (*shape)
    float32 Z; ``alpha_noise`` (*shape, binary_levels) float32 the noise of the open p-sums
    (zero on levels not in the current block's decomposition)."""

    count: jnp.ndarray
    exact: Total
    log_noise: jnp.ndarray
    alpha_noise: jnp.ndarray


def bit_length(c: jnp.ndarray) -> jnp.ndarray:
    """``int.bit_length`` of non-negative int32 ``c`` (0 at 0)."""
    c = jnp.asarray(c, jnp.int32)
    return jnp.int32(32) - jax.lax.clz(c)


def trailing_zeros(c: jnp.ndarray) -> jnp.ndarray:
    """ctz(c) of positive int32 ``c``: the level of the p-sum that item c closes (Algorithm 4)."""
    c = jnp.asarray(c, jnp.int32)
    return jax.lax.population_count((c & -c) - 1)


def is_power_of_two(c: jnp.ndarray) -> jnp.ndarray:
    """``c`` in {1, 2, 4, ...} for int32 ``c``."""
    c = jnp.asarray(c, jnp.int32)
    return (c > 0) & ((c & (c - 1)) == 0)


class HybridCounter:
    """Hybrid continual counters over ``shape`` for one run (the port of
    :class:`fedbandit_env.privacy.HybridCounter`; same options, minus the twin's ``rng``,
    ``num_runs`` and ``noise_per``: module doc).

    :meth:`init` is the empty state, :meth:`insert` / :meth:`insert_arms` add one item to some
    counters, :meth:`release` is the private running sum of every counter (0 before any item),
    :meth:`exact` its noiseless part, :meth:`noise` its noise. Pure functions of the state."""

    def __init__(
        self,
        shape: tuple[int, ...],
        horizon: int,
        epsilon: float,
        *,
        bounds: tuple[float, float] = (0.0, 1.0),
    ):
        try:
            noisy = not math.isinf(float(epsilon))
        except (TypeError, ValueError):
            noisy = False  # the twin refuses it
        # the twin validates every option and computes the constants; its stream is never used
        rng = BatchedRNG([np.random.SeedSequence(0)]) if noisy else None
        twin = NumpyHybridCounter(
            shape, horizon, epsilon, rng=rng, num_runs=None if noisy else 1, bounds=bounds
        )
        self._adopt(twin)

    @classmethod
    def from_twin(cls, twin: NumpyHybridCounter) -> HybridCounter:
        """The JAX counter of a numpy counter (same options and constants; its state and its
        draws are not copied: the JAX counter starts empty)."""
        counter = cls.__new__(cls)
        counter._adopt(twin)
        return counter

    def _adopt(self, twin: NumpyHybridCounter) -> None:
        self.twin = twin
        self.shape = tuple(twin.shape)
        self.horizon = twin.horizon
        self.epsilon = twin.epsilon
        self.bounds = twin.bounds
        self.sensitivity = twin.sensitivity
        self.binary_levels = twin.binary_levels
        self.noisy = not math.isinf(twin.epsilon)

    # -- the noise scales (the twin's) -----------------------------------------------------
    @property
    def log_scale(self) -> float:
        """Laplace scale of the logarithmic half, ``2 D / epsilon`` (0 when epsilon is inf)."""
        return self.twin.log_scale

    def binary_scale(self, k: int) -> float:
        """Laplace scale of a p-sum of the binary half inside block ``k`` (items ``2^k < c <
        2^{k+1}``): ``2 D k / epsilon``, the twin's ``log_scale * k``."""
        return self.log_scale * k

    # -- state -----------------------------------------------------------------------------
    def init(self) -> HybridCounterState:
        """Empty counters: no item yet, release 0."""
        zeros = jnp.zeros(self.shape, jnp.float32)
        return HybridCounterState(
            count=jnp.zeros(self.shape, jnp.int32),
            exact=Total(zeros, zeros),
            log_noise=zeros,
            alpha_noise=jnp.zeros((*self.shape, self.binary_levels), jnp.float32),
        )

    def exact(self, state: HybridCounterState) -> jnp.ndarray:
        """The exact running sums S of the clipped inputs (*shape)."""
        return state.exact.total - state.exact.carry

    def noise(self, state: HybridCounterState) -> jnp.ndarray:
        """The noise of the current release (*shape): Z plus the open p-sums' noise."""
        return state.log_noise + state.alpha_noise.sum(axis=-1)

    def release(self, state: HybridCounterState) -> jnp.ndarray:
        """The private running sums (*shape), Algorithm 4's output: ``S + Z + alpha``; the
        same until the counter's next item."""
        return self.exact(state) + self.noise(state)

    # -- insertion -------------------------------------------------------------------------
    def insert_with(
        self,
        state: HybridCounterState,
        values: jnp.ndarray,
        mask: jnp.ndarray,
        lap: jnp.ndarray,
    ) -> HybridCounterState:
        """Algorithm 4 (the hybrid mechanism) for the counters where ``mask`` (*shape) holds,
        each receiving ``values`` (clipped to ``bounds``) with the standard Laplace draw ``lap``
        (*shape) (the twin's ``_insert_items``): the count becomes ``c = 2^k + tau``; at a power
        of two (``tau = 0``) the logarithmic half adds ``log_scale * lap`` to Z and the binary
        half restarts (every level cleared); otherwise the binary half closes the p-sum at level
        ``ctz(c)`` with ``log_scale * k * lap``, absorbing (clearing) the levels below."""
        mask = jnp.broadcast_to(jnp.asarray(mask, bool), self.shape)
        x = jnp.where(mask, jnp.clip(jnp.asarray(values, jnp.float32), *self.bounds), 0.0)
        lap = jnp.asarray(lap, jnp.float32) if self.noisy else jnp.zeros(self.shape, jnp.float32)
        count = state.count + mask.astype(jnp.int32)
        exact = total_add(state.exact, x)
        c = jnp.maximum(count, 1)
        k = (bit_length(c) - 1).astype(jnp.float32)
        power = mask & is_power_of_two(count)
        scale = jnp.float32(self.log_scale)
        log_noise = jnp.where(power, state.log_noise + scale * lap, state.log_noise)
        L = self.binary_levels
        level = jnp.where(power, L, trailing_zeros(c))[..., None]
        levels = jnp.arange(L, dtype=jnp.int32)
        p_noise = jnp.where(power, 0.0, scale * k * lap)[..., None]
        alpha = jnp.where(
            levels < level, 0.0, jnp.where(levels == level, p_noise, state.alpha_noise)
        )
        alpha = jnp.where(mask[..., None], alpha, state.alpha_noise)
        return HybridCounterState(count, exact, log_noise, alpha)

    def draw(self, key: jax.Array, shape: tuple[int, ...] | None = None) -> jnp.ndarray:
        """Standard Laplace draws of ``shape`` (default: one per counter); zeros when epsilon
        is inf (nothing is drawn)."""
        shape = self.shape if shape is None else shape
        if not self.noisy:
            return jnp.zeros(shape, jnp.float32)
        return jax.random.laplace(key, shape, jnp.float32)

    def insert(
        self,
        key: jax.Array,
        state: HybridCounterState,
        values: jnp.ndarray,
        mask: jnp.ndarray | None = None,
    ) -> HybridCounterState:
        """One item into every counter where ``mask`` (*shape, default all) holds, one standard
        Laplace per counter from ``key`` (the twin's ``insert``, ``noise_per="counter"``)."""
        mask = jnp.ones(self.shape, bool) if mask is None else mask
        return self.insert_with(state, values, mask, self.draw(key))

    def insert_arms(
        self,
        key: jax.Array,
        state: HybridCounterState,
        arms: jnp.ndarray,
        values: jnp.ndarray,
        active: jnp.ndarray | bool = True,
    ) -> HybridCounterState:
        """One item per row of the last axis: ``values`` (*shape[:-1]) into the counter at index
        ``arms`` (*shape[:-1]) of each row where ``active`` holds, one standard Laplace per row
        from ``key`` (the twin's ``insert_flat`` with ``noise_per="row"``: each agent pulls one
        arm per step)."""
        arms = jnp.asarray(arms, jnp.int32)
        hit = arms[..., None] == jnp.arange(self.shape[-1], dtype=jnp.int32)
        hit = hit & jnp.asarray(active, bool)[..., None]
        lap = self.draw(key, self.shape[:-1])[..., None]
        values = jnp.asarray(values, jnp.float32)[..., None]
        return self.insert_with(state, jnp.broadcast_to(values, self.shape), hit,
                                jnp.broadcast_to(lap, self.shape))  # fmt: skip
