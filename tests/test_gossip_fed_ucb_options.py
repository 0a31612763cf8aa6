"""Fed_UCB options (Algorithms 2-4 of the gossip paper; docs/gossip.md, decisions 1, 4, 8-11):
the reward range and Laplace scale (decision 11), tree indexing, noise on empty blocks, the
paper's level count, the DP bonus scale and the literal line order, each checked for its specific
effect at agent level."""

from __future__ import annotations

import math

import numpy as np
import pytest

from agents.gossip_ucb import GossipFedUCB, GossipUCB, exploration_bonus
from fedbandit_env import ConfigError
from tests.helpers import gossip_venv

ENV = "FedBandit/Heterogeneous-v0"
GAUSSIAN = {"kind": "gaussian", "sigma": 1.0}


def _venv(n=4, m=3, rounds=200, topology="ring", runs=2, reward=GAUSSIAN, **kw):
    return gossip_venv(n, m, rounds, topology, runs, reward, **kw)


def _play(policy, rounds=200, seed=2, hook=None, **venv_kw):
    """Run ``policy``; ``hook(t, policy, arms)`` after each decision of round t >= 1."""
    venv = _venv(rounds=rounds, **venv_kw)
    m = venv.config.num_arms
    obs, _ = venv.reset(seed=seed)
    policy.reset(venv.facts, venv.agent_rng())
    for step in range(rounds + m):
        action = policy.act(obs)
        if hook is not None and step >= m:
            hook(step - m + 1, policy, action.arms.copy())
        obs, *_ = venv.step(action.arms, action.messages)
    return venv


def _first_decision(policy, **venv_kw):
    """Reset and play the initialization; the counter then holds only the init leaf."""
    venv = _venv(**venv_kw)
    m = venv.config.num_arms
    obs, _ = venv.reset(seed=7)
    policy.reset(venv.facts, venv.agent_rng())
    for _ in range(m):
        action = policy.act(obs)
        obs, *_ = venv.step(action.arms, action.messages)
    policy.act(obs)
    return policy


# ----------------------------------------------------------------- reward range (decision 11)

T_LEVELS = math.floor(math.log2(200)) + 1  # default levels for T = 200 rounds


@pytest.mark.parametrize(
    ("reward", "clip", "sensitivity", "bounds", "holds"),
    [
        ("bernoulli", None, 1.0, (0.0, 1.0), True),
        (
            {"kind": "clipped_gaussian", "sigma": 1.0, "low": -5, "high": 5},
            None,
            10.0,
            (-5, 5),
            True,
        ),
        (
            {"kind": "clipped_gaussian", "sigma": 1.0, "low": -5, "high": 5},
            (0, 2),
            2.0,
            (0, 2),
            True,
        ),
        (GAUSSIAN, None, 1.0, None, False),  # the paper's setting: scale 1/eps', no guarantee
        (GAUSSIAN, (-1.0, 1.0), 2.0, (-1, 1), True),
    ],
)
def test_laplace_scale_follows_the_reward_bounds_and_the_clip(
    reward, clip, sensitivity, bounds, holds
):
    eps = 2.0
    policy = _first_decision(GossipFedUCB(epsilon=eps, reward_clip=clip), reward=reward)
    assert policy.sensitivity == sensitivity and policy.reward_bounds == bounds
    assert policy.counter.scale == pytest.approx(sensitivity * T_LEVELS / eps, rel=1e-12)
    assert policy.dp_guarantee_holds is holds
    assert (policy.dp_caveats == ()) is holds
    # the noise actually drawn: the init leaf's Laplace noise is the seed's standard draws times
    # the scale, so dividing by sensitivity gives the same values for every range (paired seed)
    reference = _first_decision(GossipFedUCB(epsilon=eps), reward="bernoulli")
    assert np.allclose(policy.counter.noise() / sensitivity, reference.counter.noise(), rtol=1e-12)
    assert np.all(reference.counter.noise() != 0)


def test_unbounded_rewards_declare_that_the_guarantee_does_not_hold():
    policy = _first_decision(GossipFedUCB(epsilon=1.0))
    assert policy.dp_guarantee_holds is False
    assert len(policy.dp_caveats) == 1 and "unbounded rewards" in policy.dp_caveats[0]
    assert policy.counter.scale == pytest.approx(T_LEVELS / 1.0)
    plain = _first_decision(GossipUCB())
    assert plain.dp_guarantee_holds is False and "no privacy" in plain.dp_caveats[0]
    paper_init = _first_decision(GossipFedUCB(epsilon=1.0, noisy_init=False), reward="bernoulli")
    assert paper_init.dp_guarantee_holds is False and "noisy_init" in paper_init.dp_caveats[0]


def test_reward_clip_clips_what_the_agent_learns_from():
    """Gaussian(1) rewards clipped to [0, 0.5]: the agent's sums are the sums of the clipped
    observed rewards (init included), the counter's exact part is that sum, and epsilon = inf
    clips the same way (the exact path)."""
    for eps in (1.0, math.inf):
        policy = GossipFedUCB(epsilon=eps, reward_clip=(0.0, 0.5))
        venv = _venv(rounds=150)
        obs, _ = venv.reset(seed=2)
        policy.reset(venv.facts, venv.agent_rng())
        clipped, raw = np.zeros(policy.S.shape), np.zeros(policy.S.shape)
        b, i = np.indices(policy.S.shape[:2])
        for _ in range(153):
            action = policy.act(obs)
            obs, *_ = venv.step(action.arms, action.messages)
            np.add.at(clipped, (b, i, action.arms), np.clip(obs.last_reward, 0.0, 0.5))
            np.add.at(raw, (b, i, action.arms), obs.last_reward)
        policy.act(obs)  # fold in the last observation
        assert np.allclose(policy.S, clipped, rtol=1e-12)
        assert not np.allclose(policy.S, raw)
        if eps == 1.0:  # a release is the clipped sum S plus the counter's noise
            assert not policy.counter.exact_blocks
            last = obs.last_arm
            noisy = (policy.S + policy.counter.noise())[b, i, last] / policy.n[b, i, last]
            assert np.array_equal(policy.xbar[b, i, last], noisy)


@pytest.mark.parametrize("clip", [(1, 0), (0, math.inf), (0,), "0,1", (True, 2)])
def test_bad_reward_clip(clip):
    with pytest.raises(ConfigError, match=r"gossip_fed_ucb: reward_clip: expected None or \(lo"):
        GossipFedUCB(reward_clip=clip)


# ------------------------------------------------------------------ tree options (Algorithm 2)


def _noise_term_reference(pull_rounds: list[int], t: int) -> int:
    """Non-empty dyadic blocks of 1..t (Algorithm 2, the text's version, decision 8: noise only on
    blocks holding a pull) plus the noised init leaf."""
    terms, end = 1, t
    while end:
        start = end & (end - 1)  # block (start, end]
        terms += any(start < r <= end for r in pull_rounds)
        end = start
    return terms


def _record_pulls(rounds=150):
    pulls: dict[tuple[int, int, int], list[int]] = {}
    terms = []

    def hook(t, policy, arms):
        # the counter now holds rounds 1..t-1; record its noise terms, then round t's pulls
        terms.append(
            (t - 1, policy.counter.num_noise_terms(), {k: list(v) for k, v in pulls.items()})
        )
        for b in range(arms.shape[0]):
            for i in range(arms.shape[1]):
                pulls.setdefault((b, i, int(arms[b, i])), []).append(t)

    return hook, terms


def _popcount(x: np.ndarray) -> np.ndarray:
    return np.vectorize(lambda v: bin(int(v)).count("1"))(x)


def test_round_tree_noises_only_blocks_with_a_pull():
    hook, terms = _record_pulls()
    _play(GossipFedUCB(epsilon=1.0), rounds=150, hook=hook)
    for t, got, pulls in terms[1:]:
        expected = np.array(
            [
                [
                    [_noise_term_reference(pulls.get((b, i, k), []), t) for k in range(3)]
                    for i in range(4)
                ]
                for b in range(2)
            ]
        )
        assert np.array_equal(got, expected), t
    assert terms[-1][1].min() < _popcount(np.array(149)) + 1  # some block was skipped


def test_noise_on_empty_blocks_noises_every_block():
    hook, terms = _record_pulls()
    _play(GossipFedUCB(epsilon=1.0, noise_on_empty_blocks=True), rounds=150, hook=hook)
    for t, got, _ in terms[1:]:
        assert np.all(got == bin(t).count("1") + 1), t  # popcount(t) blocks + the init leaf


def test_pull_indexed_tree_has_popcount_of_the_pull_count_noise_terms():
    """tree_index="pull": an arm's counter runs over its own pulls (the init pull is pull 1), so
    a release carries popcount(n) Laplace terms, n the arm's pull count."""
    seen = []

    def hook(t, policy, arms):
        seen.append((policy.counter.num_noise_terms(), policy.n.copy()))

    _play(GossipFedUCB(epsilon=1.0, tree_index="pull"), rounds=150, hook=hook)
    for got, n in seen:
        assert np.array_equal(got, _popcount(n))
    assert any(not np.array_equal(got, _popcount(n) - 1) for got, n in seen)


@pytest.mark.parametrize(("rounds", "paper", "default"), [(512, 9, 10), (500, 9, 9)])
def test_paper_privacy_levels_set_the_per_level_budget(rounds, paper, default):
    """ε' = ε/⌈log2 T⌉ with privacy_levels="paper", ε/(⌊log2 T⌋+1) by default (decision 4); the
    drawn noise scales accordingly (paired seeds), and a power-of-two T overspends."""
    eps = 2.0
    lit = _first_decision(
        GossipFedUCB(epsilon=eps, privacy_levels="paper"), rounds=rounds, reward="bernoulli"
    )
    dflt = _first_decision(GossipFedUCB(epsilon=eps), rounds=rounds, reward="bernoulli")
    assert lit.counter.epsilon_per_block == pytest.approx(eps / paper, rel=1e-12)
    assert dflt.counter.epsilon_per_block == pytest.approx(eps / default, rel=1e-12)
    assert np.allclose(lit.counter.noise() * default, dflt.counter.noise() * paper, rtol=1e-12)
    assert lit.dp_guarantee_holds is (paper == default) and dflt.dp_guarantee_holds


@pytest.mark.parametrize("floor", [1.0, 2.0])
def test_dp_bonus_scale_multiplies_the_privacy_term_of_eq_12(floor):
    rounds, eps, scale = 300, 2.0, 0.25
    checked = []

    def hook(t, policy, arms):
        if t < 3:
            return
        n, big_n, big_t = policy.n, policy.N, policy.T
        base = 2.0 * big_n * math.log(t) / n  # Eq. (11) radicand
        ln_n = np.log(np.maximum(n, floor))  # floor 1: the paper's ln n
        dp = 128.0 * big_n * math.log(big_t) ** 2 * math.log(t) * ln_n / (n * eps**2)
        c = policy.bonus(t)
        assert np.allclose(c, np.sqrt(base * (1.0 + scale * dp)) + policy.alpha1, rtol=1e-12)
        no_dp = {**policy.bonus_parameters(), "dp_bonus_scale": 0.0}  # no privacy term
        assert np.allclose(exploration_bonus(n, t, **no_dp), np.sqrt(base) + policy.alpha1,
                           rtol=1e-12)  # fmt: skip
        checked.append(t)

    _play(
        GossipFedUCB(epsilon=eps, dp_bonus_scale=scale, dp_log_floor=floor),
        rounds=rounds,
        hook=hook,
    )
    assert len(checked) == rounds - 2


def test_dp_log_floor_keeps_the_privacy_term_positive_at_one_pull():
    """At n = 1 the paper's ln n zeroes the privacy term (a noisy init can strand the arm); the
    default floor 2 keeps it; at n >= 2 both are the paper's bonus. ``eq12_bonus`` of
    agents.gossip_theory is the same formula, scalar."""
    from agents.gossip_theory import eq12_bonus

    seen = {1.0: False, 2.0: False}

    def hook(t, policy, arms):
        if t < 3:
            return
        c = policy.bonus(t) - policy.alpha1
        for (b, i, k), n in np.ndenumerate(policy.n):
            total, dp_part = eq12_bonus(t, n, policy.N, policy.T, policy.epsilon, 1.0, 2.0)
            assert c[b, i, k] == pytest.approx(total, rel=1e-12)
            assert dp_part > 0.0
            _, paper_part = eq12_bonus(t, n, policy.N, policy.T, policy.epsilon)
            assert (paper_part == 0.0) == bool(n == 1.0)
            seen[float(min(n, 2.0))] = True

    _play(GossipFedUCB(epsilon=1.0, noisy_init=True), rounds=40, hook=hook)
    assert seen[1.0] and seen[2.0]
    with pytest.raises(ConfigError, match=r"gossip_fed_ucb: dp_log_floor"):
        GossipFedUCB(dp_log_floor=0.5)


@pytest.mark.parametrize("literal", [False, True])
def test_literal_line_order_shifts_lemma_1_by_one_round(literal):
    """Decision 1: with the end-of-round order ñ_i(t) = max_j n_j(t − 1 − d(j, i)) (Lemma 1); with
    Algorithm 1's line order (ñ from the pre-pull count) ñ_i(t) = max_j n_j(t − 2 − d(j, i));
    n_j(s) = 0 for s < 0 (literal order from t = 2: ñ(1) = n(0) is the initialization)."""
    n_agents, shift = 5, 1 if literal else 0
    dist = _venv(n=n_agents, topology="path").config.topology.hop_distances
    history = []  # history[s] = n(s), the counts after round s (n(0): the init pulls)

    def hook(t, policy, arms):
        history.append(policy.n.copy())  # n(t-1); policy.ntil is ñ(t)
        expected = np.zeros_like(policy.ntil)
        for i in range(n_agents):
            for j in range(n_agents):
                s = t - 1 - shift - dist[i, j]
                if s >= 0:
                    expected[:, i] = np.maximum(expected[:, i], history[s][:, j])
        if t > shift:
            assert np.array_equal(policy.ntil, expected), t

    _play(GossipUCB(literal_line_order=literal), rounds=200, n=n_agents, topology="path", hook=hook)
