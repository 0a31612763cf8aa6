"""The index zoo's flat hot path (docs/bench.md "Learner speed") against the previous kernel.

The previous kernel (one tie-break uniform per agent and arm, statistics summed every step) is
kept here only, as ``OldKernel``: where the random streams did not change (Thompson sampling,
continuous indices) the trajectories are bit-identical; where they changed (one tie-break uniform
per agent: ucb1, kl_ucb, epsilon_greedy and their shared variants) the mean regret agrees within
3 standard errors on fixed instances, and the learner's results version is 2.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fedbandit_env
from baselines.epsilon_greedy import EpsilonGreedy, EpsilonGreedyShared
from baselines.index import CHANNEL, argmax_one_uniform, argmax_uniform_ties
from baselines.thompson import (
    ThompsonBeta,
    ThompsonBetaShared,
    ThompsonGaussian,
    ThompsonGaussianShared,
)
from baselines.ucb import KLUCB, UCB1, KLUCBShared, UCB1Shared
from fedbandit_env.policy import TeamAction


class OldKernel:
    """The act() of the previous IndexPolicy: per-arm tie-break uniforms, no flat state."""

    def reset(self, facts, rng):
        super().reset(facts, rng)
        self._old_tiebreak = rng.child("tiebreak").buffered(
            "uniform", (facts.num_agents, facts.num_arms)
        )
        self._b, self._i = np.indices((facts.num_runs, facts.num_agents))
        degree, runs, agents, width = self.latest.shape
        self.old_latest = np.zeros((runs, agents, degree, width))  # the old receiver-major layout

    def act(self, obs):
        self._all_pulled = False  # the old index masked unpulled arms every step
        if obs.step > 0:
            reward = self.transform_reward(obs.last_reward)
            self.counts[self._b, self._i, obs.last_arm] += 1.0
            self.sums[self._b, self._i, obs.last_arm] += reward
        n, s = self.counts, self.sums
        messages = {}
        if self.shared:
            heard = obs.deliveries[CHANNEL]
            self.old_latest = np.where(heard.mask[..., None], heard.payload, self.old_latest)
            received = self.old_latest.sum(axis=2)
            n = n + np.maximum(received[..., : self.num_arms], 0.0)
            s = s + received[..., self.num_arms :]
            payload = np.concatenate([self.counts, self.sums], axis=-1)
            messages[CHANNEL] = (self._send, payload)
        index = self.index(n, s, n.sum(axis=-1, keepdims=True))
        arms = argmax_uniform_ties(index, self._old_tiebreak.next())
        return TeamAction(self.choose(arms), messages)


def _old(cls):
    return type(f"Old{cls.__name__}", (OldKernel, cls), {})


def _run(policy, env_id, runs, horizon, seed=0, **kw):
    spec = policy.channel_spec(fedbandit_env.make_vec(env_id, num_runs=1, **kw).config)
    venv = fedbandit_env.make_vec(env_id, num_runs=runs, horizon=horizon, channels=spec or (), **kw)
    obs, _ = venv.reset(seed=seed)
    policy.reset(venv.facts, venv.agent_rng())
    arms = []
    for _ in range(horizon):
        action = policy.act(obs)
        arms.append(action.arms)
        obs, _, _, _, info = venv.step(action.arms, action.messages)
    return np.stack(arms), info.cumulative_regret.sum(axis=1)


RING = {"num_agents": 5, "num_arms": 4, "topology": "ring"}


@pytest.mark.parametrize(
    ("cls", "env_id"),
    [
        (ThompsonBeta, "FedBandit/Homogeneous-v0"),
        (ThompsonBetaShared, "FedBandit/Heterogeneous-v0"),
        (ThompsonGaussian, "FedBandit/Heterogeneous-v0"),
        (ThompsonGaussianShared, "FedBandit/Homogeneous-v0"),
    ],
)
def test_thompson_trajectories_are_bit_identical(cls, env_id):
    new_arms, new_regret = _run(cls(), env_id, 3, 150, **RING)
    old_arms, old_regret = _run(_old(cls)(), env_id, 3, 150, **RING)
    assert np.array_equal(new_arms, old_arms)
    assert np.array_equal(new_regret, old_regret)
    assert cls.version == 1


@pytest.mark.parametrize(
    "cls", [UCB1, UCB1Shared, KLUCB, KLUCBShared, EpsilonGreedy, EpsilonGreedyShared]
)
def test_changed_streams_keep_the_regret_within_three_standard_errors(cls):
    kw = {**RING, "means": [0.9, 0.8, 0.5, 0.5], "reward": "bernoulli"}
    runs, horizon = 60, 300
    _, new = _run(cls(), "FedBandit/Homogeneous-v0", runs, horizon, seed=7, **kw)
    old_arms, old = _run(_old(cls)(), "FedBandit/Homogeneous-v0", runs, horizon, seed=7, **kw)
    se = np.sqrt(new.var(ddof=1) / runs + old.var(ddof=1) / runs)
    assert abs(new.mean() - old.mean()) <= 3 * se, (new.mean(), old.mean(), se)
    assert cls.version >= 2


def test_ucb1_index_values_match_the_old_formula():
    """The UCB1 index equals mean + scale sqrt(alpha ln t / n) up to rounding."""
    policy = UCB1()
    _run(policy, "FedBandit/Homogeneous-v0", 2, 60, **RING)
    n, s = policy.counts, policy.sums
    t = n.sum(axis=-1, keepdims=True)
    want = s / n + policy.params.scale * np.sqrt(policy.config.alpha * np.log(t) / n)
    assert np.allclose(policy.own_index(int(t.flat[0])), want, rtol=1e-12, atol=0)


@settings(max_examples=80, deadline=None, derandomize=True)
@given(
    st.lists(st.integers(0, 3), min_size=1, max_size=6).flatmap(
        lambda row: st.tuples(st.just(row), st.floats(0.0, 1.0, exclude_max=True))
    )
)
def test_prop_argmax_one_uniform_picks_the_floor_u_k_th_tied_arm(case):
    row, u = case
    index = np.array([row], dtype=np.float64)
    arm = int(argmax_one_uniform(index, np.array([u]))[0])
    tied = np.flatnonzero(index[0] == index[0].max())
    assert arm == tied[min(int(u * tied.size), tied.size - 1)]


def test_argmax_one_uniform_is_uniform_over_ties_and_handles_inf():
    rng = np.random.default_rng(0)
    index = np.tile(np.array([1.0, np.inf, 0.5, np.inf, np.inf]), (30000, 1))
    picks = argmax_one_uniform(index.reshape(100, 300, 5), rng.random((100, 300))).reshape(-1)
    freq = np.bincount(picks, minlength=5) / picks.size
    assert freq[[0, 2]].sum() == 0 and np.allclose(freq[[1, 3, 4]], 1 / 3, atol=0.01)
    plain = rng.random((40, 7))
    assert np.array_equal(argmax_one_uniform(plain, rng.random(40)), plain.argmax(axis=1))


# ---------------------------------------------------------------- gossip_ucb / gossip_fed_ucb
from agents.gossip_ucb import GossipUCB  # noqa: E402


def test_gossip_bonus_matches_the_eq11_formula():
    policy = GossipUCB()
    kw = {"num_agents": 4, "num_arms": 3, "topology": "ring"}
    _run(policy, "FedBandit/Homogeneous-v0", 2, 40, **kw)
    t = policy.round
    scale, n = policy.config.bonus_scale, policy.n
    want = scale * np.sqrt(2.0 * policy.N * np.log(t) / n) + policy.alpha1
    assert np.allclose(policy.bonus(t), want, rtol=1e-12, atol=0)


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**16), lockstep=st.booleans(), N=st.sampled_from([5, 40]))
def test_prop_centralized_pooling_equals_add_at(seed, lockstep, N):
    """centralized_ucb1 pools the lock-step pulls with one sequential accumulate per run (5 and
    40 agents): the same additions in the same order as ``np.add.at`` (bit for bit, Gaussian
    rewards)."""
    from baselines.oracle_ucb import CentralizedUCB1

    rng = np.random.default_rng(seed)
    B, M = 4, 3
    policy = CentralizedUCB1()
    policy.M, policy.N = M, N
    policy.counts = rng.integers(1, 9, (B, M)).astype(np.float64)
    policy.sums = rng.normal(size=(B, M))
    policy._b = np.arange(B)[:, None]
    policy._run_base = np.arange(B) * M
    counts, sums = policy.counts.copy(), policy.sums.copy()
    for _ in range(5):
        arms = rng.integers(0, M, (B, N))
        if lockstep:
            arms[:] = arms[:, :1]
        rewards = rng.normal(size=(B, N)) * 10.0 ** rng.integers(-3, 4)
        policy._pool(arms, rewards)
        np.add.at(counts, (policy._b, arms), 1.0)
        np.add.at(sums, (policy._b, arms), rewards)
        assert np.array_equal(policy.counts, counts)
        assert np.array_equal(policy.sums.view(np.int64), sums.view(np.int64))


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**16), dtype=st.sampled_from([np.float64, np.int64]))
def test_prop_scatter_add_equals_fancy_add(seed, dtype):
    """``scatter_add`` at distinct positions (2-D index, array or scalar values of another
    dtype) leaves exactly what ``target.reshape(-1)[flat] += values`` leaves."""
    from fedbandit_env.kernels import scatter_add

    rng = np.random.default_rng(seed)
    target = (rng.normal(size=(3, 4, 5)) * 100).astype(dtype)
    flat = (np.arange(12).reshape(3, 4) * 5 + rng.integers(0, 5, (3, 4))).astype(np.int64)
    for values in (rng.normal(size=(3, 4)), 1, rng.integers(0, 3, (3, 4))):
        want = target.copy()
        want.reshape(-1)[flat] += np.asarray(values).astype(dtype)
        scatter_add(target, flat, values)
        assert target.tobytes() == want.tobytes()
    with pytest.raises(ValueError, match="C-contiguous"):
        scatter_add(target.transpose(2, 1, 0), flat, 1.0)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**16), rows=st.integers(1, 40), m=st.integers(1, 9))
def test_prop_argmax_one_uniform_equals_a_per_row_loop(seed, rows, m):
    """Batched rows with many ties, infinities and some NaN: each row's arm is the
    ``floor(u k)``-th of its ``k`` maximal arms, or arg-max's (the first NaN) in a NaN row."""
    rng = np.random.default_rng(seed)
    index = rng.integers(0, 3, (rows, m)).astype(np.float64)
    index[rng.random((rows, m)) < 0.2] = np.inf
    index[rng.random((rows, m)) < 0.1] = -np.inf
    index[rng.random((rows, m)) < 0.05] = np.nan
    u = rng.random(rows)
    want = []
    for row, ur in zip(index, u, strict=True):
        if np.isnan(row).any():
            want.append(int(np.argmax(row)))
            continue
        tied = np.flatnonzero(row == row.max())
        want.append(int(tied[min(int(ur * tied.size), tied.size - 1)]))
    assert argmax_one_uniform(index, u).tolist() == want


@pytest.mark.parametrize("drop_prob", [0.0, 0.3])
def test_shared_latest_table_keeps_the_last_statistics_of_every_slot(drop_prob):
    """The per-slot table is kept lazily (a full delivery is held as it is); after every step it
    equals the table written slot by slot: the slot's new statistics where its message arrived,
    the previous ones where it was dropped."""
    policy = UCB1Shared()
    kw = {**RING}
    channels = {CHANNEL: {"kind": "neighbors", "dim": 2 * RING["num_arms"], "drop_prob": drop_prob}}
    venv = fedbandit_env.make_vec(
        "FedBandit/Homogeneous-v0", num_runs=3, horizon=60, channels=channels, **kw
    )
    obs, _ = venv.reset(seed=2)
    policy.reset(venv.facts, venv.agent_rng())
    want = np.zeros_like(policy.latest)
    partial = 0
    for _ in range(60):
        action = policy.act(obs)
        heard = obs.deliveries[CHANNEL]
        if obs.step > 0:
            partial += not heard.mask.all()
            fresh = heard.payload.transpose(2, 0, 1, 3)
            want = np.where(heard.mask.transpose(2, 0, 1)[..., None], fresh, want)
        assert np.array_equal(policy.latest, want)
        obs, *_ = venv.step(action.arms, action.messages)
    assert (partial > 0) == (drop_prob > 0)


@pytest.mark.parametrize("topology", ["ring", "complete", "star"])
def test_shared_received_sum_equals_the_slot_by_slot_sum(topology):
    """The shared variants' neighbour sums (one ``einsum`` over the slots, counts split from
    sums) equal the former slot-by-slot sum from 0.0 bit for bit, on real-valued (noisy)
    statistics, full deliveries and deliveries with missed slots alike."""
    policy = UCB1Shared()
    M = 3
    channels = {CHANNEL: {"kind": "neighbors", "dim": 2 * M}}
    venv = fedbandit_env.make_vec(
        "FedBandit/Homogeneous-v0",
        num_runs=2,
        num_agents=6,
        num_arms=M,
        horizon=5,
        topology=topology,
        channels=channels,
    )
    obs, _ = venv.reset(seed=0)
    policy.reset(venv.facts, venv.agent_rng())
    senders = obs.deliveries[CHANNEL].senders
    D = senders.shape[1]
    rng = np.random.default_rng(5)
    table = np.zeros((D, 2, 6, 2 * M))  # the slot-by-slot latest table of the former code
    for step in range(12):
        mask = np.broadcast_to(senders >= 0, (2, 6, D)).copy()
        if step % 3 == 2:  # some slots missed: their previous statistics stay
            mask &= rng.random(mask.shape) < 0.6
        payload = rng.standard_normal((2, 6, D, 2 * M)) * 10.0 ** rng.integers(-3, 4)
        payload = np.where(mask[..., None], payload, 0.0)
        delivery = type(obs.deliveries[CHANNEL])(senders, mask, payload)
        got = policy._received(delivery)
        table = np.where(mask.transpose(2, 0, 1)[..., None], payload.transpose(2, 0, 1, 3), table)
        want = np.add(table[0], 0.0)
        for slot in table[1:]:
            want += slot
        assert got.shape == (2, 2, 6, M)
        assert np.array_equal(got[0], want[..., :M]) and np.array_equal(got[1], want[..., M:])
