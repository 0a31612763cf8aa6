"""Centralized oracle UCB1: one UCB1 on the pooled raw rewards of every agent.

The upper reference of the gossip paper's setting (docs/gossip.md): a "centralized UCB1 on
pooled local rewards". It **breaks privacy and the communication model by design**: it reads
every agent's raw reward from the batched observation (no channel, no ledger cost), which is
exactly the unfair advantage of an oracle. It is therefore excluded from light-cone tests.

Every agent pulls every arm once (M round-robin steps), then all agents play the arm of maximal
UCB1 index computed on the pooled counts and sums over all agents; with heterogeneous rewards the
pooled mean of an arm all agents pull equally often is the global mean. Ties: lowest index (the
pooled statistics are identical for every agent, so the team plays in lock step).
"""

from __future__ import annotations

import numpy as np

from baselines.config import CentralizedUCB1Config
from baselines.params import pooled_params
from fedbandit_env.engine import VecObservation
from fedbandit_env.policy import (
    FederationFacts,
    TeamAction,
    TeamPolicy,
)
from fedbandit_env.scores import note_scores
from fedbandit_env.seeding import BatchedRNG


class CentralizedUCB1(TeamPolicy):
    """UCB1 on the statistics pooled over all agents (an oracle; see the module docstring)."""

    agent_id = "centralized_ucb1"
    event_time = ("latency",)  # it pools the batched observation, no message

    def __init__(self, scale: float = 1.0):
        self.config = CentralizedUCB1Config(self.agent_id, scale)

    def reset(self, facts: FederationFacts, rng: BatchedRNG) -> None:
        self.params = pooled_params(self.config, facts)  # checks the family
        self.M, self.N = facts.num_arms, facts.num_agents
        self.counts = np.zeros((facts.num_runs, self.M))
        self.sums = np.zeros((facts.num_runs, self.M))
        self._b = np.arange(facts.num_runs)[:, None]

    def act(self, obs: VecObservation) -> TeamAction:
        if obs.step > 0:  # pool every agent's last reward
            self._pool(obs.last_arm, obs.last_reward)
        if obs.step < self.M:
            arms = np.full((self.counts.shape[0], self.N), obs.step, dtype=np.int64)
            return TeamAction(arms)
        total = self.counts.sum(axis=1, keepdims=True)
        index = self.sums / self.counts + self.config.scale * np.sqrt(
            2.0 * np.log(total) / self.counts
        )
        note_scores(index)
        best = np.argmax(index, axis=1)
        return TeamAction(np.repeat(best[:, None], self.N, axis=1).astype(np.int64, copy=False))

    def _pool(self, arms: np.ndarray, rewards: np.ndarray) -> None:
        """Add the pulls (B, N) to the pooled statistics: per run, the rewards are added to the
        arm's sum one agent after the other in agent order (``np.add.at``)."""
        np.add.at(self.counts, (self._b, arms), 1.0)
        np.add.at(self.sums, (self._b, arms), rewards)
