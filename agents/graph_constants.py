"""Graph constants ``c0`` and ``c_i`` of the DP-Dec-UCB index (Li, Song & Fragouli,
Lemma 2; docs/dp-recsys.md).

For a symmetric mixing matrix ``P`` with eigenvalues ``1 = lambda_1 >= ... >= lambda_M`` (sorted in
descending order) and orthonormal eigenvectors ``u_p`` (``numpy.linalg.eigh``):

* ``c0 = sqrt(M) * sum_{p>=2} |lambda_p| / (1 - |lambda_p|)`` (basis-free);
* ``c_i = M * sum_{p>=1} sum_{k>=2} |lambda_p lambda_k| / (1 - |lambda_p lambda_k|) * a_pk(i)``
  with ``w^d_pk = u_p^d u_k^d``, ``e_pk(i) = w^i_pk``, ``nu+_pk`` / ``nu-_pk`` the sums of the
  positive / negative ``w^d_pk`` over ``d``, and ``a_pk(i)`` = ``nu+ e``
  (``lambda_p lambda_k >= 0``, ``e >= 0``), ``nu- e`` (``lambda_p lambda_k >= 0``, ``e < 0``),
  ``max(|nu-|, nu+) |e|`` (``lambda_p lambda_k < 0``) — our repaired reading of the paper's
  Lemma 2, whose printed indicator makes ``nu+-`` degenerate (docs/dp-recsys.md, "Decisions").

``c_i`` depends on the eigenbasis when eigenvalues repeat (the cycle's do). ``mode="per_agent"``
(default) uses each agent's own value; ``mode="max"`` gives every agent ``max_i c_i``, which is
less sensitive to the LAPACK build. The loop over ``p`` runs once per reset, not per step.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fedbandit_env.graphs import check_mixing_spectrum

CI_MODES = ("per_agent", "max")


@dataclass(frozen=True)
class GraphConstants:
    """``c0``, ``c`` (M,) per agent and the sorted ``eigenvalues`` (M,) of ``P``."""

    c0: float
    c: np.ndarray
    eigenvalues: np.ndarray


def graph_constants(P: np.ndarray, kappa: float | None = None) -> GraphConstants:
    """``c0`` and ``c_i`` of a symmetric mixing matrix (raises ``GraphError`` naming ``kappa`` if
    ``max_{p>=2} |lambda_p| >= 1 - 1e-9``)."""
    check_mixing_spectrum(P, kappa=kappa)
    m = P.shape[0]
    lam, U = np.linalg.eigh(np.asarray(P, dtype=np.float64))
    order = np.argsort(lam)[::-1]
    lam, U = lam[order], U[:, order]
    rest = np.abs(lam[1:])
    c0 = float(np.sqrt(m) * np.sum(rest / (1.0 - rest)))
    c = np.zeros(m)
    for p in range(m):
        prod = lam[p] * lam[1:]  # (M-1,): lambda_p lambda_k, k >= 2
        weight = np.abs(prod) / (1.0 - np.abs(prod))
        w = U[:, p, None] * U[:, 1:]  # (M, M-1): w^d_pk, rows d
        nu_plus = np.where(w >= 0, w, 0.0).sum(axis=0)
        nu_minus = np.where(w <= 0, w, 0.0).sum(axis=0)
        a = np.where(
            prod[None, :] >= 0,
            np.where(w >= 0, nu_plus * w, nu_minus * w),
            np.maximum(np.abs(nu_minus), nu_plus) * np.abs(w),
        )  # (M, M-1): a_pk(i), rows i (e_pk(i) = w^i_pk)
        c += a @ weight
    return GraphConstants(c0, m * c, lam)
