"""Graph constants c0, c_i of DP-Dec-UCB (Lemma 2; docs/dp-recsys.md): a reference table, the
cycle spectrum, the complete graph, and properties on random connected graphs."""

from __future__ import annotations

import math

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agents.graph_constants import graph_constants
from fedbandit_env.graphs import GraphError, consensus_weights

# reference table (M = 20): graph, kappa, lambda_2, lambda_M, c0, (c_i min, c_i max)
TABLE = [
    ("cycle", 2 / 3, 0.96737, -0.33333, 375.29, (102.6, 135.9)),
    ("cycle", 0.5, 0.97553, 0.0, 509.82, (137.9, 187.8)),
    ("cycle", 0.9, 0.95595, -0.8, 328.16, (114.3, 155.6)),
    ("complete", 19 / 20, 0.0, 0.0, 0.0, (0.0, 0.0)),
    # lambda_2 = ... = lambda_20: one 19-dimensional eigenspace, so c_i is entirely basis-dependent;
    # the reference "9 - 23" came from one LAPACK build (numpy 2.4.6 / OpenBLAS 0.3.31 gives
    # 6.4 - 19.7). Only the basis-free bound 0 <= c_i <= M^2 max_pk weight_pk is checked.
    ("complete", 0.5, 0.47368, 0.47368, 76.47, None),
    ("path", 2 / 3, 0.99179, -0.32513, 819.64, (127.4, 445.1)),
    ("star", 0.95, 0.95, 0.0, 1529.47, (0.0, 656.3)),
]
GRAPHS = {
    "cycle": nx.cycle_graph(20),
    "complete": nx.complete_graph(20),
    "path": nx.path_graph(20),
    "star": nx.star_graph(19),
}


@pytest.mark.parametrize(("graph", "kappa", "lam2", "lam_m", "c0", "c_range"), TABLE)
def test_reference_table_of_section_4_2(graph, kappa, lam2, lam_m, c0, c_range):
    g = graph_constants(consensus_weights(GRAPHS[graph], kappa), kappa=kappa)
    assert g.eigenvalues[0] == pytest.approx(1.0)
    assert g.eigenvalues[1] == pytest.approx(lam2, abs=5e-6)
    assert g.eigenvalues[-1] == pytest.approx(lam_m, abs=5e-6)
    assert g.c0 == pytest.approx(c0, abs=0.005)
    if c_range is None:
        lam = np.abs(g.eigenvalues)
        prod = lam[:, None] * lam[None, 1:]
        bound = len(lam) ** 2 * np.max(prod / (1 - prod))  # |nu| <= 1, sum_p |u_p^i| <= sqrt(M)
        assert (g.c >= 0).all() and (g.c <= bound).all()
        return
    # c_i is basis-dependent; the ranges are numpy eigh's, a loose check only
    assert g.c.min() == pytest.approx(c_range[0], abs=0.5 + 0.05 * c_range[0])
    assert g.c.max() == pytest.approx(c_range[1], abs=0.5 + 0.05 * c_range[1])


def test_star_hub_constant_is_zero():
    g = graph_constants(consensus_weights(GRAPHS["star"], 0.95), kappa=0.95)
    assert g.c[0] == pytest.approx(0.0, abs=1e-9) and (g.c[1:] > 100).all()


def test_cycle_spectrum_formula():
    kappa, m = 0.6, 12
    g = graph_constants(consensus_weights(nx.cycle_graph(m), kappa))
    expected = np.sort(1 - kappa * (1 - np.cos(2 * np.pi * np.arange(m) / m)))[::-1]
    np.testing.assert_allclose(g.eigenvalues, expected, atol=1e-12)
    rest = np.abs(expected[1:])
    assert g.c0 == pytest.approx(math.sqrt(m) * np.sum(rest / (1 - rest)), rel=1e-10)


def test_bipartite_kappa_one_rejected_naming_kappa():
    with pytest.raises(GraphError, match="kappa"):
        graph_constants(np.eye(4) - 0.5 * nx.laplacian_matrix(nx.cycle_graph(4)).toarray(), 1.0)


@settings(max_examples=30, deadline=None)
@given(
    n=st.integers(2, 12),
    p=st.floats(0.2, 1.0),
    kappa=st.floats(0.05, 0.95),
    seed=st.integers(0, 10_000),
)
def test_properties_on_random_connected_graphs(n, p, kappa, seed):
    G = nx.gnp_random_graph(n, p, seed=seed)
    G.add_edges_from((i, i + 1) for i in range(n - 1))  # connected
    g = graph_constants(consensus_weights(G, kappa), kappa=kappa)
    assert g.c0 >= 0 and np.all(g.c >= -1e-9)
    # c0 is basis-free: the same from the eigenvalues alone
    lam = np.sort(np.linalg.eigvalsh(consensus_weights(G, kappa)))[::-1]
    rest = np.abs(lam[1:])
    assert g.c0 == pytest.approx(math.sqrt(n) * np.sum(rest / (1 - rest)), rel=1e-9, abs=1e-9)
    # relabelling the agents permutes c_i when the spectrum is simple (basis unique up to sign)
    if np.all(np.diff(lam) < -1e-6):
        perm = np.random.default_rng(seed).permutation(n)
        H = nx.relabel_nodes(G, dict(enumerate(perm)))
        h = graph_constants(consensus_weights(H, kappa), kappa=kappa)
        np.testing.assert_allclose(h.c[perm], g.c, rtol=1e-6, atol=1e-6)
