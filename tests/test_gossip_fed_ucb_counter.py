"""Fed_UCB's binary-tree counter keeps only the noise of its blocks
(``TreeCounter(exact_blocks=False)``): a private sum is the agent's own exact running sum S plus
the noise of the pulled counter's live blocks (Algorithm 3 of the gossip paper)."""

from __future__ import annotations

import numpy as np
import pytest

from agents.gossip_ucb import GossipFedUCB
from fedbandit_env.privacy import PrivacyError, TreeCounter
from fedbandit_env.seeding import BatchedRNG
from tests.helpers import gossip_venv


def _rollout(policy, runs=2, rounds=20, seed=11):
    venv = gossip_venv(4, 3, rounds, "ring", runs)
    obs, _ = venv.reset(seed=seed)
    policy.reset(venv.facts, venv.agent_rng())
    while not venv.engine.truncated:
        action = policy.act(obs)
        obs, *_ = venv.step(action.arms, action.messages, action.pull)
    return policy


def test_fed_ucb_keeps_no_exact_blocks():
    policy = _rollout(GossipFedUCB(epsilon=1.0))
    assert not policy.counter.exact_blocks
    with pytest.raises(PrivacyError, match="exact_blocks"):
        policy.counter.release()


def test_noise_only_counter_has_the_same_noise_as_a_full_counter():
    """``exact_blocks=False`` changes nothing but the exact part: the same draws, the same noise
    in every release, and a release is the exact sum plus ``noise_at``."""
    shape, T = (3, 4), 37
    rngs = [BatchedRNG.for_runs([1, 2], "agents").child("privacy") for _ in range(2)]
    full = TreeCounter(shape, T, 1.0, rng=rngs[0], bounds=(0.0, 1.0), noise_per="row")
    lean = TreeCounter(
        shape, T, 1.0, rng=rngs[1], bounds=(0.0, 1.0), noise_per="row", exact_blocks=False
    )
    data = np.random.default_rng(0)
    sums = np.zeros((2, *shape))
    b, i = np.indices((2, 3))
    for t in range(1, T + 1):
        arms = data.integers(0, shape[-1], (2, 3))
        rewards = data.integers(0, 2, (2, 3)).astype(np.float64)  # integers: exact either way
        full.insert_arms(t, arms, rewards)
        lean.insert_arms(t, arms, rewards)
        sums[b, i, arms] += rewards
        assert np.array_equal(full.noise(), lean.noise())
        assert np.array_equal(lean.noise_at(arms), full.noise()[b, i, arms])
        release = full.release()[b, i, arms]
        assert np.array_equal(release, sums[b, i, arms] + lean.noise_at(arms))
    for read in (lean.exact, lean.release):
        with pytest.raises(PrivacyError, match="exact_blocks"):
            read()
    with pytest.raises(PrivacyError, match="exact_blocks"):
        TreeCounter(shape, T, 1.0, num_runs=1, exact_blocks="no")
