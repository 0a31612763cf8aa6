"""Seeding: every random number comes from a `numpy.random.Generator` derived from one seed.

See docs/architecture.md, "Seeding". One integer seed per run is expanded with
`numpy.random.SeedSequence` into separate streams — ``instance`` (random instances drawn per run),
``rewards`` (reward noise, decision sets), ``network`` (gossip edges, participation, message drops),
``agents`` (everything a learner draws: tie-breaks, privacy noise) and ``adversary`` (the roles
and the attacks' draws, docs/adversary.md). Changing a learner's epsilon
therefore never changes the reward draws, and paired-seed comparisons across learners are exact on
the environment side.

Batched code draws for B runs at once through :class:`BatchedRNG`, which holds one Generator per
run. Run b of a batch is bit-identical to the same run seed simulated alone (B = 1): every
per-run generator is consumed by exactly the same sequence of calls whatever B is. Per-step draws
of a fixed shape go through :class:`BufferedStream`, which refills a chunk of steps per run at a
time (one Generator call per run per chunk instead of per step).

The empirical privacy audits alone build their environments with ``random_streams="block"``
(:data:`RandomStreams`), where a batch's streams are :class:`BlockRNG` objects: all runs'
numbers come from whole-batch draws (deterministic for the batch's seeds, each run's numbers
independent of the others' consumption, but not the seed run alone), which spares building one
Generator per run.
"""

from __future__ import annotations

import hashlib
import numbers
import warnings
import zlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

import numpy as np

from fedbandit_env.errors import ConfigError

STREAMS: tuple[str, ...] = ("instance", "rewards", "network", "agents", "adversary")
"""The named streams of a run seed. A stream's SeedSequence is child ``STREAMS.index(name)`` of
the run seed's, so appending a stream moves none of the others (``adversary``: the roles and the
attacks' draws, docs/adversary.md)."""

Kind = Literal["uniform", "normal", "exponential"]

_CHUNK_FLOATS = 1 << 14  # per run and buffer: at most 16k doubles (128 KiB)
_MAX_CHUNK_STEPS = 1024
_BLOCK_FLOATS = 1 << 20  # a block stream's chunk: at most 1M doubles (8 MiB) for all runs


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


def check_reset_options(
    options: Any, accepted: Sequence[str] = (), owner: str = "reset", strict: bool = True
) -> dict:
    """``reset(options=...)``: None or a mapping whose keys are all in ``accepted``; unknown
    keys raise a :class:`~fedbandit_env.errors.ConfigError` (a ``ValueError``) listing the
    accepted ones, or with ``strict=False`` warn (``UserWarning``) and are ignored: PettingZoo's
    own API checkers call ``reset(seed=0, options={"options": 1})`` to check the signature, so
    the PettingZoo views cannot refuse unknown keys. A non-mapping always raises."""
    if options is None:
        return {}
    if not isinstance(options, Mapping):
        raise TypeError(f"{owner}: options: expected None or a dict, got {options!r}")
    unknown = sorted(str(k) for k in options if k not in accepted)
    if unknown:
        ok = sorted(accepted) if accepted else "none (this environment takes no reset options)"
        message = f"{owner}: options: unknown key(s) {unknown}; accepted: {ok}"
        if strict:
            raise ConfigError(message)
        warnings.warn(f"{message}; ignored", UserWarning, stacklevel=3)
        return {k: v for k, v in options.items() if k in accepted}
    return dict(options)


class SeedContinuation:
    """Run seeds of successive resets, following Gymnasium's convention.

    ``next(seed)`` with a seed returns it (validated) and re-seeds the continuation stream, a
    ``numpy.random.Generator`` on the named child ``"continuation"`` of ``SeedSequence(seed)``;
    ``next(None)`` draws the next run seed from that stream, so unseeded resets continue the
    stream of the last seeded reset (sub-environments seeded 0, 1, 2, ... never replay each
    other's episodes). With no seed ever given the stream starts from fresh OS entropy, as
    Gymnasium's ``np_random`` does. ``batch(seed, B)`` is the same for B runs: a seeded call
    gives ``seed, ..., seed + B - 1`` (or the given list); an unseeded one draws B run seeds.
    """

    def __init__(self) -> None:
        self._stream: np.random.Generator | None = None
        self._entropy: int | list[int] | None = None  # of the last seeded reset, if any

    def _reseed(self, entropy: int | list[int] | None) -> None:
        # the stream is built on the first unseeded draw (most callers always seed)
        self._entropy = list(entropy) if isinstance(entropy, list) else entropy
        self._stream = None

    def _draw(self, count: int) -> list[int]:
        if self._stream is None:
            root = np.random.SeedSequence(self._entropy)
            self._stream = np.random.Generator(np.random.PCG64(named_child(root, "continuation")))
        return [int(s) for s in self._stream.integers(0, MAX_RUN_SEED, size=count)]

    def next(self, seed: Any = None, owner: str = "reset") -> int:
        if seed is None:
            return self._draw(1)[0]
        run_seed = check_seed(seed, owner)
        self._reseed(run_seed)
        return run_seed

    def batch(self, seed: Any, num_runs: int, owner: str = "reset") -> list[int]:
        if seed is None:
            return self._draw(num_runs)
        seeds = run_seeds(seed, num_runs, owner)
        self._reseed(seeds if len(seeds) > 1 else seeds[0])
        return seeds


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


def run_seeds(seed: int | Sequence[int], num_runs: int, owner: str = "reset") -> list[int]:
    """Run seeds of a batch: ``seed, seed+1, ...`` for an int, or the given list."""
    if isinstance(seed, numbers.Integral):
        base = check_seed(seed, owner)
        return [base + b for b in range(num_runs)]
    if isinstance(seed, list) and all(type(s) is int and s >= 0 for s in seed):
        if len(seed) != num_runs:
            raise ConfigError(f"{owner}: seed: expected {num_runs} run seeds, got {len(seed)}")
        return list(seed)  # plain non-negative ints: already valid run seeds
    if isinstance(seed, str | bytes) or not isinstance(seed, Sequence | np.ndarray):
        raise TypeError(
            f"{owner}: seed: expected None, a non-negative int or a list of {num_runs}, "
            f"got {seed!r}"
        )
    seeds = [check_seed(s, owner) for s in seed]
    if len(seeds) != num_runs:
        raise ConfigError(f"{owner}: seed: expected {num_runs} run seeds, got {len(seeds)}")
    return seeds


def _draw(gen: np.random.Generator, kind: Kind, size: Any = None, out: Any = None) -> np.ndarray:
    """``size`` (or ``out``-shaped) draws of ``kind`` from ``gen`` (the same numbers either way)."""
    if kind == "uniform":
        return gen.random(size, out=out)
    if kind == "normal":
        return gen.standard_normal(size, out=out)
    return gen.standard_exponential(size, out=out)


def _check_kind(kind: str) -> None:
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
        _check_kind(kind)
        self._generators = tuple(generators)
        self._kind = kind
        self._shape = tuple(int(s) for s in shape)
        per_step = max(1, int(np.prod(self._shape, dtype=np.int64)))
        self.chunk = int(max(1, min(_MAX_CHUNK_STEPS, _CHUNK_FLOATS // per_step)))
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
                _draw(self._generators[b], self._kind, out=self._chunks[b])
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


# -- block streams: many runs from a few large draws (privacy audits) ---------------------------
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
        _check_kind(kind)
        self._generator = generator
        self._kind = kind
        self._shape = tuple(int(s) for s in shape)
        per_step = max(1, int(np.prod(self._shape, dtype=np.int64)))
        self.chunk = int(max(1, min(_MAX_CHUNK_STEPS, _BLOCK_FLOATS // (per_step * num_runs))))
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
            self._rows = np.concatenate([self._rows, _draw(self._generator, self._kind, size)])
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
