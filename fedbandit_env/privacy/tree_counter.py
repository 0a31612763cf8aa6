"""Binary-tree continual counter (Laplace), batched over runs and counters: the partial sums of
Fed_UCB (Zhu, Zhu, Liu & Liu 2021, Section 4.1, Algorithms 2–3) for B runs and any counter shape,
each dyadic block carrying one Laplace draw made when it closes and reused in every later
release. Options, seeding and the decisions where the paper leaves room: docs/privacy.md,
"Binary-tree counter" and "Decisions". One source for both engines: :func:`tree_params` and the
array-namespace functions on a :class:`TreeCounterState` (:func:`tree_insert`, ...).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

import numpy as np

from fedbandit_env.privacy import _validation as check
from fedbandit_env.privacy._random import LaplaceStream
from fedbandit_env.privacy.calibration import check_epsilon, check_noise_scale, check_sensitivity
from fedbandit_env.privacy.dyadic import floor_levels, paper_levels, trailing_zeros
from fedbandit_env.privacy.errors import PrivacyError
from fedbandit_env.seeding import BatchedRNG
from fedbandit_env.validation import check_memory, is_integral
from fedbandit_env.xp import is_inf, is_jax, namespace

TreeIndex = Literal["round", "pull"]


@dataclass(frozen=True)
class TreeParams:
    """A tree counter's validated options (:func:`tree_params`) and the constants they imply:
    ``capacity`` the largest tree index (the horizon, +1 with the init pull in pull mode),
    ``storage_levels`` the tree's levels (the most blocks one observation enters),
    ``budget_levels`` the levels epsilon is split over."""

    shape: tuple[int, ...]
    horizon: int
    epsilon: float
    sensitivity: float
    bounds: tuple[float, float] | None
    tree_index: TreeIndex
    noise_on_empty_blocks: bool
    init_round: bool
    exact_blocks: bool
    capacity: int
    storage_levels: int
    budget_levels: int

    @property
    def noisy(self) -> bool:
        return not is_inf(self.epsilon)

    @property
    def epsilon_per_block(self) -> float:
        """epsilon' = epsilon / budget_levels, the budget of one block release."""
        return self.epsilon / self.budget_levels

    @property
    def scale(self) -> float:
        """Laplace scale of one block: sensitivity / epsilon' (0 when epsilon is inf)."""
        return self.sensitivity / self.epsilon_per_block if self.noisy else 0.0

    @property
    def effective_epsilon(self) -> float:
        """Per-observation guarantee by basic composition: (most blocks one observation enters)
        x epsilon'. Equals epsilon unless ``levels`` undercounts the tree depth."""
        return self.storage_levels * self.epsilon_per_block


def tree_params(shape: tuple[int, ...], horizon: int, epsilon: float, *, sensitivity: float = 1.0,
                bounds: tuple[float, float] | None = None, tree_index: TreeIndex = "round",
                noise_on_empty_blocks: bool = False, levels: int | Literal["paper"] | None = None,
                init_round: bool = False, exact_blocks: bool = True) -> TreeParams:  # fmt: skip
    """The :class:`TreeParams` of a counter's options (docs/privacy.md, "Decisions"), or a
    :class:`PrivacyError` naming the bad option. Pure: the numpy and JAX counters call it."""
    shape = check.check_shape(shape)
    if not isinstance(exact_blocks, bool | np.bool_):
        raise PrivacyError("exact_blocks", "True or False", repr(exact_blocks))
    horizon, epsilon = check.check_horizon(horizon), check_epsilon(epsilon)
    bounds = check.check_bounds(bounds)
    sensitivity = bounds[1] - bounds[0] if bounds else check_sensitivity(sensitivity)
    if not isinstance(tree_index, str) or tree_index not in ("round", "pull"):
        raise PrivacyError("tree_index", "'round' or 'pull'", tree_index)
    capacity = horizon + (1 if tree_index == "pull" and init_round else 0)
    budget = storage = floor_levels(capacity)
    if isinstance(levels, str) and levels == "paper":
        budget = paper_levels(horizon)
    elif levels is not None:
        if not (is_integral(levels) and levels >= 1):
            raise PrivacyError("levels", "None, 'paper' or an int >= 1", levels)
        budget = int(levels)
    p = TreeParams(shape, horizon, epsilon, sensitivity, bounds, tree_index,
                   bool(noise_on_empty_blocks), bool(init_round), bool(exact_blocks), capacity,
                   storage, budget)  # fmt: skip
    if p.noisy:  # an epsilon' that underflows to 0 makes an infinite scale
        scale = p.scale if p.epsilon_per_block > 0 else math.inf
        check_noise_scale(scale, epsilon, what="Laplace scale per block")
    return p


class TreeCounterState(NamedTuple):
    """The counters (any leading batch axes, then ``shape``): ``t`` the last inserted round (-1
    before the initialization round); ``exact`` (..., levels) the exact sums of the open blocks
    (None without exact blocks), ``noise`` their Laplace noise and ``noised`` which carry noise
    (0 / False on levels not in the decomposition: round or pull count k's blocks are the levels
    of the set bits of k); ``init_*`` the initialization leaf outside the tree (round mode with
    ``init_round``); ``counts`` observations per counter; ``last_pull`` the round of each
    counter's latest observation (0: none). This per-level layout is numpy's; the JAX counter
    keeps the blocks in its own layout (fedbandit_env/jax/prefix_layout.py) and passes its
    layout operations to the shared functions (``close``, ``total``)."""

    t: Any
    exact: Any
    noise: Any
    noised: Any
    init_exact: Any
    init_noise: Any
    init_noised: Any
    counts: Any
    last_pull: Any


def empty_tree(p: TreeParams, lead: tuple[int, ...] = (), xp: Any = np, floats: Any = np.float64,
               ints: Any = np.int64) -> TreeCounterState:  # fmt: skip
    """Counters with no round inserted, over ``lead + p.shape`` (``t`` a Python int)."""
    full, blocks = (*lead, *p.shape), (*lead, *p.shape, p.storage_levels)
    exact = p.exact_blocks
    return TreeCounterState(
        -1 if p.init_round else 0,
        xp.zeros(blocks, floats) if exact else None, xp.zeros(blocks, floats),
        xp.zeros(blocks, bool), xp.zeros(full, floats) if exact else None,
        xp.zeros(full, floats), xp.zeros(full, bool), xp.zeros(full, ints), xp.zeros(full, ints),
    )  # fmt: skip


def level_sum(p: TreeParams, s: TreeCounterState, blocks: Any) -> Any:
    """The sum of the open blocks of ``blocks`` in the per-level layout (the layout operation
    ``total`` of the reads below)."""
    return blocks.sum(axis=-1)


def tree_exact(p: TreeParams, s: TreeCounterState, total: Any = level_sum) -> Any:
    """The exact running sums: the sum of the open blocks, the prefix as its dyadic blocks
    (Algorithm 2 of Zhu et al. 2021), plus the initialization leaf. Needs exact blocks."""
    if not p.exact_blocks:
        why = "True to read the exact sums (this counter keeps the blocks' noise only: add "
        raise PrivacyError("exact_blocks", why + "noise_at() or noise() to yours)", False)
    return total(p, s, s.exact) + s.init_exact


def tree_noise(p: TreeParams, s: TreeCounterState, total: Any = level_sum) -> Any:
    """The noise of a release: the cached noise of the blocks of the current decomposition
    (Algorithm 3, reused in every later release), plus the initialization leaf's."""
    return total(p, s, s.noise) + s.init_noise


def tree_release(p: TreeParams, s: TreeCounterState, total: Any = level_sum) -> Any:
    """The private running sums; the same until the next insertion (the noise is cached)."""
    return tree_exact(p, s, total) + tree_noise(p, s, total)


def tree_noise_at(p: TreeParams, s: TreeCounterState, arms: Any) -> Any:
    """:func:`tree_noise` at one index of the last axis of ``shape`` per leading position
    (``arms`` (...)), reading only those counters."""
    xp = namespace(s.noise, arms)
    rows = (xp.arange(arms.size).reshape(arms.shape) * s.init_noise.shape[-1] + arms).reshape(-1)
    blocks = s.noise.reshape(-1, s.noise.shape[-1])[rows].sum(axis=-1)
    return (blocks + s.init_noise.reshape(-1)[rows]).reshape(arms.shape)


def tree_noise_terms(p: TreeParams, s: TreeCounterState) -> Any:
    """The number of Laplace terms in each current release."""
    return s.noised.sum(axis=-1) + s.init_noised


def one_hot(arms: Any, rewards: Any, num: int) -> tuple[Any, Any]:
    """``(values, pulled)`` (..., num) of one pulled index per leading position: ``arms`` and
    ``rewards`` (...)."""
    pulled = arms[..., None] == namespace(arms, rewards).arange(num)
    return namespace(arms, rewards).where(pulled, rewards[..., None], 0.0), pulled


def close_blocks(s: TreeCounterState, clock: Any, active: Any, values: Any, noise: Any,
                 noised: Any) -> TreeCounterState:  # fmt: skip
    """The per-level layout (numpy): each ``active`` counter (True: all) whose clock reaches
    ``clock`` (the round t, or each counter's pull count) closes the block at level ctz(clock)
    (Algorithm 3, "a_t <- sum of the blocks below + x_t"; Algorithm 2's merge): the block takes
    ``values`` plus the exact sums of the levels below, which it absorbs (they are emptied), its
    ``noise`` and ``noised`` flag; the levels above are kept. Updates in place, only up to the
    highest level closing; a scalar ``clock`` (round mode) sums the levels below it in order."""
    level = trailing_zeros(np.where(active, clock, 1))
    size = s.noise.shape[-1]
    top = int(np.max(level, initial=0)) + 1
    at, live = np.asarray(level)[..., None], np.asarray(active)[..., None]
    below, here = (np.arange(top) < at) & live, (np.arange(top) == at) & live

    def put(blocks: Any, new: Any, empty: Any) -> Any:
        for j in range(top):
            blocks[..., j] = np.where(
                below[..., j], empty, np.where(here[..., j], new, blocks[..., j])
            )
        return blocks

    exact = s.exact
    if exact is not None:
        cut = int(level) if np.ndim(level) == 0 else None
        merged = values + np.where(np.arange(size) < at, exact, 0.0)[..., :cut].sum(axis=-1)
        exact = put(exact, merged, 0.0)
    noise, noised = put(s.noise, noise, 0.0), put(s.noised, noised, False)
    return s._replace(exact=exact, noise=noise, noised=noised)


def tree_insert(p: TreeParams, s: TreeCounterState, values: Any, pulled: Any, noise: Any,
                gate: Any = None, close: Any = close_blocks) -> TreeCounterState:  # fmt: skip
    """Insert round ``t = s.t + 1``: ``values`` the increments (clipped to ``bounds`` if set),
    ``pulled`` which counters received an observation, ``noise`` the scaled Laplace noise a
    block closing now may use. Pull mode: each pulled counter closes the block at ctz(its pull
    count). Round mode: every counter closes block ``(t - 2^level, t]`` at level ctz(t), noised
    if it holds a pull (or with ``noise_on_empty_blocks``); round 0 is the initialization leaf.
    ``close(s, clock, active, values, noise, noised)`` closes the blocks in the state's layout
    (:func:`close_blocks`, numpy's; the JAX counter passes its own). ``gate(pred, work,
    state)``: how a traced round takes the initialization leaf, work done in few steps (the JAX
    counter passes :func:`fedbandit_env.jax.batch.when_any`; None: ``work`` every step, kept
    where ``t == 0``)."""
    xp = namespace(values, pulled, s.noise)
    values = xp.where(pulled, values if p.bounds is None else xp.clip(values, *p.bounds), 0.0)
    t, counts = s.t + 1, s.counts + pulled
    traced = is_jax(t)
    if p.tree_index == "pull":  # only pulled counters advance their own clock
        closed = close(s, counts, pulled, values, xp.where(pulled, noise, 0.0), pulled)
        return closed._replace(t=t, counts=counts)
    if p.init_round and not traced and t == 0:  # round 0: the initialization leaf, own draw
        return _init_leaf(p, s, values, pulled, noise)._replace(t=t, counts=counts)
    last_pull = xp.where(pulled, t, s.last_pull)
    level = trailing_zeros(xp.maximum(t, 1))
    noised = (last_pull > t - (1 << level)) | p.noise_on_empty_blocks
    closed = close(s, t, True, values, xp.where(noised, noise, 0.0), noised)
    closed = closed._replace(t=t, counts=counts, last_pull=last_pull)
    if not (p.init_round and traced):
        return closed
    # a traced round: the leaf where t == 0, only in a step where some run takes it (round 0
    # closed level 0 above, which round 1 overwrites before any read)
    def leaf(c: TreeCounterState) -> TreeCounterState:
        first = _init_leaf(p, c, values, pulled, noise)
        return c._replace(**{k: xp.where(t == 0, getattr(first, k), getattr(c, k))
                             for k in ("init_exact", "init_noise", "init_noised")
                             if getattr(c, k) is not None})  # fmt: skip

    return leaf(closed) if gate is None else gate(t == 0, leaf, closed)


def _init_leaf(p: TreeParams, s: TreeCounterState, values: Any, pulled: Any,
               noise: Any) -> TreeCounterState:  # fmt: skip
    """The initialization leaf of round 0 (round mode, ``init_round``): the values and their
    own draw, noised where pulled (or with ``noise_on_empty_blocks``)."""
    xp = namespace(values, pulled, noise)
    first = pulled | p.noise_on_empty_blocks
    init = None if s.init_exact is None else values
    return s._replace(init_exact=init, init_noise=xp.where(first, noise, 0.0),
                      init_noised=first)  # fmt: skip


class TreeCounter:
    """Continual Laplace counters over (B, *shape) (docs/privacy.md, "Binary-tree counter"):
    ``options`` are :func:`tree_params`'s, whose fields and constants read as attributes; the
    arrays are ``state``. ``insert(t, values, pulled)`` adds round t (0 if ``init_round``)."""

    def __init__(self, shape: tuple[int, ...], horizon: int, epsilon: float, *,
                 rng: BatchedRNG | None = None, num_runs: int | None = None,
                 noise_per: Literal["counter", "row"] = "counter", **options: Any):  # fmt: skip
        self.params = p = tree_params(shape, horizon, epsilon, **options)
        if not isinstance(noise_per, str) or noise_per not in ("counter", "row"):
            raise PrivacyError("noise_per", "'counter' or 'row'", repr(noise_per))
        self.noise_per = noise_per
        self.num_runs = check.resolve_runs(rng, num_runs, p.noisy)
        check_memory("shape/num_runs", 16.0 * self.num_runs * math.prod(p.shape) *
                     (p.storage_levels + 3), "2 float64 arrays (B, *shape, levels)")  # fmt: skip
        self._stream = LaplaceStream(rng, p.shape) if p.noisy and rng is not None else None
        self._row_stream = None  # noise_per="row": one draw per row in leaf rounds
        if self._stream is not None and noise_per == "row":
            self._row_stream = LaplaceStream(rng.child("row"), p.shape[:-1])
        self.state = empty_tree(p, (self.num_runs,))

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or name in ("params", "state"):
            raise AttributeError(name)
        return getattr(self.params, name)

    @property
    def counts(self) -> np.ndarray:
        """Observations inserted per counter (B, *shape)."""
        return self.state.counts.copy()

    @property
    def block_noise(self) -> np.ndarray:
        """The open blocks' cached Laplace noise (B, *shape, storage_levels)."""
        return self.state.noise.copy()

    @property
    def block_noised(self) -> np.ndarray:
        """Which open blocks carry noise (B, *shape, storage_levels)."""
        return self.state.noised.copy()

    def exact(self) -> np.ndarray:
        """The exact running sums (B, *shape): the noiseless part of :meth:`release`."""
        return tree_exact(self.params, self.state)

    def noise(self) -> np.ndarray:
        """The noise part of :meth:`release` (B, *shape)."""
        return tree_noise(self.params, self.state)

    def release(self) -> np.ndarray:
        """The private running sums (B, *shape); the same until the next insertion."""
        return tree_release(self.params, self.state)

    def noise_at(self, arms: np.ndarray) -> np.ndarray:
        """:meth:`noise` at one index of the last axis per leading position: ``arms`` (B,
        *shape[:-1]) ints. With ``exact_blocks=False`` a release is the caller's exact sum plus
        this."""
        return tree_noise_at(self.params, self.state, self._check_arms(arms))

    def num_noise_terms(self) -> np.ndarray:
        """Number of Laplace terms in each current release (B, *shape)."""
        return tree_noise_terms(self.params, self.state)

    def _check_arms(self, arms: np.ndarray) -> np.ndarray:
        arms, lead = np.asarray(arms), (self.num_runs, *self.shape[:-1])
        if arms.shape != lead or not np.issubdtype(arms.dtype, np.integer):
            raise PrivacyError(
                "arms", f"an int array of shape {lead}", f"{arms.dtype} {arms.shape}"
            )
        if np.any((arms < 0) | (arms >= self.shape[-1])):
            raise PrivacyError("arms", f"indices in [0, {self.shape[-1]})", "an out-of-range arm")
        return arms

    def insert(self, t: int, values: np.ndarray, pulled: np.ndarray | None = None) -> None:
        """Insert round ``t`` (must be the next round) for every run and counter
        (:func:`tree_insert`)."""
        expected = self.state.t + 1
        if isinstance(t, bool) or not isinstance(t, int | np.integer) or t != expected:
            raise PrivacyError("t", f"the next round {expected}", t)
        if t > self.horizon and self.tree_index == "round":  # "pull": the counts are capped
            raise PrivacyError("t", f"a round <= horizon {self.horizon}", t)
        full = (self.num_runs, *self.shape)
        values, pulled = check.check_values(values, full), check.check_mask(pulled, full, "pulled")
        state = tree_insert(self.params, self.state, values, pulled, self._draw(t, pulled))
        if self.tree_index == "pull" and np.any(state.counts > self.capacity):
            count = int(state.counts.max())
            raise PrivacyError("pulled", f"at most {self.capacity} pulls per counter", count)
        self.state = state

    def insert_arms(self, t: int, arms: np.ndarray, rewards: np.ndarray) -> None:
        """Insert round ``t`` given the pulled index on the last axis: ``arms`` and ``rewards``
        of shape (B, *shape[:-1]) (e.g. one arm and one reward per run and agent)."""
        arms, rewards = self._check_arms(arms), np.asarray(rewards, dtype=np.float64)
        if rewards.shape != arms.shape:
            raise PrivacyError(
                "rewards", f"an array of shape {arms.shape}", f"shape {rewards.shape}"
            )
        self.insert(t, *one_hot(arms, rewards, self.shape[-1]))

    def _draw(self, t: int, pulled: np.ndarray) -> np.ndarray:
        """The Laplace noise of round ``t`` (B, *shape), or (B, *shape[:-1], 1) in a leaf round
        with ``noise_per="row"`` (docs/privacy.md, "Binary-tree counter")."""
        if self._stream is None:
            return np.zeros((self.num_runs, *self.shape))
        leaf = self.tree_index == "round" and t % 2 == 1 and not self.noise_on_empty_blocks
        if self._row_stream is None or not leaf:
            return self.scale * self._stream.next()
        if pulled.shape[-1] > 1 and np.any(np.count_nonzero(pulled, axis=-1) > 1):
            raise PrivacyError("pulled", "at most one pulled counter per row in a leaf round "
                               "(noise_per='row')", "two")  # fmt: skip
        return self.scale * self._row_stream.next()[..., None]
