"""The environment part shared by the numpy references of ``bench_learners.py``.

``Ref`` is the instance every reference runs on: FedBandit/Homogeneous-v0's means (seed 0), its
own Bernoulli rewards of flat (B*N) pulls, flat per-(run, agent, arm) statistics and one
generator for everything; ``timed`` turns a reference loop into agent-pulls per second, and
``policy_rate`` measures a shipped learner the same way through the vector view (also used by
``bench_numba.py``).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

import fedbandit_env

ENV = "FedBandit/Homogeneous-v0"


def make_venv(policy, B: int, N: int, M: int, steps: int):
    """The ring vector env of the learner benchmarks, with the channels ``policy`` asks for."""
    kw = {"num_agents": N, "num_arms": M, "horizon": steps, "topology": "ring"}
    preview = fedbandit_env.make_vec(ENV, num_runs=1, **kw).config
    spec = policy.channel_spec(preview)
    return fedbandit_env.make_vec(ENV, num_runs=B, channels=spec or (), **kw)


def policy_rate(policy, B: int, N: int, M: int, steps: int) -> tuple[float, float]:
    """Agent-pulls per second of ``policy`` over ``steps`` pulls per agent (its
    communication-only steps are stepped too, as in any run) and the share of the wall time
    spent in its ``act`` (the rest is the engine and its channels)."""
    venv = make_venv(policy, B, N, M, steps)
    obs, _ = venv.reset(seed=0)
    policy.reset(venv.facts, venv.agent_rng())
    engine, acting, clock = venv.engine, 0.0, time.perf_counter
    start = clock()
    while not engine.truncated:
        t0 = clock()
        action = policy.act(obs)
        acting += clock() - t0
        obs, *_ = venv.step(action.arms, action.messages, action.pull)
    wall = clock() - start
    return B * N * steps / wall, acting / wall


def instance(B: int, N: int, M: int) -> np.ndarray:
    """The env's means at seed 0, flat (B*N*M,) as the references index them."""
    venv = fedbandit_env.make_vec(ENV, num_runs=B, num_agents=N, num_arms=M, horizon=10)
    venv.reset(seed=0)
    return venv.engine.means.reshape(-1)


class Ref:
    """The environment part of every reference: Bernoulli rewards of flat (B*N) pulls."""

    def __init__(self, B: int, N: int, M: int):
        self.B, self.N, self.M = B, N, M
        self.R = B * N
        self.means = instance(B, N, M)
        self.base = np.arange(self.R) * M
        self.rng = np.random.default_rng(0)
        self.regret = np.zeros(self.R)
        best = self.means.reshape(self.R, M).max(axis=1)
        self.gap = (best[:, None] - self.means.reshape(self.R, M)).reshape(-1)
        self.counts = np.zeros(self.R * M)
        self.sums = np.zeros(self.R * M)

    def pull(self, arms: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Pull ``arms`` (B*N,); return their flat (run, agent, arm) positions and rewards."""
        flat = self.base + arms
        reward = (self.rng.random(self.R) < self.means[flat]).astype(np.float64)
        self.regret += self.gap[flat]
        self.counts[flat] += 1.0
        self.sums[flat] += reward
        return flat, reward

    def ring_sum(self, x: np.ndarray) -> np.ndarray:
        """Own plus both ring neighbours' statistics (the shared variants' n_used, s_used)."""
        y = x.reshape(self.B, self.N, -1)
        return y + np.roll(y, 1, axis=1) + np.roll(y, -1, axis=1)


def timed(loop: Callable[[int], None], steps: int, ref: Ref) -> float:
    """Agent-pulls per second of ``loop(steps)`` (``steps`` pulls per agent)."""
    start = time.perf_counter()
    loop(steps)
    return ref.R * steps / (time.perf_counter() - start)
