"""Optimism baselines: UCB1 and KL-UCB, independent per agent or sharing statistics.

* :class:`UCB1` (ids ``ucb1``, ``ucb1_shared``): Auer, Cesa-Bianchi and Fischer (2002),
  index ``mean_k + scale * sqrt(alpha * ln t / n_k)`` (:func:`ucb1_index`) with ``alpha = 2`` by
  default, ``t`` the number of samples the agent's statistics hold (own pulls, plus the
  neighbours' in the shared variant; see :mod:`baselines.index`) and ``scale`` the reward range
  (1 for sigma = 1 Gaussian rewards). Unpulled arms have an infinite index, so each arm is tried once first (uniform
  tie-break).
* :class:`KLUCB` (ids ``kl_ucb``, ``kl_ucb_shared``): Garivier and Cappé (2011) with the Bernoulli
  KL divergence: the index of arm k is the largest q in [p_k, 1] with
  ``n_k * kl(p_k, q) <= ln t + c ln ln t`` (``c = 0`` by default, the value the paper recommends
  in practice), with rewards mapped to [0, 1] through the reward bounds. The root is found by a
  vectorized bisection over (B, N, M) with a fixed number of halvings (``precision`` 1e-6 by
  default), so there is no Python loop over agents or arms.

The formulas are :mod:`baselines.formulas`, shared with the JAX learners.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from baselines.config import KLUCBConfig, UCB1Config
from baselines.formulas import kl_ucb_index, ucb1_index, unit_reward
from baselines.index import IndexPolicy


class UCB1(IndexPolicy):
    """UCB1 per agent (module doc)."""

    agent_id = "ucb1"
    version = 3  # results version: one index for both variants

    def __init__(self, alpha: float = 2.0, scale: float | None = None):
        self.config = UCB1Config(self.agent_id, alpha, scale)

    def index(self, n: np.ndarray, s: np.ndarray, total: np.ndarray) -> np.ndarray:
        return ucb1_index(n, s, total, self.params.alpha, self.params.scale)

    def own_index(self, step: int) -> np.ndarray:
        """Independent variant: under lock-step every agent has pulled once per step, so t is
        the step; under an event clock or delayed rewards t is the rewards the agent has."""
        p = self.params
        t = float(step) if self.lock_step else self.pulls
        return ucb1_index(self.counts, self.sums, t, p.alpha, p.scale)


class UCB1Shared(UCB1):
    """UCB1 on own plus the neighbours' latest own statistics (:mod:`baselines.index`)."""

    agent_id = "ucb1_shared"
    version = 2  # results version
    shared = True
    payload_layouts = {"neighbors": "counts_sums"}  # [counts (M), sums (M)]


class KLUCB(IndexPolicy):
    """KL-UCB with the Bernoulli KL per agent (module doc)."""

    agent_id = "kl_ucb"

    def __init__(self, c: float = 0.0, precision: float = 1e-6, bounds: Any = None):
        self.config = KLUCBConfig(self.agent_id, c, precision, bounds)

    def transform_reward(self, reward: np.ndarray) -> np.ndarray:
        return unit_reward(reward, self.params.lo, self.params.hi)

    def index(self, n: np.ndarray, s: np.ndarray, total: np.ndarray) -> np.ndarray:
        return kl_ucb_index(n, s, total, self.params.c, self.params.iterations)


class KLUCBShared(KLUCB):
    """KL-UCB on own plus the neighbours' latest own statistics (:mod:`baselines.index`)."""

    agent_id = "kl_ucb_shared"
    shared = True
    payload_layouts = {"neighbors": "counts_sums"}  # [counts (M), sums (M)]
