"""Fed1-UCB and Fed2-UCB in JAX (Shi & Shen, "Federated Multi-Armed Bandits", AAAI'21).

The JAX forms of :mod:`agents.fed1_ucb` and :mod:`agents.fed2_ucb` (the numpy learners, the
model) and of their shared phase machine :mod:`agents.fed_mab_common`, for one run, vectorized
over the N clients and K arms (docs/fed-ucb12.md), on the params protocol. Clients see local means whose average is the global
mean; a server averages the clients' local sample means after every phase and eliminates arms
whose global estimate is clearly worse (the paper's Fed1-UCB for the exact model and Fed2-UCB
for the approximate one, with the constants of the authors' code). The names are the paper's
and the numpy learners':

================  ===================================================================
``sums``          the client's own reward sums per arm since it joined (compensated float32)
``counts``        its own pulls per arm since it joined (int32)
``active``        the active arm set (K,), the same for every client of the run
``phase``         p, the phase under way (1-based)
``pos``           the pulls made in the phase under way
``length``        f(p) |active|: the pulls of the phase
``rounds``        completed server rounds (rounds in which an upload arrived)
``num_phases``    completed phases (server rounds taken)
``f(p)``          pulls per active arm in phase p; ``F(c, p) = f(c) + ... + f(p)``
``M``             the clients whose uploads the server averages (Fed2: M(p), the schedule)
================  ===================================================================

Widths (docs/fed-ucb12.md, "Rules as implemented"), T the horizon:

* Fed1-UCB: ``B = width_scale sqrt(4 sigma^2 ln T / (M F(1, p)))``;
* Fed2-UCB: ``eta_p = (1/M(p)^2) sum_i 1/F(c_i, p)``,
  ``B_p = width_scale (sqrt(sigma^2 eta_p ln T) + sqrt(sigma_c^2 ln T / M(p)))``;

and the elimination rule ``eliminate k if mean_k + B < max_j mean_j - B`` of both.

Timing, the numpy learners': in phase p every client pulls each active arm f(p) times, round-robin over
the active arms in ascending order, all clients on the same arm; after the phase's last pull one
communication-only step (``pull`` False) in which every joined client uploads its local sample
means (zeros in the slots of eliminated arms) on the ``server`` channel (aggregate "mean", dim K),
and the average arrives in the same step; the next step applies the rule and starts phase p + 1
(or, with one arm left, commits to it: no more communication). Clients that have not joined
(Fed2's ``join_round`` schedule) play the same arms but keep no samples and do not upload.

The data-dependent schedule is masks: the elimination and the start of the next phase are
computed every step and kept with ``jnp.where`` where a server average has just arrived (K-sized
work, cheaper than a ``lax.cond``, which ``vmap`` turns into both branches anyway); the upload is
a mask on the ``server`` channel and ``pull`` is False in the step of a server round.

The hyperparameters and their validation (the numpy learners' configuration classes), the
checks of the facts (the family, the server channel's aggregate, participation 1, no drops,
Fed1: no join schedule) and the constants (f, ln T, the join schedule, F(1, p), a callable ``f``
tabulated for every phase the horizon can reach) are the params of the numpy learners' pure
:func:`~agents.fed1_ucb.fed1_params` and :func:`~agents.fed2_ucb.fed2_params`
(:class:`~agents.fed_mab_common.FedMABParams`; ``make_params``, in Python, before tracing). The
formulas are the numpy learners' functions, written once for both engines: the round-robin arm
(:func:`~agents.fed_mab_common.current_arm`), the elimination rule
(:func:`~agents.fed_mab_common.survivors`) and the widths (:func:`~agents.fed1_ucb.fed1_width`,
:func:`~agents.fed2_ucb.fed2_width`).

Deviations: statistics and widths are float32 (``sums`` compensated).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from agents.fed1_ucb import AGENT_ID as FED1_ID
from agents.fed1_ucb import VERSION as FED1_VERSION
from agents.fed1_ucb import Fed1UCBConfig, fed1_params, fed1_width
from agents.fed2_ucb import AGENT_ID as FED2_ID
from agents.fed2_ucb import VERSION as FED2_VERSION
from agents.fed2_ucb import Fed2UCBConfig, fed2_channel_spec, fed2_params, fed2_width
from agents.fed_mab_common import (
    CHANNEL,
    FedMABParams,
    current_arm,
    fed_channel_spec,
    pulls_per_arm,
    survivors,
)
from fedbandit_env.jax.accumulate import Total, total_add
from fedbandit_env.jax.types import PULL, Action, Observation
from fedbandit_env.policy import FederationFacts


class FedUCBState(NamedTuple):
    """One run of the phase machine (module docstring): ``sums`` (N, K) compensated and
    ``counts`` (N, K) int32, the clients' own statistics; ``active`` (K,); scalars ``phase``,
    ``pos``, ``length``, ``rounds``, ``num_phases`` (int32), ``committed`` and ``awaiting``
    (the run took the phase's server round in the last step)."""

    sums: Total
    counts: jnp.ndarray
    active: jnp.ndarray
    phase: jnp.ndarray
    pos: jnp.ndarray
    length: jnp.ndarray
    committed: jnp.ndarray
    awaiting: jnp.ndarray
    rounds: jnp.ndarray
    num_phases: jnp.ndarray


def phase_pulls(params: FedMABParams, p: jnp.ndarray) -> jnp.ndarray:
    """f(p) of the traced phase p: the constant, or the params' table (clipped at its last
    phase, which no run passes within the horizon)."""
    if params.f_const is not None:
        return jnp.int32(params.f_const) * jnp.ones_like(p)
    return jnp.take(jnp.asarray(params.f_table, jnp.int32), p, mode="clip")


def phase_total(params: FedMABParams, p: jnp.ndarray) -> jnp.ndarray:
    """F(1, p) = f(1) + ... + f(p) of the traced phase p: the pulls per client of an active
    arm after phase p."""
    if params.f_const is not None:
        return jnp.int32(params.f_const) * p
    return jnp.take(jnp.asarray(params.cum_table, jnp.int32), p, mode="clip")


class _FedMAB:
    """The phase machine of Fed1- and Fed2-UCB (:class:`agents.fed_mab_common.FedMABBase` on
    JAX, on the params protocol: :class:`agents.fed_mab_common.FedMABParams`); subclasses give
    the configuration, the params and the width."""

    payload_layouts = {CHANNEL: "arm_means"}  # one mean per arm, as numpy
    privacy_epsilon = None  # no privacy guarantee is declared

    agent_id: str
    version: int

    # ------------------------------------------------------------------- init
    def init(self, key: jax.Array, params: FedMABParams) -> FedUCBState:
        """Phase 1 with every arm active and zero statistics."""
        N, K = params.num_agents, params.num_arms
        zeros = jnp.zeros((N, K), jnp.float32)
        return FedUCBState(
            sums=Total(zeros, zeros),
            counts=jnp.zeros((N, K), jnp.int32),
            active=jnp.ones(K, bool),
            phase=jnp.ones((), jnp.int32),
            pos=jnp.zeros((), jnp.int32),
            length=jnp.asarray(pulls_per_arm(params, 1) * K, jnp.int32),
            committed=jnp.zeros((), bool),
            awaiting=jnp.zeros((), bool),
            rounds=jnp.zeros((), jnp.int32),
            num_phases=jnp.zeros((), jnp.int32),
        )

    def width(self, phase: jnp.ndarray, joined: jnp.ndarray, params: FedMABParams) -> jnp.ndarray:
        """The confidence width B after phase ``phase`` with the clients ``joined`` (N,)."""
        raise NotImplementedError

    # -------------------------------------------------------------------- act
    def act(self, key: jax.Array, state: FedUCBState, obs: Observation, params: FedMABParams):
        """One step of the phase machine (module docstring): fold in the last pull (joined
        clients), apply the elimination rule when the server's average arrived, then pull the
        round-robin arm, or upload in a communication step at the end of the phase."""
        s = state
        N, K = params.num_agents, params.num_arms
        join = jnp.asarray(params.join_round, jnp.int32)
        # the last pull, folded into the statistics of the clients that have joined
        fresh = (obs.phase == PULL) & (obs.pulls > 0) & ~s.committed
        keep = fresh & (join <= s.rounds)
        arm = jnp.maximum(obs.last_arm, 0)
        hit = (arm[:, None] == jnp.arange(K, dtype=jnp.int32)) & keep[:, None]
        sums = total_add(s.sums, jnp.where(hit, obs.last_reward[:, None], 0.0))
        counts = s.counts + hit.astype(jnp.int32)
        s = s._replace(sums=sums, counts=counts)
        s = self._eliminate(s, obs.deliveries[CHANNEL], params)
        # the next step: a pull of the phase, or its server round
        talk = ~s.committed & (s.pos >= s.length)
        arms = jnp.broadcast_to(current_arm(s.active, s.pos), (N,))
        s = s._replace(pos=s.pos + (~s.committed & ~talk).astype(jnp.int32), awaiting=talk)
        send = talk & (join <= s.rounds)
        means = (s.sums.total - s.sums.carry) / jnp.maximum(s.counts, 1).astype(jnp.float32)
        payload = jnp.where(send[:, None] & s.active[None, :], means, 0.0)
        return Action(arms, {CHANNEL: (send, payload)}, ~talk), s

    def _eliminate(self, s: FedUCBState, reply: Any, params: FedMABParams) -> FedUCBState:
        """Where the server's average of the phase's uploads arrived (``awaiting``): the
        elimination rule ``mean_k + B < max_j mean_j - B`` over the active arms
        (:func:`~agents.fed_mab_common.survivors`), then phase p + 1 (or the commitment to the
        last arm); elsewhere the state is kept."""
        joined = jnp.asarray(params.join_round, jnp.int32) <= s.rounds
        width = self.width(s.phase, joined, params)
        active = survivors(s.active, reply.aggregate, width)
        n_active = active.sum(dtype=jnp.int32)
        phase = s.phase + 1
        new = s._replace(
            active=active,
            phase=phase,
            pos=jnp.zeros((), jnp.int32),
            length=phase_pulls(params, phase) * n_active,
            committed=n_active == 1,
            rounds=s.rounds + (reply.count > 0).astype(jnp.int32),
            num_phases=s.num_phases + 1,
        )
        return jax.tree_util.tree_map(lambda a, b: jnp.where(s.awaiting, a, b), new, s)


class Fed1UCB(_FedMAB):
    """Fed1-UCB, the paper's exact model (:class:`agents.Fed1UCB` on JAX): a fixed federation,
    ``f`` pulls per active arm and phase (default ``floor(10 ln T)``)."""

    agent_id = FED1_ID
    version = FED1_VERSION

    def __init__(self, f=None, sigma: float = 0.5, width_scale: float = 1.0):
        self.config = Fed1UCBConfig(f, sigma, width_scale)

    def channel_spec(self, config) -> dict[str, dict[str, Any]]:
        """``server`` (dim K, aggregate "mean")."""
        return fed_channel_spec(config.num_arms)

    def make_params(self, facts: FederationFacts) -> FedMABParams:
        """:func:`agents.fed1_ucb.fed1_params`; checks the facts."""
        return fed1_params(self.config, facts)

    def width(self, phase: jnp.ndarray, joined: jnp.ndarray, params: FedMABParams) -> jnp.ndarray:
        """``B = width_scale sqrt(4 sigma^2 ln T / (M F(1, p)))``
        (:func:`agents.fed1_ucb.fed1_width`)."""
        n = phase_total(params, phase).astype(jnp.float32)
        return fed1_width(joined, n, params.log_T, params.config)


class Fed2UCB(_FedMAB):
    """Fed2-UCB, the paper's approximate model (:class:`agents.Fed2UCB` on JAX): clients join
    through the server's ``join_round`` schedule of ``g`` (``g(p) = 2^p`` by default), ``f``
    pulls per active arm and phase (default 100)."""

    agent_id = FED2_ID
    version = FED2_VERSION

    def __init__(self, f=100, g=None, sigma: float = 0.5, sigma_c: float = 0.02,
                 width_scale: float = 1.0):  # fmt: skip
        self.config = Fed2UCBConfig(f, g, sigma, sigma_c, width_scale)

    def channel_spec(self, config) -> dict[str, dict[str, Any]]:
        """``server`` (dim K, aggregate "mean") with the join schedule of ``g``."""
        return fed2_channel_spec(config.num_agents, config.num_arms, self.config.g)

    def make_params(self, facts: FederationFacts) -> FedMABParams:
        """:func:`agents.fed2_ucb.fed2_params`; checks the facts."""
        return fed2_params(self.config, facts)

    def width(self, phase: jnp.ndarray, joined: jnp.ndarray, params: FedMABParams) -> jnp.ndarray:
        """``eta_p = (1/M(p)^2) sum_i 1/F(c_i, p)`` over the clients of phase p and
        ``B_p = width_scale (sqrt(sigma^2 eta_p ln T) + sqrt(sigma_c^2 ln T / M(p)))``
        (:func:`agents.fed2_ucb.fed2_width`; ``ln T`` in float32)."""
        total = phase_total(params, phase).astype(jnp.float32)
        before = jnp.asarray(params.before, jnp.float32)
        return fed2_width(total, before, joined, jnp.float32(params.log_T), params.config)
