"""Tight numpy references of the private and epoch-based learners, for ``bench_learners.py``.

Each ``make_*`` builds a reference on the bench instance (:class:`learner_refs_base.Ref`: Bernoulli
rewards, flat (run, agent, arm) statistics, one generator, no framework) and returns it with its
loop ``loop(steps)`` (``steps`` pulls per agent); :func:`reference_rate` times that loop. The
loops do the per-round work of the agent with its default parameters on a ring (same index, same
counters and mechanism updates, same communication pattern), as a careful hand-written
implementation would:

* a round that the agent splits into a communication-only engine step and a pull step is one
  iteration here (the rate counts pulls, as ``learner_rate`` does);
* a noise draw is made where the mechanism uses one: the binary-tree counter draws for the
  pulled counters when a level-0 block closes and for every counter when a higher block closes,
  the hybrid counter one Laplace per inserted item, the elimination agents one per (agent, arm)
  at the end of an epoch; the agents draw the same numbers of Laplace variables (one per
  (run, agent) where only the pulled counter takes one), from per-run streams;
* ties are broken uniformly at random with one uniform per agent (``argmax_one_uniform``; the
  DP-Dec-UCB agent draws one per arm).

Trajectories are not those of the agents (other random streams); the regrets are checked to be in
the same range as the agents' in tests/test_bench_learner_refs.py.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from learner_refs_base import Ref, timed

from agents.graph_constants import graph_constants
from fedbandit_env.kernels import argmax_one_uniform

Loop = Callable[[int], None]
EXPLORE, COMMUNICATE, COMMIT = 0, 1, 2


def _ctz(x: np.ndarray) -> np.ndarray:
    """Trailing zero bits of positive int64s (``-1`` at 0)."""
    return np.frexp((x & -x).astype(np.float64))[1] - 1


class HybridCounters:
    """Chan–Shi–Song hybrid counters (docs/privacy.md, "Hybrid counter"), one per flat (run, agent, arm), whose
    count is ``ref.counts`` and exact sum ``ref.sums``: ``Lap(2/eps)`` added to the logarithmic
    noise at every power-of-two count, else one binary-half p-sum at level ``ctz(c - 2^k)`` with
    ``Lap(2k/eps)``, absorbing the levels below; ``value`` holds each counter's release."""

    def __init__(self, ref: Ref, horizon: int, epsilon: float):
        self.ref = ref
        self.scale = 2.0 / epsilon  # sensitivity 1 (rewards in [0, 1])
        self.levels = max(1, horizon.bit_length() - 1)  # the binary half of the largest block
        size = ref.R * ref.M
        self.log_noise = np.zeros(size)
        self.alpha = np.zeros((size, self.levels))
        self.value = np.zeros(size)
        self._levels = np.arange(self.levels)

    def insert(self, flat: np.ndarray) -> np.ndarray:
        """The pulled counters ``flat`` received their reward (already in ``ref``): one Laplace
        each, their new releases (also written to ``value``)."""
        lap = self.ref.rng.laplace(0.0, self.scale, flat.size)
        count = self.ref.counts[flat]
        c = count.astype(np.int64)
        k = np.frexp(count)[1] - 1
        power = (c & (c - 1)) == 0
        log_noise = self.log_noise[flat] + np.where(power, lap, 0.0)
        self.log_noise[flat] = log_noise
        level = np.where(power, self.levels, _ctz(c - (np.int64(1) << k)))[:, None]
        row = self.alpha[flat]
        row = np.where(
            self._levels > level, row, np.where(self._levels == level, (k * lap)[:, None], 0.0)
        )
        self.alpha[flat] = row
        value = self.ref.sums[flat] + (log_noise + row.sum(axis=1))
        self.value[flat] = value
        return value


# ------------------------------------------------------------------------------ Fed_UCB


def make_gossip_fed_ucb(
    B: int, N: int, M: int, steps: int, epsilon: float = 1.0
) -> tuple[Ref, Loop]:
    """Fed_UCB (docs/gossip.md) on a ring: Gossip_UCB's round (lagging arms first, UCB argmax,
    one random edge averages theta, max-consensus of the counts) on the noisy means of a
    binary-tree counter per (agent, arm) over the round index, with its own noisy init leaf and
    the bonus of Eq. (12) with ln max(n, 2); scale = levels / epsilon, levels = floor(log2 T) + 1."""
    r = Ref(B, N, M)
    shape, size = (B, N, M), r.R * M
    T = steps - M  # rounds after the M initialization pulls
    levels = T.bit_length()
    scale = levels / epsilon
    dp = 128.0 * N * math.log(T) ** 2 / epsilon**2
    alpha1 = 64.0 / N**17

    def loop(steps: int) -> None:
        for t in range(M):
            r.pull(np.full(r.R, t))
        init_noise = r.rng.laplace(0.0, scale, size)  # the init sample's own leaf
        noise = np.zeros((levels, size))  # the open blocks' noise (their exact sums add to S)
        last = np.zeros(size)  # round of each counter's latest pull
        n = r.counts
        xbar = (r.sums + init_noise) / n
        theta = xbar.copy()
        inv = 1.0 / n
        lnn = np.log(np.maximum(n, 2.0)) / (n * n)
        ntil = n.reshape(shape).copy()
        rows = np.arange(B)
        for t in range(1, T + 1):
            u = r.rng.random(r.R)
            c1 = 2.0 * N * math.log(t)
            index = np.sqrt(c1 * inv + (c1 * dp * math.log(t)) * lnn)
            index += alpha1
            index += theta
            arms = argmax_one_uniform(index.reshape(r.R, M), u)
            lag = n.reshape(r.R, M) < ntil.reshape(r.R, M) - N
            if lag.any():
                lagging = lag.any(axis=1)
                arms = np.where(lagging, argmax_one_uniform(lag.astype(np.float64), u), arms)
            flat, _ = r.pull(arms)
            last[flat] = t
            level = (t & -t).bit_length() - 1  # round t closes block (t - 2^level, t]
            if level == 0:  # only this round's pulls: the pulled counters' noise
                noise[0, flat] = r.rng.laplace(0.0, scale, r.R)
            else:
                noised = last > t - (1 << level)
                noise[level] = np.where(noised, r.rng.laplace(0.0, scale, size), 0.0)
                noise[:level] = 0.0
            released = r.sums[flat] + (init_noise[flat] + noise[:, flat].sum(axis=0))
            count = n[flat]
            mean = released / count
            grad = mean - xbar[flat]
            xbar[flat] = mean
            a = (r.rng.random(B) * N).astype(np.int64)  # edge (a, a+1) of the ring
            th = theta.reshape(shape)
            c = (a + 1) % N
            avg = 0.5 * (th[rows, a] + th[rows, c])
            th[rows, a] = avg
            th[rows, c] = avg
            theta[flat] += grad
            heard = np.maximum(np.roll(ntil, 1, axis=1), np.roll(ntil, -1, axis=1))
            ntil = np.maximum(n.reshape(shape), heard)
            inv[flat] = 1.0 / count
            lnn[flat] = np.log(np.maximum(count, 2.0)) / (count * count)

    return r, loop


# ------------------------------------------------------------------------------ DP recommender


def make_dp_mw_ucb(B: int, N: int, M: int, steps: int, epsilon: float = 2.0) -> tuple[Ref, Loop]:
    """DP-MW-UCB (docs/dp-recsys.md, paper timing): rounds 1..M pull arm t - 1; from then on, in a
    round whose ``eta`` is a power of two every agent computes its private index (hybrid-counter
    sums, delta = T^-4) and the server's average picks the run's arm (lowest index on ties); a
    switch resets ``eta`` to 1. Every round all agents pull the held arm and insert the reward."""
    r = Ref(B, N, M)
    sums = HybridCounters(r, steps, epsilon)
    width = 4.0 * math.log(steps) / epsilon  # ln(1/delta) / epsilon
    held = np.zeros(B, dtype=np.int64)
    undecided = np.ones(B, dtype=bool)
    eta = np.ones(B, dtype=np.int64)

    def loop(steps: int) -> None:
        for t in range(1, steps + 1):
            if t <= M:
                arms = np.full(B, t - 1)
            else:
                decide = (eta & (eta - 1)) == 0
                if decide.any():
                    d = np.flatnonzero(decide)
                    n = r.counts.reshape(B, N, M)[d]
                    s = sums.value.reshape(B, N, M)[d]
                    inv = 1.0 / n
                    ln_n = np.log(n)
                    index = (
                        s * inv
                        + np.sqrt((2.0 * math.log(t)) * inv)
                        + width * ln_n * np.sqrt(ln_n) * inv
                    )
                    new = index.mean(axis=1).argmax(axis=1)
                    switched = undecided[d] | (new != held[d])
                    held[d] = new
                    undecided[d] = False
                    eta[d[switched]] = 1
                eta[:] += 1
                arms = held
            flat, _ = r.pull(np.repeat(arms, N))
            sums.insert(flat)

    return r, loop


def ring_constants(N: int) -> tuple[float, float, np.ndarray]:
    """Self and neighbour weights of ``P = I - (kappa/2) L`` on a ring with the default
    ``kappa = 2/3`` and the agents' constants ``c_i`` (docs/dp-recsys.md)."""
    kappa = 2.0 / 3.0
    P = (1.0 - kappa) * np.eye(N)
    P += 0.5 * kappa * (np.roll(np.eye(N), 1, axis=1) + np.roll(np.eye(N), -1, axis=1))
    return 1.0 - kappa, 0.5 * kappa, graph_constants(P, kappa=kappa).c


def make_dp_dec_ucb(
    B: int, N: int, M: int, steps: int, epsilon: float = 2.0, rho: float = 2.0
) -> tuple[Ref, Loop]:
    """DP-Dec-UCB (docs/dp-recsys.md, paper timing) on a ring: each round every agent adds its last
    pull (one count, the hybrid counter's increment) to its consensus state ``(nhat, shat)``,
    mixes it with both neighbours' by ``P``, and plays the argmax of the paper's index (rounds 1..M:
    arm t - 1); delta = T^-rho / 2."""
    r = Ref(B, N, M)
    sums = HybridCounters(r, steps, epsilon)
    w_self, w_edge, c = ring_constants(N)
    spread = c[None, :, None]
    width = (math.log(2.0) + rho * math.log(steps)) / epsilon
    rows = np.arange(r.R)

    def loop(steps: int) -> None:
        state = np.zeros((B, N, 2 * M))  # (nhat, shat) of every agent
        flat = None
        for t in range(1, steps + 1):
            if flat is not None:  # the last pull goes out with the agent's state
                before = sums.value[flat]
                after = sums.insert(flat)
                arm = flat - r.base
                out = state.reshape(r.R, 2 * M)
                out[rows, arm] += 1.0
                out[rows, M + arm] += after - before
            state = w_self * state + w_edge * (
                np.roll(state, 1, axis=1) + np.roll(state, -1, axis=1)
            )
            if t <= M:
                arms = np.full(r.R, t - 1)
            else:
                n, s = state[..., :M], state[..., M:]
                inv = 1.0 / n
                ln_n = np.log(np.maximum(n, 1.0))
                bonus = np.sqrt(((2.0 * rho / N) * math.log(t)) * (n + spread) * inv * inv)
                index = s * inv + bonus + width * ln_n * np.sqrt(ln_n) * inv
                arms = argmax_one_uniform(index.reshape(r.R, M), r.rng.random(r.R))
            flat, _ = r.pull(arms)

    return r, loop


# ------------------------------------------------------------------------------ elimination


def make_elimination(
    B: int, N: int, M: int, steps: int, delay: int, epsilon: float = 1.0
) -> tuple[Ref, Loop]:
    """CDP/DDP/HDP-MAB (docs/commeff.md, doubling schedule, paper timing): epoch r explores every
    active arm n_r times round-robin; its end privatises each agent's epoch means (Laplace
    1/(eps_msg n_r), eps_msg = N epsilon), folds them into ``ybar`` and uploads (a communication
    step, not a pull); after ``delay`` slots of local greedy play (A7) every agent holds the mean
    of all N ``ybar`` (server: delay 0; GIS flood or SAC on a ring: N//2 - 1) and drops every arm
    trailing the best by 2 (c + h); one arm left: commit. The schedule is per run (all agents of
    a run are in lock step)."""
    r = Ref(B, N, M)
    T, eps_msg, root_n = steps, epsilon * N, math.sqrt(N)
    runs = np.arange(B)
    epoch = np.zeros(B, dtype=np.int64)
    s_prev = np.zeros(B, dtype=np.int64)
    s_int = np.zeros(B, dtype=np.int64)
    n_r = np.zeros(B, dtype=np.int64)
    length = np.zeros(B, dtype=np.int64)
    pos = np.zeros(B, dtype=np.int64)
    phase = np.full(B, EXPLORE)
    wait = np.zeros(B, dtype=np.int64)
    width = np.zeros(B)
    active = np.ones((B, M), dtype=bool)
    num_active = np.full(B, M)
    order = np.tile(np.arange(M), (B, 1))
    committed = np.zeros(B, dtype=np.int64)
    epoch_sum = np.zeros((B, N, M))
    own_sum = np.zeros((B, N, M))  # exploration sums; every active arm has s_int pulls
    ybar = np.zeros((B, N, M))

    def start(g: np.ndarray) -> None:
        s_prev[g] = s_int[g]
        epoch[g] += 1
        one = num_active[g] == 1
        if one.any():
            committed[g[one]] = active[g[one]].argmax(axis=1)
            phase[g[one]] = COMMIT
            g = g[~one]
        if g.size == 0:
            return
        e, na = epoch[g].astype(np.float64), num_active[g]
        tilde = 2.0**-e
        l_i = np.log(8.0 * na * e * e * T)
        l_k = np.log(8.0 * M * e * e * T)
        target = np.maximum(
            8.0 * l_i / (N * tilde * tilde),
            8.0 * e * np.sqrt(2.0 * l_k) / (root_n * eps_msg * tilde),
        )
        s = np.maximum(np.ceil(target).astype(np.int64), s_prev[g] + 1)
        width[g] = np.sqrt(l_i / (2.0 * N * s)) + e * np.sqrt(8.0 * l_k) / (root_n * eps_msg * s)
        s_int[g] = s
        n_r[g] = s - s_prev[g]
        length[g] = na * n_r[g]
        pos[g] = 0
        phase[g] = EXPLORE
        epoch_sum[g] = 0.0
        order[g] = np.argsort(~active[g], axis=1, kind="stable")

    def privatise(d: np.ndarray) -> None:
        n = n_r[d].astype(np.float64)[:, None, None]
        s_new = s_int[d].astype(np.float64)[:, None, None]
        noise = r.laplace_rows(d, (N, M)) / (n * eps_msg)
        yhat = epoch_sum[d] / n + noise
        y = (s_prev[d][:, None, None] / s_new) * ybar[d] + (n / s_new) * yhat
        ybar[d] = np.where(active[d][:, None, :], y, 0.0)
        own_sum[d] += epoch_sum[d]
        phase[d] = COMMUNICATE
        wait[d] = delay

    def eliminate(g: np.ndarray) -> None:
        agg = np.where(active[g], ybar[g].mean(axis=1), -np.inf)
        best = agg.max(axis=1, keepdims=True)
        keep = active[g] & (best - agg < 2.0 * width[g][:, None])
        active[g] = keep
        num_active[g] = keep.sum(axis=1)

    def loop(steps: int) -> None:
        start(runs)
        epoch_flat = epoch_sum.reshape(-1)
        for _ in range(steps):
            done = (phase == EXPLORE) & (pos >= length)
            if done.any():
                privatise(np.flatnonzero(done))
            ready = (phase == COMMUNICATE) & (wait == 0)
            if ready.any():
                g = np.flatnonzero(ready)
                eliminate(g)
                start(g)
            explore = phase == EXPLORE
            arm = order[runs, pos % num_active]
            arm = np.where(phase == COMMIT, committed, arm)
            arms = np.repeat(arm, N)
            greedy = np.flatnonzero(phase == COMMUNICATE)
            if greedy.size:
                best = np.where(active[greedy][:, None, :], own_sum[greedy], -np.inf).argmax(axis=2)
                arms.reshape(B, N)[greedy] = best
                wait[greedy] -= 1
            flat, reward = r.pull(arms)
            if explore.all():
                epoch_flat[flat] += reward
            else:
                mine = np.repeat(explore, N)
                epoch_flat[flat[mine]] += reward[mine]
            pos[:] += explore

    return r, loop


# ------------------------------------------------------------------------------ timing


def ring_delay(N: int) -> int:
    """Slots after the upload until every agent of a ring holds all N vectors: ``d_G - 1``
    (GIS flood, first hop free) or ``ecc(sink) - 1`` (SAC with the sink at a centre)."""
    return N // 2 - 1


BUILDERS: dict[str, Callable[[int, int, int, int], tuple[Ref, Loop]]] = {
    "gossip_fed_ucb": make_gossip_fed_ucb,
    "dp_mw_ucb": make_dp_mw_ucb,
    "dp_dec_ucb": make_dp_dec_ucb,
    "cdp_mab": lambda B, N, M, steps: make_elimination(B, N, M, steps, delay=0),
    "ddp_mab": lambda B, N, M, steps: make_elimination(B, N, M, steps, delay=ring_delay(N)),
    "hdp_mab": lambda B, N, M, steps: make_elimination(B, N, M, steps, delay=ring_delay(N)),
}
"""The references by agent id; a builder returns the reference and its loop."""


def reference_rate(agent_id: str, B: int, N: int, M: int, steps: int) -> float:
    """Agent-pulls per second of the reference of ``agent_id`` over ``steps`` pulls per agent."""
    r, loop = BUILDERS[agent_id](B, N, M, steps)
    return timed(loop, steps, r)
