"""The index zoo in JAX: per-agent statistics, an index per arm, a uniform tie-break.

Ports of :mod:`baselines.index`, :mod:`baselines.ucb`, :mod:`baselines.epsilon_greedy` and
:mod:`baselines.thompson` for one run (the rollout ``vmap``s over runs), with the formulas of
:mod:`baselines.formulas`, which the numpy learners call too. Each agent keeps
``counts`` n[i, k] and ``sums`` s[i, k] of its own pulls, folds in its last pull, and pulls an
arm of maximal index, uniformly among exact ties (Thompson sampling, whose indices are
continuous, takes the plain arg-max). Counts are int32 (exact); sums float32.

**Share-statistics** variants (``*_shared``) talk over the ``neighbors`` channel (padded
delivery, dimension 2M) exactly as :class:`baselines.index.IndexPolicy`: every step each agent
sends its OWN ``[counts (M), sums (M)]``, keeps per neighbour slot the latest statistics it
received (a dropped message keeps the previous one) and builds its index on

    n_used = n_own + max(sum over slots of n_j(latest), 0),  s_used = s_own + sum_j s_j(latest),

with ``total = n_used.sum()`` the "time" of UCB-style bonuses. Information travels one hop per
step and no further, so the shared variants respect the light cone.
"""

from __future__ import annotations

from typing import Any, ClassVar, NamedTuple

import jax
import jax.numpy as jnp

from baselines.config import (
    EpsilonGreedyConfig,
    KLUCBConfig,
    ThompsonBetaConfig,
    ThompsonGaussianConfig,
    UCB1Config,
)
from baselines.formulas import (
    ATTEMPTS,
    bernoulli_trick,
    beta_posterior_sample,
    empirical_mean_index,
    epsilon_explore,
    gaussian_posterior_sample,
    kl_ucb_index,
    ucb1_index,
    unit_reward,
)
from baselines.params import CHANNEL, IndexParams, index_params, statistics_channel_spec
from fedbandit_env.jax.types import PULL, Action, Observation
from fedbandit_env.policy import FederationFacts
from fedbandit_env.scores import note_scores
from fedbandit_env.ties import argmax_uniform_ties


class IndexState(NamedTuple):
    """Own statistics of the N agents: ``counts`` (N, M) int32 and ``sums`` (N, M) float32."""

    counts: jnp.ndarray
    sums: jnp.ndarray


class SharedIndexState(NamedTuple):
    """Own statistics plus ``latest`` (N, D, 2M) float32: per neighbour slot d (ascending ids,
    as the padded delivery), the last ``[counts, sums]`` received from that neighbour."""

    counts: jnp.ndarray
    sums: jnp.ndarray
    latest: jnp.ndarray


def fold_last_pull(counts, sums, obs: Observation, reward=None):
    """Add each agent's last pull (its arm and reward) to its statistics, once: only after a
    step in which the agents pulled (not after reset, not after a communication step)."""
    m = counts.shape[1]
    pulled = (obs.phase == PULL) & (obs.last_arm >= 0)
    if obs.pulled is not None:  # an event clock: only the clients that pulled at this step
        pulled = pulled & obs.pulled
    last_arm = obs.last_arm
    if obs.arrived_arm is not None:  # delayed rewards: the pulls whose rewards arrived now
        pulled, last_arm = obs.arrived_arm >= 0, obs.arrived_arm
    reward = obs.last_reward if reward is None else reward
    if last_arm.ndim == 2:  # a random delay's slots (N, D): several may arrive at once
        hit = (last_arm[..., None] == jnp.arange(m)) & pulled[..., None]  # (N, D, M)
        value = jnp.where(hit, reward[..., None], 0.0).sum(axis=1)
        return counts + hit.sum(axis=1).astype(counts.dtype), sums + value
    hit = (last_arm[:, None] == jnp.arange(m)) & pulled[:, None]  # (N, M)
    return counts + hit.astype(counts.dtype), sums + jnp.where(hit, reward[:, None], 0.0)


def own_total(counts: jnp.ndarray) -> jnp.ndarray:
    """(N, 1) float32 the agents' pulls so far, ``t`` of the UCB-style bonuses: the int32 sum
    of ``counts``, then one rounding (the float32 sum of the counts, the same number while
    every partial sum is below 2^24, without a float copy of the counts)."""
    return counts.sum(axis=1, keepdims=True).astype(jnp.float32)


def keep_latest(latest: jnp.ndarray, heard) -> jnp.ndarray:
    """The per-slot table after a padded delivery ``heard``: the slots whose message arrived
    take its payload, the others keep their previous statistics (as the numpy
    :class:`baselines.index.IndexPolicy` does)."""
    return jnp.where(heard.mask[..., None], heard.payload, latest)


class IndexPolicy:
    """Per-agent (counts, sums) statistics, optional one-hop sharing, index arg-max, on the
    params protocol (docs/jax.md, "Learners"): :meth:`make_params` is the pure
    :func:`baselines.params.index_params` of the numpy learners, ``init(key, params)`` and
    ``act(key, state, obs, params)``. Subclasses implement :meth:`index` and may override
    :meth:`transform_reward` and :meth:`choose`; every hook takes the key it may draw from and
    the params."""

    shared: ClassVar[bool] = False
    ties: ClassVar[bool] = True  # False: continuous indices, plain arg-max
    uses_total: ClassVar[bool] = True  # False: index() ignores ``total``
    event_time: ClassVar[tuple[str, ...]] = ("clock", "reward_delay", "random_delay", "latency",
                                             "churn")  # fmt: skip
    lock_step_reason: ClassVar[str] = (
        "its shared variant sends its statistics at every step, a lock-step protocol"
    )
    agent_id: ClassVar[str] = ""
    version: ClassVar[int] = 2
    privacy_epsilon = None
    config: Any

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        if cls.shared and "event_time" not in cls.__dict__:  # one-hop sharing is lock-step
            cls.event_time = tuple(o for o in cls.event_time if o != "clock")  # as numpy

    def channel_spec(self, config) -> Any:
        """``{"neighbors": {"kind": "neighbors", "dim": 2M}}`` when shared, else None."""
        return statistics_channel_spec(self.shared, config.num_arms)

    def make_params(self, facts: FederationFacts) -> IndexParams:
        """The run-time parameters on this federation (checks the family and the channel)."""
        return index_params(self.agent_id, self.config, facts, self.shared)

    def init(self, key: jax.Array, params: IndexParams) -> IndexState | SharedIndexState:
        n, m = params.num_agents, params.num_arms
        counts, sums = jnp.zeros((n, m), jnp.int32), jnp.zeros((n, m), jnp.float32)
        if not self.shared:
            return IndexState(counts, sums)
        latest = jnp.zeros((n, params.degree, 2 * m), jnp.float32)
        return SharedIndexState(counts, sums, latest)

    def act(self, key: jax.Array, state, obs: Observation, params: IndexParams):
        """One step for every agent: add the last pull to ``counts`` and ``sums``, form the
        index (own statistics, or own plus the neighbours' latest), pull an arm of maximal
        index (ties uniformly at random) and, in the shared variants, send own statistics."""
        k_reward, k_index, k_choose, k_tie = jax.random.split(key, 4)
        m = params.num_arms
        raw = obs.last_reward if obs.arrived_reward is None else obs.arrived_reward
        reward = self.transform_reward(k_reward, raw, params)
        counts, sums = fold_last_pull(state.counts, state.sums, obs, reward)
        own = counts.astype(jnp.float32)
        messages = {}
        if self.shared:
            latest = keep_latest(state.latest, obs.deliveries[CHANNEL])
            received = latest.sum(axis=1)  # (N, 2M): the neighbours' counts and sums
            n = own + jnp.maximum(received[:, :m], 0.0)
            s = sums + received[:, m:]
            send = jnp.ones(counts.shape[0], bool)
            messages[CHANNEL] = (send, jnp.concatenate([own, sums], axis=1))
            state = SharedIndexState(counts, sums, latest)
        else:
            n, s = own, sums
            state = IndexState(counts, sums)
        total = None
        if self.uses_total:
            total = n.sum(axis=1, keepdims=True) if self.shared else own_total(counts)
        index = self.index(k_index, n, s, total, params)
        if self.ties:
            u = jax.random.uniform(k_tie, index.shape, jnp.float32)
            greedy = argmax_uniform_ties(index, u)  # reports the index to the NaN count
        else:
            note_scores(index)
            greedy = jnp.argmax(index, axis=-1).astype(jnp.int32)
        return Action(self.choose(k_choose, greedy, params), messages), state

    # ------------------------------------------------------------ hooks
    def transform_reward(self, key: jax.Array, reward: jnp.ndarray, params: IndexParams):
        """The value added to ``sums`` for a pull with local reward ``reward`` (N,)."""
        return reward

    def choose(self, key: jax.Array, greedy: jnp.ndarray, params: IndexParams) -> jnp.ndarray:
        """Final arms (N,) from the index arg-max (epsilon-greedy explores here)."""
        return greedy

    def index(self, key: jax.Array, n, s, total, params: IndexParams) -> jnp.ndarray:
        """Per-arm index (N, M) from counts ``n`` and sums ``s`` (float32) and ``total`` (N, 1)
        (None for a class with ``uses_total = False``)."""
        raise NotImplementedError


# ----------------------------------------------------------------- UCB1
class UCB1(IndexPolicy):
    """UCB1 per agent, t = the agent's own pulls (:class:`baselines.ucb.UCB1` on JAX)."""

    agent_id = "ucb1"
    version = 3

    def __init__(self, alpha: float = 2.0, scale: float | None = None):
        self.config = UCB1Config(self.agent_id, alpha, scale)

    def index(self, key, n, s, total, params):
        return ucb1_index(n, s, total, params.alpha, params.scale)


class UCB1Shared(UCB1):
    """UCB1 on own plus the neighbours' latest own statistics
    (:class:`baselines.ucb.UCB1Shared` on JAX)."""

    agent_id = "ucb1_shared"
    payload_layouts = {"neighbors": "counts_sums"}  # [counts (M), sums (M)]
    version = 2
    shared = True


# --------------------------------------------------------------- KL-UCB
class KLUCB(IndexPolicy):
    """KL-UCB with the Bernoulli KL per agent (Garivier and Cappé 2011): the index of arm k is
    the largest q in [p_k, 1] with ``n_k kl(p_k, q) <= ln t + c ln ln t``, rewards mapped to
    [0, 1] through the reward bounds (:class:`baselines.ucb.KLUCB` on JAX)."""

    agent_id = "kl_ucb"

    def __init__(self, c: float = 0.0, precision: float = 1e-6, bounds: Any = None):
        self.config = KLUCBConfig(self.agent_id, c, precision, bounds)

    def transform_reward(self, key, reward, params):
        return unit_reward(reward, params.lo, params.hi)

    def index(self, key, n, s, total, params):
        return kl_ucb_index(n, s, total, params.c, params.iterations)


class KLUCBShared(KLUCB):
    """KL-UCB on own plus the neighbours' latest own statistics."""

    agent_id = "kl_ucb_shared"
    payload_layouts = {"neighbors": "counts_sums"}  # [counts (M), sums (M)]
    shared = True


# ------------------------------------------------------- epsilon-greedy
class EpsilonGreedy(IndexPolicy):
    """Empirical means with constant-rate uniform exploration: with probability ``epsilon`` a
    uniformly random arm, else an arm of highest empirical mean (unpulled arms first, uniform
    tie-break); two uniforms per agent and step
    (:class:`baselines.epsilon_greedy.EpsilonGreedy` on JAX)."""

    agent_id = "epsilon_greedy"
    uses_total = False

    def __init__(self, epsilon: float = 0.1):
        self.config = EpsilonGreedyConfig(self.agent_id, epsilon)

    def index(self, key, n, s, total, params):
        return empirical_mean_index(n, s)

    def choose(self, key, greedy, params):
        u = jax.random.uniform(key, (greedy.shape[0], 2), jnp.float32)
        return epsilon_explore(u, greedy, params.epsilon, params.num_arms)


class EpsilonGreedyShared(EpsilonGreedy):
    """Epsilon-greedy on own plus the neighbours' latest own statistics."""

    agent_id = "epsilon_greedy_shared"
    payload_layouts = {"neighbors": "counts_sums"}  # [counts (M), sums (M)]
    shared = True


# ----------------------------------------------------- Thompson sampling
class ThompsonBeta(IndexPolicy):
    """Beta-Bernoulli Thompson sampling (Agrawal and Goyal 2012) with Beta(1, 1) priors and the
    Bernoulli trick of their Algorithm 2 (one uniform per agent and step; the identity on
    Bernoulli rewards): the sample of arm k is Beta(1 + s_k, 1 + n_k - s_k) = G1 / (G1 + G2)
    (:class:`baselines.thompson.ThompsonBeta` on JAX)."""

    agent_id = "thompson_beta"
    ties = False  # continuous samples: exact ties have probability zero
    uses_total = False
    event_time = ("clock", "reward_delay", "latency", "churn")  # as numpy: no random delay
    version = 1

    def __init__(self, bounds: Any = None):
        self.config = ThompsonBetaConfig(self.agent_id, bounds)

    def transform_reward(self, key, reward, params):
        u = jax.random.uniform(key, reward.shape, jnp.float32)
        return bernoulli_trick(u, unit_reward(reward, params.lo, params.hi))

    def index(self, key, n, s, total, params):
        k_normal, k_uniform = jax.random.split(key)
        draws = (*n.shape, 2, ATTEMPTS)
        normal = jax.random.normal(k_normal, draws, jnp.float32)
        uniform = jax.random.uniform(k_uniform, draws, jnp.float32)
        return beta_posterior_sample(n, s, normal, uniform)


class ThompsonBetaShared(ThompsonBeta):
    """Beta Thompson sampling on own plus the neighbours' latest own statistics."""

    agent_id = "thompson_beta_shared"
    payload_layouts = {"neighbors": "counts_sums"}  # [counts (M), sums (M)]
    shared = True


class ThompsonGaussian(IndexPolicy):
    """Gaussian-prior Thompson sampling (Agrawal and Goyal 2013): the sample of arm k is
    ``N(s_k / (n_k + 1), scale^2 / (n_k + 1))`` (:class:`baselines.thompson.ThompsonGaussian`
    on JAX)."""

    agent_id = "thompson_gaussian"
    ties = False  # continuous samples: exact ties have probability zero
    uses_total = False
    version = 1

    def __init__(self, scale: float | None = None):
        self.config = ThompsonGaussianConfig(self.agent_id, scale)

    def index(self, key, n, s, total, params):
        z = jax.random.normal(key, n.shape, jnp.float32)
        return gaussian_posterior_sample(n, s, z, params.scale)


class ThompsonGaussianShared(ThompsonGaussian):
    """Gaussian Thompson sampling on own plus the neighbours' latest own statistics."""

    agent_id = "thompson_gaussian_shared"
    payload_layouts = {"neighbors": "counts_sums"}  # [counts (M), sums (M)]
    shared = True
