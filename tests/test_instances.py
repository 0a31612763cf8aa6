"""Instance generators (docs/gossip.md, docs/commeff.md) and reward models."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fedbandit_env.instances import (
    Instance,
    commeff_heterogeneous,
    fixed_instance,
    gossip_heterogeneous,
    uniform_homogeneous,
)
from fedbandit_env.rewards import ClippedGaussian, clipped_normal_mean


@given(st.integers(2, 8), st.integers(2, 8), st.integers(0, 10_000))
@settings(max_examples=40, deadline=None)
def test_gossip_instance_conditions(n, m, seed):
    inst = gossip_heterogeneous(n, m, np.random.default_rng(seed))
    ranks = {tuple(np.argsort(-row)) for row in inst.means}
    if n <= math.factorial(m):
        assert len(ranks) == n
    assert np.any(inst.local_best_arms != inst.best_arm)
    assert np.allclose(inst.global_means, inst.means.mean(axis=0))


@given(st.integers(2, 8), st.integers(2, 8), st.integers(0, 10_000))
@settings(max_examples=40, deadline=None)
def test_commeff_instance_conditions(n, m, seed):
    inst = commeff_heterogeneous(n, m, np.random.default_rng(seed))
    assert np.all((inst.means >= 0) & (inst.means <= 1))
    assert np.any(inst.local_best_arms != inst.best_arm)
    # deviations are scaled by w_k <= 0.3 and never leave [0, 1] around the global mean
    spread = np.abs(inst.means - inst.global_means).max(axis=0)
    room = np.minimum(inst.global_means, 1 - inst.global_means)
    assert np.all(spread <= room + 1e-12) and np.all(spread <= 0.6 + 1e-12)


def test_homogeneous_and_fixed_instances():
    inst = uniform_homogeneous(4, 3, np.random.default_rng(0))
    assert inst.is_homogeneous and inst.means.shape == (4, 3)
    fixed = fixed_instance([0.2, 0.7, 0.4], 2)
    assert fixed.best_arm == 1 and np.allclose(fixed.gaps, [0.5, 0.0, 0.3])
    with pytest.raises(ValueError, match=r"means: expected a length-M vector or a \(3, M\) matrix"):
        fixed_instance(np.zeros((2, 3)), 3)
    with pytest.raises(ValueError, match="M >= 2"):
        Instance(np.zeros((2, 1)))


@pytest.mark.parametrize("mean", [-0.3, 0.1, 0.5, 0.95, 1.4])
def test_clipped_gaussian_expectation_matches_monte_carlo(mean):
    model = ClippedGaussian(sigma=0.4)
    z = np.random.default_rng(1).standard_normal(400_000)
    mc = model.sample(np.full_like(z, mean), z).mean()
    assert clipped_normal_mean(mean, 0.4, 0.0, 1.0) == pytest.approx(mc, abs=3e-3)
    assert model.expected(np.array([mean]))[0] == pytest.approx(mc, abs=3e-3)
