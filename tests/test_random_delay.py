"""Random reward delays (fedbandit_env/delay.py, docs/time.md "reward_delay"): every pull's
reward reaches its agent exactly once, in the slot of its delay, with its arm, its reward (the
undelayed run's draw) and its pull; the delays follow their laws; rewards due after the horizon
never arrive; a fixed delay's arrivals carry their pull too; UCB1 folds every arrived reward
once (a plain loop); learners that fold one reward per pull refuse random delays by name; the
PettingZoo view and the JAX engine agree with numpy."""

from __future__ import annotations

import math

import numpy as np
import pytest

import fedbandit_env
from fedbandit_env.bench.evaluate import evaluate
from fedbandit_env.config import make_config
from fedbandit_env.delay import RandomDelay, draw_delay
from fedbandit_env.errors import ConfigError

HOMOG = "FedBandit/Homogeneous-v0"
GEOMETRIC = {"kind": "geometric", "mean": 4, "max": 12}


def play(delay, horizon=60, runs=2, agents=3, clock=None):
    """Cycle the arms; per pull: the rewards drawn (the undelayed run's) and the arrivals."""
    kw = dict(num_runs=runs, num_agents=agents, num_arms=4, horizon=horizon, channels=(),
              clock=clock)  # fmt: skip
    plain = fedbandit_env.make_vec(HOMOG, **kw)
    late = fedbandit_env.make_vec(HOMOG, **kw, reward_delay=delay)
    plain.reset(seed=7)
    late.reset(seed=7)
    drawn, arrivals = [], []
    for t in range(horizon):
        arms = np.full((runs, agents), t % 4, np.int64)
        obs, *_ = plain.step(arms)
        drawn.append((obs.last_reward.copy(), obs.pulled))
        obs, *_ = late.step(arms)
        arrivals.append((obs.arrived_arm.copy(), obs.arrived_reward.copy(),
                         obs.arrived_pull.copy()))  # fmt: skip
        assert (obs.last_reward == 0).all()
    return drawn, arrivals


def test_every_reward_arrives_once_in_the_slot_of_its_delay_with_its_pull():
    drawn, arrivals = play(GEOMETRIC)
    horizon, seen = len(drawn), {}
    for t, (arm, reward, pull) in enumerate(arrivals, start=1):
        assert arm.shape == (2, 3, 12)
        for b, i, j in zip(*np.nonzero(arm >= 0), strict=True):
            made = t - j - 1  # slot j: the pull made j + 1 pulls before
            assert pull[b, i, j] == made and arm[b, i, j] == (made - 1) % 4
            assert reward[b, i, j] == drawn[made - 1][0][b, i]
            assert (b, i, made) not in seen
            seen[(b, i, made)] = t
        assert (pull[arm < 0] == -1).all() and (reward[arm < 0] == 0).all()
    # every pull arrives once, unless it is due after the horizon; delays within 1..max
    delays = np.array([t - made for (_, _, made), t in seen.items()])
    assert delays.min() >= 1 and delays.max() <= 12
    for b in range(2):
        for i in range(3):
            for made in range(1, horizon - 12):  # due by the horizon whatever its delay
                assert (b, i, made) in seen


def test_the_delays_follow_their_laws():
    u = np.random.default_rng(0).random(200_000)
    geo = draw_delay(u, RandomDelay("geometric", 10.0, 10_000))
    assert abs(geo.mean() - 10) < 0.1 and geo.min() == 1
    assert abs((geo == 1).mean() - 0.1) < 0.003  # P(d = 1) = p = 1 / mean
    capped = draw_delay(u, RandomDelay("geometric", 10.0, 5))
    assert capped.max() == 5 and abs((capped == 5).mean() - 0.9**4) < 0.005  # P(d >= 5)
    uni = draw_delay(u, RandomDelay("uniform", 3.0, 7))
    np.testing.assert_allclose(np.bincount(uni, minlength=8)[3:] / len(u), 0.2, atol=0.005)
    assert uni.min() == 3 and uni.max() == 7
    par = draw_delay(u, RandomDelay("pareto", 1.5, 10**9))
    for v in (2, 5, 20):  # P(d > v) = P(V > v) = v^-a for an integer v
        assert abs((par > v).mean() - v**-1.5) < 0.004
    assert (draw_delay(u[:100], RandomDelay("geometric", 1.0, 9)) == 1).all()


def test_a_fixed_delay_carries_the_pull_of_each_arrived_reward():
    _, arrivals = play(5, horizon=20)
    for t, (arm, _, pull) in enumerate(arrivals, start=1):
        np.testing.assert_array_equal(pull, t - 5 if t > 5 else -1)
        assert ((arm >= 0) == (t > 5)).all()


def test_under_an_event_clock_only_the_client_that_pulled_gets_its_reward():
    drawn, arrivals = play(GEOMETRIC, clock="one_random", horizon=80)
    for arm, _, pull in arrivals:
        for b, i, j in zip(*np.nonzero(arm >= 0), strict=True):
            made = int(pull[b, i, j])
            assert drawn[made - 1][1][b, i]  # client i pulled at that event
    total = sum(int((a >= 0).sum()) for a, *_ in arrivals)
    assert 2 * (80 - 12) <= total <= 2 * 80  # one pull per event, all but the last's arrive


def test_ucb1_folds_every_arrived_reward_once():
    from baselines.ucb import UCB1

    venv = fedbandit_env.make_vec(HOMOG, num_runs=2, num_agents=3, num_arms=4, channels=(),
                                  horizon=100, reward_delay=GEOMETRIC)  # fmt: skip
    obs, _ = venv.reset(seed=1)
    policy = UCB1()
    policy.reset(venv.facts, venv.agent_rng())
    counts, sums = np.zeros((2, 3, 4)), np.zeros((2, 3, 4))
    for _ in range(50):
        obs, *_ = venv.step(policy.act(obs).arms)
        for b, i, j in zip(*np.nonzero(obs.arrived_arm >= 0), strict=True):  # a plain loop
            counts[b, i, obs.arrived_arm[b, i, j]] += 1
            sums[b, i, obs.arrived_arm[b, i, j]] += obs.arrived_reward[b, i, j]
    policy.act(obs)
    np.testing.assert_array_equal(policy.counts, counts)
    np.testing.assert_allclose(policy.sums, sums, rtol=1e-12)
    np.testing.assert_array_equal(policy.pulls[..., 0], counts.sum(-1))


@pytest.mark.parametrize(
    ("delay", "match"),
    [
        ({"kind": "geometric", "mean": 0.5, "max": 3}, r"reward_delay.*mean"),
        ({"kind": "uniform", "low": 5, "high": 2}, r"reward_delay.*high"),
        ({"kind": "pareto", "shape": 0, "max": 3}, r"reward_delay.*shape"),
        ({"kind": "pareto", "shape": 1, "max": 99}, r"reward_delay.*max"),
    ],
)
def test_a_bad_random_delay_is_refused_by_name(delay, match):
    with pytest.raises(ConfigError, match=match):
        make_config(horizon=30, reward_delay=delay)


def test_learners_that_fold_one_reward_per_pull_refuse_random_delays_by_name():
    kw = {"num_agents": 3, "horizon": 40, "reward_delay": GEOMETRIC}
    for agent in ("thompson_beta", "sw_ucb"):
        with pytest.raises(ConfigError, match=rf"{agent}: reward_delay: expected None"):
            evaluate(HOMOG, agent, runs=1, env_kwargs=kw)
    for agent in ("ucb1", "kl_ucb", "thompson_gaussian", "epsilon_greedy", "uniform"):
        assert evaluate(HOMOG, agent, runs=1, env_kwargs=kw).final_regret_network.shape == (1,)


def test_through_the_pettingzoo_view_a_team_policy_plays_as_on_the_batched_engine():
    from baselines.ucb import UCB1
    from fedbandit_env.policy import run_episode

    kw = dict(num_agents=3, num_arms=4, horizon=80, channels=(), reward_delay=GEOMETRIC)
    env = fedbandit_env.make(HOMOG, **kw)
    assert env.observation_space("agent_0")["arrived_pull"].shape == (12,)
    trajectory = run_episode(env, UCB1(), seed=3)
    regret = sum(sum(i["instant_regret"] for i in infos.values()) for *_, infos in trajectory)
    batched = evaluate(HOMOG, "ucb1", runs=1, seed=3, env_kwargs=kw)
    np.testing.assert_allclose(regret, batched.final_regret_network[0], rtol=1e-12)


@pytest.mark.slow
def test_jax_delivers_each_reward_in_its_slot_and_agrees_with_numpy():
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    import fedbandit_env.jax as fj
    from fedbandit_env.jax.types import Action

    # a degenerate uniform law (every delay 3) through the random line, against a plain loop
    env = fj.make(HOMOG, num_agents=2, num_arms=4, horizon=20, channels=(),
                  reward_delay={"kind": "uniform", "low": 3, "high": 3})  # fmt: skip
    _, state = env.reset(jax.random.PRNGKey(0))
    step = jax.jit(env.step)
    drawn = []
    for t in range(1, 12):
        action = Action(jnp.full(2, t % 4, jnp.int32), {})
        obs, state, rewards, *_ = step(jax.random.PRNGKey(t), state, action)
        drawn.append(np.asarray(rewards))
        arm, pull = np.asarray(obs.arrived_arm), np.asarray(obs.arrived_pull)
        assert arm.shape == (2, 3)
        if t > 3:  # slot 2: the pull made 3 pulls before
            assert (pull[:, 2] == t - 3).all() and (arm[:, 2] == (t - 3) % 4).all()
            np.testing.assert_allclose(np.asarray(obs.arrived_reward)[:, 2], drawn[t - 4])
        assert (arm[:, :2] == -1).all() and ((arm[:, 2] >= 0) == (t > 3)).all()
    kw = dict(num_agents=3, num_arms=5, horizon=600, channels=(),
              means=[0.7, 0.6, 0.5, 0.4, 0.3], reward_delay={"kind": "pareto", "shape": 1.2,
                                                             "max": 200})  # fmt: skip
    runs = 60
    a = evaluate(HOMOG, "ucb1", runs=runs, env_kwargs=kw).final_regret_network
    b = evaluate(HOMOG, "ucb1", runs=runs, env_kwargs=kw, backend="jax").final_regret_network
    se = math.sqrt(a.var(ddof=1) / runs + b.var(ddof=1) / runs)
    assert abs(a.mean() - b.mean()) <= 3 * se, (a.mean(), b.mean(), se)
