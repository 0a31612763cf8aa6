"""Linear contextual family (Dubey & Pentland; docs/linear.md): environment, FedLinUCB, LinUCB
baselines."""

from __future__ import annotations

import math

import numpy as np
import pytest

import fedbandit_env
from agents.fed_lin_ucb import FedLinUCB
from baselines.linucb import LinUCB
from fedbandit_env import ConfigError
from fedbandit_env.bench import evaluate
from fedbandit_env.policy import run_episode

ENV = "FedBandit/LinearContextual-v0"


def venv(runs=2, **kw):
    v = fedbandit_env.make_vec(ENV, num_runs=runs, **{"num_agents": 4, "horizon": 300, **kw})
    obs, _ = v.reset(seed=3)
    return v, obs


def test_decision_sets_follow_the_generator():
    v, obs = venv(runs=5, dim=6, num_arms=8)
    x, theta = obs.context, v.engine.linear.theta
    assert x.shape == (5, 4, 8, 6)
    assert np.allclose(np.linalg.norm(x, axis=-1), 1.0) and np.allclose(
        np.linalg.norm(theta, axis=1), 1.0
    )
    means = np.einsum("bnkd,bd->bnk", x, theta)
    top = np.sort(means, axis=-1)
    assert np.all((top[..., -1] >= 0.7) & (top[..., -1] <= 0.8))
    assert np.all((top[..., :-1] >= 0.5) & (top[..., :-1] <= 0.6))
    assert not np.all(np.argmax(means, axis=-1) == 0)  # shuffled


def test_best_action_has_zero_regret_and_rewards_have_the_right_mean():
    v, obs = venv(runs=50, horizon=100)
    total, pays, means = 0.0, [], []
    for _ in range(100):
        m = np.einsum("bnkd,bd->bnk", obs.context, v.engine.linear.theta)
        best = np.argmax(m, axis=-1)
        obs, rewards, _, _, info = v.step(best)
        total += np.abs(info.instant_regret).sum()
        pays.append(rewards)
        means.append(np.take_along_axis(m, best[..., None], -1)[..., 0])
    assert total == 0.0
    assert np.mean(pays) == pytest.approx(np.mean(means), abs=0.02)


def test_shared_decision_sets_and_ball_theta():
    v, obs = venv(shared_decision_sets=True, theta="ball")
    assert np.array_equal(obs.context[:, 0], obs.context[:, 3])
    norms = np.linalg.norm(v.engine.linear.theta, axis=1)
    assert np.all((norms >= 0.8) & (norms <= 1.0))
    assert np.allclose(
        np.einsum("bnkd,bd->bnk", obs.context, v.engine.linear.theta).max(-1) <= 0.8, True
    )


def test_parallel_view_equals_vector_view_with_a_learner():
    kwargs = {
        "num_agents": 3,
        "horizon": 60,
        "channels": FedLinUCB().channel_spec(fedbandit_env.make_vec(ENV, num_agents=3).config),
    }
    env = fedbandit_env.make(ENV, **kwargs)
    trajectory = run_episode(env, FedLinUCB(epsilon=1.0, sync_threshold=50.0), seed=4)
    res = evaluate(
        ENV,
        FedLinUCB,
        runs=2,
        seed=3,
        env_kwargs=kwargs,
        agent_kwargs={"epsilon": 1.0, "sync_threshold": 50.0},
    )
    pulls = [infos for *_, infos in trajectory if infos["agent_0"]["phase"] == 0]
    assert len(pulls) == 60 and len(trajectory) > 60  # the syncs were communication steps
    regret = np.cumsum([sum(i["instant_regret"] for i in infos.values()) for infos in pulls])
    assert np.allclose(regret, res.regret_network[1])


def test_nonprivate_d0_synchronizes_the_exact_pooled_gram_paper_timing():
    """Without privacy and with D = 0: at trial s, W = M lambda I + the pooled Gram matrix of all
    agents' trials <= s - 1 (a sync, one communication step, after every trial)."""
    policy = FedLinUCB(private=False, sync_threshold=0.0)
    v = fedbandit_env.make_vec(
        ENV,
        num_runs=2,
        num_agents=3,
        dim=4,
        num_arms=5,
        horizon=40,
        channels=policy.channel_spec(fedbandit_env.make_vec(ENV, dim=4).config),
    )
    obs, _ = v.reset(seed=0)
    policy.reset(v.facts, v.agent_rng())
    gram = np.zeros((2, 4, 4))
    steps = 0
    while not v.engine.truncated:
        action = policy.act(obs)
        pulling = np.ones(2, dtype=bool) if action.pull is None else action.pull
        assert pulling.all() != (steps % 2 == 1)  # pull, sync, pull, sync, ...
        if pulling.all():
            assert np.allclose(policy.W, (3 * np.eye(4) + gram)[:, None]), steps
            assert np.allclose(policy.U, 0.0)
            x = np.take_along_axis(obs.context, action.arms[..., None, None], axis=2)[:, :, 0]
            gram = gram + np.einsum("bni,bnj->bij", x, x)
        obs, *_ = v.step(action.arms, action.messages, action.pull)
        steps += 1
    assert steps == 79 and np.all(policy.n_sync == 39)  # no sync after the last trial


def test_nonprivate_d0_synchronizes_the_exact_pooled_gram():
    """The same, shifted by the message latency (``timing="latency"``): at trial s, W = M
    lambda I + the pooled Gram matrix of all agents' trials <= s - 2."""
    policy = FedLinUCB(private=False, sync_threshold=0.0, timing="latency")
    v = fedbandit_env.make_vec(
        ENV,
        num_runs=2,
        num_agents=3,
        dim=4,
        num_arms=5,
        horizon=40,
        channels=policy.channel_spec(fedbandit_env.make_vec(ENV, dim=4).config),
    )
    obs, _ = v.reset(seed=0)
    policy.reset(v.facts, v.agent_rng())
    grams = [np.zeros((2, 4, 4))]
    for s in range(1, 41):
        action = policy.act(obs)
        if s >= 3:
            expected = 3 * np.eye(4) + grams[s - 2]
            assert np.allclose(policy.W, expected[:, None]), s
        x = np.take_along_axis(obs.context, action.arms[..., None, None], axis=2)[:, :, 0]
        grams.append(grams[-1] + np.einsum("bni,bnj->bij", x, x))
        obs, *_ = v.step(action.arms, action.messages, action.pull)
    assert np.all(policy.n_sync == 38)  # uploads at trials 2..40; the last arrives after the end


def test_single_agent_nonprivate_equals_oful():
    """M = 1, private=False, D = 0 plays like OFUL (up to float rounding)."""
    kw = {"num_agents": 1, "horizon": 400}
    fed = evaluate(
        ENV,
        "fed_lin_ucb",
        runs=3,
        seed=1,
        env_kwargs=kw,
        agent_kwargs={"private": False, "sync_threshold": 0.0},
    )
    oful = evaluate(ENV, "linucb", runs=3, seed=1, env_kwargs=kw)
    assert np.allclose(fed.regret_network, oful.regret_network)


def test_sync_counts_fall_as_D_grows_and_private_costs_regret():
    kw = {"num_agents": 5, "horizon": 600}
    syncs = []
    for D in (0.0, 5.0, 200.0):
        policy = FedLinUCB(private=False, sync_threshold=D)
        evaluate(ENV, policy, runs=3, seed=0, env_kwargs=kw)
        syncs.append(policy.n_sync.mean())
    assert syncs[0] > syncs[1] > syncs[2] >= 1
    private = evaluate(
        ENV,
        "fed_lin_ucb",
        runs=4,
        seed=0,
        env_kwargs=kw,
        agent_kwargs={"epsilon": 1.0, "beta_scale": 0.01},
    )
    plain = evaluate(
        ENV,
        "fed_lin_ucb",
        runs=4,
        seed=0,
        env_kwargs=kw,
        agent_kwargs={"private": False, "beta_scale": 0.01},
    )
    assert private.final_regret_per_agent.mean() > 1.5 * plain.final_regret_per_agent.mean()


@pytest.mark.parametrize(("num_agents", "dim", "horizon"), [(5, 10, 600), (3, 4, 400)])
def test_nonprivate_sync_count_respects_proposition_1(num_agents, dim, horizon):
    """Proposition 1 of Dubey & Pentland: with private=False (rho_min = rho_max = lambda) at most
    2 sqrt((d T / D) ln(1 + T L^2 / (d lambda))) + 4 sync rounds, for every run and D."""
    ell = math.log(1.0 + horizon / dim)
    kw = {"num_agents": num_agents, "dim": dim, "num_arms": min(10, dim * dim), "horizon": horizon}
    for D in (0.5, 5.0, 50.0, None):
        policy = FedLinUCB(private=False, sync_threshold=D)
        evaluate(ENV, policy, runs=3, seed=0, env_kwargs=kw)
        bound = 2.0 * math.sqrt(dim * horizon / policy.threshold * ell) + 4.0
        assert np.all(policy.n_sync >= 1)
        assert np.all(policy.n_sync <= bound), (D, policy.n_sync, bound)


def test_privacy_does_not_change_the_environment_draws():
    """The decision sets and the reward noise are the same with privacy on (two
    epsilons) and off under one seed, although the agents act differently; the privatizer's
    noise does not depend on the environment's draws either."""
    kw = {"num_agents": 3, "dim": 4, "horizon": 120, "reward": {"kind": "gaussian", "sigma": 0.3}}
    traces = []
    for agent_kwargs in ({"private": False}, {"epsilon": 1.0}, {"epsilon": 10.0}):
        policy = FedLinUCB(sync_threshold=0.0, beta_scale=0.01, **agent_kwargs)
        spec = policy.channel_spec(fedbandit_env.make_vec(ENV, dim=4).config)
        v = fedbandit_env.make_vec(ENV, num_runs=2, channels=spec, **kw)
        obs, _ = v.reset(seed=11)
        policy.reset(v.facts, v.agent_rng())
        contexts, noise, arms = [obs.context.copy()], [], []
        for _ in range(120):
            action = policy.act(obs)
            obs, rewards, _, _, info = v.step(action.arms, action.messages, action.pull)
            contexts.append(obs.context.copy())
            noise.append(rewards - info.expected_reward)
            arms.append(action.arms)
        traces.append((np.stack(contexts), np.stack(noise), np.stack(arms)))
    (c0, n0, a0), *others = traces
    for c, n, a in others:
        assert np.array_equal(c, c0)
        assert np.allclose(n, n0, rtol=0.0, atol=1e-12)
        assert (a != a0).mean() > 0.2  # the learners did differ
    trees = []
    for reward in ("bernoulli", {"kind": "gaussian", "sigma": 0.3}):
        policy = FedLinUCB(epsilon=1.0, schedule="fixed", num_syncs=4)
        evaluate(ENV, policy, runs=2, seed=11, env_kwargs={**kw, "reward": reward})
        trees.append(policy.tree)
    assert np.array_equal(trees[0].noise(), trees[1].noise())
    assert not np.allclose(trees[0].exact(), trees[1].exact())


def test_paper_preset():
    """FedBandit/LinearPaper-v0 (Dubey & Pentland, Section 4.4): d = 10, M = 100, K = 10,
    T = 10^7, Bernoulli; its facts give FedLinUCB the constants of the reference table row of
    tests/test_privacy_gram_tree.py (eps = 1, M = 100, n = T)."""
    policy = FedLinUCB(epsilon=1.0)
    spec = policy.channel_spec(fedbandit_env.make_vec("FedBandit/LinearPaper-v0").config)
    v = fedbandit_env.make_vec("FedBandit/LinearPaper-v0", num_runs=1, channels=spec)
    obs, _ = v.reset(seed=0)
    facts = v.facts
    assert (facts.family, facts.num_agents, facts.num_arms, facts.horizon) == (
        "linear",
        100,
        10,
        10_000_000,
    )
    assert facts.extra["dim"] == 10 and facts.reward_bounds == (0.0, 1.0)
    assert obs.context.shape == (1, 100, 10, 10)
    policy.reset(facts, v.agent_rng())
    c = policy.constants
    assert c.m == 25
    assert (c.sigma_N, c.Lambda, c.kappa, c.sync_threshold) == (
        pytest.approx(119.8, rel=5e-4),
        pytest.approx(6.269e4, rel=5e-4),
        pytest.approx(42.3, rel=5e-3),
        pytest.approx(5.07e7, rel=5e-3),
    )
    env = fedbandit_env.make("FedBandit/LinearPaper-v0")
    assert len(env.possible_agents) == 100
    assert env.observation_space("agent_0")["decision_set"].shape == (10, 10)
    assert env.action_space("agent_0")["arm"].n == 10


def test_fixed_schedule_syncs_exactly_n_times_and_batch_independence():
    kw = {"num_agents": 3, "horizon": 200}
    policy = FedLinUCB(epsilon=1.0, schedule="fixed", num_syncs=5)
    both = evaluate(ENV, policy, runs=2, seed=7, env_kwargs=kw)
    assert np.all(policy.n_sync == 5)
    assert policy.constants.m == 1 + math.ceil(math.log2(5))
    alone = evaluate(
        ENV, FedLinUCB(epsilon=1.0, schedule="fixed", num_syncs=5), runs=1, seed=8, env_kwargs=kw
    )
    assert np.array_equal(both.regret_network[1], alone.regret_network[0])


@pytest.mark.parametrize(("timing", "lag"), [("paper", 1), ("latency", 2)])
def test_fixed_schedule_bounds_num_syncs_by_the_horizon(timing, lag):
    """num_syncs = T - 1 (paper timing; latency: T - 2) gives that many distinct sync trials,
    all complete; more raises."""
    kw = {"num_agents": 3, "horizon": 12}
    n = 12 - lag
    policy = FedLinUCB(epsilon=1.0, schedule="fixed", num_syncs=n, timing=timing)
    evaluate(ENV, policy, runs=2, seed=0, env_kwargs=kw)
    assert np.all(policy.n_sync == n)
    with pytest.raises(
        ConfigError,
        match=rf"fed_lin_ucb: num_syncs: expected at most horizon - {lag} = {n} .*got {n + 1}",
    ):
        policy = FedLinUCB(epsilon=1.0, schedule="fixed", num_syncs=n + 1, timing=timing)
        evaluate(ENV, policy, runs=1, env_kwargs=kw)


def test_horizon_shorter_than_one_sync_round_is_rejected():
    with pytest.raises(
        ConfigError, match=r"fed_lin_ucb: horizon: expected at least 3 trials, got 2"
    ):
        evaluate(ENV, FedLinUCB(), runs=1, env_kwargs={"num_agents": 2, "horizon": 2})
    policy = FedLinUCB(private=False, sync_threshold=0.0, timing="latency")
    evaluate(ENV, policy, runs=1, env_kwargs={"num_agents": 2, "horizon": 3})
    assert policy.n_sync.tolist() == [1]
    policy = FedLinUCB(private=False, sync_threshold=0.0)  # paper: after trials 1 and 2
    evaluate(ENV, policy, runs=1, env_kwargs={"num_agents": 2, "horizon": 3})
    assert policy.n_sync.tolist() == [2]


def test_centralized_oracle_beats_independent_agents():
    kw = {"num_agents": 6, "horizon": 800}
    oracle = evaluate(ENV, "centralized_linucb", runs=3, seed=0, env_kwargs=kw)
    alone = evaluate(ENV, "linucb", runs=3, seed=0, env_kwargs=kw)
    assert oracle.final_regret_per_agent.max() < 0.5 * alone.final_regret_per_agent.min()


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"epsilon": 0}, r"fed_lin_ucb: epsilon: expected a finite number > 0"),
        ({"epsilon": -1.0}, r"fed_lin_ucb: epsilon"),
        ({"delta": 1.5}, r"fed_lin_ucb: delta"),
        ({"schedule": "fixed"}, r"fed_lin_ucb: num_syncs"),
        ({"schedule": "weekly"}, r"fed_lin_ucb: schedule"),
        ({"beta_scale": -1}, r"fed_lin_ucb: beta_scale"),
    ],
)
def test_bad_parameters(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        FedLinUCB(**kwargs)


def test_wrong_environment_fails_before_the_first_step():
    mab = fedbandit_env.make_vec("FedBandit/Homogeneous-v0", num_runs=1)
    mab.reset(seed=0)
    with pytest.raises(ConfigError, match=r"fed_lin_ucb: family: expected 'linear'"):
        FedLinUCB().reset(mab.facts, mab.agent_rng())
    lin, _ = venv(channels=())
    with pytest.raises(ConfigError, match=r"fed_lin_ucb: channels\.sync"):
        FedLinUCB().reset(lin.facts, lin.agent_rng())
    with pytest.raises(ConfigError, match=r"linucb: family"):
        LinUCB().reset(mab.facts, mab.agent_rng())


def test_linear_kwargs_are_rejected_on_mab_ids():
    with pytest.raises(ConfigError, match=r"unknown keyword argument\(s\) \['dim'\]"):
        fedbandit_env.make("FedBandit/Heterogeneous-v0", dim=4)
