"""What the centralized and decentralized FedUCB agents share (specs/linear.md §2.1–2.3).

:class:`FedUCBBase` validates the common parameters (epsilon, delta, alpha, private, sync
threshold, beta_scale, lambda, sigma, S), folds an observation into per-slot statistics and
computes the Proposition-2 radius for a group size (M centrally, the clique size c_i in the
decentralized variant, A21).
"""

from __future__ import annotations

import math

import numpy as np

from baselines.index import check_number
from fedbandit_env.engine import VecObservation
from fedbandit_env.errors import ConfigError
from fedbandit_env.policy import TeamPolicy


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
    ):
        aid = self.agent_id
        self.private = bool(private)
        if self.private and not (
            isinstance(epsilon, int | float)
            and not isinstance(epsilon, bool)
            and 0 < epsilon < math.inf
        ):
            raise ConfigError(
                f"{aid}: epsilon: expected a finite number > 0 (private=False for "
                f"no privacy), got {epsilon!r}"
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

    @property
    def privacy_epsilon(self) -> float:
        """Declared guarantee: (epsilon, delta)-DP per agent (``inf`` when ``private=False``)."""
        return self.epsilon

    def fold(
        self, obs: VecObservation, context: np.ndarray, rows: tuple, into: tuple[np.ndarray, ...]
    ) -> None:
        """Add the last pull (x from ``context``, y) to ``(U, u, G, g, Q)`` views (B, N, ...)."""
        U, u, G, g, Q = into
        b, i = rows
        x = context[b, i, obs.last_arm]
        y = obs.last_reward
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
        logdet = np.linalg.slogdet(V)[1]
        radicand = 2.0 * math.log(2.0 / self.alpha) + logdet - d * np.log(group * self.rho_min)
        beta = (
            self.sigma * np.sqrt(np.maximum(radicand, 0.0))
            + self.S * np.sqrt(group * self.rho_max)
            + self.kappa * np.sqrt(group)
        )
        return self.beta_scale * beta
