"""Fed1-UCB sanity experiment (docs/fed-ucb12.md): M in {1, 5, 10} with the communication loss.

The authors' instance: K = 10 global means mu = (0.70, 0.71, ..., 0.76, 0.765, 0.77, 0.79),
Gaussian rewards with sigma = 1/2, local means ``mu * W`` with a client-by-arm weight matrix W
whose columns average to 1 (here ``1 + 0.3 (z - mean z)`` for a fixed standard-normal z, so local
optima differ from the global one). The communication loss is the ledger's cost: every
agent-server link used costs c1 = 1 reward. At CI scale the gaps are multiplied by 5
(Delta_min = 0.1) so that eliminations happen within T = 10^4; ``full`` uses the authors'
gaps and T = 10^6. Regret is the pseudo-regret per client against the global means.
"""

from __future__ import annotations

import math

import numpy as np

from agents.fed1_ucb import Fed1UCB
from fedbandit_env.bench import evaluate
from fedbandit_env.bench.claims import Claim, at_most, claim, lower_than, monotone
from fedbandit_env.seeding import BatchedRNG

PAPER = "Shi & Shen, Federated Multi-Armed Bandits (AAAI'21): Fed1-UCB"
CODE_MU = np.array([0.70, 0.71, 0.72, 0.73, 0.74, 0.75, 0.76, 0.765, 0.77, 0.79])
ENV = "FedBandit/Heterogeneous-v0"


def instance(num_clients: int, gap_scale: float, seed: int = 0) -> np.ndarray:
    """Local means (M, K): the global means (gaps scaled) times a weight matrix whose columns
    average to 1 (drawn from the ``instance`` stream of ``seed``)."""
    mu = CODE_MU[0] + gap_scale * (CODE_MU - CODE_MU[0])
    z = (
        BatchedRNG.for_runs([seed], "instance")
        .generators[0]
        .standard_normal((num_clients, len(mu)))
    )
    weights = 1.0 + 0.3 * (z - z.mean(axis=0))
    return mu * weights


def _run(num_clients: int, horizon: int, runs: int, gap_scale: float):
    means = instance(num_clients, gap_scale)
    env_kwargs = dict(
        num_agents=num_clients,
        num_arms=means.shape[1],
        horizon=horizon,
        means=means,
        reward={"kind": "gaussian", "sigma": 0.5},
        topology="star" if num_clients > 2 else "complete",
        c1=1.0,
        channels={"server": {"kind": "server", "dim": means.shape[1], "aggregate": "mean"}},
    )
    return evaluate(ENV, Fed1UCB(), runs=runs, seed=0, env_kwargs=env_kwargs)


def run(full: bool = False) -> list[Claim]:
    T, runs, gap_scale = (10**6, 20, 1.0) if full else (10_000, 4, 5.0)
    scale = {"T": T, "runs": runs, "K": 10, "gap_scale": gap_scale, "sigma": 0.5}
    results = {M: _run(M, T, runs, gap_scale) for M in (1, 5, 10)}
    per_client = {M: r.final_regret_per_agent for M, r in results.items()}
    mean = {M: float(v.mean()) for M, v in per_client.items()}
    se = {M: float(v.std(ddof=1) / math.sqrt(len(v))) for M, v in per_client.items()}
    cost = {M: float(r.cost.sum(axis=1).mean()) for M, r in results.items()}
    total = {M: mean[M] + cost[M] / M for M in results}  # regret + loss, per client
    rows = [
        claim(
            paper=PAPER,
            figure="sanity: M = 1, 5, 10",
            text="cooperation: regret per client decreases with M (M = 1 > 5 > 10)",
            check=monotone([mean[1], mean[5], mean[10]], increasing=False),
            ours=[mean[1], mean[5], mean[10]],
            scale=scale,
            provenance="mem",
            paper_value="smaller than M = 1",
        ),
        claim(
            paper=PAPER,
            figure="sanity: M = 10 vs M = 1",
            text="with the communication loss (c1 = 1 per link), M = 10 still beats M = 1 "
            "(regret + loss per client, 2 standard errors)",
            check=lower_than(total[10], total[1], se=math.hypot(se[10], se[1]), z=2.0),
            ours={"M=10": total[10], "M=1": total[1]},
            scale=scale,
            provenance="mem",
        ),
    ]
    r10 = results[10]
    curve = r10.regret_per_agent.mean(axis=0)
    steps = np.asarray(r10.steps)
    first = int(np.searchsorted(steps, T // 10))
    late = float(curve[-1] - curve[first])  # the last 90 % of the horizon
    early = float(curve[first])  # the first 10 %
    rows.append(
        claim(
            paper=PAPER,
            figure="sanity: regret vs T (M = 10)",
            text="regret grows like log T: the last 90 % of the horizon adds at most as much "
            "regret as the first 10 % (ratio <= 1)",
            check=at_most(late / max(early, 1e-12), 1.0),
            ours={"first 10%": early, "last 90%": late},
            scale=scale,
            provenance="mem",
        )
    )
    long = _run(10, 4 * T, 2, gap_scale)  # 4 times the horizon (2 runs: rounds barely vary)
    rounds = {
        f"T={T}": float(r10.messages.sum(axis=1).mean()) / 20.0,
        f"T={4 * T}": float(long.messages.sum(axis=1).mean()) / 20.0,
    }
    low, high = rounds.values()
    rows.append(
        claim(
            paper=PAPER,
            figure="sanity: communication vs T (M = 10)",
            text="communication is O(log T) phases: 4 times the horizon, at most twice the "
            "server rounds",
            check=at_most(high / max(low, 1.0), 2.0),
            ours=rounds,
            scale=scale,
            provenance="mem",
            note="a round costs M uploads and M broadcast messages; f = floor(10 ln T)",
        )
    )
    return rows
