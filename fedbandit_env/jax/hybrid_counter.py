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

Names (the numpy counter's, :class:`~fedbandit_env.privacy.hybrid_counter.HybridCounterState`):
``count`` c, ``exact`` S (the clipped running sum), ``log_noise`` Z, ``alpha_noise`` the noise of
the open p-sums of the binary half, ``binary_levels = max(1, floor(log2 horizon))`` levels (the
largest block has that many bits), in the prefix layout (binary_levels, *shape): level j, for a
set bit j of tau, holds the noise of the open p-sums at levels >= j. An item reads the level of
the p-sums it keeps and writes the level it closes, one entry per inserted counter, and a release
reads level ctz(c) (:func:`~fedbandit_env.jax.prefix_layout.hybrid_close`, passed to the shared
:func:`~fedbandit_env.privacy.hybrid_counter.hybrid_insert` as its ``close``): no ``where``
over every level.

One source with numpy: the options, their checks and the noise scales are
:func:`fedbandit_env.privacy.hybrid_counter.hybrid_params`'s :class:`HybridParams`, and
Algorithm 4 is the same array-namespace function
(:func:`~fedbandit_env.privacy.hybrid_counter.hybrid_insert`), so the Laplace scale of every
block is numpy's to the bit; a bad option raises numpy's
:class:`~fedbandit_env.privacy.errors.PrivacyError`.

Differences from the numpy counter, all in how it is driven, none in the mechanism:

* the Laplace draws come from the ``key`` of each insertion (threefry's original layout,
  :mod:`fedbandit_env.jax.noise`): :meth:`HybridCounter.insert` draws
  one standard Laplace per counter (numpy's ``noise_per="counter"``),
  :meth:`HybridCounter.insert_arms` one per row of the last axis, used at the row's one
  inserted position (``noise_per="row"``); :meth:`HybridCounter.insert_with` takes the standard
  draws as an argument (a test feeds the numpy counter the same draws);
* a count past ``horizon`` or a NaN input cannot raise inside ``jit``: the callers never insert
  more than ``horizon`` items (one per pull);
* ``exact`` is a compensated float32 sum (:class:`~fedbandit_env.jax.accumulate.Total`), the
  noise float32, the counts int32 (numpy: float64 and int64); the prefix layout adds a
  release's p-sums as they close (numpy at release), so the float32 rounding differs.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from fedbandit_env.jax.accumulate import Total, total_add
from fedbandit_env.jax.noise import laplace
from fedbandit_env.jax.prefix_layout import hybrid_close, hybrid_prefix_noise
from fedbandit_env.privacy.hybrid_counter import (
    HybridCounterState,
    HybridParams,
    hybrid_insert,
    hybrid_params,
)
from fedbandit_env.privacy.tree_counter import one_hot

__all__ = ["HybridCounter", "HybridCounterState", "HybridParams"]


class HybridCounter:
    """Hybrid continual counters over ``shape`` for one run: the numpy counter's options
    (:func:`~fedbandit_env.privacy.hybrid_counter.hybrid_params`) minus its ``rng``,
    ``num_runs`` and ``noise_per`` (module doc); the params' fields and constants (``shape``,
    ``horizon``, ``bounds``, ``log_scale``, ``binary_levels``, ...) read as attributes.

    :meth:`init` is the empty state, :meth:`insert` / :meth:`insert_arms` add one item to some
    counters, :meth:`release` is the private running sum of every counter (0 before any item),
    :meth:`exact` its noiseless part, :meth:`noise` its noise. Pure functions of the state."""

    def __init__(self, shape: tuple[int, ...], horizon: int, epsilon: float, *,
                 bounds: tuple[float, float] = (0.0, 1.0)):  # fmt: skip
        self.params = hybrid_params(shape, horizon, epsilon, bounds=bounds)

    @classmethod
    def from_params(cls, params: HybridParams) -> HybridCounter:
        """The counter of a :class:`HybridParams` (e.g. a numpy counter's ``params``)."""
        counter = cls.__new__(cls)
        counter.params = params
        return counter

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or name == "params":
            raise AttributeError(name)
        return getattr(self.params, name)

    def binary_scale(self, k: int) -> float:
        """Laplace scale of a p-sum of the binary half inside block ``k`` (items ``2^k < c <
        2^{k+1}``): ``2 D k / epsilon``, ``log_scale * k``."""
        return self.log_scale * k

    # -- state -----------------------------------------------------------------------------
    def init(self) -> HybridCounterState:
        """Empty counters: no item yet, release 0."""
        zeros = jnp.zeros(self.shape, jnp.float32)
        return HybridCounterState(
            count=jnp.zeros(self.shape, jnp.int32),
            exact=Total(zeros, zeros),
            log_noise=zeros,
            alpha_noise=jnp.zeros((self.binary_levels, *self.shape), jnp.float32),
        )

    def exact(self, state: HybridCounterState) -> jnp.ndarray:
        """The exact running sums S of the clipped inputs (*shape)."""
        return state.exact.total - state.exact.carry

    def noise(self, state: HybridCounterState) -> jnp.ndarray:
        """The noise of the current release (*shape): Z plus the open p-sums' noise."""
        return hybrid_prefix_noise(state)

    def release(self, state: HybridCounterState) -> jnp.ndarray:
        """The private running sums (*shape), Algorithm 4's output: ``S + Z + alpha``; the
        same until the counter's next item."""
        return self.exact(state) + self.noise(state)

    # -- insertion -------------------------------------------------------------------------
    def insert_with(self, state: HybridCounterState, values: jnp.ndarray, mask: jnp.ndarray,
                    lap: jnp.ndarray) -> HybridCounterState:  # fmt: skip
        """Algorithm 4 for the counters where ``mask`` (*shape) holds, each receiving
        ``values`` with the standard Laplace draw ``lap`` (*shape)
        (:func:`~fedbandit_env.privacy.hybrid_counter.hybrid_insert`; the exact sums
        compensated)."""
        mask = jnp.broadcast_to(jnp.asarray(mask, bool), self.shape)
        values = jnp.asarray(values, jnp.float32)
        lap = jnp.asarray(lap, jnp.float32) if self.noisy else jnp.zeros(self.shape, jnp.float32)
        return hybrid_insert(self.params, state, values, mask, lap, add=total_add,
                             close=hybrid_close)  # fmt: skip

    def draw(self, key: jax.Array, shape: tuple[int, ...] | None = None) -> jnp.ndarray:
        """Standard Laplace draws of ``shape`` (default: one per counter); zeros when epsilon
        is inf (nothing is drawn)."""
        shape = self.shape if shape is None else shape
        if not self.noisy:
            return jnp.zeros(shape, jnp.float32)
        return laplace(key, shape)

    def insert(self, key: jax.Array, state: HybridCounterState, values: jnp.ndarray,
               mask: jnp.ndarray | None = None) -> HybridCounterState:  # fmt: skip
        """One item into every counter where ``mask`` (*shape, default all) holds, one standard
        Laplace per counter from ``key`` (numpy's ``insert``, ``noise_per="counter"``)."""
        mask = jnp.ones(self.shape, bool) if mask is None else mask
        return self.insert_with(state, values, mask, self.draw(key))

    def insert_arms(self, key: jax.Array, state: HybridCounterState, arms: jnp.ndarray,
                    values: jnp.ndarray, active: Any = True) -> HybridCounterState:  # fmt: skip
        """One item per row of the last axis: ``values`` (*shape[:-1]) into the counter at index
        ``arms`` (*shape[:-1]) of each row where ``active`` holds, one standard Laplace per row
        from ``key`` (numpy's ``insert_flat`` with ``noise_per="row"``: each agent pulls one arm
        per step)."""
        arms, values = jnp.asarray(arms, jnp.int32), jnp.asarray(values, jnp.float32)
        x, hit = one_hot(arms, values, self.shape[-1])
        lap = jnp.broadcast_to(self.draw(key, self.shape[:-1])[..., None], self.shape)
        return self.insert_with(state, x, hit & jnp.asarray(active, bool)[..., None], lap)
