"""The tree-based Gaussian mechanism over Gram matrices in JAX (FedUCB's PRIVATIZER).

Port of :class:`fedbandit_env.privacy.GramTreePrivatizer` for one run: the PRIVATIZER of Dubey &
Pentland, "Differentially-Private Federated Linear Bandits" (NeurIPS 2020), Algorithm 2, with the
constants of Section 4.3 / Proposition 4 computed by the numpy calibration
(:func:`~fedbandit_env.privacy.linear_privacy_constants`) in Python and used here as constants.
Each tree (one per agent, or per agent and slot: ``shape``) has ``levels`` = m levels fixed from
the horizon (Algorithm 2, line 2); its leaves are the owner's sync releases: leaf k is
``Q = sum z z^T``, ``z = [x; y]``, over the observations since the previous release. Release k
returns the prefix sum over leaves ``1..k``, which carries ``popcount(k)`` symmetric Gaussian
node matrices, each drawn once (when its node closes) and reused.

Node noise: ``(N + N^T)/sqrt(2)`` with ``N`` i.i.d. ``N(0, sigma^2)``, drawn as "upper triangle
i.i.d. ``N(0, sigma^2)``, diagonal times sqrt(2)" (the numpy twin's form). Every release adds
``shift * I`` (``2 Lambda I``) to the top-left d x d block. A tree that has made its capacity
``2^(m-1)`` releases refuses further ones (``released`` False: the previous release is
repeated); the numpy twin also warns, which a compiled program cannot, so the callers count the
refusals. Float32 throughout; release counts are int32.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from fedbandit_env.privacy._validation import check_shape
from fedbandit_env.privacy.calibration import check_positive
from fedbandit_env.privacy.gram_tree import GramTreeConstants, _check_int


class GramTreeState(NamedTuple):
    """The trees of one run: ``exact`` and ``noise`` (*shape, m, d+1, d+1) the closed node per
    level (its exact leaf sum and its noise matrix; zeros where the level is empty), ``k``
    (*shape) int32 releases so far, ``U`` (*shape, d, d) and ``u`` (*shape, d) the last release."""

    exact: jnp.ndarray
    noise: jnp.ndarray
    k: jnp.ndarray
    U: jnp.ndarray
    u: jnp.ndarray


class GramRelease(NamedTuple):
    """One call of :meth:`GramTree.release` (the numpy twin's ``GramRelease``): ``U_hat``
    (*shape, d, d) noisy Gram block + ``shift * I``, ``u_hat`` (*shape, d) noisy ``sum y x``,
    ``released`` (*shape) the trees that released now (elsewhere the previous release is
    repeated, zeros before the first) and ``index`` (*shape) each tree's release count."""

    U_hat: jnp.ndarray
    u_hat: jnp.ndarray
    released: jnp.ndarray
    index: jnp.ndarray


def trailing_zeros(k: jnp.ndarray) -> jnp.ndarray:
    """ctz(k) of positive int32 ``k``: the level of the node that release k closes."""
    return jax.lax.population_count((k & -k) - 1)


def symmetric_node(key: jax.Array, shape: tuple[int, ...], side: int, sigma: float):
    """(*shape, side, side) symmetric Gaussian node matrices: upper triangle (diagonal included)
    ``N(0, sigma^2)`` i.i.d., diagonal times sqrt(2), lower triangle mirrored."""
    z = sigma * jax.random.normal(key, (*shape, side, side), jnp.float32)
    upper = jnp.triu(z, 1)
    diag = jnp.sqrt(jnp.float32(2.0)) * jnp.diagonal(z, axis1=-2, axis2=-1)
    return upper + jnp.swapaxes(upper, -1, -2) + diag[..., None] * jnp.eye(side, dtype=jnp.float32)


class GramTree:
    """Binary-tree Gaussian aggregators over ``shape`` trees of (d+1) x (d+1) leaves for one run
    (Algorithm 2), the port of :class:`~fedbandit_env.privacy.GramTreePrivatizer`.

    ``sigma``, ``shift`` and ``levels`` are validated as by the numpy twin; ``sigma = 0`` switches
    the noise off (then ``shift = lambda`` gives ``U_hat = sum x x^T + lambda I`` exactly)."""

    def __init__(self, shape: tuple[int, ...], d: int, *, sigma: float, shift: float,
                 levels: int):  # fmt: skip
        self.shape = check_shape(shape)
        self.d = _check_int(d, "d")
        self.sigma = check_positive(sigma, "sigma", allow_zero=True)
        self.shift = check_positive(shift, "shift", allow_zero=True)
        self.levels = _check_int(levels, "levels")
        self.capacity = 1 << (self.levels - 1)

    @classmethod
    def from_constants(cls, constants: GramTreeConstants, shape: tuple[int, ...]) -> GramTree:
        """The paper's privatizer: ``sigma = sigma_N``, ``shift = 2 Lambda``, m levels."""
        return cls(shape, constants.d, sigma=constants.sigma_N, shift=constants.shift,
                   levels=constants.m)  # fmt: skip

    def init(self) -> GramTreeState:
        """Empty trees (no release yet)."""
        side = self.d + 1
        return GramTreeState(
            jnp.zeros((*self.shape, self.levels, side, side), jnp.float32),
            jnp.zeros((*self.shape, self.levels, side, side), jnp.float32),
            jnp.zeros(self.shape, jnp.int32),
            jnp.zeros((*self.shape, self.d, self.d), jnp.float32),
            jnp.zeros((*self.shape, self.d), jnp.float32),
        )

    def release(self, key: jax.Array, state: GramTreeState, Q: jnp.ndarray,
                mask: jnp.ndarray) -> tuple[GramRelease, GramTreeState]:  # fmt: skip
        """Insert leaf ``Q`` (*shape, d+1, d+1) into the trees where ``mask`` holds and release
        their noisy prefix sums (Algorithm 2): release k closes the node at level ctz(k), which
        merges the leaf with the nodes below it, and draws that node's noise."""
        side = self.d + 1
        Q = jnp.asarray(Q, jnp.float32)
        if Q.shape != (*self.shape, side, side):
            raise ValueError(f"Q: expected shape {(*self.shape, side, side)}, got {Q.shape}")
        active = jnp.broadcast_to(jnp.asarray(mask, bool), self.shape)
        active = active & (state.k < self.capacity)  # a full tree refuses the release
        if self.sigma > 0:
            node = symmetric_node(key, self.shape, side, self.sigma)
        else:
            node = jnp.zeros((*self.shape, side, side), jnp.float32)
        k = state.k + active.astype(jnp.int32)
        level = trailing_zeros(jnp.where(active, k, 1))
        levels = jnp.arange(self.levels, dtype=jnp.int32)
        lower = ((levels < level[..., None]) & active[..., None])[..., None, None]
        here = ((levels == level[..., None]) & active[..., None])[..., None, None]
        merged = Q + jnp.where(lower, state.exact, 0.0).sum(axis=-3)
        exact = jnp.where(lower, 0.0, jnp.where(here, merged[..., None, :, :], state.exact))
        noise = jnp.where(lower, 0.0, jnp.where(here, node[..., None, :, :], state.noise))
        P = exact.sum(axis=-3) + noise.sum(axis=-3)
        eye = jnp.eye(self.d, dtype=jnp.float32)
        U = P[..., : self.d, : self.d] + jnp.float32(self.shift) * eye
        u = P[..., : self.d, self.d]
        U = jnp.where(active[..., None, None], U, state.U)
        u = jnp.where(active[..., None], u, state.u)
        return GramRelease(U, u, active, k), GramTreeState(exact, noise, k, U, u)

    @staticmethod
    def exact_sum(state: GramTreeState) -> jnp.ndarray:
        """Exact part of the current prefix sums: the sum of all released leaves."""
        return state.exact.sum(axis=-3)

    @staticmethod
    def noise_sum(state: GramTreeState) -> jnp.ndarray:
        """Noise part of the current prefix sums (popcount(k) node matrices)."""
        return state.noise.sum(axis=-3)
