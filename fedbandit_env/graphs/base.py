"""Errors and the cheap checks every graph function runs (graphs are simple undirected
``networkx.Graph`` objects on nodes ``0..N-1``; docs/gossip.md)."""

from __future__ import annotations

from typing import Any

import networkx as nx
import numpy as np

from fedbandit_env.validation import check_int

SeedLike = int | np.integer | np.random.Generator


class GraphError(ValueError):
    """A graph, a graph parameter or a topology is invalid; the message names the field."""


class GraphTypeError(GraphError, TypeError):
    """A graph parameter has the wrong type (also a TypeError)."""


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
    """Reject self-loops (the graphs are simple, docs/gossip.md)."""
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
