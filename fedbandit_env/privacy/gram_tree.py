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
from fedbandit_env.privacy.dyadic import popcount
from fedbandit_env.privacy.errors import PrivacyBudgetWarning, PrivacyError
from fedbandit_env.privacy.mechanisms import symmetric_from_upper, upper_triangle_size
from fedbandit_env.seeding import BatchedRNG
from fedbandit_env.xp import is_number, namespace


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
    """The state of a batch of trees (both engines): ``exact`` and ``noise`` (..., m, d+1, d+1)
    the closed node per level (its exact leaf sum and its noise matrix; zeros where the level is
    empty), ``k`` (...) the releases so far, ``U`` (..., d, d) and ``u`` (..., d) the last
    release. This per-level layout is numpy's; the JAX trees keep the nodes in their own
    (fedbandit_env/jax/prefix_layout.py)."""

    exact: Any
    noise: Any
    k: Any
    U: Any
    u: Any


def empty_trees(xp: Any, shape: tuple[int, ...], d: int, levels: int) -> GramTrees:
    """Trees without a release, in the engine's default float and int dtypes."""
    side, zeros = d + 1, xp.zeros
    nodes = (*shape, levels, side, side)
    k = xp.zeros(shape, dtype=xp.asarray(0).dtype)  # int64 in numpy, int32 in JAX
    return GramTrees(zeros(nodes), zeros(nodes), k, zeros((*shape, d, d)), zeros((*shape, d)))


def insert_leaf(trees: GramTrees, Q: Any, node: Any, active: Any, shift: float,
                close: Any = None) -> GramTrees:  # fmt: skip
    """Algorithm 2 (PRIVATIZER) where ``active`` holds: release k inserts leaf ``Q`` (..., d+1,
    d+1) and closes the node at level ctz(k), which merges Q with the closed nodes below it
    (they empty) and takes the fresh noise matrix ``node``; the released prefix sum over leaves
    1..k is the sum of the closed nodes (popcount(k) of them), plus ``shift I`` on the d x d
    block. Elsewhere the trees and their last release stay. Both engines call it; ``close(trees,
    k, Q, node, active)`` returns ``(exact, noise, P)`` in another layout (the JAX trees'), None:
    numpy's per-level."""
    xp = namespace(Q, trees.k)
    d = Q.shape[-1] - 1
    k = trees.k + active
    if close is not None:
        exact, noise, P = close(trees, k, Q, node, active)
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


def check_trees(shape: tuple[int, ...], d: int, sigma: float, shift: float, levels: int) -> tuple:
    """The validated (shape, d, sigma, shift, levels) of a batch of trees (both engines). A
    ``sigma`` or ``shift`` that the JAX rollout traces was checked when its params were made
    (a traced value is a finite non-zero float, docs/jax.md "Compiling once") and passes."""
    shape, d = check_shape(shape), check_index(d, "d")
    if is_number(sigma):
        sigma = check_positive(sigma, "sigma", allow_zero=True)
    if is_number(shift):
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
