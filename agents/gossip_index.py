"""The gossip paper's index (Zhu, Mulle & Liu, "Federated Bandit: A Gossiping Approach"), one
source for both engines (docs/architecture.md, "Shared kernels"): the exploration bonus of
Eq. (11) (Gossip_UCB) and Eq. (12) (Fed_UCB) and the index Q of Algorithm 1 line 9.

Written against the array namespace of the counts (:mod:`fedbandit_env.xp`): the numpy
learners (:mod:`agents.gossip_ucb`, float64, the round ``t`` a Python int for the whole batch)
and the JAX learners (:mod:`agents.jax.gossip_ucb`, float32, ``t`` a traced scalar) call the
same lines. The constants that hold no array are Python floats, so JAX keeps float32.
"""

from __future__ import annotations

import math
from typing import Any

from fedbandit_env.xp import log_of_round, namespace


def exploration_bonus(
    n: Any,
    t: Any,
    *,
    num_agents: int,
    alpha1: float,
    bonus_scale: float = 1.0,
    epsilon: float = math.inf,
    horizon: int = 1,
    dp_bonus_scale: float = 1.0,
    dp_log_floor: float = 1.0,
) -> Any:
    """C_{i,k}(t) for counts n (the counts before round t's pull), natural logs.

    ``epsilon = inf`` (Gossip_UCB): Eq. (11), ``sqrt(2 N ln t / n) + alpha1``.
    Otherwise (Fed_UCB, Algorithm 4): Eq. (12) as printed,
    ``alpha1 + sqrt(2 N [128 N ln^2 T ln t ln n / (n^2 eps^2) + 1/n] ln t)`` with T the horizon
    in rounds, ``ln n`` read as ``ln max(n, dp_log_floor)`` and 128 times ``dp_bonus_scale``.
    ``bonus_scale`` multiplies the square root in both."""
    xp = namespace(n, t)
    N, ln_t = num_agents, log_of_round(xp, t)
    n = n * 1.0  # integer counts (JAX int32) in the float dtype: n^2 must not overflow
    if math.isinf(epsilon):
        root = xp.sqrt(2 * N * ln_t / n)
    else:
        ln_n = xp.log(xp.maximum(n, dp_log_floor))
        privacy = dp_bonus_scale * 128 * N * math.log(horizon) ** 2 * ln_t * ln_n
        root = xp.sqrt(2 * N * (privacy / (n**2 * epsilon**2) + 1 / n) * ln_t)
    return alpha1 + bonus_scale * root


def index(theta: Any, n: Any, t: Any, **bonus: Any) -> Any:
    """Q_{i,k}(t) = ϑ_{i,k}(t-1) + C_{i,k}(t), Algorithm 1 line 9 (Algorithm 4: with ϑ̃ and the
    bonus of Eq. (12)); ``bonus`` are the keyword arguments of :func:`exploration_bonus`."""
    return theta + exploration_bonus(n, t, **bonus)
