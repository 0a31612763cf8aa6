"""Spectral facts: the Laplacian and ``lambda2`` of the expected gossip matrix
``I - L/(2|E|)`` (docs/gossip.md), dense or, for large graphs, by sparse Lanczos."""

from __future__ import annotations

import math

import networkx as nx
import numpy as np

from fedbandit_env.graphs.base import GraphError, _num_nodes
from fedbandit_env.graphs.facts import _sparse_adjacency, edge_array


def laplacian(G: nx.Graph) -> np.ndarray:
    """Dense Laplacian ``L = D - A``, ``(N, N)`` float64 (docs/gossip.md, docs/dp-recsys.md)."""
    n = _num_nodes(G)
    e = edge_array(G)
    L = np.zeros((n, n), dtype=np.float64)
    L[e[:, 0], e[:, 1]] = -1.0
    L[e[:, 1], e[:, 0]] = -1.0
    L[np.arange(n), np.arange(n)] = -L.sum(axis=1)
    return L


def gossip_lambda2(G: nx.Graph) -> float:
    """Second-largest eigenvalue of the expected gossip matrix ``I - L/(2|E|)`` (docs/gossip.md).

    Computed as ``1 - a(G)/(2|E|)`` with ``a(G)`` the algebraic connectivity; in ``[0, 1)`` for a
    connected graph with at least one edge, exactly 1.0 for a disconnected one. A graph without
    edges (a single agent) has no gossip matrix and raises :class:`GraphError`.
    """
    _num_nodes(G)
    m = G.number_of_edges()
    if m == 0:
        raise GraphError("graph: has no edges; expected |E| >= 1 for the gossip matrix")
    if not nx.is_connected(G):
        return 1.0
    n = G.number_of_nodes()
    a = _sparse_algebraic_connectivity(G, n) if n > DENSE_SPECTRUM_MAX else None
    if a is None:
        a = np.linalg.eigvalsh(laplacian(G))[1]
    return float(np.clip(1.0 - a / (2.0 * m), 0.0, 1.0))


DENSE_SPECTRUM_MAX = 1000
"""Largest N whose ``lambda2`` comes from the dense eigendecomposition; above it (with SciPy) the
sparse shift-invert Lanczos of :func:`_sparse_algebraic_connectivity` (O(N + |E|) memory)."""


def _sparse_algebraic_connectivity(G: nx.Graph, n: int) -> float | None:
    """Second-smallest Laplacian eigenvalue by shift-invert Lanczos, or ``None`` without SciPy.

    ``L + 1e-3 I`` is positive definite, so ARPACK's shift-invert mode around ``-1e-3`` returns
    the two eigenvalues nearest 0, ``0`` and ``a(G)``, without the dense N x N Laplacian.
    """
    adj = _sparse_adjacency(G, n)
    if adj is None:  # pragma: no cover - SciPy is in the test extra
        return None
    from scipy import sparse
    from scipy.sparse.linalg import eigsh

    lap = (sparse.diags(np.asarray(adj.sum(axis=1)).ravel()) - adj).tocsc()
    v0 = np.ones(n) / math.sqrt(n) + np.linspace(0.0, 1.0, n)  # deterministic start vector
    vals = eigsh(lap, k=2, sigma=-1e-3, which="LM", return_eigenvectors=False, v0=v0)
    return float(np.sort(vals)[1])
