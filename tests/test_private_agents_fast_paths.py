"""The faster paths of Fed_UCB's binary-tree counter and of DP-MW-UCB's decision rounds give the
same trajectories, bit for bit, as the straightforward code they replace (kept here as the
comparison): ``TreeCounter.insert_arms`` and ``TreeCounter.noise_at`` against the full
insertion and a fancy-indexed read of the blocks, Fed_UCB's bonus with its per-counter
``1/n`` and ``ln max(n, floor) / (n^2 epsilon^2)`` kept up to date at the pulled arms, and
DP-MW-UCB's indices computed for the deciding runs only."""

from __future__ import annotations

import math

import numpy as np
import pytest

import fedbandit_env
from agents.dp_master_worker_ucb import DPMasterWorkerUCB, is_power_of_two
from agents.dp_recsys_common import privacy_width
from agents.gossip_ucb import GossipFedUCB
from fedbandit_env.engine import PULL
from fedbandit_env.policy import TeamAction
from fedbandit_env.privacy import TreeCounter
from fedbandit_env.seeding import BatchedRNG


# ------------------------------------------------------------------ the code replaced
class OldTreeCounter(TreeCounter):
    """``insert_arms`` always through the one-hot full insertion; the noise of a release read
    by fancy indexing of the blocks in the (B, *shape, levels) layout, summed by numpy."""

    def insert_arms(self, t, arms, rewards):
        arms = np.asarray(arms)
        rewards = np.asarray(rewards, dtype=np.float64)
        pulled = arms[..., None] == np.arange(self.shape[-1])
        self.insert(t, np.where(pulled, rewards[..., None], 0.0), pulled)

    def noise_at(self, arms):
        arms = np.asarray(arms)
        at = (*np.indices((self.num_runs, *self.shape[:-1]), sparse=True), arms)
        return self.block_noise[at].sum(axis=-1) + self.state.init_noise[at]


class OldGossipFedUCB(GossipFedUCB):
    """Fed_UCB whose counter is the straightforward :class:`OldTreeCounter` and whose release
    at the pulled arm is read by fancy indexing."""

    def _reset_privacy(self, facts, rng):
        super()._reset_privacy(facts, rng)
        if self.counter is not None:
            self.counter.__class__ = OldTreeCounter

    def _update_mean(self, arm, reward):
        if self.counter is None:
            super()._update_mean(arm, reward)
            return
        self.counter.insert_arms(self.state.t, arm, reward)
        b, i = np.indices(arm.shape)
        noisy_sum = self.S[b, i, arm] + self.counter.noise_at(arm)
        self.xbar[b, i, arm] = noisy_sum / self.n[b, i, arm]


class OldDPMasterWorkerUCB(DPMasterWorkerUCB):
    def _act_paper(self, obs):
        K = self.num_arms
        t = obs.pulls + 1
        if obs.step > 0:
            fresh = (obs.phase == PULL) & (obs.pulls > 0)
            self.sums.insert(obs.last_arm, obs.last_reward, runs=fresh)
            b, i = np.indices(obs.last_arm.shape)
            self.counts[b[fresh], i[fresh], obs.last_arm[fresh]] += 1.0
        reply = self.awaiting
        if reply.any():
            aggregate = obs.deliveries["server"].aggregate
            new = np.argmax(aggregate, axis=1)[:, None]
            got = reply[:, None]
            switched = got & (self.undecided | (new != self.held))
            self.held = np.where(got, new, self.held)
            self.undecided &= ~got
            self.eta = np.where(switched, 1, self.eta)
        init = t <= K
        decide = ~init & ~reply & (t <= self.horizon) & is_power_of_two(self.eta[:, 0])
        arms = np.where(init[:, None], (t - 1)[:, None], self.held)
        self.eta += (~init & ~decide)[:, None]
        self.awaiting = decide
        send = np.repeat(decide[:, None], self.held.shape[1], axis=1)
        payload = self._zeros
        if decide.any():
            payload = np.where(send[..., None], self._old_index(t), 0.0)
            self.decision_rounds += decide
        pull = None if not decide.any() else ~decide
        return TeamAction(arms.astype(np.int64), {"server": (send, payload)}, pull)

    def _old_index(self, t):
        n = self.counts
        width = np.sqrt(2.0 * np.log(np.asarray(t, dtype=np.float64))[:, None, None] / n)
        return (
            self.sums.value / n + width + privacy_width(n, self.config.epsilon, self.ln_inv_delta)
        )


# ------------------------------------------------------------------ running both
def _same_bits(a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


def _run(policy, env_id, seed, **kw):
    """Every action (arms, messages, pull flags) of one episode and the regret."""
    preview = fedbandit_env.make_vec(env_id, num_runs=1, **kw).config
    venv = fedbandit_env.make_vec(env_id, num_runs=5, channels=policy.channel_spec(preview), **kw)
    obs, _ = venv.reset(seed=seed)
    policy.reset(venv.facts, venv.agent_rng())
    trace = []
    while not venv.engine.truncated:
        action = policy.act(obs)
        messages = {k: (v[0].copy(), np.array(v[1], copy=True)) for k, v in action.messages.items()}
        trace.append((action.arms.copy(), messages, action.pull))
        obs, *_ = venv.step(action.arms, action.messages, action.pull)
    return trace, venv.engine.cumulative_regret.copy()


def _assert_same(new, old):
    (trace_new, regret_new), (trace_old, regret_old) = new, old
    assert len(trace_new) == len(trace_old)
    for (arms_a, msg_a, pull_a), (arms_b, msg_b, pull_b) in zip(trace_new, trace_old, strict=True):
        assert _same_bits(arms_a, arms_b)
        assert msg_a.keys() == msg_b.keys()
        for name in msg_a:
            assert _same_bits(msg_a[name][0], msg_b[name][0])
            assert _same_bits(msg_a[name][1], msg_b[name][1])
        assert (pull_a is None) == (pull_b is None)
        if pull_a is not None:
            assert _same_bits(pull_a, pull_b)
    assert _same_bits(regret_new, regret_old)


RING = {"num_agents": 4, "num_arms": 5, "horizon": 90, "topology": "ring"}
FED_UCB_OPTIONS = [
    {},
    {"epsilon": 0.3},
    {"tree_index": "pull"},
    {"noise_on_empty_blocks": True},
    {"noisy_init": False},
    {"dp_log_floor": 1.0},
    {"reward_clip": (0.2, 0.7)},
    {"privacy_levels": "paper"},
]


@pytest.mark.parametrize("options", FED_UCB_OPTIONS)
@pytest.mark.parametrize("seed", [0, 7, 123])
def test_fed_ucb_fast_paths_are_bit_identical(options, seed):
    new = _run(GossipFedUCB(**options), "FedBandit/Homogeneous-v0", seed, **RING)
    old = _run(OldGossipFedUCB(**options), "FedBandit/Homogeneous-v0", seed, **RING)
    _assert_same(new, old)


@pytest.mark.parametrize("seed", [0, 5])
def test_fed_ucb_fast_paths_are_bit_identical_with_gaussian_rewards(seed):
    kw = {"horizon": 70}
    new = _run(GossipFedUCB(), "FedBandit/GossipTriangle-v0", seed, **kw)
    old = _run(OldGossipFedUCB(), "FedBandit/GossipTriangle-v0", seed, **kw)
    _assert_same(new, old)


def test_tree_counter_leaf_rounds_keep_every_array():
    """Beyond the releases: the counter's whole state matches after each insertion."""
    rng = np.random.default_rng(3)
    shape, horizon = (3, 4), 40
    counters = [
        cls(shape, horizon, 1.5, rng=BatchedRNG.for_runs([11, 12], "agents"), init_round=True)
        for cls in (TreeCounter, OldTreeCounter)
    ]
    init = rng.random((2, *shape))
    for c in counters:
        c.insert(0, init)
    for t in range(1, horizon + 1):
        arms = rng.integers(0, shape[-1], (2, shape[0]))
        rewards = rng.random((2, shape[0]))
        for c in counters:
            c.insert_arms(t, arms, rewards)
        a, b = counters
        for name in ("exact", "noise", "noised", "counts", "last_pull"):
            assert _same_bits(getattr(a.state, name), getattr(b.state, name)), (t, name)
        assert _same_bits(a.release(), b.release())
        assert _same_bits(a.noise_at(arms), b.noise_at(arms))


DP_MW_OPTIONS = [{}, {"epsilon": 0.5}, {"epsilon": math.inf}, {"delta_horizon": 50}]


@pytest.mark.parametrize("options", DP_MW_OPTIONS)
@pytest.mark.parametrize("seed", [0, 7, 123])
def test_dp_mw_ucb_decision_rounds_are_bit_identical(options, seed):
    kw = {"num_agents": 4, "num_arms": 5, "horizon": 120, "topology": "ring"}
    new = _run(DPMasterWorkerUCB(**options), "FedBandit/Homogeneous-v0", seed, **kw)
    old = _run(OldDPMasterWorkerUCB(**options), "FedBandit/Homogeneous-v0", seed, **kw)
    _assert_same(new, old)
