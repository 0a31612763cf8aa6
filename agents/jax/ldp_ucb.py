"""LDP-UCB in JAX (Ren, Zhou, Liu & Shroff, "Multi-Armed Bandits with Local Differential
Privacy", 2020).

Port of :mod:`agents.ldp_ucb` (the numpy twin, the model) for one run, vectorized over the N
agents and K arms (docs/ldp-ucb.md). Every agent privatizes each reward itself (the local trust
model) and uploads the report over a summing ``server`` channel; every agent then holds the same
global statistics and plays the arm of maximal index. LDP-UCB-L (``mechanism="laplace"``) and
LDP-UCB-B (``"bernoulli"``) as the authors' code, with the twin's federated form:

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

Timing, the twin's: env step 0 (reset) chooses from the pseudo-counts; after each pull step a
communication step (``pull`` False) in which every agent uploads ``[indicator of its arm (K),
its report at that arm (K)]`` (dim 2K); the sums arrive in the same step and the next pull is
chosen from them. A run of T pulls takes 2T - 1 engine steps and the ledger charges N uploads
and N replies per round, as numpy. The choice of the two kinds of step is a ``jnp.where`` on
the observation's phase: both (the upload and the choice) are computed every step, which costs
one index evaluation per communication step.

The hyperparameters, their validation, the checks of the facts (the family, the server channel
with aggregate "sum" and participation 1, the squashing and its bounds) and the constants (the
Laplace scale, 32/epsilon^2, keep, w) are the twin's: ``init`` runs the twin's ``reset`` on the
same facts, in Python, before tracing.

Deviations, none in the algorithm: the Laplace draws, the Bernoulli and randomized-response
uniforms and the tie-breaking uniforms (one per agent and choice, the twin's rule: the
``floor(u k)``-th of the k maxima) come from the step's key; statistics are float32 (S
compensated, n int32).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from agents.ldp_ucb import CHANNEL
from agents.ldp_ucb import LDPUCB as NumpyLDPUCB
from fedbandit_env.jax.accumulate import Total, total_add
from fedbandit_env.jax.types import COMMUNICATION, Action, Observation
from fedbandit_env.policy import FederationFacts
from fedbandit_env.seeding import BatchedRNG
from fedbandit_env.ties import argmax_one_uniform


class LDPUCBState(NamedTuple):
    """The global statistics (the same for every agent): ``n`` (K,) int32 report counts from
    the pseudo-count 1, ``S`` (K,) compensated report sums; ``outgoing`` (N, 2K) the last upload."""

    n: jnp.ndarray
    S: Total
    outgoing: jnp.ndarray


class LDPUCB:
    """LDP-UCB-L / LDP-UCB-B on a summing server (module docstring; port of
    :class:`agents.LDPUCB`)."""

    twin_class: type = NumpyLDPUCB
    agent_id = NumpyLDPUCB.agent_id
    version = NumpyLDPUCB.version
    privacy_trust_model = NumpyLDPUCB.privacy_trust_model

    def __init__(
        self,
        epsilon: float = 1.0,
        mechanism: str = "laplace",
        rescale_width: bool = True,
        squash: str = "auto",
    ):
        # the twin validates the hyperparameters (LDPUCBConfig) and, in init, the facts
        self.twin = NumpyLDPUCB(epsilon, mechanism, rescale_width, squash)
        self.config = self.twin.config
        self.laplace = self.config.mechanism == "laplace"

    @property
    def privacy_epsilon(self) -> float:
        """Declared guarantee: each reward report is epsilon-LDP (``inf``: not private)."""
        return self.twin.privacy_epsilon

    def channel_spec(self, config) -> dict[str, dict[str, Any]]:
        """The twin's: ``server`` (dim 2K, aggregate "sum")."""
        return self.twin.channel_spec(config)

    # ------------------------------------------------------------------- init
    def init(self, key: jax.Array, facts: FederationFacts) -> LDPUCBState:
        """Pseudo-count 1 per arm, zero sums; the squashing and the mechanism's constants from
        the twin's ``reset`` on the same facts (which also checks them)."""
        twin = self.twin
        twin.reset(facts, BatchedRNG([np.random.SeedSequence(0)]))
        self.N, self.K = twin.N, twin.K
        self.squash, self.lo, self.hi = twin.squash, float(twin.lo), float(twin.hi)
        self.width = float(twin.width)
        if self.laplace:
            self.scale, self.priv_coef = float(twin.scale), float(twin.priv_coef)
        else:
            self.keep = float(twin.keep)
        zeros = jnp.zeros(self.K, jnp.float32)
        return LDPUCBState(
            n=jnp.ones(self.K, jnp.int32),
            S=Total(zeros, zeros),
            outgoing=jnp.zeros((self.N, 2 * self.K), jnp.float32),
        )

    # ------------------------------------------------------------ the client
    def unit_reward(self, reward: jnp.ndarray) -> jnp.ndarray:
        """The reward r in [0, 1] (docs/ldp-ucb.md, first rule): a sigmoid, or affine through
        the finite bounds, clipped."""
        reward = reward.astype(jnp.float32)
        if self.squash == "sigmoid":
            return jax.nn.sigmoid(reward)
        return jnp.clip((reward - self.lo) / (self.hi - self.lo), 0.0, 1.0)

    def report(self, key: jax.Array, reward: jnp.ndarray) -> jnp.ndarray:
        """The epsilon-LDP report (N,) of each agent's reward, made at the agent: LDP-UCB-L
        ``r + Lap(1/epsilon)``; LDP-UCB-B a Bernoulli(r) bit through randomized response (1 with
        probability ``(r e^eps + 1 - r)/(1 + e^eps)``)."""
        r = self.unit_reward(reward)
        if self.laplace:
            if self.scale == 0.0:
                return r
            return r + jnp.float32(self.scale) * jax.random.laplace(key, r.shape, jnp.float32)
        u = jax.random.uniform(key, (2, *r.shape), jnp.float32)
        bit = u[0] < r
        keep = u[1] < jnp.float32(self.keep)
        return jnp.where(keep, bit, ~bit).astype(jnp.float32)

    # ----------------------------------------------------------- the learner
    def index(self, n: jnp.ndarray, S: Total) -> jnp.ndarray:
        """The index (K,) of the global statistics (module docstring); LDP-UCB-L's forced
        exploration first (+inf at the lowest forced arm, -inf elsewhere)."""
        counts = n.astype(jnp.float32)
        positive = counts > 0  # the twin's guard: +inf where n <= 0, ln of at least 1
        nf = jnp.where(positive, counts, 1.0)
        log_n = jnp.log(jnp.maximum(counts.sum(), 1.0))
        value = (S.total - S.carry) / nf + jnp.float32(self.width) * jnp.sqrt(2.0 * log_n / nf)
        if not self.laplace:
            return jnp.where(positive, value, jnp.inf)
        value = value + jnp.sqrt(jnp.float32(self.priv_coef) * log_n / nf)
        value = jnp.where(positive, value, jnp.inf)
        forced = counts <= 4.0 * jnp.log(jnp.maximum(counts.sum(), 0.0) + 1.0)
        first = forced & (jnp.cumsum(forced.astype(jnp.int32)) == 1)
        return jnp.where(forced.any(), jnp.where(first, jnp.inf, -jnp.inf), value)

    def act(self, key: jax.Array, state: LDPUCBState, obs: Observation):
        """After a pull: upload the arm indicator and the private report (a communication
        step, ``pull`` False). After the server's sums (or at reset): add them to ``n`` and
        ``S`` and choose the arm of maximal index, ties uniformly per agent."""
        k_report, k_tie = jax.random.split(key)
        K, N = self.K, self.N
        upload = (obs.step > 0) & (obs.phase != COMMUNICATION)
        # the upload: indicator of the last arm and the report in its slot
        arm = jnp.maximum(obs.last_arm, 0)
        hit = (arm[:, None] == jnp.arange(K, dtype=jnp.int32)).astype(jnp.float32)  # (N, K)
        rep = self.report(k_report, obs.last_reward)
        outgoing = jnp.concatenate([hit, hit * rep[:, None]], axis=1)
        # the server's sums, when they arrived (a communication step)
        arrived = (obs.step > 0) & (obs.phase == COMMUNICATION)
        total = obs.deliveries[CHANNEL].aggregate
        n = state.n + jnp.where(arrived, jnp.round(total[:K]).astype(jnp.int32), 0)
        S = total_add(state.S, jnp.where(arrived, total[K:], 0.0))
        u = jax.random.uniform(k_tie, (N,), jnp.float32)
        q = jnp.broadcast_to(self.index(n, S), (N, K))
        arms = jnp.where(upload, 0, argmax_one_uniform(q, u)).astype(jnp.int32)
        new = LDPUCBState(
            n=jnp.where(upload, state.n, n),
            S=jax.tree_util.tree_map(lambda a, b: jnp.where(upload, a, b), state.S, S),
            outgoing=jnp.where(upload, outgoing, state.outgoing),
        )
        send = jnp.broadcast_to(upload, (N,))
        return Action(arms, {CHANNEL: (send, new.outgoing)}, ~upload), new
