"""Decentralized FedUCB (docs/linear.md) under its default ``timing="paper"``: a trigger after
the pull of trial t broadcasts its request and release at trial t (one communication step), so
they reach the neighbours at the start of trial t+1, as the reconstruction's network model says;
answers go out at the start of the trial the request arrives in. An independent plain loop of the
reconstruction's pseudocode written here (gamma = 1, non-private; the clique cover, a graph fact, is
the only input taken from the agent) plays the same actions in every trial on the environment's
decision sets and rewards; under ``timing="latency"`` it does not. With gamma = 2 each run's slots
follow its own trials, and a run of a batch equals that seed alone."""

from __future__ import annotations

import math

import networkx as nx
import numpy as np
import pytest

import fedbandit_env
from agents.fed_lin_ucb_decentralized import FedLinUCBDecentralized
from fedbandit_env.errors import ConfigError

ENV = "FedBandit/LinearContextual-v0"


def plain_decentralized(graph, cliques, T, d, D, contexts, reward, tie, lam=1.0):
    """The reconstruction with gamma = 1, non-private (releases G + lambda I, g). Returns actions
    (T, M)."""
    M = graph.number_of_nodes()
    sigma, S, alpha = 0.5, 1.0, 0.1
    clique_of = {i: c for c in cliques for i in c}
    R = {i: {j: (lam * np.eye(d), np.zeros(d)) for j in clique_of[i]} for i in range(M)}
    seen = {i: {j: 0 for j in clique_of[i]} for i in range(M)}
    U = [np.zeros((d, d)) for _ in range(M)]
    u = [np.zeros(d) for _ in range(M)]
    G = [np.zeros((d, d)) for _ in range(M)]
    g = [np.zeros(d) for _ in range(M)]
    delta = [0] * M
    releases = [0] * M
    inbox = {}  # trial -> list of (receiver, origin, kind, payload)
    actions = []

    def broadcast(t, v, message):
        for w in graph.neighbors(v):  # distance 1 <= gamma: arrives at the start of t + 1
            inbox.setdefault(t + 1, []).append((w, v, *message))

    def release(t, i, request):
        Uh, uh = G[i] + lam * np.eye(d), g[i].copy()
        R[i][i] = (Uh, uh)
        releases[i] += 1
        seen[i][i] = releases[i]
        U[i], u[i], delta[i] = np.zeros((d, d)), np.zeros(d), 0
        broadcast(t, i, ("data", (Uh, uh, releases[i], request)))

    for t in range(1, T + 1):
        pending = set()
        for w, v, _, (Uh, uh, seq, request) in inbox.pop(t, []):
            if clique_of[w] is not clique_of[v]:
                continue
            if seq > seen[w][v]:
                R[w][v], seen[w][v] = (Uh, uh), seq
            if request:
                pending.add(w)
        for w in sorted(pending):
            if delta[w] > 0:
                release(t, w, False)
        row = []
        for i in range(M):
            c = len(clique_of[i])
            W = sum(R[i][j][0] for j in clique_of[i])
            w_vec = sum(R[i][j][1] for j in clique_of[i])
            V = W + U[i]
            theta = np.linalg.solve(V, w_vec + u[i])
            rad = 2 * math.log(2 / alpha) + np.linalg.slogdet(V)[1] - d * math.log(c * lam)
            beta = sigma * math.sqrt(max(0.0, rad)) + S * math.sqrt(c * lam)
            Vinv = np.linalg.inv(V)
            scores = np.array(
                [x @ theta + beta * math.sqrt(max(x @ Vinv @ x, 0.0)) for x in contexts[t - 1][i]]
            )
            best = np.flatnonzero(scores >= scores.max() - 1e-9 * (1 + abs(scores.max())))
            a = int(best[0]) if len(best) == 1 else tie(t, i, best)
            x, y = contexts[t - 1][i][a], reward(t, i, a)
            U[i] += np.outer(x, x)
            u[i] += y * x
            G[i] += np.outer(x, x)
            g[i] += y * x
            delta[i] += 1
            lhs = np.linalg.slogdet(W + U[i])[1] - np.linalg.slogdet(W)[1]
            if delta[i] * lhs >= D:
                release(t, i, True)  # request and own release, broadcast at trial t
            row.append(a)
        actions.append(row)
    return np.array(actions)


def _rollout(policy, topology, runs=2, seed=0, horizon=80, n=5, d=3):
    kw = {"num_agents": n, "dim": d, "num_arms": 4, "horizon": horizon, "topology": topology}
    spec = policy.channel_spec(fedbandit_env.make_vec(ENV, dim=d).config)
    venv = fedbandit_env.make_vec(ENV, num_runs=runs, channels=spec, **kw)
    obs, _ = venv.reset(seed=seed)
    policy.reset(venv.facts, venv.agent_rng())
    rows = []
    while not venv.engine.truncated:
        context = obs.context.copy()
        action = policy.act(obs)
        pulled = ~venv.engine.done_runs
        if action.pull is not None:
            pulled &= action.pull
        obs, rewards, *_ = venv.step(action.arms, action.messages, action.pull)
        rows.append((context, action.arms.copy(), pulled, rewards.copy()))
    return venv, rows


def _trials(rows, b):
    pulled = [(c[b], a[b], r[b]) for c, a, p, r in rows if p[b]]
    return (
        [x[0] for x in pulled],
        np.array([x[1] for x in pulled]),
        np.array([x[2] for x in pulled]),
    )


@pytest.mark.parametrize("topology", ["ring", "complete"])
@pytest.mark.parametrize("timing", ["paper", "latency"])
def test_gamma_1_matches_the_plain_loop_of_section_2_8_only_under_paper_timing(topology, timing):
    D = 1.0
    policy = FedLinUCBDecentralized(gamma=1, private=False, sync_threshold=D, timing=timing)
    venv, rows = _rollout(policy, topology)
    graph = venv.config.topology.graph
    cliques = [list(c) for c in policy.cliques]
    assert sum(len(c) for c in cliques) == graph.number_of_nodes()
    for c in cliques:  # a clique cover of G (gamma = 1)
        assert all(graph.has_edge(i, j) for i in c for j in c if i < j)
    matches = []
    for b in range(2):
        contexts, arms, rewards = _trials(rows, b)
        assert len(contexts) == 80

        def follow(t, i, candidates, mine=arms):
            return int(mine[t - 1, i]) if mine[t - 1, i] in candidates else int(candidates[0])

        plain = plain_decentralized(
            graph,
            [c for c in cliques],
            80,
            3,
            D,
            contexts,
            lambda t, i, a, r=rewards: r[t - 1, i],
            follow,
        )
        matches.append(np.array_equal(arms, plain))
    assert policy.n_requests.min() > 3
    if timing == "paper":
        assert all(matches)
        assert len(rows) > 80  # the triggers were communication steps
    else:
        assert not any(matches) and len(rows) == 80


def test_gamma_2_slots_follow_each_runs_trials_and_batch_equals_alone():
    policy = FedLinUCBDecentralized(gamma=2, private=False, sync_threshold=0.5)
    _, rows = _rollout(policy, "path", runs=3, seed=4, n=6)
    assert len(rows) > 80 and policy.n_requests.min() > 3
    # the slot of trial k is (k - 1) mod 2 in every run: own data per slot = own uses of it
    for b in range(3):
        contexts, arms, _ = _trials(rows, b)
        x = np.stack([contexts[k][np.arange(6), arms[k]] for k in range(80)])  # (T, N, d)
        for slot in range(2):
            # the last trial is folded only if the batch acts again (another run goes on)
            grams = [np.einsum("tni,tnj->nij", x[:k][slot::2], x[:k][slot::2]) for k in (79, 80)]
            assert any(np.allclose(policy.G[b, :, slot], gram, atol=1e-9) for gram in grams)
    alone = FedLinUCBDecentralized(gamma=2, private=False, sync_threshold=0.5)
    _, single = _rollout(alone, "path", runs=1, seed=5, n=6)
    assert np.array_equal(_trials(single, 0)[1], _trials(rows, 1)[1])


@pytest.mark.parametrize("timing", ["Paper", None, 1])
def test_bad_timing(timing):
    with pytest.raises(ConfigError, match=r"fed_lin_ucb_decentralized: timing: expected 'paper'"):
        FedLinUCBDecentralized(timing=timing)


def test_graph_fact_cliques_cover_every_agent_once():
    policy = FedLinUCBDecentralized(gamma=1, private=False)
    venv, _ = _rollout(policy, "ring", runs=1, horizon=5)
    assert sorted(i for c in policy.cliques for i in c) == list(range(5))
    assert nx.is_connected(venv.config.topology.graph)
