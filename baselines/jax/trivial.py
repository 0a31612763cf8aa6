"""The trivial learners and the centralized oracle in JAX, for one run (the rollout ``vmap``s
over runs).

* :class:`UniformRandom` (id ``uniform``): every agent pulls a uniformly random arm each step
  and sends nothing (:class:`baselines.trivial.UniformRandom` on JAX).
* :class:`Flooding` (id ``flooding``): uniform random arms plus max-consensus flooding over the
  ``neighbors`` channel (aggregating ``max`` delivery, dimension M): each agent sends the
  element-wise maximum of its own per-arm pull counts and everything it received, so after d
  steps its view holds the counts of every agent within d hops (:class:`baselines.trivial.Flooding` on JAX).
* :class:`CentralizedUCB1` (id ``centralized_ucb1``): one UCB1 on the raw rewards pooled over
  every agent, an oracle that reads every agent's reward outside the channels by design (:class:`baselines.oracle_ucb.CentralizedUCB1` on JAX).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from baselines.config import CentralizedUCB1Config
from baselines.formulas import heard_maximum, uniform_arm
from baselines.params import (
    PooledParams,
    TeamShape,
    flooding_channel_spec,
    pooled_params,
    trivial_params,
)
from fedbandit_env.jax.accumulate import Total, total_add, total_zeros
from fedbandit_env.jax.types import PULL, Action, Observation
from fedbandit_env.policy import FederationFacts
from fedbandit_env.scores import note_scores


def last_pulls(obs: Observation, m: int) -> jnp.ndarray:
    """(N, M) bool: agent i pulled arm k in the last step (none after reset or after a
    communication step)."""
    pulled = (obs.phase == PULL) & (obs.last_arm >= 0)
    return (obs.last_arm[:, None] == jnp.arange(m)) & pulled[:, None]


class UniformRandom:
    """Uniformly random arms, ``min(floor(u M), M - 1)`` from one uniform per agent and step;
    no messages (params protocol: :func:`baselines.params.trivial_params`)."""

    agent_id = "uniform"
    event_time = ("clock", "reward_delay", "random_delay", "latency", "churn")  # reads no reward
    version = 1
    privacy_epsilon = None
    floods = False

    def channel_spec(self, config) -> Any:
        return None  # no messages

    def make_params(self, facts: FederationFacts) -> TeamShape:
        return trivial_params(self.agent_id, facts, self.floods)

    def init(self, key: jax.Array, params: TeamShape) -> Any:
        return ()

    def arms(self, key: jax.Array, params: TeamShape) -> jnp.ndarray:
        u = jax.random.uniform(key, (params.num_agents,), jnp.float32)
        return uniform_arm(u, params.num_arms, jnp.int32)

    def act(self, key: jax.Array, state: Any, obs: Observation, params: TeamShape):
        return Action(self.arms(key, params), {}), state


class FloodingState(NamedTuple):
    """``counts`` (N, M) int32 own pulls per arm; ``known`` (N, M) float32 the flooded maximum."""

    counts: jnp.ndarray
    known: jnp.ndarray


class Flooding(UniformRandom):
    """Uniform arms; floods the max of own pull counts and received counts to neighbours."""

    agent_id = "flooding"
    event_time = ()  # it relays what it heard at every step
    floods = True

    def channel_spec(self, config) -> Any:
        return flooding_channel_spec(config.num_arms)

    def init(self, key: jax.Array, params: TeamShape) -> FloodingState:
        shape = (params.num_agents, params.num_arms)
        return FloodingState(jnp.zeros(shape, jnp.int32), jnp.zeros(shape, jnp.float32))

    def act(self, key: jax.Array, state: FloodingState, obs: Observation, params: TeamShape):
        counts = state.counts + last_pulls(obs, params.num_arms).astype(jnp.int32)
        received = heard_maximum(obs.deliveries["neighbors"])
        # counts >= 0, so max(known, received, counts) is the same with either delivery
        known = jnp.maximum(jnp.maximum(state.known, received), counts.astype(jnp.float32))
        send = jnp.ones(params.num_agents, bool)
        action = Action(self.arms(key, params), {"neighbors": (send, known)})
        return action, FloodingState(counts, known)


class PooledState(NamedTuple):
    """The statistics pooled over every agent: ``counts`` (M,) int32 and ``sums`` (M,) a
    compensated float32 sum (a plain float32 running sum of N agents' rewards stops moving
    once it passes 2^24)."""

    counts: jnp.ndarray
    sums: Total


class CentralizedUCB1:
    """UCB1 (Auer, Cesa-Bianchi and Fischer 2002) on the statistics pooled over all agents, an
    oracle: every agent pulls every arm once (M round-robin steps), then all agents play the arm
    of maximal pooled index ``s_k / n_k + scale sqrt(2 ln t / n_k)``, ties to the lowest arm
    (the team plays in lock step)."""

    agent_id = "centralized_ucb1"
    version = 1
    privacy_epsilon = None
    event_time = ("latency",)  # it pools the batched observation, no message (as numpy)

    def __init__(self, scale: float = 1.0):
        self.config = CentralizedUCB1Config(self.agent_id, scale)

    def channel_spec(self, config) -> Any:
        return None  # it reads every agent's reward outside the channels

    def make_params(self, facts: FederationFacts) -> PooledParams:
        return pooled_params(self.config, facts)

    def init(self, key: jax.Array, params: PooledParams) -> PooledState:
        m = params.num_arms
        return PooledState(jnp.zeros(m, jnp.int32), total_zeros((m,)))

    def act(self, key: jax.Array, state: PooledState, obs: Observation, params: PooledParams):
        hit = last_pulls(obs, params.num_arms)  # pool every agent's last reward
        counts = state.counts + hit.sum(axis=0, dtype=jnp.int32)
        sums = total_add(state.sums, jnp.where(hit, obs.last_reward[:, None], 0.0).sum(axis=0))
        n = counts.astype(jnp.float32)
        safe = jnp.maximum(n, 1.0)
        total = jnp.maximum(n.sum(), 1.0)
        index = (sums.total - sums.carry) / safe + params.scale * jnp.sqrt(
            2.0 * jnp.log(total) / safe
        )
        note_scores(index)
        best = jnp.argmax(index).astype(jnp.int32)
        arm = jnp.where(obs.step < params.num_arms, obs.step, best).astype(jnp.int32)
        arms = jnp.full(params.num_agents, arm, jnp.int32)
        return Action(arms, {}), PooledState(counts, sums)
