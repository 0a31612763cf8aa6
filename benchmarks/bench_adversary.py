"""What Byzantine roles and robust reductions cost per environment step.

    OMP_NUM_THREADS=1 python benchmarks/bench_adversary.py [--runs 100 --agents 10 --arms 10]

The environment alone (no learner): every agent sends a fixed [means (M), counts (M)] payload
(dim 2M) on every step, the way the mean-sharing learners do (docs/adversary.md). The plain step
is a `neighbors` channel with `reduce="mean"` on a ring and on the complete graph, and a `server`
channel with `aggregate="mean"`; each variant changes one thing:

* roles: `adversary=` with 2 Byzantine and 1 crashed agent under an oblivious attack (`zeros`),
  a rushing omniscient one (`alie`, which reads every honest payload of the step) and the
  count-forging `zhu_code`;
* reductions: `median`, `trimmed_mean` (trim 1), `median_of_means` (group size 2, consecutive
  and random grouping) and `geometric_median`; the padded per-neighbour delivery
  (`reduce=None`) for reference.

Steps of every variant are timed in interleaved rounds (the machine is shared and noisy) and each
ratio is the median step time of the variant over that of the plain step of the same channel and
graph, from the same run. Prints one Markdown table; does not assert.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np
import record

import fedbandit_env

ENV = "FedBandit/Homogeneous-v0"
ROLES = {"num_byzantine": 2, "num_crashed": 1, "crash_at": 2}


def variants(num_agents: int) -> list[tuple[str, str, dict, dict | None]]:
    """(channel kind, label, channel options, adversary) of every timed variant; the first row
    of each kind is its plain step."""
    rows: list[tuple[str, str, dict, dict | None]] = []
    for kind, key in (("neighbors", "reduce"), ("server", "aggregate")):
        rows.append((kind, "plain (mean)", {key: "mean"}, None))
        for attack in ("zeros", "alie", "zhu_code"):
            rows.append(
                (kind, f"roles, attack {attack}", {key: "mean"}, {**ROLES, "attack": attack})
            )
        rows.append((kind, "median", {key: "median"}, None))
        rows.append((kind, "trimmed_mean trim=1", {key: "trimmed_mean", "trim": 1}, None))
        rows.append((kind, "median_of_means g=2", {key: "median_of_means", "group_size": 2}, None))
        rows.append(
            (
                kind,
                "median_of_means g=2 random",
                {key: "median_of_means", "group_size": 2, "grouping": "random"},
                None,
            )
        )
        rows.append((kind, "geometric_median", {key: "geometric_median"}, None))
        rows.append((kind, "median + roles (alie)", {key: "median"}, {**ROLES, "attack": "alie"}))
        if kind == "neighbors":
            rows.append((kind, "padded (reduce=None)", {key: None}, None))
    return rows


def stepper(
    kind: str, topology: str, options: dict, adversary: dict | None, args, steps: int
) -> Callable[[], float]:
    """A function that runs ``steps`` environment steps and returns the seconds they took."""
    dim = 2 * args.arms
    channel = {"kind": kind, "dim": dim, **{k: v for k, v in options.items() if v is not None}}
    venv = fedbandit_env.make_vec(
        ENV,
        num_runs=args.runs,
        num_agents=args.agents,
        num_arms=args.arms,
        horizon=10**9,
        topology=topology,
        channels={kind: channel},
        adversary=adversary,
    )
    venv.reset(seed=0)
    rng = np.random.default_rng(0)
    arms = rng.integers(args.arms, size=(steps, args.runs, args.agents))
    payload = np.concatenate(
        [
            rng.random((args.runs, args.agents, args.arms)),
            np.ones((args.runs, args.agents, args.arms)),
        ],
        axis=2,
    )
    send = np.ones((args.runs, args.agents), dtype=bool)

    def run() -> float:
        start = time.perf_counter()
        for s in range(steps):
            venv.step(arms[s], {kind: (send, payload)})
        return time.perf_counter() - start

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--agents", type=int, default=10)
    parser.add_argument("--arms", type=int, default=10)
    parser.add_argument("--steps", type=int, default=200, help="steps per timed block")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds (median)")
    record.add_json_option(parser)
    args = parser.parse_args()
    record.start(__file__, args)

    settings = [("neighbors", "ring"), ("neighbors", "complete"), ("server", "complete")]
    table = {
        (kind, topology, label): stepper(kind, topology, options, adv, args, args.steps)
        for kind, topology in settings
        for k, label, options, adv in variants(args.agents)
        if k == kind
    }
    for run in table.values():  # warm-up: first-step allocations and caches
        run()
    times: dict[tuple[str, str, str], list[float]] = {key: [] for key in table}
    for _ in range(args.rounds):
        for key, run in table.items():
            times[key].append(run())
    per_step = {key: float(np.median(v)) / args.steps for key, v in times.items()}

    print(
        f"Cost per environment step, B={args.runs}, N={args.agents}, M={args.arms}, "
        f"dim {2 * args.arms}, every agent sends every step (median of {args.rounds} rounds)"
    )
    print("| channel | graph | variant | us/step | ratio to plain |")
    print("|---|---|---|---|---|")
    for kind, topology in settings:
        plain = per_step[(kind, topology, "plain (mean)")]
        for (k, g, label), seconds in per_step.items():
            if (k, g) == (kind, topology):
                print(f"| {kind} | {g} | {label} | {seconds * 1e6:,.0f} | {seconds / plain:.2f} |")


if __name__ == "__main__":
    main()
