"""Robust GosInE in JAX: GosInE (Chawla, Sankararaman, Ganesh & Shakkottai, synchronous version)
with the blocking rule of Vial, Shakkottai & Srikant, "Robust Multi-Agent Multi-Armed Bandits"
(MobiHoc 2021, arXiv 2007.03812).

Port of :mod:`agents.robust_gosine` (the numpy twin, the model; it subclasses
:mod:`agents.gosine`) for one run, vectorized over the N agents and K arms. GosInE is written
out here (this module depends on no other JAX port). Decisions: docs/robust-gosine.md and
docs/gosine.md. The names are the twin's:

=================  ===============================================================
``sticky``         S_i, ``s = ceil(K / sticky_agents)`` consecutive arms from ``(i s) mod K``
``U``, ``L``       the two extra slots; the active set is ``S_i + {U, L}``
``counts``         per (agent, arm) pulls over all arms (int32, never reset)
``sums``           per (agent, arm) reward sums (compensated float32)
``phase_start``    ``counts`` at the start of the phase (``dn = counts - phase_start``)
``phase``          j, the phase under way; it ends after pull ``j^beta``
``rec``, ``src``   the last recommendation received and its source (-1: none)
``blocked_until``  (N, N): agent i does not pull h while ``blocked_until[i, h] > j``
=================  ===============================================================

Per step (t = pulls so far): UCB over the active set, ``mean_k + sqrt(alpha ln(t + 1) / n_k)``
(an unplayed active arm: +inf; inactive: -inf), ties uniform. At the end of phase j (the pull
count reaches ``j^beta``), in a communication-only step on the ``recommend`` channel (kind
``gossip``, ``mode="pull_one_neighbour"``, dim 1; the twin's ``channel_spec``):

1. swap U and L if ``dn(U) < dn(L)``;
2. ``B_j`` = the most-played active arm of phase j (ties uniform), the agent's recommendation;
3. rule ``"2021"``: if ``j >= 2`` and ``rec != B_j`` (``rec`` received at the end of phase
   j - 1; a reply that is no arm id counts as ``rec = -1``), block ``src`` until phase
   ``ceil(j^eta)`` (a running block keeps the later expiry);
4. every agent offers ``B_j`` and pulls one neighbour, with rule ``"2021"`` uniformly among those
   it does not block: the message is ``(send, payload, exclude)`` with
   ``exclude = blocked_until > j``, the gossip channel's exclusion mask (docs/channels.md);
5. after the step: a received arm id that is not active replaces L; ``rec`` and ``src`` are
   remembered for step 3.

Rule ``"none"`` blocks nobody and sends the plain ``(send, payload)`` message: the suite's
GosInE. The tables ``j^beta`` (phase ends) and ``ceil(j^eta)`` (block expiries) are computed in
Python at ``init`` with the twin's integer arithmetic, for every phase that can end before the
horizon.

``act`` is one pure function of the step: the fold-in, the phase end and the insertion are
computed every step and kept with ``jnp.where``; they are (N, K) and (N, N) sized, so no
``lax.cond`` is used. ``init`` runs the twin's ``reset`` on the same facts in Python, before
tracing (the family, the channel, a connected graph of at least 2 agents, room for U and L,
``sticky_agents <= N``) and reads the sticky sets from it.

Rule ``"2021"`` sends ``(send, payload, exclude)`` on ``recommend``; the JAX gossip channel
applies the mask as the numpy channel does (:mod:`fedbandit_env.jax.channels.gossip`).

Deviations, none in the algorithm: the tie-break uniforms (UCB and the recommendation) come
from the step's key, one per agent and step (the twin: its ``tiebreak`` and ``recommend``
streams, the same ``floor(u k)``-th of the k tied arms); statistics are float32 (sums
compensated).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from agents.gosine import CHANNEL, GosInEParams, arm_ids, gosine_channel_spec
from agents.robust_gosine import (
    AGENT_ID,
    VERSION,
    RobustGosInEConfig,
    block_until,
    robust_gosine_params,
)
from fedbandit_env.jax.accumulate import Total, total_add
from fedbandit_env.jax.types import COMMUNICATION, PULL, Action, Observation
from fedbandit_env.policy import FederationFacts
from fedbandit_env.ties import argmax_one_uniform

INT32_MAX = 2**31 - 1


class RobustGosInEState(NamedTuple):
    """GosInE's per-agent state (module doc), the phase j under way, and the blocking state:
    ``blocked_until`` (N, N), ``rec`` and ``src`` (N,), ``blocks`` (N,) blocking events per
    agent (a diagnostic, the twin's ``blocks`` summed over agents)."""

    U: jnp.ndarray
    L: jnp.ndarray
    counts: jnp.ndarray
    sums: Total
    phase_start: jnp.ndarray
    phase: jnp.ndarray
    outgoing: jnp.ndarray
    blocked_until: jnp.ndarray
    rec: jnp.ndarray
    src: jnp.ndarray
    blocks: jnp.ndarray


def active_set(sticky: jnp.ndarray, U: jnp.ndarray, L: jnp.ndarray) -> jnp.ndarray:
    """(N, K) bool: the sticky set plus the slots U and L (GosInE's active set)."""
    arms = jnp.arange(sticky.shape[1])
    return sticky | (arms == U[:, None]) | (arms == L[:, None])


def ucb_index(counts, sums, active, t, alpha: float) -> jnp.ndarray:
    """GosInE's UCB over the active set: ``mean_k + sqrt(alpha ln(t + 1) / n_k)`` with t the
    global time; +inf on unplayed active arms, -inf on inactive ones."""
    n = counts.astype(jnp.float32)
    played = counts > 0
    safe = jnp.where(played, n, 1.0)
    ln = jnp.log(t.astype(jnp.float32) + 1.0)
    value = sums / safe + jnp.sqrt(jnp.float32(alpha) * ln / safe)
    value = jnp.where(played, value, jnp.inf)
    return jnp.where(active, value, -jnp.inf)


@dataclass(frozen=True)
class RobustGosInEParams(GosInEParams):
    """GosInE's params (:func:`agents.robust_gosine.robust_gosine_params`: sticky sets, slots,
    configuration, notes) plus the tables the compiled program reads: ``ends`` the pull
    ``j^beta`` that ends phase j and ``expiry`` the block expiry ``ceil(j^eta)``, int32 (capped
    at 2^31 - 1), for every phase that can end within the horizon and two more."""

    ends: np.ndarray | None = None
    expiry: np.ndarray | None = None


def phase_tables(beta: int, eta: float, horizon: int) -> tuple[np.ndarray, np.ndarray]:
    """``(ends, expiry)`` of :class:`RobustGosInEParams`, with the numpy learner's integer
    arithmetic (:func:`agents.robust_gosine.block_until`)."""
    last = 1  # the last phase that can end within the horizon, plus margin
    while last**beta <= horizon:
        last += 1
    phases = np.arange(last + 2)
    ends = np.array([min(int(j) ** beta, INT32_MAX) for j in phases], np.int32)
    expiry = np.array([min(block_until(int(j), eta), INT32_MAX) for j in phases], np.int32)
    return ends, expiry


class RobustGosInE:
    """Synchronous GosInE with Vial, Shakkottai & Srikant's (2021) blocking for the N agents of
    one run (:class:`agents.RobustGosInE` on JAX, on the params protocol)."""

    agent_id = AGENT_ID
    version = VERSION  # the numpy learner's results version
    payload_layouts = {CHANNEL: "arm"}  # the recommended arm id
    privacy_epsilon = None

    def __init__(
        self,
        alpha: float = 4.0,
        beta: int = 3,
        rule: str = "2021",
        eta: float = 2.0,
        sticky_agents: int | None = None,
    ):
        self.config = RobustGosInEConfig(alpha, beta, rule, eta, sticky_agents)

    def channel_spec(self, config):
        """``recommend``, kind ``gossip``, ``mode="pull_one_neighbour"``, dim 1."""
        return gosine_channel_spec()

    def make_params(self, facts: FederationFacts) -> RobustGosInEParams:
        """The numpy learner's params (which check the facts) and the phase tables."""
        base = robust_gosine_params(self.config, facts)
        ends, expiry = phase_tables(self.config.beta, self.config.eta, facts.horizon)
        return RobustGosInEParams(**vars(base), ends=ends, expiry=expiry)

    def init(self, key: jax.Array, params: RobustGosInEParams) -> RobustGosInEState:
        """Zero statistics, the params' slots U and L, phase 1 (it ends after pull 1), no
        block."""
        n, k = params.num_agents, params.num_arms
        zeros = jnp.zeros((n, k), jnp.float32)
        return RobustGosInEState(
            U=jnp.asarray(params.U, jnp.int32),
            L=jnp.asarray(params.L, jnp.int32),
            counts=jnp.zeros((n, k), jnp.int32),
            sums=Total(zeros, zeros),
            phase_start=jnp.zeros((n, k), jnp.int32),
            phase=jnp.ones((), jnp.int32),
            outgoing=jnp.zeros((n, 1), jnp.float32),
            blocked_until=jnp.zeros((n, n), jnp.int32),
            rec=jnp.full(n, -1, jnp.int32),
            src=jnp.full(n, -1, jnp.int32),
            blocks=jnp.zeros(n, jnp.int32),
        )

    # ------------------------------------------------------------ the phase end
    def _phase_end(
        self, key: jax.Array, state: RobustGosInEState, params: RobustGosInEParams
    ) -> RobustGosInEState:
        """Steps 1-3 at the end of phase j: swap U and L if ``dn(U) < dn(L)``, recommend the
        most-played active arm of the phase ``B_j`` (ties uniform), and (rule ``"2021"``, j >= 2)
        block the last source whose recommendation is not ``B_j`` until ``ceil(j^eta)``."""
        n = params.num_agents
        rows = jnp.arange(n)
        active = active_set(jnp.asarray(params.sticky), state.U, state.L)  # before the swap
        dn = state.counts - state.phase_start
        swap = dn[rows, state.U] < dn[rows, state.L]
        U = jnp.where(swap, state.L, state.U)
        L = jnp.where(swap, state.U, state.L)
        score = jnp.where(active, dn.astype(jnp.float32), -1.0)
        best = argmax_one_uniform(score, jax.random.uniform(key, (n,), jnp.float32))
        j = state.phase
        blocked_until, blocks = state.blocked_until, state.blocks
        if params.config.rule == "2021":
            suspect = (j >= 2) & (state.src >= 0) & (state.rec != best)
            h = jnp.where(suspect, state.src, 0)
            current = blocked_until[rows, h]
            later = jnp.maximum(current, jnp.asarray(params.expiry)[j])
            blocked_until = blocked_until.at[rows, h].set(jnp.where(suspect, later, current))
            blocks = blocks + suspect.astype(jnp.int32)
        return state._replace(
            U=U,
            L=L,
            phase_start=state.counts,
            phase=j + 1,
            outgoing=best[:, None].astype(jnp.float32),
            blocked_until=blocked_until,
            blocks=blocks,
        )

    def _insert(
        self, state: RobustGosInEState, obs: Observation, params: RobustGosInEParams
    ) -> RobustGosInEState:
        """Step 5, after the communication step: remember the recommendation (-1 for none or
        for a reply that is no arm id) and its source, and put a received arm that is not
        active into L (GosInE's insertion)."""
        d = obs.deliveries[CHANNEL]
        raw = d.payload[:, 0]
        valid = arm_ids(raw, d.received, params.num_arms)
        rec = jnp.where(valid, raw, -1.0).astype(jnp.int32)
        src = jnp.where(d.received, d.partner, -1).astype(jnp.int32)
        candidate = jnp.where(valid, rec, state.U)  # none: keep (U is active)
        active = active_set(jnp.asarray(params.sticky), state.U, state.L)
        new = ~active[jnp.arange(params.num_agents), candidate]
        return state._replace(L=jnp.where(new, candidate, state.L), rec=rec, src=src)

    # ------------------------------------------------------------------ the step
    def act(
        self, key: jax.Array, state: RobustGosInEState, obs: Observation,
        params: RobustGosInEParams,
    ):  # fmt: skip
        """One env step for every agent: after a communication step insert (step 5); after a
        pull fold it in and, if it was pull ``j^beta``, end phase j (steps 1-3) and offer
        ``B_j`` in a communication-only step (step 4); otherwise pull the UCB arm of the
        active set."""
        k_tie, k_rec = jax.random.split(key)
        n = params.num_agents
        started = obs.step > 0
        comm = started & (obs.phase == COMMUNICATION)
        pulled = started & (obs.phase == PULL)
        inserted = self._insert(state, obs, params)
        state = jax.tree_util.tree_map(lambda a, b: jnp.where(comm, a, b), inserted, state)
        hit = (obs.last_arm[:, None] == jnp.arange(params.num_arms)) & pulled
        state = state._replace(
            counts=state.counts + hit.astype(jnp.int32),
            sums=total_add(state.sums, jnp.where(hit, obs.last_reward[:, None], 0.0)),
        )
        t = obs.pulls.astype(jnp.int32)
        at_end = pulled & (t == jnp.asarray(params.ends)[state.phase])
        ended = self._phase_end(k_rec, state, params)
        state = jax.tree_util.tree_map(lambda a, b: jnp.where(at_end, a, b), ended, state)
        active = active_set(jnp.asarray(params.sticky), state.U, state.L)
        q = ucb_index(
            state.counts, state.sums.total - state.sums.carry, active, t, params.config.alpha
        )
        chosen = argmax_one_uniform(q, jax.random.uniform(k_tie, (n,), jnp.float32))
        arms = jnp.where(at_end, 0, chosen).astype(jnp.int32)
        send = jnp.broadcast_to(at_end, (n,))
        message = (send, state.outgoing)
        if params.config.rule == "2021":
            message = (*message, exclusion_mask(state))
        return Action(arms, {CHANNEL: message}, ~at_end), state


def exclusion_mask(state: RobustGosInEState) -> jnp.ndarray:
    """(N, N) bool: the agents each agent does not pull at the end of the phase that just
    ended (``blocked_until > j``; the twin's ``blocked(j)``)."""
    return state.blocked_until > state.phase - 1
