"""The agents' network as one immutable object with lazily computed, cached facts
(docs/commeff.md; docs/architecture.md, lazy facts)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import networkx as nx
import numpy as np

from fedbandit_env.graphs.base import (
    GraphError,
    SeedLike,
    _as_generator,
    _as_int,
    _from_edges,
    _num_nodes,
)
from fedbandit_env.graphs.build import make_graph
from fedbandit_env.graphs.facts import (
    _distance_blocks,
    _row_max_distances,
    edge_array,
    hop_distances,
    neighbor_table,
)
from fedbandit_env.graphs.spectra import gossip_lambda2


def _read_only(a: np.ndarray) -> np.ndarray:
    a.setflags(write=False)
    return a


@dataclass(frozen=True, eq=False, init=False)
class Topology:
    """The agents' network: one connected graph, or disjoint components with one sink each.

    ``graph`` holds all N agents (ids ``0..N-1``). For a hybrid topology (docs/commeff.md)
    it is the disjoint union of the components, which occupy consecutive id ranges in order;
    otherwise there is a single component holding every agent. ``sinks[q]`` is the agent of
    component ``q`` that talks to the server: a centre of the component (minimum eccentricity
    inside it, lowest id on ties; docs/commeff.md, FindSinkAgents). ``component_kind`` records the
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
        """Disjoint components of the given sizes plus one sink each (docs/commeff.md).

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
        lowest id on ties; docs/commeff.md), unless given at construction. Computed on first use
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
        (one BFS per sink, docs/commeff.md)."""
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
        """Eccentricity of each sink inside its component ``(Q,)`` int64 (docs/commeff.md)."""
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
