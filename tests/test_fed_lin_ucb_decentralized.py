"""Decentralized FedUCB (docs/linear.md): cliques of G^gamma, flooding, light cone."""

from __future__ import annotations

import numpy as np
import pytest

import fedbandit_env
from agents.fed_lin_ucb_decentralized import FedLinUCBDecentralized, slot_channel
from fedbandit_env import ConfigError
from fedbandit_env.bench import evaluate

ENV = "FedBandit/LinearContextual-v0"
SCALE = {"private": False, "beta_scale": 0.1}


def test_complete_graph_matches_centralized_and_path_sits_between():
    """complete G, gamma = 1 is close to centralized FedUCB; a path (pairs) sits
    between that and independent agents."""
    kw = {"num_agents": 6, "horizon": 1000}
    dec = evaluate(
        ENV,
        "fed_lin_ucb_decentralized",
        runs=3,
        env_kwargs={**kw, "topology": "complete"},
        agent_kwargs=SCALE,
    )
    cen = evaluate(
        ENV, "fed_lin_ucb", runs=3, env_kwargs={**kw, "topology": "complete"}, agent_kwargs=SCALE
    )
    alone = evaluate(ENV, "linucb", runs=3, env_kwargs=kw, agent_kwargs={"beta_scale": 0.1})
    path = evaluate(
        ENV,
        "fed_lin_ucb_decentralized",
        runs=3,
        env_kwargs={**kw, "topology": "path"},
        agent_kwargs=SCALE,
    )
    d, c = dec.final_regret_per_agent.mean(), cen.final_regret_per_agent.mean()
    assert abs(d - c) < 0.1 * c
    assert c < path.final_regret_per_agent.mean() < alone.final_regret_per_agent.mean()


def test_cliques_of_the_power_graph():
    v = fedbandit_env.make_vec(
        ENV,
        num_runs=1,
        num_agents=7,
        topology="path",
        channels=FedLinUCBDecentralized(gamma=2).channel_spec(fedbandit_env.make_vec(ENV).config),
    )
    v.reset(seed=0)
    policy = FedLinUCBDecentralized(gamma=2, private=False)
    policy.reset(v.facts, v.agent_rng())
    assert len(policy.cliques) == 3  # ceil(7 / (gamma + 1))
    for clique in policy.cliques:
        assert max(clique) - min(clique) <= 2  # within gamma hops on the path


@pytest.mark.parametrize("private", [False, True])
def test_light_cone(private):
    n, horizon, t_change, j = 7, 70, 20, 2  # agent 2 shares the clique {1, 2, 3}
    spec = FedLinUCBDecentralized(gamma=2).channel_spec(fedbandit_env.make_vec(ENV, dim=4).config)

    def run(perturb: bool):
        policy = FedLinUCBDecentralized(  # trial-indexed: the latency timing (engine steps)
            gamma=2,
            private=private,
            epsilon=1.0,
            beta_scale=0.05,
            sync_threshold=0.5,
            timing="latency",
        )
        v = fedbandit_env.make_vec(
            ENV,
            num_runs=2,
            num_agents=n,
            dim=4,
            horizon=horizon,
            topology="path",
            channels=spec,
            reward={"kind": "gaussian", "sigma": 0.1},
        )
        obs, _ = v.reset(seed=1)
        policy.reset(v.facts, v.agent_rng())
        arms, msgs = [], []
        for t in range(1, horizon + 1):
            action = policy.act(obs)
            arms.append(action.arms.copy())
            msgs.append(np.stack([pay for _, pay in action.messages.values()], axis=2))
            if perturb and t >= t_change:
                action_arms = action.arms.copy()
                obs, rewards, *_ = v.step(action_arms, action.messages)
                obs.last_reward[:, j] += 3.0  # agent j's rewards change from trial t_change on
            else:
                obs, *_ = v.step(action.arms, action.messages)
        return np.stack(arms), np.stack(msgs), v.config.topology.hop_distances

    base_arms, base_msgs, dist = run(False)
    arms, msgs, _ = run(True)
    reached = 0
    for i in range(n):
        changed = np.nonzero(
            (arms[:, :, i] != base_arms[:, :, i]).any(axis=1)
            | (msgs[:, :, i] != base_msgs[:, :, i]).any(axis=(1, 2, 3))
        )[0]
        if changed.size:
            reached += 1
            assert changed[0] + 1 > t_change + dist[i, j], (i, changed[0] + 1)
    assert reached >= 2  # the change did propagate (agent j and its clique)


def test_batch_member_equals_run_alone():
    kw = {"num_agents": 5, "horizon": 200, "topology": "ring"}
    both = evaluate(
        ENV,
        "fed_lin_ucb_decentralized",
        runs=2,
        seed=3,
        env_kwargs=kw,
        agent_kwargs={"epsilon": 1.0, "gamma": 2, "sync_threshold": 1.0},
    )
    alone = evaluate(
        ENV,
        "fed_lin_ucb_decentralized",
        runs=1,
        seed=4,
        env_kwargs=kw,
        agent_kwargs={"epsilon": 1.0, "gamma": 2, "sync_threshold": 1.0},
    )
    assert np.array_equal(both.regret_network[1], alone.regret_network[0])
    assert both.messages.sum() > 0


def test_bad_input():
    with pytest.raises(
        ConfigError, match=r"fed_lin_ucb_decentralized: gamma: expected an int >= 1"
    ):
        FedLinUCBDecentralized(gamma=0)
    with pytest.raises(ConfigError, match=r"fed_lin_ucb_decentralized: epsilon"):
        FedLinUCBDecentralized(epsilon=-1.0)
    slots = {name: {"kind": "flood", "dim": 113, "ttl": 1} for name in ("flood", "flood_1")}
    v = fedbandit_env.make_vec(ENV, num_runs=1, channels=slots)
    v.reset(seed=0)
    with pytest.raises(ConfigError, match=r"channels\.flood: expected ttl >= 2, got ttl 1"):
        FedLinUCBDecentralized(gamma=2).reset(v.facts, v.agent_rng())
    v = fedbandit_env.make_vec(ENV, num_runs=1, channels={"flood": {**slots["flood"], "ttl": 2}})
    v.reset(seed=0)
    with pytest.raises(ConfigError, match=r"channels\.flood_1: expected a 'flood' channel"):
        FedLinUCBDecentralized(gamma=2).reset(v.facts, v.agent_rng())


def test_horizon_and_graph_checks():
    """T >= 2 gamma + 1 (one sync round) and a connected graph, checked before the first step."""
    policy = FedLinUCBDecentralized(gamma=2, private=False)
    spec = policy.channel_spec(fedbandit_env.make_vec(ENV).config)
    short = fedbandit_env.make_vec(ENV, num_runs=1, num_agents=4, horizon=4, channels=spec)
    short.reset(seed=0)
    with pytest.raises(
        ConfigError,
        match=r"fed_lin_ucb_decentralized: horizon: expected at least 2 \* gamma \+ 1 = 5 "
        r"trials .*got 4",
    ):
        policy.reset(short.facts, short.agent_rng())
    ok = evaluate(
        ENV,
        FedLinUCBDecentralized(gamma=2, private=False),
        runs=1,
        env_kwargs={"num_agents": 4, "horizon": 5},
    )
    assert ok.final_regret_per_agent.shape == (1,)
    split = fedbandit_env.make_vec(
        ENV,
        num_runs=1,
        num_agents=4,
        topology="hybrid",
        topology_kwargs={"sizes": [2, 2]},
        channels=spec,
    )
    split.reset(seed=0)
    with pytest.raises(
        ConfigError, match=r"fed_lin_ucb_decentralized: topology: expected a connected graph"
    ):
        policy.reset(split.facts, split.agent_rng())


def play_recorded(gamma, n=7, horizon=90, threshold=0.5, topology="path", runs=2):
    """Non-private decentralized FedUCB (d = 4): per act, the pulled x, each agent's number of
    folded pulls per slot (trace of its own cumulative G, unit-norm actions), the pull counts
    inside every table entry (trace of R_U - lambda I), and the requests (act, run, agent,
    slot)."""
    policy = FedLinUCBDecentralized(  # indexed by engine steps: the latency timing
        gamma=gamma, private=False, sync_threshold=threshold, beta_scale=0.1, timing="latency"
    )
    v = fedbandit_env.make_vec(
        ENV,
        num_runs=runs,
        num_agents=n,
        dim=4,
        horizon=horizon,
        topology=topology,
        channels=policy.channel_spec(fedbandit_env.make_vec(ENV, dim=4).config),
    )
    obs, _ = v.reset(seed=2)
    policy.reset(v.facts, v.agent_rng())
    xs, own, table, requests = [], [], [], []
    for k in range(horizon):
        action = policy.act(obs)
        xs.append(np.take_along_axis(obs.context, action.arms[..., None, None], axis=2)[:, :, 0])
        own.append(np.trace(policy.G, axis1=-2, axis2=-1))
        table.append(np.trace(policy.R_U, axis1=-2, axis2=-1) - 4 * policy.lam)
        for g in range(gamma):
            send, payload = action.messages[slot_channel(g)]
            for b, i in zip(*np.nonzero(send & (payload[..., 0] > 0.5)), strict=True):
                requests.append((k, b, i, g))
        obs, *_ = v.step(action.arms, action.messages)
    return policy, np.stack(xs), np.stack(own), np.stack(table), requests


def test_round_robin_slots_are_isolated():
    """estimator g only ever holds data of the trials that used it, its own and its
    clique members' (each table entry is lambda I + a prefix of that member's slot-g pulls)."""
    gamma, horizon = 3, 90
    policy, xs, _, _, requests = play_recorded(gamma, horizon=horizon)
    assert len(requests) > 20
    lam_eye = policy.lam * np.eye(4)
    slot_of = np.arange(horizon) % gamma
    folded = xs[:-1]  # the pull of the last act is never folded
    for g in range(gamma):
        x = folded[slot_of[:-1] == g]  # (uses, B, N, d)
        prefix = np.concatenate(
            [np.zeros((1, *x.shape[1:], 4)), np.cumsum(np.einsum("tbni,tbnj->tbnij", x, x), 0)]
        )
        assert np.allclose(policy.G[:, :, g], prefix[-1])
        for b in range(2):
            for i in range(7):
                for p, j in enumerate(policy.cliques[policy.clique_of[i]]):
                    entry = policy.R_U[b, i, g, p] - lam_eye
                    assert np.isclose(entry, prefix[:, b, j]).all(axis=(1, 2)).any(), (b, i, g, j)


@pytest.mark.parametrize("gamma", [2, 3])
def test_a_sync_completes_within_two_gamma_trials(gamma):
    """once agent i requests slot g at trial t, every member of its clique holds every
    member's slot-g data of trial t by trial t + 2 gamma (and the bound is tight on a path)."""
    horizon = 90
    policy, _, own, table, requests = play_recorded(gamma, horizon=horizon)
    late = []
    for k, b, i, g in requests:
        if k + 2 * gamma >= horizon:
            continue
        members = policy.cliques[policy.clique_of[i]]
        for j in members:
            need = own[k, b, j, g]
            for lag in range(2 * gamma + 1):
                held = [table[k + lag, b, m, g, policy.pos[j]] for m in members]
                if min(held) >= need - 1e-6:
                    break
            else:
                lag = 2 * gamma + 1
            late.append(lag)
    assert len(late) > 50
    assert max(late) == 2 * gamma


def _counters(seeds: list[int], kw: dict, agent_kwargs: dict) -> dict[str, np.ndarray]:
    """The learner's counters after a batch of ``seeds``, per run."""
    from fedbandit_env.bench.evaluate import _build

    policy = FedLinUCBDecentralized(**agent_kwargs)
    _, venv = _build(policy, ENV, len(seeds), kw)
    obs, _ = venv.reset(seed=seeds)
    policy.reset(venv.facts, venv.agent_rng())
    while not venv.engine.truncated:
        action = policy.act(obs)
        obs, *_ = venv.step(action.arms, action.messages, action.pull)
    return {"n_requests": policy.n_requests.copy(), "releases": policy.releases.sum(axis=(1, 2)),
            "eig_clip_events": policy.eig_clip_events.copy()}  # fmt: skip


@pytest.mark.parametrize("gamma", [1, 2])
def test_counters_do_not_depend_on_the_batch(gamma):
    """Runs that finish while others still take communication steps request and release
    nothing more: every counter of run b equals that seed's run alone; a rank-deficient
    singleton clique's rounding deficit under the floor is not counted as a clip."""
    kw = {"num_agents": 5, "horizon": 150, "topology": "path"}
    agent_kwargs = {"private": False, "gamma": gamma, "sync_threshold": 0.5}
    seeds = [0, 1, 2, 3, 4, 5]
    batch = _counters(seeds, kw, agent_kwargs)
    for b, seed in enumerate(seeds):
        alone = _counters([seed], kw, agent_kwargs)
        for name, values in batch.items():
            assert values[b] == alone[name][0], (name, seed)
    assert batch["n_requests"].sum() > 0


def test_a_rounding_deficit_under_the_floor_is_floored_but_not_counted():
    from agents.fed_ucb_common import FedUCBBase

    guard = FedLinUCBDecentralized()
    assert isinstance(guard, FedUCBBase)
    guard.eig_floor = 1.0
    guard.eig_clip_events = np.zeros(2, dtype=np.int64)
    rounding = np.diag([1.0 - 1e-15, 2.0])
    real = np.diag([0.5, 2.0])
    out = guard.floor_W(np.stack([rounding, real]), np.array([0, 1]))
    assert guard.eig_clip_events.tolist() == [0, 1]
    assert np.linalg.eigvalsh(out)[:, 0].min() >= 1.0 - 1e-12
