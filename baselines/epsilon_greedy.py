"""Epsilon-greedy, independent per agent (``epsilon_greedy``) or sharing statistics
(``epsilon_greedy_shared``, see :mod:`baselines.index`).

Each step every agent, with probability ``epsilon``, pulls a uniformly random arm; otherwise it
pulls an arm of highest empirical mean (unpulled arms first, uniform tie-break). ``epsilon`` is
constant (default 0.1), so the regret is linear in T with slope epsilon times the mean gap: a
deliberately simple reference point. Randomness: one ``explore`` child stream with two uniforms
per agent and step (explore or not, which arm), drawn every step whatever is decided.
"""

from __future__ import annotations

import numpy as np

from baselines.config import EpsilonGreedyConfig
from baselines.formulas import empirical_mean_index, epsilon_explore
from baselines.index import IndexPolicy
from fedbandit_env.policy import FederationFacts
from fedbandit_env.seeding import BatchedRNG


class EpsilonGreedy(IndexPolicy):
    """Empirical means with constant-rate uniform exploration (module doc)."""

    agent_id = "epsilon_greedy"

    uses_total = False

    def __init__(self, epsilon: float = 0.1):
        self.config = EpsilonGreedyConfig(self.agent_id, epsilon)

    def setup(self, facts: FederationFacts, rng: BatchedRNG) -> None:
        self._explore = rng.child("explore").buffered("uniform", (facts.num_agents, 2))

    def index(self, n: np.ndarray, s: np.ndarray, total: np.ndarray) -> np.ndarray:
        return empirical_mean_index(n, s)

    def choose(self, greedy: np.ndarray) -> np.ndarray:
        return epsilon_explore(self._explore.next(), greedy, self.config.epsilon, self.num_arms)


class EpsilonGreedyShared(EpsilonGreedy):
    """Epsilon-greedy on own plus the neighbours' latest own statistics."""

    agent_id = "epsilon_greedy_shared"
    shared = True
    payload_layouts = {"neighbors": "counts_sums"}  # [counts (M), sums (M)]
