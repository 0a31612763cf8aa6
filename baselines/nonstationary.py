"""Non-stationary baselines: discounted UCB and sliding-window UCB, independent per agent.

Garivier and Moulines, "On Upper-Confidence Bound Policies for Switching Bandit Problems"
(ALT 2011). Both forget old rewards so that, when the means change, the index follows:

* :class:`DiscountedUCB` (id ``discounted_ucb``, their D-UCB, Sec. 3): each agent keeps
  discounted counts and reward sums, ``N_t(gamma, i) = gamma N_{t-1}(gamma, i) + 1{I_t = i}``
  (:func:`~baselines.formulas.discount_statistics`), and pulls an arm of maximal
  ``X_t(gamma, i) + scale sqrt(xi ln n_t(gamma) / N_t(gamma, i))``, ``n_t(gamma)`` the sum of
  its discounted counts. ``gamma`` defaults to the paper's tuning ``1 - sqrt(changes / T) /
  (4 B)``; ``xi = 0.5`` and ``scale = B`` (the reward range) by default (docs/nonstationary.md:
  the paper's own padding ``2 B sqrt(xi ...)``, ``xi > 1/2``, is ``scale = 2 B, xi = 0.6``).
* :class:`SlidingWindowUCB` (id ``sw_ucb``, their SW-UCB, Sec. 4): each agent keeps the
  statistics of its last ``window`` pulls (:func:`~baselines.formulas.window_statistics`) and
  pulls an arm of maximal ``X_t(tau, i) + scale sqrt(xi ln min(t, tau) / N_t(tau, i))``, t its
  pulls; ``window`` defaults to the paper's tuning ``ceil(2 B sqrt(T ln T / changes))``, ``xi``
  to 0.6.

An arm with no (discounted or windowed) pull has an infinite index, so it is pulled first, and
ties are broken uniformly (one ``tiebreak`` uniform per agent and step, as the index zoo,
:mod:`baselines.index`). With ``gamma = 1`` D-UCB is UCB1 with ``alpha = xi`` (t the agent's
pulls), and a window of at least T pulls makes SW-UCB the same UCB1: nothing is forgotten.
"""

from __future__ import annotations

import numpy as np

from baselines.config import DiscountedUCBConfig, SlidingWindowUCBConfig
from baselines.formulas import discount_statistics, ucb1_index, window_statistics
from baselines.params import ForgettingParams, forgetting_params
from fedbandit_env.config import EnvConfig
from fedbandit_env.engine import VecObservation
from fedbandit_env.kernels import argmax_one_uniform
from fedbandit_env.policy import FederationFacts, TeamAction, TeamPolicy
from fedbandit_env.seeding import BatchedRNG


class ForgettingUCB(TeamPolicy):
    """What D-UCB and SW-UCB share: no channel, (B, N, M) ``counts`` and ``sums`` started by
    :meth:`start`, and the pull of an arm of maximal index (:meth:`pull`)."""

    version = 1
    event_time = ("latency",)  # it sends nothing
    params: ForgettingParams

    def channel_spec(self, config: EnvConfig) -> None:
        return None

    def start(self, facts: FederationFacts, rng: BatchedRNG) -> ForgettingParams:
        """The params on this federation, zero statistics and the tie-break stream."""
        self.params = forgetting_params(self.agent_id, self.config, facts)
        shape = (facts.num_runs, facts.num_agents, facts.num_arms)
        self.counts, self.sums = np.zeros(shape), np.zeros(shape)
        self._arms = np.arange(facts.num_arms)
        self._tiebreak = rng.child("tiebreak").buffered("uniform", (facts.num_agents,))
        return self.params

    def pull(self, t: np.ndarray | float) -> TeamAction:
        """An arm of maximal ``scale sqrt(xi ln t / n)`` index per agent, ties uniformly."""
        p = self.params
        index = ucb1_index(self.counts, self.sums, t, p.xi, p.scale)
        return TeamAction(argmax_one_uniform(index, self._tiebreak.next()), {})


class DiscountedUCB(ForgettingUCB):
    """D-UCB per agent (module doc): discounted (B, N, M) counts and sums."""

    agent_id = "discounted_ucb"

    def __init__(
        self, gamma: float | None = None, xi: float = 0.5, scale: float | None = None,
        changes: int = 1,
    ):  # fmt: skip
        self.config = DiscountedUCBConfig(self.agent_id, gamma, xi, scale, changes)

    def reset(self, facts: FederationFacts, rng: BatchedRNG) -> None:
        self.start(facts, rng)

    def act(self, obs: VecObservation) -> TeamAction:
        """Discount every arm's statistics and add the last pull, then pull an arm of maximal
        D-UCB index (ties uniformly at random)."""
        p = self.params
        if obs.step > 0:
            hit = obs.last_arm[..., None] == self._arms
            self.counts, self.sums = discount_statistics(
                self.counts, self.sums, hit, obs.last_reward, p.gamma
            )
        return self.pull(self.counts.sum(axis=-1, keepdims=True))  # t = n_t(gamma)


class SlidingWindowUCB(ForgettingUCB):
    """SW-UCB per agent (module doc): the statistics of the last ``window`` pulls, kept with the
    (B, N, window) ring of those pulls' arms and rewards."""

    agent_id = "sw_ucb"

    def __init__(
        self, window: int | None = None, xi: float = 0.6, scale: float | None = None,
        changes: int = 1,
    ):  # fmt: skip
        self.config = SlidingWindowUCBConfig(self.agent_id, window, xi, scale, changes)

    def reset(self, facts: FederationFacts, rng: BatchedRNG) -> None:
        p = self.start(facts, rng)
        runs, n = facts.num_runs, facts.num_agents
        self._slots = p.slots  # a window longer than the horizon: the ring holds every pull
        self.ring_arms = np.full((runs, n, self._slots), -1)  # -1: no pull in the slot yet
        self.ring_rewards = np.zeros((runs, n, self._slots))
        self.pulls = 0

    def act(self, obs: VecObservation) -> TeamAction:
        """Add the last pull to the window and drop the one ``window`` pulls before it, then
        pull an arm of maximal SW-UCB index (ties uniformly at random)."""
        p = self.params
        if obs.step > 0:
            slot = self.pulls % self._slots
            out_arm, out_reward = self.ring_arms[..., slot], self.ring_rewards[..., slot]
            out = (out_arm[..., None] == self._arms) & (self.pulls >= p.window)
            hit = obs.last_arm[..., None] == self._arms
            self.counts, self.sums = window_statistics(
                self.counts, self.sums, hit, obs.last_reward, out, out_reward
            )
            self.ring_arms[..., slot] = obs.last_arm
            self.ring_rewards[..., slot] = obs.last_reward
            self.pulls += 1
        return self.pull(float(min(self.pulls, p.window)))
