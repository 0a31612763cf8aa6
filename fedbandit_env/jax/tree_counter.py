"""The binary-tree (tree-based aggregation) continual counter in JAX, Laplace noise per block.

Port of :class:`fedbandit_env.privacy.TreeCounter` for one run: the partial sums of Fed_UCB
(Zhu, Zhu, Liu & Liu 2021, Section 4.1, Algorithms 2-3; the binary mechanism of Chan, Shi &
Song 2011). The private running sum of each counter (``shape``, typically (N agents, M arms))
is the sum of the dyadic blocks of its prefix, each block carrying one ``Lap(sensitivity /
epsilon')`` draw made once, when the block closes, and reused in every later release
(Algorithm 3); ``epsilon' = epsilon / levels``.

Static shapes: the tree has ``storage_levels`` = floor(log2 capacity) + 1 levels, fixed from
the horizon (capacity: the horizon, plus the initialization pull in ``tree_index="pull"`` with
``init_round``), and the open blocks of every counter are a (*shape, levels) array in the state,
one per level: round (or pull count) k's decomposition is the levels of the set bits of k.
Inserting round k closes the block at level ctz(k), which absorbs the levels below it
(Algorithm 2, "Create partial sums"). No Python loop over rounds: one :meth:`TreeCounter.insert`
per round, a pure function of the state.

The constants and the validation are the numpy twin's: the counter is built from (or builds)
a :class:`fedbandit_env.privacy.TreeCounter` of the same options and reads its ``scale``,
``storage_levels``, ``budget_levels`` and ``capacity``, so the Laplace scale per block is the
twin's to the bit. The decisions where the paper leaves room (levels, noise on empty blocks,
the initialization round, round- or pull-indexed tree, clipping) are the twin's
(docs/privacy.md, "Decisions").

Differences from the twin, all in how it is driven, none in the mechanism:

* :meth:`insert` inserts the next round (``state.t + 1``): a traced round cannot be checked, so
  it is not an argument; a round past the horizon cannot raise inside ``jit`` either (the caller
  never inserts one: the learners insert one round per pull).
* Every insertion draws one standard Laplace per counter from its ``key``. The twin's
  ``noise_per="row"`` (one draw per row in a leaf round, where only the row's pulled counter
  uses it) is a seeding economy of the numpy streams: the noise each block receives has the same
  distribution (i.i.d. ``Lap(scale)`` per noised block), so it has no JAX counterpart.
* ``exact_blocks=False`` keeps only the blocks' noise (``exact`` is None), as the twin: the
  caller keeps the exact sums and adds :meth:`noise` or :meth:`noise_at`.

Float32 blocks and noise, int32 counts and rounds.
"""

from __future__ import annotations

import math
from typing import Literal, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from fedbandit_env.privacy import TreeCounter as NumpyTreeCounter
from fedbandit_env.seeding import BatchedRNG

TreeIndex = Literal["round", "pull"]


class TreeCounterState(NamedTuple):
    """The counters of one run.

    ``t`` () int32 the last inserted round (-1 before the initialization round, 0 before round
    1); ``exact`` (*shape, levels) float32 the exact sums of the open blocks (None with
    ``exact_blocks=False``), ``noise`` (*shape, levels) their Laplace noise and ``noised``
    (*shape, levels) bool which of them carry noise (zeros / False on levels not in the current
    decomposition); ``init_exact``, ``init_noise``, ``init_noised`` (*shape) the initialization
    leaf outside the tree (round mode with ``init_round``; ``init_exact`` None without exact
    blocks); ``counts`` (*shape) int32 observations per counter; ``last_pull`` (*shape) int32 the
    round of each counter's latest observation (0: none)."""

    t: jnp.ndarray
    exact: jnp.ndarray | None
    noise: jnp.ndarray
    noised: jnp.ndarray
    init_exact: jnp.ndarray | None
    init_noise: jnp.ndarray
    init_noised: jnp.ndarray
    counts: jnp.ndarray
    last_pull: jnp.ndarray


def trailing_zeros(k: jnp.ndarray) -> jnp.ndarray:
    """ctz(k) of positive int32 ``k``: the level of the block that index k closes."""
    k = jnp.asarray(k, jnp.int32)
    return jax.lax.population_count((k & -k) - 1)


class TreeCounter:
    """Continual Laplace counters over ``shape`` for one run, indexed by round or by pull count
    (the port of :class:`fedbandit_env.privacy.TreeCounter`; same options, minus the numpy
    twin's ``rng``, ``num_runs`` and ``noise_per``, module doc).

    ``insert(key, state, values, pulled)`` adds the next round; :meth:`release` is the private
    running sum of each counter, :meth:`exact` its noiseless part and :meth:`noise` its noise.
    Each observation enters at most :attr:`storage_levels` blocks, each released with
    ``Lap(scale)``, ``scale = sensitivity / epsilon_per_block``, ``epsilon_per_block = epsilon /
    budget_levels`` (the twin's :attr:`~fedbandit_env.privacy.TreeCounter.scale`)."""

    def __init__(
        self,
        shape: tuple[int, ...],
        horizon: int,
        epsilon: float,
        *,
        sensitivity: float = 1.0,
        bounds: tuple[float, float] | None = None,
        tree_index: TreeIndex = "round",
        noise_on_empty_blocks: bool = False,
        levels: int | Literal["paper"] | None = None,
        init_round: bool = False,
        exact_blocks: bool = True,
    ):
        try:
            noisy = not math.isinf(float(epsilon))
        except (TypeError, ValueError):
            noisy = False  # the twin refuses it
        # the twin validates every option and computes the constants; its stream is never used
        rng = BatchedRNG([np.random.SeedSequence(0)]) if noisy else None
        twin = NumpyTreeCounter(
            shape, horizon, epsilon, rng=rng, sensitivity=sensitivity, bounds=bounds,
            tree_index=tree_index, noise_on_empty_blocks=noise_on_empty_blocks, levels=levels,
            init_round=init_round, exact_blocks=exact_blocks,
        )  # fmt: skip
        self._adopt(twin)

    @classmethod
    def from_twin(cls, twin: NumpyTreeCounter) -> TreeCounter:
        """The JAX counter of a numpy counter (same options and constants; its state and its
        draws are not copied: the JAX counter starts empty)."""
        counter = cls.__new__(cls)
        counter._adopt(twin)
        return counter

    def _adopt(self, twin: NumpyTreeCounter) -> None:
        self.twin = twin
        self.shape = twin.shape
        self.horizon = twin.horizon
        self.epsilon = twin.epsilon
        self.sensitivity = twin.sensitivity
        self.bounds = twin.bounds
        self.tree_index: TreeIndex = twin.tree_index
        self.noise_on_empty_blocks = twin.noise_on_empty_blocks
        self.init_round = twin.init_round
        self.exact_blocks = twin.exact_blocks
        self.capacity = twin.capacity
        self.storage_levels = twin.storage_levels
        self.budget_levels = twin.budget_levels
        self.noisy = not math.isinf(twin.epsilon)

    # -- budget (the twin's) ---------------------------------------------------------------
    @property
    def epsilon_per_block(self) -> float:
        """epsilon' = epsilon / budget_levels, the budget of one block release."""
        return self.twin.epsilon_per_block

    @property
    def scale(self) -> float:
        """Laplace scale of one block: sensitivity / epsilon' (0 when epsilon is inf)."""
        return self.twin.scale

    @property
    def effective_epsilon(self) -> float:
        """Per-observation guarantee by basic composition (the twin's)."""
        return self.twin.effective_epsilon

    # -- state -----------------------------------------------------------------------------
    def init(self) -> TreeCounterState:
        """Empty counters: no round inserted yet."""
        full, blocks = self.shape, (*self.shape, self.storage_levels)
        exact = self.exact_blocks
        return TreeCounterState(
            t=jnp.asarray(-1 if self.init_round else 0, jnp.int32),
            exact=jnp.zeros(blocks, jnp.float32) if exact else None,
            noise=jnp.zeros(blocks, jnp.float32),
            noised=jnp.zeros(blocks, bool),
            init_exact=jnp.zeros(full, jnp.float32) if exact else None,
            init_noise=jnp.zeros(full, jnp.float32),
            init_noised=jnp.zeros(full, bool),
            counts=jnp.zeros(full, jnp.int32),
            last_pull=jnp.zeros(full, jnp.int32),
        )

    def exact(self, state: TreeCounterState) -> jnp.ndarray:
        """The exact running sums (*shape): the sum of the open blocks, the prefix as its dyadic
        blocks (Algorithm 2). Needs ``exact_blocks``."""
        self._require_exact("exact")
        return state.exact.sum(axis=-1) + state.init_exact

    def noise(self, state: TreeCounterState) -> jnp.ndarray:
        """The noise part of :meth:`release` (*shape): the cached noise of the blocks of the
        current decomposition (Algorithm 3), plus the initialization leaf's."""
        return state.noise.sum(axis=-1) + state.init_noise

    def release(self, state: TreeCounterState) -> jnp.ndarray:
        """The private running sums (*shape); releasing again without an insertion gives the
        same values (the block noise is cached). Needs ``exact_blocks``."""
        return self.exact(state) + self.noise(state)

    def noise_at(self, state: TreeCounterState, arms: jnp.ndarray) -> jnp.ndarray:
        """:meth:`noise` read at one index of the last axis per leading position: ``arms``
        (*shape[:-1]) int, result (*shape[:-1])."""
        noise = self.noise(state)
        return jnp.take_along_axis(noise, jnp.asarray(arms, jnp.int32)[..., None], axis=-1)[..., 0]

    def num_noise_terms(self, state: TreeCounterState) -> jnp.ndarray:
        """Number of Laplace terms in each current release (*shape) int32."""
        terms = state.noised.sum(axis=-1, dtype=jnp.int32)
        return terms + state.init_noised.astype(jnp.int32)

    def _require_exact(self, what: str) -> None:
        if not self.exact_blocks:
            self.twin._require_exact(what)  # raises the twin's PrivacyError

    # -- insertion -------------------------------------------------------------------------
    def draw(self, key: jax.Array) -> jnp.ndarray:
        """The Laplace noise one insertion may use (*shape): ``scale`` times a standard Laplace
        per counter (zeros when epsilon is inf)."""
        if not self.noisy:
            return jnp.zeros(self.shape, jnp.float32)
        z = jax.random.laplace(key, self.shape, jnp.float32)
        return jnp.float32(self.scale) * z

    def insert(
        self,
        key: jax.Array,
        state: TreeCounterState,
        values: jnp.ndarray,
        pulled: jnp.ndarray | None = None,
    ) -> TreeCounterState:
        """Insert the next round (``state.t + 1``) for every counter: ``values`` (*shape) the
        increments (clipped to ``bounds`` if set), ``pulled`` (*shape) bool the counters that
        received an observation (default: all)."""
        values = jnp.asarray(values, jnp.float32)
        if pulled is None:
            pulled = jnp.ones(self.shape, bool)
        pulled = jnp.broadcast_to(jnp.asarray(pulled, bool), self.shape)
        if self.bounds is not None:
            values = jnp.clip(values, *self.bounds)
        values = jnp.where(pulled, values, 0.0)
        noise = self.draw(key)
        t = state.t + 1
        counts = state.counts + pulled.astype(jnp.int32)
        if self.tree_index == "pull":  # only pulled counters advance their own clock
            level = trailing_zeros(jnp.where(pulled, counts, 1))
            closed = self._close(state, level, pulled, values, jnp.where(pulled, noise, 0.0),
                                 pulled)  # fmt: skip
            return closed._replace(t=t, counts=counts)
        # round mode: every counter closes block (t - 2^level, t] at level ctz(t)
        last_pull = jnp.where(pulled, t, state.last_pull)
        level = trailing_zeros(jnp.maximum(t, 1))
        block_start = t - (jnp.int32(1) << level)
        noised = (last_pull > block_start) | self.noise_on_empty_blocks
        every = jnp.ones(self.shape, bool)
        level = jnp.broadcast_to(level, self.shape)
        closed = self._close(state, level, every, values, jnp.where(noised, noise, 0.0), noised)
        closed = closed._replace(t=t, counts=counts, last_pull=last_pull)
        if not self.init_round:
            return closed
        # round 0: the initialization leaf, outside the tree, with its own draw
        init_noised = pulled | self.noise_on_empty_blocks
        leaf = state._replace(
            t=t,
            init_exact=None if state.init_exact is None else values,
            init_noise=jnp.where(init_noised, noise, 0.0),
            init_noised=init_noised,
            counts=counts,
        )
        return jax.tree_util.tree_map(lambda a, b: jnp.where(t == 0, a, b), leaf, closed)

    def insert_arms(
        self, key: jax.Array, state: TreeCounterState, arms: jnp.ndarray, rewards: jnp.ndarray
    ) -> TreeCounterState:
        """Insert the next round given the pulled index on the last axis: ``arms`` and
        ``rewards`` (*shape[:-1]) (one arm and one reward per agent)."""
        arms = jnp.asarray(arms, jnp.int32)
        pulled = arms[..., None] == jnp.arange(self.shape[-1], dtype=jnp.int32)
        values = jnp.where(pulled, jnp.asarray(rewards, jnp.float32)[..., None], 0.0)
        return self.insert(key, state, values, pulled)

    def _close(self, state, level, active, values, noise, noised) -> TreeCounterState:
        """Each active counter closes a block at its own ``level`` (*shape): the block takes the
        new values plus the exact sums of the levels below it (which it absorbs, Algorithm 3's
        "sum of the blocks below + x_t"), its noise and its noised flag; the levels below are
        emptied, the levels above are kept."""
        levels = jnp.arange(self.storage_levels, dtype=jnp.int32)
        below = (levels < level[..., None]) & active[..., None]
        here = (levels == level[..., None]) & active[..., None]
        exact = state.exact
        if exact is not None:
            merged = values + jnp.where(below, exact, 0.0).sum(axis=-1)
            exact = jnp.where(below, 0.0, jnp.where(here, merged[..., None], exact))
        noise_blocks = jnp.where(below, 0.0, jnp.where(here, noise[..., None], state.noise))
        noised_blocks = jnp.where(below, False, jnp.where(here, noised[..., None], state.noised))
        return state._replace(exact=exact, noise=noise_blocks, noised=noised_blocks)
