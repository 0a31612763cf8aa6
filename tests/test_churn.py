"""The ``churn`` option (fedbandit_env/churn.py, docs/time.md "churn"): an absent client neither
pulls, sends nor receives; a message that reaches it is dropped and counted; regret counts the
clients that pulled; under an event clock the event's client is drawn among the present ones;
the schedule and the Markov chain give the presence their definitions say (checked against
plain loops); nobody leaving is the engine of before bit for bit; bad values, channels and
learners are refused by name; the PettingZoo view and the JAX engine agree with numpy."""

from __future__ import annotations

import math

import numpy as np
import pytest

import fedbandit_env
from fedbandit_env.bench.evaluate import evaluate
from fedbandit_env.errors import ConfigError

HOMOG = "FedBandit/Homogeneous-v0"
NEIGHBORS = {"c": {"kind": "neighbors", "dim": 1}}
SCHEDULE = {"kind": "schedule", "absences": [[1, 3, 6], [2, 5, None]], "join_at": [1, 1, 1, 4]}


def plain_presence(absences, join_at, n, t):
    """Client m's presence at pull t, by the definition: absent from ``leave`` to ``join - 1``
    (join None: never back), and before its ``join_at``."""
    out = []
    for m in range(n):
        away = any(c == m and leave <= t and (join is None or t < join)
                   for c, leave, join in absences)  # fmt: skip
        out.append(not away and t >= join_at[m])
    return np.array(out)


def run_schedule(churn, steps=10, latency=None, clock=None, num_runs=2):
    """Every agent sends one message and pulls arm 0 at every step of a ring of 4 (means
    0.2 / 0.5 / 0.9: a pull of arm 0 costs 0.7); per step: the announced and the pulled masks,
    the regret, the arrival mask and the messages charged and dropped."""
    venv = fedbandit_env.make_vec(HOMOG, num_runs=num_runs, num_agents=4, num_arms=3,
                                  topology="ring", horizon=50, channels=NEIGHBORS,
                                  means=[0.2, 0.5, 0.9], churn=churn, latency=latency,
                                  clock=clock)  # fmt: skip
    obs, _ = venv.reset(seed=3)
    rows = []
    for _ in range(steps):
        send = np.ones((num_runs, 4), bool)
        before = obs.active.copy()
        obs, *_, info = venv.step(np.zeros((num_runs, 4), np.int64),
                                  {"c": (send, np.ones((num_runs, 4, 1)))})  # fmt: skip
        rows.append(dict(active=before, pulled=obs.pulled.copy(), regret=info.instant_regret.copy(),
                         arrived=obs.deliveries["c"].mask.copy(),
                         messages=info.ledger.step.messages.sum(axis=1).copy(),
                         dropped=info.ledger.step.dropped.copy()))  # fmt: skip
    return rows


def test_a_schedule_makes_clients_absent_as_it_says_and_absent_clients_do_nothing():
    rows = run_schedule(SCHEDULE)
    for t, row in enumerate(rows, start=1):
        here = plain_presence(SCHEDULE["absences"], SCHEDULE["join_at"], 4, t).astype(int)
        # the pulled mask is the presence at pull t; the active mask announced it a step early
        np.testing.assert_array_equal(row["pulled"], np.broadcast_to(here == 1, (2, 4)))
        np.testing.assert_array_equal(row["active"], row["pulled"])
        # regret counts the clients that pulled: arm 0 costs 0.7 each, 0 for an absent client
        np.testing.assert_allclose(row["regret"], np.where(here == 1, 0.7, 0.0)[None].repeat(2, 0))
        # ring of 4: each present client sends to its two neighbours; nothing from the absent
        assert (row["messages"] == 2 * here.sum()).all()
        # a message is received where both ends are present; a present sender's message to an
        # absent neighbour is dropped and counted
        lost = sum(here[(m - 1) % 4] + here[(m + 1) % 4] for m in range(4) if not here[m])
        assert (row["dropped"] == lost).all()
        heard = row["arrived"].sum(axis=2)  # (B, N): messages each client received
        for m in range(4):
            expect = here[m] * (here[(m - 1) % 4] + here[(m + 1) % 4])
            assert (heard[:, m] == expect).all(), (t, m)


def test_with_a_latency_an_arriving_message_is_dropped_if_its_receiver_has_left():
    # client 1 sends at every step; it is present throughout, client 0 is away at pulls 4..5
    churn = {"kind": "schedule", "absences": [[0, 4, 6]]}
    rows = run_schedule(churn, steps=8, latency=2, num_runs=1)
    heard_from_1 = [bool(r["arrived"][0, 0].any()) for r in rows]
    # client 0 hears what was sent 2 steps before, except while it is away (steps 4 and 5);
    # what was sent at steps 4..5 by the others still arrives at 6..7 (the senders were there)
    assert heard_from_1 == [False, False, True, False, False, True, True, True]
    assert [int(r["dropped"][0]) for r in rows] == [0, 0, 0, 2, 2, 0, 0, 0]


def test_under_an_event_clock_the_client_is_drawn_among_the_present_ones():
    # clients 1 and 2 away for good from pull 1; nobody at all at pulls 20..24
    churn = {"kind": "schedule", "absences": [[1, 1, None], [2, 1, None], [0, 20, 25],
                                              [3, 20, 25]]}  # fmt: skip
    rows = run_schedule(churn, steps=40, clock="one_random", num_runs=3)
    pulled = np.stack([r["pulled"] for r in rows])  # (T, B, N)
    assert not pulled[:, :, 1:3].any()
    per_event = pulled.sum(axis=2)
    assert (per_event[19:24] == 0).all() and (per_event[:19] == 1).all()
    assert (per_event[24:] == 1).all()
    # the two present clients share the events (both appear in every run)
    assert pulled[:, :, 0].any(axis=0).all() and pulled[:, :, 3].any(axis=0).all()
    assert (np.stack([r["regret"] for r in rows])[19:24] == 0).all()


def test_a_markov_churn_leaves_and_joins_at_its_rates():
    n, runs, steps = 20, 40, 200
    p_leave, p_join = 0.1, 0.3
    venv = fedbandit_env.make_vec(HOMOG, num_runs=runs, num_agents=n, num_arms=2, channels=(),
                                  horizon=steps, churn={"kind": "markov", "p_leave": p_leave,
                                                        "p_join": p_join})  # fmt: skip
    obs, _ = venv.reset(seed=0)
    present = [obs.active.copy()]
    assert present[0].all()  # every client is there at pull 1
    for _ in range(steps - 1):
        obs, *_ = venv.step(np.zeros((runs, n), np.int64))
        present.append(obs.active.copy())
    p = np.stack(present)
    was, now = p[:-1], p[1:]
    leave = (was & ~now).sum() / was.sum()
    join = (~was & now).sum() / (~was).sum()
    assert abs(leave - p_leave) < 4 * math.sqrt(p_leave * (1 - p_leave) / was.sum())
    assert abs(join - p_join) < 4 * math.sqrt(p_join * (1 - p_join) / (~was).sum())
    # the stationary share present, p_join / (p_leave + p_join), is reached
    assert abs(p[100:].mean() - p_join / (p_leave + p_join)) < 0.02


def test_a_markov_churn_at_the_extremes_is_deterministic():
    venv = fedbandit_env.make_vec(HOMOG, num_runs=2, num_agents=3, num_arms=2, channels=(),
                                  horizon=10, churn={"kind": "markov", "p_leave": 1.0,
                                                     "p_join": 1.0})  # fmt: skip
    obs, _ = venv.reset(seed=0)
    seen = [obs.active[0, 0]]
    for _ in range(5):
        obs, *_ = venv.step(np.zeros((2, 3), np.int64))
        seen.append(obs.active[0, 0])
    assert seen == [True, False, True, False, True, False]  # leaves and returns every pull


def test_communication_steps_have_the_presence_of_the_coming_pull():
    churn = {"kind": "schedule", "absences": [[0, 2, 3]]}
    venv = fedbandit_env.make_vec(HOMOG, num_runs=1, num_agents=3, num_arms=2, horizon=10,
                                  topology="path", channels=NEIGHBORS, churn=churn)  # fmt: skip
    venv.reset(seed=0)
    send = (np.ones((1, 3), bool), np.ones((1, 3, 1)))
    arms = np.zeros((1, 3), np.int64)
    obs, *_ = venv.step(arms, {"c": send})  # pull 1: all present
    assert not obs.active[0, 0]  # away at pull 2, announced now
    for _ in range(2):  # communication steps before pull 2: client 0 is already away
        obs, *_, info = venv.step(arms, {"c": send}, np.array([False]))
        assert info.ledger.step.messages.sum() == 2 + 1  # 1 to 0 and 2, 2 to 1; 0 silent
        assert not obs.deliveries["c"].mask[0, 0].any() and info.ledger.step.dropped[0] == 1
    obs, *_ = venv.step(arms, {"c": send})  # pull 2
    assert obs.pulled[0].tolist() == [False, True, True] and obs.active[0, 0]


def test_nobody_leaving_is_the_engine_of_before_bit_for_bit():
    kw = dict(num_agents=6, num_arms=4, horizon=300, topology="ring")
    a = evaluate(HOMOG, "ucb1_shared", runs=3, env_kwargs=kw)
    for off in (None, "always", {"kind": "always"}):
        b = evaluate(HOMOG, "ucb1_shared", runs=3, env_kwargs={**kw, "churn": off})
        np.testing.assert_array_equal(a.regret_by_agent, b.regret_by_agent)
        np.testing.assert_array_equal(a.messages, b.messages)
    assert fedbandit_env.make(HOMOG, churn="always").config.churn is None


def test_an_independent_ucb1_counts_exactly_its_own_pulls_while_present():
    from baselines.ucb import UCB1

    venv = fedbandit_env.make_vec(HOMOG, num_runs=2, num_agents=4, num_arms=3, channels=(),
                                  horizon=60, churn=SCHEDULE)  # fmt: skip
    obs, _ = venv.reset(seed=5)
    policy = UCB1()
    policy.reset(venv.facts, venv.agent_rng())
    made = np.zeros((2, 4))
    for _ in range(30):
        obs, *_ = venv.step(policy.act(obs).arms)
        made += obs.pulled
    policy.act(obs)  # folds the last pull
    np.testing.assert_array_equal(policy.counts.sum(axis=-1), made)
    np.testing.assert_array_equal(policy.pulls[..., 0], made)  # UCB1's t: its own pulls


@pytest.mark.parametrize(
    ("value", "match"),
    [
        ({"kind": "random"}, r"churn: expected one of \('always', 'schedule', 'markov'\)"),
        ({"kind": "markov", "rate": 0.1}, r"churn: unknown key\(s\) \['rate'\]"),
        ({"kind": "markov", "p_leave": 1.5}, r"churn.*p_leave"),
        ({"kind": "schedule", "absences": [[9, 1, 2]]}, r"churn.*absences.client"),
        ({"kind": "schedule", "absences": [[0, 5, 5]]}, r"churn.*absences.join"),
        ({"kind": "schedule", "absences": [[0, 5]]}, r"churn: absences: expected a list"),
        ({"kind": "schedule", "join_at": [1, 2]}, r"churn: join_at: expected 4 pulls"),
        ("sometimes", r"churn: expected one of"),
    ],
)
def test_a_bad_churn_is_refused_by_name_on_both_engines(value, match):
    with pytest.raises(ConfigError, match=match):
        fedbandit_env.make(HOMOG, num_agents=4, horizon=100, churn=value)
    fj = pytest.importorskip("fedbandit_env.jax")
    with pytest.raises(ConfigError, match=match):
        fj.make(HOMOG, num_agents=4, horizon=100, churn=value)


def test_channels_without_addressed_deliveries_and_other_options_are_refused():
    churn = {"kind": "markov", "p_leave": 0.1, "p_join": 0.1}
    bad = [
        ({"f": {"kind": "flood", "dim": 1, "ttl": 1}}, r"channels.f: churn: expected a channel"),
        ({"s": {"kind": "server", "dim": 1}}, r"channels.s: churn: .* with reply='broadcast'"),
        ({"n": {"kind": "neighbors", "dim": 1, "reduce": "sum"}}, r"channels.n: churn: expected "
         r"reduce=None"),
    ]
    for channels, match in bad:
        with pytest.raises(ConfigError, match=match):
            fedbandit_env.make(HOMOG, channels=channels, churn=churn)
    with pytest.raises(ConfigError, match=r"churn: expected None with clock kind 'trace'"):
        fedbandit_env.make(HOMOG, num_agents=2, horizon=3, churn=churn,
                           clock={"kind": "trace", "clients": [0, 1, 0]})  # fmt: skip
    with pytest.raises(ConfigError, match=r"churn: churn is not combined with adversary"):
        fedbandit_env.make(HOMOG, churn=churn, adversary={"num_byzantine": 1, "attack": "reverse"})
    ok = {"s": {"kind": "server", "dim": 1, "reply": "none", "charge_broadcast": False},
          "p": {"kind": "push", "dim": 1}, "g": {"kind": "gossip", "dim": 1}}  # fmt: skip
    fedbandit_env.make(HOMOG, channels=ok, churn=churn).reset(seed=0)


def test_the_learners_that_assume_everyone_is_there_refuse_churn_by_name():
    kw = {"num_agents": 4, "horizon": 30, "churn": SCHEDULE}
    for agent in ("gosine", "sw_ucb", "centralized_ucb1", "async_lin_ucb"):
        with pytest.raises(ConfigError, match=rf"{agent}: churn: expected None"):
            evaluate(HOMOG, agent, runs=1, env_kwargs=kw)
    # a learner's channel that cannot run under churn is refused first, by the environment
    with pytest.raises(ConfigError, match=r"channels.neighbors: churn: expected reduce=None"):
        evaluate(HOMOG, "gossip_ucb", runs=1, env_kwargs=kw)
    with pytest.raises(ConfigError, match=r"channels.server: churn: expected a channel kind"):
        evaluate(HOMOG, "fed2_ucb", runs=1, env_kwargs=kw)
    for agent in ("ucb1", "ucb1_shared", "kl_ucb_shared", "thompson_beta", "uniform"):
        assert evaluate(HOMOG, agent, runs=1, env_kwargs=kw).final_regret_network.shape == (1,)
    linear = {"num_agents": 3, "horizon": 30, "dim": 3, "churn": SCHEDULE | {"join_at": None}}
    evaluate("FedBandit/LinearContextual-v0", "linucb", runs=1, env_kwargs=linear)
    with pytest.raises(ConfigError, match=r"fed_lin_ucb_async: churn: expected None"):
        evaluate("FedBandit/LinearContextual-v0", "fed_lin_ucb_async", runs=1,
                 env_kwargs={**linear, "clock": "one_random"})


def test_through_the_pettingzoo_view_a_team_policy_plays_as_on_the_batched_engine():
    from baselines.ucb import UCB1Shared
    from fedbandit_env.policy import run_episode

    kw = dict(num_agents=4, num_arms=3, horizon=60, topology="ring", churn=SCHEDULE,
              channels=UCB1Shared().channel_spec(type("F", (), {"num_arms": 3})))  # fmt: skip
    env = fedbandit_env.make(HOMOG, **kw)
    assert "active" in env.observation_space("agent_0").spaces
    trajectory = run_episode(env, UCB1Shared(), seed=2)
    regret = sum(sum(i["instant_regret"] for i in infos.values()) for *_, infos in trajectory)
    batched = evaluate(HOMOG, "ucb1_shared", runs=1, seed=2, env_kwargs=kw)
    np.testing.assert_allclose(regret, batched.final_regret_network[0], rtol=1e-12)


@pytest.mark.slow
def test_jax_gives_the_same_presence_drops_and_agrees_with_numpy():
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    import fedbandit_env.jax as fj
    from fedbandit_env.jax.types import Action

    env = fj.make(HOMOG, num_agents=4, num_arms=3, topology="ring", horizon=50,
                  channels=NEIGHBORS, means=[0.2, 0.5, 0.9], churn=SCHEDULE)  # fmt: skip
    _, state = env.reset(jax.random.PRNGKey(0))
    step = jax.jit(env.step)
    rows = run_schedule(SCHEDULE, num_runs=1)
    for t in range(1, 11):
        action = Action(jnp.zeros(4, jnp.int32), {"c": (jnp.ones(4, bool),
                                                        jnp.ones((4, 1), jnp.float32))})
        obs, state, _, _, info = step(jax.random.PRNGKey(t), state, action)
        row = rows[t - 1]
        np.testing.assert_array_equal(np.asarray(obs.pulled), row["pulled"][0])
        np.testing.assert_array_equal(np.asarray(obs.deliveries["c"].mask), row["arrived"][0])
        np.testing.assert_allclose(np.asarray(info["instant_regret"]), row["regret"][0], atol=1e-6)
        assert int(info["charge"].messages.sum()) == row["messages"][0]
        assert int(info["charge"].dropped) == row["dropped"][0]
    kw = dict(num_agents=6, num_arms=5, horizon=400, topology="ring",
              churn={"kind": "markov", "p_leave": 0.05, "p_join": 0.2})  # fmt: skip
    runs = 60
    for agent, extra in (("ucb1_shared", {}), ("ucb1", {"clock": "one_random"})):
        a = evaluate(HOMOG, agent, runs=runs, env_kwargs={**kw, **extra}).final_regret_network
        b = evaluate(HOMOG, agent, runs=runs, env_kwargs={**kw, **extra},
                     backend="jax").final_regret_network  # fmt: skip
        se = math.sqrt(a.var(ddof=1) / runs + b.var(ddof=1) / runs)
        assert abs(a.mean() - b.mean()) <= 3 * se, (agent, a.mean(), b.mean(), se)
