"""What the field agents share (DDUCB, coop-UCB2, GosInE, LDP-UCB;
docs/field.md).

* :func:`consensus_setup` — the consensus matrix ``P = I - (kappa/d_max) L`` of a connected
  topology (:func:`fedbandit_env.graphs.consensus_weights`), its off-diagonal weight
  ``kappa/d_max`` (the same on every edge, so a receiver only needs the **sum** of its
  neighbours' messages: the aggregating delivery ``reduce="sum"`` of the ``neighbors`` channel)
  and its spectral gap ``|lambda_2| = max_{p>=2} |lambda_p(P)|``; errors name the agent.
* :func:`neighbour_sum` — the sum of the messages that arrived and how many arrived, from either
  the aggregating delivery or the padded one (the sum over the mask, in ascending neighbour id
  order, which the aggregating delivery reproduces exactly).
* :func:`mix` — one consensus round ``x_i <- P_ii x_i + w sum_{j in N(i)} x_j`` on (B, N, dim)
  arrays, a dropped message giving its weight to the receiver's own value (rows stay
  stochastic).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fedbandit_env.errors import ConfigError
from fedbandit_env.graphs import GraphError, check_mixing_spectrum, consensus_weights, default_kappa
from fedbandit_env.network import NeighborsAggregate
from fedbandit_env.policy import FederationFacts


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


def neighbour_sum(delivery) -> tuple[np.ndarray, np.ndarray]:
    """``(sum (B, N, dim), count (B, N))`` of the neighbour messages that arrived."""
    if isinstance(delivery, NeighborsAggregate):
        return delivery.value, delivery.count
    mask = delivery.mask
    total = np.where(mask[..., None], delivery.payload, 0.0).sum(axis=2)
    return total, mask.sum(axis=2)


def mix(consensus: Consensus, own: np.ndarray, delivery) -> np.ndarray:
    """One round of ``P`` applied to the values every agent sent (``own`` (B, N, dim) is what
    each agent sent itself); a missing neighbour message gives its weight to the receiver."""
    total, count = neighbour_sum(delivery)
    lost = consensus.degrees[None, :] - count  # (B, N): dropped messages (0 without drops)
    w_self = consensus.self_weight[None, :] + consensus.edge_weight * lost
    return w_self[..., None] * own + consensus.edge_weight * total
