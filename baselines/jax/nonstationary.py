"""The non-stationary baselines in JAX: D-UCB and SW-UCB (Garivier and Moulines 2011), one run.

Ports of :mod:`baselines.nonstationary` on the params protocol (docs/jax.md, "Learners"): the
params are :func:`baselines.params.forgetting_params`, the statistics' updates and the index
the formulas of :mod:`baselines.formulas` that the numpy learners call. Statistics are float32
(SW-UCB's window counts stay exact integers below 2^24); ties are broken uniformly with one
uniform per arm (:func:`fedbandit_env.ties.argmax_uniform_ties`), as the JAX index zoo.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from baselines.config import DiscountedUCBConfig, SlidingWindowUCBConfig
from baselines.formulas import discount_statistics, ucb1_index, window_statistics
from baselines.params import ForgettingParams, forgetting_params
from fedbandit_env.jax.types import PULL, Action, Observation
from fedbandit_env.policy import FederationFacts
from fedbandit_env.ties import argmax_uniform_ties


class DiscountedState(NamedTuple):
    """Discounted ``counts`` and ``sums`` (N, M) float32."""

    counts: jnp.ndarray
    sums: jnp.ndarray


class WindowState(NamedTuple):
    """The window's ``counts`` and ``sums`` (N, M) float32, the ring of past pulls
    ``ring_arms`` (N, slots) int32 (-1: empty) and ``ring_rewards`` (N, slots) float32, and each
    agent's ``pulls`` (N,) int32."""

    counts: jnp.ndarray
    sums: jnp.ndarray
    ring_arms: jnp.ndarray
    ring_rewards: jnp.ndarray
    pulls: jnp.ndarray


def _last_pull(obs: Observation, num_arms: int) -> tuple[jnp.ndarray, jnp.ndarray]:
    """``(pulled (N,), hit (N, M))``: whether each agent's observation carries a pull (a step
    that pulled, not the reset), and the pulled arm's indicator."""
    pulled = (obs.phase == PULL) & (obs.last_arm >= 0)
    return pulled, (obs.last_arm[:, None] == jnp.arange(num_arms)) & pulled[:, None]


def _pull_best(key: jax.Array, index: jnp.ndarray) -> jnp.ndarray:
    """An arm of maximal index per agent, exact ties uniformly at random, from the key the JAX
    index zoo's tie-break takes (the last of four, :meth:`baselines.jax.index.IndexPolicy.act`):
    with nothing forgotten (``gamma = 1``, a window of T pulls) the run is UCB1's, bit for
    bit."""
    k_tie = jax.random.split(key, 4)[3]
    return argmax_uniform_ties(index, jax.random.uniform(k_tie, index.shape, jnp.float32))


class ForgettingUCB:
    """What the two ports share: no channel, no privacy claim, and the params of
    :func:`baselines.params.forgetting_params`."""

    version = 1
    privacy_epsilon = None
    event_time = ("latency",)  # it sends nothing (as numpy)
    agent_id: str
    config: DiscountedUCBConfig | SlidingWindowUCBConfig

    def channel_spec(self, config: Any) -> None:
        return None

    def make_params(self, facts: FederationFacts) -> ForgettingParams:
        return forgetting_params(self.agent_id, self.config, facts)


class DiscountedUCB(ForgettingUCB):
    """D-UCB per agent (:class:`baselines.nonstationary.DiscountedUCB` on JAX)."""

    agent_id = "discounted_ucb"

    def __init__(
        self, gamma: float | None = None, xi: float = 0.5, scale: float | None = None,
        changes: int = 1,
    ):  # fmt: skip
        self.config = DiscountedUCBConfig(self.agent_id, gamma, xi, scale, changes)

    def init(self, key: jax.Array, params: ForgettingParams) -> DiscountedState:
        zeros = jnp.zeros((params.num_agents, params.num_arms), jnp.float32)
        return DiscountedState(zeros, zeros)

    def act(self, key: jax.Array, state: DiscountedState, obs: Observation,
            params: ForgettingParams) -> tuple[Action, DiscountedState]:  # fmt: skip
        """Discount and add the last pull (agents that pulled), then pull an arm of maximal
        D-UCB index."""
        pulled, hit = _last_pull(obs, params.num_arms)
        counts, sums = discount_statistics(
            state.counts, state.sums, hit, obs.last_reward, params.gamma
        )
        counts = jnp.where(pulled[:, None], counts, state.counts)
        sums = jnp.where(pulled[:, None], sums, state.sums)
        total = counts.sum(axis=1, keepdims=True)
        index = ucb1_index(counts, sums, total, params.xi, params.scale)
        return Action(_pull_best(key, index), {}), DiscountedState(counts, sums)


class SlidingWindowUCB(ForgettingUCB):
    """SW-UCB per agent (:class:`baselines.nonstationary.SlidingWindowUCB` on JAX)."""

    agent_id = "sw_ucb"

    def __init__(
        self, window: int | None = None, xi: float = 0.6, scale: float | None = None,
        changes: int = 1,
    ):  # fmt: skip
        self.config = SlidingWindowUCBConfig(self.agent_id, window, xi, scale, changes)

    def init(self, key: jax.Array, params: ForgettingParams) -> WindowState:
        n, m, slots = params.num_agents, params.num_arms, params.slots
        zeros = jnp.zeros((n, m), jnp.float32)
        return WindowState(
            zeros, zeros, jnp.full((n, slots), -1, jnp.int32), jnp.zeros((n, slots), jnp.float32),
            jnp.zeros(n, jnp.int32),
        )  # fmt: skip

    def act(self, key: jax.Array, state: WindowState, obs: Observation,
            params: ForgettingParams) -> tuple[Action, WindowState]:  # fmt: skip
        """Add the last pull to the window and drop the one ``window`` pulls before it (agents
        that pulled), then pull an arm of maximal SW-UCB index."""
        pulled, hit = _last_pull(obs, params.num_arms)
        agents = jnp.arange(params.num_agents)
        slot = state.pulls % params.slots
        out_arm, out_reward = state.ring_arms[agents, slot], state.ring_rewards[agents, slot]
        full = pulled & (state.pulls >= params.window)
        out = (out_arm[:, None] == jnp.arange(params.num_arms)) & full[:, None]
        counts, sums = window_statistics(
            state.counts, state.sums, hit, obs.last_reward, out, out_reward
        )
        ring_arms = state.ring_arms.at[agents, slot].set(jnp.where(pulled, obs.last_arm, out_arm))
        ring_rewards = state.ring_rewards.at[agents, slot].set(
            jnp.where(pulled, obs.last_reward, out_reward)
        )
        pulls = state.pulls + pulled.astype(jnp.int32)
        t = jnp.minimum(pulls, params.window).astype(jnp.float32)[:, None]
        index = ucb1_index(counts, sums, t, params.xi, params.scale)
        state = WindowState(counts, sums, ring_arms, ring_rewards, pulls)
        return Action(_pull_best(key, index), {}), state
