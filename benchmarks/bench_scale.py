"""Scale: dense vs ring graphs, build time and stepping up to N = 100,000, evaluate memory.

Every figure is measured in a fresh subprocess (so peak RSS, ``ru_maxrss``, is that
configuration's own), side by side in one run. Does not assert.

    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 python benchmarks/bench_scale.py
    python benchmarks/bench_scale.py --eval-horizon 10000   # the full evaluate figure (minutes)

Tables:

1. ``flooding`` (uniform arms, max-consensus of its counts over the ``neighbors`` channel) at
   N = 1000, B = 10, M = 10: milliseconds per step and peak RSS on the ring and on the complete
   graph, with the aggregating ``max`` delivery (what ``flooding`` asks for) and with the padded
   per-neighbour delivery, and the complete / ring ratio.
2. Ring federations of N agents (B = 1, M = 10, ``flooding``): build + reset seconds, steps per
   second, agent-steps per second and peak RSS, N up to 100,000.
3. ``evaluate`` of ``flooding`` on a ring, B = 100, N = 1000 (``--eval-horizon`` steps, default
   10^4): wall time and peak RSS.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

import record

ENV = "FedBandit/Homogeneous-v0"


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def child_step_cost(topology: str, n: int, runs: int, steps: int, padded: bool) -> dict:
    import fedbandit_env
    from baselines.trivial import Flooding

    spec = {"kind": "neighbors", "dim": 10}
    if not padded:
        spec["reduce"] = "max"
    start = time.perf_counter()
    venv = fedbandit_env.make_vec(
        ENV,
        num_runs=runs,
        num_agents=n,
        num_arms=10,
        horizon=10**6,
        topology=topology,
        channels={"neighbors": spec},
    )
    obs, _ = venv.reset(seed=0)
    policy = Flooding()
    policy.reset(venv.facts, venv.agent_rng())
    build = time.perf_counter() - start
    for _ in range(2):  # warm-up
        action = policy.act(obs)
        obs, *_ = venv.step(action.arms, action.messages)
    start = time.perf_counter()
    for _ in range(steps):
        action = policy.act(obs)
        obs, *_ = venv.step(action.arms, action.messages)
    per_step = (time.perf_counter() - start) / steps
    return {"build_s": build, "step_ms": per_step * 1e3, "rss_mb": peak_mb()}


def child_evaluate(runs: int, n: int, horizon: int) -> dict:
    from fedbandit_env.bench import evaluate

    kw = {"num_agents": n, "num_arms": 10, "horizon": horizon, "topology": "ring"}
    res = evaluate(ENV, "flooding", runs=runs, seed=0, env_kwargs=kw)
    return {"wall_s": res.wall_time, "rss_mb": peak_mb(), "checkpoints": int(res.steps.size)}


def run_child(*args: str) -> dict:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
    out = subprocess.run(
        [sys.executable, __file__, "--child", *args],
        check=True,
        capture_output=True,
        text=True,
        env=env,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", nargs="*", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--eval-horizon", type=int, default=10_000)
    parser.add_argument("--skip-eval", action="store_true")
    parser.add_argument("--sizes", type=int, nargs="*", default=[1000, 5000, 20_000, 100_000])
    record.add_json_option(parser)
    args = parser.parse_args()
    if args.child is None:
        record.start(__file__, args)
    else:
        kind, *rest = args.child
        if kind == "step":
            topology, n, runs, steps, padded = rest
            out = child_step_cost(topology, int(n), int(runs), int(steps), padded == "1")
        else:
            out = child_evaluate(*(int(x) for x in rest))
        print(json.dumps(out))
        return

    print("## flooding, N = 1000, B = 10, M = 10\n")
    print("| graph | delivery | ms per step | peak RSS MB |")
    print("|---|---|---|---|")
    cost = {}
    for padded in (False, True):
        for topology in ("ring", "complete"):
            steps = "5" if (padded and topology == "complete") else "50"
            r = run_child("step", topology, "1000", "10", steps, "1" if padded else "0")
            cost[topology, padded] = r
            label = "padded (B, N, D, dim)" if padded else "aggregating max"
            print(f"| {topology} | {label} | {r['step_ms']:.2f} | {r['rss_mb']:.0f} |", flush=True)
    for padded in (False, True):
        ratio = cost["complete", padded]["step_ms"] / cost["ring", padded]["step_ms"]
        label = "padded" if padded else "aggregating"
        record.figure(
            f"complete / ring per step ({'padded' if padded else 'aggregating max'})", ratio
        )
        print(f"\ncomplete / ring per step ({label}): {ratio:.1f}x", end="")
    print("\n\n## ring federations, B = 1, M = 10, flooding\n")
    print("| N | build + reset s | steps/s | agent-steps/s | peak RSS MB |")
    print("|---|---|---|---|---|")
    for n in args.sizes:
        steps = str(max(20, 200_000 // n))
        r = run_child("step", "ring", str(n), "1", steps, "0")
        rate = 1e3 / r["step_ms"]
        record.figure(f"ring N={n} build + reset s", r["build_s"])
        print(
            f"| {n:,} | {r['build_s']:.2f} | {rate:,.0f} | {rate * n:,.0f} | {r['rss_mb']:.0f} |",
            flush=True,
        )
    if args.skip_eval:
        return
    print(f"\n## evaluate flooding, ring, B = 100, N = 1000, T = {args.eval_horizon:,}\n")
    r = run_child("eval", "100", "1000", str(args.eval_horizon))
    print("| wall s | peak RSS MB | curve checkpoints |")
    print("|---|---|---|")
    print(f"| {r['wall_s']:.0f} | {r['rss_mb']:.0f} | {r['checkpoints']} |")


if __name__ == "__main__":
    main()
