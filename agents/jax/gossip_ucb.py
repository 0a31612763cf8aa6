"""Gossip_UCB and Fed_UCB in JAX (Zhu, Zhu, Liu & Liu, "Federated Bandit: A Gossiping Approach").

Port of :mod:`agents.gossip_ucb` (the numpy twin, the model) for one run, vectorized over the N
agents and M arms. Gossip_UCB is Algorithm 1 of the paper, Fed_UCB is Algorithm 4 (Algorithm 1
on the private means of Algorithms 2 and 3). The names are the paper's and the twin's:

==========  =========================================================================
``n``       n_{i,k}(t): own pulls of arm k, the initialization pull included (int32)
``S``       own reward sums (the numerator of Eq. (2), the initialization sample included;
            a compensated float32 sum)
``xbar``    X̄_{i,k}(t) of Eq. (2); Fed_UCB: the private mean X̄̃_{i,k}(t) of Algorithm 3
``theta``   ϑ_{i,k}(t): the gossiped estimate of the global mean (Fed_UCB: ϑ̃)
``ntil``    ñ_{i,k}(t+1): the estimate of max_j n_{j,k}, Eq. (1) (int32)
==========  =========================================================================

Two channels carry the messages, as in the twin (same ``channel_spec``): ``neighbors`` (dim M,
``reduce="max"``: every agent sends ñ to every neighbour each round, Eq. (1)) and ``gossip``
(dim M: the environment activates one uniformly random edge per round; its endpoints exchange
ϑ, Algorithm 1 lines 17-22).

Timing, the twin's: a round t is one env step. In env step M + t an agent submits its arm
a_i(t) with ñ_i(t) on ``neighbors`` and ϑ_i(t-1) on ``gossip``; that step's observation holds
its reward, the neighbours' ñ_j(t) and, on the active edge, the partner's ϑ_j(t-1). Env steps
1..M are the initialization (arm k at step k + 1, all agents at once, no messages), so the
environment's horizon is T + M and the t of the bonus counts rounds after the initialization
(docs/gossip.md, "Round and timing" and "Decisions").

``act`` is one pure function of the step: it computes the initialization (Algorithm 1, t = 0)
and the rest of a round (lines 15-22 and line 5) and keeps the one the step calls for
(``jnp.where`` on ``obs.step``), then decides (lines 3-13). The hyperparameters, their
validation, the checks of the federation's facts and the constants (alpha1, T, the counter's
levels and Laplace scale, the reward range and the privacy caveats) are the twin's: ``init``
runs the twin's ``reset`` on the same facts (in Python, before tracing) and reads them.

Deviations, none in the algorithm: ties (line 10) and lagging arms (line 13) use one uniform per
agent and round from the step's key (the twin: its ``choice`` stream, same rule: the ``floor(u
k)``-th of the k candidates); the counter's Laplace draws come from the key
(:mod:`fedbandit_env.jax.tree_counter`); statistics are float32 (``S`` compensated).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from agents.gossip_index import index
from agents.gossip_ucb import GOSSIP, NEIGHBORS
from agents.gossip_ucb import GossipFedUCB as NumpyGossipFedUCB
from agents.gossip_ucb import GossipUCB as NumpyGossipUCB
from fedbandit_env.jax.accumulate import Total, total_add
from fedbandit_env.jax.channels.neighbors import NeighborsAggregate
from fedbandit_env.jax.tree_counter import TreeCounter, TreeCounterState
from fedbandit_env.jax.types import Action, Observation
from fedbandit_env.policy import FederationFacts
from fedbandit_env.seeding import BatchedRNG
from fedbandit_env.ties import argmax_one_uniform


# ---------------------------------------------------------------- state
class GossipState(NamedTuple):
    """The paper's per-agent variables after round ``t`` (module doc), each (N, M), and
    ``init_rewards`` X_{i,k}(0) (N, M), filled during the initialization; ``counter`` the
    Fed_UCB tree counters' state (``()`` without privacy)."""

    n: jnp.ndarray
    S: Total
    xbar: jnp.ndarray
    theta: jnp.ndarray
    ntil: jnp.ndarray
    t: jnp.ndarray
    init_rewards: jnp.ndarray
    counter: Any


def _select(pred: jnp.ndarray, new: Any, old: Any) -> Any:
    """``new`` where ``pred`` holds, else ``old``, leaf by leaf (same pytree structure)."""
    return jax.tree_util.tree_map(lambda a, b: jnp.where(pred, a, b), new, old)


class GossipUCB:
    """Gossip_UCB (Algorithm 1): UCB on gossiped estimates ϑ with the local consistency rule
    (port of :class:`agents.GossipUCB`)."""

    twin_class: type = NumpyGossipUCB
    agent_id = NumpyGossipUCB.agent_id
    version = NumpyGossipUCB.version

    def __init__(
        self,
        bonus_scale: float = 1.0,
        alpha1: float | None = None,
        literal_line_order: bool = False,
    ):
        # the twin validates the hyperparameters (GossipConfig) and, in init, the facts
        self.twin = NumpyGossipUCB(bonus_scale, alpha1, literal_line_order)
        self.config = self.twin.config

    @property
    def privacy_epsilon(self) -> float:
        """Declared per-agent epsilon-DP guarantee (``inf``: Gossip_UCB is not private)."""
        return self.twin.privacy_epsilon

    @property
    def dp_guarantee_holds(self) -> bool | None:
        """The twin's statement after ``init`` (None before)."""
        return self.twin.dp_guarantee_holds

    @property
    def dp_caveats(self) -> tuple[str, ...]:
        return self.twin.dp_caveats

    def channel_spec(self, config) -> dict[str, dict[str, Any]]:
        """The twin's: ``neighbors`` (dim M, reduce "max") and ``gossip`` (dim M)."""
        return self.twin.channel_spec(config)

    # ------------------------------------------------------------------- init
    def init(self, key: jax.Array, facts: FederationFacts) -> GossipState:
        """Zero statistics; the constants (N, M, T = horizon - M rounds, alpha1, the privacy
        counter) from the twin's ``reset`` on the same facts, which also checks them (the
        channels, the family, N >= 3, a horizon longer than M, a connected graph)."""
        twin = self.twin
        twin.reset(facts, BatchedRNG([np.random.SeedSequence(0)]))
        self.N, self.M, self.T, self.alpha1 = twin.N, twin.M, twin.T, float(twin.alpha1)
        self._reset_privacy()
        shape = (self.N, self.M)
        zeros = jnp.zeros(shape, jnp.float32)
        return GossipState(
            n=jnp.zeros(shape, jnp.int32),
            S=Total(zeros, zeros),
            xbar=zeros,
            theta=zeros,
            ntil=jnp.zeros(shape, jnp.int32),
            t=jnp.zeros((), jnp.int32),
            init_rewards=zeros,
            counter=self._counter_init(),
        )

    def _reset_privacy(self) -> None:
        """Gossip_UCB releases exact means (no privacy)."""
        self.counter = None

    def _counter_init(self) -> Any:
        return () if self.counter is None else self.counter.init()

    # ------------------------------------------------------------- the round
    def act(self, key: jax.Array, state: GossipState, obs: Observation):
        """One env step s = ``obs.step`` for every agent: record the initialization reward of
        step s (1 <= s <= M); pull arm s during the initialization (s < M), run Algorithm 1's
        initialization at s = M, else the rest of round s - M (:meth:`_observe`); then decide
        round t = s - M + 1 (:meth:`_decide`) and send ñ(t) and ϑ(t-1)."""
        k_choice, k_privacy = jax.random.split(key)
        s, M = obs.step, self.M
        reward = self._reward(obs.last_reward)
        slot = (jnp.arange(M, dtype=jnp.int32) == s - 1)[None, :]  # arm s - 1 at env step s
        base = state._replace(init_rewards=jnp.where(slot, reward[:, None], state.init_rewards))
        initialized = self._initialize(k_privacy, base)
        observed = self._observe(k_privacy, base, obs, reward)
        state = _select(s == M, initialized, _select(s > M, observed, base))
        t = jnp.maximum(s - M + 1, 0).astype(jnp.int32)
        state = state._replace(t=t)
        arms = jnp.where(s < M, s, self._decide(k_choice, state, jnp.maximum(t, 1)))
        send = jnp.broadcast_to(s >= M, (self.N,))
        messages = {
            NEIGHBORS: (send, state.ntil.astype(jnp.float32)),
            GOSSIP: (send, state.theta),
        }
        return Action(arms.astype(jnp.int32), messages), state

    def _reward(self, reward: jnp.ndarray) -> jnp.ndarray:
        """The reward value the agent learns from (Fed_UCB may clip it)."""
        return reward

    def _initialize(self, key: jax.Array, s: GossipState) -> GossipState:
        """Algorithm 1's initialization (t = 0): n = 1, S = X(0), ϑ = X̄ = the initial mean,
        ñ = n."""
        n = jnp.ones_like(s.n)
        xbar, counter = self._initial_mean(key, s)
        S = Total(s.init_rewards, jnp.zeros_like(s.init_rewards))
        return s._replace(n=n, S=S, xbar=xbar, theta=xbar, ntil=n, counter=counter)

    def _initial_mean(self, key: jax.Array, s: GossipState) -> tuple[jnp.ndarray, Any]:
        """X̄(0) = X(0) (and the counters' state, unchanged)."""
        return s.init_rewards, s.counter

    def bonus_parameters(self) -> dict[str, Any]:
        """The keyword arguments of :func:`exploration_bonus` for this federation."""
        return {"num_agents": self.N, "alpha1": self.alpha1, "bonus_scale": self.config.bonus_scale}

    def _decide(self, key: jax.Array, s: GossipState, t: jnp.ndarray) -> jnp.ndarray:
        """Algorithm 1 lines 3-13: a lagging arm (line 6: n < ñ - N) if the agent has one,
        uniformly among them (line 13), else an arg-max of Q (lines 9-10), uniform on ties. One
        uniform per agent and round makes either choice: the ``floor(u k)``-th of the ``k``
        lagging arms, or of the ``k`` tied maxima."""
        u = jax.random.uniform(key, (self.N,), jnp.float32)
        q = index(s.theta, s.n, t, **self.bonus_parameters())  # line 9
        lagging = s.n < s.ntil - self.N  # line 6
        q = jnp.where(lagging, jnp.inf, q)  # a lagging arm goes first (lines 7 and 13)
        return argmax_one_uniform(q, u)

    def _observe(self, key: jax.Array, s: GossipState, obs: Observation,
                 reward: jnp.ndarray) -> GossipState:  # fmt: skip
        """The rest of round t from the observation of its env step: the pull (Algorithm 1
        lines 15-16, Eq. (2)), the gossip update (lines 17-22) and ñ(t+1) (line 5, Eq. (1))."""
        arm = obs.last_arm
        hit = arm[:, None] == jnp.arange(self.M, dtype=jnp.int32)  # (N, M)
        n = s.n + hit.astype(jnp.int32)  # line 16
        S = total_add(s.S, jnp.where(hit, reward[:, None], 0.0))
        xbar, counter = self._update_mean(key, s, hit, arm, reward, n, S)  # line 15: X̄(t)
        gossip = obs.deliveries[GOSSIP]  # line 20: average with the partner's ϑ_j(t-1)
        averaged = 0.5 * (s.theta + gossip.payload)
        mixed = jnp.where(gossip.received[:, None], averaged, s.theta)
        theta = mixed + (xbar - s.xbar)  # lines 20 and 22: + X̄(t) - X̄(t-1)
        heard = obs.deliveries[NEIGHBORS]  # Eq. (1): max over the neighbours' ñ_j(t)
        if isinstance(heard, NeighborsAggregate):  # max over arrived messages, 0 if none
            best_heard = heard.value
        else:  # a padded neighbors channel
            best_heard = jnp.where(heard.mask[..., None], heard.payload, 0.0).max(axis=1)
        own = s.n if self.config.literal_line_order else n
        ntil = jnp.maximum(own, jnp.round(best_heard).astype(jnp.int32))
        return s._replace(n=n, S=S, xbar=xbar, theta=theta, ntil=ntil, counter=counter)

    def _update_mean(self, key, s: GossipState, hit, arm, reward, n, S) -> tuple[jnp.ndarray, Any]:
        """Eq. (2): X̄ = S / n (only the pulled arm's value changes)."""
        return (S.total - S.carry) / n.astype(jnp.float32), s.counter


class GossipFedUCB(GossipUCB):
    """Fed_UCB (Algorithm 4): Gossip_UCB on private means from binary-tree counters (port of
    :class:`agents.GossipFedUCB`; its docstring has the reward range and the guarantee).

    Each agent privatizes its own running reward sums with a
    :class:`~fedbandit_env.jax.tree_counter.TreeCounter` (Algorithm 2's dyadic blocks over the
    round index, ``tree_index="round"``, or the arm's pull count, ``"pull"``), per-level budget
    epsilon' = epsilon / levels and ``Lap(sensitivity / epsilon')`` per block, built from the
    twin's counter (same levels, scale, initialization leaf and empty-block rule). Algorithm 3:
    the pulled arm's private mean is (S + the noise of the counter's blocks) / n; the other arms
    keep theirs (Algorithm 4 line 17). The bonus is Eq. (12) (:func:`index`). After ``init``,
    ``dp_guarantee_holds``, ``dp_caveats``, ``sensitivity`` and ``reward_bounds`` are the twin's.
    """

    twin_class = NumpyGossipFedUCB
    agent_id = NumpyGossipFedUCB.agent_id
    version = NumpyGossipFedUCB.version

    def __init__(
        self,
        epsilon: float = 1.0,
        bonus_scale: float = 1.0,
        dp_bonus_scale: float = 1.0,
        noisy_init: bool = True,
        tree_index: str = "round",
        privacy_levels: str | None = None,
        noise_on_empty_blocks: bool = False,
        alpha1: float | None = None,
        literal_line_order: bool = False,
        reward_clip: tuple[float, float] | None = None,
        dp_log_floor: float = 2.0,
    ):
        self.twin = NumpyGossipFedUCB(
            epsilon, bonus_scale, dp_bonus_scale, noisy_init, tree_index, privacy_levels,
            noise_on_empty_blocks, alpha1, literal_line_order, reward_clip, dp_log_floor,
        )  # fmt: skip
        self.config = self.twin.config

    @property
    def sensitivity(self) -> float | None:
        return self.twin.sensitivity

    @property
    def reward_bounds(self) -> tuple[float, float] | None:
        return self.twin.reward_bounds

    def _reset_privacy(self) -> None:
        """The JAX counter of the twin's (None at ``epsilon = inf``)."""
        twin = self.twin.counter
        self.counter = None if twin is None else TreeCounter.from_twin(twin)

    def _reward(self, reward: jnp.ndarray) -> jnp.ndarray:
        clip = self.config.reward_clip
        return reward if clip is None else jnp.clip(reward, *clip)

    def _initial_mean(self, key: jax.Array, s: GossipState) -> tuple[jnp.ndarray, Any]:
        """X̄̃(0): the initialization sample plus its own Laplace leaf (``noisy_init``), or the
        paper's unprotected X(0)."""
        if self.counter is None or not self.config.noisy_init:
            return s.init_rewards, s.counter
        counter: TreeCounterState = self.counter.insert(key, s.counter, s.init_rewards)
        return s.init_rewards + self.counter.noise(counter), counter  # S = X(0) now

    def _update_mean(self, key, s: GossipState, hit, arm, reward, n, S) -> tuple[jnp.ndarray, Any]:
        """Algorithm 3 at the pulled arm: X̄̃ = (S + noise of its blocks) / n; Algorithm 4
        line 17: the other arms keep X̄̃(t-1)."""
        if self.counter is None:
            return super()._update_mean(key, s, hit, arm, reward, n, S)
        counter = self.counter.insert_arms(key, s.counter, arm, reward)
        private = (S.total - S.carry + self.counter.noise(counter)) / n.astype(jnp.float32)
        return jnp.where(hit, private, s.xbar), counter

    def bonus_parameters(self) -> dict[str, Any]:
        """Algorithm 4's bonus: Eq. (12) with this agent's privacy parameters."""
        cfg = self.config
        return {
            **super().bonus_parameters(),
            "epsilon": cfg.epsilon,
            "horizon": self.T,
            "dp_bonus_scale": cfg.dp_bonus_scale,
            "dp_log_floor": cfg.dp_log_floor,
        }
