"""Lazy topology facts (docs/architecture.md "Topology facts"): built only on demand, streamed in
blocks, and equal to the eager all-pairs definitions on small graphs."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings

import fedbandit_env
from fedbandit_env import graphs
from fedbandit_env.graphs import Topology, gossip_lambda2, laplacian, validate_graph
from tests.test_graphs import connected_graphs


def _eager_distances(G: nx.Graph) -> np.ndarray:
    n = G.number_of_nodes()
    dist = np.full((n, n), -1, dtype=np.int64)
    for s, lengths in nx.all_pairs_shortest_path_length(G):
        for t, d in lengths.items():
            dist[s, t] = d
    return dist


def _eager_sinks(topo: Topology) -> tuple[int, ...]:
    out = []
    for comp in topo.components:
        sub = topo.graph.subgraph(comp)
        ecc = nx.eccentricity(sub) if len(comp) > 1 else {comp[0]: 0}
        out.append(min(comp, key=lambda v: (ecc[v], v)))
    return tuple(out)


TOPOLOGIES = [
    ("path", 9, {}),
    ("star", 7, {}),
    ("grid", 12, {}),
    ("ring", 11, {}),
    ("erdos_renyi", 15, {"p": 0.3}),
    ("random_regular", 12, {"degree": 3}),
]


@pytest.mark.parametrize(("kind", "n", "params"), TOPOLOGIES)
def test_lazy_facts_equal_eager(kind, n, params) -> None:
    topo = Topology.from_graph(kind, n, seed=2, **params)
    assert "sinks" not in topo.__dict__  # nothing computed at construction
    eager = _eager_distances(topo.graph)
    assert topo.sinks == _eager_sinks(topo)
    assert topo.diameter == nx.diameter(topo.graph)
    assert np.array_equal(topo.distance_to_sink, eager[topo.sinks[0]])
    assert topo.sink_eccentricities.tolist() == [eager[topo.sinks[0]].max()]
    assert np.array_equal(topo.hop_distances, eager)
    ecc = nx.eccentricity(topo.graph)
    assert graphs.eccentricities(topo.graph).tolist() == [ecc[v] for v in range(n)]


def test_lazy_hybrid_facts_equal_eager() -> None:
    topo = Topology.hybrid([5, 1, 7, 4], "erdos_renyi", seed=3, p=0.5)
    eager = _eager_distances(topo.graph)
    sinks = _eager_sinks(topo)
    assert topo.sinks == sinks
    assert np.array_equal(
        topo.distance_to_sink, eager[np.array(sinks)[topo.component_of], np.arange(topo.num_agents)]
    )
    want = [eager[s, list(c)].max() for s, c in zip(sinks, topo.components, strict=True)]
    assert topo.sink_eccentricities.tolist() == want
    assert topo.diameter == eager.max()


@settings(max_examples=40, deadline=None, derandomize=True)
@given(connected_graphs())
def test_prop_blocked_bfs_equals_networkx(G: nx.Graph) -> None:
    H = validate_graph(G)
    eager = _eager_distances(H)
    assert np.array_equal(graphs.hop_distances(H), eager)
    old = graphs.BFS_BLOCK_ENTRIES
    try:
        graphs.BFS_BLOCK_ENTRIES = 5  # blocks of a single row or a few
        assert graphs.eccentricities(H).tolist() == eager.max(axis=1).tolist()
        assert np.array_equal(
            graphs.distances_from(H, [0, H.number_of_nodes() - 1]), eager[[0, -1]]
        )
    finally:
        graphs.BFS_BLOCK_ENTRIES = old


def test_networkx_fallback_equals_scipy(monkeypatch) -> None:
    G = Topology.hybrid([6, 9], "erdos_renyi", seed=1, p=0.4).graph
    fast = graphs.hop_distances(G)
    monkeypatch.setattr(graphs, "_sparse_adjacency", lambda G, n: None)
    assert np.array_equal(graphs.hop_distances(G), fast)
    assert np.array_equal(fast, _eager_distances(G))


@pytest.mark.parametrize("kind", ["path", "grid", "erdos_renyi", "complete"])
def test_sparse_lambda2_equals_dense(kind, monkeypatch) -> None:
    G = graphs.make_graph(kind, 30, seed=5)
    dense = gossip_lambda2(G)
    a = np.linalg.eigvalsh(laplacian(G))[1]
    assert graphs._sparse_algebraic_connectivity(G, 30) == pytest.approx(a, rel=1e-9, abs=1e-12)
    monkeypatch.setattr(graphs, "DENSE_SPECTRUM_MAX", 0)
    assert gossip_lambda2(G) == pytest.approx(dense, rel=1e-12)


def test_ring_env_builds_and_steps_without_all_pairs_facts(monkeypatch) -> None:
    def boom(*args, **kwargs):
        raise AssertionError("an all-pairs fact was computed")

    monkeypatch.setattr(graphs, "_row_max_distances", boom)
    monkeypatch.setattr(graphs, "hop_distances", boom)
    monkeypatch.setattr(graphs, "eccentricities", boom)
    venv = fedbandit_env.make_vec(
        "FedBandit/Homogeneous-v0",
        num_runs=2,
        num_agents=40,
        num_arms=3,
        horizon=5,
        topology="ring",
        channels=("neighbors",),
    )
    obs, _ = venv.reset(seed=0)
    arms = np.zeros((2, 40), dtype=np.int64)
    venv.step(arms, {"neighbors": np.ones((2, 40, 3))})
    assert "sinks" not in venv.config.topology.__dict__
