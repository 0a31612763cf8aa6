"""Paper timing against latency timing: decision or sync rounds and messages per run of the
reference agents next to the expected numbers, printed in the ``spec`` columns: the counts the
papers' protocols imply and the regrets of a prototype implementation (docs/architecture.md,
"Communication steps").

``timing="paper"`` (the default) runs a paper's "communicate, then pull" rounds as
communication-only steps; ``timing="latency"`` sends with the pulls and uses the replies one
step later. Prints, does not assert. Runs all agents converted so far:

* ``dp_mw_ucb`` (docs/dp-recsys.md): M = 20, K = 10, means 0.9..0.0 (Bernoulli),
  T = 10^4, decision rounds per run (the spec's prototype: about 2.4k / 2.7k / 2.8k / 3.3k for
  eps = 1.5 / 2 / 5 / inf) and messages (M uploads + M broadcasts per decision round), and the
  network regret R(T) (prototype: 54,045 / 46,805 / 26,373 / 6,976).
* ``dp_dec_ucb`` (docs/dp-recsys.md): M = 20 on C_20, K = 10, means 0.9..0.0, Gaussian
  rewards (sigma 0.1, clipped by the agents), T = 10^4: engine steps, messages per run (spec: 2K
  numbers per edge, direction and round, i.e. 2 |E| = 40 messages per round) and R(T)
  (prototype: 30,747 / 23,942 / 10,897 / 3,240 for eps = 1.5 / 2 / 5 / inf).
* ``cdp_mab``, ``ddp_mab``, ``hdp_mab`` (docs/commeff.md): M = 50 (HDP: 100 in five complete
  components of 20, c1 = 50), K = 100, mu ~ U[0, 1] per run, eps = 1, T = 10^4: rounds per run
  (spec: about 3.9), engine steps, pulled delay slots, messages and cost (spec per round: CDP
  c1 M = 50 at c1 = 1, GIS ring 1250 with t_delay 24, star 98 with 1, HDP case 1: 1200 under
  the "edges" model), and R(T) (spec: 41.3k +- 2.5k for CDP).
* ``fed_lin_ucb`` (docs/linear.md): M = 10, d = 5, K = 10, T = 10^4, private (eps = 1)
  and not, Theorem 1's D, D = 0 and a fixed schedule of 20: completed syncs per run (spec:
  Proposition 1's bound 2 sqrt((d T / D) ell) + 4 for an adaptive D, T - 1 syncs for D = 0,
  n for the fixed schedule), engine steps, messages (spec: 2 M per sync, plus the requests of
  the environment's protocol) and R(T).
* ``fed_lin_ucb_decentralized`` (docs/linear.md): M = 10 on a ring, d = 5, K = 10, T = 2000,
  non-private, gamma = 1 and 2, D = 5: requests (triggers) and releases per run, engine steps
  (paper: one communication step per trial with a trigger), messages (spec: one broadcast of v
  costs sum of deg(u) over u within gamma - 1 hops, i.e. 2 per broadcast on a ring at gamma = 1)
  and R(T).

    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 python benchmarks/bench_timing.py [--runs 10]
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np
import record

from agents import (
    CDPMAB,
    DDPMAB,
    HDPMAB,
    DPDecentralizedUCB,
    DPMasterWorkerUCB,
    FedLinUCB,
    FedLinUCBDecentralized,
)
from fedbandit_env.bench import evaluate
from fedbandit_env.network.ledger import AGENT_SERVER

DP_MW_SPEC = {1.5: (2425, 54045), 2.0: (2698, 46805), 5.0: (2836, 26373), math.inf: (3340, 6976)}


def dp_mw_ucb(runs: int, horizon: int) -> None:
    print(f"dp_mw_ucb: M=20, K=10, means 0.9..0.0 Bernoulli, T={horizon}, {runs} runs")
    print(
        "| eps | timing | decision rounds | spec | messages | R(T) | spec R(T) | engine steps | s |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for eps, (spec_rounds, spec_regret) in DP_MW_SPEC.items():
        for timing in ("paper", "latency"):
            policy = DPMasterWorkerUCB(epsilon=eps, timing=timing)
            start = time.perf_counter()
            res = evaluate(
                "FedBandit/Homogeneous-v0",
                policy,
                runs=runs,
                seed=0,
                env_kwargs={
                    "num_agents": 20,
                    "means": np.linspace(0.9, 0.0, 10),
                    "horizon": horizon,
                    "reward": "bernoulli",
                },
                checkpoints=np.array([horizon]),
            )
            wall = time.perf_counter() - start
            rounds = res.messages[:, AGENT_SERVER].mean() / 40  # 20 uploads + 20 broadcasts
            messages = res.messages.sum(axis=1).mean()
            steps = horizon + (rounds if timing == "paper" else 0)
            regret = res.regret_network[:, -1]
            se = regret.std(ddof=1) / math.sqrt(runs)
            print(
                f"| {eps:g} | {timing} | {rounds:,.0f} | {spec_rounds:,} | {messages:,.0f} | "
                f"{regret.mean():,.0f} ± {se:,.0f} | {spec_regret:,} | {steps:,.0f} | {wall:.1f} |"
            )


DP_DEC_SPEC = {1.5: 30747, 2.0: 23942, 5.0: 10897, math.inf: 3240}


def dp_dec_ucb(runs: int, horizon: int) -> None:
    print(f"\ndp_dec_ucb: M=20 on C_20, K=10, Gaussian 0.1, T={horizon}, {runs} runs")
    print("| eps | timing | engine steps | messages | 40 T | R(T) | spec R(T) |")
    print("|---|---|---|---|---|---|---|")
    for eps, spec in DP_DEC_SPEC.items():
        for timing in ("paper", "latency"):
            res = evaluate(
                "FedBandit/Homogeneous-v0",
                DPDecentralizedUCB(epsilon=eps, timing=timing),
                runs=runs,
                seed=0,
                env_kwargs={
                    "num_agents": 20,
                    "means": np.linspace(0.9, 0.0, 10),
                    "horizon": horizon,
                    "topology": "ring",
                    "reward": {"kind": "gaussian", "sigma": 0.1},
                },
                checkpoints=np.array([horizon]),
            )
            steps = 2 * horizon if timing == "paper" else horizon
            regret = res.regret_network[:, -1]
            se = regret.std(ddof=1) / math.sqrt(runs)
            print(
                f"| {eps:g} | {timing} | {steps:,} | {res.messages.sum(axis=1).mean():,.0f} | "
                f"{40 * horizon:,} | {regret.mean():,.0f} ± {se:,.0f} | {spec:,} |"
            )


COMMEFF = {
    "cdp_mab": (CDPMAB, {"num_agents": 50, "c1": 1.0}, "c1 M = 50; R 41.3k"),
    "ddp_mab ring": (DDPMAB, {"num_agents": 50, "topology": "ring"}, "1250, t_delay 24"),
    "ddp_mab star": (DDPMAB, {"num_agents": 50, "topology": "star"}, "98, t_delay 1"),
    "hdp_mab case 1": (
        HDPMAB,
        {
            "num_agents": 100,
            "topology": "hybrid",
            "topology_kwargs": {"sizes": [20] * 5, "component_graph": "complete"},
            "c1": 50.0,
        },
        "1200, t_delay 0",
    ),
}


def commeff(runs: int, horizon: int) -> None:
    print(f"\ncommeff agents: K=100, mu ~ U[0,1] per run, eps=1, T={horizon}, {runs} runs")
    print(
        "| agent | timing | rounds | delay slots/round | engine steps | messages | cost | "
        "cost/round | R(T) | spec (per round) |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name, (cls, env, spec) in COMMEFF.items():
        for timing in ("paper", "latency"):
            policy = cls(epsilon=1.0, timing=timing)
            res = evaluate(
                "FedBandit/Homogeneous-v0",
                policy,
                runs=runs,
                seed=0,
                env_kwargs={"num_arms": 100, "horizon": horizon, "instance_seed": None, **env},
                checkpoints=np.array([horizon]),
            )
            rounds = policy.rounds_done.mean()
            slots = policy.delay + (0 if timing == "paper" else 1)
            steps = horizon + (rounds if timing == "paper" else 0)
            cost = res.cost.sum(axis=1).mean()
            regret = res.regret_network[:, -1]
            se = regret.std(ddof=1) / math.sqrt(runs)
            print(
                f"| {name} | {timing} | {rounds:.1f} | {slots} | {steps:,.1f} | "
                f"{res.messages.sum(axis=1).mean():,.0f} | {cost:,.0f} | "
                f"{cost / max(rounds, 1e-9):,.0f} | {regret.mean():,.0f} ± {se:,.0f} | {spec} |"
            )


def fed_lin_ucb(runs: int, horizon: int) -> None:
    print(f"\nfed_lin_ucb: M=10, d=5, K=10, T={horizon}, {runs} runs")
    print("| setting | timing | syncs | spec syncs | engine steps | messages | 2 M syncs | R(T) |")
    print("|---|---|---|---|---|---|---|---|")
    settings = {
        "eps=1, Theorem-1 D": {"epsilon": 1.0},
        "non-private, Theorem-1 D": {"private": False},
        "non-private, D=0": {"private": False, "sync_threshold": 0.0},
        "eps=1, fixed n=20": {"epsilon": 1.0, "schedule": "fixed", "num_syncs": 20},
    }
    M, d = 10, 5
    for label, kwargs in settings.items():
        for timing in ("paper", "latency"):
            policy = FedLinUCB(timing=timing, **kwargs)
            res = evaluate(
                "FedBandit/LinearContextual-v0",
                policy,
                runs=min(runs, 4),
                seed=0,
                env_kwargs={"num_agents": M, "dim": d, "num_arms": 10, "horizon": horizon},
                checkpoints=np.array([horizon]),
            )
            syncs = policy.n_sync.mean()
            if policy.threshold == 0.0 and kwargs.get("schedule") != "fixed":
                spec = f"{horizon - 1} (every trial)"
            elif kwargs.get("schedule") == "fixed":
                spec = f"{kwargs['num_syncs']} (fixed)"
            else:
                c = policy.constants
                ell = c.ell if c is not None else math.log(1.0 + horizon / (d * policy.lam))
                bound = 2.0 * math.sqrt(d * horizon / policy.threshold * ell) + 4.0
                spec = f"<= {bound:.1f} (Prop. 1)"
            steps = horizon + (syncs if timing == "paper" else 0)
            print(
                f"| {label} | {timing} | {syncs:.1f} | {spec} | {steps:,.0f} | "
                f"{res.messages.sum(axis=1).mean():,.0f} | {2 * M * syncs:,.0f} | "
                f"{res.regret_network[:, -1].mean():,.1f} |"
            )


def fed_lin_ucb_decentralized(runs: int) -> None:
    import fedbandit_env

    horizon = 2000
    print(f"\nfed_lin_ucb_decentralized: M=10 ring, d=5, K=10, T={horizon}, non-private, D=5")
    print("| gamma | timing | requests | releases | engine steps | messages | R(T) |")
    print("|---|---|---|---|---|---|---|")
    for gamma in (1, 2):
        for timing in ("paper", "latency"):
            policy = FedLinUCBDecentralized(
                gamma=gamma, private=False, sync_threshold=5.0, timing=timing
            )
            kw = {"num_agents": 10, "dim": 5, "num_arms": 10, "horizon": horizon}
            spec = policy.channel_spec(fedbandit_env.make_vec(ENV_LINEAR, dim=5).config)
            venv = fedbandit_env.make_vec(
                ENV_LINEAR, num_runs=min(runs, 2), topology="ring", channels=spec, **kw
            )
            obs, info = venv.reset(seed=0)
            policy.reset(venv.facts, venv.agent_rng())
            while not venv.engine.truncated:
                action = policy.act(obs)
                obs, _, _, _, info = venv.step(action.arms, action.messages, action.pull)
            print(
                f"| {gamma} | {timing} | {policy.n_requests.mean():,.0f} | "
                f"{policy.releases.sum(axis=(1, 2)).mean():,.0f} | {venv.engine.step_count:,} | "
                f"{venv.engine.ledger.total.messages.sum(axis=1).mean():,.0f} | "
                f"{info.cumulative_regret.sum(axis=1).mean():,.1f} |"
            )


ENV_LINEAR = "FedBandit/LinearContextual-v0"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--horizon", type=int, default=10_000)
    parser.add_argument(
        "--only",
        choices=["dp_mw_ucb", "dp_dec_ucb", "commeff", "fed_lin_ucb", "decentralized"],
        help="one agent family only",
    )
    record.add_json_option(parser)
    args = parser.parse_args()
    record.start(__file__, args)
    if args.only in (None, "dp_mw_ucb"):
        dp_mw_ucb(args.runs, args.horizon)
    if args.only in (None, "dp_dec_ucb"):
        dp_dec_ucb(args.runs, args.horizon)
    if args.only in (None, "commeff"):
        commeff(args.runs, args.horizon)
    if args.only in (None, "fed_lin_ucb"):
        fed_lin_ucb(args.runs, args.horizon)
    if args.only in (None, "decentralized"):
        fed_lin_ucb_decentralized(args.runs)


if __name__ == "__main__":
    main()
