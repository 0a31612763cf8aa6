"""The index zoo in JAX: per-agent statistics, an index per arm, a uniform tie-break.

Ports of :mod:`baselines.index`, :mod:`baselines.ucb`, :mod:`baselines.epsilon_greedy` and
:mod:`baselines.thompson` for one run (the rollout ``vmap``s over runs). Each agent keeps
``counts`` n[i, k] and ``sums`` s[i, k] of its own pulls, folds in its last pull, and pulls an
arm of maximal index, uniformly among exact ties. Counts are int32 (exact); sums float32.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from baselines.config import UCB1Config
from baselines.index import default_scale
from fedbandit_env.jax.types import PULL, Action, Observation
from fedbandit_env.policy import MULTI_ARMED, FederationFacts, require_family


class IndexState(NamedTuple):
    """Own statistics of the N agents: ``counts`` (N, M) int32 and ``sums`` (N, M) float32."""

    counts: jnp.ndarray
    sums: jnp.ndarray


def fold_last_pull(counts, sums, obs: Observation, reward=None):
    """Add each agent's last pull (its arm and reward) to its statistics, once: only after a
    step in which the agents pulled (not after reset, not after a communication step)."""
    m = counts.shape[1]
    pulled = (obs.phase == PULL) & (obs.last_arm >= 0)
    hit = (obs.last_arm[:, None] == jnp.arange(m)) & pulled[:, None]  # (N, M)
    reward = obs.last_reward if reward is None else reward
    return counts + hit.astype(counts.dtype), sums + jnp.where(hit, reward[:, None], 0.0)


def argmax_uniform_ties(key: jax.Array, index: jnp.ndarray) -> jnp.ndarray:
    """Per row, an arm of maximal index, uniform among the exact ties (one uniform per arm)."""
    ties = index == index.max(axis=-1, keepdims=True)
    u = jax.random.uniform(key, index.shape, jnp.float32)
    return jnp.argmax(jnp.where(ties, u, -1.0), axis=-1).astype(jnp.int32)


def ucb1_index(n, s, t, alpha: float, scale: float) -> jnp.ndarray:
    """UCB1 (Auer, Cesa-Bianchi and Fischer 2002): ``s/n + scale sqrt(alpha ln t / n)``, inf on
    unpulled arms (each arm is tried once first)."""
    n = n.astype(jnp.float32)
    safe = jnp.maximum(n, 1.0)
    index = s / safe + scale * jnp.sqrt(alpha * jnp.log(jnp.maximum(t, 1.0)) / safe)
    return jnp.where(n > 0, index, jnp.inf)


class UCB1:
    """UCB1 per agent, t = the agent's own pulls (port of :class:`baselines.ucb.UCB1`)."""

    agent_id = "ucb1"
    version = 3
    privacy_epsilon = None

    def __init__(self, alpha: float = 2.0, scale: float | None = None):
        self.config = UCB1Config(self.agent_id, alpha, scale)

    def channel_spec(self, config) -> Any:
        return None

    def init(self, key: jax.Array, facts: FederationFacts) -> IndexState:
        require_family(self.agent_id, facts, MULTI_ARMED)
        self.scale = default_scale(facts) if self.config.scale is None else self.config.scale
        shape = (facts.num_agents, facts.num_arms)
        return IndexState(jnp.zeros(shape, jnp.int32), jnp.zeros(shape, jnp.float32))

    def act(self, key: jax.Array, state: IndexState, obs: Observation):
        counts, sums = fold_last_pull(state.counts, state.sums, obs)
        t = counts.sum(axis=1, keepdims=True).astype(jnp.float32)
        index = ucb1_index(counts, sums, t, self.config.alpha, self.scale)
        return Action(argmax_uniform_ties(key, index), {}), IndexState(counts, sums)
