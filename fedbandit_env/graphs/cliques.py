"""Clique covers of a graph (docs/linear.md): exact on chordal graphs, greedy
DSATUR on the complement otherwise."""

from __future__ import annotations

import networkx as nx
import numpy as np

from fedbandit_env.graphs.base import _from_edges, _num_nodes
from fedbandit_env.graphs.facts import edge_array


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
    """Partition the nodes into cliques of ``G`` (docs/linear.md; realized ``chi-bar``).

    General method, as docs/linear.md suggests: greedy DSATUR colouring of the complement (run on
    ``G`` itself, without materialising the dense complement); each colour class is a clique of
    ``G``. For chordal graphs (trees, paths and their powers
    ``P_M^gamma``, complete graphs) the exact method of Gavril (1972) is used instead: walk a
    perfect elimination ordering and open a new clique, made of the node and its still uncovered
    later neighbours, at each uncovered node. This is optimal for chordal graphs, so the cover of
    ``P_M^gamma`` has ``ceil(M/(gamma+1))`` cliques under any labelling (docs/linear.md),
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
