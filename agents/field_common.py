"""What the field agents share (DDUCB, coop-UCB2, GosInE, LDP-UCB;
docs/field.md), and the neighbour reductions Gossip_UCB uses too.

* :func:`consensus_setup` — the consensus matrix ``P = I - (kappa/d_max) L`` of a connected
  topology (:func:`fedbandit_env.graphs.consensus_weights`), its off-diagonal weight
  ``kappa/d_max`` (the same on every edge, so a receiver only needs the **sum** of its
  neighbours' messages: the aggregating delivery ``reduce="sum"`` of the ``neighbors`` channel)
  and its spectral gap ``|lambda_2| = max_{p>=2} |lambda_p(P)|``; errors name the agent.
* :func:`neighbour_sum` — the sum of the messages that arrived and how many arrived, from either
  the aggregating delivery or the padded one (the sum over the mask, in ascending neighbour id
  order, which the aggregating delivery reproduces exactly).
* :func:`neighbour_max` — the element-wise maximum of the messages that arrived (0 where none
  did; Gossip_UCB's Eq. (1)), from either delivery;
* :func:`mix` — one consensus round ``x_i <- P_ii x_i + w sum_{j in N(i)} x_j`` on (..., N, dim)
  arrays, a dropped message giving its weight to the receiver's own value (rows stay
  stochastic).

:func:`neighbour_sum`, :func:`neighbour_max` and :func:`mix` are written once for both engines
(docs/architecture.md, "Shared kernels"): the numpy learners call them on (B, N, ...) float64
batches, the JAX learners (:mod:`agents.jax.field_common`) on one run's (N, ...) float32
arrays.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from fedbandit_env.errors import ConfigError
from fedbandit_env.graphs import GraphError, check_mixing_spectrum, consensus_weights, default_kappa
from fedbandit_env.policy import FederationFacts
from fedbandit_env.xp import namespace


@dataclass(frozen=True)
class Consensus:
    """``P`` (N, N), its diagonal, the edge weight ``w = kappa/d_max``, the degrees and
    ``lambda2 = max_{p>=2} |lambda_p(P)|``."""

    kappa: float
    P: np.ndarray
    self_weight: np.ndarray
    edge_weight: float
    degrees: np.ndarray
    lambda2: float


def consensus_setup(agent_id: str, facts: FederationFacts, kappa: float | None) -> Consensus:
    """The consensus matrix of the facts' topology; a disconnected graph, or ``kappa = 1`` on a
    bipartite graph, is a :class:`ConfigError` naming the agent and the field."""
    topo = facts.topology
    if topo.num_components != 1:
        raise ConfigError(
            f"{agent_id}: topology: expected one connected graph, got {topo.num_components} "
            f"components ({topo.kind!r})"
        )
    k = default_kappa(topo.graph) if kappa is None else float(kappa)
    try:
        P = consensus_weights(topo.graph, k)
        lam = check_mixing_spectrum(P, kappa=k)
    except GraphError as err:
        raise ConfigError(f"{agent_id}: {err} (topology {topo.kind!r})") from None
    degrees = np.asarray(topo.degrees, dtype=np.int64)
    d_max = int(degrees.max(initial=0))
    w = k / d_max if d_max > 0 else 0.0
    return Consensus(k, P, P.diagonal().copy(), w, degrees, float(lam))


def neighbour_sum(delivery: Any) -> tuple[Any, Any]:
    """``(sum (..., N, dim), count (..., N))`` of the neighbour messages that arrived, from the
    aggregating delivery (``value`` and ``count``) or the padded one (the sum over its mask, in
    slot order). One function for both engines (:mod:`fedbandit_env.xp`): the numpy delivery
    (B, N, ...) or the JAX one of a run (N, ...), numpy or ``jax.numpy`` arrays alike."""
    if hasattr(delivery, "value"):  # NeighborsAggregate (numpy or JAX): already reduced
        return delivery.value, delivery.count
    xp = namespace(delivery.payload, delivery.mask)
    mask = delivery.mask  # (..., N, D)
    total = xp.where(mask[..., None], delivery.payload, 0.0).sum(axis=-2)
    return total, mask.sum(axis=-1)


def neighbour_max(delivery: Any) -> Any:
    """``(..., N, dim)`` the element-wise maximum of the neighbour messages that arrived (0 where
    none did): the aggregating delivery's value (``reduce="max"``) or the maximum over the
    padded one's mask, numpy or JAX alike."""
    if hasattr(delivery, "value"):  # NeighborsAggregate (numpy or JAX): already reduced
        return delivery.value
    xp = namespace(delivery.payload, delivery.mask)
    return xp.where(delivery.mask[..., None], delivery.payload, 0.0).max(axis=-2)


def mix(consensus: Any, own: Any, delivery: Any) -> Any:
    """One round of ``P`` applied to the values every agent sent (``own`` (..., N, dim) is what
    each agent sent itself); a missing neighbour message gives its weight to the receiver.
    ``consensus`` has ``self_weight`` (N,), ``edge_weight`` and ``degrees`` (N,): a
    :class:`Consensus` (numpy, float64) or the JAX learners' float32 ``Mixing``; the arrays'
    namespace decides the engine."""
    total, count = neighbour_sum(delivery)
    lost = (consensus.degrees - count).astype(own.dtype)  # (..., N): dropped (0 without drops)
    w_self = consensus.self_weight + consensus.edge_weight * lost
    return w_self[..., None] * own + consensus.edge_weight * total
