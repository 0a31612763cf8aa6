"""Two trivial team policies that exercise the environment and the runner.

* :class:`UniformRandom` (id ``uniform``): every agent pulls a uniformly random arm each step and
  sends nothing. Its expected per-step regret is the mean gap (DESIGN.md §6 invariant 3).
* :class:`Flooding` (id ``flooding``): uniform random arms, plus max-consensus flooding over the
  ``neighbors`` channel: each agent sends the element-wise maximum of its own per-arm pull counts
  and everything it received in the last step. After d steps an agent's view includes the counts of
  every agent within d hops, so it makes information spread visible (light-cone tests).
"""

from __future__ import annotations

import numpy as np

from fedbandit_env.config import EnvConfig
from fedbandit_env.engine import VecObservation
from fedbandit_env.policy import FederationFacts, TeamAction, TeamPolicy
from fedbandit_env.seeding import BatchedRNG


class UniformRandom(TeamPolicy):
    """Uniformly random arms, no messages."""

    agent_id = "uniform"

    def reset(self, facts: FederationFacts, rng: BatchedRNG) -> None:
        self.num_arms = facts.num_arms
        self._u = rng.child("arms").buffered("uniform", (facts.num_agents,))

    def act(self, obs: VecObservation) -> TeamAction:
        arms = np.minimum((self._u.next() * self.num_arms).astype(np.int64), self.num_arms - 1)
        return TeamAction(arms)


class Flooding(UniformRandom):
    """Uniform arms; floods the max of own pull counts and received counts to neighbours."""

    agent_id = "flooding"

    def channel_spec(self, config: EnvConfig):
        return {"neighbors": {"kind": "neighbors", "dim": config.num_arms}}

    def reset(self, facts: FederationFacts, rng: BatchedRNG) -> None:
        self.require_channel(facts, "neighbors", "neighbors", facts.num_arms)
        super().reset(facts, rng)
        shape = (facts.num_runs, facts.num_agents, facts.num_arms)
        self.counts = np.zeros(shape)
        self.known = np.zeros(shape)
        self._send = np.ones(shape[:2], dtype=bool)

    def act(self, obs: VecObservation) -> TeamAction:
        if obs.step > 0:
            b, i = np.indices(obs.last_arm.shape)
            self.counts[b, i, obs.last_arm] += 1
        heard = obs.deliveries["neighbors"]
        received = np.where(heard.mask[..., None], heard.payload, 0.0).max(axis=2)
        self.known = np.maximum(np.maximum(self.known, received), self.counts)
        action = super().act(obs)
        action.messages["neighbors"] = (self._send, self.known.copy())
        return action
