"""The linear learners' formulas, written once for both engines (docs/architecture.md, "Shared
kernels"): the confidence radius of Proposition 2 (Dubey & Pentland 2020; OFUL's radius,
Abbasi-Yadkori et al. 2011, is its case of one agent with ``lambda I``), the statistics a pull
adds (Algorithm 1) and the rarely-switching sync rule; and the learners' privacy constants
(Section 4.3, :func:`linear_privacy_constants`), the parameters of their Gram-tree privatizer.

Each function is written against the array namespace of its arguments
(:func:`fedbandit_env.xp.namespace`): the numpy learners call it on (B, N, ...) batches in
float64, the JAX learners on one run's (N, ...) arrays in float32. How each engine gets
``ln det V`` is its own business: numpy from ``slogdet``, JAX from a Cholesky factor, relative
to the regularizer and term by term (:mod:`fedbandit_env.jax.linear_kernels`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

from fedbandit_env.privacy.calibration import (
    check_delta,
    check_epsilon,
    check_index,
    check_noise_scale,
    check_positive,
)
from fedbandit_env.privacy.errors import PrivacyError
from fedbandit_env.xp import log_of, namespace, sqrt_of

LambdaForm = Literal["paper", "sqrt2m"]


def confidence_radius(
    logdet: Any,
    log_scale: Any,
    *,
    alpha: float,
    sigma: float,
    S: float,
    rho_max: float,
    kappa: float = 0.0,
    group: Any = 1,
    beta_scale: float = 1.0,
) -> Any:
    """Proposition 2's radius for a group of ``group`` agents, with ``ln det V`` in the radicand
    (not the printed ``d ln det V``; docs/linear.md, "Decisions"), clamped at 0:

        sigma sqrt(2 ln(2/alpha) + ln det V - d ln(c rho_min)) + S sqrt(c rho_max) + kappa sqrt(c)

    ``logdet - log_scale`` is ``ln det V - d ln(c rho_min)``: numpy passes ``ln det V`` and
    ``d ln(c rho_min)``, JAX the difference (summed term by term) and 0. OFUL with ``lambda I``
    is one agent, ``rho_max = lambda``, ``kappa = 0``. ``group`` is a number or an array (one
    clique size per agent). The radius is multiplied by ``beta_scale``."""
    xp = namespace(logdet, group)
    radicand = 2.0 * log_of(xp, 2.0 / alpha) + logdet - log_scale
    beta = (
        sigma * xp.sqrt(xp.maximum(radicand, 0.0))
        + S * sqrt_of(xp, group * rho_max)
        + kappa * sqrt_of(xp, group)
    )
    return beta_scale * beta


def pull_terms(x: Any, y: Any, leaf: bool = False) -> tuple[Any, ...]:
    """What a pull (x, y) adds to the statistics (Algorithm 1): ``x x^T`` and ``y x``, and with
    ``leaf`` also ``z z^T`` of ``z = [x; y]`` (the privatizer's leaf, Algorithm 2)."""
    xp = namespace(x, y)
    xx = xp.einsum("...i,...j->...ij", x, x)
    yx = y[..., None] * x
    if not leaf:
        return xx, yx
    z = xp.concatenate([x, y[..., None]], axis=-1)
    return xx, yx, xp.einsum("...i,...j->...ij", z, z)


def clip_rewards(y: Any, bound: float) -> tuple[Any, Any]:
    """``y`` clipped to [-bound, bound] (a private agent: the privacy calibration needs
    ``|y| <= B``) and where it was clipped."""
    xp = namespace(y)
    clipped = xp.clip(y, -bound, bound)
    return clipped, clipped != y


def rarely_switching(logdet_new: Any, logdet_ref: Any, weight: Any, threshold: float) -> Any:
    """The log-det sync rule (Dubey & Pentland, Algorithm 1; Wang et al. 2020's DisLinUCB):
    ``weight (ln det V_new - ln det V_ref) >= D``, with ``weight`` the trials since the last
    sync (counted as each learner documents)."""
    return weight * (logdet_new - logdet_ref) >= threshold


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
        return float(
            confidence_radius(
                logdet_v,
                self.d * math.log(M * self.rho_min),
                alpha=self.alpha,
                sigma=sigma,
                S=S,
                rho_max=self.rho_max,
                kappa=self.kappa,
                group=M,
            )
        )

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
    Pentland, Section 4.3 and Proposition 4, with the decisions of docs/privacy.md, "Decisions"
    (Gram tree): the Lambda form, kappa as printed, n and m, ``Lt2 = L^2 + B^2``, gamma.

    ``n_max`` is the number of releases of a fixed schedule (None: adaptive, n = T, or
    ``ceil(T/gamma)`` for the decentralized variant with TTL ``gamma``).
    """
    epsilon = check_epsilon(epsilon, allow_inf=False)
    delta = check_delta(delta)
    alpha = check_delta(alpha, name="alpha")
    d, num_agents = check_index(d, "d"), check_index(num_agents, "num_agents")
    horizon, gamma = check_index(horizon, "horizon"), check_index(gamma, "gamma")
    L, B = check_positive(L, "L"), check_positive(B, "B")
    if not isinstance(lambda_form, str) or lambda_form not in ("paper", "sqrt2m"):
        raise PrivacyError("lambda_form", "'paper' or 'sqrt2m'", lambda_form)
    n = -(-horizon // gamma) if n_max is None else check_index(n_max, "n_max")
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
    return GramTreeConstants(
        epsilon,
        delta,
        alpha,
        d,
        num_agents,
        horizon,
        L,
        B,
        gamma,
        n,
        m,
        lt2,
        sigma_N,
        Lambda,
        Lambda,
        3.0 * Lambda,
        kappa,
    )
