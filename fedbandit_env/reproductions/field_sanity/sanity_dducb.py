"""DDUCB sanity experiment (docs/dducb.md).

Cycle of N agents, K = 17 arms, means (1.0, 0.8 x 16), Gaussian rewards sigma = 1. DDUCB
accelerated (standard C) and unaccelerated (C_small) against coop-UCB (the ECC'16 index with the
graph constants: ``dp_dec_ucb`` with ``epsilon = inf``, ``rho`` = the paper's gamma) for gamma in
{2, 1.01, 1.0001}. The full scale (``full=True``): N in {100, 200}, T = 10^4, 10 runs; the
default is a small scale (N in {10, 20}, T = 1500, 4 runs) that runs in well under a minute.

Claims (all recalled from memory, [mem], so rendered unverified): DDUCB has clearly lower regret than the
best coop-UCB; the gap grows with N; the accelerated version is at least as good as the
unaccelerated one. ``python -m fedbandit_env.reproductions.field_sanity.sanity_dducb [--full]`` prints the table.
"""

from __future__ import annotations

import argparse
import math

import numpy as np

from agents.dducb import DDUCB
from agents.dp_decentralized_ucb import DPDecentralizedUCB
from fedbandit_env.bench import evaluate
from fedbandit_env.bench.claims import Claim, at_most, claim, lower_than, monotone, to_markdown

PAPER = "field"
FIGURE = "DDUCB sanity"
GAMMAS = (2.0, 1.01, 1.0001)


def _scale(full: bool) -> dict:
    if full:
        return {"sizes": (100, 200), "horizon": 10_000, "runs": 10}
    return {"sizes": (10, 20), "horizon": 1500, "runs": 4}


def _regret(policy, n: int, horizon: int, runs: int) -> tuple[float, float]:
    """Mean final network regret and its standard error."""
    env = {
        "family": "homogeneous",
        "num_agents": n,
        "means": [1.0] + [0.8] * 16,
        "horizon": horizon,
        "topology": "ring",
        "reward": {"kind": "gaussian", "sigma": 1.0},
    }
    res = evaluate("FedBandit/Homogeneous-v0", policy, runs=runs, seed=0, env_kwargs=env)
    r = np.asarray(res.final_regret_network, dtype=float)
    return float(r.mean()), float(r.std(ddof=1) / math.sqrt(r.size)) if r.size > 1 else 0.0


def measure(full: bool = False) -> dict:
    sc = _scale(full)
    out = {}
    for n in sc["sizes"]:
        row = {
            "dducb accel": _regret(DDUCB(accelerated=True), n, sc["horizon"], sc["runs"]),
            "dducb unaccel C_small": _regret(
                DDUCB(accelerated=False, stage_length="small"), n, sc["horizon"], sc["runs"]
            ),
        }
        for g in GAMMAS:
            row[f"coop-UCB gamma={g:g}"] = _regret(
                DPDecentralizedUCB(epsilon=math.inf, rho=g), n, sc["horizon"], sc["runs"]
            )
        out[n] = row
    return out


def run(full: bool = False) -> list[Claim]:
    sc = _scale(full)
    res = measure(full)
    scale = {
        "N": list(sc["sizes"]),
        "K": 17,
        "T": sc["horizon"],
        "runs": sc["runs"],
        "topology": "cycle",
    }
    claims = []
    gaps = []
    for n, row in res.items():
        coop = min((v for k, v in row.items() if k.startswith("coop")), key=lambda v: v[0])
        acc = row["dducb accel"]
        se = math.hypot(acc[1], coop[1])
        gaps.append(coop[0] - acc[0])
        claims.append(
            claim(
                paper=PAPER,
                figure=FIGURE,
                source="spec",
                provenance="mem",
                text=f"DDUCB (accelerated) has clearly lower regret than the best coop-UCB (N = {n})",
                check=lower_than(acc[0], coop[0], se, z=2.0),
                ours={"dducb": round(acc[0], 1), "best coop-UCB": round(coop[0], 1)},
                scale={**scale, "N": n},
            )
        )
        una = row["dducb unaccel C_small"]
        claims.append(
            claim(
                paper=PAPER,
                figure=FIGURE,
                source="spec",
                provenance="mem",
                text=f"the accelerated version is at least as good as the unaccelerated (N = {n})",
                check=at_most(acc[0], una[0] + 2.0 * math.hypot(acc[1], una[1])),
                ours={"accelerated": round(acc[0], 1), "unaccelerated C_small": round(una[0], 1)},
                scale={**scale, "N": n},
                note="tolerance: 2 standard errors of the difference",
            )
        )
    claims.append(
        claim(
            paper=PAPER,
            figure=FIGURE,
            source="spec",
            provenance="mem",
            text="the gap between coop-UCB and DDUCB grows with N on the cycle",
            check=monotone(gaps, increasing=True),
            ours={f"gap N={n}": round(g, 1) for n, g in zip(res, gaps, strict=True)},
            scale=scale,
        )
    )
    return claims


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full", action="store_true", help="the full scale")
    args = parser.parse_args()
    for n, row in measure(args.full).items():
        for name, (m, se) in row.items():
            print(f"N={n:4d}  {name:24s} regret {m:10.1f} +- {se:.1f}")
    print(to_markdown(run(args.full)))


if __name__ == "__main__":
    main()
