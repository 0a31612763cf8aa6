"""What the event-time options cost against the lock-step engine (docs/time.md, "Cost").

Times ``evaluate`` of one learner on one environment without an option and with each setting of
it, side by side in one process and interleaved (best of ``--repeats`` calls each; JAX: the
compiled program, compiling excluded), and prints each setting's time over the plain run's.
Options off must cost nothing: the plain run's code is the code that ran before the option
existed (tests/test_drift.py and the reference file check the bits; this measures the time).

An event clock makes one pull per engine step where lock-step makes N, at the same horizon T
(T rounds of N pulls against T events): its table gives the time per engine step and per pull
against the plain run's; a reward delay's table (fixed and random delays), the time against
the undelayed run; a
latency's table (``ucb1_shared`` on a ring, every agent sending to its two neighbours each
step; fixed, per-link and random latencies), the time against the run without latency and the
messages in flight per run, L x 2N (the mean L of a random latency);
churn's table (the same ring), the time against the run where nobody leaves.

    python benchmarks/bench_time_options.py                 # numpy and JAX, CPU sizes
    python benchmarks/bench_time_options.py --runs 50 --horizon 500 --backends numpy
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import record

from fedbandit_env.bench.evaluate import evaluate

ENV = "FedBandit/Homogeneous-v0"
LINEAR = "FedBandit/LinearContextual-v0"


def settings(horizon: int) -> dict[str, dict]:
    """The drift settings timed (None: the plain environment)."""
    third = max(horizon // 3, 2)
    return {
        "off": None,
        "piecewise, 2 points, segment means": {
            "kind": "piecewise", "change_points": [third, 2 * third],
            "means": [[0.5, 0.3, 0.4, 0.2, 0.1], [0.5, 0.3, 0.9, 0.2, 0.1],
                      [0.5, 0.3, 0.4, 0.2, 0.1]],
        },
        "piecewise, rate 0.01, redrawn": {"kind": "piecewise", "rate": 0.01},
        "smooth": {"kind": "smooth", "period": horizon / 2, "amplitude": 0.3, "center": 0.5},
    }  # fmt: skip


def linear_settings(horizon: int) -> dict[str, dict]:
    third = max(horizon // 3, 2)
    return {
        "off": None,
        "piecewise, 2 points, theta* redrawn": {"kind": "piecewise",
                                                "change_points": [third, 2 * third]},
        "smooth, theta* turning": {"kind": "smooth", "period": horizon / 2},
    }  # fmt: skip


def timed(env_id, learner, kw, runs, backend) -> float:
    start = time.perf_counter()
    evaluate(env_id, learner, runs=runs, seed=0, env_kwargs=kw, backend=backend)
    return time.perf_counter() - start


def best_of(env_id, learner, kws: dict[str, dict], runs, backend, repeats) -> dict[str, float]:
    """The best of ``repeats`` timed calls of each setting (env kwargs by name), after one
    warm call each (compile and imports), the settings interleaved."""
    for kw in kws.values():
        timed(env_id, learner, kw, runs, backend)
    best = {name: np.inf for name in kws}
    for _ in range(repeats):
        for name, kw in kws.items():
            best[name] = min(best[name], timed(env_id, learner, kw, runs, backend))
    return best


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=200, help="runs per evaluate (%(default)s)")
    p.add_argument("--horizon", type=int, default=1000, help="pulls per run (%(default)s)")
    p.add_argument("--repeats", type=int, default=3, help="timed calls of each (best kept)")
    p.add_argument("--backends", nargs="*", default=["numpy", "jax"])
    record.add_json_option(p)
    args = p.parse_args()
    record.start(__file__, args)
    h = args.horizon
    cases = [
        ("multi-armed (N = 10, M = 5), ucb1", ENV, "ucb1",
         {"num_agents": 10, "num_arms": 5, "horizon": h, "instance_seed": None,
          "channels": ()}, settings(h)),
        ("linear (N = 4, K = 10, d = 5), linucb", LINEAR, "linucb",
         {"num_agents": 4, "num_arms": 10, "dim": 5, "horizon": h, "instance_seed": None,
          "channels": ()}, linear_settings(h)),
    ]  # fmt: skip
    for backend in args.backends:
        for title, env_id, learner, base, table in cases:
            runs = args.runs if env_id == ENV else max(args.runs // 10, 2)
            kws = {name: ({**base, "drift": d} if d else base) for name, d in table.items()}
            best = best_of(env_id, learner, kws, runs, backend, args.repeats)
            print(f"\n{title}, {backend}, {runs} runs x {h} pulls: drift against off")
            print("\n| drift | s | vs off |")
            print("|---|---|---|")
            for name in kws:
                print(f"| {name} | {best[name]:.3f} | {best[name] / best['off']:.2f} |")
            clock_table(title, env_id, learner, base, runs, backend, args.repeats)
            if env_id == ENV:  # linucb refuses a delay (docs/time.md); it sends no message
                delay_table(title, env_id, learner, base, runs, backend, args.repeats)
                latency_table(env_id, base, runs, backend, args.repeats)
                churn_table(env_id, base, runs, backend, args.repeats)


CLOCKS = {
    "off (lock-step)": None,
    "one_random": "one_random",
    "poisson, stragglers": {"kind": "poisson", "stragglers": {}},
}


def clock_table(title, env_id, learner, base, runs, backend, repeats) -> None:
    """The event clocks against the lock-step run at the same horizon T (docs/time.md,
    "clock"): T engine steps each, N T pulls against T."""
    kws = {name: ({**base, "clock": c} if c else base) for name, c in CLOCKS.items()}
    best = best_of(env_id, learner, kws, runs, backend, repeats)
    h, n = base["horizon"], base["num_agents"]
    off = best["off (lock-step)"]
    print(f"\n{title}, {backend}, {runs} runs x {h} engine steps: clock against lock-step")
    print("\n| clock | pulls per run | s | per engine step vs off | per pull vs off |")
    print("|---|---|---|---|---|")
    for name in kws:
        pulls = h * n if CLOCKS[name] is None else h
        ratio = best[name] / off
        print(f"| {name} | {pulls} | {best[name]:.3f} | {ratio:.2f} | {ratio * h * n / pulls:.2f} |")


def delay_table(title, env_id, learner, base, runs, backend, repeats) -> None:
    """Fixed reward delays against the undelayed run (docs/time.md, "reward_delay")."""
    kws = {"off": base, **{f"{d} pulls": {**base, "reward_delay": d} for d in (10, 100)},
           "geometric, mean 10, max 100": {**base, "reward_delay": {
               "kind": "geometric", "mean": 10, "max": 100}},
           "pareto, shape 1.2, max 100": {**base, "reward_delay": {
               "kind": "pareto", "shape": 1.2, "max": 100}}}  # fmt: skip
    best = best_of(env_id, learner, kws, runs, backend, repeats)
    print(f"\n{title}, {backend}, {runs} runs x {base['horizon']} pulls: reward_delay "
          "against off")  # fmt: skip
    print("\n| reward_delay | s | vs off |")
    print("|---|---|---|")
    for name in kws:
        print(f"| {name} | {best[name]:.3f} | {best[name] / best['off']:.2f} |")


def latency_table(env_id, base, runs, backend, repeats) -> None:
    """Fixed latencies against none (docs/time.md, "latency"): ``ucb1_shared`` on a ring of N
    agents, 2N messages a step, so L x 2N messages in flight per run."""
    ring = {k: v for k, v in base.items() if k != "channels"} | {"topology": "ring"}
    n = ring["num_agents"]
    kws = {"off": ring, **{f"{L} steps": {**ring, "latency": L} for L in (1, 10, 100)},
           "per link, 10 steps": {**ring, "latency": {"kind": "per_link",
                                                      "steps": [[10] * n] * n}},
           "geometric, mean 10, max 100": {**ring, "latency": {"kind": "geometric", "mean": 10,
                                                                "max": 100}}}  # fmt: skip
    best = best_of(env_id, "ucb1_shared", kws, runs, backend, repeats)
    print(f"\nmulti-armed (N = {n}, ring), ucb1_shared, {backend}, {runs} runs x "
          f"{ring['horizon']} steps: latency against off")  # fmt: skip
    print("\n| latency | messages in flight per run | s | vs off |")
    print("|---|---|---|---|")
    for name, kw in kws.items():
        lag = kw.get("latency", 0)
        flight = (lag if isinstance(lag, int) else 10) * 2 * n  # the per-link and mean steps
        print(f"| {name} | {flight} | {best[name]:.3f} | {best[name] / best['off']:.2f} |")



def churn_table(env_id, base, runs, backend, repeats) -> None:
    """Churn against nobody leaving (docs/time.md, "churn"): ``ucb1_shared`` on a ring of N
    agents, a schedule of N absences (each client away for a tenth of the run) and a Markov
    churn (leave 0.01, return 0.1 per pull)."""
    ring = {k: v for k, v in base.items() if k != "channels"} | {"topology": "ring"}
    n, h = ring["num_agents"], ring["horizon"]
    tenth = max(h // 10, 1)
    schedule = {"kind": "schedule", "absences": [[m, 1 + m * tenth % h, 1 + m * tenth % h + tenth]
                                                 for m in range(n)]}  # fmt: skip
    markov = {"kind": "markov", "p_leave": 0.01, "p_join": 0.1}
    kws = {"off": ring, f"schedule, {n} absences": {**ring, "churn": schedule},
           "markov 0.01 / 0.1": {**ring, "churn": markov}}  # fmt: skip
    best = best_of(env_id, "ucb1_shared", kws, runs, backend, repeats)
    print(f"\nmulti-armed (N = {n}, ring), ucb1_shared, {backend}, {runs} runs x {h} steps: "
          "churn against off")  # fmt: skip
    print("\n| churn | s | vs off |")
    print("|---|---|---|")
    for name in kws:
        print(f"| {name} | {best[name]:.3f} | {best[name] / best['off']:.2f} |")


if __name__ == "__main__":
    main()
