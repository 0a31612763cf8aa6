"""The ``reward_delay`` option (docs/time.md, "reward_delay"): the reward of a run's pull t
reaches its agent in the observation of pull t + d, on both engines; regret is charged at pull
time; learners accept it or refuse it by name; and Joulani et al.'s additive penalty on UCB1."""

from __future__ import annotations

import math

import numpy as np
import pytest

import fedbandit_env
from fedbandit_env.bench.evaluate import evaluate, incompatibility
from fedbandit_env.config import make_config
from fedbandit_env.errors import ConfigError

HOMOG = "FedBandit/Homogeneous-v0"
MEANS = [0.7, 0.6, 0.5, 0.4, 0.3]  # the spec's delayed-reward instance: sum of gaps 1.0


def _steps(delay, horizon=30, pull_every=1, clock=None, seed=0):
    """Step the numpy engine (arm t mod 5 for everyone); with ``pull_every`` > 1, every other
    step is communication-only. The rewards drawn, the arrivals and the last rewards seen."""
    venv = fedbandit_env.make_vec(HOMOG, num_runs=2, num_agents=3, num_arms=5, horizon=horizon,
                                  means=MEANS, channels=(), reward_delay=delay, clock=clock)  # fmt: skip
    obs, _ = venv.reset(seed=seed)
    rows = {"reward": [], "arm": [], "arrived_arm": [], "arrived_reward": [], "seen": [],
            "regret": [], "pulled": []}  # fmt: skip
    t = 0
    while not venv.engine.truncated:
        pull = (t % pull_every) == 0
        arms = np.full((2, 3), t % 5)
        obs, r, info = venv.engine.step(arms, pull=pull)
        t += 1
        if not pull:
            assert obs.arrived_arm is None or (obs.arrived_arm == -1).all()  # nothing arrives
            continue
        rows["reward"].append(r.copy())
        rows["arm"].append(arms)
        rows["regret"].append(info.instant_regret.copy())
        rows["seen"].append(obs.last_reward.copy())
        rows["pulled"].append(np.ones((2, 3), bool) if obs.pulled is None else obs.pulled.copy())
        if obs.arrived_arm is not None:
            rows["arrived_arm"].append(obs.arrived_arm.copy())
            rows["arrived_reward"].append(obs.arrived_reward.copy())
    return {k: np.array(v) for k, v in rows.items()}


@pytest.mark.parametrize("pull_every", [1, 2])
def test_the_reward_of_pull_t_arrives_with_pull_t_plus_d(pull_every):
    d = 4
    plain, late = _steps(None, pull_every=pull_every), _steps(d, pull_every=pull_every)
    np.testing.assert_array_equal(late["reward"], plain["reward"])  # the delay moves no draw
    np.testing.assert_array_equal(late["regret"], plain["regret"])  # charged at pull time
    assert (late["seen"] == 0).all()  # the reward of the pull just made is not seen yet
    np.testing.assert_array_equal(late["arrived_arm"][:d], -1)
    np.testing.assert_array_equal(late["arrived_arm"][d:], plain["arm"][:-d])
    np.testing.assert_array_equal(late["arrived_reward"][d:], plain["reward"][:-d])
    # rewards due after the horizon never arrive: T - d arrivals per agent
    assert ((late["arrived_arm"] >= 0).sum(axis=0) == 30 - d).all()


def test_under_an_event_clock_only_the_client_that_pulled_gets_its_reward_back():
    d = 3
    tr = _steps(d, horizon=40, clock="one_random")
    np.testing.assert_array_equal(tr["arrived_arm"][d:] >= 0, tr["pulled"][:-d])
    np.testing.assert_array_equal(np.where(tr["pulled"][:-d], tr["reward"][:-d], 0.0),
                                  tr["arrived_reward"][d:])  # fmt: skip


def test_the_jax_engine_delivers_the_same_line():
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    import fedbandit_env.jax as fj

    d, horizon = 4, 20
    env = fj.make(HOMOG, num_agents=3, num_arms=5, horizon=horizon, means=MEANS, channels=(),
                  reward_delay=d)  # fmt: skip

    def run(key):
        obs, state = env.reset(key)

        def body(carry, inputs):
            obs, state = carry
            k, t = inputs
            action = fj.Action(jnp.full(3, t % 5, jnp.int32), {})
            obs, state, r, _, _ = env.step(k, state, action)
            return (obs, state), (r, obs.arrived_arm, obs.arrived_reward, obs.last_reward)

        keys = jax.random.split(key, horizon)
        return jax.lax.scan(body, (obs, state), (keys, jnp.arange(horizon)))[1]

    r, arm, reward, seen = (np.asarray(x) for x in jax.jit(run)(jax.random.PRNGKey(0)))
    assert (seen == 0).all()
    np.testing.assert_array_equal(arm[:d], -1)
    np.testing.assert_array_equal(arm[d:], np.repeat(np.arange(horizon - d)[:, None] % 5, 3, 1))
    np.testing.assert_array_equal(reward[d:], r[:-d])


@pytest.mark.parametrize(
    "delay, match",
    [
        (-1, r"reward_delay.*>= 0"),
        (31, r"reward_delay.*<= 30"),
        ({"kind": "geometric", "mean": 10}, r"reward_delay: 'geometric' expects exactly \['mean', "
         r"'max'\]"),
        ({"kind": "lognormal", "mu": 1}, r"reward_delay: kind: expected one of \('fixed', "
         r"'geometric', 'uniform', 'pareto'\)"),
        ({"kind": "fixed"}, r"reward_delay: 'fixed' expects exactly 'pulls'"),
        ({"kind": "fixed", "pulls": 2, "unit": "own_steps"}, r"'fixed' expects exactly 'pulls'"),
        ("ten", r"reward_delay"),
    ],
)  # fmt: skip
def test_a_wrong_delay_is_refused_by_name(delay, match):
    with pytest.raises(ConfigError, match=match):
        make_config(horizon=30, reward_delay=delay)


def test_no_delay_is_the_default_and_a_delay_with_an_adversary_is_refused():
    assert make_config(reward_delay=0).reward_delay is None
    assert make_config(reward_delay={"kind": "fixed", "pulls": 5}).reward_delay == 5
    with pytest.raises(ConfigError, match="reward_delay: a delay is not combined with adversary"):
        make_config(num_agents=4, reward_delay=3, adversary={"num_byzantine": 1})


def test_learners_accept_a_delay_or_refuse_it_by_name():
    kw = {"num_agents": 3, "horizon": 20, "reward_delay": 5}
    for agent in ("ucb1", "kl_ucb", "thompson_beta", "epsilon_greedy", "uniform", "ucb1_shared",
                  "thompson_beta_shared"):
        assert incompatibility(HOMOG, agent, kw) is None, agent
    for agent in ("gossip_ucb", "sw_ucb", "cdp_mab"):
        why = incompatibility(HOMOG, agent, kw)
        assert why is not None and f"{agent}: reward_delay: expected None" in why, why
    why = incompatibility("FedBandit/LinearContextual-v0", "linucb", kw)
    assert why is not None and "linucb: reward_delay: expected None" in why


def test_ucb1_uses_only_the_rewards_that_arrived():
    """At every pull, the arm an agent chose has the largest UCB1 index of a plain loop over
    the pulls whose rewards had arrived (those made at least d pulls before), t their number."""
    from baselines.ucb import UCB1

    d = 7
    venv = fedbandit_env.make_vec(HOMOG, num_runs=2, num_agents=2, num_arms=5, horizon=150,
                                  means=MEANS, channels=(), reward_delay=d)  # fmt: skip
    learner = UCB1()
    obs, _ = venv.reset(seed=2)
    learner.reset(venv.facts, venv.agent_rng())
    history = []  # (arms (B, N), rewards (B, N)) of every pull, from the no-delay view
    while not venv.engine.truncated:
        arms = learner.act(obs).arms
        known = history[: max(len(history) - d, 0)]  # the pulls at least d pulls back
        for b in range(2):
            for i in range(2):
                own = [(int(a[b, i]), float(r[b, i])) for a, r in known]
                n = np.array([sum(1 for a, _ in own if a == k) for k in range(5)])
                s = np.array([sum(r for a, r in own if a == k) for k in range(5)])
                arm = int(arms[b, i])
                if (n > 0).all():
                    index = s / n + np.sqrt(2.0 * math.log(len(own)) / n)
                    assert index[arm] >= index.max() - 1e-12, (b, i, len(history))
                else:
                    assert n[arm] == 0
        obs, rewards, _ = venv.engine.step(arms)
        history.append((arms.copy(), rewards.copy()))


def test_the_delay_adds_a_bounded_penalty_to_ucb1():
    """Joulani, György & Szepesvári (ICML 2013, Sec. 3): with a constant delay tau, UCB1 on the
    rewards that arrived pays an additive penalty that grows with tau, stays below the sum of
    the gaps times tau (1.0 tau here) and does not grow with T (JAX, 48 runs, T = 4,000)."""
    pytest.importorskip("jax")
    kw = {"num_agents": 1, "num_arms": 5, "horizon": 4000, "means": MEANS, "channels": ()}
    curves = {}
    for tau in (0, 20, 200):
        res = evaluate(HOMOG, "ucb1", runs=48, env_kwargs={**kw, "reward_delay": tau},
                       checkpoints=np.array([2000, 4000]), backend="jax")  # fmt: skip
        curves[tau] = res.regret_by_agent[:, :, 0]  # (runs, 2): R(T/2), R(T)
    base = curves[0]

    def excess(tau, c):
        diff = curves[tau][:, c] - base[:, c]  # the same seeds: paired differences
        return diff.mean(), diff.std(ddof=1) / math.sqrt(len(diff))

    (e20, s20), (e200, s200) = excess(20, 1), excess(200, 1)
    assert e200 - e20 > 3 * math.hypot(s20, s200)  # grows with tau
    for tau, (e, s) in ((20, (e20, s20)), (200, (e200, s200))):
        assert e < 1.0 * tau + 3 * s, (tau, e, s)  # below sum(gaps) tau
        half, s_half = excess(tau, 0)
        assert abs(e - half) < 3 * math.hypot(s, s_half) + 1.0, (tau, half, e)  # flat in T


def test_jax_ucb1_agrees_with_numpy_under_a_delay():
    """Mean final regret within 3 combined standard errors (other streams on each engine)."""
    pytest.importorskip("jax")
    kw = {"num_agents": 2, "num_arms": 5, "horizon": 600, "means": MEANS, "channels": (),
          "reward_delay": 25}  # fmt: skip
    a, b = (evaluate(HOMOG, "ucb1", runs=24, env_kwargs=kw, backend=be)
            .regret_by_agent[:, -1].sum(axis=1) for be in ("numpy", "jax"))  # fmt: skip
    se = math.sqrt(a.var(ddof=1) / len(a) + b.var(ddof=1) / len(b))
    assert abs(a.mean() - b.mean()) < 3 * se, (a.mean(), b.mean(), se)


def test_the_shared_baseline_shares_the_rewards_that_arrived():
    """ucb1_shared under a delay of d: after pull t every agent's own statistics hold the t - d
    pulls whose rewards arrived, and that is what it sends its neighbours."""
    from types import SimpleNamespace

    from baselines.ucb import UCB1Shared

    spec = UCB1Shared().channel_spec(SimpleNamespace(num_arms=3))
    venv = fedbandit_env.make_vec(HOMOG, num_runs=2, num_agents=4, num_arms=3, topology="ring",
                                  horizon=40, reward_delay=5, channels=spec)  # fmt: skip
    obs, _ = venv.reset(seed=2)
    policy = UCB1Shared()
    policy.reset(venv.facts, venv.agent_rng())
    for t in range(1, 13):
        action = policy.act(obs)  # folds the rewards of pull t - 1 - 5
        np.testing.assert_array_equal(policy.counts.sum(axis=-1), max(t - 1 - 5, 0))
        (send, payload), = action.messages.values()
        assert send.all()
        np.testing.assert_array_equal(payload[..., :3], policy.counts)
        obs, *_ = venv.step(action.arms, action.messages)
