"""``gossip`` in JAX: random pairwise exchanges over the graph's edges, in one of two modes.

Mirrors :mod:`fedbandit_env.network.gossip` for one run:

* ``mode="edge"``: one uniformly random edge per step (i.i.d. over E, the Gossip UCB paper's
  asynchronous gossip, docs/gossip.md), drawn whether or not anyone sends; its two endpoints
  exchange payloads, each direction one agent-agent message of ``dim`` floats at cost c2.
* ``mode="pull_one_neighbour"`` (GosInE's phase-end recommendation pull, docs/gosine.md): every
  agent with a neighbour pulls one uniformly random neighbour j (the ``floor(u d_i)``-th in
  ascending id order for one uniform ``u`` per agent per step) and receives j's payload if j
  sent; each answered pull is one message at cost c2, charged to the responder, and a pull of
  an agent that did not send costs nothing.

Drops (``drop_prob``): each direction (edge mode) or each reply (pull mode) is lost
independently; a lost message is charged and counted in ``dropped``, and its receiver still
sees ``partner`` with ``received`` False and a zero payload.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from fedbandit_env.jax.channels.base import JaxChannel
from fedbandit_env.jax.types import Charge, link_charge
from fedbandit_env.network.ledger import AGENT_AGENT


class GossipDelivery(NamedTuple):
    """``partner`` (N,) the other endpoint (edge mode: -1 off this step's edge; pull mode: the
    pulled neighbour, -1 for an isolated agent), ``received`` (N,) its payload arrived,
    ``payload`` (N, dim) that payload (zeros where none)."""

    partner: jnp.ndarray
    received: jnp.ndarray
    payload: jnp.ndarray


class Gossip(JaxChannel):
    kind = "gossip"

    def __init__(self, twin):
        super().__init__(twin)
        self.mode = twin.mode
        self.edges = np.asarray(twin.edges, np.int32)  # (E, 2)
        if self.mode == "pull_one_neighbour":
            self.neighbors = np.asarray(twin.topology.neighbors, np.int32)  # (N, D), -1 padded
            self.degrees = np.asarray(twin.topology.degrees, np.int32)

    def empty(self):
        n = self.num_agents
        return GossipDelivery(
            jnp.full(n, -1, jnp.int32),
            jnp.zeros(n, bool),
            jnp.zeros((n, self.dim), jnp.float32),
        )

    @property
    def takes_exclude(self) -> bool:
        """Whether a message may carry an exclusion mask (the pull mode, as on numpy)."""
        return self.mode == "pull_one_neighbour"

    def transmit(self, key: jax.Array, state, send, payload, exclude=None):
        """One round; ``exclude`` (N, N) bool (pull mode only; None: nobody excluded):
        ``exclude[i, h]`` True when agent i must not pull agent h (docs/channels.md)."""
        k_pick, k_drop = jax.random.split(key)
        if self.mode == "pull_one_neighbour":
            delivery, charge = self._pull(k_pick, k_drop, send, payload, exclude)
        else:
            delivery, charge = self._edge(k_pick, k_drop, send, payload)
        return delivery, state, charge

    def _edge(self, k_pick, k_drop, send, payload) -> tuple[GossipDelivery, Charge]:
        """One uniform edge {a, c}: a hears c if c sent (and it was not dropped), and back."""
        e = jax.random.randint(k_pick, (), 0, len(self.edges), jnp.int32)
        a, c = jnp.asarray(self.edges)[e]
        agents = jnp.arange(self.num_agents, dtype=jnp.int32)
        partner = jnp.where(agents == a, c, jnp.where(agents == c, a, -1))
        a_sends, c_sends = send[a], send[c]
        to_c, to_a = a_sends, c_sends
        kept = self.kept(k_drop, (2,))
        if kept is not None:
            to_c, to_a = to_c & kept[0], to_a & kept[1]
        received = ((agents == a) & to_a) | ((agents == c) & to_c)
        out = jnp.where(received[:, None], payload[jnp.maximum(partner, 0)], 0.0)
        count = a_sends.astype(jnp.int32) + c_sends.astype(jnp.int32)
        heard = to_a.astype(jnp.int32) + to_c.astype(jnp.int32)
        charge = link_charge(AGENT_AGENT, count, self.dim, self.c2 * count, count - heard)
        return GossipDelivery(partner, received, out), charge

    def _pull(self, k_pick, k_drop, send, payload, exclude=None) -> tuple[GossipDelivery, Charge]:
        """Every agent pulls its ``floor(u d_i)``-th neighbour; the reply goes out if it sent.
        With ``exclude``: the ``floor(u d'_i)``-th of its ``d'_i`` neighbours not excluded, in
        ascending id order, with the same uniform; none left: nobody (the numpy channel's
        ``allowed_neighbours``)."""
        n = self.num_agents
        u = jax.random.uniform(k_pick, (n,), jnp.float32)
        partner = self._partners(u) if exclude is None else self._allowed_partners(u, exclude)
        has = partner >= 0
        src = jnp.where(has, partner, 0)
        answered = has & send[src]
        kept = self.kept(k_drop, (n,))
        received = answered if kept is None else answered & kept
        out = jnp.where(received[:, None], payload[src], 0.0)
        count = answered.sum(dtype=jnp.int32)
        dropped = count - received.sum(dtype=jnp.int32)
        charge = link_charge(AGENT_AGENT, count, self.dim, self.c2 * count, dropped)
        return GossipDelivery(partner, received, out), charge

    def _partners(self, u: jnp.ndarray) -> jnp.ndarray:
        """Agent i's ``floor(u_i d_i)``-th neighbour, -1 without neighbours."""
        deg = jnp.asarray(self.degrees)
        n = self.num_agents
        slot = jnp.minimum((u * deg).astype(jnp.int32), jnp.maximum(deg - 1, 0))
        partner = jnp.asarray(self.neighbors)[jnp.arange(n), slot]
        return jnp.where(deg > 0, partner, -1)

    def _allowed_partners(self, u: jnp.ndarray, exclude: jnp.ndarray) -> jnp.ndarray:
        """Agent i's ``floor(u_i d'_i)``-th neighbour among those ``exclude[i]`` allows, -1
        where none is left."""
        n = self.num_agents
        nbrs = jnp.asarray(self.neighbors)
        valid = nbrs >= 0
        allowed = valid & ~exclude[jnp.arange(n)[:, None], jnp.where(valid, nbrs, 0)]
        left = allowed.sum(axis=1, dtype=jnp.int32)
        slot = jnp.minimum((u * left).astype(jnp.int32), jnp.maximum(left - 1, 0))
        rank = jnp.cumsum(allowed.astype(jnp.int32), axis=1)
        pos = jnp.argmax(allowed & (rank == slot[:, None] + 1), axis=1)
        return jnp.where(left > 0, nbrs[jnp.arange(n), pos], -1)
