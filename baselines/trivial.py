"""Two trivial team policies that exercise the environment and the runner.

* :class:`UniformRandom` (id ``uniform``): every agent pulls a uniformly random arm each step and
  sends nothing. Its expected per-step regret is the mean gap.
* :class:`Flooding` (id ``flooding``): uniform random arms, plus max-consensus flooding over the
  ``neighbors`` channel: each agent sends the element-wise maximum of its own per-arm pull counts
  and everything it received in the last step. After d steps an agent's view includes the counts of
  every agent within d hops, so it makes information spread visible (light-cone tests). It asks
  for the aggregating ``max`` delivery of the channel (:mod:`fedbandit_env.network.neighbors`),
  so a dense graph costs no per-neighbour copy; on a padded channel it reduces the copy itself.
"""

from __future__ import annotations

import numpy as np

from baselines.formulas import heard_maximum, uniform_arm
from baselines.params import flooding_channel_spec, trivial_params
from fedbandit_env.config import EnvConfig
from fedbandit_env.engine import VecObservation
from fedbandit_env.kernels import ArmTable
from fedbandit_env.policy import FederationFacts, TeamAction, TeamPolicy
from fedbandit_env.seeding import BatchedRNG


class UniformRandom(TeamPolicy):
    """Uniformly random arms, no messages."""

    agent_id = "uniform"
    event_time = ("clock", "reward_delay", "random_delay", "latency", "churn")  # reads no reward
    floods = False  # Flooding: True (it needs the neighbors channel)

    def reset(self, facts: FederationFacts, rng: BatchedRNG) -> None:
        self.params = trivial_params(self.agent_id, facts, self.floods)  # checks the channel
        self.num_arms = facts.num_arms
        self._u = rng.child("arms").buffered("uniform", (facts.num_agents,))

    def act(self, obs: VecObservation) -> TeamAction:
        return TeamAction(uniform_arm(self._u.next(), self.num_arms, np.int64))


class Flooding(UniformRandom):
    """Uniform arms; floods the max of own pull counts and received counts to neighbours."""

    agent_id = "flooding"
    event_time = ()  # it relays what it heard at every step
    floods = True

    def channel_spec(self, config: EnvConfig):
        return flooding_channel_spec(config.num_arms)

    def reset(self, facts: FederationFacts, rng: BatchedRNG) -> None:
        super().reset(facts, rng)
        shape = (facts.num_runs, facts.num_agents, facts.num_arms)
        self.counts = np.zeros(shape)
        self.known = np.zeros(shape)
        self._send = np.ones(shape[:2], dtype=bool)
        self.table = ArmTable.of(*shape)

    def act(self, obs: VecObservation) -> TeamAction:
        if obs.step > 0:
            self.table.add(self.counts, obs.last_arm, 1.0)
        received = heard_maximum(obs.deliveries["neighbors"])
        # counts >= 0, so max(known, received, counts) is the same with either delivery
        known = np.maximum(self.known, received)
        self.known = np.maximum(known, self.counts, out=known)
        action = super().act(obs)
        action.messages["neighbors"] = (self._send, self.known)  # a fresh array each step
        return action
