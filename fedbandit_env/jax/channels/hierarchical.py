"""``hierarchical`` in JAX (hybrid structure): members -> sink -> server -> every agent.

Mirrors :mod:`fedbandit_env.network.hierarchical` for one run: the hybrid structure of Li & Song
(Section VI, Algorithms 4-5; docs/commeff.md). Payloads sent at step s travel to their
component's sink (SAC convergecast), each sink uploads its component once, and the server's
combination is broadcast to every agent in the observation of step s + ``delay``, ``delay`` =
max(0, max_q ecc(sink_q) - 1) (the first hop is free, every further hop one step;
docs/commeff.md, Decisions 8-9). The records in flight are a fixed-size delay buffer in the
channel state (``delay`` rows; none when the broadcast arrives the same step).

Aggregation (docs/commeff.md, Decision 10): ``"weighted"`` (the mean over every agent whose
payload arrived), ``"unweighted"`` (the mean of the component means, Alg. 5) or ``"sum"``.
Cost (Decision 13), charged at the sending step: agent-agent, ``"edges"`` (c2 * ecc(sink_q) *
|E_q| per component with a sender) or ``"path"`` (c2 * the senders' hop distances to their
sink), with one message per hop to the sink; agent-server, c1 per component upload plus the
broadcast (N messages, free unless ``charge_broadcast``, Decision 12).

Drops (``drop_prob``): a member's payload is lost on its way to the sink independently (the
sink's own never is); its relays are charged and it is counted in ``dropped``; a component
uploads only if its sink holds a payload, and the broadcast happens only if the server
received something.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from fedbandit_env.jax.channels.base import JaxChannel
from fedbandit_env.jax.types import Charge, link_charge
from fedbandit_env.network.ledger import AGENT_AGENT, AGENT_SERVER


class HierarchicalDelivery(NamedTuple):
    """``aggregate`` (dim,) broadcast to every agent, ``count`` () contributing agents (0 when
    nothing arrives this step), ``sent_step`` () when those payloads were sent (-1: none)."""

    aggregate: jnp.ndarray
    count: jnp.ndarray
    sent_step: jnp.ndarray


class HierarchicalState(NamedTuple):
    """``step`` () steps transmitted so far; ``pending`` the broadcasts in flight, a
    :class:`HierarchicalDelivery` of ``delay`` rows, row k sent k + 1 steps ago."""

    step: jnp.ndarray
    pending: HierarchicalDelivery


class Hierarchical(JaxChannel):
    kind = "hierarchical"

    def __init__(self, twin):
        super().__init__(twin)
        self.aggregate = twin.aggregate
        self.cost_model = twin.cost_model
        self.charge_broadcast = twin.charge_broadcast
        self.delay = twin.delay
        self.num_components = twin.num_components
        topology = twin.topology
        comp = np.asarray(topology.component_of, np.int64)
        q = self.num_components
        self.member = (comp[:, None] == np.arange(q)).astype(np.float32)  # (N, Q) one-hot
        self.to_sink = np.asarray(topology.distance_to_sink, np.int32)  # (N,)
        self.is_sink = self.to_sink == 0
        ecc = np.asarray(topology.sink_eccentricities, np.int64)
        comp_edges = np.bincount(comp[np.asarray(topology.edges)[:, 0]], minlength=q)
        self.edges_cost = (ecc * comp_edges).astype(np.float32)  # (Q,) ecc(sink_q) |E_q|

    def init(self) -> HierarchicalState:
        d = self.delay
        return HierarchicalState(
            jnp.zeros((), jnp.int32),
            HierarchicalDelivery(
                jnp.zeros((d, self.dim), jnp.float32),
                jnp.zeros(d, jnp.int32),
                jnp.full(d, -1, jnp.int32),
            ),
        )

    def empty(self) -> HierarchicalDelivery:
        return HierarchicalDelivery(
            jnp.zeros(self.dim, jnp.float32), jnp.zeros((), jnp.int32), jnp.full((), -1, jnp.int32)
        )

    def combine(self, arrived, payload) -> tuple[jnp.ndarray, jnp.ndarray]:
        """The server's combination of the payloads that reached the sinks (Alg. 5) and the
        number of contributing agents."""
        member = jnp.asarray(self.member)
        w = arrived.astype(jnp.float32)
        comp_sum = member.T @ jnp.where(arrived[:, None], payload, 0.0)  # (Q, dim)
        count = arrived.sum(dtype=jnp.int32)
        if self.aggregate == "sum":
            return comp_sum.sum(axis=0), count
        if self.aggregate == "weighted":
            return comp_sum.sum(axis=0) / jnp.maximum(count, 1).astype(jnp.float32), count
        comp_count = w @ member  # (Q,)
        means = comp_sum / jnp.maximum(comp_count, 1.0)[:, None]
        active = comp_count > 0
        total = jnp.where(active[:, None], means, 0.0).sum(axis=0)
        return total / jnp.maximum(active.sum(), 1).astype(jnp.float32), count

    def transmit(self, key: jax.Array, state: HierarchicalState, send, payload):
        step = state.step + 1  # the engine's step number (1 for the first step)
        kept = self.kept(key, send.shape)
        arrived = send if kept is None else send & (kept | jnp.asarray(self.is_sink))
        total, count = self.combine(arrived, payload)
        now = HierarchicalDelivery(total, count, jnp.where(count > 0, step, -1).astype(jnp.int32))
        charge = self._charge(send, arrived, count)
        if self.delay == 0:
            return now, HierarchicalState(step, state.pending), charge
        pending = jax.tree.map(
            lambda new, buf: jnp.concatenate([new[None], buf[:-1]]), now, state.pending
        )
        delivery = jax.tree.map(lambda buf: buf[-1], state.pending)
        return delivery, HierarchicalState(step, pending), charge

    def _charge(self, send, arrived, count) -> Charge:
        """The local relays (agent-agent) and the uploads and broadcast (agent-server) of the
        payloads sent this step."""
        member = jnp.asarray(self.member)
        relays = jnp.where(send, jnp.asarray(self.to_sink), 0).sum(dtype=jnp.int32)
        if self.cost_model == "path":
            local_cost = self.c2 * relays.astype(jnp.float32)
        else:
            comp_active = (send.astype(jnp.float32) @ member) > 0
            local_cost = self.c2 * jnp.where(comp_active, jnp.asarray(self.edges_cost), 0.0).sum()
        uploads = ((arrived.astype(jnp.float32) @ member) > 0).sum(dtype=jnp.int32)
        n = self.num_agents
        down = jnp.where(count > 0, n, 0)
        links = uploads
        if self.charge_broadcast:
            links = links + jnp.where(count > 0, n - uploads, 0)
        dropped = send.sum(dtype=jnp.int32) - count
        local = link_charge(AGENT_AGENT, relays, self.dim, local_cost, dropped)
        server = link_charge(AGENT_SERVER, uploads + down, self.dim, self.c1 * links, 0)
        return Charge(*(a + b for a, b in zip(local, server, strict=True)))
