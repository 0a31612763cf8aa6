"""The environment part shared by the numpy references of ``bench_learners.py``.

``Ref`` is the instance every reference runs on: FedBandit/Homogeneous-v0's means (seed 0), its
own Bernoulli rewards of flat (B*N) pulls, flat per-(run, agent, arm) statistics and one
generator for everything (or, inside :func:`per_run_streams`, :class:`PerRunStreams`: one
buffered generator per run, the suite's reproducibility contract); ``timed`` turns a reference
loop into agent-pulls per second, and ``policy_rate`` measures a shipped learner the same way
through the vector view.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from contextvars import ContextVar

import numpy as np

import fedbandit_env
from fedbandit_env.seeding import BatchedRNG, BufferedStream

ENV = "FedBandit/Homogeneous-v0"

_STREAMS: ContextVar[str] = ContextVar("reference_streams", default="one")


@contextlib.contextmanager
def per_run_streams() -> Iterator[None]:
    """References built inside draw from :class:`PerRunStreams` instead of one generator."""
    token = _STREAMS.set("per_run")
    try:
        yield
    finally:
        _STREAMS.reset(token)


class PerRunStreams:
    """The draws of a reference under the suite's reproducibility contract (docs/architecture.md): one
    generator per run, each run's numbers drawn a chunk of steps at a time and handed out step by
    step (the suite's :class:`~fedbandit_env.seeding.BufferedStream`), so that run b's numbers do
    not depend on its batch. Each (kind, size) of a per-step draw takes one buffered stream; a
    size splits into B equal run-major parts (B runs, B*N agents or B*N*M counters first). Same
    methods as the ``numpy.random.Generator`` calls of the references; :meth:`laplace_rows` is
    the occasional draw of some runs only (one call per generator, as the agents make it)."""

    def __init__(self, B: int, seed: int = 0):
        self.B = B
        self._rng = BatchedRNG.for_runs(list(range(seed, seed + B)), "agents")
        self._streams: dict[tuple[str, object], tuple[BufferedStream, tuple[int, ...]]] = {}

    def _draw(self, kind: str, size) -> np.ndarray:
        found = self._streams.get((kind, size))
        if found is None:
            shape = (size,) if np.ndim(size) == 0 else tuple(size)
            part = int(np.prod(shape)) // self.B
            found = self._streams[kind, size] = (self._rng.buffered(kind, (part,)), shape)
        stream, shape = found
        return stream.next().reshape(shape)

    def random(self, size) -> np.ndarray:
        return self._draw("uniform", size)

    def standard_normal(self, size) -> np.ndarray:
        return self._draw("normal", size)

    def laplace(self, loc: float, scale: float, size: int) -> np.ndarray:
        """``E1 - E2`` of two standard exponentials, as the suite's Laplace streams draw."""
        e = self._draw("exponential", (size, 2))
        return loc + scale * (e[:, 0] - e[:, 1])

    def laplace_rows(self, runs: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
        """Standard Laplace draws of ``shape`` for the runs ``runs`` only."""
        gens = self._rng.generators
        return np.stack([gens[b].laplace(0.0, 1.0, shape) for b in runs.tolist()])


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
        per_run = _STREAMS.get() == "per_run"
        self.rng = PerRunStreams(B) if per_run else np.random.default_rng(0)
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

    def laplace_rows(self, runs: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
        """Standard Laplace noise of ``shape`` for each run in ``runs`` (an occasional draw)."""
        if isinstance(self.rng, PerRunStreams):
            return self.rng.laplace_rows(runs, shape)
        return self.rng.laplace(0.0, 1.0, (runs.size, *shape))

    def ring_sum(self, x: np.ndarray) -> np.ndarray:
        """Own plus both ring neighbours' statistics (the shared variants' n_used, s_used)."""
        y = x.reshape(self.B, self.N, -1)
        return y + np.roll(y, 1, axis=1) + np.roll(y, -1, axis=1)


def timed(loop: Callable[[int], None], steps: int, ref: Ref) -> float:
    """Agent-pulls per second of ``loop(steps)`` (``steps`` pulls per agent)."""
    start = time.perf_counter()
    loop(steps)
    return ref.R * steps / (time.perf_counter() - start)
