"""Graph construction: the generators of the topology kinds, user graphs, power graphs
(docs/environments.md; docs/commeff.md, docs/linear.md).

All randomness comes from a seed (``int``) or a :class:`numpy.random.Generator` passed in; there is
no global RNG.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import networkx as nx
import numpy as np

from fedbandit_env.graphs.base import (
    GraphError,
    GraphTypeError,
    SeedLike,
    _as_generator,
    _as_int,
    _check_graph_type,
    _check_no_self_loops,
    _from_edges,
    _num_nodes,
)
from fedbandit_env.validation import is_real

MAX_CONNECT_TRIES = 1000
"""Samples drawn by the random generators before giving up on a connected graph."""


def validate_graph(G: Any, num_agents: int | None = None) -> nx.Graph:
    """Check a user graph and return a copy relabelled to ``0..N-1`` (docs/environments.md).

    Requirements (docs/gossip.md, docs/commeff.md, docs/linear.md): an undirected simple
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
    """G(n, p) resampled until connected (docs/commeff.md); default ``p = min(1, 2 ln N / N)``."""
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
    """Build the agents' communication graph on nodes ``0..num_agents-1`` (docs/environments.md).

    Kinds: ``"complete"``; ``"ring"`` (cycle, N >= 3); ``"path"``; ``"star"`` (node 0 is the
    centre); ``"grid"`` (params ``rows``, ``cols``, default the most square factorisation, node id
    ``r * cols + c``); ``"erdos_renyi"`` (param ``p``, default ``min(1, 2 ln N / N)``, resampled
    until connected, docs/commeff.md); ``"random_regular"`` (param ``degree``, default 3,
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


def power_graph(G: nx.Graph, gamma: int) -> nx.Graph:
    """Power graph ``G_gamma``: edge ``(i, j)`` iff ``1 <= d(i, j) <= gamma`` (docs/linear.md)."""
    n = _num_nodes(G)
    gamma = _as_int(gamma, "gamma", 1)
    edges = (
        (i, j)
        for i in range(n)
        for j in nx.single_source_shortest_path_length(G, i, cutoff=gamma)
        if j > i
    )
    return _from_edges(n, edges)
