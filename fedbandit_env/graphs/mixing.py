"""Mixing matrices: consensus weights ``P = I - (kappa/d_max) L`` with the spectral check of
docs/dp-recsys.md, and Metropolis-Hastings weights."""

from __future__ import annotations

import math

import networkx as nx
import numpy as np

from fedbandit_env.graphs.base import GraphError, _num_nodes, _require_connected
from fedbandit_env.graphs.facts import edge_array, neighbor_table
from fedbandit_env.graphs.spectra import laplacian

SPECTRAL_TOL = 1e-9
"""Reject mixing matrices with ``max_{p>=2} |lambda_p| >= 1 - SPECTRAL_TOL``."""


def default_kappa(G: nx.Graph) -> float:
    """Default consensus step size ``kappa = d_max/(d_max + 1)`` (docs/dp-recsys.md).

    Its diagonal ``1 - kappa d_i/d_max >= 1/(d_max+1) > 0`` keeps ``lambda_N(P) > -1`` also on
    bipartite graphs. A single agent (``d_max = 0``) gets 1.0, since then ``P = [[1]]`` for every
    kappa and the formula's 0 is not a valid step size.
    """
    _num_nodes(G)
    d_max = max((d for _, d in G.degree), default=0)
    return d_max / (d_max + 1) if d_max > 0 else 1.0


def check_mixing_spectrum(
    P: np.ndarray, *, kappa: float | None = None, tol: float = SPECTRAL_TOL
) -> float:
    """Return ``max_{p>=2} |lambda_p(P)|`` of a symmetric mixing matrix; raise if ``>= 1 - tol``.

    docs/dp-recsys.md: the constants ``c0``, ``c_i`` need ``|lambda_p| < 1`` for
    ``p >= 2``. This fails for ``kappa = 1`` on a bipartite graph (``lambda_N = -1``, e.g. an even
    cycle) and for a disconnected graph (``lambda_2 = 1``). The error names ``kappa`` when given.
    Eigenvalues are sorted in descending order; the first (``lambda_1 = 1``) is skipped.
    """
    P = np.asarray(P, dtype=np.float64)
    if P.ndim != 2 or P.shape[0] != P.shape[1] or P.shape[0] == 0:
        raise GraphError(f"P: expected a non-empty square matrix, got shape {P.shape}")
    if not np.allclose(P, P.T, rtol=0.0, atol=1e-12):
        raise GraphError("P: is not symmetric; expected a symmetric mixing matrix")
    lam = np.sort(np.linalg.eigvalsh(P))[::-1]
    modulus = float(np.abs(lam[1:]).max(initial=0.0))
    if modulus >= 1.0 - tol:
        field = f"kappa: kappa = {kappa} gives" if kappa is not None else "P: has"
        raise GraphError(
            f"{field} max_(p>=2) |lambda_p(P)| = {modulus:.12f} >= 1 - {tol:g}; expected a "
            "connected graph and, on bipartite graphs, kappa < 1 (default d_max/(d_max+1))"
        )
    return modulus


def consensus_weights(G: nx.Graph, kappa: float) -> np.ndarray:
    """Consensus matrix ``P = I - (kappa/d_max) L`` ``(N, N)`` float64 (docs/dp-recsys.md).

    ``G`` must be connected and ``0 < kappa <= 1``. ``P`` is symmetric, doubly stochastic and
    non-negative. Raises :class:`GraphError` naming ``kappa`` when
    ``max_{p>=2} |lambda_p(P)| >= 1 - 1e-9`` (e.g. ``kappa = 1`` on an even cycle; docs/dp-recsys.md).
    A single agent gets ``P = [[1.0]]``.
    """
    n = _require_connected(G)
    if isinstance(kappa, bool) or not isinstance(kappa, int | float | np.integer | np.floating):
        raise GraphError(f"kappa: expected a number in (0, 1], got {kappa!r}")
    if not (math.isfinite(kappa) and 0.0 < kappa <= 1.0):
        raise GraphError(f"kappa: expected a number in (0, 1], got {kappa!r}")
    L = laplacian(G)
    d_max = float(L.diagonal().max())
    P = np.eye(n) if d_max == 0.0 else np.eye(n) - (float(kappa) / d_max) * L
    check_mixing_spectrum(P, kappa=float(kappa))
    return P


def metropolis_weights(G: nx.Graph) -> np.ndarray:
    """Metropolis-Hastings weights ``(N, N)`` float64: ``W_ij = 1/(1 + max(d_i, d_j))`` on edges.

    The diagonal fills each row to 1, so ``W`` is symmetric, doubly stochastic and non-negative.
    An alternative to :func:`consensus_weights` that needs only neighbour degrees.
    """
    n = _num_nodes(G)
    e = edge_array(G)
    _, degrees = neighbor_table(G)
    w = 1.0 / (1.0 + np.maximum(degrees[e[:, 0]], degrees[e[:, 1]]))
    W = np.zeros((n, n), dtype=np.float64)
    W[e[:, 0], e[:, 1]] = w
    W[e[:, 1], e[:, 0]] = w
    W[np.arange(n), np.arange(n)] = 1.0 - W.sum(axis=1)
    return W
