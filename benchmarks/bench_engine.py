"""Engine throughput: vector view vs the PettingZoo dict loop, and scaling in N on a ring.

Prints figures; does not assert (the machines are shared and noisy). Ratios are measured side by
side in one run. Run on one core:

    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 python benchmarks/bench_engine.py

Targets (docs/architecture.md, the batched engine): vector view >= 2e6 agent-steps/s at B=100, N=10, M=10 with the
neighbors channel, >= 20x the dict loop, and per-agent-step cost flat from N=10 to N=1000 on a ring.
The ring rows run two agents: ``uniform`` sends nothing (engine and reward cost only) and
``flooding`` sends its M pull counts to both neighbours every step (channel cost included). The
last table is the ``flood`` channel alone on a ring with its default ttl (the diameter, N/2),
after ttl warm-up steps so that every hop is in flight.

``--pull-loop`` prints only the communication-steps table (docs/architecture.md, "Communication
steps"): the pull loop of today's engine against the engine step as it was before communication
steps existed (reproduced in :func:`legacy_step` below, same arrays and channels), interleaved
in rounds so that machine noise hits both alike, plus the cost of a step in which some runs
communicate without pulling. Target: the pull loop at most 10 % slower.
"""

from __future__ import annotations

import argparse
import functools
import time

import numpy as np
import record

import fedbandit_env
from baselines.trivial import Flooding, UniformRandom
from fedbandit_env.policy import ParallelPolicyAdapter

ENV = "FedBandit/Homogeneous-v0"


def vector_rate(
    num_runs: int, num_agents: int, steps: int, topology: str = "complete", policy=UniformRandom
) -> float:
    venv = fedbandit_env.make_vec(
        ENV,
        num_runs=num_runs,
        num_agents=num_agents,
        num_arms=10,
        horizon=steps,
        topology=topology,
        channels=("neighbors",),
    )
    policy = policy()
    obs, _ = venv.reset(seed=0)
    policy.reset(venv.facts, venv.agent_rng())
    start = time.perf_counter()
    for _ in range(steps):
        action = policy.act(obs)
        obs, *_ = venv.step(action.arms, action.messages)
    return num_runs * num_agents * steps / (time.perf_counter() - start)


@functools.cache
def _legacy_indices(num_runs: int, num_agents: int) -> tuple[np.ndarray, np.ndarray]:
    """The (B, 1) and (1, N) index arrays the legacy step gathered with, made once."""
    return np.arange(num_runs)[:, None], np.arange(num_agents)[None, :]


@functools.cache
def _legacy_silence(num_runs: int, num_agents: int, dim: int) -> tuple[np.ndarray, np.ndarray]:
    """The all-False send mask and zero payload the legacy step used for a silent channel."""
    return np.zeros((num_runs, num_agents), dtype=bool), np.zeros((num_runs, num_agents, dim))


def legacy_step(engine, arms, messages=None):
    """The engine's step before communication-only steps (pull loop only), for comparison."""
    from fedbandit_env.engine import VecInfo, VecObservation

    if engine.step_count >= engine.horizon:
        raise RuntimeError("horizon")
    arms = engine._check_arms(arms)
    sends = engine._check_messages(messages or {})
    engine.step_count += 1
    t = engine.step_count
    noise = engine._noise.next()
    run_index, agent_index = _legacy_indices(engine.num_runs, engine.num_agents)
    pulled = engine.means[run_index, agent_index, arms]
    rewards = engine.config.reward.sample(pulled, noise)
    expected = engine.global_expected[run_index, arms]
    regret = engine.best_expected[:, None] - expected
    engine.cumulative_regret += regret
    charge = None
    deliveries = {}
    for name, channel in engine.channels.items():
        send, payload = sends.get(name) or _legacy_silence(
            engine.num_runs, engine.num_agents, channel.dim
        )
        deliveries[name], ch_charge = channel.transmit(t, send, payload)
        if charge is None:
            charge = ch_charge
        else:
            charge.add(ch_charge)
    engine.ledger.record([] if charge is None else [charge])
    obs = VecObservation(t, arms, rewards, deliveries, None)
    info = VecInfo(regret, expected, engine.cumulative_regret.copy(), engine.ledger)
    return obs, rewards, info


def pull_loop_rates(num_runs: int, num_agents: int, steps: int, rounds: int) -> dict[str, float]:
    """Agent-steps/s of Flooding (neighbors channel, every agent sends every step): the legacy
    step, today's pull loop, and today's engine with every 4th step of runs 0, 2, 4, ... a
    communication step (median over interleaved rounds)."""
    venv = fedbandit_env.make_vec(
        ENV,
        num_runs=num_runs,
        num_agents=num_agents,
        num_arms=10,
        horizon=2 * steps,
        channels=("neighbors",),
    )
    talk = np.arange(num_runs) % 2 == 1  # runs that pull in a communication step

    def one(kind: str) -> float:
        policy = Flooding()
        obs, _ = venv.reset(seed=0)
        policy.reset(venv.facts, venv.agent_rng())
        engine = venv.engine
        start = time.perf_counter()
        for k in range(steps):
            action = policy.act(obs)
            if kind == "legacy":
                obs, _, _ = legacy_step(engine, action.arms, action.messages)
            elif kind == "pull loop":
                obs, _, _ = engine.step(action.arms, action.messages)
            else:
                pull = talk if k % 4 == 3 else None
                obs, _, _ = engine.step(action.arms, action.messages, pull)
        return num_runs * num_agents * steps / (time.perf_counter() - start)

    kinds = ("legacy", "pull loop", "with communication steps")
    rates: dict[str, list[float]] = {k: [] for k in kinds}
    for _ in range(rounds):
        for kind in kinds:
            rates[kind].append(one(kind))
    return {k: float(np.median(v)) for k, v in rates.items()}


def print_pull_loop(steps: int, rounds: int) -> None:
    print("| engine step (Flooding, neighbors) | B | N | M | agent-steps/s | vs legacy |")
    print("|---|---|---|---|---|---|")
    for runs, n in ((100, 10), (10, 100)):
        rates = pull_loop_rates(runs, n, steps, rounds)
        for kind, rate in rates.items():
            ratio = rate / rates["legacy"]
            print(f"| {kind} | {runs} | {n} | 10 | {rate:,.0f} | {ratio:.3f} |")
    print("\n(target: the pull loop within 10 % of legacy, i.e. a ratio >= 0.90)")


def dict_rate(num_agents: int, steps: int) -> float:
    env = fedbandit_env.make(
        ENV, num_agents=num_agents, num_arms=10, horizon=steps, channels=("neighbors",)
    )
    adapter = ParallelPolicyAdapter(UniformRandom(), env)
    obs, _ = env.reset(seed=0)
    adapter.reset(0)
    start = time.perf_counter()
    while env.agents:
        obs, *_ = env.step(adapter(obs))
    return num_agents * steps / (time.perf_counter() - start)


def flood_step_cost(num_agents: int, send_prob: float, steps: int) -> tuple[int, float, float]:
    """(ttl, milliseconds per step, deliveries per step) of the flood channel on a ring, B = 1,
    each agent sending with probability ``send_prob`` per step, measured after ttl steps."""
    venv = fedbandit_env.make_vec(
        ENV,
        num_runs=1,
        num_agents=num_agents,
        num_arms=10,
        horizon=10**6,
        topology="ring",
        channels={"f": {"kind": "flood", "dim": 10}},
    )
    ttl = venv.channels["f"].ttl
    venv.reset(seed=0)
    rng = np.random.default_rng(0)
    arms = np.zeros((1, num_agents), dtype=np.int64)
    payload = np.ones((1, num_agents, 10))
    sends = rng.random((ttl + steps, 1, num_agents)) < send_prob
    for t in range(ttl):
        venv.step(arms, {"f": (sends[t], payload)})
    rows = 0
    start = time.perf_counter()
    for t in range(ttl, ttl + steps):
        obs, *_ = venv.step(arms, {"f": (sends[t], payload)})
        rows += len(obs.deliveries["f"].run)
    return ttl, (time.perf_counter() - start) / steps * 1e3, rows / steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2000, help="vector-view steps")
    parser.add_argument(
        "--pull-loop", action="store_true", help="only the communication-steps comparison"
    )
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds (--pull-loop)")
    record.add_json_option(parser)
    args = parser.parse_args()
    record.start(__file__, args)
    if args.pull_loop:
        print_pull_loop(args.steps, args.rounds)
        return
    vec = vector_rate(100, 10, args.steps)
    dic = dict_rate(10, max(200, args.steps // 4))
    print("| view | B | N | M | agent-steps/s |")
    print("|---|---|---|---|---|")
    print(f"| vector (uniform, neighbors) | 100 | 10 | 10 | {vec:,.0f} |")
    print(f"| ParallelEnv dict loop | 1 | 10 | 10 | {dic:,.0f} |")
    record.figure("vector / dict", vec / dic)
    print(f"\nvector / dict = {vec / dic:.1f}x   (target >= 20x; vector target >= 2e6/s)\n")
    print("| agent | ring N | B | microseconds per step | microseconds per agent-step |")
    print("|---|---|---|---|---|")
    per_step = {}
    for policy in (UniformRandom, Flooding):
        for n in (10, 100, 1000):
            rate = vector_rate(10, n, max(200, args.steps // 4), topology="ring", policy=policy)
            per_step[policy, n] = 10 * n / rate * 1e6
            us = per_step[policy, n]
            print(f"| {policy.agent_id} | {n} | 10 | {us:.1f} | {us / (10 * n):.4f} |")
    print()
    for policy in (UniformRandom, Flooding):
        growth = per_step[policy, 1000] / per_step[policy, 100]
        record.figure(f"{policy.agent_id} step cost N=1000 / N=100", growth)
        print(
            f"{policy.agent_id}: step cost N=1000 / N=100 = {growth:.1f} "
            "(linear in N: <= 10; N x N work: ~100)"
        )
    print(
        "\n| flood channel, ring N | ttl | senders per step | ms per step | deliveries per step |"
    )
    print("|---|---|---|---|---|")
    for n, p in ((100, 1.0), (1000, 0.01), (1000, 0.1)):
        ttl, ms, rows = flood_step_cost(n, p, max(20, args.steps // 100))
        print(f"| {n} | {ttl} | {p * n:g} | {ms:.2f} | {rows:,.0f} |")
    print()
    print_pull_loop(max(200, args.steps // 2), 3)


if __name__ == "__main__":
    main()
