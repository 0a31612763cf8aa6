"""Results version 5 of ``gossip_fed_ucb`` (docs/bench.md "Results versions").

* The tree counter keeps only the noise of its blocks (``TreeCounter(exact_blocks=False)``): a
  release is the agent's own exact running sum S plus the noise of the pulled counter's live
  blocks (version 4 summed the exact blocks and added the init sample, the same number up to the
  order of the additions: bit-identical for integer rewards, the last bits for real ones).
* The bonus of Eq. (12) is expanded into two terms of kept per-counter factors,
  ``sqrt(c1 / n + c2 ln max(n, floor) / (n^2 eps^2))`` (version 4 evaluated
  ``sqrt((c1 / n)(1 + dp))``): the same formula, other roundings.

No random stream changed; the roundings did, so trajectories may differ where two indices are
within a few ulps. Final regret must agree with the version-4 code (kept below as a subclass)
within 3 standard errors on a fixed instance (gossip.md §4.2 setting: Gaussian(1) rewards, ring),
and the releases equal version 4's within rounding.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from agents.gossip_ucb import GossipFedUCB
from fedbandit_env.privacy import PrivacyError, TreeCounter
from fedbandit_env.seeding import BatchedRNG
from tests.helpers import assert_means_within_3se, gossip_venv


class FedUCBv4(GossipFedUCB):
    """Version 4: a counter with exact blocks whose releases are read whole, and the bonus as
    ``(c1 / n)(1 + dp)``."""

    def _reset_privacy(self, facts, rng):
        super()._reset_privacy(facts, rng)
        if self.counter is not None:
            c = self.counter
            self.counter = TreeCounter(
                c.shape, c.horizon, c.epsilon, rng=rng.child("privacy"),
                bounds=c.bounds, tree_index=c.tree_index,
                noise_on_empty_blocks=c.noise_on_empty_blocks, levels=self.privacy_levels,
                init_round=c.init_round, noise_per="row",
            )

    def _initial_mean(self):
        if self.counter is None:
            return super()._initial_mean()
        if self.noisy_init:
            self.counter.insert(0, self._init_rewards)
            return self.counter.release()
        return self._init_rewards.copy()

    def _update_mean(self, t, arm, reward):
        if self.counter is None:
            super()._update_mean(t, arm, reward)
            return
        self.counter.insert_arms_unchecked(t, arm, np.asarray(reward, dtype=np.float64))
        flat = self._flat_base + arm
        noisy_sum = self.counter.release_flat(flat.reshape(-1)).reshape(flat.shape)
        if not self.noisy_init:
            noisy_sum = noisy_sum + self._init_rewards.reshape(-1)[flat]
        n = self.n.reshape(-1)[flat]
        self.xbar.reshape(-1)[flat] = noisy_sum / n  # the bonus reads the whole n below

    def bonus(self, t):
        if not self.private:
            return super().bonus(t)
        ln_t, ln_big_t = math.log(t), math.log(self.T)
        ln_n = self._ln_floor(self.n)
        dp = self.dp_bonus_scale * 128.0 * self.N * ln_big_t**2 * ln_t * ln_n
        dp = dp / (self.n * self.epsilon**2)
        inner = (2.0 * self.N * ln_t / self.n) * (1.0 + dp)
        return self.bonus_scale * np.sqrt(inner) + self.alpha1


def _rollout(policy, epsilon_runs=48, rounds=300, seed=11, reward=None):
    venv = gossip_venv(4, 3, rounds, "ring", epsilon_runs, reward=reward)
    obs, _ = venv.reset(seed=seed)
    policy.reset(venv.facts, venv.agent_rng())
    while not venv.engine.truncated:
        action = policy.act(obs)
        obs, *_ = venv.step(action.arms, action.messages, action.pull)
    return policy, venv.engine.cumulative_regret.mean(axis=1)  # (B,) agent-averaged


@pytest.mark.parametrize("epsilon", [1.0, 100.0])  # near uniform play / visibly learning
def test_v5_agrees_with_v4_within_3_se(epsilon):
    _, new = _rollout(GossipFedUCB(epsilon=epsilon))
    _, old = _rollout(FedUCBv4(epsilon=epsilon))
    assert_means_within_3se(new, old)


@pytest.mark.parametrize("noisy_init", [True, False])
def test_v5_means_equal_v4_means_within_rounding(noisy_init):
    """Both versions on the same streams for a few rounds: every gossiped mean agrees within
    rounding (the releases are the same sums added in another order)."""
    new, _ = _rollout(GossipFedUCB(epsilon=2.0, noisy_init=noisy_init), epsilon_runs=4, rounds=3)
    old, _ = _rollout(FedUCBv4(epsilon=2.0, noisy_init=noisy_init), epsilon_runs=4, rounds=3)
    assert np.array_equal(new.n, old.n)
    np.testing.assert_allclose(new.xbar, old.xbar, rtol=1e-12, atol=1e-12)
    t = 3
    np.testing.assert_allclose(new.bonus(t), old.bonus(t), rtol=1e-12)


def test_v5_keeps_no_exact_blocks():
    policy, _ = _rollout(GossipFedUCB(epsilon=1.0), epsilon_runs=2, rounds=20)
    assert policy.version == 5 and not policy.counter.exact_blocks
    with pytest.raises(PrivacyError, match="exact_blocks"):
        policy.counter.release()


def test_noise_only_counter_has_the_same_noise_as_a_full_counter():
    """``exact_blocks=False`` changes nothing but the exact part: the same draws, the same noise
    in every release, and a release is the exact sum plus ``noise_flat``."""
    shape, T = (3, 4), 37
    rngs = [BatchedRNG.for_runs([1, 2], "agents").child("privacy") for _ in range(2)]
    full = TreeCounter(shape, T, 1.0, rng=rngs[0], bounds=(0.0, 1.0), noise_per="row")
    lean = TreeCounter(
        shape, T, 1.0, rng=rngs[1], bounds=(0.0, 1.0), noise_per="row", exact_blocks=False
    )
    data = np.random.default_rng(0)
    sums = np.zeros((2, *shape))
    lead = np.arange(2 * 3).reshape(2, 3) * shape[-1]
    for t in range(1, T + 1):
        arms = data.integers(0, shape[-1], (2, 3))
        rewards = data.integers(0, 2, (2, 3)).astype(np.float64)  # integers: exact either way
        full.insert_arms(t, arms, rewards)
        lean.insert_arms(t, arms, rewards)
        sums.reshape(-1)[(lead + arms).reshape(-1)] += rewards.reshape(-1)
        assert np.array_equal(full.noise(), lean.noise())
        flat = (lead + arms).reshape(-1)
        assert np.array_equal(lean.noise_flat(flat), full.noise().reshape(-1)[flat])
        release = full.release_flat(flat)
        assert np.array_equal(release, sums.reshape(-1)[flat] + lean.noise_flat(flat))
    for read in (lean.exact, lean.release, lambda: lean.block_exact):
        with pytest.raises(PrivacyError, match="exact_blocks"):
            read()
    with pytest.raises(PrivacyError, match="exact_blocks"):
        TreeCounter(shape, T, 1.0, num_runs=1, exact_blocks="no")
