"""Fed1-UCB and Fed2-UCB (docs/fed-ucb12.md): agreement with an independent plain-loop
implementation of the rules (exactly on replayed rewards, and within 3 standard errors with
independent reward draws), the light cone, determinism, both views, regret accounting of
inactive clients and bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest

import fedbandit_env
from agents.fed1_ucb import Fed1UCB
from agents.fed2_ucb import Fed2UCB, join_rounds
from fedbandit_env.bench import evaluate
from fedbandit_env.errors import ConfigError

HETERO = "FedBandit/Heterogeneous-v0"
SIGMA = 0.5
# local means: the global means (0.7, 0.5, 0.4, 0.3) times a client-by-arm weight matrix whose
# columns average to 1 (the paper's exact model), so local optima differ from the global one
GLOBAL = np.array([0.7, 0.5, 0.4, 0.3])
WEIGHTS = np.array(
    [
        [0.6, 1.4, 1.0, 1.2],
        [1.4, 0.8, 1.0, 0.8],
        [1.0, 1.0, 1.3, 1.0],
        [1.0, 0.8, 0.7, 1.0],
    ]
)
MEANS = GLOBAL * WEIGHTS


# ------------------------------------------------------------------ the plain loop
def plain_fed(means, horizon, f, width, join, reward_of):
    """One run of Fed1/Fed2-UCB written from the rules of docs/fed-ucb12.md, one agent and
    one pull at a time. ``f(p)`` pulls per active arm in phase p; ``width(p, clients)`` the
    elimination width after phase p, ``clients`` the join phase of each current client;
    ``join[i]``: the phase (1-based) in which agent i joins; ``reward_of(i, pull, arm)`` the
    reward of agent i's pull number ``pull`` (0-based). Returns the pseudo-regret of every agent
    (against the global means), the ledger's messages and the number of server rounds."""
    n_agents, K = means.shape
    mu = means.mean(axis=0)
    sums = [[0.0] * K for _ in range(n_agents)]
    counts = [[0] * K for _ in range(n_agents)]
    active = list(range(K))
    regret = [0.0] * n_agents
    messages, rounds, t, p = 0, 0, 0, 1
    committed = None
    while t < horizon:
        if committed is not None:
            for i in range(n_agents):
                regret[i] += mu.max() - mu[committed]
            t += 1
            continue
        for _ in range(f(p)):
            for arm in active:
                if t >= horizon:
                    break
                for i in range(n_agents):
                    r = reward_of(i, t, arm)
                    if join[i] <= p:
                        sums[i][arm] += r
                        counts[i][arm] += 1
                    regret[i] += mu.max() - mu[arm]
                t += 1
        if t >= horizon:
            break
        clients = [i for i in range(n_agents) if join[i] <= p]
        avg = {k: sum(sums[i][k] / counts[i][k] for i in clients) / len(clients) for k in active}
        messages += len(clients) + n_agents  # uploads, and the broadcast to every agent
        rounds += 1
        w = width(p, [join[i] for i in clients])
        best = max(avg.values())
        active = [k for k in active if not avg[k] + w < best - w]
        if len(active) == 1:
            committed = active[0]
        p += 1
    return np.array(regret), messages, rounds


def fed1_width(T, f):
    def width(p, clients):
        n = sum(f(q) for q in range(1, p + 1))
        return math.sqrt(4 * SIGMA**2 * math.log(T) / (len(clients) * n))

    return width


def fed2_width(T, f, sigma_c):
    def width(p, clients):
        M = len(clients)
        eta = sum(1.0 / sum(f(q) for q in range(c, p + 1)) for c in clients) / M**2
        return math.sqrt(SIGMA**2 * eta * math.log(T)) + math.sqrt(sigma_c**2 * math.log(T) / M)

    return width


def _env_kwargs(policy, horizon, means=MEANS, **extra):
    kw = dict(
        num_agents=means.shape[0],
        num_arms=means.shape[1],
        horizon=horizon,
        means=means,
        reward={"kind": "gaussian", "sigma": SIGMA},
        **extra,
    )
    preview = fedbandit_env.make_vec(HETERO, num_runs=1, **kw).config
    kw["channels"] = policy.channel_spec(preview)
    return kw


def _play(policy, runs, seed, horizon, means=MEANS, perturb=None):
    """Vector view; returns the recorded pulled arms (steps, B, N; -1 for communication steps),
    rewards, final cumulative regret (B, N) and the venv."""
    venv = fedbandit_env.make_vec(HETERO, num_runs=runs, **_env_kwargs(policy, horizon, means))
    obs, _ = venv.reset(seed=seed)
    policy.reset(venv.facts, venv.agent_rng())
    arms, rewards, info = [], [], None
    t = 0
    while not venv.engine.truncated:
        t += 1
        if perturb is not None:
            perturb(t, venv)
        action = policy.act(obs)
        pulled = np.ones(runs, bool) if action.pull is None else np.asarray(action.pull)
        live = pulled & ~venv.engine.done_runs
        obs, rew, _, _, info = venv.step(action.arms, action.messages, action.pull)
        arms.append(np.where(live[:, None], action.arms, -1))
        rewards.append(rew)
    return np.stack(arms), np.stack(rewards), info.cumulative_regret, venv


def _replay(arms, rewards, b):
    """reward_of(i, pull, arm) from run b's recorded pulls (the arm must be the one pulled)."""
    steps = np.flatnonzero(arms[:, b, 0] >= 0)

    def reward_of(i, pull, arm):
        s = steps[pull]
        assert arms[s, b, i] == arm, (i, pull, arm, arms[s, b, i])
        return rewards[s, b, i]

    return reward_of


# ------------------------------------------------------------------ exact agreement
@pytest.mark.parametrize("f", [7, lambda p: 3 + 2 * p])
def test_fed1_equals_the_plain_loop_on_the_same_rewards(f):
    T = 1500
    fn = f if callable(f) else (lambda p: f)
    policy = Fed1UCB(f=f)
    arms, rewards, regret, venv = _play(policy, runs=3, seed=2, horizon=T)
    for b in range(3):
        ref, messages, rounds = plain_fed(
            MEANS, T, fn, fed1_width(T, fn), [1] * 4, _replay(arms, rewards, b)
        )
        assert np.allclose(regret[b], ref)
        assert venv.engine.ledger.total.messages[b].sum() == messages
        assert policy.num_phases[b] == rounds
    assert policy.committed.any()  # the test reaches the commit phase


def test_fed2_equals_the_plain_loop_on_the_same_rewards():
    T, n = 2500, 6
    means = np.vstack([MEANS, MEANS[:2]])
    policy = Fed2UCB(f=15, width_scale=1.0)
    arms, rewards, regret, venv = _play(policy, runs=3, seed=5, horizon=T, means=means)
    join = [r + 1 for r in join_rounds(n, lambda p: 2**p)]
    assert join == [1, 1, 2, 2, 2, 2]
    fn = lambda p: 15  # noqa: E731
    for b in range(3):
        ref, messages, rounds = plain_fed(
            means, T, fn, fed2_width(T, fn, 0.02), join, _replay(arms, rewards, b)
        )
        assert np.allclose(regret[b], ref)
        assert venv.engine.ledger.total.messages[b].sum() == messages
        assert policy.num_phases[b] == rounds


# ------------------------------------------------------------- statistical agreement
def _gaussian_rewards(means, rng):
    def reward_of(i, pull, arm):
        return means[i, arm] + SIGMA * rng.standard_normal()

    return reward_of


@pytest.mark.parametrize("which", ["fed1", "fed2"])
def test_regret_and_messages_agree_with_independent_draws(which):
    """Independent reward draws on a fixed instance: mean network regret and messages within
    3 standard errors of the plain loop."""
    T, runs = 1200, 24
    means = np.vstack([MEANS, MEANS[:2]])
    if which == "fed1":
        policy = Fed1UCB(f=10)
        width, join = fed1_width(T, lambda p: 10), [1] * 6
    else:
        policy = Fed2UCB(f=10)
        width = fed2_width(T, lambda p: 10, 0.02)
        join = [r + 1 for r in join_rounds(6, lambda p: 2**p)]
    res = evaluate(HETERO, policy, runs=runs, seed=0, env_kwargs=_env_kwargs(policy, T, means))
    ours_regret = res.final_regret_network
    ours_msgs = res.messages.sum(axis=1)
    rng = np.random.default_rng(123)
    ref = [
        plain_fed(means, T, lambda p: 10, width, join, _gaussian_rewards(means, rng))
        for _ in range(runs)
    ]
    ref_regret = np.array([r[0].sum() for r in ref])
    ref_msgs = np.array([r[1] for r in ref], dtype=float)
    for a, b in ((ours_regret, ref_regret), (ours_msgs, ref_msgs)):
        se = math.sqrt(a.var(ddof=1) / runs + b.var(ddof=1) / runs)
        assert abs(a.mean() - b.mean()) <= 3 * se + 1e-9, (a.mean(), b.mean(), se)
    assert ours_regret.std() > 0  # the instance is not decided by the first phase


# ------------------------------------------------------------------ inactive clients
def test_inactive_clients_play_the_phase_arms_and_count_in_regret():
    """Fed2-UCB: clients that have not joined play the phase's arms, keep no samples and send
    nothing; their pulls count in the network regret like everyone's, so evaluate's network
    regret is N times the per-agent regret and every agent's regret is the same."""
    T = 800
    means = np.vstack([MEANS, MEANS])
    policy = Fed2UCB(f=10)
    res = evaluate(HETERO, policy, runs=2, seed=1, env_kwargs=_env_kwargs(policy, T, means))
    by_agent = res.regret_by_agent[:, -1]
    assert np.allclose(by_agent, by_agent[:, :1])
    assert np.allclose(res.final_regret_network, by_agent.sum(axis=1))
    assert np.allclose(res.final_regret_per_agent, res.final_regret_network / 8)
    arms, _, _, venv = _play(Fed2UCB(f=10), runs=1, seed=1, horizon=120, means=means)
    first = arms[0, 0]
    assert (first == first[0]).all()  # every agent, joined or not, on the same arm


def test_clients_join_through_the_channel_schedule():
    policy = Fed2UCB(f=5)
    means = np.tile(MEANS[:1], (7, 1))
    kw = _env_kwargs(policy, 300, means)
    assert kw["channels"]["server"]["join_round"] == [0, 0, 1, 1, 1, 1, 2]
    venv = fedbandit_env.make_vec(HETERO, num_runs=1, **kw)
    obs, _ = venv.reset(seed=0)
    policy.reset(venv.facts, venv.agent_rng())
    uploads = []
    while not venv.engine.truncated and len(uploads) < 3:
        action = policy.act(obs)
        obs, *_ = venv.step(action.arms, action.messages, action.pull)
        if action.pull is not None and not action.pull[0]:
            uploads.append(obs.deliveries["server"].participating[0].copy())
    assert [u.sum() for u in uploads] == [2, 6, 7]


# ------------------------------------------------------------------ light cone, views
@pytest.mark.parametrize("factory", [lambda: Fed1UCB(f=10), lambda: Fed2UCB(f=10)])
@pytest.mark.parametrize("j", [0, 3])
def test_light_cone(factory, j):
    T, t_change = 700, 45
    means = np.tile([0.6, 0.5, 0.45], (5, 1))

    def perturb(t, venv):
        if t == t_change:
            venv.engine.means[:, j, :] = [0.0, 0.0, 5.0]

    base, *_ = _play(factory(), runs=2, seed=4, horizon=T, means=means)
    arms, *_ = _play(factory(), runs=2, seed=4, horizon=T, means=means, perturb=perturb)
    steps = min(len(base), len(arms))
    for i in range(5):
        changed = np.nonzero((arms[:steps, :, i] != base[:steps, :, i]).any(axis=1))[0]
        assert changed.size > 0, f"agent {i} never saw agent {j}'s change"
        # the server is one hop from everyone: a reward of step t can change the arms of
        # step t + 2 at the earliest (upload with step t + 1, the average comes back then)
        assert changed[0] + 1 > t_change + (0 if i == j else 1), (i, changed[0] + 1)


@pytest.mark.parametrize("factory", [lambda: Fed1UCB(f=6), lambda: Fed2UCB(f=6)])
def test_batch_equals_single_runs_and_views_agree(factory):
    arms, _, regret, _ = _play(factory(), runs=3, seed=7, horizon=300)
    for b in range(3):
        one, _, reg1, _ = _play(factory(), runs=1, seed=7 + b, horizon=300)
        assert np.array_equal(one[:, 0][one[:, 0, 0] >= 0], arms[:, b][arms[:, b, 0] >= 0])
        assert np.array_equal(reg1[0], regret[b])
    policy = factory()
    env = fedbandit_env.make(HETERO, **_env_kwargs(policy, 300))
    traj = fedbandit_env.run_episode(env, policy, seed=7)
    dict_arms = np.array(
        [
            [a[f"agent_{i}"]["arm"] if a[f"agent_{i}"].get("pull", 1) else -1 for i in range(4)]
            for a, *_ in traj
        ]
    )
    assert (dict_arms == -1).any()  # server rounds are communication steps
    assert np.array_equal(dict_arms, arms[: len(dict_arms), 0])


# ------------------------------------------------------------------ bad input
def _reset(policy, **kw):
    venv = fedbandit_env.make_vec(HETERO, num_runs=1, **kw)
    venv.reset(seed=0)
    policy.reset(venv.facts, venv.agent_rng())


def test_bad_input_is_a_clear_error():
    with pytest.raises(ConfigError, match=r"fed1_ucb: f: expected"):
        Fed1UCB(f=0)
    with pytest.raises(ConfigError, match=r"fed2_ucb: sigma_c"):
        Fed2UCB(sigma_c=-1.0)
    with pytest.raises(ConfigError, match=r"fed1_ucb: width_scale"):
        Fed1UCB(width_scale=-1.0)
    with pytest.raises(ConfigError, match=r"fed1_ucb: channels.server"):
        _reset(Fed1UCB(), num_agents=3, num_arms=3)
    schedule = {"server": {"kind": "server", "dim": 3, "join_round": [0, 1, 1]}}
    with pytest.raises(ConfigError, match=r"fed1_ucb: channels.server.join_round"):
        _reset(Fed1UCB(), num_agents=3, num_arms=3, channels=schedule)
    _reset(Fed2UCB(), num_agents=3, num_arms=3, channels=schedule)  # Fed2 takes it
    drops = {"server": {"kind": "server", "dim": 3, "drop_prob": 0.1}}
    with pytest.raises(ConfigError, match=r"fed2_ucb: channels.server.drop_prob"):
        _reset(Fed2UCB(), num_agents=3, num_arms=3, channels=drops)
    with pytest.raises(ConfigError, match=r"fed2_ucb: family: expected"):
        _reset_linear(Fed2UCB())
    with pytest.raises(ConfigError, match=r"fed2_ucb: g\(1\): expected"):
        Fed2UCB(g=lambda p: 0).channel_spec(fedbandit_env.make_vec(HETERO, num_runs=1).config)


def _reset_linear(policy):
    venv = fedbandit_env.make_vec(
        "FedBandit/LinearContextual-v0",
        num_runs=1,
        channels={"server": {"kind": "server", "dim": 10}},
    )
    venv.reset(seed=0)
    policy.reset(venv.facts, venv.agent_rng())
