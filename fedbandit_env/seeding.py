"""Seeding: every random number comes from a `numpy.random.Generator` derived from one run seed,
through named streams (docs/architecture.md, "Seeding"). :class:`BatchedRNG` holds one Generator
per run of a batch and :class:`BufferedStream` draws per-step numbers a chunk of steps per run at
a time, so run b of a batch is bit-identical to its seed run alone. The privacy audits alone use
whole-batch draws instead (:mod:`fedbandit_env.block_streams`).
"""

from __future__ import annotations

import numbers
import zlib
from collections.abc import Callable, Sequence
from typing import Any, Literal

import numpy as np

from fedbandit_env.errors import ConfigError

STREAMS: tuple[str, ...] = (
    "instance", "rewards", "network", "agents", "adversary", "drift", "clock", "churn", "delay",
    "latency",
)
"""The named streams of a run seed. A stream's SeedSequence is child ``STREAMS.index(name)`` of
the run seed's, so appending a stream moves none of the others (``adversary``: the roles and the
attacks' draws, docs/adversary.md; ``drift``, ``clock``, ``churn``, and ``delay`` and ``latency``
for random reward delays and latencies: docs/time.md)."""

Kind = Literal["uniform", "normal", "exponential"]

_CHUNK_FLOATS = 1 << 14  # per run and buffer: at most 16k doubles (128 KiB)
MAX_CHUNK_STEPS = 1024


MAX_RUN_SEED = 2**63 - 1
"""Run seeds drawn by an unseeded reset are below this bound (they fit an int64 everywhere)."""


def check_seed(seed: Any, owner: str = "reset") -> int:
    """A run seed: a non-negative integer (any ``numbers.Integral``, numpy integers included,
    bools excluded). Anything else raises a ``TypeError`` (wrong type) or ``ValueError``
    (negative) naming ``seed``."""
    if isinstance(seed, bool | np.bool_) or not isinstance(seed, numbers.Integral):
        raise TypeError(f"{owner}: seed: expected None or a non-negative int, got {seed!r}")
    if seed < 0:
        raise ConfigError(f"{owner}: seed: expected None or a non-negative int, got {seed!r}")
    return int(seed)


def run_seed_sequence(seed: int, stream: str) -> np.random.SeedSequence:
    """The SeedSequence of one named stream (one of :data:`STREAMS`) of the run with ``seed``."""
    if stream not in STREAMS:
        raise ValueError(f"stream: expected one of {STREAMS}, got {stream!r}")
    root = np.random.SeedSequence(check_seed(seed, "run_seed_sequence"))
    return root.spawn(len(STREAMS))[STREAMS.index(stream)]


def named_child(seq: np.random.SeedSequence, name: str) -> np.random.SeedSequence:
    """A child SeedSequence keyed by a name, so sub-streams do not depend on creation order."""
    key = zlib.crc32(name.encode("utf-8"))
    return np.random.SeedSequence(seq.entropy, spawn_key=(*seq.spawn_key, key))


def draw_kind(
    gen: np.random.Generator, kind: Kind, size: Any = None, out: Any = None
) -> np.ndarray:
    """``size`` (or ``out``-shaped) draws of ``kind`` from ``gen`` (the same numbers either way)."""
    if kind == "uniform":
        return gen.random(size, out=out)
    if kind == "normal":
        return gen.standard_normal(size, out=out)
    return gen.standard_exponential(size, out=out)


def chunk_steps(shape: tuple[int, ...]) -> int:
    """Steps per refill of a run's buffer of draws of ``shape`` (at most :data:`MAX_CHUNK_STEPS`,
    read at the call, and 16k doubles): a function of ``shape`` alone, never of the batch."""
    per_step = max(1, int(np.prod(shape, dtype=np.int64)))
    return int(max(1, min(MAX_CHUNK_STEPS, _CHUNK_FLOATS // per_step)))


def check_kind(kind: str) -> None:
    if kind not in ("uniform", "normal", "exponential"):
        raise ValueError(f"kind: expected 'uniform', 'normal' or 'exponential', got {kind!r}")


class BufferedStream:
    """Per-step draws of a fixed shape for B runs, drawn a chunk of steps per run at a time.

    ``next()`` returns a fresh (B, *shape) float64 array: each run's next row of its own chunk.
    A run whose chunk is used up draws its next chunk from its own generator (one call per
    chunk instead of per step). The chunk length depends only on ``shape``, never on B, so each
    run's generator sees the same calls, and each run the same numbers, whatever the batch.
    """

    def __init__(
        self, generators: Sequence[np.random.Generator], kind: Kind, shape: tuple[int, ...]
    ):
        check_kind(kind)
        self._generators = tuple(generators)
        self._kind = kind
        self._shape = tuple(int(s) for s in shape)
        self.chunk = chunk_steps(self._shape)
        runs = len(self._generators)
        self._chunks = np.empty((runs, self.chunk, *self._shape))  # run-major
        self._pos = np.full(runs, self.chunk, dtype=np.int64)  # every run draws at its first step
        self._first_row = np.arange(runs, dtype=np.int64) * self.chunk  # run b's chunk, as rows

    def next(self, advance: np.ndarray | None = None) -> np.ndarray:
        """This step's draws (B, *shape). ``advance`` (B,) bool: only these runs consume theirs;
        the others get the values they will consume next (communication-only steps draw
        nothing). Each run's numbers are the same, in the same order, whatever the others do."""
        if self._pos.max() >= self.chunk:  # some runs have used their chunk up: draw theirs
            for b in np.flatnonzero(self._pos >= self.chunk):
                draw_kind(self._generators[b], self._kind, out=self._chunks[b])
                self._pos[b] = 0
        # row pos[b] of run b's chunk, for every b (a gather: a fresh array)
        rows = self._chunks.reshape(-1, *self._shape)
        out = rows.take(self._first_row + self._pos, axis=0)
        self._pos += 1 if advance is None else advance
        return out


class BatchedRNG:
    """One `numpy.random.Generator` per run of a batch (docs/architecture.md, "Seeding").

    Use :meth:`buffered` for per-step draws of a fixed shape (fast path), :meth:`per_run` for
    anything irregular (one call per run), and :meth:`child` for an independent named sub-stream
    (e.g. ``rng.child("tiebreak")`` and ``rng.child("privacy")`` inside one learner).
    """

    def __init__(self, seed_sequences: Sequence[np.random.SeedSequence]):
        if len(seed_sequences) == 0:
            raise ValueError("seed_sequences: expected at least one run")
        self._seqs = tuple(seed_sequences)
        self._generators: tuple[np.random.Generator, ...] | None = None

    @property
    def generators(self) -> tuple[np.random.Generator, ...]:
        """One Generator per run, built on first use (a stream used only through its children
        never builds its own; the numbers are the same either way)."""
        if self._generators is None:
            self._generators = tuple(np.random.Generator(np.random.PCG64(s)) for s in self._seqs)
        return self._generators

    @classmethod
    def for_runs(cls, seeds: Sequence[int], stream: str) -> BatchedRNG:
        """The named stream (one of :data:`STREAMS`) of each run seed."""
        return cls([run_seed_sequence(s, stream) for s in seeds])

    @property
    def num_runs(self) -> int:
        return len(self._seqs)

    def child(self, name: str) -> BatchedRNG:
        return BatchedRNG([named_child(s, name) for s in self._seqs])

    def run(self, b: int) -> BatchedRNG:
        """The single-run stream of run ``b`` (same numbers as inside the batch)."""
        return BatchedRNG([self._seqs[b]])

    def buffered(self, kind: Kind, shape: tuple[int, ...]) -> BufferedStream:
        return BufferedStream(self.generators, kind, shape)

    def per_run(self, draw: Callable[[np.random.Generator], np.ndarray]) -> np.ndarray:
        return np.stack([np.asarray(draw(g)) for g in self.generators])

    def rows(
        self,
        runs: np.ndarray,
        draw: Callable[[np.random.Generator, tuple[int, ...]], np.ndarray],
        shape: tuple[int, ...],
    ) -> np.ndarray:
        """``draw(generator, shape)`` for each run in ``runs`` (run indices), stacked to
        (len(runs), *shape): only those runs' generators are consumed."""
        shape = tuple(int(s) for s in shape)
        out = [np.asarray(draw(self.generators[int(b)], shape)) for b in runs]
        return np.stack(out) if out else np.empty((0, *shape))
