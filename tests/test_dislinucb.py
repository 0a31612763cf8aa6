"""DisLinUCB (docs/dislinucb.md): agreement with an independent plain-loop implementation
(exactly on replayed rewards, within 3 standard errors with independent reward noise), syncs as
communication steps, the light cone, determinism, both views and bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest

import fedbandit_env
from agents.dislinucb import DisLinUCB, heuristic_threshold
from fedbandit_env.bench import evaluate
from fedbandit_env.engine import PULL
from fedbandit_env.errors import ConfigError
from fedbandit_env.seeding import BatchedRNG

LINEAR = "FedBandit/LinearContextual-v0"
SIGMA = 0.3


def plain_dislinucb(contexts, reward_of, D, tiebreak, lam=0.2, delta=0.01, R=0.5):
    """One run of DisLinUCB from the rules of docs/dislinucb.md, one client at a time.

    ``contexts`` (T, N, K, d): the decision sets of each trial; ``reward_of(t, i, k)`` the
    reward. All clients of a trial decide on the statistics they hold before it (the
    environment's trials are simultaneous); each client's trigger is checked after its update,
    and a sync (every buffer to the server, the global sums back to everyone) follows the trial
    if any trigger fired. ``tiebreak()`` gives (N, K) uniforms, called once per trial and once
    per sync (the agents draw once per engine step); among values within a relative 1e-12 of
    the best, the largest uniform wins. Returns the chosen arms (T, N), the syncs and the ledger's
    messages."""
    T, N, K, d = contexts.shape
    A = [np.zeros((d, d)) for _ in range(N)]
    b = [np.zeros(d) for _ in range(N)]
    n = [0.0] * N
    dA = [np.zeros((d, d)) for _ in range(N)]
    db = [np.zeros(d) for _ in range(N)]
    dn = [0.0] * N
    A_g, b_g, n_g = np.zeros((d, d)), np.zeros(d), 0.0
    chosen = np.zeros((T, N), dtype=np.int64)
    syncs = messages = 0
    for t in range(T):
        fired = []
        u = tiebreak()
        for i in range(N):
            V = A[i] + lam * np.eye(d)
            V_inv = np.linalg.inv(V)
            theta = V_inv @ b[i]
            alpha = R * math.sqrt(d * math.log(1 + n[i] / (d * lam)) + 2 * math.log(1 / delta))
            alpha += math.sqrt(lam)
            scores = [
                contexts[t, i, k] @ theta
                + alpha * math.sqrt(max(contexts[t, i, k] @ V_inv @ contexts[t, i, k], 0.0))
                for k in range(K)
            ]
            top = max(scores)
            ties = [k for k in range(K) if scores[k] >= top - 1e-12 * max(1.0, abs(top))]
            k = max(ties, key=lambda k: u[i, k])
            chosen[t, i] = k
            x, r = contexts[t, i, k], reward_of(t, i, k)
            A[i] = A[i] + np.outer(x, x)
            dA[i] = dA[i] + np.outer(x, x)
            b[i] = b[i] + r * x
            db[i] = db[i] + r * x
            n[i] += 1
            dn[i] += 1
            now = np.linalg.slogdet(A[i] + lam * np.eye(d))[1]
            then = np.linalg.slogdet(A[i] - dA[i] + lam * np.eye(d))[1]
            if D == 0 or dn[i] * (now - then) >= D:
                fired.append(i)
        if fired and t < T - 1:
            if D > 0:
                messages += len(fired) + N  # the requests and their broadcast
            for i in range(N):
                A_g, b_g, n_g = A_g + dA[i], b_g + db[i], n_g + dn[i]
                dA[i], db[i], dn[i] = np.zeros((d, d)), np.zeros(d), 0.0
            for i in range(N):
                A[i], b[i], n[i] = A_g.copy(), b_g.copy(), n_g
            syncs += 1
            messages += 2 * N
            tiebreak()  # N uploads, N downloads
    return chosen, syncs, messages


def _agent_uniforms(seed, n, k):
    """The agents' own tie-break draws of run seed ``seed`` (their ``tiebreak`` stream)."""
    stream = BatchedRNG.for_runs([seed], "agents").child("tiebreak").buffered("uniform", (n, k))
    return lambda: stream.next()[0]


def _uniforms(rng, n, k):
    return lambda: rng.random((n, k))


def _kwargs(policy, n=4, horizon=150, **extra):
    kw = dict(
        num_agents=n,
        num_arms=5,
        dim=4,
        horizon=horizon,
        reward={"kind": "gaussian", "sigma": SIGMA},
        **extra,
    )
    preview = fedbandit_env.make_vec(LINEAR, num_runs=1, **kw).config
    kw["channels"] = policy.channel_spec(preview)
    return kw


def _play(policy, runs=2, seed=0, perturb=None, **kw):
    """Vector view: pulled arms (pulls, B, N), contexts (pulls, B, N, K, d), rewards, regret,
    theta (B, d), venv."""
    venv = fedbandit_env.make_vec(LINEAR, num_runs=runs, **_kwargs(policy, **kw))
    obs, _ = venv.reset(seed=seed)
    policy.reset(venv.facts, venv.agent_rng())
    contexts, rewards, steps = [], [], []
    info = None
    while not venv.engine.truncated:
        if perturb is not None:
            perturb(venv, len(steps))
        action = policy.act(obs)
        pulled = np.ones(runs, bool) if action.pull is None else np.asarray(action.pull)
        live = pulled & ~venv.engine.done_runs
        ctx = obs.context.copy()
        obs, rew, _, _, info = venv.step(action.arms, action.messages, action.pull)
        steps.append(np.where(live[:, None], action.arms, -1))
        contexts.append(ctx)
        rewards.append(rew)
    return (
        np.stack(steps),
        np.stack(contexts),
        np.stack(rewards),
        info.cumulative_regret,
        venv.engine.linear.theta.copy(),
        venv,
    )


def _per_pull(steps, contexts, rewards, b):
    keep = steps[:, b, 0] >= 0
    return steps[keep, b], contexts[keep, b], rewards[keep, b]


@pytest.mark.parametrize("D", [0.0, 0.5, 3.0])
def test_equals_the_plain_loop_on_the_same_rewards(D):
    policy = DisLinUCB(sync_threshold=D)
    steps, contexts, rewards, _, _, venv = _play(policy, runs=2, seed=3)
    for b in range(2):
        arms, ctx, rew = _per_pull(steps, contexts, rewards, b)

        def reward_of(t, i, k, arms=arms, rew=rew):
            assert arms[t, i] == k, (t, i, k, arms[t, i])
            return rew[t, i]

        chosen, syncs, messages = plain_dislinucb(ctx, reward_of, D, _agent_uniforms(3 + b, 4, 5))
        assert np.array_equal(chosen, arms)
        assert policy.n_sync[b] == syncs
        assert venv.engine.ledger.total.messages[b].sum() == messages
    assert policy.n_sync.min() > 0


def test_regret_and_messages_agree_with_independent_noise():
    """The decision sets of a pull do not depend on the learner (communication steps draw
    none), so the plain loop sees the same sets with its own reward noise: mean network regret
    and messages agree within 3 standard errors."""
    runs, D, T = 12, 1.0, 120
    policy = DisLinUCB(sync_threshold=D)
    steps, contexts, _, regret, theta, venv = _play(policy, runs=runs, seed=10, horizon=T)
    ours = regret.sum(axis=1)
    ours_msgs = venv.engine.ledger.total.messages.sum(axis=1).astype(float)
    rng = np.random.default_rng(99)
    ref, ref_msgs = [], []
    for b in range(runs):
        _, ctx, _ = _per_pull(steps, contexts, np.zeros(steps.shape), b)
        means = ctx @ theta[b]  # (T, N, K)

        def reward_of(t, i, k, means=means):
            return means[t, i, k] + SIGMA * rng.standard_normal()

        chosen, _, messages = plain_dislinucb(ctx, reward_of, D, _uniforms(rng, 4, 5))
        best = means.max(axis=2)
        got = np.take_along_axis(means, chosen[..., None], axis=2)[..., 0]
        ref.append((best - got).sum())
        ref_msgs.append(messages)
    for a, b in ((ours, np.array(ref)), (ours_msgs, np.array(ref_msgs, dtype=float))):
        se = math.sqrt(a.var(ddof=1) / runs + b.var(ddof=1) / runs)
        assert abs(a.mean() - b.mean()) <= 3 * se + 1e-9, (a.mean(), b.mean(), se)


def test_syncs_are_communication_steps_and_cost_what_the_spec_says():
    policy = DisLinUCB(sync_threshold=0.0)
    steps, *_, venv = _play(policy, runs=1, horizon=30)
    assert (steps[:, 0, 0] == -1).sum() == 29  # a sync between every two trials
    d = 4
    floats = venv.engine.ledger.total.floats[0].sum()
    assert floats == 29 * 2 * 4 * (d * d + d + 1)
    never = DisLinUCB(sync_threshold=1e12)
    steps, *_, venv = _play(never, runs=1, horizon=30)
    assert (steps >= 0).all() and venv.engine.ledger.total.messages.sum() == 0


def test_default_threshold_is_the_documented_heuristic():
    policy = DisLinUCB()
    _play(policy, runs=1, horizon=40, n=3)
    assert policy.threshold == pytest.approx(40 / (3 * 4 * math.log(3 * 40)))
    assert heuristic_threshold(40, 3, 4) == policy.threshold


@pytest.mark.parametrize("j", [0, 2])
def test_light_cone(j):
    t_change = 30
    base = _play_perturbed(None, t_change)
    changed_run = _play_perturbed(j, t_change)
    for i in range(5):
        diff = np.nonzero((changed_run[:, :, i] != base[:, :, i]).any(axis=1))[0]
        assert diff.size > 0, f"agent {i} never saw agent {j}'s change"
        # through the server: one hop (a reward of step t reaches decisions of step t + 2)
        assert diff[0] + 1 > t_change + (0 if i == j else 1), (i, diff[0] + 1)


def _play_perturbed(j, t_change):
    """Engine-step arms (steps, B, N); agent j's rewards of the pulls from engine step
    ``t_change`` on are seen as 5 - reward (the others' unchanged; None: no change)."""
    policy = DisLinUCB(sync_threshold=0.5)
    venv = fedbandit_env.make_vec(LINEAR, num_runs=2, **_kwargs(policy, n=5, horizon=90))
    obs, _ = venv.reset(seed=1)
    policy.reset(venv.facts, venv.agent_rng())
    steps = []
    while not venv.engine.truncated:
        action = policy.act(obs)
        obs, *_ = venv.step(action.arms, action.messages, action.pull)
        if j is not None and venv.engine.step_count >= t_change:  # fresh pulls only
            flip = obs.phase == PULL
            obs.last_reward[flip, j] = 5.0 - obs.last_reward[flip, j]
        steps.append(action.arms.copy())
    return np.stack(steps)


def test_batch_equals_single_runs_and_views_agree():
    steps, _, _, regret, _, _ = _play(DisLinUCB(sync_threshold=0.5), runs=3, seed=5, horizon=60)
    for b in range(3):
        one, _, _, reg1, _, _ = _play(DisLinUCB(sync_threshold=0.5), runs=1, seed=5 + b, horizon=60)
        assert np.array_equal(one[:, 0][one[:, 0, 0] >= 0], steps[:, b][steps[:, b, 0] >= 0])
        assert np.array_equal(reg1[0], regret[b])
    policy = DisLinUCB(sync_threshold=0.5)
    env = fedbandit_env.make(LINEAR, **_kwargs(policy, horizon=60))
    traj = fedbandit_env.run_episode(env, policy, seed=5)
    dict_arms = np.array(
        [
            [a[f"agent_{i}"]["arm"] if a[f"agent_{i}"].get("pull", 1) else -1 for i in range(4)]
            for a, *_ in traj
        ]
    )
    assert (dict_arms == -1).any()
    assert np.array_equal(dict_arms, steps[: len(dict_arms), 0])


def test_bad_input_is_a_clear_error():
    with pytest.raises(ConfigError, match=r"dislinucb: sync_threshold"):
        DisLinUCB(sync_threshold=-1.0)
    with pytest.raises(ConfigError, match=r"dislinucb: lam"):
        DisLinUCB(lam=0.0)
    with pytest.raises(ConfigError, match=r"dislinucb: delta"):
        DisLinUCB(delta=1.0)
    with pytest.raises(
        ConfigError,
        match=r"dislinucb: family: expected 'linear', got "
        r"'heterogeneous'",
    ):
        evaluate("FedBandit/Heterogeneous-v0", "dislinucb", runs=1, env_kwargs={"horizon": 5})
    venv = fedbandit_env.make_vec(
        LINEAR,
        num_runs=1,
        dim=4,
        channels={
            "sync": {"kind": "server", "dim": 1},
            "stats": {"kind": "server", "dim": 21, "aggregate": "sum"},
        },
    )
    venv.reset(seed=0)
    with pytest.raises(ConfigError, match=r"dislinucb: channels.sync: expected aggregate 'sum'"):
        DisLinUCB().reset(venv.facts, venv.agent_rng())
