"""Async-LinUCB (Li & Wang 2022) and FedLinUCB (He et al. 2022) under an event clock
(docs/async-linear.md): both against independent plain loops over the events (one client at a
time, fresh inverses and determinants) on the same decision sets and rewards, arm for arm and
message for message; Li & Wang's checks A1 (gamma = inf is N independent LinUCBs, no message)
and A3 (gamma = 1 is centralized LinUCB but for a client's first decision); He et al.'s F5 (no
push) and F6 (alpha = inf never learns); the channels' ledger and the refusals."""

from __future__ import annotations

import math

import numpy as np
import pytest

import fedbandit_env
from agents.async_common import DOWN, UP
from agents.async_lin_ucb import AsyncLinUCB
from agents.fed_lin_ucb_async import FedLinUCBAsync
from fedbandit_env.bench import evaluate
from fedbandit_env.errors import ConfigError
from fedbandit_env.network.ledger import AGENT_SERVER

LINEAR = "FedBandit/LinearContextual-v0"
SIGMA = 0.3
D = 4


def env_kwargs(policy, n=6, horizon=200, clock="one_random", **extra):
    kw = dict(num_agents=n, num_arms=5, dim=D, horizon=horizon,
              reward={"kind": "gaussian", "sigma": SIGMA}, clock=clock, **extra)  # fmt: skip
    kw["channels"] = policy.channel_spec(fedbandit_env.make_vec(LINEAR, num_runs=1, **kw).config)
    return kw


def play(policy, runs=2, seed=0, **kw):
    """Vector view, per pull of each run: the acting client (B, T), its decision set (B, T, K, d),
    the arm it played and the reward (B, T); and the pushes each client received, the venv."""
    venv = fedbandit_env.make_vec(LINEAR, num_runs=runs, **env_kwargs(policy, **kw))
    obs, _ = venv.reset(seed=seed)
    policy.reset(venv.facts, venv.agent_rng())
    rows = {"client": [], "context": [], "arm": [], "reward": [], "live": []}
    pushed = np.zeros((runs, venv.num_agents), dtype=np.int64)
    while not venv.engine.truncated:
        action = policy.act(obs)
        pull = np.ones(runs, bool) if action.pull is None else np.asarray(action.pull)
        live = pull & ~venv.engine.done_runs
        c = obs.active.argmax(axis=1)
        r = np.arange(runs)
        rows["client"].append(c)
        rows["context"].append(obs.context[r, c])
        rows["arm"].append(action.arms[r, c])
        obs, _, _, _, info = venv.step(action.arms, action.messages, action.pull)
        rows["reward"].append(obs.last_reward[r, c])
        rows["live"].append(live)
        pushed += obs.deliveries[DOWN].received
    live = np.stack(rows["live"], axis=1)
    out = {k: np.stack(v, axis=1) for k, v in rows.items() if k != "live"}
    per_run = [{k: v[b][live[b]] for k, v in out.items()} for b in range(runs)]
    return per_run, pushed, venv


def first_best(scores):
    """The first arm within a relative 1e-12 of the best score (unit-norm features make a
    client's first decision a tie up to rounding)."""
    top = max(scores)
    return next(k for k, s in enumerate(scores) if s >= top - 1e-12 * max(1.0, abs(top)))


def passes(new, ref, ratio):
    """det ratio > ``ratio`` beyond a relative 1e-12 (a unit-norm first pull doubles det(I))."""
    log_ratio = math.log(ratio) if math.isfinite(ratio) else math.inf
    return new - ref > log_ratio + 1e-12 * max(1.0, abs(log_ratio))


def plain_async_lin_ucb(clients, contexts, reward_of, gu, gd, lam=0.1, delta=0.1, R=0.1,
                        refresh="on_receive", sync_on_join=False):  # fmt: skip
    """One run of Async-LinUCB, event by event, from Li & Wang's Algorithm 1 as the module
    docstring of agents/async_lin_ucb.py states it; every inverse and determinant computed
    afresh; the run ends with its last pull. Returns the arms, the uploads and the downloads.
    ``sync_on_join``: a new client first downloads the server's sums (if any)."""
    d = contexts.shape[-1]
    eye = lam * np.eye(d)
    A, b, n = {}, {}, {}
    dA, db, dn = {}, {}, {}
    dec = {}
    Ag, bg, ng = np.zeros((d, d)), np.zeros(d), 0.0
    Dj = {}
    arms, uploads, downloads = [], 0, 0
    last, ages = {}, []  # a client's last download (the pull count after that event)

    def logdet(M):
        return np.linalg.slogdet(M)[1]

    def refresh_of(j):
        dec[j] = (np.linalg.inv(A[j] + eye), b[j].copy(), n[j])

    for t, i in enumerate(clients):
        if i not in A:
            A[i], b[i], n[i] = np.zeros((d, d)), np.zeros(d), 0.0
            dA[i], db[i], dn[i] = np.zeros((d, d)), np.zeros(d), 0.0
            refresh_of(i)
            Dj[i] = (Ag.copy(), bg.copy(), ng)
            if sync_on_join and ng > 0:  # the server's sums before the first decision
                A[i], b[i], n[i] = Ag.copy(), bg.copy(), ng
                Dj[i] = (np.zeros((d, d)), np.zeros(d), 0.0)
                downloads += 1
                last[i] = t
                if refresh == "on_receive":
                    refresh_of(i)
        ages.append(t - last.get(i, 0))
        V_inv, bb, nn = dec[i]
        theta = V_inv @ bb
        width = R * math.sqrt(d * math.log(1 + nn / (d * lam)) + 2 * math.log(1 / delta))
        width += math.sqrt(lam)
        scores = [x @ theta + width * math.sqrt(max(x @ V_inv @ x, 0.0)) for x in contexts[t]]
        k = first_best(scores)
        arms.append(k)
        x, y = contexts[t, k], reward_of(t, k)
        A[i], dA[i] = A[i] + np.outer(x, x), dA[i] + np.outer(x, x)
        b[i], db[i] = b[i] + y * x, db[i] + y * x
        n[i], dn[i] = n[i] + 1, dn[i] + 1
        refresh_of(i)
        if t == len(clients) - 1:  # the run ends with its last pull
            break
        if passes(logdet(A[i] + eye), logdet(A[i] - dA[i] + eye), gu):
            uploads += 1
            Ag, bg, ng = Ag + dA[i], bg + db[i], ng + dn[i]
            for j in Dj:
                if j != i:
                    Dj[j] = (Dj[j][0] + dA[i], Dj[j][1] + db[i], Dj[j][2] + dn[i])
            dA[i], db[i], dn[i] = np.zeros((d, d)), np.zeros(d), 0.0
            for j in sorted(Dj):
                if passes(logdet(Ag + eye), logdet(Ag - Dj[j][0] + eye), gd):
                    downloads += 1
                    last[j] = t + 1
                    A[j], b[j], n[j] = A[j] + Dj[j][0], b[j] + Dj[j][1], n[j] + Dj[j][2]
                    Dj[j] = (np.zeros((d, d)), np.zeros(d), 0.0)
                    if refresh == "on_receive":
                        refresh_of(j)
    plain_async_lin_ucb.staleness = float(np.mean(ages))
    return np.array(arms), uploads, downloads


def plain_fed_lin_ucb(clients, contexts, reward_of, alpha, beta=0.5, lam=1.0, use_local=False,
                      R=0.1, delta=0.1):  # fmt: skip
    """One run of He et al.'s FedLinUCB, event by event (Algorithm 1 as the module docstring of
    agents/fed_lin_ucb_async.py states it). Returns the arms and the exchanges. ``beta="theory"``:
    OFUL's radius on the pulls the decision's sums cover."""
    d = contexts.shape[-1]
    eye = lam * np.eye(d)
    Phi, u, loc, uloc, n, nloc = {}, {}, {}, {}, {}, {}
    Phi_ser, u_ser, n_ser = eye.copy(), np.zeros(d), 0
    arms, exchanges = [], 0
    last, ages = {}, []
    for t, m in enumerate(clients):
        ages.append(t - last.get(m, 0))
        if m not in Phi:
            Phi[m], u[m], loc[m], uloc[m] = eye.copy(), np.zeros(d), np.zeros((d, d)), np.zeros(d)
            n[m], nloc[m] = 0, 0
        V = Phi[m] + loc[m] if use_local else Phi[m]
        w = u[m] + uloc[m] if use_local else u[m]
        V_inv = np.linalg.inv(V)
        theta = V_inv @ w
        width = beta
        if beta == "theory":
            covered = n[m] + (nloc[m] if use_local else 0)
            width = R * math.sqrt(d * math.log(1 + covered / (d * lam)) + 2 * math.log(1 / delta))
            width += math.sqrt(lam)
        scores = [x @ theta + width * math.sqrt(max(x @ V_inv @ x, 0.0)) for x in contexts[t]]
        k = first_best(scores)
        arms.append(k)
        x, y = contexts[t, k], reward_of(t, k)
        loc[m], uloc[m], nloc[m] = loc[m] + np.outer(x, x), uloc[m] + y * x, nloc[m] + 1
        if t == len(clients) - 1:  # the run ends with its last pull
            break
        if passes(np.linalg.slogdet(Phi[m] + loc[m])[1], np.linalg.slogdet(Phi[m])[1], 1 + alpha):
            exchanges += 1
            last[m] = t + 1
            Phi_ser, u_ser, n_ser = Phi_ser + loc[m], u_ser + uloc[m], n_ser + nloc[m]
            Phi[m], u[m], n[m] = Phi_ser.copy(), u_ser.copy(), n_ser
            loc[m], uloc[m], nloc[m] = np.zeros((d, d)), np.zeros(d), 0
    plain_fed_lin_ucb.staleness = float(np.mean(ages))
    return np.array(arms), exchanges


def plain_sync_lin_ucb(clients, contexts, reward_of, D, lam=0.1, delta=0.1, R=0.1,
                       refresh="on_receive"):  # fmt: skip
    """One run of Li & Wang's Sync-LinUCB, event by event (agents/sync_lin_ucb.py's module
    docstring): the acting client's update and DisLinUCB's trigger; a sync uploads every seen
    client's buffer and replaces every seen client's statistics with the sums. Returns the arms,
    the syncs and the messages. ``refresh="on_local_update"``: a client decides on its statistics
    as of its own last update (a sync reaches its decisions after its next pull)."""
    d = contexts.shape[-1]
    eye = lam * np.eye(d)
    A, b, n, dA, db, dn, dec = {}, {}, {}, {}, {}, {}, {}
    Ag, bg, ng = np.zeros((d, d)), np.zeros(d), 0.0
    arms, syncs, messages = [], 0, 0
    for t, i in enumerate(clients):
        if i not in A:
            A[i], b[i], n[i] = np.zeros((d, d)), np.zeros(d), 0.0
            dA[i], db[i], dn[i] = np.zeros((d, d)), np.zeros(d), 0.0
            dec[i] = (A[i], b[i], n[i])
        Ai, bi, ni = dec[i]
        V_inv = np.linalg.inv(Ai + eye)
        width = R * math.sqrt(d * math.log(1 + ni / (d * lam)) + 2 * math.log(1 / delta))
        width += math.sqrt(lam)
        scores = [x @ V_inv @ bi + width * math.sqrt(max(x @ V_inv @ x, 0.0))
                  for x in contexts[t]]  # fmt: skip
        k = first_best(scores)
        arms.append(k)
        x, y = contexts[t, k], reward_of(t, k)
        A[i], dA[i] = A[i] + np.outer(x, x), dA[i] + np.outer(x, x)
        b[i], db[i] = b[i] + y * x, db[i] + y * x
        n[i], dn[i] = n[i] + 1, dn[i] + 1
        dec[i] = (A[i], b[i], n[i])
        if t == len(clients) - 1:
            break
        grown = np.linalg.slogdet(A[i] + eye)[1] - np.linalg.slogdet(A[i] - dA[i] + eye)[1]
        if dn[i] * grown >= D:
            syncs += 1
            messages += 2 * len(A)
            for j in A:
                Ag, bg, ng = Ag + dA[j], bg + db[j], ng + dn[j]
                dA[j], db[j], dn[j] = np.zeros((d, d)), np.zeros(d), 0.0
            for j in A:
                A[j], b[j], n[j] = Ag.copy(), bg.copy(), ng
                if refresh == "on_receive":
                    dec[j] = (A[j], b[j], n[j])
    return np.array(arms), syncs, messages


def replayed(run):
    def reward_of(t, k):
        assert run["arm"][t] == k, (t, k, run["arm"][t])
        return run["reward"][t]

    return reward_of


def messages_of(venv, b):
    return int(venv.engine.ledger.total.messages[b].sum())


@pytest.mark.parametrize(
    ("gamma", "refresh", "join"),
    [(2.0, "on_receive", False), (5.0, "on_receive", False), (1.5, "on_local_update", False),
     (1.0, "on_receive", False), (2.0, "on_receive", True), (1.5, "on_local_update", True)],
)  # fmt: skip
def test_async_lin_ucb_equals_the_plain_loop_on_the_same_rewards(gamma, refresh, join):
    policy = AsyncLinUCB(gamma_u=gamma, gamma_d=gamma, refresh=refresh, sync_on_join=join)
    runs, _, venv = play(policy, runs=2, seed=4)
    for b, run in enumerate(runs):
        arms, uploads, downloads = plain_async_lin_ucb(
            run["client"], run["context"], replayed(run), gamma, gamma, refresh=refresh,
            sync_on_join=join,
        )
        np.testing.assert_array_equal(arms, run["arm"])
        assert (policy.uploads[b], policy.downloads[b]) == (uploads, downloads)
        assert policy.staleness()[b] == pytest.approx(plain_async_lin_ucb.staleness, rel=1e-12)
        assert messages_of(venv, b) == uploads + downloads and uploads > 0 and downloads > 0
        floats = venv.engine.ledger.total.floats[b, AGENT_SERVER]
        assert floats == (uploads + downloads) * (D * D + D + 1)


def test_a1_infinite_gammas_are_independent_linucbs_without_a_message():
    policy = AsyncLinUCB(gamma_u=math.inf, gamma_d=math.inf)
    runs, pushed, venv = play(policy, runs=2, seed=7)
    for b, run in enumerate(runs):
        # each client alone: the plain loop with no communication is per-client LinUCB
        arms, uploads, downloads = plain_async_lin_ucb(
            run["client"], run["context"], replayed(run), math.inf, math.inf
        )
        np.testing.assert_array_equal(arms, run["arm"])
        assert uploads == downloads == messages_of(venv, b) == 0
    np.testing.assert_array_equal(policy.staleness(), (200 - 1) / 2)  # never downloaded: t at t
    assert pushed.sum() == 0 and venv.engine.step_count == 200  # no communication step


def test_a3_gamma_one_decides_on_every_past_event_but_a_clients_first_decision():
    """gamma_U = gamma_D = 1, fresh statistics: at every decision of a client already seen, its
    (A, b) are the sums over all past events; each event costs one upload and a download to
    every other seen client (1 + (seen - 1) messages)."""
    policy = AsyncLinUCB(gamma_u=1.0, gamma_d=1.0)
    venv = fedbandit_env.make_vec(LINEAR, num_runs=1, **env_kwargs(policy, horizon=120))
    obs, _ = venv.reset(seed=2)
    policy.reset(venv.facts, venv.agent_rng())
    A_all, b_all = np.zeros((D, D)), np.zeros(D)
    seen, expected, checked = set(), [], 0
    while not venv.engine.truncated:
        action = policy.act(obs)
        if action.pull is None:  # a decision: the acting client's statistics
            c = int(obs.active[0].argmax())
            if c in seen:
                np.testing.assert_allclose(policy.A[0, c], A_all, atol=1e-9)
                np.testing.assert_allclose(policy.b[0, c], b_all, atol=1e-9)
                checked += 1
            # an upload and a download to every other seen client; at a client's first event
            # also one to itself (the server's earlier sums), but for the very first event
            first = c not in seen
            seen.add(c)
            expected.append(1 + len(seen) - 1 + (first and A_all.any()))
            x = obs.context[0, c, action.arms[0, c]]
        obs, *_ = venv.step(action.arms, action.messages, action.pull)
        if action.pull is None:
            A_all += np.outer(x, x)
            b_all += obs.last_reward[0, c] * x
    assert checked > 100 and messages_of(venv, 0) == sum(expected[:-1])  # none after the last


def test_sync_on_join_gamma_one_decides_on_every_past_event_first_decisions_included():
    """With ``sync_on_join``, gamma = 1 and fresh statistics, every decision but the run's
    first sees the sums over all past events, a client's first included: the join download
    (one message, on a communication step before the decision) brings the server's sums."""
    policy = AsyncLinUCB(gamma_u=1.0, gamma_d=1.0, sync_on_join=True)
    venv = fedbandit_env.make_vec(LINEAR, num_runs=1, **env_kwargs(policy, horizon=120))
    obs, _ = venv.reset(seed=2)
    policy.reset(venv.facts, venv.agent_rng())
    A_all, b_all = np.zeros((D, D)), np.zeros(D)
    seen, firsts, joins, decisions = set(), 0, 0, 0
    while not venv.engine.truncated:
        action = policy.act(obs)
        if action.pull is None:  # a decision
            c = int(obs.active[0].argmax())
            decisions += 1
            if decisions > 1:
                np.testing.assert_allclose(policy.dec_b[0, c], b_all, atol=1e-9)
                V = A_all + 0.1 * np.eye(D)
                np.testing.assert_allclose(policy.dec_V_inv[0, c], np.linalg.inv(V), atol=1e-7)
                firsts += c not in seen
            seen.add(c)
            x = obs.context[0, c, action.arms[0, c]]
        else:  # a communication step; the server pushes only to clients it has seen, so a
            c = int(obs.active[0].argmax())  # download to a client yet to decide is a join,
            down = action.messages["down"][0][0]  # to the acting client only
            new = [j for j in np.flatnonzero(down) if j not in seen]
            assert new in ([], [c])
            joins += len(new)
        obs, *_ = venv.step(action.arms, action.messages, action.pull)
        if action.pull is None:
            A_all += np.outer(x, x)
            b_all += obs.last_reward[0, c] * x
    assert firsts == joins == len(seen) - 1 > 2  # every client but the run's first joined


@pytest.mark.parametrize("beta", [0.5, "theory"])
def test_fed_lin_ucb_async_equals_the_plain_loop_on_the_same_rewards(beta):
    for alpha, use_local in ((1.0, False), (0.3, False), (1.0, True)):
        policy = FedLinUCBAsync(alpha=alpha, use_local=use_local, beta=beta, R=0.3)
        runs, _, venv = play(policy, runs=2, seed=5)
        for b, run in enumerate(runs):
            arms, exchanges = plain_fed_lin_ucb(
                run["client"], run["context"], replayed(run), alpha, use_local=use_local,
                beta=beta, R=0.3,
            )
            np.testing.assert_array_equal(arms, run["arm"])
            assert policy.exchanges[b] == exchanges > 0
            assert policy.staleness()[b] == pytest.approx(plain_fed_lin_ucb.staleness, rel=1e-12)
            assert messages_of(venv, b) == 2 * exchanges  # one upload, one download
        floats = venv.engine.ledger.total.floats[0].sum() if beta == "theory" else None
        if floats is not None:  # d^2 + d + 1 per message: the count travels
            d = runs[0]["context"].shape[-1]
            assert floats == messages_of(venv, 0) * (d * d + d + 1)


def test_f5_no_push_a_client_that_never_acts_receives_nothing():
    clients = [t % 5 for t in range(200)]  # client 5 never acts
    for policy in (FedLinUCBAsync(), AsyncLinUCB(gamma_u=2.0, gamma_d=2.0)):
        _, pushed, venv = play(policy, runs=1, clock={"kind": "trace", "clients": clients})
        assert pushed[0, 5] == 0 and pushed[0, :5].sum() > 0
    # FedLinUCB: every download answers the active client's own upload
    policy = FedLinUCBAsync(alpha=0.5)
    runs, pushed, venv = play(policy, runs=1, clock={"kind": "trace", "clients": clients})
    assert pushed[0].sum() == policy.exchanges[0] == messages_of(venv, 0) // 2


def test_f6_infinite_alpha_never_communicates_and_decides_on_lambda_alone():
    policy = FedLinUCBAsync(alpha=math.inf)
    runs, pushed, venv = play(policy, runs=1, seed=1)
    run = runs[0]
    # on lambda I alone: theta = 0, so the arm of largest norm (the first within rounding)
    norms = np.linalg.norm(run["context"], axis=-1)
    np.testing.assert_array_equal(run["arm"], [first_best(list(row)) for row in norms])
    assert messages_of(venv, 0) == 0 and pushed.sum() == 0


def test_the_event_takes_communication_steps_and_no_pull():
    policy = FedLinUCBAsync()
    runs, _, venv = play(policy, runs=1, horizon=100)
    assert venv.engine.pulls[0] == 100 == len(runs[0]["arm"])
    assert venv.engine.step_count == 100 + 2 * policy.exchanges[0]


@pytest.mark.parametrize("agent", ["async_lin_ucb", "fed_lin_ucb_async"])
def test_bad_federations_are_refused_by_name(agent):
    kw = dict(num_agents=4, num_arms=5, dim=3, horizon=20)
    with pytest.raises(ConfigError, match=rf"{agent}: clock: expected an event clock"):
        evaluate(LINEAR, agent, runs=1, env_kwargs=kw)
    with pytest.raises(ConfigError, match=rf"{agent}: reward_delay"):
        evaluate(LINEAR, agent, runs=1, env_kwargs={**kw, "clock": "one_random",
                                                    "reward_delay": 3})  # fmt: skip
    with pytest.raises(ConfigError, match=rf"{agent}: .*family"):
        evaluate("FedBandit/Homogeneous-v0", agent, runs=1,
                 env_kwargs={"num_agents": 4, "horizon": 20, "clock": "one_random"})  # fmt: skip
    size = 3 * 3 + 3 + (1 if agent == "async_lin_ucb" else 0)
    channels = {UP: {"kind": "server", "dim": size, "aggregate": "sum"},
                DOWN: {"kind": "push", "dim": size}}  # fmt: skip
    with pytest.raises(ConfigError, match=rf"{agent}: channels.up: expected reply 'none'"):
        evaluate(LINEAR, agent, runs=1,
                 env_kwargs={**kw, "clock": "one_random", "channels": channels})  # fmt: skip
    channels[UP]["reply"] = "none"
    channels[DOWN]["drop_prob"] = 0.1
    with pytest.raises(ConfigError, match=rf"{agent}: channels.down: expected participation 1"):
        evaluate(LINEAR, agent, runs=1,
                 env_kwargs={**kw, "clock": "one_random", "channels": channels})  # fmt: skip


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"gamma_u": 0.5}, r"async_lin_ucb: gamma_u"),
        ({"gamma_d": float("nan")}, r"async_lin_ucb: gamma_d"),
        ({"refresh": "never"}, r"async_lin_ucb: refresh: expected one of"),
        ({"lam": 0.0}, r"async_lin_ucb: lam"),
        ({"sync_on_join": "yes"}, r"async_lin_ucb: sync_on_join"),
    ],
)
def test_bad_async_lin_ucb_settings_name_the_field(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        AsyncLinUCB(**kwargs)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"alpha": 0.0}, r"fed_lin_ucb_async: alpha"),
        ({"beta": -1.0}, r"fed_lin_ucb_async: beta"),
        ({"beta": "oful"}, r"fed_lin_ucb_async: beta: expected a number >= 0 or 'theory', got 'oful'"),
        ({"R": -1.0}, r"fed_lin_ucb_async: R"),
        ({"delta": 1.0}, r"fed_lin_ucb_async: delta"),
        ({"use_local": 1}, r"fed_lin_ucb_async: use_local"),
    ],
)
def test_bad_fed_lin_ucb_async_settings_name_the_field(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        FedLinUCBAsync(**kwargs)


def test_a_push_channel_is_never_attacked():
    channels = {"p": {"kind": "push", "dim": 2}, "s": {"kind": "server", "dim": 2}}
    venv = fedbandit_env.make_vec("FedBandit/Homogeneous-v0", num_runs=1, num_agents=4,
                                  horizon=10, channels=channels,
                                  adversary={"num_byzantine": 1, "attack": "reverse"})  # fmt: skip
    with pytest.raises(ConfigError, match=r"adversary.channels: expected the agents' channels"):
        venv.reset(seed=0)


def test_the_parallel_view_plays_as_the_vector_view():
    """Through the PettingZoo view (run_episode's adapter) the team policy gets the same
    deliveries (the push channel's per-agent dicts) and plays the same arms as on the batched
    engine: the same regret and messages."""
    from fedbandit_env.policy import run_episode

    kw = env_kwargs(FedLinUCBAsync(), horizon=60)
    env = fedbandit_env.make(LINEAR, **kw)
    trajectory = run_episode(env, FedLinUCBAsync(), seed=3)
    regret = sum(sum(info["instant_regret"] for info in infos.values())
                 for *_, infos in trajectory)  # fmt: skip
    batched = evaluate(LINEAR, "fed_lin_ucb_async", runs=1, seed=3, env_kwargs=kw)
    np.testing.assert_allclose(regret, batched.final_regret_network[0], rtol=1e-12)
    assert batched.messages[0].sum() > 0


def test_the_docs_example_runs_and_both_learners_communicate():
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "docs" / "async-linear.md").read_text()
    code = re.findall(r"```python\n(.*?)```", text, re.S)[0].replace("horizon=2000", "horizon=300")
    namespace: dict = {}
    exec(compile(code, "docs/async-linear.md", "exec"), namespace)  # noqa: S102
    for name in ("li_wang", "he"):
        result = namespace[name]
        assert result.messages.sum() > 0 and np.isfinite(result.final_regret_network).all()


def test_staleness_is_a_row_diagnostic_and_a_column_of_the_tables(tmp_path):
    """evaluate keeps each run's staleness; the store keeps it in the row's flags (checked as
    data); the leaderboard shows it in a column of its own, only where a learner reports it,
    and never as a warning."""
    from fedbandit_env.bench.flags import check_flags, entry_flags, format_flags, result_flags
    from fedbandit_env.bench.leaderboard import build, to_markdown
    from fedbandit_env.bench.store import ResultsStore, rows_from_result
    from fedbandit_env.bench.suites import Cell

    kw = env_kwargs(AsyncLinUCB(), horizon=120)
    res = evaluate(LINEAR, "async_lin_ucb", runs=2, env_kwargs=kw)
    assert res.staleness.shape == (2,) and (res.staleness > 0).all()
    flags = result_flags(res)
    assert [f["staleness"] for f in flags] == list(res.staleness)
    assert format_flags(entry_flags(flags)) == "—"  # a diagnostic, not a warning
    with pytest.raises(ValueError, match=r"row.staleness: expected a number >= 0"):
        check_flags({"staleness": -1.0}, "row", ValueError)
    assert evaluate(LINEAR, "linucb", runs=2, env_kwargs=kw).staleness is None
    store = ResultsStore(tmp_path / "s.db")
    for agent in ("async_lin_ucb", "linucb"):
        cell = Cell(LINEAR, agent, 120, 2, {k: v for k, v in kw.items() if k != "horizon"})
        store.append(rows_from_result(cell, "async", evaluate(LINEAR, agent, runs=2,
                                                                env_kwargs=kw)))  # fmt: skip
    table = to_markdown(build(store.rows()))
    assert "| staleness (events) |" in table and f"| {res.staleness.mean():.1f} |" in table
    assert table.count("| — |") >= 1  # linucb reports none


@pytest.mark.parametrize(("threshold", "refresh"), [
    (0.5, "on_receive"), (3.0, "on_receive"), ("match_comm", "on_receive"),
    (0.5, "on_local_update"), ("match_comm", "on_local_update"),
])  # fmt: skip
def test_sync_lin_ucb_equals_the_plain_loop_on_the_same_rewards(threshold, refresh):
    """Li & Wang's Sync-LinUCB: arm for arm, and 2 x (seen clients) messages per sync."""
    from agents.sync_lin_ucb import SyncLinUCB, li_wang_threshold

    policy = SyncLinUCB(threshold=threshold, refresh=refresh)
    runs, _, venv = play(policy, runs=2, seed=6)
    bound = threshold if not isinstance(threshold, str) else li_wang_threshold(threshold, 200, 6,
                                                                                D)  # fmt: skip
    for b, run in enumerate(runs):
        arms, syncs, messages = plain_sync_lin_ucb(run["client"], run["context"], replayed(run),
                                                   bound, refresh=refresh)  # fmt: skip
        np.testing.assert_array_equal(arms, run["arm"])
        assert policy.syncs[b] == syncs > 0 and messages_of(venv, b) == messages
        if refresh == "on_local_update":  # the setting matters here: fresh decisions differ
            def linear(t, k, ctx=run["context"]):
                return float(ctx[t][k].sum())

            fresh, *_ = plain_sync_lin_ucb(run["client"], run["context"], linear, bound)
            stale, *_ = plain_sync_lin_ucb(run["client"], run["context"], linear, bound,
                                           refresh=refresh)  # fmt: skip
            assert (fresh != stale).any()


def test_sync_lin_ucb_refuses_a_bad_threshold_by_name():
    from agents.sync_lin_ucb import SyncLinUCB

    with pytest.raises(ConfigError, match=r"sync_lin_ucb: threshold: expected a number >= 0 or"):
        SyncLinUCB(threshold="often")
    with pytest.raises(ConfigError, match=r"sync_lin_ucb: refresh: expected one of"):
        SyncLinUCB(refresh="never")
    with pytest.raises(ConfigError, match=r"sync_lin_ucb: clock: expected an event clock"):
        evaluate(LINEAR, "sync_lin_ucb", runs=1, env_kwargs={"dim": 3, "horizon": 10})
