"""Tests of fedbandit_env.graphs (topologies and graph facts; docs/gossip.md, docs/commeff.md,
docs/dp-recsys.md, docs/linear.md)."""

from __future__ import annotations

import dataclasses
import itertools
import math

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fedbandit_env.graphs import (
    GRAPH_KINDS,
    GraphError,
    Topology,
    check_mixing_spectrum,
    clique_cover,
    consensus_weights,
    default_kappa,
    diameter,
    eccentricities,
    edge_array,
    gossip_lambda2,
    graph_centre,
    hop_distances,
    laplacian,
    make_graph,
    metropolis_weights,
    neighbor_table,
    power_graph,
    validate_graph,
)

# --------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------


def edge_set(G: nx.Graph) -> set[tuple[int, int]]:
    return {(min(u, v), max(u, v)) for u, v in G.edges}


def assert_doubly_stochastic(W: np.ndarray) -> None:
    np.testing.assert_allclose(W, W.T, atol=1e-12)
    np.testing.assert_allclose(W.sum(axis=0), 1.0, atol=1e-12)
    np.testing.assert_allclose(W.sum(axis=1), 1.0, atol=1e-12)
    assert (W >= -1e-12).all()


def assert_clique_partition(G: nx.Graph, cover: list[list[int]]) -> None:
    flat = [v for c in cover for v in c]
    assert sorted(flat) == list(range(G.number_of_nodes()))
    for c in cover:
        assert c == sorted(c)
        assert all(G.has_edge(u, v) for u, v in itertools.combinations(c, 2))
    assert [c[0] for c in cover] == sorted(c[0] for c in cover)


@st.composite
def connected_graphs(draw: st.DrawFn) -> nx.Graph:
    """Random connected graph on 1..12 nodes: random spanning tree plus random extra edges."""
    n = draw(st.integers(1, 12))
    labels = draw(st.permutations(range(n)))
    G = nx.Graph()
    G.add_nodes_from(range(n))
    for i in range(1, n):
        G.add_edge(labels[i], labels[draw(st.integers(0, i - 1))])
    if n >= 2:
        pairs = st.tuples(st.integers(0, n - 1), st.integers(0, n - 1))
        G.add_edges_from((u, v) for u, v in draw(st.lists(pairs, max_size=2 * n)) if u != v)
    return G


# --------------------------------------------------------------------------------------------
# lambda2 (the gossip paper's settings, docs/gossip.md)
# --------------------------------------------------------------------------------------------

LAMBDA2_TABLE = [
    ("K3", make_graph("complete", 3), 0.5000),
    ("C3", make_graph("ring", 3), 0.5000),
    ("P3", make_graph("path", 3), 0.7500),
    ("star3", make_graph("star", 3), 0.7500),
    ("K10", make_graph("complete", 10), 0.8889),
    ("star10", make_graph("star", 10), 0.9444),
    ("Petersen", make_graph(nx.petersen_graph(), 10), 0.9333),
    ("C10", make_graph("ring", 10), 0.9809),
    ("grid2x5", make_graph("grid", 10, rows=2, cols=5), 0.9853),
    ("P10", make_graph("path", 10), 0.9946),
]


@pytest.mark.parametrize(
    ("name", "G", "expected"), LAMBDA2_TABLE, ids=[t[0] for t in LAMBDA2_TABLE]
)
def test_gossip_lambda2_reproduces_spec_table(name: str, G: nx.Graph, expected: float) -> None:
    assert round(gossip_lambda2(G), 4) == expected


def test_gossip_lambda2_edge_cases() -> None:
    assert gossip_lambda2(make_graph("complete", 2)) == pytest.approx(0.0, abs=1e-12)
    assert gossip_lambda2(nx.Graph([(0, 1), (2, 3)])) == 1.0
    with pytest.raises(GraphError, match="graph: has no edges"):
        gossip_lambda2(make_graph("complete", 1))


def test_gossip_lambda2_equals_second_eigenvalue_of_expected_matrix() -> None:
    G = make_graph("erdos_renyi", 9, seed=4)
    W = np.eye(9) - laplacian(G) / (2 * G.number_of_edges())
    assert gossip_lambda2(G) == pytest.approx(np.sort(np.linalg.eigvalsh(W))[-2], abs=1e-12)


# --------------------------------------------------------------------------------------------
# generators
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("n", [1, 2, 7])
def test_complete(n: int) -> None:
    G = make_graph("complete", n)
    assert sorted(G.nodes) == list(range(n))
    assert G.number_of_edges() == n * (n - 1) // 2
    assert all(d == n - 1 for _, d in G.degree)


@pytest.mark.parametrize("n", [3, 4, 11])
def test_ring(n: int) -> None:
    G = make_graph("ring", n)
    assert nx.is_connected(G) and G.number_of_edges() == n
    assert all(d == 2 for _, d in G.degree)
    assert diameter(G) == n // 2
    assert G.has_edge(0, n - 1)


@pytest.mark.parametrize("n", [1, 2, 6])
def test_path(n: int) -> None:
    G = make_graph("path", n)
    assert edge_set(G) == {(i, i + 1) for i in range(n - 1)}
    assert diameter(G) == n - 1


@pytest.mark.parametrize("n", [1, 2, 8])
def test_star(n: int) -> None:
    G = make_graph("star", n)
    assert G.degree(0) == n - 1
    assert all(G.degree(v) == 1 for v in range(1, n))
    assert graph_centre(G) == 0


@pytest.mark.parametrize(
    ("n", "params", "shape"),
    [
        (10, {}, (2, 5)),
        (12, {}, (3, 4)),
        (16, {}, (4, 4)),
        (7, {}, (1, 7)),
        (1, {}, (1, 1)),
        (12, {"rows": 2}, (2, 6)),
        (12, {"cols": 2}, (6, 2)),
        (12, {"rows": 6, "cols": 2}, (6, 2)),
    ],
)
def test_grid_shape_and_row_major_ids(n: int, params: dict, shape: tuple[int, int]) -> None:
    rows, cols = shape
    G = make_graph("grid", n, **params)
    assert G.number_of_edges() == rows * (cols - 1) + cols * (rows - 1)
    expected = {(r * cols + c, r * cols + c + 1) for r in range(rows) for c in range(cols - 1)}
    expected |= {(r * cols + c, (r + 1) * cols + c) for r in range(rows - 1) for c in range(cols)}
    assert edge_set(G) == expected
    assert max((d for _, d in G.degree), default=0) <= 4


@pytest.mark.parametrize("n", [1, 2, 30])
def test_erdos_renyi_connected(n: int) -> None:
    G = make_graph("erdos_renyi", n, seed=0)
    assert G.number_of_nodes() == n and nx.is_connected(G)


def test_erdos_renyi_p_one_is_complete() -> None:
    assert edge_set(make_graph("erdos_renyi", 6, p=1.0)) == edge_set(make_graph("complete", 6))


@pytest.mark.parametrize(("n", "degree"), [(4, 3), (10, 3), (12, 4), (9, 2), (2, 1), (1, 0)])
def test_random_regular_is_connected_and_regular(n: int, degree: int) -> None:
    G = make_graph("random_regular", n, degree=degree, seed=1)
    assert nx.is_connected(G)
    assert all(d == degree for _, d in G.degree)


def test_default_random_regular_degree_is_three() -> None:
    assert {d for _, d in make_graph("random_regular", 10, seed=3).degree} == {3}


@pytest.mark.parametrize(("kind", "params"), [("erdos_renyi", {"p": 0.3}), ("random_regular", {})])
def test_random_kinds_deterministic_per_seed(kind: str, params: dict) -> None:
    a = edge_set(make_graph(kind, 16, seed=7, **params))
    assert a == edge_set(make_graph(kind, 16, seed=7, **params))
    assert a == edge_set(make_graph(kind, 16, seed=np.random.default_rng(7), **params))
    others = [edge_set(make_graph(kind, 16, seed=s, **params)) for s in range(8, 12)]
    assert any(o != a for o in others)


def test_user_graph_relabelled_in_sorted_order() -> None:
    G = nx.Graph([("c", "b"), ("b", "a")])
    H = make_graph(G, 3)
    assert edge_set(H) == {(0, 1), (1, 2)}
    assert list(H.nodes) == [0, 1, 2]
    assert validate_graph(nx.Graph([(10, 30), (30, 20)])).has_edge(1, 2)
    assert validate_graph(nx.Graph([(10, 30), (30, 20)])).has_edge(0, 2)


def test_results_are_simple_undirected_graphs() -> None:
    for kind in GRAPH_KINDS:
        G = make_graph(kind, 12, seed=0)
        assert type(G) is nx.Graph
        assert list(G.nodes) == list(range(12))
        assert nx.number_of_selfloops(G) == 0


def test_validate_graph_accepts_single_node() -> None:
    G = nx.Graph()
    G.add_node("only")
    assert list(validate_graph(G, 1).nodes) == [0]


# --------------------------------------------------------------------------------------------
# errors
# --------------------------------------------------------------------------------------------

_SELF_LOOP = nx.Graph([(0, 1), (1, 1)])
_MULTI = nx.MultiGraph([(0, 1), (0, 1)])


@pytest.mark.parametrize(
    ("build", "pattern"),
    [
        (lambda: make_graph(nx.Graph([(0, 1), (2, 3)]), 4), r"graph: is disconnected \(2 comp"),
        (lambda: validate_graph(_SELF_LOOP), "graph: has 1 self-loop"),
        (lambda: validate_graph(nx.DiGraph([(0, 1)])), "graph: is directed"),
        (lambda: validate_graph(_MULTI), "graph: is a multigraph"),
        (lambda: validate_graph(nx.Graph()), "graph: has no nodes"),
        (lambda: validate_graph([(0, 1)]), "graph: expected a networkx.Graph"),
        (lambda: make_graph(nx.path_graph(3), 4), "graph: has 3 nodes; expected num_agents = 4"),
        (lambda: make_graph(nx.path_graph(3), 3, p=0.5), "params"),
        (lambda: make_graph("hypercube", 4), "kind: unknown graph kind 'hypercube'.*complete"),
        (lambda: make_graph("grid", 10, rows=3, cols=4), "rows, cols: grid 3x4"),
        (lambda: make_graph("grid", 10, rows=3), "rows: 3 does not divide"),
        (lambda: make_graph("grid", 10, cols=4), "cols: 4 does not divide"),
        (lambda: make_graph("random_regular", 7, degree=3), "degree: .* is odd"),
        (lambda: make_graph("random_regular", 4, degree=4), "degree: got 4; expected degree < "),
        (lambda: make_graph("random_regular", 6, degree=1), "degree: .* never connected"),
        (lambda: make_graph("erdos_renyi", 5, p=1.5), r"p: expected a probability in \[0, 1\]"),
        (lambda: make_graph("erdos_renyi", 5, p=0.0), "p: no connected G"),
        (lambda: make_graph("ring", 2), "num_agents: a ring needs at least 3"),
        (lambda: make_graph("path", 0), "num_agents: expected an int >= 1"),
        (lambda: make_graph("path", 2.0), "num_agents: expected an int"),
        (lambda: make_graph("path", True), "num_agents: expected an int"),
        (lambda: make_graph("ring", 5, degree=2), r"params: unknown \['degree'\]"),
        (lambda: make_graph("erdos_renyi", 5, seed=-1), "seed: expected an int >= 0"),
        (lambda: make_graph("erdos_renyi", 5, seed="x"), "seed: expected an int"),
        (lambda: power_graph(make_graph("path", 4), 0), "gamma: expected an int >= 1"),
        (lambda: hop_distances(nx.path_graph([1, 2, 3])), "graph: nodes are not 0..N-1"),
        (lambda: diameter(nx.Graph([(0, 1), (2, 3)])), "graph: is disconnected"),
        (lambda: consensus_weights(make_graph("ring", 5), 0.0), r"kappa: expected .* \(0, 1\]"),
        (lambda: consensus_weights(make_graph("ring", 5), 1.5), "kappa: expected"),
        (lambda: consensus_weights(make_graph("ring", 5), True), "kappa: expected"),
        (lambda: consensus_weights(make_graph("ring", 20), 1.0), "kappa: kappa = 1.0 gives"),
        (lambda: consensus_weights(nx.Graph([(0, 1), (2, 3)]), 0.5), "graph: is disconnected"),
        (lambda: check_mixing_spectrum(np.array([[0.5, 0.5], [0.0, 1.0]])), "P: is not symmetric"),
        (lambda: check_mixing_spectrum(np.eye(2)), r"P: has max_\(p>=2\)"),
        (lambda: Topology.hybrid([]), "sizes: expected a non-empty sequence"),
        (lambda: Topology.hybrid([3, 0]), r"sizes\[1\]: expected an int >= 1"),
        (lambda: Topology.hybrid(5), "sizes: expected a non-empty sequence"),
        (lambda: Topology.hybrid([3, 2], "ring"), "num_agents: a ring needs at least 3"),
    ],
)
def test_bad_inputs_raise_graph_error_naming_the_field(build, pattern: str) -> None:
    with pytest.raises(GraphError, match=pattern):
        build()


def test_graph_error_is_value_error() -> None:
    with pytest.raises(ValueError, match="kind"):
        make_graph("nope", 3)


# --------------------------------------------------------------------------------------------
# distances, tables, power graphs
# --------------------------------------------------------------------------------------------

FIXED_GRAPHS = [
    make_graph("path", 7),
    make_graph("ring", 9),
    make_graph("grid", 12),
    make_graph("star", 6),
    make_graph(nx.petersen_graph(), 10),
    make_graph("erdos_renyi", 15, seed=2),
    make_graph("complete", 1),
]


@pytest.mark.parametrize("G", FIXED_GRAPHS)
def test_hop_distances_agree_with_networkx(G: nx.Graph) -> None:
    D = hop_distances(G)
    assert D.dtype == np.int64
    for i, lengths in nx.all_pairs_shortest_path_length(G):
        for j, d in lengths.items():
            assert D[i, j] == d
    assert diameter(G) == (nx.diameter(G) if G.number_of_nodes() > 1 else 0)
    ecc = nx.eccentricity(G) if G.number_of_nodes() > 1 else {0: 0}
    assert eccentricities(G).tolist() == [ecc[v] for v in range(G.number_of_nodes())]


def test_hop_distances_unreachable_is_minus_one() -> None:
    D = hop_distances(nx.Graph([(0, 1), (2, 3)]))
    assert D[0, 2] == -1 and D[3, 1] == -1 and D[0, 1] == 1


@pytest.mark.parametrize(("n", "centre"), [(5, 2), (4, 1), (1, 0)])
def test_graph_centre_of_path_lowest_id_on_ties(n: int, centre: int) -> None:
    assert graph_centre(make_graph("path", n)) == centre


@pytest.mark.parametrize("G", FIXED_GRAPHS)
def test_neighbor_table_round_trips_to_edge_set(G: nx.Graph) -> None:
    table, degrees = neighbor_table(G)
    assert table.dtype == np.int64 and degrees.dtype == np.int64
    assert table.shape == (G.number_of_nodes(), max(1, degrees.max()))
    rebuilt = {(min(i, j), max(i, j)) for i, row in enumerate(table) for j in row if j >= 0}
    assert rebuilt == edge_set(G)
    assert degrees.tolist() == [G.degree(v) for v in range(G.number_of_nodes())]
    assert edge_set(G) == {tuple(e) for e in edge_array(G).tolist()}


def test_neighbor_table_single_node_and_large_ring() -> None:
    table, degrees = neighbor_table(make_graph("complete", 1))
    assert table.tolist() == [[-1]] and degrees.tolist() == [0]
    table, degrees = neighbor_table(make_graph("ring", 1000))
    assert table.shape == (1000, 2)
    assert table[0].tolist() == [1, 999] and table[500].tolist() == [499, 501]
    assert (degrees == 2).all()


def test_neighbor_table_padding_on_star() -> None:
    table, _ = neighbor_table(make_graph("star", 4))
    assert table.tolist() == [[1, 2, 3], [0, -1, -1], [0, -1, -1], [0, -1, -1]]


def test_edge_array_sorted_with_u_less_than_v() -> None:
    E = edge_array(nx.Graph([(3, 0), (2, 1), (1, 0), (0, 2)]))
    assert E.tolist() == [[0, 1], [0, 2], [0, 3], [1, 2]]
    assert edge_array(make_graph("complete", 1)).shape == (0, 2)


def test_laplacian() -> None:
    L = laplacian(make_graph("path", 3))
    assert L.tolist() == [[1, -1, 0], [-1, 2, -1], [0, -1, 1]]
    assert L.dtype == np.float64


@pytest.mark.parametrize("gamma", [1, 2, 3, 5])
@pytest.mark.parametrize("G", FIXED_GRAPHS[:6])
def test_power_graph_edges_are_pairs_within_gamma(G: nx.Graph, gamma: int) -> None:
    D = hop_distances(G)
    n = G.number_of_nodes()
    expected = {(i, j) for i in range(n) for j in range(i + 1, n) if 1 <= D[i, j] <= gamma}
    assert edge_set(power_graph(G, gamma)) == expected


# --------------------------------------------------------------------------------------------
# clique cover (docs/linear.md)
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("m", [1, 2, 5, 9, 17, 26])
def test_clique_cover_of_path_powers_is_optimal(m: int) -> None:
    for gamma in range(1, m + 1):
        H = power_graph(make_graph("path", m), gamma)
        cover = clique_cover(H)
        assert_clique_partition(H, cover)
        assert len(cover) == math.ceil(m / (gamma + 1))


def test_clique_cover_of_path_powers_with_shuffled_labels() -> None:
    rng = np.random.default_rng(0)
    for m, gamma in [(14, 1), (20, 3), (23, 2), (22, 4)]:
        labels = rng.permutation(m)
        P = nx.relabel_nodes(nx.path_graph(m), dict(enumerate(labels.tolist())))
        H = power_graph(validate_graph(P), gamma)
        cover = clique_cover(H)
        assert_clique_partition(H, cover)
        assert len(cover) == math.ceil(m / (gamma + 1))


@pytest.mark.parametrize(
    ("G", "size"),
    [
        (make_graph("complete", 6), 1),
        (make_graph("ring", 5), 3),
        (make_graph("ring", 8), 4),
        (make_graph("star", 5), 4),
        (make_graph("complete", 1), 1),
        (nx.Graph([(0, 1), (2, 3)]), 2),
    ],
)
def test_clique_cover_sizes(G: nx.Graph, size: int) -> None:
    cover = clique_cover(G)
    assert_clique_partition(G, cover)
    assert len(cover) == size


def test_clique_cover_is_deterministic() -> None:
    G = make_graph("erdos_renyi", 30, seed=5)
    assert clique_cover(G) == clique_cover(G.copy())


def test_clique_cover_fast_on_large_ring() -> None:
    cover = clique_cover(make_graph("ring", 1000))
    assert len(cover) == 500 and all(len(c) == 2 for c in cover)


# --------------------------------------------------------------------------------------------
# mixing matrices (docs/dp-recsys.md)
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kappa", "lam2", "lam_min"),
    [(2 / 3, 0.96737, -0.33333), (0.5, 0.97553, 0.0), (0.9, 0.95595, -0.8)],
)
def test_consensus_weights_on_cycle20_match_spec(kappa: float, lam2: float, lam_min: float) -> None:
    P = consensus_weights(make_graph("ring", 20), kappa)
    assert_doubly_stochastic(P)
    lam = np.sort(np.linalg.eigvalsh(P))[::-1]
    assert lam[0] == pytest.approx(1.0)
    assert lam[1] == pytest.approx(lam2, abs=1e-5)
    assert lam[-1] == pytest.approx(lam_min, abs=1e-5)
    assert check_mixing_spectrum(P) == pytest.approx(max(lam2, abs(lam_min)), abs=1e-5)


def test_consensus_rejects_kappa_one_on_even_cycle_but_not_odd() -> None:
    with pytest.raises(GraphError, match="kappa"):
        consensus_weights(make_graph("ring", 20), 1.0)
    assert_doubly_stochastic(consensus_weights(make_graph("ring", 5), 1.0))


def test_consensus_on_complete_graph_is_uniform_average() -> None:
    P = consensus_weights(make_graph("complete", 20), 19 / 20)
    np.testing.assert_allclose(P, np.full((20, 20), 1 / 20), atol=1e-12)


def test_default_kappa() -> None:
    assert default_kappa(make_graph("ring", 20)) == pytest.approx(2 / 3)
    assert default_kappa(make_graph("star", 10)) == pytest.approx(0.9)
    assert default_kappa(make_graph("complete", 1)) == 1.0
    assert consensus_weights(make_graph("complete", 1), 1.0).tolist() == [[1.0]]


def test_metropolis_weights_values() -> None:
    W = metropolis_weights(make_graph("star", 4))
    assert W[0, 1] == pytest.approx(0.25) and W[1, 0] == pytest.approx(0.25)
    assert W[1, 1] == pytest.approx(0.75) and W[0, 0] == pytest.approx(0.25)
    assert W[1, 2] == 0.0
    assert metropolis_weights(make_graph("path", 1)).tolist() == [[1.0]]


@pytest.mark.parametrize("G", FIXED_GRAPHS)
def test_weights_symmetric_doubly_stochastic(G: nx.Graph) -> None:
    assert_doubly_stochastic(metropolis_weights(G))
    assert_doubly_stochastic(consensus_weights(G, default_kappa(G)))


# --------------------------------------------------------------------------------------------
# Topology
# --------------------------------------------------------------------------------------------


def test_topology_from_graph() -> None:
    topo = Topology.from_graph("ring", 10)
    assert topo.kind == "ring" and topo.num_agents == 10
    assert topo.components == (tuple(range(10)),) and topo.sinks == (0,)
    assert topo.diameter == 5
    assert topo.lambda2 == pytest.approx(0.9809, abs=5e-5)
    assert topo.edges.shape == (10, 2) and topo.degrees.tolist() == [2] * 10
    assert topo.neighbors[0].tolist() == [1, 9]
    assert topo.component_of.tolist() == [0] * 10
    assert topo.sink_eccentricities.tolist() == [5]
    assert topo.describe() == {
        "kind": "ring",
        "component_kind": None,
        "num_agents": 10,
        "num_edges": 10,
        "diameter": 5,
        "lambda2": pytest.approx(0.9809, abs=5e-5),
        "num_components": 1,
        "component_sizes": [10],
        "sinks": [0],
    }


def test_topology_from_user_graph_and_sink_is_centre() -> None:
    topo = Topology.from_graph(nx.path_graph(["a", "b", "c", "d", "e"]), 5)
    assert topo.kind == "custom" and topo.sinks == (2,)
    with pytest.raises(GraphError, match="disconnected"):
        Topology.from_graph(nx.Graph([(0, 1), (2, 3)]), 4)


def test_hybrid_star_components_sinks_are_centres() -> None:
    topo = Topology.hybrid([4, 6, 1], "star")
    assert topo.kind == "hybrid" and topo.component_kind == "star"
    assert topo.components == ((0, 1, 2, 3), (4, 5, 6, 7, 8, 9), (10,))
    assert topo.sinks == (0, 4, 10)
    assert topo.sink_eccentricities.tolist() == [1, 1, 0]
    assert topo.component_of.tolist() == [0] * 4 + [1] * 6 + [2]
    assert topo.num_components == 3 and topo.component_sizes == (4, 6, 1)


def test_hybrid_path_components() -> None:
    topo = Topology.hybrid([5, 5, 3], "path")
    assert topo.sinks == (2, 7, 11)
    D = topo.hop_distances
    assert D[0, 4] == 4 and D[5, 9] == 4
    assert (D[:5, 5:] == -1).all() and (D[5:10, 10:] == -1).all() and (D[10:, :10] == -1).all()
    assert topo.diameter == 4
    assert math.isnan(topo.lambda2) and topo.describe()["lambda2"] is None
    assert not topo.graph.has_edge(4, 5)


def test_hybrid_singletons_and_complete() -> None:
    topo = Topology.hybrid([1] * 4, "ring")
    assert topo.graph.number_of_edges() == 0 and topo.sinks == (0, 1, 2, 3)
    assert topo.diameter == 0
    assert Topology.hybrid(np.array([2, 3]), "path").sinks == (0, 3)
    topo = Topology.hybrid([20] * 5)
    assert topo.graph.number_of_edges() == 5 * 190 and topo.sink_eccentricities.tolist() == [1] * 5


def test_hybrid_random_components_seeded() -> None:
    a = Topology.hybrid([12, 12], "erdos_renyi", seed=3, p=0.3)
    b = Topology.hybrid([12, 12], "erdos_renyi", seed=3, p=0.3)
    c = Topology.hybrid([12, 12], "erdos_renyi", seed=4, p=0.3)
    assert np.array_equal(a.edges, b.edges)
    assert not np.array_equal(a.edges, c.edges)
    first = {tuple(e) for e in a.edges.tolist() if e[0] < 12}
    second = {(u - 12, v - 12) for u, v in a.edges.tolist() if u >= 12}
    assert first != second
    for q, comp in enumerate(a.components):
        sub = a.graph.subgraph(comp)
        assert nx.is_connected(sub)
        ecc = nx.eccentricity(sub)
        assert a.sinks[q] == min(comp, key=lambda v: (ecc[v], v))


def test_topology_is_immutable() -> None:
    topo = Topology.from_graph("path", 4)
    with pytest.raises(dataclasses.FrozenInstanceError):
        topo.kind = "ring"  # type: ignore[misc]
    with pytest.raises(nx.NetworkXError):
        topo.graph.add_edge(0, 3)
    with pytest.raises(ValueError, match="read-only"):
        topo.hop_distances[0, 0] = 7
    assert topo.hop_distances is topo.hop_distances


def test_topology_direct_construction_is_checked() -> None:
    G = make_graph("path", 4)
    with pytest.raises(GraphError, match="sinks"):
        Topology(G, "path", ((0, 1, 2, 3),), (5,))
    with pytest.raises(GraphError, match="graph: has edges between components"):
        Topology(G, "hybrid", ((0, 1), (2, 3)), (0, 2))
    with pytest.raises(GraphError, match="components"):
        Topology(G, "path", ((0, 2, 1, 3),), (1,))


# --------------------------------------------------------------------------------------------
# property tests on small random connected graphs
# --------------------------------------------------------------------------------------------

PROPERTY = settings(max_examples=60, deadline=None)


@PROPERTY
@given(connected_graphs())
def test_prop_distances_metric(G: nx.Graph) -> None:
    D = hop_distances(validate_graph(G))
    n = D.shape[0]
    assert (D == D.T).all()
    assert (np.diag(D) == 0).all()
    assert (D[~np.eye(n, dtype=bool)] >= 1).all()
    assert (D[:, None, :] <= D[:, :, None] + D[None, :, :]).all()


@PROPERTY
@given(connected_graphs())
def test_prop_neighbor_table_consistent(G: nx.Graph) -> None:
    H = validate_graph(G)
    table, degrees = neighbor_table(H)
    assert ((table >= 0).sum(axis=1) == degrees).all()
    assert degrees.sum() == 2 * H.number_of_edges()
    for i, row in enumerate(table):
        real = row[: degrees[i]]
        assert (row[degrees[i] :] == -1).all()
        assert (np.diff(real) > 0).all()
        assert set(real.tolist()) == set(H.adj[i])


@PROPERTY
@given(connected_graphs())
def test_prop_weights_doubly_stochastic(G: nx.Graph) -> None:
    H = validate_graph(G)
    assert_doubly_stochastic(metropolis_weights(H))
    P = consensus_weights(H, default_kappa(H))
    assert_doubly_stochastic(P)
    assert check_mixing_spectrum(P) < 1.0


@PROPERTY
@given(connected_graphs(), st.integers(1, 4))
def test_prop_clique_cover_valid_and_no_worse_than_dsatur(G: nx.Graph, gamma: int) -> None:
    H = power_graph(validate_graph(G), gamma)
    cover = clique_cover(H)
    assert_clique_partition(H, cover)
    dsatur = nx.greedy_color(nx.complement(H), strategy="DSATUR")
    assert len(cover) <= len(set(dsatur.values()))
    if nx.is_chordal(H):
        _, independence = nx.max_weight_clique(nx.complement(H), weight=None)
        assert len(cover) == independence


@PROPERTY
@given(connected_graphs())
def test_prop_lambda2_in_unit_interval(G: nx.Graph) -> None:
    H = validate_graph(G)
    if H.number_of_nodes() >= 2:
        assert 0.0 <= gossip_lambda2(H) < 1.0
    assert graph_centre(H) == int(np.argmin(eccentricities(H)))
    assert Topology.from_graph(G, G.number_of_nodes()).diameter == diameter(H)
