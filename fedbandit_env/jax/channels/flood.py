"""``flood`` in JAX: multi-hop relay with time-to-live ``ttl`` (gamma), one hop per step.

Mirrors :mod:`fedbandit_env.network.flood` for one run: the LOCAL protocol of decentralized
FedUCB (Dubey & Pentland, Section 4.2) and GIS (Li & Song, Algorithm 2; docs/commeff.md,
docs/linear.md). A payload sent by v at step s reaches every u with 1 <= d(u, v) <= ttl in the
observation of step s + d(u, v) - 1 (hop 1 the same step, each further hop one step).

The TTL is a fixed-size delay buffer in the channel state: the send masks and payloads of the
last ``ttl`` steps, row h - 1 holding the messages at hop h this step. A receiver hears origin v
at hop d(u, v) only, so each (receiver, origin) slot holds at most one message per step and the
delivery is dense: the numpy twin's ``senders`` table (N, S) with a mask, the sending step and
the payload per slot (the twin's per-agent observation).

Cost models (per hop, charged at the step the hop happens, agent-agent links at ``c2``):
``"relay"`` (every node within ttl - 1 hops of the origin forwards once to all its neighbours)
and ``"gis"`` (Li & Song, Algorithm 2: c2 per undirected edge that carried at least one DATA
message at that hop; DATA for origin v crosses {x, y} at hop max(d(v, x), d(v, y)) iff the two
distances differ). Drops (``drop_prob``): each delivery (receiver, slot) is lost independently
at the receiver; relaying is unaffected, so the cost is charged in full and ``dropped`` counts
the lost deliveries.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from fedbandit_env.jax.channels.base import JaxChannel
from fedbandit_env.jax.types import link_charge
from fedbandit_env.network.ledger import AGENT_AGENT


class FloodDelivery(NamedTuple):
    """``senders`` (N, S) the origins within ttl hops of each receiver (-1 padded), ``mask``
    (N, S) a message of that origin arrived this step, ``sent_step`` (N, S) the step it was
    sent (-1 where none) and ``payload`` (N, S, dim) its content (zeros where none)."""

    senders: jnp.ndarray
    mask: jnp.ndarray
    sent_step: jnp.ndarray
    payload: jnp.ndarray


class FloodState(NamedTuple):
    """``step`` () steps transmitted so far; ``send`` (ttl, N) and ``payload`` (ttl, N, dim):
    row h - 1 holds what was sent h - 1 steps before the coming step (its hop h then)."""

    step: jnp.ndarray
    send: jnp.ndarray
    payload: jnp.ndarray


class Flood(JaxChannel):
    kind = "flood"

    def __init__(self, twin):
        super().__init__(twin)
        self.ttl = twin.ttl
        self.cost_model = twin.cost_model
        n = self.num_agents
        dist = np.asarray(twin.topology.hop_distances, np.int64)
        self.senders = np.asarray(twin.senders, np.int32)  # (N, S)
        valid = self.senders >= 0
        origin = np.where(valid, self.senders, 0)
        self.valid = valid
        self.slot_origin = origin.astype(np.int32)
        hops = dist[np.arange(n)[:, None], origin]
        self.slot_hop = np.where(valid, hops - 1, 0).astype(np.int32)  # buffer row of each slot
        # relay: at hop h every node u with d(v, u) = h - 1 forwards v's message to its deg(u)
        # neighbours; row h - 1, column v
        deg = np.asarray(twin.topology.degrees, np.int64)
        self.relay = np.stack([(dist == h) @ deg for h in range(self.ttl)]).astype(np.int32)
        # gis: the hop at which DATA for origin v crosses edge e (0: never within ttl)
        edges = np.asarray(twin.topology.edges, np.int64)
        dx, dy = dist[:, edges[:, 0]], dist[:, edges[:, 1]]
        hop = np.maximum(dx, dy)
        self.gis_hop = np.where((dx != dy) & (hop <= self.ttl), hop, 0).astype(np.int32)  # (N, E)

    def init(self) -> FloodState:
        n = self.num_agents
        return FloodState(
            jnp.zeros((), jnp.int32),
            jnp.zeros((self.ttl, n), bool),
            jnp.zeros((self.ttl, n, self.dim), jnp.float32),
        )

    def empty(self) -> FloodDelivery:
        shape = self.senders.shape
        return FloodDelivery(
            jnp.asarray(self.senders),
            jnp.zeros(shape, bool),
            jnp.full(shape, -1, jnp.int32),
            jnp.zeros((*shape, self.dim), jnp.float32),
        )

    def transmit(self, key: jax.Array, state: FloodState, send, payload):
        step = state.step + 1  # the engine's step number (1 for the first step)
        in_flight = jnp.concatenate([send[None], state.send[:-1]])  # (ttl, N): row h - 1: hop h
        rows = jnp.concatenate([payload[None], state.payload[:-1]])
        hop_row, origin = jnp.asarray(self.slot_hop), jnp.asarray(self.slot_origin)
        arrives = jnp.asarray(self.valid) & in_flight[hop_row, origin]  # (N, S)
        kept = self.kept(key, arrives.shape)
        heard = arrives if kept is None else arrives & kept
        sent_step = jnp.where(heard, step - hop_row, -1).astype(jnp.int32)
        out = jnp.where(heard[..., None], rows[hop_row, origin], 0.0)
        dropped = arrives.sum(dtype=jnp.int32) - heard.sum(dtype=jnp.int32)
        if self.cost_model == "relay":
            messages = jnp.where(in_flight, jnp.asarray(self.relay), 0).sum(dtype=jnp.int32)
            links = messages
        else:
            messages, links = self._gis(in_flight)
        charge = link_charge(AGENT_AGENT, messages, self.dim, self.c2 * links, dropped)
        delivery = FloodDelivery(jnp.asarray(self.senders), heard, sent_step, out)
        return delivery, FloodState(step, in_flight, rows), charge

    def _gis(self, in_flight) -> tuple[jnp.ndarray, jnp.ndarray]:
        """DATA messages this step and the (hop, edge) pairs that carried one (each edge is
        one link per hop, whatever the number of origins it carried)."""
        gis_hop = jnp.asarray(self.gis_hop)  # (N, E)
        origin = jnp.arange(self.num_agents)[:, None]
        active = (gis_hop > 0) & in_flight[jnp.maximum(gis_hop - 1, 0), origin]  # (N, E)
        edge = jnp.broadcast_to(jnp.arange(gis_hop.shape[1]), gis_hop.shape)
        used = jnp.zeros((self.ttl, gis_hop.shape[1]), jnp.int32)
        used = used.at[jnp.maximum(gis_hop - 1, 0), edge].add(active.astype(jnp.int32))
        return active.sum(dtype=jnp.int32), (used > 0).sum(dtype=jnp.int32)
