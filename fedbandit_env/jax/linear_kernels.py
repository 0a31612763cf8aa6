"""The linear-algebra kernels of the JAX linear learners (docs/linear.md, docs/jax.md): one
Cholesky factor per agent, log-determinants relative to the regularizer, the optimistic choice
``argmax <x, theta> + beta ||x||_{V^-1}`` (OFUL, Abbasi-Yadkori et al. 2011; Dubey & Pentland
2020, Algorithm 1) and the last pull's feature vector. Shared by :mod:`baselines.jax.linucb` and
:mod:`agents.jax.fed_lin_ucb` (agents never import baselines)."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from fedbandit_env.jax.types import PULL, Observation


def cholesky(V: jnp.ndarray) -> jnp.ndarray:
    """Lower Cholesky factors of symmetric positive-definite ``V`` (..., d, d) (NaN if not)."""
    return jnp.linalg.cholesky(V)


def logdet_over(chol: jnp.ndarray, scale: float | jnp.ndarray) -> jnp.ndarray:
    """``ln det V - d ln scale`` from the Cholesky factor of V, term by term (no cancellation of
    two large logs in float32)."""
    diag = jnp.diagonal(chol, axis1=-2, axis2=-1)
    return 2.0 * jnp.log(diag / jnp.sqrt(jnp.asarray(scale, jnp.float32))).sum(axis=-1)


def ucb_choice(context: jnp.ndarray, chol: jnp.ndarray, b: jnp.ndarray, beta: jnp.ndarray):
    """argmax_k <x_k, V^-1 b> + beta ||x_k||_{V^-1} per agent over decision sets (N, K, d), with
    ``chol`` (N, d, d) the Cholesky factor of V (ties: lowest index, as numpy's argmax)."""
    solve = jax.lax.linalg.triangular_solve
    # L^-1 b and L^-1 x_k (left-side solves, lower triangular)
    zb = solve(chol, b[..., None], left_side=True, lower=True)  # (N, d, 1)
    theta = solve(chol, zb, left_side=True, lower=True, transpose_a=True)[..., 0]
    zx = solve(chol, jnp.swapaxes(context, -1, -2), left_side=True, lower=True)  # (N, d, K)
    width = jnp.sqrt((zx * zx).sum(axis=-2))
    mean = jnp.einsum("nkd,nd->nk", context, theta)
    return jnp.argmax(mean + beta[..., None] * width, axis=-1).astype(jnp.int32)


def oful_beta(chol: jnp.ndarray, lam: float, sigma: float, alpha: float, S: float):
    """Proposition-2 radius with lambda I regularization (radicand clamped at 0), from the
    Cholesky factor of V: ``sigma sqrt(2 ln(2/alpha) + ln det V - d ln lambda) + S sqrt(lambda)``."""
    radicand = 2.0 * math.log(2.0 / alpha) + logdet_over(chol, lam)
    return sigma * jnp.sqrt(jnp.maximum(radicand, 0.0)) + S * math.sqrt(lam)


def last_pull(context: jnp.ndarray, obs: Observation) -> tuple[jnp.ndarray, jnp.ndarray]:
    """The (x, y) of every agent's last pull, x from the decision sets ``context`` (N, K, d) it
    was played on; zeros where nothing was pulled (after reset, after a communication step)."""
    n = context.shape[0]
    pulled = (obs.phase == PULL) & (obs.last_arm >= 0)  # (N,)
    x = context[jnp.arange(n), jnp.maximum(obs.last_arm, 0)]
    x = jnp.where(pulled[:, None], x, 0.0)
    y = jnp.where(pulled, obs.last_reward, 0.0).astype(jnp.float32)
    return x, y
