"""Thompson sampling, independent per agent or sharing statistics (see :mod:`baselines.index`).

* :class:`ThompsonBeta` (ids ``thompson_beta``, ``thompson_beta_shared``): Beta(1, 1) priors on
  Bernoulli arms (Agrawal and Goyal, 2012). Rewards are mapped to [0, 1] through the reward bounds
  and, when not binary, replaced by a Bernoulli draw with that success probability (the
  Bernoulli trick of Agrawal and Goyal, Algorithm 2), one ``bernoulli_trick`` uniform per agent
  and step; for Bernoulli rewards the trick is the identity. ``sums`` then count successes and
  the sample of arm k is Beta(1 + s_k, 1 + n_k - s_k) = G1 / (G1 + G2) with G1, G2 Gamma
  variates from :func:`gamma_marsaglia_tsang`.
* :class:`ThompsonGaussian` (ids ``thompson_gaussian``, ``thompson_gaussian_shared``): the
  Gaussian-prior version of Agrawal and Goyal (2013): the sample of arm k is
  ``N(s_k / (n_k + 1), scale^2 / (n_k + 1))`` with ``scale`` the reward range (1 for sigma = 1
  Gaussian rewards), from a fixed-shape buffered normal stream.

**Why not numpy's Beta sampler.** ``Generator.beta`` is a rejection sampler: how many numbers
it consumes depends on the parameters, so with one generator per run agent j's statistics would
shift the random numbers agent i gets, a light-cone violation through the RNG (the light-cone test
caught it). The Gamma variates are therefore drawn with a fixed budget per agent, arm and step:
Marsaglia and Tsang (2000) with ``ATTEMPTS`` = 4 candidate (normal, uniform) pairs from fixed-shape
buffered streams, keeping the first accepted candidate. For shape a >= 1 (always the case here)
each candidate is accepted with probability >= 0.95, so all four fail with probability < 1e-5 per
variate; then the last candidate is used unchecked (its Wilson-Hilferty approximation), a
documented and negligible deviation from exact Beta sampling.

The shared variants send their own ``(counts, sums)`` (for Beta: the counts of successes after
the trick) and sample from the sum of own and neighbours' latest statistics. The formulas are
:mod:`baselines.formulas`, shared with the JAX learners.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from baselines.config import ThompsonBetaConfig, ThompsonGaussianConfig
from baselines.formulas import (
    ATTEMPTS,
    bernoulli_trick,
    beta_posterior_sample,
    gaussian_posterior_sample,
    unit_reward,
)
from baselines.index import IndexPolicy
from fedbandit_env.policy import FederationFacts
from fedbandit_env.seeding import BatchedRNG


class ThompsonBeta(IndexPolicy):
    """Beta-Bernoulli Thompson sampling with the Bernoulli trick (module doc)."""

    agent_id = "thompson_beta"
    ties = False  # continuous samples: exact ties have probability zero
    uses_total = False
    # not random delays: the Bernoulli trick draws one uniform per agent and pull
    event_time = ("clock", "reward_delay", "latency", "churn")
    version = 1  # results version

    def __init__(self, bounds: Any = None):
        self.config = ThompsonBetaConfig(self.agent_id, bounds)

    def setup(self, facts: FederationFacts, rng: BatchedRNG) -> None:
        self._trick = rng.child("bernoulli_trick").buffered("uniform", (facts.num_agents,))
        shape = (facts.num_agents, facts.num_arms, 2, ATTEMPTS)
        posterior = rng.child("posterior")
        self._normal = posterior.child("normal").buffered("normal", shape)
        self._uniform = posterior.child("uniform").buffered("uniform", shape)

    def transform_reward(self, reward: np.ndarray) -> np.ndarray:
        p = self.params
        return bernoulli_trick(self._trick.next(), unit_reward(reward, p.lo, p.hi))

    def index(self, n: np.ndarray, s: np.ndarray, total: np.ndarray) -> np.ndarray:
        return beta_posterior_sample(n, s, self._normal.next(), self._uniform.next())


class ThompsonBetaShared(ThompsonBeta):
    """Beta Thompson sampling on own plus the neighbours' latest own statistics."""

    agent_id = "thompson_beta_shared"
    shared = True
    payload_layouts = {"neighbors": "counts_sums"}  # [counts (M), sums (M)]


class ThompsonGaussian(IndexPolicy):
    """Gaussian-prior Thompson sampling (module doc)."""

    agent_id = "thompson_gaussian"
    ties = False  # continuous samples: exact ties have probability zero
    uses_total = False
    version = 1  # results version

    def __init__(self, scale: float | None = None):
        self.config = ThompsonGaussianConfig(self.agent_id, scale)

    def setup(self, facts: FederationFacts, rng: BatchedRNG) -> None:
        shape = (facts.num_agents, facts.num_arms)
        self._normal = rng.child("posterior").buffered("normal", shape)

    def index(self, n: np.ndarray, s: np.ndarray, total: np.ndarray) -> np.ndarray:
        """A sample of N(s / (n + 1), scale^2 / (n + 1)) per arm (Agrawal and Goyal 2013)."""
        return gaussian_posterior_sample(n, s, self._normal.next(), self.params.scale)


class ThompsonGaussianShared(ThompsonGaussian):
    """Gaussian Thompson sampling on own plus the neighbours' latest own statistics."""

    agent_id = "thompson_gaussian_shared"
    shared = True
    payload_layouts = {"neighbors": "counts_sums"}  # [counts (M), sums (M)]
