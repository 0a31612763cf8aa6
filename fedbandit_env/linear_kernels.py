"""The linear learners' formulas, written once for both engines (docs/architecture.md, "Shared
kernels"): the confidence radius of Proposition 2 (Dubey & Pentland 2020; OFUL's radius,
Abbasi-Yadkori et al. 2011, is its case of one agent with ``lambda I``), the statistics a pull
adds (Algorithm 1) and the rarely-switching sync rule.

Each function is written against the array namespace of its arguments
(:func:`fedbandit_env.xp.namespace`): the numpy learners call it on (B, N, ...) batches in
float64, the JAX learners on one run's (N, ...) arrays in float32. How each engine gets
``ln det V`` is its own business: numpy from ``slogdet``, JAX from a Cholesky factor, relative
to the regularizer and term by term (:mod:`fedbandit_env.jax.linear_kernels`).
"""

from __future__ import annotations

import math
from typing import Any

from fedbandit_env.xp import namespace


def _sqrt(xp: Any, value: Any) -> Any:
    """``sqrt`` of a Python number in float64 (``math``), of an array in its own dtype."""
    return math.sqrt(value) if isinstance(value, int | float) else xp.sqrt(value)


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
    radicand = 2.0 * math.log(2.0 / alpha) + logdet - log_scale
    beta = (
        sigma * xp.sqrt(xp.maximum(radicand, 0.0))
        + S * _sqrt(xp, group * rho_max)
        + kappa * _sqrt(xp, group)
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
