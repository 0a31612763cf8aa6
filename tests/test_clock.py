"""The ``clock`` option (docs/time.md, "clock"): one client pulls per event, the horizon counts
events, regret is charged to the client that pulled, and every learner accepts an event clock
or refuses it by name. Checked against hand cases and plain loops over the trajectories."""

from __future__ import annotations

import math

import numpy as np
import pytest

import fedbandit_env
from fedbandit_env.bench.evaluate import evaluate, incompatibility
from fedbandit_env.clock import client_cdf, client_of, event_gap
from fedbandit_env.config import make_config
from fedbandit_env.errors import ConfigError
from fedbandit_env.policy import FederationFacts, check_event_time

HOMOG = "FedBandit/Homogeneous-v0"
MEANS = [0.9, 0.5, 0.2]


def _venv(clock, runs=2, agents=4, horizon=200, **kw):
    kw = {"num_agents": agents, "num_arms": 3, "horizon": horizon, "channels": (),
          "means": MEANS, **kw}  # fmt: skip
    venv = fedbandit_env.make_vec(HOMOG, num_runs=runs, clock=clock, **kw)
    return venv


def _trajectory(venv, arms_of=None, seed=0):
    """Step the engine to its horizon (arms from ``arms_of(t)`` or arm 2); the active masks,
    pulled masks, time stamps, instant regrets and last arms of every step."""
    obs, _ = venv.reset(seed=seed)
    rows = {"active": [], "pulled": [], "time": [], "regret": [], "last_arm": [], "pulls": []}
    t = 0
    while not venv.engine.truncated:
        rows["active"].append(obs.active.copy())
        rows["time"].append(obs.time.copy())
        arms = np.full(obs.last_arm.shape, 2) if arms_of is None else arms_of(t)
        obs, _, info = venv.engine.step(arms)
        rows["pulled"].append(obs.pulled.copy())
        rows["regret"].append(info.instant_regret.copy())
        rows["last_arm"].append(obs.last_arm.copy())
        rows["pulls"].append(obs.pulls.copy())
        t += 1
    return {k: np.array(v) for k, v in rows.items()}


# ------------------------------------------------------------------ what the clock does
@pytest.mark.parametrize("clock", ["one_random", {"kind": "poisson", "rates": [1, 2, 3, 4]}])
def test_one_client_pulls_per_event_and_the_horizon_counts_pulls(clock):
    tr = _trajectory(_venv(clock))
    assert tr["active"].shape[0] == 200  # T events, one engine step each
    np.testing.assert_array_equal(tr["active"].sum(axis=2), 1)  # one client per run and event
    np.testing.assert_array_equal(tr["pulled"], tr["active"])  # the announced client pulled
    np.testing.assert_array_equal(tr["pulls"][-1], [200, 200])  # pull counts equal T
    assert tr["pulled"].sum() == 2 * 200
    # regret is charged to the client that pulled, (0.9 - 0.2) per pull of arm 2
    np.testing.assert_allclose(tr["regret"], 0.7 * tr["pulled"])


def test_a_client_that_does_not_pull_keeps_its_last_pull():
    tr = _trajectory(_venv("one_random", runs=1), arms_of=lambda t: np.full((1, 4), t % 3))
    last = np.full(4, -1)
    for t in range(200):
        pulled = tr["pulled"][t, 0]
        last = np.where(pulled, t % 3, last)
        np.testing.assert_array_equal(tr["last_arm"][t, 0], last)


def test_one_random_is_uniform_over_clients_and_poisson_follows_the_rates():
    uniform = _trajectory(_venv("one_random", runs=4, horizon=2000))
    share = uniform["pulled"].sum(axis=(0, 1)) / (4 * 2000)
    np.testing.assert_allclose(share, 0.25, atol=4 * math.sqrt(0.25 * 0.75 / 8000))
    rates = np.array([1.0, 2.0, 3.0, 4.0])
    timed = _trajectory(_venv({"kind": "poisson", "rates": rates}, runs=4, horizon=2000))
    share = timed["pulled"].sum(axis=(0, 1)) / 8000
    p = rates / rates.sum()
    assert (np.abs(share - p) < 4 * np.sqrt(p * (1 - p) / 8000)).all(), (share, p)
    # the time between events is exponential with rate sum(lambda) = 10: mean 0.1, sd 0.1
    gaps = np.diff(timed["time"], axis=0)
    assert (gaps > 0).all()
    assert abs(gaps.mean() - 0.1) < 4 * 0.1 / math.sqrt(gaps.size)


def test_stragglers_slow_a_fraction_of_the_clients():
    clock = {"kind": "poisson", "stragglers": {"frac": 0.25, "slowdown": 0.01}}
    venv = _venv(clock, runs=3, horizon=10)
    venv.reset(seed=3)
    rates = venv.engine.clock.rates
    np.testing.assert_array_equal(np.sort(rates, axis=1), [[0.01, 1, 1, 1]] * 3)
    again = _venv(clock, runs=3, horizon=10)
    again.reset(seed=3)
    np.testing.assert_array_equal(again.engine.clock.rates, rates)


def test_a_trace_is_replayed():
    trace = [3, 3, 0, 1, 2, 2, 2, 0, 1, 3]
    tr = _trajectory(_venv({"kind": "trace", "clients": trace}, runs=2, horizon=10))
    np.testing.assert_array_equal(tr["active"].argmax(axis=2), np.array([trace, trace]).T)
    np.testing.assert_array_equal(tr["time"][:, 0], np.arange(10))  # event indices


def test_a_run_of_a_batch_draws_its_clients_as_its_seed_alone():
    batch = _trajectory(_venv("one_random", runs=3), seed=10)
    alone = _trajectory(_venv("one_random", runs=1), seed=11)
    np.testing.assert_array_equal(batch["active"][:, 1], alone["active"][:, 0])


def test_the_shared_formulas_by_hand():
    cdf = client_cdf(np.array([1.0, 1.0, 2.0]))
    np.testing.assert_allclose(cdf, [0.25, 0.5, 1.0])
    np.testing.assert_array_equal(client_of(np.array([0.0, 0.24, 0.25, 0.6, 0.999]), cdf),
                                  [0, 0, 1, 2, 2])  # fmt: skip
    assert event_gap(np.array(1 - math.exp(-1.0)), 2.0) == pytest.approx(0.5)


def test_sync_is_the_default_and_the_observation_has_no_clock_fields():
    assert make_config(clock="sync").clock is None and make_config().clock is None
    venv = fedbandit_env.make_vec(HOMOG, num_runs=1, clock="sync")
    obs, _ = venv.reset(seed=0)
    assert obs.active is None and obs.pulled is None and obs.time is None


# ------------------------------------------------------------------ checks by name
@pytest.mark.parametrize(
    "clock, match",
    [
        ("async", r"clock: expected one of \('sync', 'one_random', 'poisson', 'trace'\)"),
        ({"kind": "poisson", "rate": 2}, r"clock: unknown key\(s\) \['rate'\]"),
        ({"kind": "poisson", "rates": [1, 2]}, r"clock: rates: expected 4 finite positive"),
        ({"kind": "poisson", "rates": [1, 2, 0, 1]}, r"clock: rates: expected 4"),
        ({"kind": "poisson", "stragglers": {"share": 0.2}}, r"clock: stragglers: expected"),
        ({"kind": "trace"}, r"clock: 'trace' expects 'clients'"),
        ({"kind": "trace", "clients": [0, 1]}, r"clock: clients: expected at least horizon=5"),
        ({"kind": "trace", "clients": [0, 1, 9, 0, 0]}, r"clock.*clients"),
    ],
)  # fmt: skip
def test_a_wrong_clock_is_refused_by_name(clock, match):
    with pytest.raises(ConfigError, match=match):
        fedbandit_env.make_vec(HOMOG, num_runs=1, num_agents=4, horizon=5, clock=clock)


def test_an_event_clock_with_an_adversary_is_refused_by_name():
    with pytest.raises(ConfigError, match="clock: an event clock is not combined with adversary"):
        make_config(num_agents=4, clock="one_random", adversary={"num_byzantine": 1})


# ------------------------------------------------------------------ the JAX engine
def _jax_trajectory(clock, horizon=60, agents=4, seeds=(0, 1), family=HOMOG, **kw):
    """Step the JAX environment under jit (arm 2 for everyone): per step the active masks,
    the pulled masks, the time stamps and the instant regrets, runs stacked."""
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    import fedbandit_env.jax as fj

    kw = {"num_agents": agents, "num_arms": 3, "horizon": horizon, "channels": (), **kw}
    if family == HOMOG:
        kw["means"] = MEANS
    env = fj.make(family, clock=clock, **kw)

    def run(key):
        obs, state = env.reset(key)
        arms = fj.Action(jnp.full(agents, 2, jnp.int32), {})

        def body(carry, k):
            obs, state = carry
            out = (obs.active, obs.time)
            obs, state, _, _, info = env.step(k, state, arms)
            return (obs, state), (*out, obs.pulled, info["instant_regret"], obs.pulls)

        _, rows = jax.lax.scan(body, (obs, state), jax.random.split(key, horizon))
        return rows

    keys = jnp.stack([jax.random.PRNGKey(s) for s in seeds])
    rows = jax.jit(jax.vmap(run))(keys)
    names = ("active", "time", "pulled", "regret", "pulls")
    return {k: np.asarray(v) for k, v in zip(names, rows, strict=True)}


@pytest.mark.parametrize("clock", ["one_random", {"kind": "poisson", "rates": [1, 2, 3, 4]}])
def test_jax_one_client_pulls_per_event_and_regret_is_the_pullers(clock):
    tr = _jax_trajectory(clock)
    np.testing.assert_array_equal(tr["active"].sum(axis=2), 1)
    np.testing.assert_array_equal(tr["pulled"], tr["active"])
    np.testing.assert_array_equal(tr["pulls"][:, -1], 60)
    np.testing.assert_allclose(tr["regret"], 0.7 * tr["pulled"], rtol=1e-6)


def test_jax_replays_a_trace_and_follows_the_rates():
    trace = [3, 3, 0, 1, 2, 2, 2, 0, 1, 3]
    tr = _jax_trajectory({"kind": "trace", "clients": trace}, horizon=10)
    np.testing.assert_array_equal(tr["active"].argmax(axis=2), [trace, trace])
    np.testing.assert_array_equal(tr["time"][0], np.arange(10))
    rates = np.array([1.0, 2.0, 3.0, 4.0])
    timed = _jax_trajectory({"kind": "poisson", "rates": rates}, horizon=2000, seeds=(0, 1, 2, 3))
    share = timed["pulled"].sum(axis=(0, 1)) / 8000
    p = rates / rates.sum()
    assert (np.abs(share - p) < 4 * np.sqrt(p * (1 - p) / 8000)).all(), (share, p)
    gaps = np.diff(timed["time"], axis=1)
    assert abs(gaps.mean() - 0.1) < 4 * 0.1 / math.sqrt(gaps.size)


def test_jax_stragglers_are_slowed():
    jax = pytest.importorskip("jax")
    import fedbandit_env.jax as fj

    env = fj.make(HOMOG, num_agents=4, channels=(),
                  clock={"kind": "poisson", "stragglers": {"frac": 0.5, "slowdown": 0.25}})  # fmt: skip
    _, state = env.reset(jax.random.PRNGKey(0))
    np.testing.assert_allclose(np.sort(np.asarray(state.clock.rates)), [0.25, 0.25, 1, 1])


# ------------------------------------------------------------------ learners
def _facts(clock: str) -> FederationFacts:
    venv = fedbandit_env.make_vec(HOMOG, num_runs=1, num_agents=3, clock=clock)
    return venv.facts


@pytest.mark.parametrize("agent", ["ucb1", "kl_ucb", "thompson_beta", "epsilon_greedy", "uniform"])
def test_independent_learners_accept_an_event_clock(agent):
    assert incompatibility(HOMOG, agent, {"num_agents": 3, "clock": "one_random"}) is None


@pytest.mark.parametrize("agent", ["ucb1_shared", "gossip_ucb", "sw_ucb", "cdp_mab", "flooding"])
def test_lock_step_learners_refuse_an_event_clock_with_their_reason(agent):
    why = incompatibility(HOMOG, agent, {"num_agents": 3, "clock": "one_random"})
    assert why is not None and f"{agent}: clock: expected 'sync'" in why, why
    with pytest.raises(ConfigError, match=rf"{agent}: clock: expected 'sync'"):
        evaluate(HOMOG, agent, runs=1, env_kwargs={"num_agents": 3, "horizon": 5,
                                                   "clock": "one_random"})  # fmt: skip


@pytest.mark.parametrize("agent", ["ucb1", "linucb"])
def test_jax_ports_agree_with_numpy_under_one_random(agent):
    """The same learner under the same clock on both engines: mean final regret per pull
    within 3 combined standard errors (the engines draw from different streams)."""
    pytest.importorskip("jax")
    env_id = HOMOG if agent == "ucb1" else "FedBandit/LinearContextual-v0"
    kw = {"num_agents": 5, "horizon": 400, "channels": (), "clock": "one_random"}
    if agent == "ucb1":
        kw |= {"num_arms": 3, "means": MEANS}
    finals = []
    for backend in ("numpy", "jax"):
        res = evaluate(env_id, agent, runs=24, env_kwargs=kw, backend=backend)
        finals.append(res.regret_by_agent[:, -1].sum(axis=1))
    (a, b) = finals
    se = math.sqrt(a.var(ddof=1) / len(a) + b.var(ddof=1) / len(b))
    assert abs(a.mean() - b.mean()) < 3 * se, (a.mean(), b.mean(), se)


def test_jax_lock_step_ports_refuse_an_event_clock():
    pytest.importorskip("jax")
    import fedbandit_env.jax as fj

    env = fj.make(HOMOG, num_agents=3, clock="one_random")
    for agent in ("ucb1_shared", "gossip_fed_ucb", "sw_ucb"):
        with pytest.raises(ConfigError, match=rf"{agent}: clock: expected 'sync'"):
            fj.bind(fj.make_jax_agent(agent), fj.facts_of(env))
    fj.bind(fj.make_jax_agent("ucb1"), fj.facts_of(env))  # accepted


def test_the_check_passes_every_learner_under_sync_and_names_plug_ins():
    class Plugin:
        pass

    check_event_time(Plugin(), _facts("sync"))
    with pytest.raises(ConfigError, match=r"Plugin: clock: expected 'sync'"):
        check_event_time(Plugin(), _facts("one_random"))


def test_ucb1_under_an_event_clock_is_each_clients_own_ucb1():
    """At every pull, the arm a client chose has the largest UCB1 index computed by a plain loop
    from that client's own earlier pulls only, with t its own pull count."""
    from baselines.ucb import UCB1

    venv = _venv("one_random", runs=2, agents=3, horizon=300)
    learner = UCB1()
    obs, _ = venv.reset(seed=5)
    learner.reset(venv.facts, venv.agent_rng())
    history: dict[tuple[int, int], list[tuple[int, float]]] = {}
    while not venv.engine.truncated:
        action = learner.act(obs)
        client = obs.active.argmax(axis=1)
        obs, _, _ = venv.engine.step(action.arms)
        for b, i in enumerate(client):
            own = history.setdefault((b, int(i)), [])
            arm = int(action.arms[b, i])
            n = np.array([sum(1 for a, _ in own if a == k) for k in range(3)])
            s = np.array([sum(r for a, r in own if a == k) for k in range(3)])
            if (n > 0).all():
                index = s / n + np.sqrt(2.0 * math.log(len(own)) / n)
                assert index[arm] >= index.max() - 1e-12, (b, i, len(own))
            else:
                assert n[arm] == 0  # untried arms first
            own.append((arm, float(obs.last_reward[b, i])))
    assert sum(len(h) for h in history.values()) == 2 * 300


def test_linucb_under_an_event_clock_learns_from_its_own_pulls_only():
    from baselines.linucb import LinUCB

    venv = fedbandit_env.make_vec("FedBandit/LinearContextual-v0", num_runs=2, num_agents=3,
                                  horizon=40, channels=(), clock="one_random")  # fmt: skip
    learner = LinUCB()
    obs, _ = venv.reset(seed=1)
    learner.reset(venv.facts, venv.agent_rng())
    gram = np.broadcast_to(np.eye(venv.config.linear.dim), learner.V.shape).copy()
    while not venv.engine.truncated:
        action = learner.act(obs)
        context, client = obs.context, obs.active.argmax(axis=1)
        obs, _, _ = venv.engine.step(action.arms)
        for b, i in enumerate(client):
            x = context[b, i, action.arms[b, i]]
            gram[b, i] += np.outer(x, x)
    learner.act(obs)  # folds the last pull in
    np.testing.assert_allclose(learner.V, gram, rtol=1e-12, atol=1e-12)


def test_the_pettingzoo_view_says_who_pulls_next_and_passes_the_api_test():
    from pettingzoo.test import parallel_api_test

    env = fedbandit_env.make(HOMOG, num_agents=3, horizon=30, clock="one_random")
    obs, _ = env.reset(seed=0)
    assert sum(int(o["active"]) for o in obs.values()) == 1
    assert env.observation_space("agent_0")["active"].n == 2
    parallel_api_test(fedbandit_env.make(HOMOG, num_agents=3, horizon=30, clock="one_random"),
                      num_cycles=40)  # fmt: skip



@pytest.mark.parametrize(
    "options",
    [{"clock": "one_random"}, {"reward_delay": 5}, {"clock": "one_random", "reward_delay": 3}],
)
def test_a_team_policy_plays_the_same_through_the_pettingzoo_adapter(options):
    """``run_episode`` (per-agent dicts, then the adapter's batched observation) gives UCB1 the
    same pulls and arrivals as the batched engine: the same arms, step by step."""
    from baselines.ucb import UCB1
    from fedbandit_env.policy import run_episode

    kw = {"num_agents": 3, "num_arms": 3, "horizon": 60, "means": MEANS, "channels": (),
          **options}  # fmt: skip
    steps = run_episode(fedbandit_env.make(HOMOG, **kw), UCB1(), seed=7)
    via_dicts = np.array([[a[f"agent_{i}"]["arm"] for i in range(3)] for a, *_ in steps])
    venv = fedbandit_env.make_vec(HOMOG, num_runs=1, **kw)
    obs, _ = venv.reset(seed=7)
    learner = UCB1()
    learner.reset(venv.facts, venv.agent_rng())
    batched = []
    while not venv.engine.truncated:
        arms = learner.act(obs).arms
        batched.append(arms[0].copy())
        obs, _, _ = venv.engine.step(arms)
    np.testing.assert_array_equal(via_dicts, np.array(batched))


@pytest.mark.parametrize("options, name", [({"clock": "one_random"}, "clock"),
                                           ({"reward_delay": 4}, "reward_delay")])
def test_the_rl_views_refuse_event_time_by_name(options, name):
    from fedbandit_env.rl.parallel_wrapper import StatisticsObservationWrapper
    from fedbandit_env.rl.single_agent import OneLearnerEnv

    with pytest.raises(ConfigError, match=rf"agent_0: {name}: expected"):
        OneLearnerEnv(HOMOG, peers="ucb1", num_agents=3, **options)
    with pytest.raises(ConfigError, match=rf"{name}: expected"):
        StatisticsObservationWrapper(fedbandit_env.make(HOMOG, num_agents=3, **options))
