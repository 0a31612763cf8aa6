"""Privacy-wrapper overhead: step cost with and without the wrapper, per number of agents N.

Prints figures; does not assert (the machines are shared and noisy). Wrapped and unwrapped runs
are measured side by side in one run, on the same environment, actions and seed, interleaved,
and each figure is the best of ``--repeats`` measurements. Run on one core:

    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 python benchmarks/bench_privacy.py

Two wrapped channels (Laplace on ``neighbors``, Gaussian on ``server``). "wrapped" uses basic
composition and no budget; "wrapped + budget" adds an epsilon and a delta budget under
``composition="best"`` (the budget check runs every step for every channel). The PettingZoo
view reports ``infos[agent]["privacy"]`` every step; the vector view (B runs) reports arrays.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import record

import fedbandit_env
from fedbandit_env.wrappers import PrivacyVectorWrapper, PrivacyWrapper

ENV = "FedBandit/Heterogeneous-v0"
DIM = 4
CHANNELS = {
    "n": {"kind": "neighbors", "dim": DIM},
    "s": {"kind": "server", "dim": DIM, "aggregate": "sum"},
}
PRIVACY = {
    "n": {"epsilon": 0.5, "sensitivity": 1.0},
    "s": {"epsilon": 1.0, "delta": 1e-6, "mechanism": "gaussian"},
}
BUDGET = {"budget": 1e6, "delta_budget": 0.5, "composition": "best", "delta_prime": 1e-6}


def _env_kwargs(num_agents: int, steps: int) -> dict:
    return dict(
        num_agents=num_agents, num_arms=10, horizon=steps, topology="ring", channels=CHANNELS
    )


def _wrap_kwargs(mode: str) -> dict:
    return dict(BUDGET) if mode == "budget" else {}


def parallel_ms(num_agents: int, steps: int, mode: str) -> float:
    """Milliseconds per PettingZoo step (dict actions in, dict observations and infos out)."""
    env = fedbandit_env.make(ENV, **_env_kwargs(num_agents, steps))
    if mode != "raw":
        env = PrivacyWrapper(env, PRIVACY, **_wrap_kwargs(mode))
    payload = np.full(DIM, 0.1)
    action = {"arm": 0, "messages": {"n": payload, "s": payload}}
    env.reset(seed=0)
    actions = {a: action for a in env.possible_agents}
    start = time.perf_counter()
    for _ in range(steps):
        env.step(actions)
    return (time.perf_counter() - start) / steps * 1e3


def vector_ms(num_runs: int, num_agents: int, steps: int, mode: str) -> float:
    """Milliseconds per vector-view step of B runs."""
    venv = fedbandit_env.make_vec(ENV, num_runs=num_runs, **_env_kwargs(num_agents, steps))
    if mode != "raw":
        venv = PrivacyVectorWrapper(venv, PRIVACY, **_wrap_kwargs(mode))
    venv.reset(seed=0)
    arms = np.zeros((num_runs, num_agents), dtype=np.int64)
    payload = np.full((num_runs, num_agents, DIM), 0.1)
    messages = {"n": payload, "s": payload}
    start = time.perf_counter()
    for _ in range(steps):
        venv.step(arms, messages)
    return (time.perf_counter() - start) / steps * 1e3


def _row(view: str, n: int, times: dict[str, float]) -> str:
    raw, wrapped, budget = times["raw"], times["wrapped"], times["budget"]
    return (
        f"| {view} | {n} | {raw:.3f} | {wrapped:.3f} | {budget:.3f} "
        f"| {wrapped - raw:.3f} | {wrapped / raw:.2f}x |"
    )


def best_of(measure, repeats: int) -> dict[str, float]:
    """Milliseconds per step of each mode, best of ``repeats`` interleaved measurements."""
    modes = ("raw", "wrapped", "budget")
    times = {m: [] for m in modes}
    for _ in range(repeats):
        for m in modes:
            times[m].append(measure(m))
    return {m: min(t) for m, t in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200, help="steps per measurement")
    parser.add_argument("--runs", type=int, default=10, help="B of the vector view")
    parser.add_argument("--repeats", type=int, default=3, help="measurements per figure")
    record.add_json_option(parser)
    args = parser.parse_args()
    record.start(__file__, args)
    print(
        "| view | N | unwrapped ms/step | wrapped ms/step | wrapped + budget ms/step "
        "| overhead ms/step | wrapped / unwrapped |"
    )
    print("|---|---|---|---|---|---|---|")
    for n in (10, 50, 200):
        times = best_of(lambda m, n=n: parallel_ms(n, args.steps, m), args.repeats)
        print(_row("PettingZoo (B=1)", n, times))
    for n in (10, 50, 200):
        times = best_of(lambda m, n=n: vector_ms(args.runs, n, args.steps, m), args.repeats)
        print(_row(f"vector (B={args.runs})", n, times))


if __name__ == "__main__":
    main()
