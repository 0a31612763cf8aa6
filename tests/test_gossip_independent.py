"""An independent plain-loop Fed_UCB written from the paper (Algorithms 1-4, with the round order
of docs/gossip.md, "Round and timing") against the batched ``gossip_fed_ucb``.

Nothing here is shared with agents/gossip_ucb.py or fedbandit_env.privacy: per agent and arm, in
Python loops, with its own Generator: the initialization pulls every arm once (un-noised, the
paper's X̄̃(0) = X(0)); each round the lagging arms are served first, else the argmax of
ϑ̃ + C (Eq. 12, ties uniform); the pulled arm's noisy mean comes from the dyadic blocks of 1..t
(Algorithm 2) with one Laplace(levels / epsilon) draw per non-empty block, cached (Algorithm 3);
ϑ̃ averages on one uniform random edge and adds the noisy mean's change; ñ(t+1) = max(n(t),
neighbours' ñ(t)). The regret of both must agree within 3 standard errors on small instances,
among them panel (b) of Fig. 2 (N = 10, path P10), where the reproduction finds the private
curves flat (docs/gossip.md, "Panel (b)").
"""

from __future__ import annotations

import bisect
import math

import numpy as np
import pytest

import fedbandit_env
from agents.gossip_ucb import GossipFedUCB
from fedbandit_env.bench import evaluate


def _instance(env_id: str) -> tuple[np.ndarray, list[tuple[int, int]]]:
    env = fedbandit_env.make(env_id, horizon=20)
    env.reset(seed=0)
    u = env.unwrapped
    return np.array(u.engine.means[0], dtype=float), [tuple(e) for e in u.facts.topology.edges]


def _blocks(t: int) -> list[tuple[int, int]]:
    """Algorithm 2: the dyadic blocks (q, t'] covering rounds 1..t."""
    out = []
    while t:
        q = t & (t - 1)
        out.append((q, t))
        t = q
    return out


def plain_fed_ucb(
    means: np.ndarray,
    edges: list[tuple[int, int]],
    rounds: int,
    epsilon: float,
    rng: np.random.Generator,
    dp_bonus_scale: float = 1.0,
) -> float:
    """One run; returns the agent-averaged pseudo-regret of rounds 1..T (global means)."""
    n_agents, m = means.shape
    mu = means.mean(axis=0)
    best = mu.max()
    private = not math.isinf(epsilon)
    levels = math.floor(math.log2(rounds)) + 1
    scale = levels / epsilon if private else 0.0
    neighbours = [[j for e in edges for j in e if i in e and j != i] for i in range(n_agents)]
    alpha1 = 64.0 / n_agents**17
    # initialization: every arm once, no noise (the paper)
    x0 = [[rng.normal(means[i][k], 1.0) for k in range(m)] for i in range(n_agents)]
    n = [[1.0] * m for _ in range(n_agents)]
    ntil = [[1.0] * m for _ in range(n_agents)]
    xbar = [list(row) for row in x0]
    theta = [list(row) for row in x0]
    rounds_of = [[[] for _ in range(m)] for _ in range(n_agents)]  # rounds arm k was pulled
    cum = [[[0.0] for _ in range(m)] for _ in range(n_agents)]  # prefix sums of its rewards
    noise = [[{} for _ in range(m)] for _ in range(n_agents)]  # block -> Laplace draw
    regret = 0.0
    for t in range(1, rounds + 1):
        arms = []
        for i in range(n_agents):  # Phase A
            lag = [k for k in range(m) if n[i][k] < ntil[i][k] - n_agents]
            if lag:
                arms.append(lag[int(rng.integers(len(lag)))])
                continue
            index = []
            for k in range(m):
                base = 2.0 * n_agents * math.log(t) / n[i][k]
                dp = 0.0
                if private:
                    dp = (
                        dp_bonus_scale
                        * 128.0
                        * n_agents
                        * math.log(rounds) ** 2
                        * math.log(t)
                        * math.log(n[i][k])
                        / (n[i][k] * epsilon**2)
                    )
                index.append(theta[i][k] + math.sqrt(base * (1.0 + dp)) + alpha1)
            top = max(index)
            ties = [k for k in range(m) if index[k] == top]
            arms.append(ties[int(rng.integers(len(ties)))])
        grad = [[0.0] * m for _ in range(n_agents)]
        for i, k in enumerate(arms):  # Phase B: pull, noisy mean of the pulled arm only
            x = rng.normal(means[i][k], 1.0)
            regret += (best - mu[k]) / n_agents
            n[i][k] += 1.0
            rounds_of[i][k].append(t)
            cum[i][k].append(cum[i][k][-1] + x)
            total = x0[i][k]
            for q, r in _blocks(t):
                lo = bisect.bisect_right(rounds_of[i][k], q)  # pulls in rounds q+1 .. r
                hi = bisect.bisect_right(rounds_of[i][k], r)
                if hi == lo:  # an empty block gets no noise (decision 8)
                    continue
                if private and (q, r) not in noise[i][k]:
                    noise[i][k][(q, r)] = rng.laplace(0.0, scale)
                total += cum[i][k][hi] - cum[i][k][lo] + noise[i][k].get((q, r), 0.0)
            new = total / n[i][k]
            grad[i][k] = new - xbar[i][k]
            xbar[i][k] = new
        u, v = edges[int(rng.integers(len(edges)))]  # Phase C
        avg = [(theta[u][k] + theta[v][k]) / 2.0 for k in range(m)]
        theta[u] = list(avg)
        theta[v] = list(avg)
        for i in range(n_agents):
            for k in range(m):
                theta[i][k] += grad[i][k]
        ntil = [  # Phase D, double-buffered
            [max([n[i][k]] + [ntil[j][k] for j in neighbours[i]]) for k in range(m)]
            for i in range(n_agents)
        ]
    return regret


def _agent_regret(env_id, m, rounds, runs, **kw):
    policy = GossipFedUCB(noisy_init=False, dp_log_floor=1.0, **kw)
    res = evaluate(
        env_id,
        policy,
        runs=runs,
        seed=11,
        env_kwargs={"horizon": rounds + m},
        checkpoints=np.array([m, rounds + m]),
    )
    return res.regret_per_agent[:, 1] - res.regret_per_agent[:, 0]


CASES = [  # (env, M, T, runs, agent kwargs)
    ("FedBandit/GossipPath10-v0", 10, 300, 12, {"epsilon": 1.0}),
    ("FedBandit/GossipPath10-v0", 10, 300, 12, {"epsilon": 5.0}),
    ("FedBandit/GossipTriangle-v0", 5, 1500, 24, {"epsilon": math.inf}),
    ("FedBandit/GossipTriangle-v0", 5, 1500, 24, {"epsilon": 5.0, "dp_bonus_scale": 0.001}),
]


@pytest.mark.slow
@pytest.mark.parametrize(("env_id", "m", "rounds", "runs", "kw"), CASES)
def test_plain_loop_fed_ucb_agrees_with_the_agent(env_id, m, rounds, runs, kw):
    means, edges = _instance(env_id)
    rng = np.random.default_rng(2024)
    plain = np.array([plain_fed_ucb(means, edges, rounds, rng=rng, **kw) for _ in range(runs)])
    ours = _agent_regret(env_id, m, rounds, runs, **kw)
    se = math.sqrt(plain.var(ddof=1) / runs + ours.var(ddof=1) / runs)
    assert abs(plain.mean() - ours.mean()) <= 3.0 * se + 1e-9, (plain.mean(), ours.mean(), se)


def test_blocks_are_the_dyadic_decomposition():
    assert _blocks(6) == [(4, 6), (0, 4)]
    assert _blocks(7) == [(6, 7), (4, 6), (0, 4)]
    for t in range(1, 200):
        covered = sorted(r for q, t2 in _blocks(t) for r in range(q + 1, t2 + 1))
        assert covered == list(range(1, t + 1))
