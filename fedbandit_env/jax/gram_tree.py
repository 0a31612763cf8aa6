"""The tree-based Gaussian mechanism over Gram matrices in JAX (FedUCB's PRIVATIZER).

The JAX form of :class:`fedbandit_env.privacy.GramTreePrivatizer` for one run: the PRIVATIZER of
Dubey & Pentland, "Differentially-Private Federated Linear Bandits" (NeurIPS 2020), Algorithm 2, with the
constants of Section 4.3 / Proposition 4 computed by the numpy calibration
(:func:`~fedbandit_env.linear_kernels.linear_privacy_constants`) in Python and used here as constants.
Each tree (one per agent, or per agent and slot: ``shape``) has ``levels`` = m levels fixed from
the horizon (Algorithm 2, line 2); its leaves are the owner's sync releases: leaf k is
``Q = sum z z^T``, ``z = [x; y]``, over the observations since the previous release. Release k
returns the prefix sum over leaves ``1..k``, which carries ``popcount(k)`` symmetric Gaussian
node matrices, each drawn once (when its node closes) and reused.

Node noise: ``(N + N^T)/sqrt(2)`` with ``N`` i.i.d. ``N(0, sigma^2)``, drawn as "upper triangle
i.i.d. ``N(0, sigma^2)``, diagonal times sqrt(2)" (the numpy privatizer's form and function,
:func:`fedbandit_env.privacy.mechanisms.symmetric_from_upper`): one node per tree and release,
``(d+1)(d+2)/2`` draws, only in a step where some run of the batch releases (the callers'
batch-level ``cond``). Every release adds ``shift * I`` (``2 Lambda I``) to the top-left d x d
block. A tree that has made its capacity ``2^(m-1)`` releases refuses further ones (``released``
False: the previous release is repeated); the numpy privatizer also warns, which a compiled
program cannot, so the callers count the refusals. The insertion and the release are the numpy
privatizer's own function (:func:`fedbandit_env.privacy.gram_tree.insert_leaf`) on the prefix
layout (:mod:`fedbandit_env.jax.prefix_layout`, levels first: ``exact`` and ``noise`` (m,
*shape, d+1, d+1), level j, for a set bit j of k, the sum of the closed nodes at levels >= j;
:func:`~fedbandit_env.jax.prefix_layout.prefix_leaf`, passed as ``insert_leaf``'s ``close``): a
release reads the prefix of the nodes above and of the previous release and writes the closing
level of each tree only, a dynamic index, not a ``where`` over the m levels. Float32 throughout; release counts are
int32.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from fedbandit_env.jax.noise import normal
from fedbandit_env.jax.prefix_layout import node_prefix, prefix_leaf
from fedbandit_env.linear_kernels import GramTreeConstants
from fedbandit_env.privacy.gram_tree import (
    GramRelease,
    GramTrees,
    check_trees,
    empty_trees,
    insert_leaf,
)
from fedbandit_env.privacy.mechanisms import symmetric_from_upper, upper_triangle_size
from fedbandit_env.xp import is_zero

__all__ = ["GramRelease", "GramTree", "GramTrees", "symmetric_node"]


def symmetric_node(key: jax.Array, shape: tuple[int, ...], side: int, sigma: float):
    """(*shape, side, side) symmetric Gaussian node matrices: upper triangle (diagonal included)
    ``N(0, sigma^2)`` i.i.d., diagonal times sqrt(2), lower triangle mirrored; draws the upper
    triangle only (:func:`~fedbandit_env.privacy.mechanisms.symmetric_from_upper`)."""
    upper = normal(key, (*shape, upper_triangle_size(side)))
    return symmetric_from_upper(upper, side, sigma, math.sqrt(2.0))


class GramTree:
    """Binary-tree Gaussian aggregators over ``shape`` trees of (d+1) x (d+1) leaves for one run
    (Algorithm 2), the JAX form of :class:`~fedbandit_env.privacy.GramTreePrivatizer`: ``sigma``,
    ``shift`` and ``levels`` validated as there (:func:`~fedbandit_env.privacy.gram_tree.
    check_trees`); ``sigma = 0`` switches the noise off."""

    def __init__(self, shape: tuple[int, ...], d: int, *, sigma: float, shift: float,
                 levels: int):  # fmt: skip
        self.shape, self.d, self.sigma, self.shift, self.levels = check_trees(
            shape, d, sigma, shift, levels
        )
        self.capacity = 1 << (self.levels - 1)

    @classmethod
    def from_constants(cls, constants: GramTreeConstants, shape: tuple[int, ...]) -> GramTree:
        """The paper's privatizer: ``sigma = sigma_N``, ``shift = 2 Lambda``, m levels."""
        return cls(shape, constants.d, sigma=constants.sigma_N, shift=constants.shift,
                   levels=constants.m)  # fmt: skip

    def init(self) -> GramTrees:
        """Empty trees (no release yet), the nodes in the prefix layout."""
        nodes = jnp.zeros((self.levels, *self.shape, self.d + 1, self.d + 1))
        return empty_trees(jnp, self.shape, self.d, self.levels)._replace(exact=nodes, noise=nodes)

    def release(self, key: jax.Array, state: GramTrees, Q: jnp.ndarray,
                mask: jnp.ndarray) -> tuple[GramRelease, GramTrees]:  # fmt: skip
        """Insert leaf ``Q`` (*shape, d+1, d+1) into the trees where ``mask`` holds and release
        their noisy prefix sums (Algorithm 2, :func:`~fedbandit_env.privacy.gram_tree.
        insert_leaf`); a full tree refuses the release. The node noise is drawn for every tree
        from ``key`` and used where a node closes."""
        side = self.d + 1
        Q = jnp.asarray(Q, jnp.float32)
        if Q.shape != (*self.shape, side, side):
            raise ValueError(f"Q: expected shape {(*self.shape, side, side)}, got {Q.shape}")
        active = jnp.broadcast_to(jnp.asarray(mask, bool), self.shape) & (state.k < self.capacity)
        if not is_zero(self.sigma):  # a traced sigma is never 0
            node = symmetric_node(key, self.shape, side, self.sigma)
        else:
            node = jnp.zeros((*self.shape, side, side), jnp.float32)
        trees = insert_leaf(state, Q, node, active, self.shift, close=prefix_leaf)
        return GramRelease(trees.U, trees.u, active, trees.k), trees

    @staticmethod
    def exact_sum(state: GramTrees) -> jnp.ndarray:
        """Exact part of the current prefix sums: the sum of all released leaves."""
        return node_prefix(state.exact, state.k)

    @staticmethod
    def noise_sum(state: GramTrees) -> jnp.ndarray:
        """Noise part of the current prefix sums (popcount(k) node matrices)."""
        return node_prefix(state.noise, state.k)
