"""Graph facts from breadth-first search: edges, neighbour tables, hop distances,
eccentricities, diameter and centres (docs/gossip.md, docs/commeff.md), streamed in blocks so
that only :func:`hop_distances` holds an N x N array."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import networkx as nx
import numpy as np

from fedbandit_env.graphs.base import GraphError, _num_nodes, _require_connected


def edge_array(G: nx.Graph) -> np.ndarray:
    """Edges as an ``(E, 2)`` int64 array with ``u < v``, rows sorted lexicographically."""
    _num_nodes(G)
    e = np.array(list(G.edges), dtype=np.int64).reshape(-1, 2)
    e.sort(axis=1)
    return e[np.lexsort((e[:, 1], e[:, 0]))]


def neighbor_table(G: nx.Graph) -> tuple[np.ndarray, np.ndarray]:
    """Padded neighbour ids ``(N, Dmax)`` int64 (``-1`` padding, ascending) and degrees ``(N,)``.

    ``Dmax`` is the maximum degree, at least 1. Built from the edge list in O(|E| log |E|) time and
    O(N * Dmax) memory; no N x N array (used for large rings, docs/gossip.md count propagation).
    """
    n = _num_nodes(G)
    e = edge_array(G)
    src = np.concatenate([e[:, 0], e[:, 1]])
    dst = np.concatenate([e[:, 1], e[:, 0]])
    order = np.lexsort((dst, src))
    src, dst = src[order], dst[order]
    degrees = np.bincount(src, minlength=n).astype(np.int64)
    table = np.full((n, max(1, int(degrees.max(initial=0)))), -1, dtype=np.int64)
    starts = np.cumsum(degrees) - degrees
    table[src, np.arange(src.size) - starts[src]] = dst
    return table, degrees


BFS_BLOCK_ENTRIES = 1 << 22
"""Distance entries held at once by the blocked BFS (32 MB of int64): rows per block N-independent
memory, so eccentricities and the diameter never hold an N x N array."""


def _sparse_adjacency(G: nx.Graph, n: int) -> Any:
    """Symmetric CSR adjacency for :mod:`scipy.sparse.csgraph`, or ``None`` without SciPy."""
    try:
        from scipy import sparse
    except ImportError:  # pragma: no cover - SciPy is in the test extra
        return None
    e = edge_array(G)
    rows = np.concatenate([e[:, 0], e[:, 1]])
    cols = np.concatenate([e[:, 1], e[:, 0]])
    data = np.ones(rows.size, dtype=np.float64)
    return sparse.csr_matrix((data, (rows, cols)), shape=(n, n))


def _distance_blocks(G: nx.Graph, sources: np.ndarray):
    """Yield ``(first, block)``: hop distances ``(rows, N)`` int64 (``-1`` unreachable) from
    ``sources[first:first+rows]``, a bounded number of entries at a time.

    Breadth-first search in C through ``scipy.sparse.csgraph.shortest_path`` (unweighted) when
    SciPy is installed, else networkx's BFS; both give the same integers.
    """
    n = G.number_of_nodes()
    rows = max(1, BFS_BLOCK_ENTRIES // max(n, 1))
    adj = _sparse_adjacency(G, n) if n > 1 else None
    for first in range(0, sources.size, rows):
        chunk = sources[first : first + rows]
        if adj is not None:
            from scipy.sparse.csgraph import shortest_path

            d = shortest_path(adj, method="D", directed=False, unweighted=True, indices=chunk)
            d = np.atleast_2d(d)
            block = np.where(np.isfinite(d), d, -1).astype(np.int64)
        else:
            block = np.full((chunk.size, n), -1, dtype=np.int64)
            for k, s in enumerate(chunk):
                lengths = nx.single_source_shortest_path_length(G, int(s))
                targets = np.fromiter(lengths.keys(), dtype=np.int64, count=len(lengths))
                block[k, targets] = np.fromiter(
                    lengths.values(), dtype=np.int64, count=len(lengths)
                )
        yield first, block


def distances_from(G: nx.Graph, sources: Sequence[int] | np.ndarray) -> np.ndarray:
    """Hop distances ``(len(sources), N)`` int64 from the given nodes, ``-1`` where unreachable.

    The rows of :func:`hop_distances` for ``sources`` only: O(len(sources) * (N + |E|)) time.
    """
    n = _num_nodes(G)
    src = np.asarray(sources, dtype=np.int64).reshape(-1)
    if src.size and (src.min() < 0 or src.max() >= n):
        raise GraphError(f"sources: expected node ids in 0..{n - 1}, got {src.tolist()}")
    out = np.empty((src.size, n), dtype=np.int64)
    for first, block in _distance_blocks(G, src):
        out[first : first + block.shape[0]] = block
    return out


def hop_distances(G: nx.Graph) -> np.ndarray:
    """All-pairs BFS hop distances ``(N, N)`` int64, ``-1`` between unreachable nodes.

    ``d(j, i)`` of the gossip paper's Lemma 1 (docs/gossip.md) and ``sd`` of docs/commeff.md; the ``-1`` entries mark
    different components of a hybrid topology. This is the one N x N fact: the other facts
    (:func:`eccentricities`, :func:`diameter`, :func:`graph_centre`) stream it in blocks.
    """
    n = _num_nodes(G)
    return distances_from(G, np.arange(n))


def _row_max_distances(G: nx.Graph) -> np.ndarray:
    """``max_j d(i, j)`` over the nodes ``j`` reachable from ``i`` ``(N,)``, streamed in blocks."""
    n = G.number_of_nodes()
    out = np.empty(n, dtype=np.int64)
    for first, block in _distance_blocks(G, np.arange(n)):
        out[first : first + block.shape[0]] = block.max(axis=1)
    return out


def eccentricities(G: nx.Graph) -> np.ndarray:
    """Eccentricity ``max_j d(i, j)`` of every node ``(N,)`` int64 (connected graph).

    Streams the BFS rows in blocks: O(N (N + |E|)) time, O(N) memory besides one block.
    """
    _require_connected(G)
    return _row_max_distances(G)


def diameter(G: nx.Graph) -> int:
    """Diameter ``d_G`` of a connected graph (GIS needs ``d_G`` hops, docs/commeff.md)."""
    return int(eccentricities(G).max())


def graph_centre(G: nx.Graph) -> int:
    """A centre of a connected graph: minimum eccentricity, lowest id on ties (docs/commeff.md)."""
    return int(np.argmin(eccentricities(G)))
