"""coop-UCB2 sanity experiment (docs/coop-ucb2.md).

The vip-mab demo: a bull graph (a triangle 0-1-2 with pendant agents 3 on 1 and 4 on 2), means
(1, 3, 5, 5), Gaussian rewards sigma = 1; coop-UCB2 with the demo's parameters (gamma = 1,
kappa = 0.5, no G factor: eta = 0) and with gamma in {1.01, 2, 4} (eta = 2, the suite's default
form) against isolated UCB1 (``ucb1``, index sigma sqrt(2 ln t / n)). No horizon is given for
the demo: T = 10^4 and 50 runs at ``full=True``, T = 2000 and 20 runs by default.

Claims (all recalled from memory, [mem], so rendered unverified): every agent beats isolated UCB1; agents of higher degree get lower
regret; a smaller gamma explores less and lowers regret.
``python -m fedbandit_env.reproductions.field_sanity.sanity_coop_ucb2 [--full]`` prints the table.
"""

from __future__ import annotations

import argparse

import networkx as nx
import numpy as np

from agents.coop_ucb2 import CoopUCB2
from fedbandit_env.bench import evaluate
from fedbandit_env.bench.claims import (
    Claim,
    at_most,
    claim,
    lower_than,
    mean_se,
    monotone,
    to_markdown,
)

PAPER = "field"
FIGURE = "coop-UCB2 sanity"
GAMMAS = (1.01, 2.0, 4.0)
HUBS, LEAVES = [1, 2], [3, 4]  # bull graph: degrees 2, 3, 3, 1, 1


def _scale(full: bool) -> dict:
    return {"horizon": 10_000, "runs": 50} if full else {"horizon": 2000, "runs": 20}


def _env(horizon: int) -> dict:
    return {
        "family": "homogeneous",
        "num_agents": 5,
        "means": [1.0, 3.0, 5.0, 5.0],
        "horizon": horizon,
        "topology": nx.bull_graph(),
        "reward": {"kind": "gaussian", "sigma": 1.0},
    }


def measure(full: bool = False) -> dict:
    """Per-agent final regret (runs, N) of each learner."""
    sc = _scale(full)
    out = {}
    res = evaluate(
        "FedBandit/Homogeneous-v0",
        CoopUCB2(gamma=1.0, eta=0.0),
        runs=sc["runs"],
        seed=0,
        env_kwargs=_env(sc["horizon"]),
    )
    out["coop_ucb2 demo"] = res.regret_by_agent[:, -1, :]
    for g in GAMMAS:
        res = evaluate(
            "FedBandit/Homogeneous-v0",
            CoopUCB2(gamma=g),
            runs=sc["runs"],
            seed=0,
            env_kwargs=_env(sc["horizon"]),
        )
        out[f"coop_ucb2 gamma={g:g}"] = res.regret_by_agent[:, -1, :]
    res = evaluate(
        "FedBandit/Homogeneous-v0",
        "ucb1",
        runs=sc["runs"],
        seed=0,
        env_kwargs={**_env(sc["horizon"]), "channels": {}},
    )
    out["ucb1 (isolated)"] = res.regret_by_agent[:, -1, :]
    return out


def run(full: bool = False) -> list[Claim]:
    sc = _scale(full)
    res = measure(full)
    scale = {"graph": "bull", "K": 4, "T": sc["horizon"], "runs": sc["runs"]}
    base = res["coop_ucb2 demo"]
    ucb = res["ucb1 (isolated)"]
    per_agent = base.mean(axis=0)
    claims = [
        claim(
            paper=PAPER,
            figure=FIGURE,
            source="spec",
            provenance="mem",
            text="every coop-UCB2 agent beats isolated UCB1 (demo parameters: gamma = 1, eta = 0)",
            check=at_most(float(per_agent.max()), float(ucb.mean())),
            ours={
                "worst coop agent": round(float(per_agent.max()), 1),
                "ucb1 per agent": round(float(ucb.mean()), 1),
            },
            scale=scale,
        )
    ]
    hubs, leaves = base[:, HUBS].mean(axis=1), base[:, LEAVES].mean(axis=1)
    claims.append(
        claim(
            paper=PAPER,
            figure=FIGURE,
            source="spec",
            provenance="mem",
            text="agents of higher degree (3) get lower regret than the leaves (degree 1), demo parameters",
            check=lower_than(
                float(hubs.mean()), float(leaves.mean()), mean_se(hubs - leaves)[1], z=2.0
            ),
            ours={
                "degree 3": round(float(hubs.mean()), 1),
                "degree 1": round(float(leaves.mean()), 1),
            },
            scale=scale,
        )
    )
    by_gamma = [float(res[f"coop_ucb2 gamma={g:g}"].mean()) for g in GAMMAS]
    claims.append(
        claim(
            paper=PAPER,
            figure=FIGURE,
            source="spec",
            provenance="mem",
            text="a smaller gamma explores less and lowers regret (gamma 1.01 < 2 < 4)",
            check=monotone(by_gamma, increasing=True),
            ours={f"gamma={g:g}": round(v, 1) for g, v in zip(GAMMAS, by_gamma, strict=True)},
            scale=scale,
        )
    )
    return claims


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full", action="store_true", help="the full scale")
    args = parser.parse_args()
    for name, reg in measure(args.full).items():
        print(f"{name:22s} per-agent regret {np.round(reg.mean(axis=0), 1).tolist()}")
    print(to_markdown(run(args.full)))


if __name__ == "__main__":
    main()
