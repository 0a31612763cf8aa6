"""Numba as an optional learner kernel: the shipped numpy learner vs compiled kernels of itself.

Prints, side by side in one run (best of ``--repeats``, shipped and compiled interleaved):

* whole-step agent-steps/s of the shipped learner stepped through the vector view (engine,
  channels, validation included, as ``benchmarks/bench_learners.py``) and of the same learner
  whose ``act`` computes the index and the tie-broken arg-max in one ``@njit`` kernel (``ucb1``:
  also a variant whose whole ``act``, statistics update included, is one kernel);
* ``act`` alone, numpy vs compiled, replayed on the observations recorded from the shipped run
  (so the act share and the act-only ratio are known);
* whether the compiled learner's arms at every step and its final cumulative regret are bit for
  bit those of the shipped learner for the same seed (IDENTICAL / DIFFERENT);
* the one-off cost every fresh process pays: ``import numba`` and each kernel's first call
  (compilation, no on-disk cache), which every joblib or Ray suite worker would pay again.

    OMP_NUM_THREADS=1 python benchmarks/bench_numba.py

numba is not a dependency of fedbandit; without it the script says so and exits 0. The kernels
live here only: they do the shipped learner's floating-point operations in the same order
(``baselines.ucb``: ``mean + c / sqrt(n)`` with ``c = scale sqrt(alpha ln t)``; KL-UCB's
bisection) and the tie-break of ``fedbandit_env.kernels.argmax_one_uniform`` (among the ``k``
arms of exactly maximal index the ``floor(u k)``-th in arm order).

Setting: FedBandit/Homogeneous-v0, Bernoulli rewards, ring, B = 100 runs, N = 10 agents,
M = 10 arms, 1000 steps (``--runs``, ``--agents``, ``--arms``, ``--steps``).
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import record
from learner_refs_base import ENV, make_venv, policy_rate

from baselines.ucb import KLUCB, UCB1
from fedbandit_env.engine import VecObservation
from fedbandit_env.policy import TeamAction

EPS = 1e-15  # baselines.ucb clips p and q into [EPS, 1 - EPS] in the Bernoulli KL


# ------------------------------------------------------------------ kernels (plain Python, jitted
# by build_kernels so that the module imports without numba)
def tie_break_row(values: np.ndarray, u: float) -> int:
    """Arg-max of one row; among the ``k`` entries equal to the maximum, the ``floor(u k)``-th
    (capped at ``k - 1``) in order: ``argmax_one_uniform`` for one row."""
    m = values.shape[0]
    best = 0
    for k in range(1, m):
        if values[k] > values[best]:
            best = k
    top = values[best]
    tied = 0
    for k in range(m):
        if values[k] >= top:
            tied += 1
    if tied == 1:
        return best
    j = min(int(u * tied), tied - 1)
    for k in range(m):
        if values[k] >= top:
            if j == 0:
                return k
            j -= 1
    return best


def ucb1_update(
    arm: np.ndarray,
    reward: np.ndarray,
    counts: np.ndarray,
    sums: np.ndarray,
    pulls: np.ndarray,
    mean: np.ndarray,
    rsqrt: np.ndarray,
) -> None:
    """UCB1's fold-in of the last pull per row (``IndexPolicy.act`` and ``UCB1.on_pull``)."""
    for r in range(arm.shape[0]):
        a = arm[r]
        counts[r, a] += 1.0
        sums[r, a] += reward[r]
        pulls[r] += 1.0
        n = counts[r, a]
        mean[r, a] = sums[r, a] / n
        rsqrt[r, a] = 1.0 / np.sqrt(n)


def ucb1_arms(
    mean: np.ndarray,
    rsqrt: np.ndarray,
    counts: np.ndarray,
    c: float,
    mask: bool,
    u: np.ndarray,
    values: np.ndarray,
    arms: np.ndarray,
) -> None:
    """``arms[r]``: the tie-broken arg-max of ``rsqrt * c + mean`` (two roundings, as the
    shipped in-place multiply then add), ``inf`` where ``counts <= 0`` when ``mask``."""
    for r in range(mean.shape[0]):
        for k in range(mean.shape[1]):
            v = rsqrt[r, k] * c
            v = v + mean[r, k]
            if mask and counts[r, k] <= 0.0:
                v = np.inf
            values[k] = v
        arms[r] = tie_break_row(values, u[r])


def klucb_index(
    counts: np.ndarray,
    sums: np.ndarray,
    pulls: np.ndarray,
    c: float,
    iterations: int,
    mask: bool,
    index: np.ndarray,
) -> None:
    """The KL-UCB index into ``index`` (``KLUCB.index`` and ``kl_upper_bound``: the same
    bisection, element by element; ``np.log`` here is the C library's, not numpy's)."""
    for r in range(counts.shape[0]):
        log_t = np.log(max(pulls[r], 1.0))
        budget = log_t + c * np.log(max(log_t, 1.0))
        for k in range(counts.shape[1]):
            n = counts[r, k]
            safe = max(n, 1.0)
            p = min(max(sums[r, k] / safe, 0.0), 1.0)
            level = budget / safe
            pc = min(max(p, EPS), 1.0 - EPS)
            lo, hi = p, 1.0
            for _ in range(iterations):
                mid = 0.5 * (lo + hi)
                q = min(max(mid, EPS), 1.0 - EPS)
                kl = pc * np.log(pc / q) + (1.0 - pc) * np.log((1.0 - pc) / (1.0 - q))
                if kl <= level:
                    lo = mid
                else:
                    hi = mid
            index[r, k] = np.inf if mask and n <= 0.0 else lo


def klucb_arms(
    counts: np.ndarray,
    sums: np.ndarray,
    pulls: np.ndarray,
    c: float,
    iterations: int,
    mask: bool,
    u: np.ndarray,
    index: np.ndarray,
    arms: np.ndarray,
) -> None:
    """``arms[r]``: the tie-broken arg-max of the KL-UCB index (``index``: (R, M) scratch)."""
    klucb_index(counts, sums, pulls, c, iterations, mask, index)
    for r in range(index.shape[0]):
        arms[r] = tie_break_row(index[r], u[r])


def ucb1_index(
    mean: np.ndarray, rsqrt: np.ndarray, counts: np.ndarray, c: float, mask: bool, index: np.ndarray
) -> None:
    """The UCB1 index of :func:`ucb1_arms` into ``index`` (for the bit-for-bit value check)."""
    for r in range(mean.shape[0]):
        for k in range(mean.shape[1]):
            v = rsqrt[r, k] * c
            v = v + mean[r, k]
            index[r, k] = np.inf if mask and counts[r, k] <= 0.0 else v


def build_kernels(numba: Any, M: int) -> tuple[dict[str, Callable], dict[str, float]]:
    """The jitted kernels and the seconds of each one's first call (compilation) on arrays of
    the types the learners pass (C-contiguous float64, int64 arms, M arms)."""
    global tie_break_row, klucb_index  # the kernels resolve them as globals when compiled
    tie_break_row = numba.njit(tie_break_row)
    klucb_index = numba.njit(klucb_index)
    kernels = {
        "ucb1_update": numba.njit(ucb1_update),
        "ucb1_arms": numba.njit(ucb1_arms),
        "klucb_arms": numba.njit(klucb_arms),
        "ucb1_index": numba.njit(ucb1_index),
        "klucb_index": klucb_index,
    }
    rows = np.zeros((2, M))
    arm, one, u = np.zeros(2, dtype=np.int64), np.zeros(2), np.zeros(2)
    values, out = np.zeros(M), np.zeros(2, dtype=np.int64)
    calls = {
        "ucb1_update": (arm, one, rows.copy(), rows.copy(), one.copy(), rows.copy(), rows.copy()),
        "ucb1_arms": (rows, rows, rows, 1.0, True, u, values, out),
        "ucb1_index": (rows, rows, rows, 1.0, True, rows.copy()),
        "klucb_arms": (rows, rows, one, 0.0, 20, True, u, rows.copy(), out),
    }
    compile_s = {}
    for name, args in calls.items():
        t0 = time.perf_counter()
        kernels[name](*args)
        compile_s[name] = time.perf_counter() - t0
    return kernels, compile_s


# ------------------------------------------------------------------ compiled learners
class CompiledAct:
    """Mixin: ``act`` of an independent index learner (no channel) with the index and the
    tie-broken arg-max in one compiled kernel; the statistics are folded in as the shipped
    ``IndexPolicy.act`` does (numpy), unless :meth:`fold_in` is overridden."""

    kernels: dict[str, Callable] = {}

    def fold_in(self, obs: VecObservation) -> None:
        """The shipped fold-in of the last pull (``IndexPolicy.act``, independent variants)."""
        reward = self.transform_reward(obs.last_reward)
        flat = self._row_base + obs.last_arm
        self._counts_flat[flat] += 1.0
        self._sums_flat[flat] += reward
        self.pulls += 1.0
        self.on_pull(flat)

    def act(self, obs: VecObservation) -> TeamAction:
        if obs.step > 0:
            self.fold_in(obs)
            if not self._all_pulled:
                self._all_pulled = bool(self.counts.all())
        u = np.ascontiguousarray(self._tiebreak.next()).reshape(-1)
        arms = np.empty(u.size, dtype=np.int64)
        self.compiled_arms(obs.step, u, arms)
        return TeamAction(arms.reshape(self.counts.shape[:2]), {})

    def compiled_arms(self, step: int, u: np.ndarray, arms: np.ndarray) -> None:
        raise NotImplementedError


class UCB1Numba(CompiledAct, UCB1):
    """``ucb1`` with a compiled index and arg-max."""

    def setup(self, facts, rng) -> None:
        super().setup(facts, rng)
        M = facts.num_arms
        self._values = np.empty(M)
        self._rows = tuple(a.reshape(-1, M) for a in (self._mean, self._rsqrt, self.counts))

    def compiled_arms(self, step: int, u: np.ndarray, arms: np.ndarray) -> None:
        c = self._scale * math.sqrt(self.alpha * math.log(max(step, 1)))
        mean, rsqrt, counts = self._rows
        self.kernels["ucb1_arms"](
            mean, rsqrt, counts, c, not self._all_pulled, u, self._values, arms
        )

    def compiled_index(self, step: int) -> np.ndarray:
        c = self._scale * math.sqrt(self.alpha * math.log(max(step, 1)))
        mean, rsqrt, counts = self._rows
        index = np.empty_like(mean)
        self.kernels["ucb1_index"](mean, rsqrt, counts, c, not self._all_pulled, index)
        return index


class UCB1NumbaWhole(UCB1Numba):
    """``ucb1`` with the fold-in compiled too (the whole ``act`` in two kernel calls)."""

    def fold_in(self, obs: VecObservation) -> None:
        mean, rsqrt, counts = self._rows
        sums = self.sums.reshape(counts.shape)
        arm = np.ascontiguousarray(obs.last_arm, dtype=np.int64).reshape(-1)
        reward = np.ascontiguousarray(obs.last_reward, dtype=np.float64).reshape(-1)
        pulls = self.pulls.reshape(-1)
        self.kernels["ucb1_update"](arm, reward, counts, sums, pulls, mean, rsqrt)


class KLUCBNumba(CompiledAct, KLUCB):
    """``kl_ucb`` with a compiled index (the bisection) and arg-max."""

    def setup(self, facts, rng) -> None:
        super().setup(facts, rng)
        M = facts.num_arms
        self._index = np.empty((facts.num_runs * facts.num_agents, M))
        self._flat = (self.counts.reshape(-1, M), self.sums.reshape(-1, M), self.pulls.reshape(-1))

    def compiled_arms(self, step: int, u: np.ndarray, arms: np.ndarray) -> None:
        counts, sums, pulls = self._flat
        self.kernels["klucb_arms"](
            counts,
            sums,
            pulls,
            self.c,
            self._iterations,
            not self._all_pulled,
            u,
            self._index,
            arms,
        )

    def compiled_index(self, step: int) -> np.ndarray:
        counts, sums, pulls = self._flat
        index = np.empty_like(counts)
        mask = not self._all_pulled
        self.kernels["klucb_index"](counts, sums, pulls, self.c, self._iterations, mask, index)
        return index


# ------------------------------------------------------------------ measurements
def step_rate(policy, dims: tuple[int, int, int, int]) -> tuple[float, float]:
    """Agent-steps/s of ``policy`` stepped through the vector view, and its act share."""
    return policy_rate(policy, *dims)


def trajectory(policy, dims, seed: int) -> tuple[np.ndarray, np.ndarray, list[VecObservation]]:
    """Arms of every step (steps, B, N), the final cumulative regret (B, N) and a copy of every
    observation the learner received."""
    venv = make_venv(policy, *dims)
    obs, _ = venv.reset(seed=seed)
    policy.reset(venv.facts, venv.agent_rng())
    arms, seen, info = [], [], None
    while not venv.engine.truncated:
        seen.append(VecObservation(obs.step, obs.last_arm.copy(), obs.last_reward.copy(), {}))
        action = policy.act(obs)
        arms.append(np.array(action.arms, dtype=np.int64))
        obs, _, _, _, info = venv.step(action.arms, action.messages, action.pull)
    return np.stack(arms), info.cumulative_regret.copy(), seen


def act_rate(policy, dims, recorded: list[VecObservation]) -> float:
    """Agent-steps/s of ``policy.act`` alone, replayed on recorded observations."""
    B, N, _, steps = dims
    venv = make_venv(policy, *dims)
    venv.reset(seed=0)
    policy.reset(venv.facts, venv.agent_rng())
    start = time.perf_counter()
    for obs in recorded:
        policy.act(obs)
    return B * N * steps / (time.perf_counter() - start)


def compare(name: str, shipped, compiled, dims, seeds: list[int]) -> str:
    """IDENTICAL if arms at every step and final regret agree bit for bit for every seed."""
    for seed in seeds:
        a_arms, a_regret, _ = trajectory(shipped, dims, seed)
        b_arms, b_regret, _ = trajectory(compiled, dims, seed)
        if not (np.array_equal(a_arms, b_arms) and np.array_equal(a_regret, b_regret)):
            steps_differ = int(np.count_nonzero((a_arms != b_arms).any(axis=(1, 2))))
            return f"DIFFERENT (seed {seed}: {steps_differ} steps with other arms)"
    return "IDENTICAL"


def log_disagreement(numba: Any, size: int = 1_000_000) -> int:
    """How many of ``size`` uniform arguments in (0, 2) get a different ``log`` from numpy's
    array loop and from a compiled scalar loop (the C library's ``log``)."""
    x = np.random.default_rng(0).random(size) * 2.0 + 1e-12
    scalar = numba.njit(lambda x: np.array([np.log(v) for v in x]))
    return int(np.count_nonzero(np.log(x) != scalar(x)))


def index_bits(shipped, compiled, dims, recorded: list[VecObservation]) -> str:
    """Both learners replay the same recorded observations (so they hold the same statistics);
    after each ``act``, the shipped numpy index (``own_index``) vs the compiled kernel's, bit for
    bit: how many of all index values differ, and by how many units in the last place at most."""
    venv = make_venv(shipped, *dims)
    venv.reset(seed=0)
    shipped.reset(venv.facts, venv.agent_rng())
    compiled.reset(venv.facts, venv.agent_rng())
    differ, total, ulps = 0, 0, 0
    for obs in recorded:
        shipped.act(obs)
        compiled.act(obs)
        ours = np.array(shipped.own_index(obs.step)).reshape(-1)
        theirs = compiled.compiled_index(obs.step).reshape(-1)
        bits = ours.view(np.int64) != theirs.view(np.int64)
        differ += int(np.count_nonzero(bits))
        total += ours.size
        if bits.any():
            ulps = max(ulps, int(np.abs(ours.view(np.int64) - theirs.view(np.int64)).max()))
    return f"{differ:,} of {total:,}" + (f" (at most {ulps} ulp)" if differ else "")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--agents", type=int, default=10)
    parser.add_argument("--arms", type=int, default=10)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seeds", type=int, nargs="*", default=[0, 1, 2])
    parser.add_argument("--skip-kl", action="store_true", help="only ucb1")
    record.add_json_option(parser)
    args = parser.parse_args()
    record.start(__file__, args)
    t0 = time.perf_counter()
    try:
        import numba
    except ImportError:
        print(
            "numba is not importable in this environment: nothing to measure (it is not a "
            "dependency of fedbandit; install it in a scratch environment to run this script)"
        )
        return
    import_s = time.perf_counter() - t0
    dims = (args.runs, args.agents, args.arms, args.steps)
    kernels, compile_s = build_kernels(numba, args.arms)
    CompiledAct.kernels = kernels
    print(
        f"numba {numba.__version__}, numpy {np.__version__}; {ENV}, ring, B={args.runs}, "
        f"N={args.agents}, M={args.arms}, {args.steps} steps, best of {args.repeats}\n"
    )
    print(f"import numba: {import_s:.2f} s")
    record.figure("import numba s", import_s)
    for name, seconds in compile_s.items():
        record.figure(f"first call (compile) {name} s", seconds)
        print(f"first call (compile) {name}: {seconds:.2f} s")
    print(
        "log of 1,000,000 uniform arguments in (0, 2), numpy array vs compiled scalar loop: "
        f"{log_disagreement(numba):,} differ\n"
    )
    pairs = [("ucb1", UCB1, UCB1Numba, "index+argmax"), ("ucb1", UCB1, UCB1NumbaWhole, "whole act")]
    if not args.skip_kl:
        pairs.append(("kl_ucb", KLUCB, KLUCBNumba, "index+argmax"))
    print(
        "| learner | compiled part | numpy agent-steps/s | numba agent-steps/s | whole-step ratio "
        "| numpy act share | numpy act agent-steps/s | numba act agent-steps/s | act-only ratio "
        "| same arms and regret | index values that differ |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for name, shipped_cls, compiled_cls, part in pairs:
        shipped, compiled = shipped_cls(), compiled_cls()
        verdict = compare(name, shipped, compiled, dims, args.seeds)
        _, _, recorded = trajectory(shipped, dims, 0)
        values = index_bits(shipped, compiled, dims, recorded)
        ours, share, theirs, act_ours, act_theirs = 0.0, 1.0, 0.0, 0.0, 0.0
        for _ in range(args.repeats):
            rate, part_share = step_rate(shipped, dims)
            if rate > ours:
                ours, share = rate, part_share
            theirs = max(theirs, step_rate(compiled, dims)[0])
            act_ours = max(act_ours, act_rate(shipped, dims, recorded))
            act_theirs = max(act_theirs, act_rate(compiled, dims, recorded))
        print(
            f"| {name} | {part} | {ours:,.0f} | {theirs:,.0f} | {theirs / ours:.2f} | {share:.0%} "
            f"| {act_ours:,.0f} | {act_theirs:,.0f} | {act_theirs / act_ours:.2f} | {verdict} | {values} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
