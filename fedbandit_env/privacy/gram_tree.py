"""Tree-based Gaussian mechanism over sync releases of augmented Gram matrices: the PRIVATIZER
(Algorithm 2) of Dubey & Pentland, "Differentially-Private Federated Linear Bandits" (NeurIPS
2020), one binary-tree aggregator per agent (docs/privacy.md, "Tree-based Gaussian mechanism" and
"Decisions"). Its constants (Section 4.3, Proposition 4) are the learners' parameters,
:func:`fedbandit_env.linear_kernels.linear_privacy_constants`.
"""

from __future__ import annotations

import math
import warnings
from typing import Any, NamedTuple

import numpy as np

from fedbandit_env.privacy._random import masked_stream
from fedbandit_env.privacy._validation import check_mask, check_shape, check_values, resolve_runs
from fedbandit_env.privacy.calibration import check_index, check_positive
from fedbandit_env.privacy.dyadic import (
    lowest_bit_cleared,
    popcount,
    put_level,
    take_level,
    trailing_zeros,
)
from fedbandit_env.privacy.errors import PrivacyBudgetWarning, PrivacyError
from fedbandit_env.privacy.mechanisms import symmetric_from_upper, upper_triangle_size
from fedbandit_env.seeding import BatchedRNG
from fedbandit_env.xp import is_jax, namespace


class GramRelease(NamedTuple):
    """One release of the trees (:meth:`GramTreePrivatizer.release`, the JAX
    :meth:`~fedbandit_env.jax.gram_tree.GramTree.release`): ``U_hat`` (..., d, d) = noisy Gram
    block + ``shift * I``; ``u_hat`` (..., d) = noisy ``sum y x``; ``released`` (...) marks the
    trees that released now (elsewhere the previous release is repeated, zeros before the
    first); ``index`` (...) is each tree's release count."""

    U_hat: Any
    u_hat: Any
    released: Any
    index: Any


class GramTrees(NamedTuple):
    """The state of a batch of trees (both engines): ``exact`` and ``noise`` the closed nodes
    (their exact leaf sums and their noise matrices), ``k`` (...) the releases so far, ``U``
    (..., d, d) and ``u`` (..., d) the last release. numpy's per-level layout (..., m, d+1,
    d+1): the node per level, zeros where the level is empty. JAX's prefix layout (m, ..., d+1,
    d+1): level j, for a set bit j of k, the sum of the closed nodes at levels >= j (``exact``:
    of every leaf up to the release that closed level j); the other levels stale."""

    exact: Any
    noise: Any
    k: Any
    U: Any
    u: Any


def empty_trees(xp: Any, shape: tuple[int, ...], d: int, levels: int) -> GramTrees:
    """Trees without a release, in the engine's default float and int dtypes: the per-level
    layout in numpy, the prefix layout in ``jax.numpy`` (:class:`GramTrees`)."""
    side, zeros = d + 1, xp.zeros
    nodes = (levels, *shape, side, side) if xp is not np else (*shape, levels, side, side)
    k = xp.zeros(shape, dtype=xp.asarray(0).dtype)  # int64 in numpy, int32 in JAX
    return GramTrees(zeros(nodes), zeros(nodes), k, zeros((*shape, d, d)), zeros((*shape, d)))


def insert_leaf(trees: GramTrees, Q: Any, node: Any, active: Any, shift: float) -> GramTrees:
    """Algorithm 2 (PRIVATIZER) where ``active`` holds: release k inserts leaf ``Q`` (..., d+1,
    d+1) and closes the node at level ctz(k), which merges Q with the closed nodes below it
    (they empty) and takes the fresh noise matrix ``node``; the released prefix sum over leaves
    1..k is the sum of the closed nodes (popcount(k) of them), plus ``shift I`` on the d x d
    block. Elsewhere the trees and their last release stay. Both engines call it: numpy
    rewrites its per-level layout, JAX writes the closing level of its prefix layout only
    (:func:`prefix_leaf`)."""
    xp = namespace(Q, trees.k)
    d = Q.shape[-1] - 1
    k = trees.k + active
    if is_jax(trees.exact):
        exact, noise, P = prefix_leaf(trees, k, Q, node, active)
    else:
        t = xp.where(active, k, 1)
        level = xp.bitwise_count((t & -t) - 1)[..., None]  # ctz(k)
        levels = xp.arange(trees.exact.shape[-3])
        lower = ((levels < level) & active[..., None])[..., None, None]
        here = ((levels == level) & active[..., None])[..., None, None]
        merged = Q + xp.where(lower, trees.exact, 0.0).sum(axis=-3)
        exact = xp.where(lower, 0.0, xp.where(here, merged[..., None, :, :], trees.exact))
        noise = xp.where(lower, 0.0, xp.where(here, node[..., None, :, :], trees.noise))
        P = exact.sum(axis=-3) + noise.sum(axis=-3)
    U = P[..., :d, :d] + shift * xp.eye(d, dtype=P.dtype)
    U = xp.where(active[..., None, None], U, trees.U)
    u = xp.where(active[..., None], P[..., :d, d], trees.u)
    return GramTrees(exact, noise, k, U, u)


def prefix_leaf(trees: GramTrees, k: Any, Q: Any, node: Any, active: Any) -> tuple[Any, Any, Any]:
    """Release ``k`` (>= 1 where ``active``) in the prefix layout (JAX): the node closing at
    level ctz(k) holds the leaves since the nodes above it, so the exact prefix there is the
    previous release's (release k - 1's, level ctz(k - 1)) plus ``Q``, and the noise prefix is
    the nodes above's (``k & (k - 1)``'s) plus the fresh ``node``. Reads those two levels and
    writes the closing level of each active tree only. Returns ``(exact, noise, P)``, P the
    released prefix sum (exact + noise; junk where not active)."""
    xp = namespace(Q, k)

    def at(blocks: Any, clock: Any) -> Any:  # the prefix of clock's nodes, 0 without any
        got = take_level(blocks, trailing_zeros(xp.maximum(clock, 1)))
        return xp.where((clock > 0)[..., None, None], got, 0.0)

    level = trailing_zeros(xp.maximum(k, 1))
    exact = at(trees.exact, k - 1) + Q
    noise = at(trees.noise, lowest_bit_cleared(k)) + node
    return (put_level(trees.exact, level, exact, active),
            put_level(trees.noise, level, noise, active), exact + noise)  # fmt: skip


def check_trees(shape: tuple[int, ...], d: int, sigma: float, shift: float, levels: int) -> tuple:
    """The validated (shape, d, sigma, shift, levels) of a batch of trees (both engines)."""
    shape, d = check_shape(shape), check_index(d, "d")
    sigma = check_positive(sigma, "sigma", allow_zero=True)
    shift = check_positive(shift, "shift", allow_zero=True)
    return shape, d, sigma, shift, check_index(levels, "levels")


class GramTreePrivatizer:
    """Binary-tree Gaussian aggregators over (B, *shape) trees of (d+1) x (d+1) leaves
    (Dubey & Pentland, Algorithm 2; docs/privacy.md): ``shape`` is e.g. (M,) agents or (M, gamma)
    agents and slots; node noise is drawn per run only when that run releases
    (:class:`~fedbandit_env.privacy._random.MaskedStream`); ``sigma = 0`` switches it off."""

    def __init__(
        self,
        shape: tuple[int, ...],
        d: int,
        *,
        sigma: float,
        shift: float,
        levels: int,
        rng: BatchedRNG | None = None,
        num_runs: int | None = None,
    ):
        self.shape, self.d, self.sigma, self.shift, self.levels = check_trees(
            shape, d, sigma, shift, levels
        )
        self.capacity = 1 << (self.levels - 1)
        if self.sigma > 0 and not isinstance(rng, BatchedRNG):
            raise PrivacyError("rng", "a BatchedRNG when sigma > 0", rng)
        self.num_runs = resolve_runs(rng, num_runs, noisy=False)
        side = self.d + 1
        self._stream = (
            masked_stream(rng, (*self.shape, upper_triangle_size(side)))
            if self.sigma > 0 and rng is not None
            else None
        )
        self.trees = empty_trees(np, (self.num_runs, *self.shape), self.d, self.levels)

    @classmethod
    def from_constants(
        cls,
        constants: Any,
        shape: tuple[int, ...],
        *,
        rng: BatchedRNG | None = None,
        num_runs: int | None = None,
    ) -> GramTreePrivatizer:
        """The paper's privatizer of :class:`~fedbandit_env.linear_kernels.GramTreeConstants`:
        ``sigma = sigma_N``, ``shift = 2 Lambda``, m levels."""
        c = constants
        return cls(shape, c.d, sigma=c.sigma_N, shift=c.shift, levels=c.m, rng=rng,
                   num_runs=num_runs)  # fmt: skip

    @property
    def release_count(self) -> np.ndarray:
        """Releases made by each tree (B, *shape)."""
        return self.trees.k.copy()

    @property
    def exhausted(self) -> np.ndarray:
        """Trees that reached their capacity 2^(levels-1) (B, *shape)."""
        return self.trees.k >= self.capacity

    def exact(self) -> np.ndarray:
        """Exact part of the current prefix sums: the sum of all released leaves."""
        return self.trees.exact.sum(axis=-3)

    def noise(self) -> np.ndarray:
        """Noise part of the current prefix sums (popcount(k) node matrices)."""
        return self.trees.noise.sum(axis=-3)

    def num_noise_terms(self) -> np.ndarray:
        """Node matrices in each tree's current prefix sum: popcount(k) when sigma > 0."""
        k = self.trees.k
        return popcount(k) if self.sigma > 0 else np.zeros_like(k)

    def release(self, Q: np.ndarray, mask: np.ndarray | None = None) -> GramRelease:
        """Insert leaf ``Q`` where ``mask`` holds and release the noisy prefix sums."""
        full, side = (self.num_runs, *self.shape), self.d + 1
        Q = check_values(Q, (*full, side, side), "Q")
        mask = check_mask(mask, full)
        refused = mask & self.exhausted
        if np.any(refused):
            warnings.warn(
                f"{int(refused.sum())} tree(s) reached their capacity of {self.capacity} "
                "releases; those releases were refused (the agent stops syncing; "
                'docs/privacy.md, "Decisions")',
                PrivacyBudgetWarning,
                stacklevel=2,
            )
        active = mask & ~refused
        if self._stream is not None:
            upper = self._stream.next(active.reshape(self.num_runs, -1).any(axis=1))
            node = symmetric_from_upper(upper, side, self.sigma, math.sqrt(2.0))
        else:
            node = np.zeros((*full, side, side))
        self.trees = t = insert_leaf(self.trees, Q, node, active, self.shift)
        return GramRelease(t.U.copy(), t.u.copy(), active, t.k.copy())
