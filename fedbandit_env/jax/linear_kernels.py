"""The linear-algebra kernels of the JAX linear learners (docs/linear.md, docs/jax.md): one
Cholesky factor per agent, log-determinants relative to the regularizer, the optimistic choice
``argmax <x, theta> + beta ||x||_{V^-1}`` (OFUL, Abbasi-Yadkori et al. 2011; Dubey & Pentland
2020, Algorithm 1) and the last pull's feature vector. Shared by :mod:`baselines.jax.linucb` and
:mod:`agents.jax.fed_lin_ucb` (agents never import baselines).

Why no LAPACK: the factorizations, solves and eigendecompositions are written in plain XLA
operations (loops over the small, static d), not ``jnp.linalg`` / ``jax.lax.linalg``. On CPU
those call jaxlib's LAPACK FFI kernels, which since jaxlib 0.10.0 (``jax::ParallelBatchMap`` in
jaxlib/cpu/lapack_kernels.cc, still in 0.11.0) split a batch of more than about 2e5 flops into
chunks on XLA:CPU's intra-op thread pool and block the calling pool worker until they are done.
When as many such calls run at once as the pool has threads (XLA's thunk executor runs
independent calls in parallel: the solves of :func:`ucb_choice`, the Cholesky factors of V, W and
the sync trigger), every worker waits for chunks that no worker is free to run: a deadlock,
e.g. private ``fed_lin_ucb`` with B = 100 runs of M = 100 agents on a 2-core machine (both
workers in ``lapack_strsm_ffi``; 10 hangs in 15 tries, none in 6 on one core, where the pool has
one thread and the kernels run inline). Upstream later compiled that path out of open-source
builds (jax-ml/jax commit 859992407d); plain XLA operations do not block a pool worker, on any
jaxlib. The rounding differs from LAPACK's in the last bits (float32 throughout)."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from fedbandit_env.jax.types import PULL, Observation
from fedbandit_env.linear_kernels import confidence_radius
from fedbandit_env.scores import note_scores


def cholesky(V: jnp.ndarray) -> jnp.ndarray:
    """Lower Cholesky factors of symmetric positive-definite ``V`` (..., d, d): outer-product
    elimination, one column a step of a ``fori_loop`` (only the lower triangle of V is read).
    Not positive definite: NaN or inf from the first non-positive pivot on."""
    d = V.shape[-1]
    idx = jnp.arange(d)

    def column(j, A):
        col = A[..., :, j]
        pivot = jnp.sqrt(col[..., j, None])
        L_j = jnp.where(idx > j, col / pivot, jnp.where(idx == j, pivot, 0.0))
        trailing = (idx > j)[:, None] & (idx > j)[None, :]
        A = jnp.where(trailing, A - L_j[..., :, None] * L_j[..., None, :], A)
        return jnp.where(idx == j, L_j[..., :, None], A)

    return jnp.tril(jax.lax.fori_loop(0, d, column, V))


def triangular_solve(chol: jnp.ndarray, rhs: jnp.ndarray, transpose: bool = False):
    """``L^-1 rhs`` (or ``L^-T rhs`` with ``transpose``) for lower-triangular ``chol`` L
    (..., d, d) and ``rhs`` (..., d, k): forward (back) substitution over the static d, each
    step solving one row and updating only the rows not yet solved."""
    d = chol.shape[-1]
    rows: list = [None] * d
    rest = rhs  # the rows not yet solved, in solving order
    for i in range(d - 1, -1, -1) if transpose else range(d):
        z_i = rest[..., -1 if transpose else 0, :] / chol[..., i, i, None]
        rows[i] = z_i
        if transpose:  # the rows above i: z_k -= L_ik z_i
            rest, coupling = rest[..., :-1, :], chol[..., i, :i]
        else:  # the rows below i: z_k -= L_ki z_i
            rest, coupling = rest[..., 1:, :], chol[..., i + 1 :, i]
        rest = rest - coupling[..., :, None] * z_i[..., None, :]
    return jnp.stack(rows, axis=-2)


def cholesky_update(chol: jnp.ndarray, x: jnp.ndarray) -> jnp.ndarray:
    """The lower Cholesky factor of ``L L^T + x x^T`` from ``chol`` L (..., d, d) and ``x``
    (..., d): the rank-1 update of Golub & Van Loan (Section 6.5.4; LINPACK's ``dchud``), one
    column a step of a ``fori_loop``, O(d^2) per matrix against the O(d^3) of a new factor.
    Each step rotates ``(L_jj, w_j)`` onto ``(r, 0)``, ``r = sqrt(L_jj^2 + w_j^2)``, and carries
    the rest of ``w`` into the next column; ``x = 0`` leaves L bit for bit (c = 1, s = 0)."""
    d = chol.shape[-1]
    idx = jnp.arange(d)

    def column(j, carry):
        L, w = carry
        col, w_j = L[..., :, j], w[..., j]
        pivot = col[..., j]
        r = jnp.sqrt(pivot * pivot + w_j * w_j)
        c, s = (r / pivot)[..., None], (w_j / pivot)[..., None]
        below = idx > j
        col = jnp.where(below, (col + s * w) / c, jnp.where(idx == j, r[..., None], col))
        w = jnp.where(below, c * w - s * col, w)
        return L.at[..., :, j].set(col), w

    return jax.lax.fori_loop(0, d, column, (chol, x))[0]


def logdet_plus_rank_one(chol: jnp.ndarray, x: jnp.ndarray, scale: float | jnp.ndarray):
    """``ln det(A + x x^T) - d ln scale`` from the Cholesky factor L of A (..., d, d), by the
    matrix determinant lemma ``det(A + x x^T) = det(A) (1 + x^T A^-1 x)`` with ``x^T A^-1 x =
    ||L^-1 x||^2`` (one forward substitution): :func:`logdet_over` of L plus ``ln(1 +
    ||L^-1 x||^2)``, equal to :func:`logdet_over` of a new factor of ``A + x x^T`` up to
    rounding."""
    z = triangular_solve(chol, x[..., None])[..., 0]
    return logdet_over(chol, scale) + jnp.log1p((z * z).sum(axis=-1))


def _round_robin(n: int) -> np.ndarray:
    """The slot permutation of the round-robin ("circle") schedule of even ``n`` indices: with
    the pairs (0, 1), (2, 3), ... of a round, reordering by it ``n - 1`` times pairs every two
    indices exactly once and restores the order (index 0 stays, the others rotate)."""
    cycle = [1] + [0] * (n - 2)  # slot of each rotating position
    for i in range(1, n // 2):
        cycle[i], cycle[n - 1 - i] = 2 * i, 2 * i + 1
    perm = np.arange(n)
    for i in range(n - 1):
        perm[cycle[(i + 1) % (n - 1)]] = cycle[i]
    return perm


def _jacobi_rotation(app, aqq, apq) -> tuple[jnp.ndarray, jnp.ndarray]:
    """(c, s) of the rotation ``[[c, s], [-s, c]]`` that zeroes ``a_pq`` (Golub & Van Loan,
    Algorithm 8.5.1, the smaller angle); the identity where ``a_pq = 0``."""
    tau = (aqq - app) / (2.0 * apq)
    t = jnp.where(tau >= 0, 1.0, -1.0) / (jnp.abs(tau) + jnp.sqrt(1.0 + tau * tau))
    t = jnp.where(apq == 0, 0.0, t)
    c = jax.lax.rsqrt(1.0 + t * t)
    return c, t * c


def _rotate_rows(M: jnp.ndarray, c: jnp.ndarray, s: jnp.ndarray) -> jnp.ndarray:
    """``J^T M`` for J the rotations ``[[c_k, s_k], [-s_k, c_k]]`` of the row pairs (2k, 2k+1)."""
    p, q = M[..., 0::2, :], M[..., 1::2, :]
    c, s = c[..., None], s[..., None]
    return jnp.stack([c * p - s * q, s * p + c * q], axis=-2).reshape(M.shape)


def symmetric_eigen(A: jnp.ndarray) -> tuple[jnp.ndarray, jnp.ndarray]:
    """Eigenvalues (..., d) and orthonormal eigenvectors (columns, (..., d, d)) of symmetric
    ``A`` (..., d, d), in no particular order: parallel cyclic Jacobi (Golub & Van Loan, 8.5.4)
    with the round-robin schedule, n/2 disjoint rotations a round, ``ceil(log2 n) + 3`` sweeps
    for n = d rounded up to even (one more than the most that random symmetric and Gram matrices
    needed in float32, d <= 64). An odd d is padded with a zero row and column, which no rotation
    touches."""
    d = A.shape[-1]
    n = d + d % 2
    A = jnp.pad(A, [(0, 0)] * (A.ndim - 2) + [(0, n - d), (0, n - d)])
    perm = _round_robin(n)
    sweeps = math.ceil(math.log2(n)) + 3

    def round_(_, AV):
        A, V = AV
        diag = jnp.diagonal(A, axis1=-2, axis2=-1)
        apq = jnp.diagonal(A, offset=1, axis1=-2, axis2=-1)[..., 0::2]
        c, s = _jacobi_rotation(diag[..., 0::2], diag[..., 1::2], apq)
        A = jnp.swapaxes(_rotate_rows(jnp.swapaxes(_rotate_rows(A, c, s), -1, -2), c, s), -1, -2)
        V = jnp.swapaxes(_rotate_rows(jnp.swapaxes(V, -1, -2), c, s), -1, -2)
        return A[..., perm, :][..., :, perm], V[..., :, perm]

    V = jnp.broadcast_to(jnp.eye(n, dtype=A.dtype), A.shape)
    A, V = jax.lax.fori_loop(0, sweeps * (n - 1), round_, (A, V))  # n - 1 rounds: order restored
    return jnp.diagonal(A, axis1=-2, axis2=-1)[..., :d], V[..., :d, :d]


def logdet_over(chol: jnp.ndarray, scale: float | jnp.ndarray) -> jnp.ndarray:
    """``ln det V - d ln scale`` from the Cholesky factor of V, term by term (no cancellation of
    two large logs in float32)."""
    diag = jnp.diagonal(chol, axis1=-2, axis2=-1)
    return 2.0 * jnp.log(diag / jnp.sqrt(jnp.asarray(scale, jnp.float32))).sum(axis=-1)


def ucb_choice(context: jnp.ndarray, chol: jnp.ndarray, b: jnp.ndarray, beta: jnp.ndarray):
    """argmax_k <x_k, V^-1 b> + beta ||x_k||_{V^-1} per agent over decision sets (N, K, d), with
    ``chol`` (N, d, d) the Cholesky factor of V (ties: lowest index, as numpy's argmax)."""
    # L^-1 b and L^-1 x_k in one forward substitution, then theta = L^-T (L^-1 b)
    z = triangular_solve(chol, jnp.concatenate([b[..., None], jnp.swapaxes(context, -1, -2)], -1))
    zb, zx = z[..., :1], z[..., 1:]  # (N, d, 1), (N, d, K)
    theta = triangular_solve(chol, zb, transpose=True)[..., 0]
    width = jnp.sqrt((zx * zx).sum(axis=-2))
    mean = jnp.einsum("nkd,nd->nk", context, theta)
    index = mean + beta[..., None] * width
    note_scores(index)
    return jnp.argmax(index, axis=-1).astype(jnp.int32)


def oful_beta(chol: jnp.ndarray, lam: float, sigma: float, alpha: float, S: float):
    """Proposition-2 radius with lambda I regularization (radicand clamped at 0), from the
    Cholesky factor of V: :func:`fedbandit_env.linear_kernels.confidence_radius` of one agent
    with ``rho_max = lambda`` on ``ln det V - d ln lambda``."""
    return confidence_radius(
        logdet_over(chol, lam), 0.0, alpha=alpha, sigma=sigma, S=S, rho_max=lam
    )


def last_pull(context: jnp.ndarray, obs: Observation) -> tuple[jnp.ndarray, jnp.ndarray]:
    """The (x, y) of every agent's last pull, x from the decision sets ``context`` (N, K, d) it
    was played on; zeros where nothing was pulled (after reset, after a communication step)."""
    n = context.shape[0]
    return pulled_rows(context[jnp.arange(n), jnp.maximum(obs.last_arm, 0)], obs)


def pulled_rows(rows: jnp.ndarray, obs: Observation) -> tuple[jnp.ndarray, jnp.ndarray]:
    """The (x, y) of every agent's last pull from ``rows`` (N, d), the feature vector of the arm
    each agent played; zeros where nothing was pulled (after reset, after a communication
    step)."""
    pulled = (obs.phase == PULL) & (obs.last_arm >= 0)  # (N,)
    if obs.pulled is not None:  # an event clock: only the clients that pulled at this step
        pulled = pulled & obs.pulled
    x = jnp.where(pulled[:, None], rows, 0.0)
    y = jnp.where(pulled, obs.last_reward, 0.0).astype(jnp.float32)
    return x, y
