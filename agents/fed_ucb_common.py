"""What the centralized and decentralized FedUCB agents share (specs/linear.md §2.1–2.3).

:class:`FedUCBBase` validates the common parameters (epsilon, delta, alpha, private, sync
threshold, beta_scale, lambda, sigma, S, L, B, eig_floor), folds an observation into per-slot
statistics and computes the Proposition-2 radius for a group size (M centrally, the clique size
c_i in the decentralized variant, A21).

Two safeguards of the private agents live here:

* **Reward clipping (§6, A26).** The privacy noise is calibrated for ``|y| <= B`` (sensitivity
  through ``L^2 + B^2``). A private agent clips every reward to ``[-B, B]`` before it enters any
  statistic (its own ``U, u`` and the privatized ``Q``), so Gaussian rewards keep the guarantee;
  ``clipped_rewards`` counts the clipped rewards per run and agent. Bernoulli rewards with the
  default ``B = 1`` are never clipped. Non-private agents use the rewards as they are.
* **Eigenvalue floor (A28, §2.10).** A noise draw outside its high-probability bound can leave the
  synchronized ``W`` indefinite. :func:`floor_spectrum` clips the eigenvalues of ``W`` from below
  at ``eig_floor`` (default rho_min: Lambda when private, lambda when not; post-processing, so the
  privacy guarantee is unaffected) and the agents count the events in ``eig_clip_events``; noise
  is never redrawn. A ``W`` that is already above the floor is kept bit for bit. The spec asks
  for "a small floor" without a value: rho_min is one agent's lower spectral bound, far below the
  ``M rho_min`` (``c_i rho_min``) that an accurate W has, and keeps V well conditioned.
"""

from __future__ import annotations

import math

import numpy as np

from fedbandit_env.engine import VecObservation
from fedbandit_env.kernels import check_number
from fedbandit_env.policy import TeamPolicy
from fedbandit_env.validation import ConfigTypeError, check_real


class FedUCBBase(TeamPolicy):
    """Common parameters and numerics of the FedUCB agents."""

    def __init__(
        self,
        epsilon: float,
        delta: float,
        alpha: float,
        private: bool,
        sync_threshold: float | None,
        beta_scale: float,
        lam: float,
        sigma: float,
        S: float,
        L: float = 1.0,
        B: float = 1.0,
        eig_floor: float | None = None,
    ):
        aid = self.agent_id
        if not isinstance(private, bool | np.bool_):
            raise ConfigTypeError(f"{aid}: private: expected True or False, got {private!r}")
        self.private = bool(private)
        if self.private:
            epsilon = check_real(
                "epsilon", epsilon, hint="private=False for no privacy", low=0.0, low_open=True,
                where=aid,
            )
        self.epsilon = float(epsilon) if self.private else math.inf
        self.delta = check_number(aid, "delta", delta, 1e-300, 1.0 - 1e-12)
        self.alpha = check_number(aid, "alpha", alpha, 1e-300, 1.0 - 1e-12)
        self.D = (
            None
            if sync_threshold is None
            else check_number(aid, "sync_threshold", sync_threshold, 0.0)
        )
        self.beta_scale = check_number(aid, "beta_scale", beta_scale, 0.0)
        self.lam = check_number(aid, "lam", lam, 1e-12)
        self.sigma = check_number(aid, "sigma", sigma, 0.0)
        self.S = check_number(aid, "S", S, 0.0)
        self.L = check_number(aid, "L", L, 1e-12)
        self.B = check_number(aid, "B", B, 1e-12)
        self.eig_floor_arg = (
            None if eig_floor is None else check_number(aid, "eig_floor", eig_floor, 1e-300)
        )

    def init_safeguards(self, runs: int, n_agents: int) -> None:
        """Counters of the reward clipping and the A28 floor (call from ``reset`` once
        ``rho_min`` is known): ``clipped_rewards`` (B, N), ``eig_clip_events`` (B,)."""
        self.eig_floor = self.rho_min if self.eig_floor_arg is None else self.eig_floor_arg
        self.clipped_rewards = np.zeros((runs, n_agents), dtype=np.int64)
        self.eig_clip_events = np.zeros(runs, dtype=np.int64)

    def floor_W(self, W: np.ndarray, run: np.ndarray) -> np.ndarray:
        """A28: ``W`` (k, d, d) with its spectrum floored at ``eig_floor``; one event per
        floored matrix is added to ``eig_clip_events`` of its run (``run`` (k,) run indices),
        unless its deficit under the floor is only rounding (:data:`ROUNDING_DEFICIT`: it is
        floored all the same, but not counted)."""
        low, real = _below_floor(W, self.eig_floor)
        W, _ = _floored(W, self.eig_floor, low)
        if real.any():
            self.eig_clip_events += np.bincount(run[real], minlength=len(self.eig_clip_events))
        return W

    def logdet(self, V: np.ndarray) -> np.ndarray:
        """``ln det V`` of positive-definite matrices; an indefinite V (which the A28 floor
        rules out) raises instead of silently dropping the sign."""
        sign, logdet = np.linalg.slogdet(V)
        if np.any(sign <= 0):
            raise FloatingPointError(
                f"{self.agent_id}: a Gram matrix V is not positive definite (the A28 floor "
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
        """Add the last pull (x from ``context``, y) to ``(U, u, G, g, Q)`` views (B, N, ...);
        ``runs`` (B,) bool: only in these runs (the others took a communication step)."""
        U, u, G, g, Q = into
        b, i = rows
        x = context[b, i, obs.last_arm]
        y = obs.last_reward
        if runs is not None:  # zero contributions where nothing was pulled
            x = np.where(runs[:, None, None], x, 0.0)
            y = np.where(runs[:, None], y, 0.0)
        if self.private:  # §6: the privacy calibration needs |y| <= B
            clipped = np.clip(y, -self.B, self.B)
            self.clipped_rewards += clipped != y
            y = clipped
        xx = np.einsum("bni,bnj->bnij", x, x)
        z = np.concatenate([x, y[..., None]], axis=-1)
        U += xx
        u += y[..., None] * x
        G += xx
        g += y[..., None] * x
        Q += np.einsum("bni,bnj->bnij", z, z)

    def radius(self, V: np.ndarray, group: np.ndarray | float) -> np.ndarray:
        """Proposition 2 (A5 form, radicand clamped at 0) for a group size, times beta_scale:
        sigma sqrt(2 ln(2/alpha) + ln det V - d ln(c rho_min)) + S sqrt(c rho_max) + kappa sqrt(c)."""
        d = V.shape[-1]
        logdet = self.logdet(V)
        radicand = 2.0 * math.log(2.0 / self.alpha) + logdet - d * np.log(group * self.rho_min)
        beta = (
            self.sigma * np.sqrt(np.maximum(radicand, 0.0))
            + self.S * np.sqrt(group * self.rho_max)
            + self.kappa * np.sqrt(group)
        )
        return self.beta_scale * beta


ROUNDING_DEFICIT = 1e-12
"""Relative size (of ``max(1, floor)``) below which a matrix's deficit under the floor is
rounding, not a real clip: a rank-deficient sum of released matrices shows eigenvalues a few
ulps under the floor (1e-15), which :meth:`FedUCBSafeguards.floor_W` floors but does not
count."""


def floor_spectrum(W: np.ndarray, floor: float) -> tuple[np.ndarray, np.ndarray]:
    """Clip the eigenvalues of symmetric matrices ``W`` (..., d, d) from below at ``floor``
    (A28 of the FedUCB safeguards: the spectrum floor). Returns the result and the mask of
    matrices that had an eigenvalue below the floor; the others are returned unchanged, bit
    for bit."""
    low, _ = _below_floor(W, floor)
    return _floored(W, floor, low)


def _below_floor(W: np.ndarray, floor: float) -> tuple[np.ndarray, np.ndarray]:
    """Which matrices have an eigenvalue below ``floor``, and which of them by more than
    rounding (:data:`ROUNDING_DEFICIT`)."""
    smallest = np.linalg.eigvalsh(W)[..., 0]
    low = smallest < floor
    return low, low & (floor - smallest > ROUNDING_DEFICIT * max(1.0, abs(floor)))


def _floored(W: np.ndarray, floor: float, low: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    if not low.any():
        return W, low
    out = W.copy()
    vals, vecs = np.linalg.eigh(W[low])
    fixed = (vecs * np.maximum(vals, floor)[..., None, :]) @ vecs.swapaxes(-1, -2)
    out[low] = 0.5 * (fixed + fixed.swapaxes(-1, -2))
    return out, low
