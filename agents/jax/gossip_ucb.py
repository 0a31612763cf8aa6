"""Gossip_UCB and Fed_UCB in JAX (Zhu, Zhu, Liu & Liu, "Federated Bandit: A Gossiping Approach").

The JAX form of :mod:`agents.gossip_ucb` (the numpy learners, the model) for one run, vectorized
over the N agents and M arms, on the params protocol (:class:`GossipJaxParams`: the numpy
learners' :class:`agents.gossip_ucb.GossipParams` from :func:`agents.gossip_ucb.gossip_params`,
plus Fed_UCB's JAX tree counter). Gossip_UCB is Algorithm 1 of the paper, Fed_UCB is Algorithm 4
(Algorithm 1 on the private means of Algorithms 2 and 3). The names are the paper's and the numpy
learners':

==========  =========================================================================
``n``       n_{i,k}(t): own pulls of arm k, the initialization pull included (int32)
``S``       own reward sums (the numerator of Eq. (2), the initialization sample included;
            a compensated float32 sum)
``xbar``    X̄_{i,k}(t) of Eq. (2); Fed_UCB: the private mean X̄̃_{i,k}(t) of Algorithm 3
``theta``   ϑ_{i,k}(t): the gossiped estimate of the global mean (Fed_UCB: ϑ̃)
``ntil``    ñ_{i,k}(t+1): the estimate of max_j n_{j,k}, Eq. (1) (int32)
==========  =========================================================================

Two channels carry the messages (:func:`agents.gossip_ucb.gossip_channel_spec`): ``neighbors``
(dim M, ``reduce="max"``: every agent sends ñ to every neighbour each round, Eq. (1)) and
``gossip`` (dim M: the environment activates one uniformly random edge per round; its endpoints
exchange ϑ, Algorithm 1 lines 17-22).

Timing, the numpy learners': a round t is one env step. In env step M + t an agent submits its
arm a_i(t) with ñ_i(t) on ``neighbors`` and ϑ_i(t-1) on ``gossip``; that step's observation
holds its reward, the neighbours' ñ_j(t) and, on the active edge, the partner's ϑ_j(t-1). Env
steps 1..M are the initialization (arm k at step k + 1, all agents at once, no messages), so the
environment's horizon is T + M and the t of the bonus counts rounds after the initialization
(docs/gossip.md, "Round and timing" and "Decisions").

``act`` is one pure function of the step: it computes the rest of a round (lines 15-22 and
line 5), kept after the initialization (a ``jnp.where`` on ``obs.step`` in the first M steps
only, behind a batch-level ``cond``), runs the initialization
(Algorithm 1, t = 0) at step M only, behind a batch-level ``cond``
(:func:`fedbandit_env.jax.batch.when_any`, masked per run inside), then decides (lines 3-13). The formulas both engines share are
one function each: the bonus and the decision (:func:`agents.gossip_index.decide`), the gossip
update (:func:`agents.gossip_index.gossip_update`), Eq. (1)'s maximum over the neighbours
(:func:`agents.field_common.neighbour_max`) and the reward clip
(:func:`agents.gossip_ucb.learning_reward`). The hyperparameters are validated by the numpy
learners' configurations (:class:`~agents.gossip_ucb.GossipConfig`,
:class:`~agents.gossip_ucb.FedUCBConfig`); the checks of the facts and the constants (alpha1, T,
the reward range, the counter's options and the privacy caveats) are the params'.

Deviations, none in the algorithm: ties (line 10) and lagging arms (line 13) use one uniform per
agent and round from the step's key (numpy: its ``choice`` stream, same rule: the ``floor(u
k)``-th of the k candidates); the counter's Laplace draws come from the key
(:mod:`fedbandit_env.jax.tree_counter`); statistics are float32 (``S`` compensated).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from agents.field_common import neighbour_max
from agents.gossip_index import decide, gossip_update
from agents.gossip_ucb import (
    AGENT_ID,
    FED_AGENT_ID,
    FED_VERSION,
    GOSSIP,
    NEIGHBORS,
    VERSION,
    FedUCBConfig,
    GossipConfig,
    GossipParams,
    bonus_parameters,
    counter_options,
    gossip_channel_spec,
    gossip_params,
    learning_reward,
)
from fedbandit_env.jax.accumulate import Total, total_add
from fedbandit_env.jax.batch import when_any
from fedbandit_env.jax.tree_counter import TreeCounter
from fedbandit_env.jax.types import Action, Observation
from fedbandit_env.policy import FederationFacts


@dataclass(frozen=True)
class GossipJaxParams(GossipParams):
    """:class:`agents.gossip_ucb.GossipParams` and Fed_UCB's JAX tree counter (``counter``,
    None without privacy), built from the params' :func:`~agents.gossip_ucb.counter_options`."""

    counter: TreeCounter | None = None


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
    (:class:`agents.GossipUCB` on JAX, on the params protocol; module doc)."""

    agent_id = AGENT_ID
    version = VERSION

    def __init__(
        self,
        bonus_scale: float = 1.0,
        alpha1: float | None = None,
        literal_line_order: bool = False,
    ):
        self.config: GossipConfig = GossipConfig(
            self.agent_id, bonus_scale, alpha1, literal_line_order
        )

    @property
    def privacy_epsilon(self) -> float:
        """Declared per-agent epsilon-DP guarantee (``inf``: Gossip_UCB is not private)."""
        return getattr(self.config, "epsilon", math.inf)

    def channel_spec(self, config) -> dict[str, dict[str, Any]]:
        """``neighbors`` (dim M, reduce "max") and ``gossip`` (dim M)."""
        return gossip_channel_spec(config.num_arms)

    def make_params(self, facts: FederationFacts) -> GossipJaxParams:
        """:func:`agents.gossip_ucb.gossip_params` (N, M, T = horizon - M rounds, alpha1, the
        reward range and the guarantee; it checks the channels, the family, N >= 3, a horizon
        longer than M and a connected graph) and, with finite epsilon, the JAX tree counter of
        the params' options."""
        base = gossip_params(self.config, facts)
        counter = None
        if base.private:
            shape = (base.num_agents, base.num_arms)
            epsilon = self.config.epsilon
            counter = TreeCounter(shape, base.rounds, epsilon, **counter_options(base))
        return GossipJaxParams(**vars(base), counter=counter)

    # ------------------------------------------------------------------- init
    def init(self, key: jax.Array, params: GossipJaxParams) -> GossipState:
        """Zero statistics, before the initialization; the counters empty."""
        shape = (params.num_agents, params.num_arms)
        zeros = jnp.zeros(shape, jnp.float32)
        return GossipState(
            n=jnp.zeros(shape, jnp.int32),
            S=Total(zeros, zeros),
            xbar=zeros,
            theta=zeros,
            ntil=jnp.zeros(shape, jnp.int32),
            t=jnp.zeros((), jnp.int32),
            init_rewards=zeros,
            counter=() if params.counter is None else params.counter.init(),
        )

    # ------------------------------------------------------------- the round
    def act(self, key: jax.Array, state: GossipState, obs: Observation, params: GossipJaxParams):
        """One env step s = ``obs.step`` for every agent: record the initialization reward of
        step s (1 <= s <= M); pull arm s during the initialization (s < M), run Algorithm 1's
        initialization at s = M (:meth:`_initialize`), else the rest of round s - M
        (:meth:`_observe`); then decide round t = s - M + 1 (Algorithm 1 lines 3-13,
        :func:`~agents.gossip_index.decide`) and send ñ(t) and ϑ(t-1)."""
        k_choice, k_privacy = jax.random.split(key)
        N, M = params.num_agents, params.num_arms
        s = obs.step
        reward = learning_reward(obs.last_reward, params.reward_clip)
        slot = (jnp.arange(M, dtype=jnp.int32) == s - 1)[None, :]  # arm s - 1 at env step s
        base = state._replace(init_rewards=jnp.where(slot, reward[:, None], state.init_rewards))
        state = self._observe(k_privacy, base, obs, reward, params)
        # before the initialization the state stays as it was: only in the steps where some run
        # of the batch is there (the first M), a batch-level cond masked per run inside
        state = when_any(s <= M, lambda new: _select(s > M, new, base), state)
        # the initialization once, at s = M: only in the step where some run of the batch takes
        # it (a batch-level cond, masked per run inside)
        state = when_any(s == M, lambda b: _select(
            s == M, self._initialize(k_privacy, b, params), b), state)  # fmt: skip
        t = jnp.maximum(s - M + 1, 0).astype(jnp.int32)
        state = state._replace(t=t)
        u = jax.random.uniform(k_choice, (N,), jnp.float32)  # ties and lagging arms
        chosen = decide(state.theta, state.n, state.ntil, jnp.maximum(t, 1), u,
                        **bonus_parameters(params))  # fmt: skip
        arms = jnp.where(s < M, s, chosen)
        send = jnp.broadcast_to(s >= M, (N,))
        messages = {
            NEIGHBORS: (send, state.ntil.astype(jnp.float32)),
            GOSSIP: (send, state.theta),
        }
        return Action(arms.astype(jnp.int32), messages), state

    def _initialize(self, key: jax.Array, s: GossipState, params: GossipJaxParams) -> GossipState:
        """Algorithm 1's initialization (t = 0): n = 1, S = X(0), ϑ = X̄ = the initial mean,
        ñ = n. The initial mean is X(0); Fed_UCB with ``noisy_init``: X̄̃(0), the sample plus
        its own Laplace leaf of the counter (else the paper's unprotected X(0))."""
        n = jnp.ones_like(s.n)
        xbar, counter = s.init_rewards, s.counter
        tree = params.counter
        if tree is not None and params.config.noisy_init:
            counter = tree.insert(key, s.counter, s.init_rewards)
            xbar = s.init_rewards + tree.noise(counter)  # S = X(0) now
        S = Total(s.init_rewards, jnp.zeros_like(s.init_rewards))
        return s._replace(n=n, S=S, xbar=xbar, theta=xbar, ntil=n, counter=counter)

    def _observe(self, key: jax.Array, s: GossipState, obs: Observation, reward: jnp.ndarray,
                 params: GossipJaxParams) -> GossipState:  # fmt: skip
        """The rest of round t from the observation of its env step: the pull (Algorithm 1
        lines 15-16, Eq. (2)), the gossip update (lines 17-22) and ñ(t+1) (line 5, Eq. (1))."""
        arm = obs.last_arm
        hit = arm[:, None] == jnp.arange(params.num_arms, dtype=jnp.int32)  # (N, M)
        n = s.n + hit.astype(jnp.int32)  # line 16
        S = total_add(s.S, jnp.where(hit, reward[:, None], 0.0))
        xbar, counter = self._update_mean(key, s, hit, arm, reward, n, S, params)  # line 15
        theta = gossip_update(s.theta, obs.deliveries[GOSSIP], xbar, s.xbar)  # lines 17-22
        best_heard = neighbour_max(obs.deliveries[NEIGHBORS])  # Eq. (1): max over the ñ_j(t)
        own = s.n if params.config.literal_line_order else n
        ntil = jnp.maximum(own, jnp.round(best_heard).astype(jnp.int32))
        return s._replace(n=n, S=S, xbar=xbar, theta=theta, ntil=ntil, counter=counter)

    def _update_mean(self, key, s: GossipState, hit, arm, reward, n, S,
                     params: GossipJaxParams) -> tuple[jnp.ndarray, Any]:  # fmt: skip
        """Eq. (2): X̄ = S / n (only the pulled arm's value changes). Fed_UCB with a counter:
        Algorithm 3 at the pulled arm, X̄̃ = (S + noise of its blocks) / n; Algorithm 4 line 17:
        the other arms keep X̄̃(t-1)."""
        tree = params.counter
        if tree is None:
            return (S.total - S.carry) / n.astype(jnp.float32), s.counter
        counter = tree.insert_arms(key, s.counter, arm, reward)
        private = (S.total - S.carry + tree.noise(counter)) / n.astype(jnp.float32)
        return jnp.where(hit, private, s.xbar), counter


class GossipFedUCB(GossipUCB):
    """Fed_UCB (Algorithm 4): Gossip_UCB on private means from binary-tree counters
    (:class:`agents.GossipFedUCB` on JAX; its docstring has the reward range and the guarantee).

    Each agent privatizes its own running reward sums with a
    :class:`~fedbandit_env.jax.tree_counter.TreeCounter` (Algorithm 2's dyadic blocks over the
    round index, ``tree_index="round"``, or the arm's pull count, ``"pull"``), per-level budget
    epsilon' = epsilon / levels and ``Lap(sensitivity / epsilon')`` per block, with the numpy
    learner's options (:func:`agents.gossip_ucb.counter_options`: the same levels, scale,
    initialization leaf and empty-block rule). Algorithm 3: the pulled arm's private mean is (S
    + the noise of the counter's blocks) / n; the other arms keep theirs (Algorithm 4 line 17).
    The bonus is Eq. (12). The params (:meth:`make_params`) hold ``dp_guarantee_holds``,
    ``dp_caveats``, ``sensitivity`` and ``reward_bounds``."""

    agent_id = FED_AGENT_ID
    version = FED_VERSION

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
        self.config = FedUCBConfig(
            self.agent_id, bonus_scale, alpha1, literal_line_order, epsilon=epsilon,
            dp_bonus_scale=dp_bonus_scale, dp_log_floor=dp_log_floor, noisy_init=noisy_init,
            tree_index=tree_index, privacy_levels=privacy_levels,
            noise_on_empty_blocks=noise_on_empty_blocks, reward_clip=reward_clip,
        )  # fmt: skip
