"""Learner speed: each shipped multi-armed learner vs a tight numpy loop of itself.

Prints, for every learner, agent-steps/s of the registered learner stepped through the vector
view (engine, channels, validation included) and of a hand-written numpy loop of the same
algorithm on the same instance (its own Bernoulli rewards, flat statistics, one generator, no
framework), and their ratio, measured side by side in one run (best of ``--repeats``, learner and
reference interleaved); the same reference again with the suite's reproducibility contract
(docs/architecture.md: one generator per run, drawn a chunk of steps at a time, ``PerRunStreams``) and the
learner's ratio to that; the share of the learner's wall time spent in its own ``act`` (the rest is
the engine: validation, rewards, channels, ledger); and "act only: ratio", the learner's ``act``
alone against the reference's whole step (one-generator loop), i.e. the ratio the learner would
reach if the engine cost nothing. Does not assert: the machines are shared and noisy.

    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 python benchmarks/bench_learners.py

``--floor`` prints instead what every learner pays per engine step on the same instance (the
vector view's step with fixed arms and its parts) next to the uniform reference's whole step.

Setting: FedBandit/Homogeneous-v0, Bernoulli rewards, B = 100 runs, N = 10 agents on a ring,
M = 10 arms (``--runs``, ``--agents``, ``--arms``, ``--steps``). The references are not shipped
and not tested for equal trajectories; they run the same per-step work (same index, same
tie-break rule, same random numbers per step) so that the ratio is the framework's overhead.
"""

from __future__ import annotations

import argparse
import math
import time
from functools import partial

import numpy as np
import record
from learner_refs_base import ENV, Ref, per_run_streams, policy_rate, timed
from learner_refs_private import BUILDERS, reference_rate

import fedbandit_env
from baselines.formulas import ATTEMPTS, gamma_marsaglia_tsang
from fedbandit_env.agent_registry import make_agent
from fedbandit_env.kernels import argmax_one_uniform


def learner_rate(agent_id: str, B: int, N: int, M: int, steps: int) -> tuple[float, float]:
    """Agent-pulls per second of the registered learner and its act share (``policy_rate``)."""
    return policy_rate(make_agent(agent_id), B, N, M, steps)


def ref_uniform(B, N, M, steps, send=False):
    r = Ref(B, N, M)
    known = np.zeros((B, N, M))

    def loop(steps):
        nonlocal known
        for _ in range(steps):
            arms = (r.rng.random(r.R) * M).astype(np.int64)
            r.pull(arms)
            if send:  # flooding: max of own counts and both neighbours' last message
                heard = np.maximum(np.roll(known, 1, axis=1), np.roll(known, -1, axis=1))
                known = np.maximum(np.maximum(known, heard), r.counts.reshape(B, N, M))

    return timed(loop, steps, r)


def ref_ucb1(B, N, M, steps, shared=False):
    r = Ref(B, N, M)
    mean, rsqrt = np.zeros(r.R * M), np.zeros(r.R * M)

    def loop(steps):
        for t in range(steps):
            if shared:
                n, s = r.ring_sum(r.counts), r.ring_sum(r.sums)
                safe = np.maximum(n, 1.0)
                bonus = np.sqrt(2.0 * np.log(np.maximum(n.sum(-1, keepdims=True), 1.0)) / safe)
                index = np.where(n > 0, s / safe + bonus, np.inf).reshape(r.R, M)
            else:
                index = (rsqrt * math.sqrt(2.0 * math.log(max(t, 1))) + mean).reshape(r.R, M)
                if t < M:
                    index[r.counts.reshape(r.R, M) == 0] = np.inf
            arms = argmax_one_uniform(index, r.rng.random(r.R))
            flat, _ = r.pull(arms)
            mean[flat] = r.sums[flat] / r.counts[flat]
            rsqrt[flat] = 1.0 / np.sqrt(r.counts[flat])

    return timed(loop, steps, r)


def ref_epsilon_greedy(B, N, M, steps, shared=False, epsilon=0.1):
    r = Ref(B, N, M)
    mean = np.full(r.R * M, np.inf)

    def loop(steps):
        for _ in range(steps):
            if shared:
                n, s = r.ring_sum(r.counts), r.ring_sum(r.sums)
                index = np.where(n > 0, s / np.maximum(n, 1.0), np.inf).reshape(r.R, M)
            else:
                index = mean.reshape(r.R, M)
            greedy = argmax_one_uniform(index, r.rng.random(r.R))
            u = r.rng.random((r.R, 2))
            arms = np.where(u[:, 0] < epsilon, (u[:, 1] * M).astype(np.int64), greedy)
            flat, _ = r.pull(arms)
            mean[flat] = r.sums[flat] / r.counts[flat]

    return timed(loop, steps, r)


def kl_bisect(p, level, iterations=20):
    lo, hi = p.copy(), np.ones_like(p)
    pc = np.clip(p, 1e-15, 1 - 1e-15)
    for _ in range(iterations):
        mid = 0.5 * (lo + hi)
        q = np.clip(mid, 1e-15, 1 - 1e-15)
        ok = pc * np.log(pc / q) + (1 - pc) * np.log((1 - pc) / (1 - q)) <= level
        lo = np.where(ok, mid, lo)
        hi = np.where(ok, hi, mid)
    return lo


def ref_kl_ucb(B, N, M, steps, shared=False):
    r = Ref(B, N, M)

    def loop(steps):
        for t in range(steps):
            n, s = (r.ring_sum(r.counts), r.ring_sum(r.sums)) if shared else (r.counts, r.sums)
            safe = np.maximum(n, 1.0)
            total = n.reshape(r.R, M).sum(-1)[:, None] if shared else max(t, 1)
            level = (np.log(np.maximum(total, 1.0)) / safe.reshape(r.R, M)).reshape(-1)
            upper = kl_bisect(np.clip(s.reshape(-1) / safe.reshape(-1), 0, 1), level)
            index = np.where(n.reshape(-1) > 0, upper, np.inf).reshape(r.R, M)
            r.pull(argmax_one_uniform(index, r.rng.random(r.R)))

    return timed(loop, steps, r)


def ref_thompson_gaussian(B, N, M, steps, shared=False):
    r = Ref(B, N, M)
    mean, root = np.zeros(r.R * M), np.ones(r.R * M)

    def loop(steps):
        for _ in range(steps):
            z = r.rng.standard_normal(r.R * M)
            if shared:
                n, s = r.ring_sum(r.counts).reshape(-1), r.ring_sum(r.sums).reshape(-1)
                index = s / (n + 1.0) + z / np.sqrt(n + 1.0)
            else:
                index = z / root + mean
            flat, _ = r.pull(index.reshape(r.R, M).argmax(-1))
            mean[flat] = r.sums[flat] / (r.counts[flat] + 1.0)
            root[flat] = np.sqrt(r.counts[flat] + 1.0)

    return timed(loop, steps, r)


def ref_thompson_beta(B, N, M, steps, shared=False):
    r = Ref(B, N, M)

    def loop(steps):
        for _ in range(steps):
            n, s = (r.ring_sum(r.counts), r.ring_sum(r.sums)) if shared else (r.counts, r.sums)
            n, s = n.reshape(-1), s.reshape(-1)
            shapes = np.stack([1.0 + s, 1.0 + n - s], axis=-1)
            z = r.rng.standard_normal((r.R * M, 2, ATTEMPTS))
            u = r.rng.random((r.R * M, 2, ATTEMPTS))
            g = gamma_marsaglia_tsang(shapes, z, u)
            index = g[:, 0] / (g[:, 0] + g[:, 1])
            r.pull(index.reshape(r.R, M).argmax(-1))

    return timed(loop, steps, r)


def ref_centralized_ucb1(B, N, M, steps):
    r = Ref(B, N, M)
    runs = np.repeat(np.arange(B), N)

    def loop(steps):
        pooled_n, pooled_s = np.zeros(B * M), np.zeros(B * M)
        for t in range(steps):
            if t < M:
                best = np.full(B, t)
            else:
                index = pooled_s / pooled_n + np.sqrt(2.0 * np.log(N * t) / pooled_n)
                best = index.reshape(B, M).argmax(-1)
            arms = best[runs]
            _, reward = r.pull(arms)
            key = runs * M + arms
            pooled_n += np.bincount(key, minlength=B * M)
            pooled_s += np.bincount(key, weights=reward, minlength=B * M)

    return timed(loop, steps, r)


def ref_gossip_ucb(B, N, M, steps):
    """Gossip_UCB round (ring): lagging arms first, UCB argmax, one random edge averages theta,
    max-consensus of the counts with both ring neighbours."""
    r = Ref(B, N, M)
    shape = (B, N, M)

    def loop(steps):
        for t in range(M):
            r.pull(np.full(r.R, t))
        n = r.counts.reshape(shape)
        xbar = (r.sums / np.maximum(r.counts, 1)).reshape(shape)
        theta, ntil = xbar.copy(), n.copy()
        rows = np.arange(B)
        for t in range(1, steps - M + 1):
            lag = n < ntil - N
            u = r.rng.random(r.R)
            index = theta + np.sqrt(2.0 * N * math.log(t) / n)
            arms = argmax_one_uniform(index, u.reshape(B, N))
            if lag.any():
                lag_arm = np.argmax(lag, axis=-1)
                arms = np.where(lag.any(axis=-1), lag_arm, arms)
            old = xbar.copy()
            flat, _ = r.pull(arms.reshape(-1))
            xbar.reshape(-1)[flat] = r.sums[flat] / r.counts[flat]
            grad = xbar - old
            a = (r.rng.random(B) * N).astype(np.int64)  # edge (a, a+1) of the ring
            c = (a + 1) % N
            avg = 0.5 * (theta[rows, a] + theta[rows, c])
            theta += grad
            theta[rows, a] = avg + grad[rows, a]
            theta[rows, c] = avg + grad[rows, c]
            heard = np.maximum(np.roll(ntil, 1, axis=1), np.roll(ntil, -1, axis=1))
            ntil = np.maximum(n, heard)

    return timed(loop, steps, r)


LEARNERS = {
    "uniform": lambda *a: ref_uniform(*a),
    "flooding": lambda *a: ref_uniform(*a, send=True),
    "ucb1": lambda *a: ref_ucb1(*a),
    "ucb1_shared": lambda *a: ref_ucb1(*a, shared=True),
    "kl_ucb": lambda *a: ref_kl_ucb(*a),
    "kl_ucb_shared": lambda *a: ref_kl_ucb(*a, shared=True),
    "epsilon_greedy": lambda *a: ref_epsilon_greedy(*a),
    "epsilon_greedy_shared": lambda *a: ref_epsilon_greedy(*a, shared=True),
    "thompson_beta": lambda *a: ref_thompson_beta(*a),
    "thompson_beta_shared": lambda *a: ref_thompson_beta(*a, shared=True),
    "thompson_gaussian": lambda *a: ref_thompson_gaussian(*a),
    "thompson_gaussian_shared": lambda *a: ref_thompson_gaussian(*a, shared=True),
    "centralized_ucb1": lambda *a: ref_centralized_ucb1(*a),
    "gossip_ucb": lambda *a: ref_gossip_ucb(*a),
    **{agent_id: partial(reference_rate, agent_id) for agent_id in BUILDERS},
}
"""Every shipped multi-armed learner and its reference (the private and epoch-based ones are in
learner_refs_private.py)."""


def per_call_us(fn, calls: int) -> float:
    """Microseconds per call of ``fn`` (best of 3 batches of ``calls``, after a warm-up batch)."""
    best = math.inf
    for _ in range(calls):
        fn()
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter() - start) / calls * 1e6)
    return best


def engine_floor(B: int, N: int, M: int, calls: int = 2000) -> list[tuple[str, float]]:
    """What every learner pays per step, measured on the benchmark's instance: the vector view's
    whole step with fixed arms and no channel, its parts (the arm check, the reward, expected
    reward and regret gathers with the per-run reward draws, the draws alone), and the uniform
    reference's whole step (one generator: arms, rewards, regret, statistics)."""
    venv = fedbandit_env.make_vec(ENV, num_runs=B, num_agents=N, num_arms=M, horizon=10**7)
    venv.reset(seed=0)
    engine = venv.engine
    arms = (np.arange(B * N).reshape(B, N) % M).astype(np.int64)
    every = np.ones(B, dtype=bool)  # every run pulls
    ref = Ref(B, N, M)

    def ref_step():
        ref.pull((ref.rng.random(ref.R) * M).astype(np.int64))

    return [
        ("vector view step (fixed arms, no channel)", per_call_us(lambda: venv.step(arms), calls)),
        ("  engine.step", per_call_us(lambda: engine.step(arms), calls)),
        ("  arm check", per_call_us(lambda: engine._check_arms(arms), calls)),
        (
            "  rewards, expected rewards, regret",
            per_call_us(lambda: engine._draw(arms, every), calls),
        ),
        (
            "    of which the reward draws (B per-run streams)",
            per_call_us(engine._noise.next, calls),
        ),
        ("uniform reference, whole step", per_call_us(ref_step, calls)),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--agents", type=int, default=10)
    parser.add_argument("--arms", type=int, default=10)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--only", nargs="*", default=None, help="learner ids to measure")
    parser.add_argument("--floor", action="store_true", help="only the engine's per-step costs")
    record.add_json_option(parser)
    args = parser.parse_args()
    record.start(__file__, args)
    dims = (args.runs, args.agents, args.arms, args.steps)
    if args.floor:
        print(f"{ENV}, B={args.runs}, N={args.agents}, M={args.arms}: microseconds per step\n")
        print("| part | µs per step |\n|---|---|")
        for name, us in engine_floor(args.runs, args.agents, args.arms):
            print(f"| {name} | {us:.1f} |")
        return
    print(
        f"{ENV}, ring, B={args.runs}, N={args.agents}, M={args.arms}, {args.steps} steps, "
        f"best of {args.repeats}\n"
    )
    print(
        "| learner | learner agent-steps/s | numpy reference agent-steps/s | ratio "
        "| reference with per-run streams | ratio to it | act share | act only: ratio |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for agent_id in LEARNERS:
        if args.only and agent_id not in args.only:
            continue
        ours, share, theirs, contract = 0.0, 1.0, 0.0, 0.0
        for _ in range(args.repeats):
            rate, part = learner_rate(agent_id, *dims)
            if rate > ours:
                ours, share = rate, part
            theirs = max(theirs, LEARNERS[agent_id](*dims))
            with per_run_streams():
                contract = max(contract, LEARNERS[agent_id](*dims))
        # the learner's own act against the reference's whole step: the ratio if the engine
        # (checks, rewards, channels, ledger, records) cost nothing
        act_only = ours / share / theirs
        record.figure(f"{agent_id} / numpy loop", ours / theirs)
        print(
            f"| {agent_id} | {ours:,.0f} | {theirs:,.0f} | {ours / theirs:.2f} | "
            f"{contract:,.0f} | {ours / contract:.2f} | {share:.0%} | {act_only:.2f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
