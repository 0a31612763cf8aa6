"""Communication topologies of the agents and the graph facts the paper algorithms need.

Graphs are plain simple undirected :class:`networkx.Graph` objects whose nodes are the agent ids
``0..N-1``. Every public function here accepts such a graph; :func:`validate_graph` turns a user
graph into one. Spec references:

* gossip.md §1.4 and §3: the expected gossip matrix ``I - L/(2|E|)`` and its ``lambda2``; hop
  distances ``d(j, i)``.
* commeff.md §2.4-§2.7 and §4.5: diameter (GIS delay), eccentricities and graph centres
  (FindSinkAgents), hybrid topologies made of components with one sink each.
* dp-recsys.md §4.1-§4.2 and A13: the consensus matrix ``P = I - (kappa/d_max) L`` and the check
  ``max_{p>=2} |lambda_p(P)| < 1``.
* linear.md §1.4, §2.8 and §7 item 6: power graphs ``G_gamma`` and clique covers.

All randomness comes from a seed (``int``) or a :class:`numpy.random.Generator` passed in; there is
no global RNG.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import networkx as nx
import numpy as np

from fedbandit_env.validation import check_int, is_real

__all__ = [
    "GRAPH_KINDS",
    "GraphError",
    "Topology",
    "check_mixing_spectrum",
    "clique_cover",
    "consensus_weights",
    "default_kappa",
    "diameter",
    "distances_from",
    "eccentricities",
    "edge_array",
    "gossip_lambda2",
    "graph_centre",
    "hop_distances",
    "laplacian",
    "make_graph",
    "metropolis_weights",
    "neighbor_table",
    "power_graph",
    "validate_graph",
]

SeedLike = int | np.integer | np.random.Generator

MAX_CONNECT_TRIES = 1000
"""Samples drawn by the random generators before giving up on a connected graph."""

SPECTRAL_TOL = 1e-9
"""dp-recsys.md A13: reject mixing matrices with ``max_{p>=2} |lambda_p| >= 1 - SPECTRAL_TOL``."""


class GraphError(ValueError):
    """A graph, a graph parameter or a topology is invalid; the message names the field."""


class GraphTypeError(GraphError, TypeError):
    """A graph parameter has the wrong type (also a TypeError)."""


# --------------------------------------------------------------------------------------------
# small validation helpers
# --------------------------------------------------------------------------------------------


def _as_int(value: Any, field: str, minimum: int) -> int:
    """Return ``value`` as an ``int >= minimum`` or raise :class:`GraphError` naming ``field``."""
    return check_int(field, value, minimum=minimum, error=GraphError, type_error=GraphTypeError)


def _as_generator(seed: SeedLike) -> np.random.Generator:
    """Return a Generator for ``seed`` (an int >= 0 or a Generator, used as is)."""
    if isinstance(seed, np.random.Generator):
        return seed
    return np.random.default_rng(_as_int(seed, "seed", 0))


def _check_graph_type(G: Any) -> None:
    """Reject anything but an undirected simple ``networkx.Graph`` (DiGraph, MultiGraph, ...)."""
    if not isinstance(G, nx.Graph):
        raise GraphError(f"graph: expected a networkx.Graph, got {type(G).__name__}")
    if G.is_directed():
        raise GraphError("graph: is directed; expected an undirected networkx.Graph")
    if G.is_multigraph():
        raise GraphError("graph: is a multigraph; expected a simple networkx.Graph")


def _num_nodes(G: Any) -> int:
    """Check that ``G`` is a simple undirected graph on nodes ``0..N-1``; return N.

    This is the cheap O(N) check of every public function. It does not test connectivity.
    """
    _check_graph_type(G)
    n = G.number_of_nodes()
    if set(G.nodes) != set(range(n)):
        raise GraphError(
            "graph: nodes are not 0..N-1; expected agent ids 0..N-1 (use validate_graph to relabel)"
        )
    _check_no_self_loops(G)
    return n


def _check_no_self_loops(G: nx.Graph) -> None:
    """Reject self-loops (the graphs are simple, gossip.md §1.4)."""
    loops = nx.number_of_selfloops(G)
    if loops > 0:
        raise GraphError(f"graph: has {loops} self-loop(s); expected a graph without self-loops")


def _require_connected(G: nx.Graph) -> int:
    """:func:`_num_nodes` plus connectivity and at least one node; return N."""
    n = _num_nodes(G)
    if n == 0:
        raise GraphError("graph: has no nodes; expected at least 1 node")
    if not nx.is_connected(G):
        k = nx.number_connected_components(G)
        raise GraphError(f"graph: is disconnected ({k} components); expected a connected graph")
    return n


def _from_edges(n: int, edges: Any) -> nx.Graph:
    """A fresh graph with nodes inserted in order ``0..n-1`` and the given edges."""
    H = nx.Graph()
    H.add_nodes_from(range(n))
    H.add_edges_from((int(u), int(v)) for u, v in edges)
    return H


# --------------------------------------------------------------------------------------------
# construction
# --------------------------------------------------------------------------------------------


def validate_graph(G: Any, num_agents: int | None = None) -> nx.Graph:
    """Check a user graph and return a copy relabelled to ``0..N-1`` (DESIGN §3 "Topology").

    Requirements (gossip.md §1.4, commeff.md §1.3, linear.md §1.4): an undirected simple
    ``networkx.Graph`` (no ``DiGraph``, no ``MultiGraph``), no self-loops, at least one node,
    connected (a single node without edges is connected), and ``num_agents`` nodes when given.

    Nodes are relabelled in sorted order; labels that cannot be sorted together (mixed types) keep
    their insertion order. The copy holds the structure only (node and edge attributes dropped).
    """
    _check_graph_type(G)
    n = G.number_of_nodes()
    if n == 0:
        raise GraphError("graph: has no nodes; expected at least 1 node")
    if num_agents is not None and n != _as_int(num_agents, "num_agents", 1):
        raise GraphError(f"graph: has {n} nodes; expected num_agents = {num_agents} nodes")
    _check_no_self_loops(G)
    if not nx.is_connected(G):
        k = nx.number_connected_components(G)
        raise GraphError(f"graph: is disconnected ({k} components); expected a connected graph")
    try:
        order = sorted(G.nodes)
    except TypeError:
        order = list(G.nodes)
    index = {node: i for i, node in enumerate(order)}
    return _from_edges(n, ((index[u], index[v]) for u, v in G.edges))


def _most_square(n: int) -> tuple[int, int]:
    """``(rows, cols)`` with ``rows * cols == n``, ``rows <= cols`` and ``rows`` largest."""
    rows = max(r for r in range(1, math.isqrt(n) + 1) if n % r == 0)
    return rows, n // rows


def _grid(n: int, rng: np.random.Generator, rows: Any = None, cols: Any = None) -> nx.Graph:
    """2-D grid, node id ``r * cols + c`` (row-major)."""
    if rows is None and cols is None:
        rows, cols = _most_square(n)
    elif cols is None:
        rows = _as_int(rows, "rows", 1)
        if n % rows:
            raise GraphError(f"rows: {rows} does not divide num_agents = {n}; expected a divisor")
        cols = n // rows
    elif rows is None:
        cols = _as_int(cols, "cols", 1)
        if n % cols:
            raise GraphError(f"cols: {cols} does not divide num_agents = {n}; expected a divisor")
        rows = n // cols
    else:
        rows, cols = _as_int(rows, "rows", 1), _as_int(cols, "cols", 1)
        if rows * cols != n:
            raise GraphError(
                f"rows, cols: grid {rows}x{cols} has {rows * cols} nodes; "
                f"expected rows * cols == num_agents = {n}"
            )
    return nx.convert_node_labels_to_integers(nx.grid_2d_graph(rows, cols), ordering="sorted")


def _erdos_renyi(n: int, rng: np.random.Generator, p: Any = None) -> nx.Graph:
    """G(n, p) resampled until connected (commeff.md §4.4); default ``p = min(1, 2 ln N / N)``."""
    if p is None:
        p = min(1.0, 2.0 * math.log(n) / n)
    if not is_real(p):
        raise GraphTypeError(f"p: expected a probability in [0, 1], got {p!r}")
    p = float(p)
    if not 0.0 <= p <= 1.0:
        raise GraphError(f"p: expected a probability in [0, 1], got {p!r}")
    iu, ju = np.triu_indices(n, k=1)
    for _ in range(MAX_CONNECT_TRIES):
        keep = rng.random(iu.size) < p
        G = _from_edges(n, zip(iu[keep], ju[keep], strict=True))
        if nx.is_connected(G):
            return G
    raise GraphError(
        f"p: no connected G({n}, {p}) in {MAX_CONNECT_TRIES} samples; "
        f"expected p well above ln(N)/N = {math.log(n) / n:.4f}"
    )


def _random_regular(n: int, rng: np.random.Generator, degree: Any = 3) -> nx.Graph:
    """Uniform random ``degree``-regular graph, resampled until connected."""
    degree = _as_int(degree, "degree", 0)
    if degree >= n:
        raise GraphError(f"degree: got {degree}; expected degree < num_agents = {n}")
    if (n * degree) % 2:
        raise GraphError(
            f"degree: num_agents * degree = {n} * {degree} is odd; expected an even product"
        )
    if (n > 1 and degree == 0) or (n > 2 and degree == 1):
        raise GraphError(
            f"degree: a {degree}-regular graph on {n} nodes is never connected; "
            "expected degree >= 2"
        )
    for _ in range(MAX_CONNECT_TRIES):
        sample = nx.random_regular_graph(degree, n, seed=int(rng.integers(2**31)))
        G = _from_edges(n, sample.edges)
        if nx.is_connected(G):
            return G
    raise GraphError(
        f"degree: no connected {degree}-regular graph on {n} nodes in {MAX_CONNECT_TRIES} samples"
    )


def _ring(n: int, rng: np.random.Generator) -> nx.Graph:
    """Cycle ``C_N`` (N >= 3)."""
    if n < 3:
        raise GraphError(f"num_agents: a ring needs at least 3 agents, got {n}")
    return nx.cycle_graph(n)


_GENERATORS: dict[str, Callable[..., nx.Graph]] = {
    "complete": lambda n, rng: nx.complete_graph(n),
    "ring": _ring,
    "path": lambda n, rng: nx.path_graph(n),
    "star": lambda n, rng: nx.star_graph(n - 1),
    "grid": _grid,
    "erdos_renyi": _erdos_renyi,
    "random_regular": _random_regular,
}
_PARAMS: dict[str, tuple[str, ...]] = {
    "grid": ("rows", "cols"),
    "erdos_renyi": ("p",),
    "random_regular": ("degree",),
}

GRAPH_KINDS: tuple[str, ...] = tuple(_GENERATORS)
"""Names accepted by :func:`make_graph` (besides a user ``networkx.Graph``)."""


def make_graph(
    kind: str | nx.Graph,
    num_agents: int,
    *,
    seed: SeedLike = 0,
    **params: Any,
) -> nx.Graph:
    """Build the agents' communication graph on nodes ``0..num_agents-1`` (DESIGN §3 "Topology").

    Kinds: ``"complete"``; ``"ring"`` (cycle, N >= 3); ``"path"``; ``"star"`` (node 0 is the
    centre); ``"grid"`` (params ``rows``, ``cols``, default the most square factorisation, node id
    ``r * cols + c``); ``"erdos_renyi"`` (param ``p``, default ``min(1, 2 ln N / N)``, resampled
    until connected, commeff.md §4.4); ``"random_regular"`` (param ``degree``, default 3,
    resampled until connected). A ``networkx.Graph`` is checked and relabelled by
    :func:`validate_graph`. Random kinds draw from ``seed`` (an int or a Generator); the other
    kinds ignore it. Unknown parameters raise :class:`GraphError`.
    """
    n = _as_int(num_agents, "num_agents", 1)
    if isinstance(kind, nx.Graph):
        if params:
            raise GraphError(
                f"params: got {sorted(params)}; expected no parameters for a user graph"
            )
        return validate_graph(kind, n)
    if not isinstance(kind, str) or kind not in _GENERATORS:
        raise GraphError(
            f"kind: unknown graph kind {kind!r}; expected one of {', '.join(GRAPH_KINDS)} "
            "or a networkx.Graph"
        )
    allowed = _PARAMS.get(kind, ())
    unknown = sorted(set(params) - set(allowed))
    if unknown:
        expected = ", ".join(allowed) if allowed else "no parameters"
        raise GraphError(f"params: unknown {unknown} for kind {kind!r}; expected {expected}")
    rng = _as_generator(seed)
    G = _GENERATORS[kind](n, rng, **params)
    return _from_edges(n, G.edges)


# --------------------------------------------------------------------------------------------
# graph facts
# --------------------------------------------------------------------------------------------


def edge_array(G: nx.Graph) -> np.ndarray:
    """Edges as an ``(E, 2)`` int64 array with ``u < v``, rows sorted lexicographically."""
    _num_nodes(G)
    e = np.array(list(G.edges), dtype=np.int64).reshape(-1, 2)
    e.sort(axis=1)
    return e[np.lexsort((e[:, 1], e[:, 0]))]


def neighbor_table(G: nx.Graph) -> tuple[np.ndarray, np.ndarray]:
    """Padded neighbour ids ``(N, Dmax)`` int64 (``-1`` padding, ascending) and degrees ``(N,)``.

    ``Dmax`` is the maximum degree, at least 1. Built from the edge list in O(|E| log |E|) time and
    O(N * Dmax) memory; no N x N array (used for large rings, gossip.md §1.4 count propagation).
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
                block[k, targets] = np.fromiter(lengths.values(), dtype=np.int64, count=len(lengths))
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

    ``d(j, i)`` of gossip.md §3 (Lemma 1) and ``sd`` of commeff.md §2.6; the ``-1`` entries mark
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
    """Diameter ``d_G`` of a connected graph (GIS needs ``d_G`` hops, commeff.md §2.4)."""
    return int(eccentricities(G).max())


def graph_centre(G: nx.Graph) -> int:
    """A centre of a connected graph: minimum eccentricity, lowest id on ties (commeff.md §2.6)."""
    return int(np.argmin(eccentricities(G)))


def laplacian(G: nx.Graph) -> np.ndarray:
    """Dense Laplacian ``L = D - A``, ``(N, N)`` float64 (gossip.md §1.4, dp-recsys.md §4.1)."""
    n = _num_nodes(G)
    e = edge_array(G)
    L = np.zeros((n, n), dtype=np.float64)
    L[e[:, 0], e[:, 1]] = -1.0
    L[e[:, 1], e[:, 0]] = -1.0
    L[np.arange(n), np.arange(n)] = -L.sum(axis=1)
    return L


def gossip_lambda2(G: nx.Graph) -> float:
    """Second-largest eigenvalue of the expected gossip matrix ``I - L/(2|E|)`` (gossip.md §1.4).

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


def power_graph(G: nx.Graph, gamma: int) -> nx.Graph:
    """Power graph ``G_gamma``: edge ``(i, j)`` iff ``1 <= d(i, j) <= gamma`` (linear.md §1.4)."""
    n = _num_nodes(G)
    gamma = _as_int(gamma, "gamma", 1)
    edges = (
        (i, j)
        for i in range(n)
        for j in nx.single_source_shortest_path_length(G, i, cutoff=gamma)
        if j > i
    )
    return _from_edges(n, edges)


def _mcs_order(G: nx.Graph, n: int) -> list[int]:
    """Maximum cardinality search visit order (lowest id on ties); reversed, a PEO if chordal."""
    weight = np.zeros(n, dtype=np.int64)
    visited = np.zeros(n, dtype=bool)
    order: list[int] = []
    for _ in range(n):
        v = int(np.argmax(np.where(visited, -1, weight)))
        visited[v] = True
        order.append(v)
        weight[list(G.adj[v])] += 1
    return order


def _perfect_elimination_order(G: nx.Graph, n: int) -> list[int] | None:
    """A perfect elimination ordering of ``G``, or ``None`` if ``G`` is not chordal."""
    peo = _mcs_order(G, n)[::-1]
    position = {v: k for k, v in enumerate(peo)}
    for v in peo:
        later = [u for u in G.adj[v] if position[u] > position[v]]
        if later:
            first = min(later, key=position.__getitem__)
            if any(u != first and u not in G.adj[first] for u in later):
                return None
    return peo


def _dsatur_complement_classes(H: nx.Graph, n: int) -> list[list[int]]:
    """Colour classes of DSATUR on the complement of ``H``, without building the complement.

    Same choices as ``networkx.greedy_color(complement(H), "DSATUR")`` on nodes ``0..n-1``: next
    node of maximum saturation, then maximum complement degree, then lowest id; smallest free
    colour. A colour class is a clique of ``H``. In ``H`` terms, ``v`` may join class ``c`` iff
    ``v`` is adjacent to every member of ``c`` ("full" on ``c``), and the saturation of ``v`` is
    the number of classes minus the number of classes ``v`` is full on. Only the nodes full on a
    class are stored (at most the degree of a member), so the cost is O(N^2 + |E| Dmax) instead of
    the O(N^2) edges of the complement.
    """
    degree = np.array([H.degree(v) for v in range(n)], dtype=np.int64)
    n_full = np.zeros(n, dtype=np.int64)
    done = np.zeros(n, dtype=bool)
    class_of = np.full(n, -1, dtype=np.int64)
    classes: list[list[int]] = []
    full_on: list[set[int]] = []
    never = (n + 1) ** 2
    for _ in range(n):
        v = int(np.argmin(np.where(done, never, n_full * (n + 1) + degree)))
        done[v] = True
        adjacent = H.adj[v]
        options = {int(class_of[u]) for u in adjacent if class_of[u] >= 0}
        options = {c for c in options if v in full_on[c]}
        if options:
            c = min(options)
            classes[c].append(v)
            kept = {u for u in full_on[c] if u in adjacent}
            for u in full_on[c] - kept:
                n_full[u] -= 1
            full_on[c] = kept
        else:
            c = len(classes)
            classes.append([v])
            full_on.append(set(adjacent))
            n_full[list(adjacent)] += 1
        class_of[v] = c
    return [sorted(members) for members in classes]


def clique_cover(G: nx.Graph) -> list[list[int]]:
    """Partition the nodes into cliques of ``G`` (linear.md §2.8; realized ``chi-bar``).

    General method, as linear.md §2.8 suggests: greedy DSATUR colouring of the complement (run on
    ``G`` itself, without materialising the dense complement); each colour class is a clique of
    ``G``. For chordal graphs (trees, paths and their powers
    ``P_M^gamma``, complete graphs) the exact method of Gavril (1972) is used instead: walk a
    perfect elimination ordering and open a new clique, made of the node and its still uncovered
    later neighbours, at each uncovered node. This is optimal for chordal graphs, so the cover of
    ``P_M^gamma`` has ``ceil(M/(gamma+1))`` cliques under any labelling (linear.md §7 item 6),
    which DSATUR alone does not guarantee.

    Deterministic. Each clique is sorted; the list is sorted by smallest member.
    """
    n = _num_nodes(G)
    H = _from_edges(n, edge_array(G))
    peo = _perfect_elimination_order(H, n)
    if peo is not None:
        position = {v: k for k, v in enumerate(peo)}
        covered = np.zeros(n, dtype=bool)
        cliques = []
        for v in peo:
            if covered[v]:
                continue
            members = [v] + [u for u in H.adj[v] if position[u] > position[v] and not covered[u]]
            covered[members] = True
            cliques.append(sorted(members))
    else:
        cliques = _dsatur_complement_classes(H, n)
    return sorted(cliques, key=lambda c: c[0])


# --------------------------------------------------------------------------------------------
# mixing matrices
# --------------------------------------------------------------------------------------------


def default_kappa(G: nx.Graph) -> float:
    """Default consensus step size ``kappa = d_max/(d_max + 1)`` (dp-recsys.md A13).

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

    dp-recsys.md §4.1-§4.2 and A13: the constants ``c0``, ``c_i`` need ``|lambda_p| < 1`` for
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
    """Consensus matrix ``P = I - (kappa/d_max) L`` ``(N, N)`` float64 (dp-recsys.md §4.1).

    ``G`` must be connected and ``0 < kappa <= 1``. ``P`` is symmetric, doubly stochastic and
    non-negative. Raises :class:`GraphError` naming ``kappa`` when
    ``max_{p>=2} |lambda_p(P)| >= 1 - 1e-9`` (A13; e.g. ``kappa = 1`` on an even cycle).
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


# --------------------------------------------------------------------------------------------
# Topology
# --------------------------------------------------------------------------------------------


def _read_only(a: np.ndarray) -> np.ndarray:
    a.setflags(write=False)
    return a


@dataclass(frozen=True, eq=False, init=False)
class Topology:
    """The agents' network: one connected graph, or disjoint components with one sink each.

    ``graph`` holds all N agents (ids ``0..N-1``). For a hybrid topology (commeff.md §1.3, §2.7)
    it is the disjoint union of the components, which occupy consecutive id ranges in order;
    otherwise there is a single component holding every agent. ``sinks[q]`` is the agent of
    component ``q`` that talks to the server: a centre of the component (minimum eccentricity
    inside it, lowest id on ties; commeff.md §2.6, FindSinkAgents). ``component_kind`` records the
    generator of the components of a hybrid topology (``None`` otherwise).

    The graph is stored as a frozen copy, and array-valued facts are cached and read-only.
    Build instances with :meth:`from_graph` or :meth:`hybrid`.
    """

    graph: nx.Graph
    kind: str
    components: tuple[tuple[int, ...], ...]
    component_kind: str | None = None

    def __init__(
        self,
        graph: nx.Graph,
        kind: str,
        components: Sequence[Sequence[int]],
        sinks: Sequence[int] | None = None,
        component_kind: str | None = None,
    ) -> None:
        """Check and freeze the topology. ``sinks=None``: each component's centre, computed
        only when :attr:`sinks` is first read (the lazy facts of docs/architecture.md)."""
        n = _num_nodes(graph)
        if n == 0:
            raise GraphError("graph: has no nodes; expected at least 1 node")
        if not isinstance(kind, str) or not kind:
            raise GraphError(f"kind: expected a non-empty str, got {kind!r}")
        object.__setattr__(self, "graph", graph)
        object.__setattr__(self, "kind", kind)
        object.__setattr__(self, "component_kind", component_kind)
        components = tuple(tuple(int(v) for v in c) for c in components)
        flat = [v for c in components for v in c]
        if not components or any(not c for c in components) or flat != list(range(n)):
            raise GraphError(
                "components: expected non-empty tuples of consecutive agent ids that together "
                f"list 0..{n - 1} in order"
            )
        component_of = np.repeat(np.arange(len(components)), [len(c) for c in components])
        e = edge_array(self.graph)
        if np.any(component_of[e[:, 0]] != component_of[e[:, 1]]):
            raise GraphError("graph: has edges between components; expected disjoint components")
        if nx.number_connected_components(self.graph) != len(components):
            raise GraphError("components: expected every component to be connected")
        if sinks is not None:
            sinks = tuple(int(s) for s in sinks)
            if len(sinks) != len(components) or any(
                s not in c for s, c in zip(sinks, components, strict=False)
            ):
                raise GraphError("sinks: expected one sink per component, inside its component")
            self.__dict__["sinks"] = sinks  # fills the cached property
        object.__setattr__(self, "graph", nx.freeze(_from_edges(n, e)))
        object.__setattr__(self, "components", components)

    # ---- constructors ----------------------------------------------------------------------

    @classmethod
    def from_graph(
        cls,
        kind_or_graph: str | nx.Graph,
        num_agents: int,
        seed: SeedLike = 0,
        **params: Any,
    ) -> Topology:
        """One connected graph from :func:`make_graph`; the sink is its centre (computed lazily).

        ``kind`` is the generator name, or ``"custom"`` for a user graph.
        """
        G = make_graph(kind_or_graph, num_agents, seed=seed, **params)
        kind = kind_or_graph if isinstance(kind_or_graph, str) else "custom"
        return cls(G, kind, (tuple(range(G.number_of_nodes())),))

    @classmethod
    def hybrid(
        cls,
        sizes: Sequence[int] | np.ndarray,
        component_graph: str | nx.Graph = "complete",
        seed: SeedLike = 0,
        **params: Any,
    ) -> Topology:
        """Disjoint components of the given sizes plus one sink each (commeff.md §1.3, §2.6-§2.7).

        Component ``q`` is ``make_graph(component_graph, sizes[q], seed=child_q, **params)`` where
        ``child_q`` is the ``q``-th Generator spawned from ``seed``. A component of size 1 is a
        single agent (whatever ``component_graph`` is) and is its own sink. ``kind`` is
        ``"hybrid"``; ``component_kind`` is the component generator (``"custom"`` for a graph).
        """
        if not isinstance(sizes, Sequence | np.ndarray) or isinstance(sizes, str) or not len(sizes):
            raise GraphError(f"sizes: expected a non-empty sequence of ints >= 1, got {sizes!r}")
        sizes = [_as_int(s, f"sizes[{q}]", 1) for q, s in enumerate(sizes)]
        children = _as_generator(seed).spawn(len(sizes))
        edges: list[tuple[int, int]] = []
        components = []
        offset = 0
        for size, child in zip(sizes, children, strict=True):
            if size > 1:
                Gq = make_graph(component_graph, size, seed=child, **params)
                edges.extend((u + offset, v + offset) for u, v in Gq.edges)
            components.append(tuple(range(offset, offset + size)))
            offset += size
        kind = component_graph if isinstance(component_graph, str) else "custom"
        return cls(_from_edges(offset, edges), "hybrid", tuple(components), None, kind)

    # ---- facts -----------------------------------------------------------------------------

    @property
    def num_agents(self) -> int:
        """Number of agents N."""
        return self.graph.number_of_nodes()

    @property
    def num_components(self) -> int:
        """Number of components Q (1 unless hybrid)."""
        return len(self.components)

    @property
    def component_sizes(self) -> tuple[int, ...]:
        """Sizes ``M_q`` of the components."""
        return tuple(len(c) for c in self.components)

    @cached_property
    def edges(self) -> np.ndarray:
        """:func:`edge_array` of the graph, read-only."""
        return _read_only(edge_array(self.graph))

    @cached_property
    def _neighbor_table(self) -> tuple[np.ndarray, np.ndarray]:
        table, degrees = neighbor_table(self.graph)
        return _read_only(table), _read_only(degrees)

    @property
    def neighbors(self) -> np.ndarray:
        """Padded neighbour ids ``(N, Dmax)`` (:func:`neighbor_table`), read-only."""
        return self._neighbor_table[0]

    @property
    def degrees(self) -> np.ndarray:
        """Degrees ``(N,)`` (:func:`neighbor_table`), read-only."""
        return self._neighbor_table[1]

    @cached_property
    def sinks(self) -> tuple[int, ...]:
        """The sink of every component: its centre (minimum eccentricity inside the component,
        lowest id on ties; commeff.md §2.6), unless given at construction. Computed on first use
        by BFS (O(N (N + |E|)) time, no N x N array)."""
        if self.num_components == 1:
            return (int(np.argmin(self._row_max)),)
        comp = self.component_of
        key = self._row_max * (self.num_agents + 1) + np.arange(self.num_agents)
        best = np.full(self.num_components, np.iinfo(np.int64).max, dtype=np.int64)
        np.minimum.at(best, comp, key)
        return tuple(int(k % (self.num_agents + 1)) for k in best)

    @cached_property
    def _row_max(self) -> np.ndarray:
        """Eccentricity of every agent inside its component ``(N,)`` (streamed BFS rows)."""
        if "hop_distances" in self.__dict__:
            return self.hop_distances.max(axis=1)
        return _row_max_distances(self.graph)

    @cached_property
    def hop_distances(self) -> np.ndarray:
        """Hop distances ``(N, N)``, ``-1`` across components (BFS never leaves a component).

        The one N x N fact, built only when read (flood channel, light-cone checks)."""
        return _read_only(hop_distances(self.graph))

    @cached_property
    def distance_to_sink(self) -> np.ndarray:
        """Hop distance of every agent to its component's sink ``(N,)`` int64, read-only
        (one BFS per sink, commeff.md §2.6-§2.7)."""
        sinks = np.asarray(self.sinks, dtype=np.int64)
        comp = self.component_of
        out = np.empty(self.num_agents, dtype=np.int64)
        for first, block in _distance_blocks(self.graph, sinks):
            q = np.arange(first, first + block.shape[0])
            members = np.isin(comp, q)
            out[members] = block[comp[members] - first, np.flatnonzero(members)]
        return _read_only(out)

    @cached_property
    def diameter(self) -> int:
        """Largest component diameter (0 for singleton components)."""
        return int(self._row_max.max())

    @cached_property
    def lambda2(self) -> float:
        """:func:`gossip_lambda2` for a single component with edges, else ``nan``."""
        if self.num_components != 1 or self.graph.number_of_edges() == 0:
            return math.nan
        return gossip_lambda2(self.graph)

    @cached_property
    def component_of(self) -> np.ndarray:
        """Component index of every agent ``(N,)`` int64, read-only."""
        sizes = np.array(self.component_sizes, dtype=np.int64)
        return _read_only(np.repeat(np.arange(self.num_components, dtype=np.int64), sizes))

    @cached_property
    def sink_eccentricities(self) -> np.ndarray:
        """Eccentricity of each sink inside its component ``(Q,)`` int64 (commeff.md §2.6)."""
        ecc = np.zeros(self.num_components, dtype=np.int64)
        np.maximum.at(ecc, self.component_of, self.distance_to_sink)
        return _read_only(ecc)

    def describe(self) -> dict[str, Any]:
        """Plain-Python facts for metadata and logs (``lambda2`` is ``None`` when undefined)."""
        lam = self.lambda2
        return {
            "kind": self.kind,
            "component_kind": self.component_kind,
            "num_agents": self.num_agents,
            "num_edges": self.graph.number_of_edges(),
            "diameter": self.diameter,
            "lambda2": None if math.isnan(lam) else lam,
            "num_components": self.num_components,
            "component_sizes": list(self.component_sizes),
            "sinks": list(self.sinks),
        }
