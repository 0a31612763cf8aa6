"""Tree-based Gaussian mechanism over sync releases of augmented Gram matrices (FedUCB).

Implements the privacy constants (Section 4.3, Proposition 4) and the PRIVATIZER (Algorithm 2) of
Dubey & Pentland, "Differentially-Private Federated Linear Bandits" (NeurIPS 2020). Each agent
owns one binary-tree aggregator whose leaves are its sync releases: leaf k is ``Q = sum z z^T``,
``z = [x; y]``, over the agent's observations since its last release (the window ``(t', t]``,
so each observation enters exactly one leaf). The released prefix sum over leaves ``1..k`` carries
``popcount(k)`` symmetric Gaussian node matrices, each drawn once and reused.

Decisions where the paper leaves room (docs/privacy.md, "Decisions"; docs/linear.md, "Decisions"):

* Lambda (Section 4.3; the printed radical and log leave room) — ``Lambda = sqrt(32) m Lt2
  ln(4/delta) (4 sqrt(d) + 2 ln(2 n M/alpha)) / epsilon`` (``lambda_form="paper"``);
  ``lambda_form="sqrt2m"`` gives ``sqrt(2m) sigma_N (4 sqrt(d) + 2 ln(2nM/alpha))``, i.e.
  ln(2/delta) in place of ln(4/delta).
* kappa — as Proposition 4 prints it,
  ``kappa = sqrt(m Lt2 (sqrt(d) + 2 ln(2nM/alpha)) / (sqrt(2) epsilon))``.
* Tree depth (Algorithm 2, line 2; Remark 4) — with an adaptive schedule ``n = T`` and
  ``m = 1 + ceil(log2 T)``; with a fixed schedule of ``n_max`` releases, ``n = n_max`` and
  ``m = 1 + ceil(log2 n_max)``.
* Capacity — the tree holds at most ``2^(m-1)`` releases. A release beyond that is refused with a
  :class:`~fedbandit_env.privacy.errors.PrivacyBudgetWarning` (the caller stops syncing); the
  tree is never rebuilt, which would spend extra budget.
* Decentralized (``gamma > 1``, Remark 5): ``n = ceil(T/gamma)``, ``m = 1 + ceil(log2 n)`` and
  ``ln(2 n M gamma/alpha)`` in Lambda and kappa; no epsilon split across the gamma slots.
* Reward bound — ``Lt2 = L^2 + B^2`` wherever the paper writes ``L^2 + 1``.

Node noise: ``(N + N^T)/sqrt(2)`` with ``N`` i.i.d. ``N(0, sigma_N^2)``, drawn in the equivalent
form "upper triangle i.i.d., diagonal times sqrt(2)" (off-diagonal variance ``sigma_N^2``,
diagonal ``2 sigma_N^2``). Every release adds ``2 Lambda I`` to the top-left d x d block.
The eigenvalue floor of an indefinite W is post-processing done by the agents, not here:
``agents.fed_ucb_common.floor_spectrum``, counted in the agents' ``eig_clip_events``.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

import numpy as np

from fedbandit_env.linear_kernels import confidence_radius
from fedbandit_env.privacy._random import masked_stream
from fedbandit_env.privacy._validation import check_mask, check_shape, check_values, resolve_runs
from fedbandit_env.privacy.calibration import (
    check_delta,
    check_epsilon,
    check_noise_scale,
    check_positive,
)
from fedbandit_env.privacy.dyadic import _check_index, popcount
from fedbandit_env.privacy.errors import PrivacyBudgetWarning, PrivacyError
from fedbandit_env.privacy.mechanisms import symmetric_from_upper, upper_triangle_size
from fedbandit_env.seeding import BatchedRNG
from fedbandit_env.xp import namespace

LambdaForm = Literal["paper", "sqrt2m"]


@dataclass(frozen=True)
class GramTreeConstants:
    """Privacy constants of Dubey & Pentland, Section 4.3 (see :func:`linear_privacy_constants`)."""

    epsilon: float
    delta: float
    alpha: float
    d: int
    num_agents: int
    horizon: int
    L: float
    B: float
    gamma: int
    n: int  # releases per tree used in m and in the logs
    m: int  # tree depth; capacity 2^(m-1) releases
    L_tilde_sq: float  # L^2 + B^2
    sigma_N: float
    Lambda: float
    rho_min: float
    rho_max: float
    kappa: float

    @property
    def capacity(self) -> int:
        """Most releases one tree may make: 2^(m-1) (a tree of depth m, Algorithm 2)."""
        return 1 << (self.m - 1)

    @property
    def shift(self) -> float:
        """PSD shift added to the d x d block of every release: 2 Lambda."""
        return 2.0 * self.Lambda

    @property
    def ell(self) -> float:
        """``ln(rho_max/rho_min + T L^2/(d rho_min))`` (Proposition 1 and Theorem 1)."""
        return math.log(
            self.rho_max / self.rho_min + self.horizon * self.L**2 / (self.d * self.rho_min)
        )

    @property
    def sync_threshold(self) -> float:
        """Theorem 1's ``D = 2 T d / (ell + 1)``; with ``gamma > 1`` T becomes T/gamma
        (docs/linear.md, "Decisions")."""
        return 2.0 * (self.horizon / self.gamma) * self.d / (self.ell + 1.0)

    def sync_bound(self, threshold: float | None = None) -> float:
        """Proposition 1: at most ``2 sqrt((d T/D) ell) + 4`` sync rounds (default D: Thm 1)."""
        D = self.sync_threshold if threshold is None else threshold
        return 2.0 * math.sqrt(self.d * self.horizon / D * self.ell) + 4.0

    def beta(self, logdet_v: float, *, sigma: float = 0.5, S: float = 1.0) -> float:
        """Proposition 2 radius of the M agents
        (:func:`fedbandit_env.linear_kernels.confidence_radius`)."""
        M = self.num_agents
        return float(confidence_radius(logdet_v, self.d * math.log(M * self.rho_min),
                                       alpha=self.alpha, sigma=sigma, S=S, rho_max=self.rho_max,
                                       kappa=self.kappa, group=M))  # fmt: skip

    def initial_beta(self, *, sigma: float = 0.5, S: float = 1.0) -> float:
        """beta at t = 1, where ``V = W = M rho_min I``."""
        return self.beta(self.d * math.log(self.num_agents * self.rho_min), sigma=sigma, S=S)

    @property
    def zcdp_rho(self) -> float:
        """zCDP of the whole released sequence for one observation: a node's difference
        ``z z^T - z' z'^T`` has Frobenius norm <= 2 Lt2; with off-diagonal variance sigma_N^2
        and diagonal variance 2 sigma_N^2 one node costs ``||.||_F^2 / (4 sigma_N^2) <=
        Lt2^2 / sigma_N^2``, and an observation enters at most m nodes."""
        return self.m * self.L_tilde_sq**2 / self.sigma_N**2


def linear_privacy_constants(
    epsilon: float,
    delta: float,
    d: int,
    num_agents: int,
    horizon: int,
    *,
    alpha: float = 0.1,
    L: float = 1.0,
    B: float = 1.0,
    n_max: int | None = None,
    gamma: int = 1,
    lambda_form: LambdaForm = "paper",
) -> GramTreeConstants:
    """The constants m, sigma_N, Lambda = rho_min, rho_max = 3 Lambda, kappa of Dubey &
    Pentland, Section 4.3 (with the decisions listed in the module docstring).

    ``n_max`` is the number of releases of a fixed schedule (None: adaptive, n = T, or
    ``ceil(T/gamma)`` for the decentralized variant with TTL ``gamma``).
    """
    epsilon = check_epsilon(epsilon, allow_inf=False)
    delta = check_delta(delta)
    alpha = check_delta(alpha, name="alpha")
    d, num_agents = _check_index(d, "d"), _check_index(num_agents, "num_agents")
    horizon, gamma = _check_index(horizon, "horizon"), _check_index(gamma, "gamma")
    L, B = check_positive(L, "L"), check_positive(B, "B")
    if not isinstance(lambda_form, str) or lambda_form not in ("paper", "sqrt2m"):
        raise PrivacyError("lambda_form", "'paper' or 'sqrt2m'", lambda_form)
    n = -(-horizon // gamma) if n_max is None else _check_index(n_max, "n_max")
    m = 1 + (n - 1).bit_length()  # 1 + ceil(log2 n)
    lt2 = L**2 + B**2
    sigma_N = 4.0 * math.sqrt(m) * lt2 * math.log(2.0 / delta) / epsilon
    log_term = 2.0 * math.log(2.0 * n * num_agents * gamma / alpha)
    if lambda_form == "paper":
        Lambda = (
            math.sqrt(32.0) * m * lt2 * math.log(4.0 / delta) * (4 * math.sqrt(d) + log_term)
        ) / epsilon
    else:
        Lambda = math.sqrt(2.0 * m) * sigma_N * (4 * math.sqrt(d) + log_term)
    kappa = math.sqrt(m * lt2 * (math.sqrt(d) + log_term) / (math.sqrt(2.0) * epsilon))
    check_noise_scale(sigma_N, epsilon, what="node noise sigma_N")
    check_noise_scale(Lambda, epsilon, what="regularizer Lambda")
    check_noise_scale(kappa, epsilon, what="kappa")
    return GramTreeConstants(epsilon, delta, alpha, d, num_agents, horizon, L, B, gamma, n, m,
                             lt2, sigma_N, Lambda, Lambda, 3.0 * Lambda, kappa)  # fmt: skip


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
    release."""

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


def insert_leaf(trees: GramTrees, Q: Any, node: Any, active: Any, shift: float) -> GramTrees:
    """Algorithm 2 (PRIVATIZER) where ``active`` holds: release k inserts leaf ``Q`` (..., d+1,
    d+1) and closes the node at level ctz(k), which merges Q with the closed nodes below it
    (they empty) and takes the fresh noise matrix ``node``; the released prefix sum over leaves
    1..k is the sum of the closed nodes (popcount(k) of them), plus ``shift I`` on the d x d
    block. Elsewhere the trees and their last release stay. Both engines call it."""
    xp = namespace(Q, trees.k)
    d = Q.shape[-1] - 1
    k = trees.k + active
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
    """The validated (shape, d, sigma, shift, levels) of a batch of trees (both engines)."""
    shape, d = check_shape(shape), _check_index(d, "d")
    sigma = check_positive(sigma, "sigma", allow_zero=True)
    shift = check_positive(shift, "shift", allow_zero=True)
    return shape, d, sigma, shift, _check_index(levels, "levels")


class GramTreePrivatizer:
    """Binary-tree Gaussian aggregators over (B, *shape) trees of (d+1) x (d+1) leaves
    (Dubey & Pentland, Algorithm 2); ``shape`` is e.g. (M,) agents or (M, gamma) agents and slots.

    ``release(Q, mask)`` inserts leaf Q (B, *shape, d+1, d+1) into the trees where ``mask``
    holds and returns their noisy prefix sums (:func:`insert_leaf`). Node noise is drawn per
    run only when that run releases (:class:`~fedbandit_env.privacy._random.MaskedStream`), so
    data-dependent sync times keep runs of a batch bit-identical to the runs alone. ``sigma = 0``
    switches the noise off (then ``shift = lambda`` gives ``U_hat = sum x x^T + lambda I``
    exactly).
    """

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
        constants: GramTreeConstants,
        shape: tuple[int, ...],
        *,
        rng: BatchedRNG | None = None,
        num_runs: int | None = None,
    ) -> GramTreePrivatizer:
        """The paper's privatizer: ``sigma = sigma_N``, ``shift = 2 Lambda``, m levels."""
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
