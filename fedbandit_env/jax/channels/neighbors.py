"""``neighbors`` in JAX: a sent payload reaches every graph neighbour in the same step.

Mirrors :mod:`fedbandit_env.network.neighbors` for one run: the padded delivery (one slot per
neighbour, ascending ids, -1 padded) or, with ``reduce`` ``"sum"``, ``"mean"`` or ``"max"`` or a
robust reduction (``"median"``, ``"trimmed_mean"``, ``"median_of_means"``,
``"geometric_median"``; docs/channels.md, "Robust reductions"; the functions of
:mod:`fedbandit_env.network.robust`, shared with the numpy channels), the aggregate over the
neighbours whose message arrived, their count and the ``degenerate`` flag of
``trimmed_mean``. Each directed delivery is one agent-agent message of ``dim`` floats at cost
c2; a dropped message is charged and counted in ``dropped``. ``grouping="random"`` splits the step's key into the drop key and a
key for the (N, D) ordering uniforms (:meth:`Neighbors.keys`).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from fedbandit_env.jax.channels.base import JaxChannel
from fedbandit_env.jax.types import link_charge
from fedbandit_env.network.ledger import AGENT_AGENT
from fedbandit_env.network.robust import ROBUST, robust_reduce
from fedbandit_env.xp import namespace


class NeighborsDelivery(NamedTuple):
    """``senders`` (N, D) neighbour ids (-1 padded), ``mask`` (N, D) a message from that slot
    arrived, ``sent`` (N, dim) the payloads given to the channel this step (a slot reads its
    sender's row; the rows of agents that did not send are never read); :attr:`payload`
    (N, D, dim) the content of each slot (zeros where none), gathered from ``sent`` when read,
    so a step carries N rows, not N x D. A learner reads ``payload`` and ``mask``, never
    ``sent``: it holds a dropped message's row too. Leading axes (runs) come first in every
    field."""

    senders: jnp.ndarray
    mask: jnp.ndarray
    sent: jnp.ndarray

    @property
    def payload(self) -> jnp.ndarray:
        """(..., N, D, dim) the message of each slot, zeros where none arrived."""
        return slot_payloads(self.senders, self.mask, self.sent)


class SlotDelivery(NamedTuple):
    """A padded delivery whose slots hold messages sent at different steps (a per-link or random
    latency, docs/time.md "latency"): ``senders`` (N, D), ``mask`` (N, D) and ``payload`` (N, D,
    dim) itself; read as :class:`NeighborsDelivery` (``mask``, ``payload``)."""

    senders: jnp.ndarray
    mask: jnp.ndarray
    payload: jnp.ndarray


def slot_payloads(senders, mask, sent):
    """The padded delivery's payloads (..., N, D, dim): slot (i, d) holds ``sent`` of agent
    ``senders[i, d]`` where ``mask`` (a message arrived), zeros elsewhere; numpy or JAX
    arrays, any leading axes."""
    xp = namespace(senders, mask, sent)
    *lead, n, d = np.shape(senders)
    rows = xp.maximum(senders, 0).reshape(*lead, n * d, 1)
    out = xp.take_along_axis(sent, rows, axis=-2).reshape(*lead, n, d, sent.shape[-1])
    return xp.where(mask[..., None], out, xp.zeros((), sent.dtype))


class NeighborsAggregate(NamedTuple):
    """``value`` (N, dim) the reduction over the heard neighbours (0 where none), ``count``
    (N,), ``degenerate`` (N,) ``trimmed_mean`` fell back to the median (the channel always
    fills it, all False for the other reductions)."""

    value: jnp.ndarray
    count: jnp.ndarray
    degenerate: jnp.ndarray | None = None


class Neighbors(JaxChannel):
    kind = "neighbors"

    def __init__(self, twin):
        super().__init__(twin)
        self.reduce = twin.reduce
        self.trim = twin.trim
        self.group_size = twin.group_size
        self.random_groups = twin.reduce == "median_of_means" and twin.grouping == "random"
        self.senders = np.asarray(twin.senders, np.int32)  # (N, D)
        self.valid = self.senders >= 0
        self.gather = np.where(self.valid, self.senders, 0)
        self.max_degree = self.senders.shape[1]

    def empty(self):
        n, d = self.senders.shape
        if self.reduce is not None:
            return NeighborsAggregate(
                jnp.zeros((n, self.dim), jnp.float32), jnp.zeros(n, jnp.int32), jnp.zeros(n, bool)
            )
        return NeighborsDelivery(
            jnp.asarray(self.senders),
            jnp.zeros((n, d), bool),
            jnp.zeros((n, self.dim), jnp.float32),
        )

    def keys(self, key: jax.Array) -> tuple[jax.Array, jax.Array | None]:
        """(drop key, grouping key): the step's key as it is, without ``grouping="random"``."""
        if not self.random_groups:
            return key, None
        k_drop, k_group = jax.random.split(key)
        return k_drop, k_group

    def group_order(self, k_group: jax.Array | None) -> jnp.ndarray | None:
        """The (N, D) uniforms that order each receiver's heard neighbours (``"random"``)."""
        if k_group is None:
            return None
        return jax.random.uniform(k_group, self.senders.shape, jnp.float32)

    def transmit(self, key: jax.Array, state, send, payload):
        k_drop, k_group = self.keys(key)
        transmitted = jnp.asarray(self.valid) & send[self.gather]  # (N, D)
        kept = self.kept(k_drop, transmitted.shape)
        heard = transmitted if kept is None else transmitted & kept
        count = heard.sum(axis=1, dtype=jnp.int32)
        messages = transmitted.sum(dtype=jnp.int32)
        charge = link_charge(
            AGENT_AGENT, messages, self.dim, self.c2 * messages, messages - count.sum()
        )
        if self.reduce is None:  # the slots are gathered from the payloads when read
            return NeighborsDelivery(jnp.asarray(self.senders), heard, payload), state, charge
        incoming = payload[self.gather]  # (N, D, dim)
        if self.reduce in ROBUST:
            value, degenerate = robust_reduce(
                self.reduce,
                incoming,
                heard,
                count,
                trim=self.trim,
                group_size=self.group_size,
                order=self.group_order(k_group),
            )
            return NeighborsAggregate(value, count, degenerate), state, charge
        if self.reduce == "max":
            value = jnp.where(heard[..., None], incoming, -jnp.inf).max(axis=1)
            value = jnp.where(count[:, None] > 0, value, 0.0)
        else:
            value = jnp.where(heard[..., None], incoming, 0.0).sum(axis=1)
            if self.reduce == "mean":
                value = value / jnp.maximum(count, 1)[:, None]
        degenerate = jnp.zeros(count.shape, bool)
        return NeighborsAggregate(value, count, degenerate), state, charge
