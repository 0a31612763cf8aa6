"""LDP-UCB in JAX (Ren, Zhou, Liu & Shroff, "Multi-Armed Bandits with Local Differential
Privacy", 2020).

The JAX form of :mod:`agents.ldp_ucb` (the numpy learner, the model) for one run, vectorized
over the N agents and K arms (docs/ldp-ucb.md), on the params protocol. Every agent privatizes each reward itself (the local trust
model) and uploads the report over a summing ``server`` channel; every agent then holds the same
global statistics and plays the arm of maximal index. LDP-UCB-L (``mechanism="laplace"``) and
LDP-UCB-B (``"bernoulli"``) as the authors' code, with the numpy learner's federated form:

==========  =========================================================================
``n``       n_a: the reports of arm a, from the pseudo-count 1 (int32, the same for all agents)
``S``       S_a: the sum of the reports of arm a (a compensated float32 sum)
``r``       the reward mapped into [0, 1] (affine through the reward bounds, or a sigmoid)
``scale``   1/epsilon: the Laplace scale of a report (LaplaceMechanism, sensitivity 1)
``keep``    e^eps / (1 + e^eps): randomized response keeps the Bernoulli(r) bit
``width``   w of LDP-UCB-B: (e^eps + 1)/(e^eps - 1) (``rescale_width``) or 1
==========  =========================================================================

Index (docs/ldp-ucb.md, "Rules as implemented"), with ``n = sum_a n_a``:

* LDP-UCB-L: forced exploration of the lowest arm with ``n_a <= 4 ln(n + 1)``; otherwise
  ``S_a/n_a + sqrt(2 ln n / n_a) + sqrt(32 ln n / (epsilon^2 n_a))``;
* LDP-UCB-B: ``S_a/n_a + w sqrt(2 ln n / n_a)``.

Timing, the numpy learner's: env step 0 (reset) chooses from the pseudo-counts; after each pull step a
communication step (``pull`` False) in which every agent uploads ``[indicator of its arm (K),
its report at that arm (K)]`` (dim 2K); the sums arrive in the same step and the next pull is
chosen from them. A run of T pulls takes 2T - 1 engine steps and the ledger charges N uploads
and N replies per round, as numpy. The choice of the two kinds of step is a ``jnp.where`` on
the observation's phase: both (the upload and the choice) are computed every step, which costs
one index evaluation per communication step.

The hyperparameters and their validation (:class:`~agents.ldp_ucb.LDPUCBConfig`), the checks
of the facts (the family, the server channel with aggregate "sum" and participation 1, the
squashing and its bounds) and the constants (the Laplace scale, 32/epsilon^2, keep, w) are the
params of the numpy learner's pure :func:`~agents.ldp_ucb.ldp_params` (``make_params``, in
Python, before tracing). The formulas are the numpy learner's functions, written once for both
engines: :func:`~agents.ldp_ucb.unit_reward`, :func:`~agents.ldp_ucb.report` (given the standard
draws) and :func:`~agents.ldp_ucb.ldp_index`.

Deviations, none in the algorithm: the Laplace draws, the Bernoulli and randomized-response
uniforms and the tie-breaking uniforms (one per agent and choice, numpy's rule: the
``floor(u k)``-th of the k maxima) come from the step's key; statistics are float32 (S
compensated, n int32).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from agents.ldp_ucb import (
    AGENT_ID,
    CHANNEL,
    VERSION,
    LDPUCBConfig,
    LDPUCBParams,
    ldp_channel_spec,
    ldp_index,
    ldp_params,
    report,
)
from fedbandit_env.jax.accumulate import Total, total_add
from fedbandit_env.jax.types import COMMUNICATION, Action, Observation
from fedbandit_env.policy import FederationFacts
from fedbandit_env.ties import argmax_one_uniform
from fedbandit_env.xp import is_zero


class LDPUCBState(NamedTuple):
    """The global statistics (the same for every agent): ``n`` (K,) int32 report counts from
    the pseudo-count 1, ``S`` (K,) compensated report sums; ``outgoing`` (N, 2K) the last upload."""

    n: jnp.ndarray
    S: Total
    outgoing: jnp.ndarray


class LDPUCB:
    """LDP-UCB-L / LDP-UCB-B on a summing server (module docstring; :class:`agents.LDPUCB` on
    JAX, on the params protocol: :class:`agents.ldp_ucb.LDPUCBParams`)."""

    agent_id = AGENT_ID
    version = VERSION
    privacy_trust_model = "local"

    def __init__(
        self,
        epsilon: float = 1.0,
        mechanism: str = "laplace",
        rescale_width: bool = True,
        squash: str = "auto",
    ):
        self.config = LDPUCBConfig(epsilon, mechanism, rescale_width, squash)

    @property
    def privacy_epsilon(self) -> float:
        """Declared guarantee: each reward report is epsilon-LDP (``inf``: not private)."""
        return self.config.epsilon

    def channel_spec(self, config) -> dict[str, dict[str, Any]]:
        """``server`` (dim 2K, aggregate "sum")."""
        return ldp_channel_spec(config.num_arms)

    def make_params(self, facts: FederationFacts) -> LDPUCBParams:
        """:func:`agents.ldp_ucb.ldp_params`: the squashing and the mechanism's constants;
        checks the facts."""
        return ldp_params(self.config, facts)

    # ------------------------------------------------------------------- init
    def init(self, key: jax.Array, params: LDPUCBParams) -> LDPUCBState:
        """Pseudo-count 1 per arm, zero sums."""
        K = params.num_arms
        zeros = jnp.zeros(K, jnp.float32)
        return LDPUCBState(
            n=jnp.ones(K, jnp.int32),
            S=Total(zeros, zeros),
            outgoing=jnp.zeros((params.num_agents, 2 * K), jnp.float32),
        )

    # ------------------------------------------------------------ the client
    def report(self, key: jax.Array, reward: jnp.ndarray, params: LDPUCBParams) -> jnp.ndarray:
        """The epsilon-LDP report (N,) of each agent's reward, made at the agent
        (:func:`agents.ldp_ucb.report`) with its standard draws from ``key``: LDP-UCB-L one
        Laplace per agent (none when the scale is 0), LDP-UCB-B two uniforms per agent (the
        Bernoulli(r) draw and randomized response)."""
        reward = reward.astype(jnp.float32)
        if params.config.mechanism == "bernoulli":
            draws = jax.random.uniform(key, (2, *reward.shape), jnp.float32)
        elif is_zero(params.scale):
            draws = None
        else:
            draws = jax.random.laplace(key, reward.shape, jnp.float32)
        return report(reward, draws, params)

    # ----------------------------------------------------------- the learner
    def index(self, n: jnp.ndarray, S: Total, params: LDPUCBParams) -> jnp.ndarray:
        """The index (K,) of the global statistics (:func:`agents.ldp_ucb.ldp_index`)."""
        return ldp_index(n.astype(jnp.float32), S.total - S.carry, params)

    def act(self, key: jax.Array, state: LDPUCBState, obs: Observation, params: LDPUCBParams):
        """After a pull: upload the arm indicator and the private report (a communication
        step, ``pull`` False). After the server's sums (or at reset): add them to ``n`` and
        ``S`` and choose the arm of maximal index, ties uniformly per agent."""
        k_report, k_tie = jax.random.split(key)
        K, N = params.num_arms, params.num_agents
        upload = (obs.step > 0) & (obs.phase != COMMUNICATION)
        # the upload: indicator of the last arm and the report in its slot
        arm = jnp.maximum(obs.last_arm, 0)
        hit = (arm[:, None] == jnp.arange(K, dtype=jnp.int32)).astype(jnp.float32)  # (N, K)
        rep = self.report(k_report, obs.last_reward, params)
        outgoing = jnp.concatenate([hit, hit * rep[:, None]], axis=1)
        # the server's sums, when they arrived (a communication step)
        arrived = (obs.step > 0) & (obs.phase == COMMUNICATION)
        total = obs.deliveries[CHANNEL].aggregate
        n = state.n + jnp.where(arrived, jnp.round(total[:K]).astype(jnp.int32), 0)
        S = total_add(state.S, jnp.where(arrived, total[K:], 0.0))
        u = jax.random.uniform(k_tie, (N,), jnp.float32)
        q = jnp.broadcast_to(self.index(n, S, params), (N, K))
        arms = jnp.where(upload, 0, argmax_one_uniform(q, u)).astype(jnp.int32)
        new = LDPUCBState(
            n=jnp.where(upload, state.n, n),
            S=jax.tree_util.tree_map(lambda a, b: jnp.where(upload, a, b), state.S, S),
            outgoing=jnp.where(upload, outgoing, state.outgoing),
        )
        send = jnp.broadcast_to(upload, (N,))
        return Action(arms, {CHANNEL: (send, new.outgoing)}, ~upload), new
