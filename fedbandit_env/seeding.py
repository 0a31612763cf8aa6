"""Seeding: every random number comes from a `numpy.random.Generator` derived from one seed.

DESIGN.md §2: one integer seed per run is expanded with `numpy.random.SeedSequence` into separate
streams — ``instance`` (random instances drawn per run), ``rewards`` (reward noise, decision sets),
``network`` (gossip edges, participation, message drops) and ``agents`` (everything a learner
draws: tie-breaks, privacy noise). Changing a learner's epsilon therefore never changes the reward
draws, and paired-seed comparisons across learners are exact on the environment side.

Batched code draws for B runs at once through :class:`BatchedRNG`, which holds one Generator per
run. Run b of a batch is bit-identical to the same run seed simulated alone (B = 1): every
per-run generator is consumed by exactly the same sequence of calls whatever B is. Per-step draws
of a fixed shape go through :class:`BufferedStream`, which refills a chunk of steps per run at a
time (one Generator call per run per chunk instead of per step).
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Sequence
from typing import Literal

import numpy as np

STREAMS: tuple[str, ...] = ("instance", "rewards", "network", "agents")

Kind = Literal["uniform", "normal", "exponential"]

_CHUNK_FLOATS = 1 << 14  # per run and buffer: at most 16k doubles (128 KiB)
_MAX_CHUNK_STEPS = 1024


def _check_seed(seed: int) -> int:
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise ValueError(f"seed: expected a non-negative int, got {seed!r}")
    return int(seed)


def run_seed_sequence(seed: int, stream: str) -> np.random.SeedSequence:
    """The SeedSequence of one named stream (one of :data:`STREAMS`) of the run with ``seed``."""
    if stream not in STREAMS:
        raise ValueError(f"stream: expected one of {STREAMS}, got {stream!r}")
    root = np.random.SeedSequence(_check_seed(seed))
    return root.spawn(len(STREAMS))[STREAMS.index(stream)]


def named_child(seq: np.random.SeedSequence, name: str) -> np.random.SeedSequence:
    """A child SeedSequence keyed by a name, so sub-streams do not depend on creation order."""
    key = zlib.crc32(name.encode("utf-8"))
    return np.random.SeedSequence(seq.entropy, spawn_key=(*seq.spawn_key, key))


def run_seeds(seed: int | Sequence[int], num_runs: int) -> list[int]:
    """Run seeds of a batch: ``seed, seed+1, ...`` for an int, or the given list."""
    if isinstance(seed, int | np.integer) and not isinstance(seed, bool):
        base = _check_seed(seed)
        return [base + b for b in range(num_runs)]
    seeds = [_check_seed(s) for s in seed]
    if len(seeds) != num_runs:
        raise ValueError(f"seed: expected {num_runs} run seeds, got {len(seeds)}")
    return seeds


class BufferedStream:
    """Per-step draws of a fixed shape for B runs, refilled a chunk of steps at a time.

    ``next()`` returns a fresh (B, *shape) float64 array for the current step. The chunk length
    depends only on ``shape`` (never on B), so each run's generator sees the same calls for any
    batch size.
    """

    def __init__(
        self, generators: Sequence[np.random.Generator], kind: Kind, shape: tuple[int, ...]
    ):
        if kind not in ("uniform", "normal", "exponential"):
            raise ValueError(f"kind: expected 'uniform', 'normal' or 'exponential', got {kind!r}")
        self._generators = tuple(generators)
        self._kind = kind
        self._shape = tuple(int(s) for s in shape)
        per_step = max(1, int(np.prod(self._shape, dtype=np.int64)))
        self.chunk = int(max(1, min(_MAX_CHUNK_STEPS, _CHUNK_FLOATS // per_step)))
        self._buffer = np.empty((0, len(self._generators), *self._shape))  # step-major
        self._pos = 0

    def _draw(self, gen: np.random.Generator) -> np.ndarray:
        size = (self.chunk, *self._shape)
        if self._kind == "uniform":
            return gen.random(size)
        if self._kind == "normal":
            return gen.standard_normal(size)
        return gen.standard_exponential(size)

    def next(self) -> np.ndarray:
        if self._pos >= self._buffer.shape[0]:
            self._buffer = np.stack([self._draw(g) for g in self._generators], axis=1)
            self._pos = 0
        out = self._buffer[self._pos]  # contiguous (B, *shape)
        self._pos += 1
        return out


class BatchedRNG:
    """One `numpy.random.Generator` per run of a batch (DESIGN.md §2).

    Use :meth:`buffered` for per-step draws of a fixed shape (fast path), :meth:`per_run` for
    anything irregular (one call per run), and :meth:`child` for an independent named sub-stream
    (e.g. ``rng.child("tiebreak")`` and ``rng.child("privacy")`` inside one learner).
    """

    def __init__(self, seed_sequences: Sequence[np.random.SeedSequence]):
        if len(seed_sequences) == 0:
            raise ValueError("seed_sequences: expected at least one run")
        self._seqs = tuple(seed_sequences)
        self.generators: tuple[np.random.Generator, ...] = tuple(
            np.random.Generator(np.random.PCG64(s)) for s in self._seqs
        )

    @classmethod
    def for_runs(cls, seeds: Sequence[int], stream: str) -> BatchedRNG:
        """The named stream (one of :data:`STREAMS`) of each run seed."""
        return cls([run_seed_sequence(s, stream) for s in seeds])

    @property
    def num_runs(self) -> int:
        return len(self.generators)

    def child(self, name: str) -> BatchedRNG:
        return BatchedRNG([named_child(s, name) for s in self._seqs])

    def run(self, b: int) -> BatchedRNG:
        """The single-run stream of run ``b`` (same numbers as inside the batch)."""
        return BatchedRNG([self._seqs[b]])

    def buffered(self, kind: Kind, shape: tuple[int, ...]) -> BufferedStream:
        return BufferedStream(self.generators, kind, shape)

    def per_run(self, draw: Callable[[np.random.Generator], np.ndarray]) -> np.ndarray:
        return np.stack([np.asarray(draw(g)) for g in self.generators])
