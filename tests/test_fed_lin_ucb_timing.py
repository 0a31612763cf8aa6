"""Centralized FedUCB (docs/linear.md, Algorithm 1) against an independent plain loop of
Algorithm 1 written here, with the sync at the end of the trial that triggers it: the
agent's default ``timing="paper"`` plays the same action in every trial and syncs after the same
trials, on the environment's decision sets and rewards (non-private, so the streams align);
``timing="latency"`` does not, and the option is validated."""

from __future__ import annotations

import math

import numpy as np
import pytest

import fedbandit_env
from agents.fed_lin_ucb import FedLinUCB
from fedbandit_env.errors import ConfigError
from fedbandit_env.network.ledger import AGENT_SERVER

ENV = "FedBandit/LinearContextual-v0"


def plain_fed_ucb(
    M, T, d, D, contexts, reward, lam=1.0, sigma=0.5, S=1.0, alpha=0.1, fixed=None, tie=None
):
    """Algorithm 1 non-private, line by line (rho_min = rho_max = lambda, kappa = 0).
    ``contexts[t-1]`` (M, K, d); ``reward(t, i, a)``; ``fixed``: the trials after which to sync
    instead of the trigger; ``tie(t, i, candidates)`` picks among actions whose scores are equal up
    to float rounding (default: the lowest index, docs/linear.md; the test follows the agent, whose
    rounding decides). Returns (actions (T, M), the trials after which a sync happened)."""
    W = [M * lam * np.eye(d) for _ in range(M)]
    w = [np.zeros(d) for _ in range(M)]
    U = [np.zeros((d, d)) for _ in range(M)]
    u = [np.zeros(d) for _ in range(M)]
    G = [np.zeros((d, d)) for _ in range(M)]
    g = [np.zeros(d) for _ in range(M)]
    delta, actions, syncs = 0, [], []
    for t in range(1, T + 1):
        trigger = False
        row = []
        for i in range(M):
            V = W[i] + U[i]
            theta = np.linalg.solve(V, w[i] + u[i])
            logdet = np.linalg.slogdet(V)[1]
            radicand = 2 * math.log(2 / alpha) + logdet - d * math.log(M * lam)
            beta = sigma * math.sqrt(max(0.0, radicand)) + S * math.sqrt(M * lam)
            Vinv = np.linalg.inv(V)
            scores = np.array(
                [x @ theta + beta * math.sqrt(max(x @ Vinv @ x, 0.0)) for x in contexts[t - 1][i]]
            )
            best = np.flatnonzero(scores >= scores.max() - 1e-9 * (1 + abs(scores.max())))
            a = int(best[0]) if tie is None or len(best) == 1 else tie(t, i, best)
            x, y = contexts[t - 1][i][a], reward(t, i, a)
            U[i] += np.outer(x, x)
            u[i] += y * x
            G[i] += np.outer(x, x)
            g[i] += y * x
            lhs = np.linalg.slogdet(W[i] + U[i])[1] - np.linalg.slogdet(W[i])[1]
            if (delta + 1) * lhs >= D:
                trigger = True
            row.append(a)
        actions.append(row)
        if fixed is not None:
            trigger = t in fixed
        if trigger:
            total_W = sum(G[i] + lam * np.eye(d) for i in range(M))
            total_w = sum(g[i] for i in range(M))
            for i in range(M):
                W[i], w[i] = total_W.copy(), total_w.copy()
                U[i], u[i] = np.zeros((d, d)), np.zeros(d)
            delta = 0
            syncs.append(t)
        else:
            delta += 1
    return np.array(actions), syncs


def _rollout(policy, runs=2, seed=0, **kw):
    venv = fedbandit_env.make_vec(ENV, num_runs=runs, **kw)
    venv = fedbandit_env.make_vec(
        ENV, num_runs=runs, channels=policy.channel_spec(venv.config), **kw
    )
    obs, _ = venv.reset(seed=seed)
    policy.reset(venv.facts, venv.agent_rng())
    rows = []  # per engine step: (context, arms, pulled (B,), rewards)
    while not venv.engine.truncated:
        context = obs.context.copy()
        action = policy.act(obs)
        pulled = ~venv.engine.done_runs
        if action.pull is not None:
            pulled &= action.pull
        obs, rewards, *_ = venv.step(action.arms, action.messages, action.pull)
        rows.append((context, action.arms.copy(), pulled, rewards.copy()))
    return venv, rows


def _run_view(rows, b):
    """Run b's trials (contexts, arms, rewards) and the trials after which it synced (a
    communication step after trial t)."""
    contexts, arms, rewards, syncs = [], [], [], []
    for context, a, pulled, r in rows:
        if pulled[b]:
            contexts.append(context[b])
            arms.append(a[b])
            rewards.append(r[b])
        elif len(contexts) and (not syncs or syncs[-1] != len(contexts)):
            syncs.append(len(contexts))
    return contexts, np.array(arms), np.array(rewards), syncs


@pytest.mark.parametrize(
    ("kwargs", "label"),
    [
        ({"sync_threshold": 2.0}, "adaptive"),
        ({"sync_threshold": 0.0}, "every trial"),
        ({"schedule": "fixed", "num_syncs": 7}, "fixed"),
    ],
)
def test_paper_timing_matches_the_plain_loop_step_for_step(kwargs, label):
    M, T, d = 3, 120, 3
    policy = FedLinUCB(private=False, **kwargs)
    venv, rows = _rollout(policy, num_agents=M, horizon=T, dim=d, num_arms=4)
    D = kwargs.get("sync_threshold", 0.0)
    fixed = None
    if label == "fixed":
        fixed = {math.ceil(k * (T - 1) / 7) for k in range(1, 8)}
    for b in range(2):
        contexts, arms, rewards, syncs = _run_view(rows, b)
        assert len(contexts) == T
        ties = []

        def follow(t, i, candidates, mine=arms, ties=ties):
            ties.append(t)
            assert mine[t - 1, i] in candidates
            return int(mine[t - 1, i])

        plain, plain_syncs = plain_fed_ucb(
            M, T, d, D, contexts, lambda t, i, a, r=rewards: r[t - 1, i], fixed=fixed, tie=follow
        )
        assert set(ties) <= {1}  # exact ties only before any data (theta = 0, unit-norm sets)
        assert np.array_equal(arms, plain), label
        plain_syncs = [s for s in plain_syncs if s < T]  # a sync after trial T is never held
        assert syncs == plain_syncs and policy.n_sync[b] == len(syncs) > 3, label
        uploads = venv.engine.ledger.total.messages[b, AGENT_SERVER]
        requests = uploads - 2 * M * len(syncs)  # M uploads + M broadcasts per sync
        assert requests >= 0 and (requests > 0) == (label == "adaptive")


def test_latency_timing_syncs_later():
    M, T, d = 3, 120, 3
    policy = FedLinUCB(private=False, sync_threshold=2.0, timing="latency")
    venv, rows = _rollout(policy, num_agents=M, horizon=T, dim=d, num_arms=4)
    contexts, arms, rewards, syncs = _run_view(rows, 0)
    assert len(rows) == T and syncs == []  # no communication step
    plain, _ = plain_fed_ucb(
        M,
        T,
        d,
        2.0,
        contexts,
        lambda t, i, a: rewards[t - 1, i],
        tie=lambda t, i, c: int(arms[t - 1, i]) if arms[t - 1, i] in c else int(c[0]),
    )
    assert not np.array_equal(arms, plain)


def test_private_paper_timing_syncs_right_after_the_trigger():
    """Private: every sync is one communication step, right after a trial in which some agent's
    trigger fired (its request travelled with that trial's pull)."""
    policy = FedLinUCB(epsilon=1.0, sync_threshold=30.0)
    venv, rows = _rollout(policy, num_agents=4, horizon=300, dim=3, num_arms=4)
    for b in range(2):
        _, _, _, syncs = _run_view(rows, b)
        assert len(syncs) == policy.n_sync[b] > 2
        steps = sum(1 for *_, pulled, _ in rows if pulled[b])
        assert steps == 300


@pytest.mark.parametrize("timing", ["Paper", None, 2, "eager"])
def test_bad_timing(timing):
    with pytest.raises(ConfigError, match=r"fed_lin_ucb: timing: expected 'paper'"):
        FedLinUCB(timing=timing)
