"""The JAX tree and hybrid counters (fedbandit_env/jax/tree_counter.py, hybrid_counter.py) read
the numpy counters' params (fedbandit_env.privacy.tree_counter.tree_params, hybrid_counter.
hybrid_params): the same options give equal params, a counter can be made from a numpy
counter's params, and a bad option raises the numpy counter's PrivacyError."""

from __future__ import annotations

import math

import numpy as np
import pytest

jax = pytest.importorskip("jax")

import jax.numpy as jnp  # noqa: E402

from fedbandit_env.jax.hybrid_counter import HybridCounter  # noqa: E402
from fedbandit_env.jax.tree_counter import TreeCounter  # noqa: E402
from fedbandit_env.privacy import HybridCounter as NumpyHybridCounter  # noqa: E402
from fedbandit_env.privacy import PrivacyError  # noqa: E402
from fedbandit_env.privacy import TreeCounter as NumpyTreeCounter  # noqa: E402
from fedbandit_env.seeding import BatchedRNG  # noqa: E402

TREE_OPTIONS = [
    {},
    {"tree_index": "pull", "init_round": True, "bounds": (0.0, 2.0)},
    {"levels": "paper", "noise_on_empty_blocks": True, "exact_blocks": False},
]


@pytest.mark.parametrize("options", TREE_OPTIONS)
def test_tree_counter_params_are_the_numpy_counters(options):
    rng = BatchedRNG.for_runs([0], "agents")
    theirs = NumpyTreeCounter((3, 4), 50, 0.8, rng=rng, **options)
    ours = TreeCounter((3, 4), 50, 0.8, **options)
    assert ours.params == theirs.params
    assert TreeCounter.from_params(theirs.params).scale == theirs.scale == ours.scale > 0


def test_hybrid_counter_params_are_the_numpy_counters():
    rng = BatchedRNG.for_runs([0], "agents")
    theirs = NumpyHybridCounter((3, 4), 50, 0.8, rng=rng, bounds=(0.0, 2.0))
    ours = HybridCounter((3, 4), 50, 0.8, bounds=(0.0, 2.0))
    assert ours.params == theirs.params
    counter = HybridCounter.from_params(theirs.params)
    assert (counter.log_scale, counter.binary_levels) == (theirs.log_scale, theirs.binary_levels)


def test_without_noise_both_engines_give_the_exact_sums():
    """epsilon = inf: the shared insertion on either engine releases the clipped prefix sums."""
    g = np.random.default_rng(0)
    arms, rewards = g.integers(0, 4, (20, 3)), g.integers(0, 3, (20, 3)).astype(np.float64)
    theirs = NumpyTreeCounter((3, 4), 20, math.inf, num_runs=1, bounds=(0.0, 1.0))
    ours = TreeCounter((3, 4), 20, math.inf, bounds=(0.0, 1.0))
    hybrid, numpy_hybrid = (
        HybridCounter((3, 4), 20, math.inf),
        NumpyHybridCounter((3, 4), 20, math.inf, num_runs=1),
    )
    state, hstate, key = ours.init(), hybrid.init(), jax.random.PRNGKey(0)
    for t in range(20):
        theirs.insert_arms(t + 1, arms[t][None], rewards[t][None])
        state = ours.insert_arms(key, state, jnp.asarray(arms[t]), jnp.asarray(rewards[t]))
        hit = arms[t][:, None] == np.arange(4)
        numpy_hybrid.insert(np.where(hit, rewards[t][:, None], 0.0)[None], hit[None])
        hstate = hybrid.insert_arms(key, hstate, jnp.asarray(arms[t]), jnp.asarray(rewards[t]))
    np.testing.assert_array_equal(np.asarray(ours.release(state)), theirs.release()[0])
    np.testing.assert_array_equal(np.asarray(hybrid.release(hstate)), numpy_hybrid.release()[0])


def test_bad_options_raise_the_numpy_error():
    with pytest.raises(PrivacyError, match="^tree_index"):
        TreeCounter((2,), 8, 1.0, tree_index="arm")
    with pytest.raises(PrivacyError, match="^bounds"):
        HybridCounter((2,), 8, 1.0, bounds=(1.0, 0.0))
    lean = TreeCounter((2,), 8, 1.0, exact_blocks=False)
    with pytest.raises(PrivacyError, match="^exact_blocks"):
        lean.release(lean.init())
