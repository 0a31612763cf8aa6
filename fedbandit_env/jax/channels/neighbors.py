"""``neighbors`` in JAX: a sent payload reaches every graph neighbour in the same step.

Mirrors :mod:`fedbandit_env.network.neighbors` for one run: the padded delivery (one slot per
neighbour, ascending ids, -1 padded) or, with ``reduce`` ``"sum"``, ``"mean"`` or ``"max"``, the
aggregate over the neighbours whose message arrived and their count. Each directed delivery
is one agent-agent message of ``dim`` floats at cost c2; a dropped message is charged and
counted in ``dropped``.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from fedbandit_env.jax.channels.base import JaxChannel
from fedbandit_env.jax.types import link_charge
from fedbandit_env.network.ledger import AGENT_AGENT


class NeighborsDelivery(NamedTuple):
    """``senders`` (N, D) neighbour ids (-1 padded), ``mask`` (N, D) a message from that slot
    arrived, ``payload`` (N, D, dim) its content (zeros where none)."""

    senders: jnp.ndarray
    mask: jnp.ndarray
    payload: jnp.ndarray


class NeighborsAggregate(NamedTuple):
    """``value`` (N, dim) the reduction over the heard neighbours (0 where none), ``count`` (N,)."""

    value: jnp.ndarray
    count: jnp.ndarray


class Neighbors(JaxChannel):
    kind = "neighbors"

    def __init__(self, twin):
        super().__init__(twin)
        self.reduce = twin.reduce
        self.senders = np.asarray(twin.senders, np.int32)  # (N, D)
        self.valid = self.senders >= 0
        self.gather = np.where(self.valid, self.senders, 0)
        self.max_degree = self.senders.shape[1]

    def empty(self):
        n, d = self.senders.shape
        if self.reduce is not None:
            return NeighborsAggregate(
                jnp.zeros((n, self.dim), jnp.float32), jnp.zeros(n, jnp.int32)
            )
        return NeighborsDelivery(
            jnp.asarray(self.senders),
            jnp.zeros((n, d), bool),
            jnp.zeros((n, d, self.dim), jnp.float32),
        )

    def transmit(self, key: jax.Array, state, send, payload):
        transmitted = jnp.asarray(self.valid) & send[self.gather]  # (N, D)
        kept = self.kept(key, transmitted.shape)
        heard = transmitted if kept is None else transmitted & kept
        count = heard.sum(axis=1, dtype=jnp.int32)
        messages = transmitted.sum(dtype=jnp.int32)
        charge = link_charge(
            AGENT_AGENT, messages, self.dim, self.c2 * messages, messages - count.sum()
        )
        incoming = payload[self.gather]  # (N, D, dim)
        if self.reduce is None:
            out = jnp.where(heard[..., None], incoming, 0.0)
            return NeighborsDelivery(jnp.asarray(self.senders), heard, out), state, charge
        if self.reduce == "max":
            value = jnp.where(heard[..., None], incoming, -jnp.inf).max(axis=1)
            value = jnp.where(count[:, None] > 0, value, 0.0)
        else:
            value = jnp.where(heard[..., None], incoming, 0.0).sum(axis=1)
            if self.reduce == "mean":
                value = value / jnp.maximum(count, 1)[:, None]
        return NeighborsAggregate(value, count), state, charge
