"""Reward parameters and rewards in JAX (docs/jax.md): the multi-armed instances that a run
draws when the configuration has no fixed instance, the reward models and the linear family's
decision sets. Same distributions as the numpy engine (:mod:`fedbandit_env.instances`,
:mod:`fedbandit_env.rewards`, :mod:`fedbandit_env.linear`), drawn from JAX keys."""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import ndtr

from fedbandit_env.config import EnvConfig
from fedbandit_env.instances import MAX_REJECTION_TRIES
from fedbandit_env.linear import BALL_MIN_NORM, LinearSpec, async_theta, unit_pool
from fedbandit_env.xp import bounded_while


def _rejection(key: jax.Array, draw, accept) -> tuple[jnp.ndarray, jnp.ndarray]:
    """Draw until ``accept`` (at most MAX_REJECTION_TRIES draws, in loops of known trip count:
    :func:`fedbandit_env.xp.bounded_while`); returns the draw and whether it was accepted."""

    def cond(carry):
        _, _, ok, tries = carry
        return ~ok & (tries < MAX_REJECTION_TRIES)

    def body(carry):
        key, _, _, tries = carry
        key, sub = jax.random.split(key)
        value = draw(sub)
        return key, value, accept(value), tries + 1

    first = draw(jax.random.fold_in(key, 0))
    start = (key, first, accept(first), jnp.ones((), jnp.int32))
    _, value, ok, _ = bounded_while(jnp, cond, body, start, MAX_REJECTION_TRIES)
    return value, ok


def _some_local_best_differs(means: jnp.ndarray) -> jnp.ndarray:
    best = jnp.argmax(means.mean(axis=0))
    return jnp.any(jnp.argmax(means, axis=1) != best)


def draw_means(config: EnvConfig, key: jax.Array) -> tuple[jnp.ndarray, jnp.ndarray]:
    """The (N, M) means of one run by ``config.instance`` (``uniform``: one U[0,1] vector for
    every agent; ``gossip``: U[0,1] per agent and arm, distinct rankings, some local best arm
    not the global best; ``commeff``: global means plus bounded local deviations) and whether
    the draw met its conditions."""
    n, m = config.num_agents, config.num_arms
    if config.instance == "uniform":
        row = jax.random.uniform(key, (m,), jnp.float32)
        return jnp.broadcast_to(row, (n, m)), jnp.asarray(True)
    if config.instance == "gossip":
        need_distinct = n <= math.factorial(min(m, 12))

        def accept(means):
            ok = _some_local_best_differs(means)
            if need_distinct:
                ranks = jnp.argsort(-means, axis=1)
                same = (ranks[:, None, :] == ranks[None, :, :]).all(axis=2)
                ok &= ~jnp.any(same & ~jnp.eye(n, dtype=bool))
            return ok

        return _rejection(key, lambda k: jax.random.uniform(k, (n, m), jnp.float32), accept)
    if config.instance == "commeff":

        def draw(k):
            k1, k2 = jax.random.split(k)
            mu = jax.random.uniform(k1, (m,), jnp.float32)
            u = jax.random.uniform(k2, (n, m), jnp.float32, -1.0, 1.0)
            dev = u - u.mean(axis=0)
            spread = jnp.abs(dev).max(axis=0)
            room = jnp.minimum(mu, 1.0 - mu)
            w = jnp.minimum(0.3, jnp.where(spread > 0, room / jnp.where(spread > 0, spread, 1), 0))
            return jnp.clip(mu + w * dev, 0.0, 1.0)

        return _rejection(key, draw, _some_local_best_differs)
    raise ValueError(f"instance: no JAX generator for {config.instance!r}")


def expected_reward(config: EnvConfig, means: jnp.ndarray, sigma: Any = None) -> jnp.ndarray:
    """The expected reward of each parameter (the clipped Gaussian's closed-form mean);
    ``sigma`` the noise (None: the configuration's)."""
    reward = config.reward
    if reward.name != "clipped_gaussian":
        return means
    s, lo, hi = (reward.sigma if sigma is None else sigma), reward.low, reward.high
    a, b = (lo - means) / s, (hi - means) / s
    phi = lambda x: jnp.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)  # noqa: E731
    inside = means * (ndtr(b) - ndtr(a)) + s * (phi(a) - phi(b))
    return lo * ndtr(a) + hi * (1.0 - ndtr(b)) + inside


def sample_reward(
    config: EnvConfig, key: jax.Array, mean: jnp.ndarray, sigma: Any = None
) -> jnp.ndarray:
    """One reward per entry of ``mean`` (Bernoulli, Gaussian or clipped Gaussian); ``sigma``
    the noise (None: the configuration's)."""
    reward = config.reward
    sigma = getattr(reward, "sigma", 0.0) if sigma is None else sigma
    if reward.name == "bernoulli":
        return (jax.random.uniform(key, mean.shape, jnp.float32) < mean).astype(jnp.float32)
    z = jax.random.normal(key, mean.shape, jnp.float32)
    if reward.name == "gaussian":
        return mean + sigma * z
    return jnp.clip(mean + sigma * z, reward.low, reward.high)


def draw_theta(spec: LinearSpec, key: jax.Array) -> jnp.ndarray:
    """theta* of one run: uniform on the unit sphere, or in the unit ball with norm >= 0.8; on
    the half sphere of positive coordinate sum; or (1, ..., 1) / sqrt(d)
    (:mod:`fedbandit_env.linear`)."""
    if spec.theta in ("ones", "half_sphere"):
        return async_theta(spec.theta, jax.random.normal(key, (spec.dim,), jnp.float32), jnp)

    def draw(k):
        k1, k2 = jax.random.split(k)
        v = jax.random.normal(k1, (spec.dim,), jnp.float32)
        v = v / jnp.linalg.norm(v)
        if spec.theta == "sphere":
            return v
        return jax.random.uniform(k2, (), jnp.float32) ** (1.0 / spec.dim) * v

    if spec.theta == "sphere":
        return draw(key)
    theta, _ = _rejection(key, draw, lambda t: jnp.linalg.norm(t) >= BALL_MIN_NORM)
    return theta


def draw_pool(spec: LinearSpec, key: jax.Array) -> jnp.ndarray:
    """Li & Wang's pool (P, d) of one run: coordinate k ~ N(0, (d - k)/d), each row scaled to
    unit length (:func:`fedbandit_env.linear.draw_pool`)."""
    return unit_pool(jax.random.normal(key, (spec.arms[1], spec.dim), jnp.float32), jnp)


def pool_sets(key: jax.Array, pool: jnp.ndarray, sets: int, num_actions: int) -> jnp.ndarray:
    """(sets, K, d): each set the K pool vectors of the smallest of P uniforms, in the order of
    their uniforms (distinct, uniformly without replacement; numpy's rule)."""
    u = jax.random.uniform(key, (sets, pool.shape[0]), jnp.float32)
    picked = jnp.argsort(u, axis=-1)[:, :num_actions]
    return pool[picked]


def decision_sets(spec: LinearSpec, key: jax.Array, theta: jnp.ndarray, num_agents: int,
                  num_actions: int, pool: jnp.ndarray | None = None) -> jnp.ndarray:  # fmt: skip
    """(N, K, d) decision sets of one step (the linear paper's experiments): K - 1 actions with
    mean in [0.5, 0.6] and one in [0.7, 0.8], ``x = c theta_hat + sqrt(1 - c^2) w`` with w a
    random unit vector orthogonal to theta_hat (c over |theta*| in the ball), shuffled; or He et
    al.'s cube, coordinates (2u - 1) / sqrt(d); or K distinct vectors of Li & Wang's ``pool``
    (:mod:`fedbandit_env.linear`)."""
    sets = 1 if spec.shared_decision_sets else num_agents
    if pool is not None:
        x = pool_sets(key, pool, sets, num_actions)
        return jnp.broadcast_to(x, (num_agents, num_actions, spec.dim))
    if spec.arms == "cube":
        u = jax.random.uniform(key, (sets, num_actions, spec.dim), jnp.float32)
        x = (2.0 * u - 1.0) / np.float32(np.sqrt(spec.dim))
        return jnp.broadcast_to(x, (num_agents, num_actions, spec.dim))
    k1, k2 = jax.random.split(key)
    w = jax.random.normal(k1, (sets, num_actions, spec.dim), jnp.float32)
    u = jax.random.uniform(k2, (sets, num_actions, 2), jnp.float32)
    norm = jnp.linalg.norm(theta)
    theta_hat = theta / norm
    c = 0.5 + 0.1 * u[..., 0]
    c = c.at[:, 0].add(0.2)  # slot 0 is the optimal action before shuffling
    c = c / norm
    w = w - (w @ theta_hat)[..., None] * theta_hat
    w = w / jnp.linalg.norm(w, axis=-1, keepdims=True)
    x = c[..., None] * theta_hat + jnp.sqrt(1.0 - c**2)[..., None] * w
    order = jnp.argsort(u[..., 1], axis=-1)
    x = jnp.take_along_axis(x, order[..., None], axis=-2)
    return jnp.broadcast_to(x, (num_agents, num_actions, spec.dim))


def linear_reward(
    spec: LinearSpec, key: jax.Array, mean: jnp.ndarray, sigma: Any = None
) -> jnp.ndarray:
    """Bernoulli(mean) or mean + sigma z rewards of the linear family (``sigma`` None: the
    spec's)."""
    if spec.reward == "bernoulli":
        return (jax.random.uniform(key, mean.shape, jnp.float32) < mean).astype(jnp.float32)
    sigma = spec.sigma if sigma is None else sigma
    return mean + sigma * jax.random.normal(key, mean.shape, jnp.float32)
