"""Theory of the gossip paper (Zhu et al., Section 4: Theorems 1 and 2): constants and the regret
bounds.

lambda2 is :func:`fedbandit_env.graphs.gossip_lambda2` (the second-largest eigenvalue of the
expected gossip matrix I - L/(2|E|)). All bounds are per agent and use natural logs.
"""

from __future__ import annotations

import math

import numpy as np

from fedbandit_env.graphs import gossip_lambda2

__all__ = [
    "alpha1",
    "alpha2",
    "alpha3",
    "constant_L",
    "eq12_bonus",
    "gossip_lambda2",
    "theorem1_bound",
    "theorem2_bound",
]


def alpha1(num_agents: int) -> float:
    """alpha1 = 64 / N^17, the constant of Eq. (11), kept literally (docs/gossip.md, "Decisions")."""
    return 64.0 / num_agents**17


def constant_L(lambda2: float, num_agents: int, max_t: int = 10**8) -> int:
    """The smallest integer L with lambda2^(t/6) / (1 - lambda2^(1/3)) < 1/(N t) for every t >= L.

    The left side decays geometrically and the right side like 1/t, so the condition fails on an
    initial stretch only; L is one past the last failing t (searched up to ``max_t``)."""
    if not 0.0 <= lambda2 < 1.0:
        raise ValueError(f"lambda2: expected a number in [0, 1), got {lambda2}")
    denom = 1.0 - lambda2 ** (1.0 / 3.0)
    if lambda2 == 0.0:
        return 1
    # log form: (t/6) ln(lambda2) - ln(denom) < -ln(N t)
    hi = 16
    t = np.arange(1, hi + 1, dtype=np.float64)
    while True:
        t = np.arange(1, hi + 1, dtype=np.float64)
        fails = t / 6.0 * math.log(lambda2) - math.log(denom) >= -np.log(num_agents * t)
        if not fails[hi // 2 :].any() or hi >= max_t:
            break
        hi *= 2
    failing = np.nonzero(fails)[0]
    return int(failing[-1] + 2) if failing.size else 1


def alpha2(lambda2: float, num_agents: int, num_arms: int) -> float:
    """alpha2 = (3M - 1) N + 2 pi^2 / 3 + 2 lambda2^(1/12) / ((1 - lambda2^(1/3))(1 - lambda2^(1/12)))."""
    tail = 2.0 * lambda2 ** (1 / 12) / ((1 - lambda2 ** (1 / 3)) * (1 - lambda2 ** (1 / 12)))
    return (3 * num_arms - 1) * num_agents + 2 * math.pi**2 / 3 + tail


def alpha3(lambda2: float, num_agents: int, num_arms: int) -> float:
    """alpha3 = alpha2 + 4 N."""
    return alpha2(lambda2, num_agents, num_arms) + 4 * num_agents


def _gaps(global_means: np.ndarray) -> np.ndarray:
    mu = np.asarray(global_means, dtype=np.float64)
    gaps = mu.max() - mu
    return gaps[gaps > 0]


def theorem1_bound(
    horizon: int, global_means: np.ndarray, lambda2: float, num_agents: int
) -> float:
    """Theorem 1 (Gossip_UCB), every agent i:
    R_i(T) < sum_{k: Delta_k > 0} Delta_k (max{2 N ln T / (Delta_k/2 - alpha1)^2, L, (3M+1) N}
    + alpha2)."""
    n, m = num_agents, len(global_means)
    a1, big_l = alpha1(n), constant_L(lambda2, n)
    total = 0.0
    for gap in _gaps(global_means):
        first = 2 * n * math.log(horizon) / (gap / 2 - a1) ** 2
        total += gap * (max(first, big_l, (3 * m + 1) * n) + alpha2(lambda2, n, m))
    return total


def theorem2_bound(
    horizon: int, global_means: np.ndarray, lambda2: float, num_agents: int, epsilon: float
) -> float:
    """Theorem 2 (Fed_UCB), every agent i, with delta_k = Delta_k/2 - alpha1:
    R_i(T) < sum Delta_k (max{N ln T (1 + sqrt(1 + (16 delta_k / eps)^2 ln^3 T)) / delta_k^2, L,
    (3M+1) N} + 4 N ln T + alpha3)."""
    n, m = num_agents, len(global_means)
    a1, big_l, ln_t = alpha1(n), constant_L(lambda2, n), math.log(horizon)
    total = 0.0
    for gap in _gaps(global_means):
        d = gap / 2 - a1
        first = n * ln_t * (1 + math.sqrt(1 + (16 * d / epsilon) ** 2 * ln_t**3)) / d**2
        total += gap * (max(first, big_l, (3 * m + 1) * n) + 4 * n * ln_t + alpha3(lambda2, n, m))
    return total


def eq12_bonus(
    t: int,
    n: float,
    num_agents: int,
    horizon: int,
    epsilon: float,
    dp_bonus_scale: float = 1.0,
    dp_log_floor: float = 1.0,
) -> tuple[float, float]:
    """Fed_UCB's bonus C(t) of Eq. (12) for an arm pulled n times, without alpha1, and its
    privacy part (the bonus minus the Eq. (11) bonus sqrt(2 N ln t / n)):
    C = sqrt(2 N ln t / n (1 + s 128 N ln^2 T ln t ln max(n, floor) / (n eps^2)))."""
    base = 2.0 * num_agents * math.log(t) / n
    if math.isinf(epsilon):
        return math.sqrt(base), 0.0
    dp = (
        dp_bonus_scale
        * 128.0
        * num_agents
        * math.log(horizon) ** 2
        * math.log(t)
        * math.log(max(n, dp_log_floor))
        / (n * epsilon**2)
    )
    total = math.sqrt(base * (1.0 + dp))
    return total, total - math.sqrt(base)
