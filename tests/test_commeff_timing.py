"""CDP/DDP/HDP-MAB against an independent plain loop of Algorithms 1-5 of Li & Song with the time
model of docs/commeff.md, decision 18 (the master-worker round is instantaneous; the first hop of
a graph round is free and every further hop is a slot of local greedy pulls, decision 7), written
here without the agents' code:
step for step on the environment's rewards without noise, and in distribution (regret, rounds
and communication cost within 3 standard errors) with Laplace noise. ``timing="latency"`` (one
upload slot more per round) is checked to differ, and the option is validated."""

from __future__ import annotations

import math

import networkx as nx
import numpy as np
import pytest

import fedbandit_env
from agents import CDPMAB, DDPMAB, HDPMAB
from fedbandit_env.errors import ConfigError

HOMOG = "FedBandit/Homogeneous-v0"
MEANS = [0.9, 0.75, 0.6, 0.3]


def gis_edge_uses(graph: nx.Graph) -> int:
    """Algorithm 2: one GIS round; per hop, the undirected edges that carried DATA in either
    direction (ADV of fresh ids, REQ of the missing ones, DATA back)."""
    known = {i: {i} for i in graph}
    fresh = {i: {i} for i in graph}
    uses = 0
    while any(len(k) < len(graph) for k in known.values()):
        new = {i: set() for i in graph}
        used = set()
        for i in graph:
            for j in graph.neighbors(i):
                missing = fresh[i] - known[j]
                if missing:
                    new[j] |= missing
                    used.add(frozenset((i, j)))
        uses += len(used)
        fresh = {j: new[j] - known[j] for j in graph}
        for j in graph:
            known[j] |= new[j]
    return uses


def sink_path_cost(graph: nx.Graph) -> tuple[float, int]:
    """Algorithm 4 (FindSinkAgents) per component (centre, lowest id) and Thm 4's local cost
    sum_i sd(i, SA_q); returns (that sum, max_q ecc(SA_q) - 1)."""
    total, delay = 0.0, 0
    for comp in nx.connected_components(graph):
        sub = graph.subgraph(comp)
        ecc = nx.eccentricity(sub)
        sink = min(sorted(comp), key=lambda i: ecc[i])
        dist = nx.single_source_shortest_path_length(sub, sink)
        total += sum(dist.values())
        delay = max(delay, ecc[sink] - 1)
    return total, delay


def plain_elimination(M, K, T, eps, delay, reward, lap=None):
    """Algorithm 1 (CDP) / 3 (DDP) / 5 (HDP): they differ only in ``delay`` (slots after the
    free first hop). ``reward(t, i, a)`` is agent i's reward of arm a in slot t (1-based);
    ``lap(scale, size)`` draws the Laplace noise (None: epsilon = inf). Returns the arms played
    (T x M list) and the number of rounds held."""
    N = M
    active = list(range(K))
    r, s_prev, t = 1, 0, 0
    ybar = [[0.0] * K for _ in range(M)]
    own_sum = [[0.0] * K for _ in range(M)]
    own_n = [[0] * K for _ in range(M)]
    played, rounds = [], 0
    while t < T and len(active) > 1:
        tilde = 2.0**-r
        li = math.log(8 * len(active) * r * r * T)
        lk = math.log(8 * K * r * r * T)
        s = 8 * li / (N * tilde**2)
        if not math.isinf(eps):
            s = max(s, 8 * r * math.sqrt(2 * lk) / (N**1.5 * eps * tilde))
        s_int = max(math.ceil(s), s_prev + 1)
        n = s_int - s_prev
        c = math.sqrt(li / (2 * N * s_int))
        h = 0.0 if math.isinf(eps) else r * math.sqrt(8 * lk) / (N**1.5 * eps * s_int)
        epoch = [[0.0] * K for _ in range(M)]
        for slot in range(len(active) * n):
            if t == T:
                return played, rounds
            t += 1
            a = active[slot % len(active)]
            for i in range(M):
                x = reward(t, i, a)
                epoch[i][a] += x
                own_sum[i][a] += x
                own_n[i][a] += 1
            played.append([a] * M)
        if t == T:  # no round after the last pull
            return played, rounds
        for i in range(M):
            for k in active:
                yhat = epoch[i][k] / n
                if lap is not None:
                    yhat += lap(1.0 / (N * eps * n))
                ybar[i][k] = (s_prev / s_int) * ybar[i][k] + (n / s_int) * yhat
        rounds += 1
        for _ in range(delay):  # hops after the first: local greedy pulls
            if t == T:
                return played, rounds
            t += 1
            row = []
            for i in range(M):
                g = max(active, key=lambda k, i=i: (own_sum[i][k] / own_n[i][k], -k))
                reward(t, i, g)
                row.append(g)
            played.append(row)
        agg = {k: sum(ybar[i][k] for i in range(M)) / M for k in active}
        best = max(agg.values())
        active = [k for k in active if best - agg[k] < 2 * (c + h)]
        s_prev, r = s_int, r + 1
    while t < T:
        t += 1
        played.append([active[0]] * M)
    return played, rounds


def _rollout(policy, runs, seed, **kw):
    if "channels" not in kw:
        preview = fedbandit_env.make_vec(HOMOG, num_runs=1, **kw).config
        kw["channels"] = policy.channel_spec(preview)
    venv = fedbandit_env.make_vec(HOMOG, num_runs=runs, **kw)
    obs, _ = venv.reset(seed=seed)
    policy.reset(venv.facts, venv.agent_rng())
    arms, rewards, pulled = [], [], []
    while not venv.engine.truncated:
        action = policy.act(obs)
        pull = ~venv.engine.done_runs
        if action.pull is not None:
            pull &= action.pull
        obs, reward, _, _, info = venv.step(action.arms, action.messages, action.pull)
        arms.append(action.arms.copy())
        rewards.append(reward.copy())
        pulled.append(pull)
    return venv, np.stack(arms), np.stack(rewards), np.stack(pulled), info


CASES = {
    "cdp": (lambda **k: CDPMAB(**k), {"topology": "complete", "c1": 3.0}),
    "ddp_ring": (lambda **k: DDPMAB(**k), {"topology": "ring", "c2": 1.0}),
    "hdp_path": (
        lambda **k: HDPMAB(cost_model="path", **k),
        {
            "topology": "hybrid",
            "topology_kwargs": {"sizes": [4, 3], "component_graph": "path"},
            "c1": 5.0,
            "c2": 1.0,
        },
    ),
}


def _expected(case, venv):
    """(delay, cost per round) from the plain definitions of the costs and Algorithms 2 and 4."""
    graph = venv.config.topology.graph
    if case == "cdp":
        return 0, venv.config.c1 * venv.num_agents
    if case == "ddp_ring":
        return nx.diameter(graph) - 1, venv.config.c2 * gis_edge_uses(graph)
    local, delay = sink_path_cost(graph)
    components = nx.number_connected_components(graph)
    return delay, venv.config.c2 * local + venv.config.c1 * components


@pytest.mark.parametrize("case", sorted(CASES))
def test_paper_timing_matches_the_plain_loop_step_for_step(case):
    make, env = CASES[case]
    M = 7 if case != "cdp" else 5
    T = 2500
    policy = make(epsilon=math.inf)
    venv, arms, rewards, pulled, _ = _rollout(
        policy, 2, 3, num_agents=M, means=MEANS, horizon=T, **env
    )
    delay, per_round = _expected(case, venv)
    assert policy.delay == delay
    for b in range(2):
        mine, got = arms[pulled[:, b], b], rewards[pulled[:, b], b]
        assert mine.shape == (T, M)
        played, rounds = plain_elimination(
            M, len(MEANS), T, math.inf, delay, lambda t, i, a, g=got: g[t - 1, i]
        )
        assert mine.tolist() == played
        assert rounds == policy.rounds_done[b] > 1
        steps = int(np.flatnonzero(pulled[:, b]).max()) + 1
        assert steps == T + rounds  # one communication step per round, no upload slot
        assert venv.engine.ledger.total.cost[b].sum() == pytest.approx(per_round * rounds)


@pytest.mark.parametrize("case", sorted(CASES))
def test_paper_timing_agrees_in_distribution_with_the_plain_loop(case):
    make, env = CASES[case]
    M, T, runs, eps = 7, 2000, 30, 0.2
    means = np.array(MEANS)
    policy = make(epsilon=eps)
    venv, _, _, _, info = _rollout(policy, runs, 0, num_agents=M, means=means, horizon=T, **env)
    delay, per_round = _expected(case, venv)
    agent_regret = info.cumulative_regret.sum(axis=1)
    agent_cost = venv.engine.ledger.total.cost.sum(axis=1)
    rng = np.random.default_rng(7)
    plain_regret, plain_cost = [], []
    for _ in range(runs):
        played, rounds = plain_elimination(
            M,
            len(means),
            T,
            eps,
            delay,
            lambda t, i, a: float(rng.random() < means[a]),
            lambda scale: float(rng.laplace(0.0, scale)),
        )
        plain_regret.append(sum(means[0] - means[a] for row in played for a in row))
        plain_cost.append(per_round * rounds)
    for x, y in [(agent_regret, plain_regret), (agent_cost, plain_cost)]:
        x, y = np.asarray(x, float), np.asarray(y, float)
        se = math.sqrt(x.var(ddof=1) / len(x) + y.var(ddof=1) / len(y))
        assert abs(x.mean() - y.mean()) <= 3 * se + 1e-9, (case, x.mean(), y.mean(), se)


@pytest.mark.parametrize("case", sorted(CASES))
def test_latency_timing_takes_one_upload_slot_more_per_round(case):
    """``timing="latency"``: no communication step; each round costs 1 + delay pulled slots, so
    the plain loop of the paper's timing no longer matches, with the same cost per round."""
    make, env = CASES[case]
    M, T = 7, 2500
    policy = make(epsilon=math.inf, timing="latency")
    venv, arms, rewards, pulled, _ = _rollout(
        policy, 1, 3, num_agents=M, means=MEANS, horizon=T, **env
    )
    assert pulled.all() and len(pulled) == T
    delay, per_round = _expected(case, venv)
    played, _ = plain_elimination(
        M, len(MEANS), T, math.inf, delay + 1, lambda t, i, a: rewards[t - 1, 0, i]
    )
    assert arms[:, 0].tolist() == played  # the paper's timing with one more slot per round
    assert venv.engine.ledger.total.cost[0].sum() == pytest.approx(
        per_round * policy.rounds_done[0]
    )


@pytest.mark.parametrize("make", [CDPMAB, DDPMAB, HDPMAB])
@pytest.mark.parametrize("timing", ["Paper", None, 0, "slow"])
def test_bad_timing(make, timing):
    with pytest.raises(ConfigError, match=rf"{make.agent_id}: timing: expected 'paper'"):
        make(timing=timing)
