"""The binary-tree (tree-based aggregation) continual counter in JAX, Laplace noise per block.

The JAX form of :class:`fedbandit_env.privacy.TreeCounter` for one run: the partial sums of
Fed_UCB (Zhu, Zhu, Liu & Liu 2021, Section 4.1, Algorithms 2-3; the binary mechanism of Chan,
Shi & Song 2011). The private running sum of each counter (``shape``, typically (N agents, M
arms)) is the sum of the dyadic blocks of its prefix, each block carrying one ``Lap(sensitivity
/ epsilon')`` draw made once, when the block closes, and reused in every later release
(Algorithm 3); ``epsilon' = epsilon / levels``.

One source with numpy: the options, their checks and the constants (levels, Laplace scale per
block) are :func:`fedbandit_env.privacy.tree_counter.tree_params`'s :class:`TreeParams`, and the
insertion and the reads are the same array-namespace functions (:func:`~fedbandit_env.privacy.
tree_counter.tree_insert`, :func:`~fedbandit_env.privacy.tree_counter.tree_release`, ...) on
one run's :class:`TreeCounterState`. The decisions where the paper leaves room (levels, noise on
empty blocks, the initialization round, round- or pull-indexed tree, clipping) are the numpy
counter's (docs/privacy.md, "Decisions").

Static shapes: the tree has ``storage_levels`` = floor(log2 capacity) + 1 levels, fixed from
the horizon, and the open blocks of every counter are a (levels, *shape) array in the state, in
the prefix layout (:mod:`fedbandit_env.jax.prefix_layout`; ``noised`` int8, the number of noised
blocks): level j holds the sum of the open blocks at levels >= j. Round (or pull count) k's decomposition is the levels
of the set bits of k; inserting round k closes the block at level ctz(k), which absorbs the
levels below it (Algorithm 2, "Create partial sums"). One insertion reads the prefix of the
blocks above (level ctz(k & (k - 1))) and writes the closing level only, a dynamic index (one
slice per run in round mode, one entry per pulled counter in pull mode), and a release reads
level ctz(k): nothing is a ``where`` over every level. The shared functions take this layout's
operations (:func:`~fedbandit_env.privacy.tree_counter.tree_insert`'s ``close``,
:func:`~fedbandit_env.privacy.tree_counter.tree_exact`'s ``total``). No Python loop over rounds: one
:meth:`TreeCounter.insert` per round, a pure function of the state.

Differences from the numpy counter, all in how it is driven, none in the mechanism:

* :meth:`TreeCounter.insert` inserts the next round (``state.t + 1``): a traced round cannot be
  checked, so it is not an argument; a round past the horizon cannot raise inside ``jit`` either
  (the caller never inserts one: the learners insert one round per pull).
* Noise is drawn per block that can close noised, not per counter and round:
  :meth:`TreeCounter.insert` draws one standard Laplace per counter;
  :meth:`TreeCounter.insert_arms` (one pulled counter per row, the learners' insertion) one
  per row where only the pulled counter can close a noised block (every round in pull mode; a
  leaf round, odd t, in round mode without ``noise_on_empty_blocks``; numpy's
  ``noise_per="row"``) and one per counter in the rounds that close a level above 0, behind a
  batch-level ``cond`` (:meth:`TreeCounter.draw_arms`). Each noised block gets an i.i.d.
  ``Lap(scale)`` either way, drawn with threefry's original layout (:mod:`fedbandit_env.jax.noise`).
* ``exact_blocks=False`` keeps only the blocks' noise (``exact`` is None), as numpy: the caller
  keeps the exact sums and adds :meth:`TreeCounter.noise` or :meth:`TreeCounter.noise_at`.
* The prefix layout sums a release's blocks from the top level down as they close (numpy sums
  its per-level blocks at release), so the float32 rounding differs;
  :func:`~fedbandit_env.jax.prefix_layout.tree_blocks` gives the per-level view.

Float32 blocks and noise, int32 counts and rounds.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from fedbandit_env.jax.batch import when_any
from fedbandit_env.jax.noise import laplace
from fedbandit_env.jax.prefix_layout import prefix_close, prefix_total, tree_blocks
from fedbandit_env.privacy.tree_counter import (
    TreeCounterState,
    TreeParams,
    empty_tree,
    one_hot,
    tree_exact,
    tree_insert,
    tree_noise,
    tree_params,
    tree_release,
)

__all__ = ["TreeCounter", "TreeCounterState", "TreeParams"]


class TreeCounter:
    """Continual Laplace counters over ``shape`` for one run, indexed by round or by pull count:
    the numpy counter's options (:func:`~fedbandit_env.privacy.tree_counter.tree_params`) minus
    its ``rng``, ``num_runs`` and ``noise_per`` (module doc); the params' fields and constants
    (``shape``, ``scale``, ``storage_levels``, ``effective_epsilon``, ...) read as attributes.

    ``insert(key, state, values, pulled)`` adds the next round; :meth:`release` is the private
    running sum of each counter, :meth:`exact` its noiseless part and :meth:`noise` its noise.
    Each observation enters at most ``storage_levels`` blocks, each released with
    ``Lap(scale)``, ``scale = sensitivity / epsilon_per_block``, ``epsilon_per_block = epsilon /
    budget_levels``."""

    def __init__(self, shape: tuple[int, ...], horizon: int, epsilon: float, **options: Any):
        self.params = tree_params(shape, horizon, epsilon, **options)

    @classmethod
    def from_params(cls, params: TreeParams) -> TreeCounter:
        """The counter of a :class:`TreeParams` (e.g. a numpy counter's ``params``)."""
        counter = cls.__new__(cls)
        counter.params = params
        return counter

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or name == "params":
            raise AttributeError(name)
        return getattr(self.params, name)

    # -- state -----------------------------------------------------------------------------
    def init(self) -> TreeCounterState:
        """Empty counters: no round inserted yet, the blocks in the prefix layout."""
        s = empty_tree(self.params, xp=jnp, floats=jnp.float32, ints=jnp.int32)
        levels = (self.storage_levels, *self.shape)
        exact = None if s.exact is None else jnp.zeros(levels, jnp.float32)
        noise, noised = jnp.zeros(levels, jnp.float32), jnp.zeros(levels, jnp.int8)
        return s._replace(t=jnp.asarray(s.t, jnp.int32), exact=exact, noise=noise, noised=noised)

    def exact(self, state: TreeCounterState) -> jnp.ndarray:
        """The exact running sums (*shape). Needs ``exact_blocks``."""
        return tree_exact(self.params, state, prefix_total)

    def noise(self, state: TreeCounterState) -> jnp.ndarray:
        """The noise part of :meth:`release` (*shape)."""
        return tree_noise(self.params, state, prefix_total)

    def release(self, state: TreeCounterState) -> jnp.ndarray:
        """The private running sums (*shape). Needs ``exact_blocks``."""
        return tree_release(self.params, state, prefix_total)

    def noise_at(self, state: TreeCounterState, arms: jnp.ndarray) -> jnp.ndarray:
        """:meth:`noise` read at one index of the last axis per leading position: ``arms``
        (*shape[:-1]) int, result (*shape[:-1])."""
        arms = jnp.asarray(arms, jnp.int32)
        return jnp.take_along_axis(self.noise(state), arms[..., None], axis=-1)[..., 0]

    def num_noise_terms(self, state: TreeCounterState) -> jnp.ndarray:
        """Number of Laplace terms in each current release (*shape) int32."""
        noised = prefix_total(self.params, state, state.noised).astype("int32")
        return noised + state.init_noised

    def blocks(self, state: TreeCounterState) -> tuple[jnp.ndarray, jnp.ndarray]:
        """The open blocks' noise and noised flags (*shape, levels), numpy's per-level layout
        (0 / False off the decomposition; :func:`~fedbandit_env.jax.prefix_layout.
        tree_blocks`)."""
        return tree_blocks(self.params, state)

    # -- insertion -------------------------------------------------------------------------
    def draw(self, key: jax.Array, shape: tuple[int, ...] | None = None) -> jnp.ndarray:
        """The Laplace noise one insertion may use: ``scale`` times a standard Laplace per
        counter, or per entry of ``shape`` (zeros when epsilon is inf)."""
        shape = self.shape if shape is None else shape
        if not self.noisy:
            return jnp.zeros(shape, jnp.float32)
        return jnp.float32(self.scale) * laplace(key, shape)

    def draw_arms(self, key: jax.Array, state: TreeCounterState) -> jnp.ndarray:
        """The noise of inserting one pulled counter per row (*shape): one draw per row where
        only the row's pulled counter can close a noised block, used there (pull mode; round
        mode's leaf rounds, odd t, and round 0, without ``noise_on_empty_blocks``: numpy's
        ``noise_per="row"``), else one per counter, drawn only in a step where some run of the
        batch closes a level above 0 (:func:`~fedbandit_env.jax.batch.when_any`). Each noised
        block gets its own i.i.d. draw either way."""
        k_row, k_all = jax.random.split(key)
        row = jnp.broadcast_to(self.draw(k_row, self.shape[:-1])[..., None], self.shape)
        if self.tree_index == "pull":
            return row
        if self.noise_on_empty_blocks:
            return self.draw(k_all)
        t = state.t + 1
        blocks = (t % 2 == 0) & (t > 0)  # closes a level above 0: any counter may be noised
        return when_any(blocks, lambda n: jnp.where(blocks, self.draw(k_all), n), row)

    def insert(self, key: jax.Array, state: TreeCounterState, values: jnp.ndarray,
               pulled: jnp.ndarray | None = None) -> TreeCounterState:  # fmt: skip
        """Insert the next round (``state.t + 1``) for every counter: ``values`` (*shape) the
        increments, ``pulled`` (*shape) bool the counters that received an observation
        (default: all); :func:`~fedbandit_env.privacy.tree_counter.tree_insert`."""
        values = jnp.asarray(values, jnp.float32)
        pulled = jnp.broadcast_to(jnp.asarray(True if pulled is None else pulled, bool), self.shape)
        return tree_insert(self.params, state, values, pulled, self.draw(key), when_any,
                           prefix_close)  # fmt: skip

    def insert_arms(self, key: jax.Array, state: TreeCounterState, arms: jnp.ndarray,
                    rewards: jnp.ndarray) -> TreeCounterState:  # fmt: skip
        """Insert the next round given the pulled index on the last axis: ``arms`` and
        ``rewards`` (*shape[:-1]) (one arm and one reward per agent), with the noise of
        :meth:`draw_arms`."""
        values, pulled = one_hot(arms, jnp.asarray(rewards, jnp.float32), self.shape[-1])
        return tree_insert(self.params, state, values, pulled, self.draw_arms(key, state),
                           when_any, prefix_close)  # fmt: skip
