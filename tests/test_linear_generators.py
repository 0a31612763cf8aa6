"""The asynchronous papers' generators of the linear family (fedbandit_env/linear.py, module
docstring): Li & Wang's pool (``arms={"kind": "pool", "size": P}``, ``theta="half_sphere"``) and
He et al.'s cube (``arms="cube"``, ``theta="ones"``), against what their definitions imply; the
default generator's draws do not move; the JAX backend draws the cube, the pool and the thetas
by the same definitions (a fixed instance's pool is numpy's)."""

from __future__ import annotations

import math

import numpy as np
import pytest

import fedbandit_env
from fedbandit_env.errors import ConfigError

LINEAR = "FedBandit/LinearContextual-v0"


def contexts(steps=40, runs=3, **kw):
    kw = dict(num_agents=2, num_arms=6, dim=5, channels=(), **kw)
    venv = fedbandit_env.make_vec(LINEAR, num_runs=runs, **kw)
    obs, _ = venv.reset(seed=11)
    out = [obs.context]
    for _ in range(steps - 1):
        obs, *_ = venv.step(np.zeros((runs, 2), np.int64), {})
        out.append(obs.context)
    return np.stack(out, axis=1), venv  # (B, T, N, K, d)


def test_cube_coordinates_are_uniform_on_the_scaled_cube_and_theta_is_ones():
    x, venv = contexts(steps=200, arms="cube", theta="ones")
    d = 5
    assert np.abs(x).max() <= 1 / math.sqrt(d) and (np.linalg.norm(x, axis=-1) <= 1).all()
    # U(-1, 1)/sqrt(d): mean 0, variance 1/(3d), each within 4 standard errors
    flat = x.reshape(-1)
    assert abs(flat.mean()) < 4 * math.sqrt(1 / (3 * d) / flat.size)
    assert abs(flat.var() - 1 / (3 * d)) < 4 * (1 / (3 * d)) * math.sqrt(0.8 / flat.size) * 2
    np.testing.assert_allclose(venv.engine.linear.theta, np.full((3, d), 1 / math.sqrt(d)))
    assert not np.array_equal(x[:, 0, 0], x[:, 0, 1])  # fresh per agent


def test_pool_sets_are_distinct_vectors_of_one_unit_pool_per_run():
    x, venv = contexts(steps=300, arms={"kind": "pool", "size": 20}, theta="half_sphere")
    pool = venv.engine.linear._pool
    assert pool.shape == (3, 20, 5)
    np.testing.assert_allclose(np.linalg.norm(pool, axis=-1), 1.0)
    assert not np.array_equal(pool[0], pool[1])  # a pool per run
    for b in range(3):
        sets = x[b].reshape(-1, 6, 5)
        # every vector is a pool row, and a set never repeats one
        index = np.argmin(((sets[:, :, None, :] - pool[b][None, None]) ** 2).sum(-1), axis=-1)
        np.testing.assert_allclose(pool[b][index], sets)
        assert all(len(set(row)) == 6 for row in index)
        # uniform without replacement: each row appears K / P of the time
        share = np.bincount(index.reshape(-1), minlength=20) / index.size
        assert np.abs(share - 1 / 20).max() < 0.02
    theta = venv.engine.linear.theta
    np.testing.assert_allclose(np.linalg.norm(theta, axis=1), 1.0)
    assert (theta.sum(axis=1) > 0).all()


def test_pool_coordinates_shrink_with_their_index_before_the_scaling():
    """Coordinate k ~ N(0, (d - k)/d), then unit length: the mean squares of the pool's
    coordinates match a direct simulation of that definition."""
    _, venv = contexts(steps=1, runs=1, arms={"kind": "pool", "size": 4000})
    pool = venv.engine.linear._pool[0]
    z = np.random.default_rng(5).standard_normal((200_000, 5)) * np.sqrt(np.arange(5, 0, -1) / 5)
    want = ((z / np.linalg.norm(z, axis=1, keepdims=True)) ** 2).mean(axis=0)
    np.testing.assert_allclose((pool**2).mean(axis=0), want, atol=0.02)
    assert np.all(np.diff(want) < -0.03)  # strictly shrinking: the test can tell them apart


def test_the_default_generator_is_unchanged_by_the_option():
    a, _ = contexts(steps=5)
    b, _ = contexts(steps=5, arms="paper", theta="sphere")
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"arms": "sphere"}, r"arms: expected one of \('paper', 'cube', 'pool'\)"),
        ({"arms": {"kind": "pool", "size": 3}}, r"arms.size: expected a pool of at least"),
        ({"arms": {"kind": "pool", "count": 30}}, r"arms: expected \{'kind': 'pool'"),
        ({"arms": {"kind": "cube", "size": 3}}, r"arms: kind 'cube' takes no other key"),
        ({"theta": "cube"}, r"theta: expected one of"),
    ],
)
def test_bad_generators_name_the_field(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        fedbandit_env.make(LINEAR, num_arms=6, **kwargs)


def test_the_multi_armed_families_refuse_arms():
    with pytest.raises(ConfigError, match=r"unknown keyword argument\(s\) \['arms'\]"):
        fedbandit_env.make_vec("FedBandit/Homogeneous-v0", num_runs=1, arms="cube")


@pytest.mark.slow
def test_jax_draws_the_cube_the_pool_and_the_thetas():
    pytest.importorskip("jax")
    import jax

    import fedbandit_env.jax as fj

    env = fj.make(LINEAR, num_agents=2, num_arms=6, dim=5, channels=(), arms="cube",
                  theta="half_sphere")  # fmt: skip
    obs, state = jax.vmap(env.reset)(jax.random.split(jax.random.PRNGKey(0), 64))
    x = np.asarray(obs.context)
    assert np.abs(x).max() <= 1 / math.sqrt(5) + 1e-6 and abs(x.var() - 1 / 15) < 0.01
    theta = np.asarray(state.theta)
    np.testing.assert_allclose(np.linalg.norm(theta, axis=1), 1.0, rtol=1e-5)
    assert (theta.sum(axis=1) > 0).all()
    env = fj.make(LINEAR, dim=4, channels=(), theta="ones")
    _, state = env.reset(jax.random.PRNGKey(1))
    np.testing.assert_allclose(np.asarray(state.theta), np.full(4, 0.5), rtol=1e-6)
    pool_kw = dict(num_agents=2, num_arms=6, dim=5, channels=(), arms={"kind": "pool", "size": 20})
    env = fj.make(LINEAR, **pool_kw)
    obs, state = jax.vmap(env.reset)(jax.random.split(jax.random.PRNGKey(2), 8))
    pool = np.asarray(state.pool)  # a unit pool per run
    assert pool.shape == (8, 20, 5) and not np.array_equal(pool[0], pool[1])
    np.testing.assert_allclose(np.linalg.norm(pool, axis=-1), 1.0, rtol=1e-5)
    sets = np.asarray(obs.context)  # (8, N, K, d): K distinct rows of the run's own pool
    for b in range(8):
        index = np.argmin(((sets[b][:, :, None] - pool[b][None, None]) ** 2).sum(-1), axis=-1)
        np.testing.assert_allclose(pool[b][index], sets[b], atol=1e-6)
        assert all(len(set(row)) == 6 for row in index)
    # a fixed instance: numpy's pool, every run
    fixed = fj.make(LINEAR, instance_seed=4, **pool_kw)
    _, state = jax.vmap(fixed.reset)(jax.random.split(jax.random.PRNGKey(0), 2))
    venv = fedbandit_env.make_vec(LINEAR, num_runs=1, instance_seed=4, **pool_kw)
    venv.reset(seed=0)
    np.testing.assert_allclose(np.asarray(state.pool[1]), venv.engine.linear._pool[0], atol=1e-6)
