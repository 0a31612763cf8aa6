"""Communication topologies of the agents and the graph facts the paper algorithms need.

Graphs are plain simple undirected :class:`networkx.Graph` objects whose nodes are the agent ids
``0..N-1``. Every public function here accepts such a graph; :func:`validate_graph` turns a user
graph into one. One module per concern:

* :mod:`~fedbandit_env.graphs.build`: the generators of the topology kinds, user graphs and power
  graphs ``G_gamma`` (docs/linear.md).
* :mod:`~fedbandit_env.graphs.facts`: hop distances ``d(j, i)`` (docs/gossip.md), diameter (GIS
  delay), eccentricities and graph centres (docs/commeff.md, FindSinkAgents).
* :mod:`~fedbandit_env.graphs.spectra`: the Laplacian and the expected gossip matrix
  ``I - L/(2|E|)``'s ``lambda2`` (docs/gossip.md).
* :mod:`~fedbandit_env.graphs.cliques`: clique covers (docs/linear.md).
* :mod:`~fedbandit_env.graphs.mixing`: the consensus matrix ``P = I - (kappa/d_max) L`` and the
  check ``max_{p>=2} |lambda_p(P)| < 1`` (docs/dp-recsys.md), Metropolis weights.
* :mod:`~fedbandit_env.graphs.topology`: :class:`Topology`, one connected graph or hybrid
  components with one sink each (docs/commeff.md), with lazily cached facts.

Every name lives here too. Setting a module-level name on this package (a tunable such as
``BFS_BLOCK_ENTRIES``, or a function replaced in a test) sets it in every submodule that uses it.

All randomness comes from a seed (``int``) or a :class:`numpy.random.Generator` passed in; there is
no global RNG.
"""

from __future__ import annotations

import sys
import types
from typing import Any

from fedbandit_env.graphs import base, build, cliques, facts, mixing, spectra, topology
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
    _require_connected,
)
from fedbandit_env.graphs.build import (
    _GENERATORS,
    _PARAMS,
    GRAPH_KINDS,
    MAX_CONNECT_TRIES,
    _erdos_renyi,
    _grid,
    _most_square,
    _random_regular,
    _ring,
    make_graph,
    power_graph,
    validate_graph,
)
from fedbandit_env.graphs.cliques import (
    _dsatur_complement_classes,
    _mcs_order,
    _perfect_elimination_order,
    clique_cover,
)
from fedbandit_env.graphs.facts import (
    BFS_BLOCK_ENTRIES,
    _distance_blocks,
    _row_max_distances,
    _sparse_adjacency,
    diameter,
    distances_from,
    eccentricities,
    edge_array,
    graph_centre,
    hop_distances,
    neighbor_table,
)
from fedbandit_env.graphs.mixing import (
    SPECTRAL_TOL,
    check_mixing_spectrum,
    consensus_weights,
    default_kappa,
    metropolis_weights,
)
from fedbandit_env.graphs.spectra import (
    DENSE_SPECTRUM_MAX,
    _sparse_algebraic_connectivity,
    gossip_lambda2,
    laplacian,
)
from fedbandit_env.graphs.topology import Topology, _read_only

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

_SUBMODULES = (base, build, facts, spectra, cliques, mixing, topology)
_REEXPORTED = (
    SeedLike,
    GraphTypeError,
    _as_generator,
    _as_int,
    _check_graph_type,
    _check_no_self_loops,
    _from_edges,
    _num_nodes,
    _require_connected,
    _GENERATORS,
    _PARAMS,
    MAX_CONNECT_TRIES,
    _erdos_renyi,
    _grid,
    _most_square,
    _random_regular,
    _ring,
    _dsatur_complement_classes,
    _mcs_order,
    _perfect_elimination_order,
    BFS_BLOCK_ENTRIES,
    _distance_blocks,
    _row_max_distances,
    _sparse_adjacency,
    SPECTRAL_TOL,
    DENSE_SPECTRUM_MAX,
    _sparse_algebraic_connectivity,
    _read_only,
)
"""Names of the single module this package replaced, kept importable from here."""


class _Package(types.ModuleType):
    """The package module: a name set on it is set in each submodule that defines or imports it,
    so the functions there (which look their globals up in their own module) see the new value."""

    def __setattr__(self, name: str, value: Any) -> None:
        for module in _SUBMODULES:
            if name in vars(module):
                setattr(module, name, value)
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
