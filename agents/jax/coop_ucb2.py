"""coop-UCB2 in JAX (Landgren, Srivastava & Leonard, "Distributed cooperative decision-making in
multiarmed bandits: frequentist and Bayesian algorithms", CDC 2016).

The JAX form of :mod:`agents.coop_ucb2` (the numpy learner, the model; docs/coop-ucb2.md) for one run,
vectorized over the N agents and K arms: running-consensus UCB, the paper's coop-UCB2. The
names are the paper's and the numpy learner's:

==========  ==================================================================================
``nhat``    n̂_i^k(t): agent i's estimate of the per-agent average pull count of arm k
``shat``    ŝ_i^k(t): its estimate of the per-agent average reward sum
``xi``      ξ_i^k(t): 1 if agent i pulled arm k in round t (reset every round)
``P``       the consensus matrix ``I - (kappa/d_max) L``, from the numpy learner's
            :func:`agents.field_common.consensus_setup`
``c0``      ``2 gamma / G(eta)``, ``G(eta) = 1 - eta^2/16`` (the configuration)
==========  ==================================================================================

The running consensus: ``nhat <- P (nhat + xi)``, ``shat <- P (shat + r xi)``; the index

    Q_i^k(t) = shat/nhat + sigma sqrt(c0 (nhat + f(t)) / (N nhat) * ln(max(t, 2)) / nhat),
    f(t) = sqrt(ln(max(t, 2))).

One channel, ``neighbors`` (dim 2K, ``reduce="sum"``, the numpy learner's ``channel_spec``): the
off-diagonal weight of P is the same on every edge, so a receiver needs only the sum of its
neighbours' messages (the padded delivery works too).

Timing, the numpy learner's "communicate, then pull" (docs/writing-agents.md, "Communication steps"):
round t (t = pulls + 1) pulls; the observation of that pull makes the agent send ``(nhat + xi,
shat + r xi)`` (2K floats to every neighbour) in a communication step (``pull=False``); the
observation of the communication step applies row i of P and chooses round t + 1's arm. Rounds
1..K pull arm t - 1 (the consensus runs from zero state, so ``nhat == 1`` at round K + 1). A
run takes 2T - 1 engine steps; the phase of the step (``obs.phase``) selects the branch with
``jnp.where`` (both branches are a few (N, 2K) operations).

Deviations, none in the algorithm: the tie-break uses one uniform per agent and round from the
step's key (numpy: its ``tiebreak`` stream, same ``floor(u k)``-th rule); the consensus state
is float32 (numpy: float64), so over long horizons ``nhat`` and ``shat`` carry float32
rounding of every consensus round (a linear map, not a sum of increments, hence not
compensated).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from agents.coop_ucb2 import (
    AGENT_ID,
    CHANNEL,
    VERSION,
    CoopParams,
    CoopUCB2Config,
    coop_channel_spec,
    coop_params,
)
from agents.jax.field_common import Mixing, mix
from fedbandit_env.jax.types import COMMUNICATION, PULL, Action, Observation
from fedbandit_env.policy import FederationFacts
from fedbandit_env.ties import argmax_one_uniform


class CoopState(NamedTuple):
    """``state`` (N, 2K) float32 ``[nhat (K), shat (K)]`` and ``outgoing`` (N, 2K) the last
    message sent, ``(nhat + xi, shat + r xi)`` (the numpy learner's ``state`` and ``outgoing``)."""

    state: jnp.ndarray
    outgoing: jnp.ndarray


def coop_index(
    nhat: jnp.ndarray, shat: jnp.ndarray, t: jnp.ndarray, *, c0: float, sigma: float, N: int
) -> jnp.ndarray:
    """Q_i^k(t) of coop-UCB2 (module doc; the twin's :meth:`agents.CoopUCB2.index`), +inf
    where ``nhat <= 0`` (the twin's guard)."""
    positive = nhat > 0
    n = jnp.where(positive, nhat, 1.0)
    log_t = jnp.log(jnp.maximum(t, 2).astype(jnp.float32))
    width = jnp.float32(c0) * (n + jnp.sqrt(log_t)) / (jnp.float32(N) * n) * log_t / n
    return jnp.where(positive, shat / n + jnp.float32(sigma) * jnp.sqrt(width), jnp.inf)


class CoopUCB2:
    """coop-UCB2, running-consensus UCB (:class:`agents.CoopUCB2` on JAX, on the params
    protocol: :class:`agents.coop_ucb2.CoopParams`; module doc)."""

    agent_id = AGENT_ID
    version = VERSION  # the numpy learner's results version
    privacy_epsilon = None

    def __init__(
        self, gamma: float = 2.0, eta: float = 2.0, sigma: float = 1.0, kappa: float = 0.5
    ):
        self.config = CoopUCB2Config(gamma, eta, sigma, kappa)

    def channel_spec(self, config) -> dict[str, dict[str, Any]]:
        """``neighbors`` (dim 2K, ``reduce="sum"``)."""
        return coop_channel_spec(config.num_arms)

    def make_params(self, facts: FederationFacts) -> CoopParams:
        """P (and the checks: the family, the channel, a horizon longer than K, a connected
        graph): :func:`agents.coop_ucb2.coop_params`."""
        return coop_params(self.config, facts)

    def init(self, key: jax.Array, params: CoopParams) -> CoopState:
        """Zero consensus state."""
        zeros = jnp.zeros((params.num_agents, 2 * params.num_arms), jnp.float32)
        return CoopState(zeros, zeros)

    def act(self, key: jax.Array, state: CoopState, obs: Observation, params: CoopParams):
        """One engine step of round t for every agent (the twin's ``act``): after a pull, send
        ``(nhat + xi, shat + r xi)`` in a communication step; after the communication step,
        apply row i of P to what was sent and received (the running consensus) and pull round
        t's arm: arm t - 1 for t <= K, else the arg-max of Q (module doc)."""
        K, N = params.num_arms, params.num_agents
        after_pull = (obs.phase == PULL) & (obs.step > 0)
        hit = obs.last_arm[:, None] == jnp.arange(K, dtype=jnp.int32)  # xi (N, K)
        xi = jnp.concatenate(
            [hit.astype(jnp.float32), jnp.where(hit, obs.last_reward[:, None], 0.0)], axis=1
        )
        outgoing = jnp.where(after_pull, state.state + xi, state.outgoing)
        mixing = Mixing.from_consensus(params.consensus)
        mixed = mix(mixing, state.outgoing, obs.deliveries[CHANNEL])
        arrived = (obs.phase == COMMUNICATION) & (obs.step > 0)
        current = jnp.where(arrived, mixed, state.state)
        t = obs.pulls + 1  # the round whose arm is chosen
        q = coop_index(current[:, :K], current[:, K:], t, c0=params.config.c0,
                       sigma=params.config.sigma, N=N)  # fmt: skip
        u = jax.random.uniform(key, (N,), jnp.float32)
        arms = jnp.where(t <= K, t - 1, argmax_one_uniform(q, u))
        arms = jnp.where(after_pull, 0, arms).astype(jnp.int32)
        send = jnp.broadcast_to(after_pull, (N,))
        action = Action(arms, {CHANNEL: (send, outgoing)}, ~after_pull)
        return action, CoopState(current, outgoing)
