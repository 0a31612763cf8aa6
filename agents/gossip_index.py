"""The gossip paper's index and updates (Zhu, Mulle & Liu, "Federated Bandit: A Gossiping
Approach"), one source for both engines (docs/architecture.md, "Shared kernels"): the exploration
bonus of Eq. (11) (Gossip_UCB) and Eq. (12) (Fed_UCB), the index Q of Algorithm 1 line 9, the
decision of lines 3-13 (:func:`decide`) and the gossip update of lines 17-22
(:func:`gossip_update`).

Written against the array namespace of the counts (:mod:`fedbandit_env.xp`): the numpy
learners (:mod:`agents.gossip_ucb`, float64, the round ``t`` a Python int for the whole batch)
and the JAX learners (:mod:`agents.jax.gossip_ucb`, float32, ``t`` a traced scalar) call the
same lines. The constants that hold no array are Python floats, so JAX keeps float32.
"""

from __future__ import annotations

import math
from typing import Any

from fedbandit_env.ties import argmax_one_uniform
from fedbandit_env.xp import is_inf, log_of_round, namespace


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
    if is_inf(epsilon):
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


def decide(theta: Any, n: Any, ntil: Any, t: Any, u: Any, **bonus: Any) -> Any:
    """Algorithm 1 lines 3-13: a lagging arm (line 6: ``n < ñ - N``) if the agent has one,
    uniformly among them (line 13), else an arg-max of Q (lines 9-10), uniform on ties. One
    uniform ``u`` per agent and round makes either choice: the ``floor(u k)``-th of the ``k``
    lagging arms, or of the ``k`` tied maxima (:func:`~fedbandit_env.ties.argmax_one_uniform`).
    ``bonus`` are the keyword arguments of :func:`exploration_bonus` (N is its ``num_agents``)."""
    xp = namespace(theta, n, u)
    q = index(theta, n, t, **bonus)  # line 9
    lagging = n < ntil - bonus["num_agents"]  # line 6
    q = xp.where(lagging, xp.inf, q)  # a lagging arm goes first (lines 7 and 13)
    return argmax_one_uniform(q, u)


def gossip_update(theta: Any, gossip: Any, xbar: Any, xbar_before: Any) -> Any:
    """Algorithm 1 lines 17-22: ϑ averaged with the partner's ϑ_j(t-1) where the gossip
    delivery arrived (``gossip.received`` (..., N), ``gossip.payload`` (..., N, M)), then moved
    by the agent's own change of mean, ``+ X̄(t) - X̄(t-1)``."""
    xp = namespace(theta, gossip.payload)
    averaged = 0.5 * (theta + gossip.payload)  # line 20
    mixed = xp.where(gossip.received[..., None], averaged, theta)
    return mixed + (xbar - xbar_before)  # lines 20 and 22
