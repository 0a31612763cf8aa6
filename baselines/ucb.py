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
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from baselines.config import KLUCBConfig, UCB1Config
from baselines.index import IndexPolicy, default_scale, unit_interval_bounds
from fedbandit_env.policy import FederationFacts
from fedbandit_env.seeding import BatchedRNG

_EPS = 1e-15


def ucb1_index(
    n: np.ndarray, s: np.ndarray, t: np.ndarray, alpha: float, scale: float
) -> np.ndarray:
    """The UCB1 index of Auer, Cesa-Bianchi and Fischer (2002), ``s / n + scale sqrt(alpha ln t
    / n)`` (their ``x̄_j + sqrt(2 ln n / n_j)`` at ``alpha = 2``, ``scale = 1``), with ``inf`` on
    unpulled arms (``n <= 0``) so that each arm is tried once first; ``t`` broadcasts against
    ``n`` and is read as at least 1."""
    safe = np.maximum(n, 1.0)
    index = s / safe + scale * np.sqrt(alpha * np.log(np.maximum(t, 1.0)) / safe)
    return IndexPolicy.unpulled_to_inf(index, n)


class UCB1(IndexPolicy):
    """UCB1 per agent (module doc)."""

    agent_id = "ucb1"
    version = 3  # results version: one index for both variants

    def __init__(self, alpha: float = 2.0, scale: float | None = None):
        self.config = UCB1Config(self.agent_id, alpha, scale)

    def setup(self, facts: FederationFacts, rng: BatchedRNG) -> None:
        self.scale = default_scale(facts) if self.config.scale is None else self.config.scale

    def index(self, n: np.ndarray, s: np.ndarray, total: np.ndarray) -> np.ndarray:
        return ucb1_index(n, s, total, self.config.alpha, self.scale)

    def own_index(self, step: int) -> np.ndarray:
        """Independent variant: every agent has pulled once per step, so t is the step."""
        return ucb1_index(self.counts, self.sums, float(step), self.config.alpha, self.scale)


class UCB1Shared(UCB1):
    """UCB1 on own plus the neighbours' latest own statistics (:mod:`baselines.index`)."""

    agent_id = "ucb1_shared"
    version = 2  # results version
    shared = True
    payload_layouts = {"neighbors": "counts_sums"}  # [counts (M), sums (M)]


def bernoulli_kl(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """kl(p, q) = p ln(p/q) + (1-p) ln((1-p)/(1-q)), with p, q clipped into (0, 1)."""
    p = np.clip(p, _EPS, 1.0 - _EPS)
    q = np.clip(q, _EPS, 1.0 - _EPS)
    return p * np.log(p / q) + (1.0 - p) * np.log((1.0 - p) / (1.0 - q))


def kl_upper_bound(p: np.ndarray, level: np.ndarray, iterations: int) -> np.ndarray:
    """Largest q in [p, 1] with kl(p, q) <= level, by bisection (kl(p, .) increases on [p, 1])."""
    lo = np.array(p, dtype=np.float64)
    hi = np.ones_like(lo)
    for _ in range(iterations):  # a loop over halvings, not over agents or arms
        mid = 0.5 * (lo + hi)
        ok = bernoulli_kl(p, mid) <= level
        lo = np.where(ok, mid, lo)
        hi = np.where(ok, hi, mid)
    return lo


class KLUCB(IndexPolicy):
    """KL-UCB with the Bernoulli KL per agent (module doc)."""

    agent_id = "kl_ucb"

    def __init__(self, c: float = 0.0, precision: float = 1e-6, bounds: Any = None):
        self.config = KLUCBConfig(self.agent_id, c, precision, bounds)

    def setup(self, facts: FederationFacts, rng: BatchedRNG) -> None:
        self._lo, self._hi = unit_interval_bounds(self.agent_id, facts, self.config.bounds)
        self._iterations = math.ceil(math.log2(1.0 / self.config.precision))

    def transform_reward(self, reward: np.ndarray) -> np.ndarray:
        return (np.clip(reward, self._lo, self._hi) - self._lo) / (self._hi - self._lo)

    def index(self, n: np.ndarray, s: np.ndarray, total: np.ndarray) -> np.ndarray:
        safe = np.maximum(n, 1.0)
        log_t = np.log(np.maximum(total, 1.0))
        budget = log_t + self.config.c * np.log(np.maximum(log_t, 1.0))
        upper = kl_upper_bound(np.clip(s / safe, 0.0, 1.0), budget / safe, self._iterations)
        return self.unpulled_to_inf(upper, n)


class KLUCBShared(KLUCB):
    """KL-UCB on own plus the neighbours' latest own statistics (:mod:`baselines.index`)."""

    agent_id = "kl_ucb_shared"
    shared = True
    payload_layouts = {"neighbors": "counts_sums"}  # [counts (M), sums (M)]
