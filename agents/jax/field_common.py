"""What the JAX ports of the field agents share (DDUCB, coop-UCB2; docs/field.md).

Port of :mod:`agents.field_common` for one run. The consensus matrix ``P = I - (kappa/d_max)
L`` of the topology and its spectral gap are computed once, in Python, by the twin's own
:func:`agents.field_common.consensus_setup` (the learner's ``init``); this module applies one
consensus round to the JAX delivery of the ``neighbors`` channel:

* :func:`neighbour_sum` — the sum of the arrived neighbour messages and their count, from the
  aggregating delivery (``reduce="sum"``) or the padded one (the sum over the mask);
* :func:`mix` — ``x_i <- P_ii x_i + w sum_{j in N(i)} x_j`` with ``w = kappa/d_max``, a dropped
  message giving its weight to the receiver's own value (rows stay stochastic), as the twin's
  :func:`agents.field_common.mix`.
"""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp
import numpy as np

from agents.field_common import Consensus
from fedbandit_env.jax.channels.neighbors import NeighborsAggregate


class Mixing(NamedTuple):
    """The constants of one consensus round: ``self_weight`` (N,) the diagonal of ``P``,
    ``edge_weight`` w = kappa/d_max and ``degrees`` (N,), float32 / int32 (numpy constants, so
    that a learner may keep them across traces)."""

    self_weight: np.ndarray
    edge_weight: float
    degrees: np.ndarray

    @classmethod
    def from_consensus(cls, consensus: Consensus) -> Mixing:
        """The twin's consensus setup (:func:`agents.field_common.consensus_setup`)."""
        return cls(
            np.asarray(consensus.self_weight, np.float32),
            float(consensus.edge_weight),
            np.asarray(consensus.degrees, np.int32),
        )


def neighbour_sum(delivery) -> tuple[jnp.ndarray, jnp.ndarray]:
    """``(sum (N, dim), count (N,))`` of the neighbour messages that arrived (the twin's
    :func:`agents.field_common.neighbour_sum`)."""
    if isinstance(delivery, NeighborsAggregate):
        return delivery.value, delivery.count
    mask = delivery.mask
    total = jnp.where(mask[..., None], delivery.payload, 0.0).sum(axis=1)
    return total, mask.sum(axis=1, dtype=jnp.int32)


def mix(mixing: Mixing, own: jnp.ndarray, delivery) -> jnp.ndarray:
    """One round of ``P`` on what every agent sent (``own`` (N, dim) each agent's own message):
    ``P_ii own_i + w sum_j own_j``, a missing neighbour message's weight kept by the receiver."""
    total, count = neighbour_sum(delivery)
    lost = (jnp.asarray(mixing.degrees) - count).astype(jnp.float32)  # dropped (0 without drops)
    w_self = jnp.asarray(mixing.self_weight) + jnp.float32(mixing.edge_weight) * lost
    return w_self[:, None] * own + jnp.float32(mixing.edge_weight) * total
