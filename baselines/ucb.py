"""Optimism baselines: UCB1 and KL-UCB, independent per agent or sharing statistics.

* :class:`UCB1` (ids ``ucb1``, ``ucb1_shared``): Auer, Cesa-Bianchi and Fischer (2002),
  index ``mean_k + scale * sqrt(alpha * ln t / n_k)`` with ``alpha = 2`` by default, ``t`` the
  number of samples the agent's statistics hold (own pulls, plus the neighbours' in the shared
  variant; see :mod:`baselines.index`) and ``scale`` the reward range (1 for sigma = 1 Gaussian
  rewards). Unpulled arms have an infinite index, so each arm is tried once first (uniform
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

from baselines.index import (
    IndexPolicy,
    check_number,
    default_scale,
    unit_interval_bounds,
)
from fedbandit_env.policy import FederationFacts
from fedbandit_env.seeding import BatchedRNG

_EPS = 1e-15


class UCB1(IndexPolicy):
    """UCB1 per agent (module doc)."""

    agent_id = "ucb1"

    def __init__(self, alpha: float = 2.0, scale: float | None = None):
        self.alpha = check_number(self.agent_id, "alpha", alpha, 0.0)
        self.scale = None if scale is None else check_number(self.agent_id, "scale", scale, 0.0)

    def setup(self, facts: FederationFacts, rng: BatchedRNG) -> None:
        self._scale = default_scale(facts) if self.scale is None else self.scale
        if not self.shared:  # flat per-arm state: only the pulled arm changes each step
            self._mean = np.zeros_like(self.counts)
            self._rsqrt = np.zeros_like(self.counts)  # 1 / sqrt(n)
            self._buf = np.empty_like(self.counts)

    def on_pull(self, flat: np.ndarray) -> None:
        n = self._counts_flat[flat]
        self._mean.reshape(-1)[flat] = self._sums_flat[flat] / n
        self._rsqrt.reshape(-1)[flat] = 1.0 / np.sqrt(n)

    def own_index(self, step: int) -> np.ndarray:
        """mean + [scale sqrt(alpha ln t)] / sqrt(n): t = step is the same for every agent, so
        the bonus is one scalar times the kept 1/sqrt(n) (one multiply-add per arm)."""
        c = self._scale * math.sqrt(self.alpha * math.log(max(step, 1)))
        index = np.multiply(self._rsqrt, c, out=self._buf)
        index += self._mean
        return self.unpulled_to_inf(index, self.counts)

    def index(self, n: np.ndarray, s: np.ndarray, total: np.ndarray) -> np.ndarray:
        # the same floating-point operations as mean + scale * sqrt(alpha ln t / n), in place
        safe = n if self._all_pulled else np.maximum(n, 1.0)
        bonus = np.divide(self.alpha * np.log(np.maximum(total, 1.0)), safe)
        np.sqrt(bonus, out=bonus)
        bonus *= self._scale
        index = np.divide(s, safe)
        index += bonus
        return self.unpulled_to_inf(index, n)


class UCB1Shared(UCB1):
    """UCB1 on own plus the neighbours' latest own statistics (:mod:`baselines.index`)."""

    agent_id = "ucb1_shared"
    shared = True


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
        self.c = check_number(self.agent_id, "c", c, 0.0)
        self.precision = check_number(self.agent_id, "precision", precision, 1e-12, 0.5)
        self.bounds = bounds

    def setup(self, facts: FederationFacts, rng: BatchedRNG) -> None:
        self._lo, self._hi = unit_interval_bounds(self.agent_id, facts, self.bounds)
        self._iterations = math.ceil(math.log2(1.0 / self.precision))

    def transform_reward(self, reward: np.ndarray) -> np.ndarray:
        return (np.clip(reward, self._lo, self._hi) - self._lo) / (self._hi - self._lo)

    def index(self, n: np.ndarray, s: np.ndarray, total: np.ndarray) -> np.ndarray:
        safe = np.maximum(n, 1.0)
        log_t = np.log(np.maximum(total, 1.0))
        budget = log_t + self.c * np.log(np.maximum(log_t, 1.0))
        upper = kl_upper_bound(np.clip(s / safe, 0.0, 1.0), budget / safe, self._iterations)
        return self.unpulled_to_inf(upper, n)


class KLUCBShared(KLUCB):
    """KL-UCB on own plus the neighbours' latest own statistics (:mod:`baselines.index`)."""

    agent_id = "kl_ucb_shared"
    shared = True
