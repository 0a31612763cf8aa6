"""Block streams: many runs' random numbers from a few whole-batch draws (the privacy audits).

An environment built with ``random_streams="block"`` (docs/architecture.md, "Seeding") derives
each named stream of a batch as a :class:`BlockRNG`: deterministic for the batch's seeds, each
run's numbers independent of the others' consumption, but run b is not its seed run alone. The
empirical privacy audits (docs/privacy.md, "Auditing learners") need 10^4-10^5 short runs and
never one run alone; no other code uses these streams.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from typing import Literal

import numpy as np

from fedbandit_env import seeding
from fedbandit_env.errors import ConfigError
from fedbandit_env.seeding import (
    MAX_RUN_SEED,
    STREAMS,
    BatchedRNG,
    Kind,
    check_kind,
    check_seed,
    draw_kind,
    named_child,
)

BLOCK_FLOATS = 1 << 20  # a block stream's chunk: at most 1M doubles (8 MiB) for all runs


RandomStreams = Literal["per_run", "block"]
"""How an environment derives its runs' streams (the vector view's ``random_streams``):
``"per_run"`` (always, but in the empirical privacy audits) one Generator per run and stream,
:meth:`BatchedRNG.for_runs`, so run b of a batch is bit-identical to its seed run alone;
``"block"`` a :class:`BlockRNG` per stream, :meth:`BlockRNG.for_batch`: all runs' numbers come
from a few whole-batch draws, deterministic for the batch's seeds but not the seed run alone.
The audits (docs/privacy.md, "Auditing learners") need 10^4-10^5 short runs and no run alone;
building one Generator per run and stream would cost most of their time."""


def streams_for(kind: RandomStreams, seeds: Sequence[int], stream: str) -> BatchedRNG:
    """The named stream of a batch of run seeds, per run or as a block (:data:`RandomStreams`)."""
    if kind == "per_run":
        return BatchedRNG.for_runs(seeds, stream)
    if kind == "block":
        return BlockRNG.for_batch(seeds, stream)
    raise ConfigError(f"random_streams: expected 'per_run' or 'block', got {kind!r}")


class BlockStream:
    """The :class:`BufferedStream` of a :class:`BlockRNG`: one generator for the whole batch,
    each refill one draw of (chunk, B, *shape). Run b's k-th value is entry b of the k-th row
    whatever the other runs consume (``advance``), so two batches with the same seeds and the
    same per-run consumption see the same numbers (common random numbers)."""

    def __init__(
        self, generator: np.random.Generator, num_runs: int, kind: Kind, shape: tuple[int, ...]
    ):
        check_kind(kind)
        self._generator = generator
        self._kind = kind
        self._shape = tuple(int(s) for s in shape)
        per_step = max(1, int(np.prod(self._shape, dtype=np.int64)))
        self.chunk = int(
            max(1, min(seeding.MAX_CHUNK_STEPS, BLOCK_FLOATS // (per_step * num_runs)))
        )
        self._rows = np.empty((0, num_runs, *self._shape))  # stream rows base, base + 1, ...
        self._base = 0
        self._pos = np.zeros(num_runs, dtype=np.int64)  # each run's next stream row
        self._runs = np.arange(num_runs)

    def next(self, advance: np.ndarray | None = None) -> np.ndarray:
        """As :meth:`BufferedStream.next`."""
        low = int(self._pos.min())
        if low > self._base:  # rows every run has consumed
            self._rows = self._rows[low - self._base :]
            self._base = low
        while int(self._pos.max()) >= self._base + self._rows.shape[0]:
            size = (self.chunk, len(self._runs), *self._shape)
            self._rows = np.concatenate([self._rows, draw_kind(self._generator, self._kind, size)])
        out = self._rows[self._pos - self._base, self._runs]
        self._pos += 1 if advance is None else np.asarray(advance, dtype=bool)
        return out


class BlockRNG(BatchedRNG):
    """B runs whose random numbers are positions in a few large draws (``random_streams="block"``).

    One SeedSequence for the whole batch: :meth:`buffered` streams draw all runs' numbers at
    once (:class:`BlockStream`, one Generator per stream, keyed by creation order),
    :meth:`block` gives a Generator for other whole-batch draws, :meth:`child` a named
    sub-stream. Code that needs one Generator per run (``generators``, :meth:`per_run`) still
    works: those are built on first use from one draw of run seeds, the slow path."""

    def __init__(self, seed_sequence: np.random.SeedSequence, num_runs: int):
        if num_runs < 1:
            raise ValueError("num_runs: expected at least one run")
        self._seq = seed_sequence
        self._num_runs = int(num_runs)
        self._generators = None
        self._made = 0  # streams and blocks handed out so far

    @classmethod
    def for_batch(cls, seeds: Sequence[int], stream: str) -> BlockRNG:
        """The named stream of a batch: one SeedSequence keyed by a digest of all its seeds."""
        if stream not in STREAMS:
            raise ValueError(f"stream: expected one of {STREAMS}, got {stream!r}")
        raw = np.asarray(seeds)
        if raw.dtype.kind not in "iu" or (raw.size and int(raw.min()) < 0):
            raw = np.asarray([check_seed(s, "for_runs") for s in seeds])
        values = raw.astype(np.uint64).reshape(-1)
        if values.size == 0:
            raise ValueError("seeds: expected at least one run")
        digest = int.from_bytes(hashlib.sha256(values.tobytes()).digest(), "little")
        root = np.random.SeedSequence(digest, spawn_key=(STREAMS.index(stream),))
        return cls(root, values.size)

    @property
    def num_runs(self) -> int:
        return self._num_runs

    @property
    def generators(self) -> tuple[np.random.Generator, ...]:
        if self._generators is None:
            draw = np.random.Generator(np.random.PCG64(named_child(self._seq, "runs")))
            seeds = draw.integers(0, MAX_RUN_SEED, size=self._num_runs)
            self._generators = tuple(np.random.Generator(np.random.PCG64(int(s))) for s in seeds)
        return self._generators

    def _next_child(self, kind: str) -> np.random.SeedSequence:
        self._made += 1
        return named_child(self._seq, f"{kind}/{self._made}")

    def block(self) -> np.random.Generator:
        """A fresh Generator for whole-batch draws (keyed by creation order)."""
        return np.random.Generator(np.random.PCG64(self._next_child("block")))

    def child(self, name: str) -> BlockRNG:
        return BlockRNG(named_child(self._seq, name), self._num_runs)

    def run(self, b: int) -> BatchedRNG:
        raise ValueError("BlockRNG.run: a block stream has no single-run view")

    def rows(
        self,
        runs: np.ndarray,
        draw: Callable[[np.random.Generator, tuple[int, ...]], np.ndarray],
        shape: tuple[int, ...],
    ) -> np.ndarray:
        """One whole-batch draw (B, *shape), the rows of ``runs`` kept: the numbers a run gets
        do not depend on which other runs draw."""
        whole = np.asarray(draw(self.block(), (self._num_runs, *(int(s) for s in shape))))
        return whole[np.asarray(runs, dtype=np.int64)]

    def buffered(self, kind: Kind, shape: tuple[int, ...]) -> BlockStream:  # type: ignore[override]
        gen = np.random.Generator(np.random.PCG64(self._next_child("buffered")))
        return BlockStream(gen, self._num_runs, kind, shape)


class BlockMaskedStream:
    """:func:`~fedbandit_env.privacy._random.masked_stream` of a :class:`BlockRNG`: every
    ``next`` is one standard normal draw for all runs, kept for the active ones."""

    def __init__(self, rng: BlockRNG, shape: tuple[int, ...]):
        self._generator = rng.block()
        self._shape = (rng.num_runs, *(int(s) for s in shape))

    def next(self, active: np.ndarray) -> np.ndarray:
        draws = self._generator.standard_normal(self._shape)
        mask = np.asarray(active, dtype=bool).reshape(-1, *([1] * (len(self._shape) - 1)))
        return np.where(mask, draws, 0.0)
