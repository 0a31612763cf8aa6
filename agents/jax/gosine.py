"""GosInE in JAX (Chawla, Sankararaman, Ganesh & Shakkottai, "The Gossiping Insert-Eliminate
Algorithm for Multi-Agent Bandits", AISTATS 2020), synchronous version.

Port of :mod:`agents.gosine` (the numpy twin, the model; docs/gosine.md) for one run,
vectorized over the N agents and K arms. The paper's Algorithm 1 (synchronous GosInE) with the
rules the twin read in the authors' ``Synch.py``. Agents exchange only arm ids. The names:

=================  ============================================================================
``sticky``         Ŝ_i: agent i's sticky set, ``s = ceil(K/N)`` consecutive arms from ``(i s)
                   mod K`` (a constant, the twin's :func:`agents.gosine.sticky_sets`)
``U``, ``L``       the two non-sticky slots of the active set S_j^(i) = Ŝ_i + {U, L}
``counts``         own pulls per arm over all arms (int32, never reset)
``sums``           own reward sums per arm (a compensated float32 sum, never reset)
``phase_start``    ``counts`` at the start of the phase (``dn = counts - phase_start``)
``phase``          j, the current phase; ``next_end`` = j^beta the pull that ends it
=================  ============================================================================

Per step (t = pulls so far): UCB on the active set, ``mean_k + sqrt(alpha ln(t + 1) / n_k)``,
an unplayed active arm first (infinite index), ties uniformly.

Phase j ends after pull ``j^beta`` (the twin's timing): (1) if ``dn(U) < dn(L)`` swap U and L;
(2) a communication step (``pull=False``) in which every agent offers its recommendation, its
most-played active arm of the phase (ties uniformly), on the ``recommend`` channel (kind
``gossip``, ``mode="pull_one_neighbour"``, dim 1, the twin's ``channel_spec``): each agent
receives the recommendation of one uniformly random neighbour (N messages per phase end); (3)
the observation of the communication step inserts: a recommended arm that is not active
replaces L. A reply that is no arm id (an integer in [0, K), the twin's
:func:`agents.gosine.arm_ids`) counts as no recommendation. A phase end at the horizon takes no
communication step (the rollout stops at the horizon's pull, as the numpy engine).

The phase schedule is a clock on the pull count, so the phase end (``obs.pulls == next_end``
after a pull) and the insertion (``obs.phase == COMMUNICATION``) are masks: both are computed
every step and kept where they apply (an arg-max over K per agent, the cost of a ``lax.cond``
under ``vmap`` too). ``swaps`` and ``inserts`` (N,) count, per agent, the phase ends that
swapped U and L and the insertions that replaced L (data-dependent schedule statistics, not in
the twin).

Deviations, none in the algorithm: the tie-breaks (the UCB arm, the recommendation) use one
uniform per agent from the step's key (the twin: its ``tiebreak`` and ``recommend`` streams,
the same ``floor(u k)``-th rule); statistics are float32 (``sums`` compensated).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from agents.gosine import (
    AGENT_ID,
    CHANNEL,
    VERSION,
    GosInEConfig,
    GosInEParams,
    arm_ids,
    gosine_channel_spec,
    gosine_params,
)
from fedbandit_env.jax.accumulate import Total, total_add
from fedbandit_env.jax.types import COMMUNICATION, PULL, Action, Observation
from fedbandit_env.policy import FederationFacts
from fedbandit_env.ties import argmax_one_uniform


class GosInEState(NamedTuple):
    """Agent statistics and slots (module doc): ``counts``, ``phase_start`` (N, K) int32,
    ``sums`` a compensated (N, K) sum, ``U``, ``L`` (N,) int32, ``phase``, ``next_end`` ()
    int32, ``outgoing`` (N, 1) float32 the last recommendation offered, and the schedule
    statistics ``swaps``, ``inserts`` (N,) int32."""

    counts: jnp.ndarray
    sums: Total
    phase_start: jnp.ndarray
    U: jnp.ndarray
    L: jnp.ndarray
    phase: jnp.ndarray
    next_end: jnp.ndarray
    outgoing: jnp.ndarray
    swaps: jnp.ndarray
    inserts: jnp.ndarray


def _select(pred: jnp.ndarray, new: Any, old: Any) -> Any:
    """``new`` where ``pred`` holds, else ``old``, leaf by leaf."""
    return jax.tree_util.tree_map(lambda a, b: jnp.where(pred, a, b), new, old)


def ucb_index(counts, sums, active, t, alpha: float) -> jnp.ndarray:
    """The UCB index over the active set (Algorithm 1's arm choice, the authors' form):
    ``mean + sqrt(alpha ln(t + 1) / n)``, unplayed active arms +inf, inactive arms -inf."""
    n = counts.astype(jnp.float32)
    played = counts > 0
    safe = jnp.where(played, n, 1.0)
    log_t = jnp.log(t.astype(jnp.float32) + 1.0)
    value = sums / safe + jnp.sqrt(jnp.float32(alpha) * log_t / safe)
    value = jnp.where(played, value, jnp.inf)
    return jnp.where(active, value, -jnp.inf)


class GosInE:
    """Synchronous GosInE (:class:`agents.GosInE` on JAX, on the params protocol:
    :class:`agents.gosine.GosInEParams`; module doc)."""

    agent_id = AGENT_ID
    version = VERSION  # the numpy learner's results version
    privacy_epsilon = None
    payload_layouts = {CHANNEL: "arm"}  # the recommended arm id

    def __init__(self, alpha: float = 4.0, beta: int = 3):
        self.config = GosInEConfig(alpha, beta)

    def channel_spec(self, config) -> dict[str, dict[str, Any]]:
        """``recommend`` (kind ``gossip``, dim 1, ``mode="pull_one_neighbour"``)."""
        return gosine_channel_spec()

    def make_params(self, facts: FederationFacts) -> GosInEParams:
        """Sticky sets and the first slots U and L (:func:`agents.gosine.gosine_params`, which
        checks the family, the channel and its mode, a connected graph of at least 2 agents
        and ``K >= ceil(K/N) + 2``)."""
        return gosine_params(self.agent_id, self.config, facts)

    def init(self, key: jax.Array, params: GosInEParams) -> GosInEState:
        """Zero statistics, the params' slots U and L; phase 1 ends after pull 1."""
        n, k = params.num_agents, params.num_arms
        zeros = jnp.zeros((n, k), jnp.float32)
        izeros = jnp.zeros((n, k), jnp.int32)
        return GosInEState(
            counts=izeros, sums=Total(zeros, zeros), phase_start=izeros,
            U=jnp.asarray(params.U, jnp.int32), L=jnp.asarray(params.L, jnp.int32),
            phase=jnp.ones((), jnp.int32), next_end=jnp.ones((), jnp.int32),
            outgoing=jnp.zeros((n, 1), jnp.float32),
            swaps=jnp.zeros(n, jnp.int32), inserts=jnp.zeros(n, jnp.int32),
        )  # fmt: skip

    def active(self, U: jnp.ndarray, L: jnp.ndarray, params: GosInEParams) -> jnp.ndarray:
        """Active sets (N, K) bool: sticky plus U and L."""
        arms = jnp.arange(params.num_arms, dtype=jnp.int32)
        return jnp.asarray(params.sticky) | (arms == U[:, None]) | (arms == L[:, None])

    def act(self, key: jax.Array, state: GosInEState, obs: Observation, params: GosInEParams):
        """One engine step for every agent (the twin's ``act``): fold in the last pull; at a
        phase end swap and recommend in a communication step (:meth:`_phase_end`, steps 1-2);
        after the communication step insert (:meth:`_insert`, step 3); otherwise pull the UCB
        arm of the active set."""
        k_tie, k_rec = jax.random.split(key)
        stepped = obs.step > 0
        pulled = stepped & (obs.phase == PULL)
        n = params.num_agents
        hit = (obs.last_arm[:, None] == jnp.arange(params.num_arms, dtype=jnp.int32)) & pulled
        st = state._replace(
            counts=state.counts + hit.astype(jnp.int32),
            sums=total_add(state.sums, jnp.where(hit, obs.last_reward[:, None], 0.0)),
        )
        end = pulled & (obs.pulls == st.next_end)
        inserting = stepped & (obs.phase == COMMUNICATION)
        st = _select(end, self._phase_end(k_rec, st, params), st)
        st = _select(inserting, self._insert(st, obs, params), st)
        q = ucb_index(st.counts, st.sums.total - st.sums.carry, self.active(st.U, st.L, params),
                      obs.pulls, params.config.alpha)  # fmt: skip
        u = jax.random.uniform(k_tie, (n,), jnp.float32)
        arms = jnp.where(end, 0, argmax_one_uniform(q, u)).astype(jnp.int32)
        send = jnp.broadcast_to(end, (n,))
        return Action(arms, {CHANNEL: (send, st.outgoing)}, ~end), st

    def _phase_end(self, key: jax.Array, st: GosInEState, params: GosInEParams) -> GosInEState:
        """The end of phase j (module doc, steps 1-2): swap U and L if ``dn(U) < dn(L)``; the
        recommendation, the most-played active arm of the phase (ties uniformly); a new phase
        from the current counts, ending after pull (j + 1)^beta."""
        dn = st.counts - st.phase_start
        active = self.active(st.U, st.L, params)  # the set, which the swap does not change
        dn_u = jnp.take_along_axis(dn, st.U[:, None], axis=1)[:, 0]
        dn_l = jnp.take_along_axis(dn, st.L[:, None], axis=1)[:, 0]
        swap = dn_u < dn_l
        score = jnp.where(active, dn.astype(jnp.float32), -1.0)
        u = jax.random.uniform(key, (params.num_agents,), jnp.float32)
        rec = argmax_one_uniform(score, u)
        phase = st.phase + 1
        return st._replace(
            U=jnp.where(swap, st.L, st.U), L=jnp.where(swap, st.U, st.L),
            outgoing=rec[:, None].astype(jnp.float32), phase_start=st.counts, phase=phase,
            next_end=phase ** int(params.config.beta), swaps=st.swaps + swap.astype(jnp.int32),
        )  # fmt: skip

    def _insert(self, st: GosInEState, obs: Observation, params: GosInEParams) -> GosInEState:
        """Step 3 (module doc): a received recommendation that is an arm id and not active
        replaces L; no valid reply keeps L. Twice: state handling only (JAX returns the new
        state, numpy mutates); the rule is :func:`agents.gosine.arm_ids` and a ``where``."""
        d = obs.deliveries[CHANNEL]
        raw = d.payload[:, 0]
        valid = arm_ids(raw, d.received, params.num_arms)
        rec = jnp.where(valid, raw, st.U.astype(jnp.float32)).astype(jnp.int32)  # none: U
        inactive = ~self.active(st.U, st.L, params)
        new = jnp.take_along_axis(inactive, rec[:, None], axis=1)[:, 0]
        return st._replace(L=jnp.where(new, rec, st.L), inserts=st.inserts + new.astype(jnp.int32))
