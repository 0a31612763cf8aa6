"""Binary-tree continual counter (Laplace), batched over runs and counters.

Implements the partial sums of Fed_UCB (Zhu, Zhu, Liu & Liu 2021, Section 4.1, Algorithms 2–3)
for B runs and any counter shape, typically (N agents, M arms): the private running sum of each
counter's stream is the sum of its dyadic blocks (:mod:`~fedbandit_env.privacy.dyadic`), each
block carrying one Laplace draw made once, when the block closes, and reused in every later
decomposition.

Decisions where the paper leaves room (docs/privacy.md, "Decisions"):

* Levels — ``levels=None`` (default) splits epsilon over ``floor(log2 T) + 1`` levels, which is
  exactly the number of distinct blocks one round can enter, so every observation spends at most
  epsilon. ``levels="paper"`` uses the paper's ``ceil(log2 T)``, which overspends by the factor
  ``(log2 T + 1)/log2 T`` when T is a power of two (see :attr:`TreeCounter.effective_epsilon`).
* Empty blocks — noise only on blocks that hold at least one pull (as the text of Section 4.1
  says; default); ``noise_on_empty_blocks=True`` gives Algorithm 3 as printed (noise on
  every block).
* Initialization round — ``init_round=True`` accepts an insertion at round 0 (the initialization
  pull of Algorithm 4, line 1). With ``tree_index="round"`` it is one extra leaf outside the tree
  with its own ``Lap(1/epsilon')`` draw (what the Fed_UCB agent's ``noisy_init=True`` uses);
  with ``tree_index="pull"`` it is simply pull number 1. An agent that reproduces the paper's
  un-noised init keeps that sample out of the counter.
* Tree index — ``tree_index="round"`` (paper: the tree is indexed by the global round, every
  counter closes a block every round) or ``"pull"`` (indexed by the counter's own pull count; a
  counter closes a block only when it is pulled). Both use the same epsilon accounting.
* Clipping — no clipping by default (sensitivity 1, as the paper ran it); ``bounds=(lo, hi)`` clips
  inserted values and sets the sensitivity to ``hi - lo``.

Seeding: one fixed-shape standard Laplace draw per counter per round (``E1 - E2`` of buffered
exponentials, :class:`~fedbandit_env.privacy._random.LaplaceStream`). Round t closes at most one
block per counter, so this one draw covers every block that can close; it is used only where a
noised block closes. With ``noise_per="row"`` (a row is a vector of counters along the last axis,
e.g. one agent's arms, of which one is pulled per round), a *leaf round* (round index, odd t,
noise on non-empty blocks only) draws one Laplace per row instead, from the counter's own ``row``
sub-stream: that round closes only the level-0 blocks of the counters pulled in it, so the per-arm
draws of the other counters would go unused. Every other round draws one per counter. The number
of draws per round never depends on the data or on B, so run b of a batch is bit-identical to the
same run alone. ``epsilon = inf`` draws nothing and is exact.

Noise only (``exact_blocks=False``): a caller that keeps the exact running sums itself (an agent's
own reward sums) can leave the exact part of the blocks out: the counter then keeps only the
noise of the blocks (the same draws, the same noise in every release) and :meth:`noise_flat`
reads a release's noise, which the caller adds to its exact sums. Reading the exact part
(:meth:`exact`, :meth:`release`, :meth:`release_flat`, ``block_exact``) is then refused.
"""

from __future__ import annotations

import math
from typing import Literal

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
from fedbandit_env.privacy.calibration import (
    check_epsilon,
    check_noise_scale,
    check_sensitivity,
)
from fedbandit_env.privacy.dyadic import floor_levels, paper_levels, trailing_zeros
from fedbandit_env.privacy.errors import PrivacyError
from fedbandit_env.seeding import BatchedRNG
from fedbandit_env.validation import check_memory, is_integral

TreeIndex = Literal["round", "pull"]


class TreeCounter:
    """Continual Laplace counters over (B, *shape), indexed by round or by pull count.

    ``insert(t, values, pulled)`` adds round t (1..horizon; 0 if ``init_round``) for every run
    and counter: ``values`` (B, *shape) are the increments, ``pulled`` (B, *shape) marks the
    counters that received an observation (default: all). ``release()`` is the private running
    sum of each counter. Each observation enters at most :attr:`storage_levels` blocks, each
    released with ``Lap(sensitivity / epsilon_per_block)``, ``epsilon_per_block = epsilon /
    budget_levels``; :attr:`effective_epsilon` is the resulting per-observation guarantee
    (= epsilon with the default levels).
    """

    def __init__(
        self,
        shape: tuple[int, ...],
        horizon: int,
        epsilon: float,
        *,
        rng: BatchedRNG | None = None,
        num_runs: int | None = None,
        sensitivity: float = 1.0,
        bounds: tuple[float, float] | None = None,
        tree_index: TreeIndex = "round",
        noise_on_empty_blocks: bool = False,
        levels: int | Literal["paper"] | None = None,
        init_round: bool = False,
        noise_per: Literal["counter", "row"] = "counter",
        exact_blocks: bool = True,
    ):
        self.shape = check_shape(shape)
        if not isinstance(noise_per, str) or noise_per not in ("counter", "row"):
            raise PrivacyError("noise_per", "'counter' or 'row'", repr(noise_per))
        self.noise_per = noise_per
        if not isinstance(exact_blocks, bool | np.bool_):
            raise PrivacyError("exact_blocks", "True or False", repr(exact_blocks))
        self.exact_blocks = bool(exact_blocks)
        self.horizon = check_horizon(horizon)
        self.epsilon = check_epsilon(epsilon)
        self.bounds = check_bounds(bounds)
        self.sensitivity = (
            self.bounds[1] - self.bounds[0] if self.bounds else check_sensitivity(sensitivity)
        )
        if not isinstance(tree_index, str) or tree_index not in ("round", "pull"):
            raise PrivacyError("tree_index", "'round' or 'pull'", tree_index)
        self.tree_index: TreeIndex = tree_index
        self.noise_on_empty_blocks = bool(noise_on_empty_blocks)
        self.init_round = bool(init_round)
        # the largest tree index: the round (<= T) or the pull count (<= T, +1 with the init pull)
        self.capacity = self.horizon + (1 if tree_index == "pull" and self.init_round else 0)
        self.storage_levels = floor_levels(self.capacity)
        if levels is None:
            self.budget_levels = self.storage_levels
        elif isinstance(levels, str) and levels == "paper":
            self.budget_levels = paper_levels(self.horizon)
        elif is_integral(levels) and levels >= 1:
            self.budget_levels = int(levels)
        else:
            raise PrivacyError("levels", "None, 'paper' or an int >= 1", levels)
        noisy = not math.isinf(self.epsilon)
        if noisy:
            try:
                scale = self.scale
            except ZeroDivisionError:
                scale = math.inf
            check_noise_scale(scale, self.epsilon, what="Laplace scale per block")
        self.num_runs = resolve_runs(rng, num_runs, noisy)
        check_memory(
            "shape/num_runs",
            8.0 * 2 * self.num_runs * math.prod(self.shape) * (self.storage_levels + 3),
            "2 float64 arrays (B, *shape, levels)",
        )
        self._stream = LaplaceStream(rng, self.shape) if noisy and rng is not None else None
        self._row_stream = None  # noise_per="row": one draw per row in leaf rounds
        if self._stream is not None and noise_per == "row":
            assert rng is not None
            self._row_stream = LaplaceStream(rng.child("row"), self.shape[:-1])

        full = (self.num_runs, *self.shape)
        # the open blocks of every counter, one per level on the last axis: the blocks of the
        # current decomposition are the levels of the set bits of the tree index (others are 0)
        levels = self.storage_levels
        self._exact = np.zeros((*full, levels)) if self.exact_blocks else None
        self._noise = np.zeros((*full, levels))
        self._noised = np.zeros((*full, levels), dtype=bool)
        self._init_exact = np.zeros(full)
        self._init_noise = np.zeros(full)
        self._init_noised = np.zeros(full, dtype=bool)
        self._counts = np.zeros(full, dtype=np.int64)
        self._last_pull = np.zeros(full, dtype=np.int64)  # round of the latest pull (0: none)
        self._t = -1 if self.init_round else 0

    # -- budget ---------------------------------------------------------------------------
    @property
    def epsilon_per_block(self) -> float:
        """epsilon' = epsilon / budget_levels, the budget of one block release."""
        return self.epsilon / self.budget_levels

    @property
    def scale(self) -> float:
        """Laplace scale of one block: sensitivity / epsilon' (0 when epsilon is inf)."""
        return 0.0 if math.isinf(self.epsilon) else self.sensitivity / self.epsilon_per_block

    @property
    def effective_epsilon(self) -> float:
        """Per-observation guarantee by basic composition: (most blocks one observation enters)
        x epsilon'. Equals epsilon unless ``levels`` undercounts the tree depth."""
        return self.storage_levels * self.epsilon_per_block

    # -- state ----------------------------------------------------------------------------
    @property
    def t(self) -> int:
        """The last inserted round (-1 before the init round, 0 before round 1)."""
        return self._t

    @property
    def counts(self) -> np.ndarray:
        """Observations inserted per counter (B, *shape)."""
        return self._counts.copy()

    @property
    def block_exact(self) -> np.ndarray:
        """Exact sums of the open blocks, one per level (B, *shape, storage_levels); the blocks
        of the current decomposition are the levels of the set bits of the tree index."""
        self._require_exact("block_exact")
        return self._exact.copy()

    @property
    def block_noise(self) -> np.ndarray:
        """Cached Laplace noise of the open blocks (B, *shape, storage_levels)."""
        return self._noise.copy()

    @property
    def block_noised(self) -> np.ndarray:
        """Which open blocks carry noise (B, *shape, storage_levels)."""
        return self._noised.copy()

    def exact(self) -> np.ndarray:
        """The exact running sums (B, *shape): the noiseless part of :meth:`release`, the sum of
        the open blocks (Algorithm 2 of Zhu et al. 2021: the prefix as its dyadic blocks)."""
        self._require_exact("exact")
        return self._exact.sum(axis=-1) + self._init_exact

    def noise(self) -> np.ndarray:
        """The noise part of :meth:`release` (B, *shape)."""
        return self._noise.sum(axis=-1) + self._init_noise

    def release(self) -> np.ndarray:
        """The private running sums (B, *shape). Releasing again without an insertion returns
        the same values (the block noise is cached)."""
        return self.exact() + self.noise()

    def release_at(self, arms: np.ndarray) -> np.ndarray:
        """:meth:`release` read at one index of the last axis per leading position: ``arms``
        (B, *shape[:-1]) ints, result (B, *shape[:-1])."""
        self._require_exact("release_at")
        rows = self._rows_at(arms)
        exact = self._exact.reshape(-1, self.storage_levels)[rows].sum(axis=-1)
        return (exact + self._init_exact.reshape(-1)[rows]).reshape(arms.shape) + self.noise_at(
            arms
        )

    def noise_at(self, arms: np.ndarray) -> np.ndarray:
        """:meth:`noise` read at one index of the last axis per leading position (as
        :meth:`release_at`). With ``exact_blocks=False`` a release is the caller's exact sum
        plus this."""
        rows = self._rows_at(arms)
        noise = self._noise.reshape(-1, self.storage_levels)[rows].sum(axis=-1)
        return (noise + self._init_noise.reshape(-1)[rows]).reshape(arms.shape)

    def _rows_at(self, arms: np.ndarray) -> np.ndarray:
        """The flat counter of each leading position's index ``arms`` (checked)."""
        arms = self._check_arms(arms)
        lead = np.arange(arms.size, dtype=np.int64).reshape(arms.shape)
        return (lead * self.shape[-1] + arms).reshape(-1)

    def _check_arms(self, arms: np.ndarray) -> np.ndarray:
        arms = np.asarray(arms)
        lead = (self.num_runs, *self.shape[:-1])
        if arms.shape != lead or not np.issubdtype(arms.dtype, np.integer):
            raise PrivacyError(
                "arms", f"an int array of shape {lead}", f"{arms.dtype} {arms.shape}"
            )
        if np.any((arms < 0) | (arms >= self.shape[-1])):
            raise PrivacyError("arms", f"indices in [0, {self.shape[-1]})", "an out-of-range arm")
        return arms

    def _require_exact(self, what: str) -> None:
        if not self.exact_blocks:
            raise PrivacyError(
                "exact_blocks",
                f"True to read {what} (this counter keeps the blocks' noise only: add "
                "noise_at() or noise() to the exact sums you keep)",
                False,
            )

    def num_noise_terms(self) -> np.ndarray:
        """Number of Laplace terms in each current release (B, *shape)."""
        return self._noised.sum(axis=-1) + self._init_noised

    # -- insertion ------------------------------------------------------------------------
    def _prepare(self, values: np.ndarray, pulled: np.ndarray | None) -> tuple[np.ndarray, ...]:
        full = (self.num_runs, *self.shape)
        values = check_values(values, full)
        pulled = check_mask(pulled, full, "pulled")
        if self.bounds is not None:
            values = np.clip(values, *self.bounds)
        return np.where(pulled, values, 0.0), pulled

    def _draw(self, pulled: np.ndarray) -> np.ndarray:
        """The Laplace noise of the next round (B, *shape), or (B, *shape[:-1], 1) of a leaf
        round with ``noise_per="row"`` (one draw per row, for the row's pulled counter)."""
        if self._stream is None:
            return np.zeros((self.num_runs, *self.shape))
        if self._row_stream is not None and self._leaf_round(self._t + 1):
            _check_one_per_row(pulled)
            return self.scale * self._row_stream.next()[..., None]
        return self.scale * self._stream.next()

    def _check_round(self, t: int) -> None:
        expected = self._t + 1
        if isinstance(t, bool) or not isinstance(t, int | np.integer) or t != expected:
            raise PrivacyError("t", f"the next round {expected}", t)
        if t > self.horizon and self.tree_index == "round":  # "pull": the counts are capped
            raise PrivacyError("t", f"a round <= horizon {self.horizon}", t)

    def insert(self, t: int, values: np.ndarray, pulled: np.ndarray | None = None) -> None:
        """Insert round ``t`` (must be the next round) for every run and counter."""
        self._check_round(t)
        values, pulled = self._prepare(values, pulled)
        noise = self._draw(pulled)
        self._t = int(t)
        if self.tree_index == "round":
            if t == 0:
                noised = pulled | self.noise_on_empty_blocks
                self._init_exact = values
                self._init_noise = np.where(noised, noise, 0.0)
                self._init_noised = noised
                self._counts += pulled
                return
            self._last_pull = np.where(pulled, self._t, self._last_pull)
            self._counts += pulled
            level = (self._t & -self._t).bit_length() - 1  # trailing zeros of t
            block_start = self._t - (1 << level)
            noised = (self._last_pull > block_start) | self.noise_on_empty_blocks
            self._close_level_scalar(level, values, np.where(noised, noise, 0.0), noised)
            return
        # tree_index == "pull": only pulled counters advance their own clock
        self._counts += pulled
        if np.any(self._counts > self.capacity):
            raise PrivacyError(
                "pulled", f"at most {self.capacity} pulls per counter", int(self._counts.max())
            )
        clock = np.where(pulled, self._counts, 1)
        level = trailing_zeros(clock)
        self._close_level_array(level, pulled, values, np.where(pulled, noise, 0.0))

    def insert_arms(self, t: int, arms: np.ndarray, rewards: np.ndarray) -> None:
        """Insert round ``t`` given the pulled index on the last axis: ``arms`` and ``rewards``
        of shape (B, *shape[:-1]) (e.g. one arm and one reward per run and agent)."""
        arms = self._check_arms(arms)
        rewards = np.asarray(rewards, dtype=np.float64)
        if rewards.shape != arms.shape:
            raise PrivacyError(
                "rewards", f"an array of shape {arms.shape}", f"shape {rewards.shape}"
            )
        pulled = arms[..., None] == np.arange(self.shape[-1])
        self.insert(t, np.where(pulled, rewards[..., None], 0.0), pulled)

    def _leaf_round(self, t: int) -> bool:
        """Round mode, odd ``t``, noise on non-empty blocks only: the round closes the level-0
        block ``(t-1, t]``, which holds only this round's pulls, so only the pulled counters'
        noise is used (``noise_per="row"`` draws one per row for it)."""
        return self.tree_index == "round" and t % 2 == 1 and not self.noise_on_empty_blocks

    def _close_level_scalar(
        self, level: int, values: np.ndarray, noise: np.ndarray, noised: np.ndarray
    ) -> None:
        """Round mode (Algorithm 3, line "a_t <- sum of the blocks below + x_t"): every counter
        closes block ``(t - 2^level, t]`` at ``level``, merging the levels below it."""
        if self.exact_blocks:
            self._exact[..., level] = values + self._exact[..., :level].sum(axis=-1)
            self._exact[..., :level] = 0.0
        self._noise[..., level] = noise
        self._noise[..., :level] = 0.0
        self._noised[..., level] = noised
        self._noised[..., :level] = False

    def _close_level_array(
        self, level: np.ndarray, active: np.ndarray, values: np.ndarray, noise: np.ndarray
    ) -> None:
        """Pull mode: each active counter closes a block at its own ``level``."""
        levels = np.arange(self.storage_levels)
        keep = (levels > level[..., None]) | ~active[..., None]  # above the new block, or idle
        here = levels == level[..., None]
        if self.exact_blocks:
            below = np.where(levels < level[..., None], self._exact, 0.0).sum(axis=-1)
            merged = (values + below)[..., None]
            self._exact = np.where(keep, self._exact, np.where(here, merged, 0.0))
        self._noise = np.where(keep, self._noise, np.where(here, noise[..., None], 0.0))
        self._noised = np.where(keep, self._noised, here)


def _check_one_per_row(pulled: np.ndarray) -> None:
    """``noise_per="row"``: a leaf round's draw serves one pulled counter per row; two pulled
    counters in one row would share it (correlated noise, not the mechanism), so it is refused."""
    if pulled.shape[-1] > 1 and np.any(np.count_nonzero(pulled, axis=-1) > 1):
        raise PrivacyError(
            "pulled", "at most one pulled counter per row in a leaf round (noise_per='row')", "two"
        )
