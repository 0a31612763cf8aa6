"""What the centralized and decentralized FedUCB agents share (Dubey & Pentland;
docs/linear.md).

:class:`FedUCBBase` validates the common parameters (epsilon, delta, alpha, private, sync
threshold, beta_scale, lambda, sigma, S, L, B, eig_floor), folds an observation into per-slot
statistics and computes the Proposition-2 radius for a group size (M centrally, the clique size
c_i in the decentralized variant).

Two safeguards of the private agents live here:

* **Reward clipping.** The privacy noise is calibrated for ``|y| <= B`` (sensitivity
  through ``L^2 + B^2``). A private agent clips every reward to ``[-B, B]`` before it enters any
  statistic (its own ``U, u`` and the privatized ``Q``), so Gaussian rewards keep the guarantee;
  ``clipped_rewards`` counts the clipped rewards per run and agent. Bernoulli rewards with the
  default ``B = 1`` are never clipped. Non-private agents use the rewards as they are.
* **Eigenvalue floor.** A noise draw outside its high-probability bound can leave the
  synchronized ``W`` indefinite. :func:`floor_spectrum` clips the eigenvalues of ``W`` from below
  at ``eig_floor`` (default rho_min: Lambda when private, lambda when not; post-processing, so the
  privacy guarantee is unaffected) and the agents count the events in ``eig_clip_events``; noise
  is never redrawn. A ``W`` that is already above the floor is kept bit for bit. The floor's value
  is ours: rho_min is one agent's lower spectral bound, far below the
  ``M rho_min`` (``c_i rho_min``) that an accurate W has, and keeps V well conditioned.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import partial

import numpy as np

from fedbandit_env.engine import VecObservation
from fedbandit_env.kernels import check_number
from fedbandit_env.linear_kernels import (
    GramTreeConstants,
    clip_rewards,
    confidence_radius,
    linear_privacy_constants,
    pull_terms,
)
from fedbandit_env.policy import TeamPolicy
from fedbandit_env.validation import ConfigTypeError, check_real
from fedbandit_env.xp import rounding_tolerance


@dataclass(frozen=True)
class LinearFedUCBConfig:
    """Hyperparameters shared by both FedUCB agents (docs/linear.md, "Parameters").

    ``private`` selects the tree-based Gaussian mechanism at (``epsilon``, ``delta``) (``epsilon``
    is stored as ``inf`` when ``private=False``); ``alpha`` is the failure probability of the
    confidence radius (Proposition 2); ``sync_threshold`` is D of the log-det rule (None: the
    value of Theorem 1); ``beta_scale`` multiplies the radius; ``lam`` is the ridge of the
    non-private agent; ``sigma``, ``S``, ``L``, ``B`` bound the noise, ``||theta*||``, ``||x||``
    and ``|y|``; ``eig_floor`` is the floor of the synchronized W's spectrum (None: rho_min)."""

    agent_id: str
    epsilon: float = 1.0
    delta: float = 0.1
    alpha: float = 0.1
    private: bool = True
    sync_threshold: float | None = None
    beta_scale: float = 1.0
    lam: float = 1.0
    sigma: float = 0.5
    S: float = 1.0
    L: float = 1.0
    B: float = 1.0
    eig_floor: float | None = None

    def __post_init__(self) -> None:
        aid = self.agent_id
        if not isinstance(self.private, bool | np.bool_):
            raise ConfigTypeError(f"{aid}: private: expected True or False, got {self.private!r}")
        set_ = partial(object.__setattr__, self)
        set_("private", bool(self.private))
        if self.private:
            epsilon = check_real(
                "epsilon",
                self.epsilon,
                hint="private=False for no privacy",
                low=0.0,
                low_open=True,
                where=aid,
            )
            set_("epsilon", epsilon)
        else:
            set_("epsilon", math.inf)
        set_("delta", check_number(aid, "delta", self.delta, 1e-300, 1.0 - 1e-12))
        set_("alpha", check_number(aid, "alpha", self.alpha, 1e-300, 1.0 - 1e-12))
        if self.sync_threshold is not None:
            set_("sync_threshold", check_number(aid, "sync_threshold", self.sync_threshold, 0.0))
        set_("beta_scale", check_number(aid, "beta_scale", self.beta_scale, 0.0))
        set_("lam", check_number(aid, "lam", self.lam, 1e-12))
        set_("sigma", check_number(aid, "sigma", self.sigma, 0.0))
        set_("S", check_number(aid, "S", self.S, 0.0))
        set_("L", check_number(aid, "L", self.L, 1e-12))
        set_("B", check_number(aid, "B", self.B, 1e-12))
        if self.eig_floor is not None:
            set_("eig_floor", check_number(aid, "eig_floor", self.eig_floor, 1e-300))


class FedUCBBase(TeamPolicy):
    """Common parameters and numerics of the FedUCB agents."""

    def __init__(self, config: LinearFedUCBConfig):
        self.config = config
        self.private = config.private
        self.epsilon = config.epsilon
        self.delta, self.alpha = config.delta, config.alpha
        self.D = config.sync_threshold
        self.beta_scale, self.lam, self.sigma = config.beta_scale, config.lam, config.sigma
        self.S, self.L, self.B = config.S, config.L, config.B
        self.eig_floor_arg = config.eig_floor

    def init_safeguards(self, runs: int, n_agents: int) -> None:
        """Counters of the reward clipping and the spectrum floor (call from ``reset`` once
        ``rho_min`` is known): ``clipped_rewards`` (B, N), ``eig_clip_events`` (B,)."""
        self.eig_floor = self.rho_min if self.eig_floor_arg is None else self.eig_floor_arg
        self.clipped_rewards = np.zeros((runs, n_agents), dtype=np.int64)
        self.eig_clip_events = np.zeros(runs, dtype=np.int64)

    def floor_W(self, W: np.ndarray, run: np.ndarray) -> np.ndarray:
        """``W`` (k, d, d) with its spectrum floored at ``eig_floor``; one event per
        floored matrix is added to ``eig_clip_events`` of its run (``run`` (k,) run indices),
        unless its deficit under the floor is only rounding
        (:func:`~fedbandit_env.xp.rounding_tolerance`: it is
        floored all the same, but not counted)."""
        low, real = _below_floor(W, self.eig_floor)
        W, _ = _floored(W, self.eig_floor, low)
        if real.any():
            self.eig_clip_events += np.bincount(run[real], minlength=len(self.eig_clip_events))
        return W

    def logdet(self, V: np.ndarray) -> np.ndarray:
        """``ln det V`` of positive-definite matrices; an indefinite V (which the spectrum floor
        rules out) raises instead of silently dropping the sign."""
        sign, logdet = np.linalg.slogdet(V)
        if np.any(sign <= 0):
            raise FloatingPointError(
                f"{self.agent_id}: a Gram matrix V is not positive definite (the spectrum floor "
                f"eig_floor = {self.eig_floor} should prevent this)"
            )
        return logdet

    @property
    def privacy_epsilon(self) -> float:
        """Declared guarantee: (epsilon, delta)-DP per agent (``inf`` when ``private=False``)."""
        return self.epsilon

    def fold(
        self,
        obs: VecObservation,
        context: np.ndarray,
        rows: tuple,
        into: tuple[np.ndarray, ...],
        runs: np.ndarray | None = None,
    ) -> None:
        """Algorithm 1: add the last pull (x from ``context``, y) to ``(U, u, G, g, Q)`` views
        (B, N, ...);
        ``runs`` (B,) bool: only in these runs (the others took a communication step)."""
        U, u, G, g, Q = into
        b, i = rows
        x = context[b, i, obs.last_arm]
        y = obs.last_reward
        if runs is not None:  # zero contributions where nothing was pulled
            x = np.where(runs[:, None, None], x, 0.0)
            y = np.where(runs[:, None], y, 0.0)
        if self.private:  # the privacy calibration needs |y| <= B
            y, clipped = clip_rewards(y, self.B)
            self.clipped_rewards += clipped
        xx, yx, zz = pull_terms(x, y, leaf=True)
        U += xx
        u += yx
        G += xx
        g += yx
        Q += zz

    def radius(self, V: np.ndarray, group: np.ndarray | float) -> np.ndarray:
        """Proposition 2 for a group size, times beta_scale
        (:func:`fedbandit_env.linear_kernels.confidence_radius` on ``slogdet``)."""
        log_scale = V.shape[-1] * np.log(group * self.rho_min)
        return confidence_radius(self.logdet(V), log_scale, alpha=self.alpha, sigma=self.sigma,
                                 S=self.S, rho_max=self.rho_max, kappa=self.kappa, group=group,
                                 beta_scale=self.beta_scale)  # fmt: skip


def regularizer(
    config: LinearFedUCBConfig,
    d: int,
    num_agents: int,
    horizon: int,
    *,
    n_max: int | None = None,
    gamma: int = 1,
) -> tuple[GramTreeConstants | None, float, float, float]:
    """``(constants, rho_min, rho_max, kappa)``: a private agent's privacy constants of
    Section 4.3 (:func:`~fedbandit_env.linear_kernels.linear_privacy_constants`, ``n_max`` releases of
    a fixed schedule, TTL ``gamma``) and the spectral bounds and kappa of Proposition 2 they
    give; a non-private agent's ``(None, lambda, lambda, 0)``."""
    if not config.private:
        return None, config.lam, config.lam, 0.0
    c = linear_privacy_constants(config.epsilon, config.delta, d, num_agents, horizon,
                                 alpha=config.alpha, L=config.L, B=config.B, n_max=n_max,
                                 gamma=gamma)  # fmt: skip
    return c, c.rho_min, c.rho_max, c.kappa


def floor_spectrum(W: np.ndarray, floor: float) -> tuple[np.ndarray, np.ndarray]:
    """Clip the eigenvalues of symmetric matrices ``W`` (..., d, d) from below at ``floor``
    (the spectrum floor of the FedUCB safeguards). Returns the result and the mask of
    matrices that had an eigenvalue below the floor; the others are returned unchanged, bit
    for bit."""
    low, _ = _below_floor(W, floor)
    return _floored(W, floor, low)


def _below_floor(W: np.ndarray, floor: float) -> tuple[np.ndarray, np.ndarray]:
    """Which matrices have an eigenvalue below ``floor``, and which of them by more than
    rounding (:func:`~fedbandit_env.xp.rounding_tolerance` of ``max(1, floor)``: a
    rank-deficient sum of released matrices shows eigenvalues a few ulps under the floor)."""
    smallest = np.linalg.eigvalsh(W)[..., 0]
    low = smallest < floor
    deficit = rounding_tolerance(W.dtype) * max(1.0, abs(floor))
    return low, low & (floor - smallest > deficit)


def _floored(W: np.ndarray, floor: float, low: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``W`` with the spectrum of the matrices in ``low`` clipped at ``floor``, symmetrized."""
    if not low.any():
        return W, low
    out = W.copy()
    vals, vecs = np.linalg.eigh(W[low])
    fixed = (vecs * np.maximum(vals, floor)[..., None, :]) @ vecs.swapaxes(-1, -2)
    out[low] = 0.5 * (fixed + fixed.swapaxes(-1, -2))
    return out, low
