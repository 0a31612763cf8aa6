"""The ``latency`` option (fedbandit_env/latency.py, docs/time.md "latency"): a message sent at
engine step t is read at t + L, on every channel kind and both engines; it is charged when sent
(the last L steps' messages are never delivered); communication-only steps count; no latency is
today's engine bit for bit; the learners that rely on the channels' own timing refuse it by name
and the sharing baselines run with it, on both engines and through the PettingZoo view."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest

import fedbandit_env
from fedbandit_env.bench.evaluate import evaluate
from fedbandit_env.errors import ConfigError

HOMOG = "FedBandit/Homogeneous-v0"
ARMS3 = SimpleNamespace(num_arms=3)  # what a shared baseline's channel_spec reads
KINDS = {
    "neighbors": {"kind": "neighbors", "dim": 1},
    "server": {"kind": "server", "dim": 1, "aggregate": "sum"},
    "push": {"kind": "push", "dim": 1},
    "flood": {"kind": "flood", "dim": 1, "ttl": 1},
}


def delivered(kind, record) -> np.ndarray:
    """(B,) how many payload entries arrived in a delivery record."""
    if kind == "neighbors":
        return record.mask.sum(axis=(1, 2))
    if kind == "server":
        return record.count
    if kind == "flood":
        return np.bincount(record.run, minlength=1)
    return record.received.sum(axis=1)


def numpy_arrivals(kind: str, latency, steps: int = 9, send_at: int = 2, pull=None):
    """The step (1-based engine step) at which something arrived, the messages charged by then,
    for one message sent by agent 0 at engine step ``send_at`` (``pull``: the steps that pull)."""
    venv = fedbandit_env.make_vec(HOMOG, num_runs=1, num_agents=3, num_arms=3, topology="path",
                                  horizon=50, channels={"c": KINDS[kind]}, latency=latency)  # fmt: skip
    venv.reset(seed=0)
    arrived = []
    for step in range(1, steps + 1):
        send = np.zeros((1, 3), bool)
        send[0, 0] = step == send_at
        flag = None if pull is None else np.array([pull(step)])
        obs, *_, info = venv.step(np.zeros((1, 3), np.int64), {"c": (send, np.ones((1, 3, 1)))},
                                  flag)  # fmt: skip
        if delivered(kind, obs.deliveries["c"])[0] > 0:
            arrived.append(step)
    return arrived, int(info.ledger.total.messages[0].sum())


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("latency", [0, 1, 3])
def test_a_message_sent_at_t_is_read_at_t_plus_l(kind, latency):
    arrived, messages = numpy_arrivals(kind, latency)
    assert arrived == [2 + latency], (kind, arrived)
    assert messages > 0  # charged at send, whatever the latency


def test_communication_steps_count_and_the_last_messages_stay_in_flight():
    # every other step communicates: the message of step 2 still arrives at engine step 5
    arrived, _ = numpy_arrivals("neighbors", 3, pull=lambda step: step % 2 == 1)
    assert arrived == [5]
    # sent at step 8 with L = 3: charged, never delivered within 9 steps
    arrived, messages = numpy_arrivals("neighbors", 3, send_at=8)
    assert arrived == [] and messages == 1  # agent 0 of a path has one neighbour


def test_no_latency_is_the_engine_of_before_bit_for_bit():
    kw = dict(num_agents=6, num_arms=4, horizon=300, topology="ring")
    a = evaluate(HOMOG, "ucb1_shared", runs=3, env_kwargs=kw)
    for off in (0, None):
        b = evaluate(HOMOG, "ucb1_shared", runs=3, env_kwargs={**kw, "latency": off})
        np.testing.assert_array_equal(a.regret_by_agent, b.regret_by_agent)
    assert fedbandit_env.make(HOMOG, latency=0).config.latency is None
    assert fedbandit_env.make(HOMOG, latency={"kind": "fixed", "steps": 4}).config.latency == 4


@pytest.mark.parametrize(
    ("value", "match"),
    [
        ({"kind": "geometric", "p": 0.5}, r"latency: 'geometric' expects exactly \['mean', 'max'\]"),
        ({"kind": "lognormal", "mu": 1}, r"latency: kind: expected one of \('fixed', 'per_link', "
         r"'geometric', 'uniform', 'pareto'\)"),
        ({"kind": "per_link", "steps": [[0, 1]]}, r"latency: steps: expected integers of shape "
         r"\(3, 3\)"),
        ({"kind": "per_link", "steps": [[0, -1, 0]] * 3}, r"latency.*steps.*>= 0"),
        ({"kind": "per_link", "stpes": 1}, r"latency: 'per_link' expects 'steps'"),
        ({"kind": "uniform", "low": 0, "high": 3}, r"latency.*low.*>= 1"),
        ({"kind": "fixed", "pulls": 3}, r"latency: 'fixed' expects exactly 'steps'"),
        (-1, r"latency"),
        (2.5, r"latency"),
        (10_000, r"latency"),
    ],
)
def test_a_bad_latency_is_refused_by_name(value, match):
    with pytest.raises(ConfigError, match=match):
        fedbandit_env.make(HOMOG, horizon=100, latency=value)


def test_latency_with_an_adversary_is_refused():
    with pytest.raises(ConfigError, match=r"latency: a latency is not combined with adversary"):
        fedbandit_env.make(HOMOG, latency=2, adversary={"num_byzantine": 1, "attack": "reverse"})


def test_the_learners_that_rely_on_the_channels_timing_refuse_it_by_name():
    kw = {"num_agents": 4, "horizon": 30, "latency": 2}
    for agent in ("gossip_ucb", "flooding", "coop_ucb2", "cdp_mab"):
        with pytest.raises(ConfigError, match=rf"{agent}: latency: expected None"):
            evaluate(HOMOG, agent, runs=1, env_kwargs=kw)
    for agent in ("ucb1", "ucb1_shared", "kl_ucb_shared", "uniform", "sw_ucb", "centralized_ucb1"):
        assert evaluate(HOMOG, agent, runs=1, env_kwargs=kw).final_regret_network.shape == (1,)
    linear = {"num_agents": 3, "horizon": 30, "dim": 3, "latency": 2}
    evaluate("FedBandit/LinearContextual-v0", "linucb", runs=1, env_kwargs=linear)
    with pytest.raises(ConfigError, match=r"dislinucb: latency: expected None"):
        evaluate("FedBandit/LinearContextual-v0", "dislinucb", runs=1, env_kwargs=linear)


def test_the_shared_baseline_reads_its_neighbours_statistics_l_steps_old():
    """ucb1_shared's ``n_used`` is its own counts plus each neighbour's counts as sent L steps
    before: after step t every agent has t own pulls, and its two ring neighbours' t - L."""
    from baselines.ucb import UCB1Shared

    for L in (1, 4):
        venv = fedbandit_env.make_vec(HOMOG, num_runs=1, num_agents=5, num_arms=3,
                                      topology="ring", horizon=40, latency=L,
                                      channels=UCB1Shared().channel_spec(ARMS3))  # fmt: skip
        obs, _ = venv.reset(seed=1)
        policy = UCB1Shared()
        policy.reset(venv.facts, venv.agent_rng())
        for _ in range(12):
            action = policy.act(obs)
            obs, *_ = venv.step(action.arms, action.messages)
        policy.act(obs)  # folds pull 12 and the statistics sent at step 12 - L
        heard = np.einsum("dbncm->cbnm", policy.latest.reshape(2, 1, 5, 2, 3))[0].sum(-1)
        # each neighbour's counts were sent with its action of step 12 - L (t - L - 1 pulls)
        np.testing.assert_array_equal(heard[0], 2 * (12 - L - 1))


def test_through_the_pettingzoo_view_a_team_policy_plays_as_on_the_batched_engine():
    from baselines.ucb import UCB1Shared
    from fedbandit_env.policy import run_episode

    kw = dict(num_agents=4, num_arms=3, horizon=60, topology="ring", latency=3,
              channels=UCB1Shared().channel_spec(ARMS3))  # fmt: skip
    env = fedbandit_env.make(HOMOG, **kw)
    trajectory = run_episode(env, UCB1Shared(), seed=2)
    regret = sum(sum(i["instant_regret"] for i in infos.values()) for *_, infos in trajectory)
    batched = evaluate(HOMOG, "ucb1_shared", runs=1, seed=2, env_kwargs=kw)
    np.testing.assert_allclose(regret, batched.final_regret_network[0], rtol=1e-12)


@pytest.mark.slow
def test_jax_delivers_l_steps_late_and_agrees_with_numpy():
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    import fedbandit_env.jax as fj
    from fedbandit_env.jax.types import Action

    env = fj.make(HOMOG, num_agents=3, num_arms=3, topology="path", horizon=50, latency=3,
                  channels={"c": KINDS["neighbors"]})  # fmt: skip
    _, state = env.reset(jax.random.PRNGKey(0))
    step = jax.jit(env.step)
    arrived = []
    for t in range(1, 10):
        send = jnp.zeros(3, bool).at[0].set(t == 2)
        action = Action(jnp.zeros(3, jnp.int32), {"c": (send, jnp.ones((3, 1), jnp.float32))})
        obs, state, *_ = step(jax.random.PRNGKey(t), state, action)
        if bool(obs.deliveries["c"].mask.any()):
            arrived.append(t)
    assert arrived == [5]
    kw = dict(num_agents=8, num_arms=6, horizon=600, topology="ring", latency=20)
    runs = 60
    a = evaluate(HOMOG, "ucb1_shared", runs=runs, env_kwargs=kw).final_regret_network
    b = evaluate(HOMOG, "ucb1_shared", runs=runs, env_kwargs=kw, backend="jax").final_regret_network
    se = math.sqrt(a.var(ddof=1) / runs + b.var(ddof=1) / runs)
    assert abs(a.mean() - b.mean()) <= 3 * se, (a.mean(), b.mean(), se)
