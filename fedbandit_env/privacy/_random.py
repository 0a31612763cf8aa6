"""Random draws shared by the mechanisms: single Generators, batched runs, masked per-run streams.

All draws come from seeded ``numpy.random.Generator`` objects (:mod:`fedbandit_env.seeding`).
Batched draws consume every run's generator by the same calls whatever the batch size, so run b
of a batch is bit-identical to that run simulated alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np

from fedbandit_env.block_streams import BlockMaskedStream, BlockRNG
from fedbandit_env.privacy.errors import PrivacyError
from fedbandit_env.seeding import BatchedRNG, BufferedStream, chunk_steps

RNGLike = np.random.Generator | BatchedRNG
StandardKind = Literal["laplace", "normal"]


def _standard(gen: np.random.Generator, kind: StandardKind, shape: tuple[int, ...]) -> np.ndarray:
    if kind == "laplace":
        return gen.laplace(0.0, 1.0, size=shape)
    return gen.standard_normal(size=shape)


def standard_noise(rng: RNGLike, kind: StandardKind, shape: tuple[int, ...]) -> np.ndarray:
    """Standard Laplace (scale 1) or standard normal draws of ``shape``.

    With a ``BatchedRNG`` the leading axis of ``shape`` is the run axis: it must equal
    ``rng.num_runs`` and each run's generator draws ``shape[1:]``.
    """
    if isinstance(rng, BatchedRNG):
        if len(shape) == 0 or shape[0] != rng.num_runs:
            raise PrivacyError(
                "values", f"a leading run axis of length {rng.num_runs}", f"shape {shape}"
            )
        if isinstance(rng, BlockRNG):  # audits: one whole-batch draw
            return _standard(rng.block(), kind, tuple(shape))
        return rng.per_run(lambda g: _standard(g, kind, tuple(shape[1:])))
    if isinstance(rng, np.random.Generator):
        return _standard(rng, kind, tuple(shape))
    raise PrivacyError("rng", "a numpy.random.Generator or a BatchedRNG", type(rng).__name__)


class LaplaceStream:
    """Per-step standard Laplace draws of a fixed shape for B runs, as ``E1 - E2`` of two
    buffered standard exponentials (one ``BufferedStream`` call per step)."""

    def __init__(self, rng: BatchedRNG, shape: tuple[int, ...]):
        self._stream: BufferedStream = rng.buffered("exponential", (2, *shape))

    def next(self) -> np.ndarray:
        e = self._stream.next()
        return e[:, 0] - e[:, 1]


class MaskedStream:
    """Per-event standard normal draws of a fixed shape where only some runs take part.

    ``next(active)`` draws one ``shape`` block for every active run (a per-run buffer, refilled a
    chunk at a time) and returns zeros for inactive runs. A run's generator is consumed only by its
    own events, so a run alone gives the same numbers as inside any batch.
    """

    def __init__(self, generators: Sequence[np.random.Generator], shape: tuple[int, ...]):
        self._generators = tuple(generators)
        self._shape = tuple(int(s) for s in shape)
        self.chunk = chunk_steps(self._shape)
        self._buffers: list[np.ndarray | None] = [None] * len(self._generators)
        self._pos = np.full(len(self._generators), self.chunk, dtype=np.int64)

    def _refill(self, b: int) -> None:
        self._buffers[b] = self._generators[b].standard_normal((self.chunk, *self._shape))
        self._pos[b] = 0

    def next(self, active: np.ndarray) -> np.ndarray:
        active = np.asarray(active, dtype=bool)
        out = np.zeros((len(self._generators), *self._shape))
        for b in np.flatnonzero(active):
            if self._pos[b] >= self.chunk:
                self._refill(int(b))
            buf = self._buffers[b]
            assert buf is not None
            out[b] = buf[self._pos[b]]
            self._pos[b] += 1
        return out


def masked_stream(rng: BatchedRNG, shape: tuple[int, ...]) -> MaskedStream | BlockMaskedStream:
    """The masked per-event normal stream of ``rng``: per run (:class:`MaskedStream`), or one
    whole-batch draw per event for a :class:`~fedbandit_env.block_streams.BlockRNG`."""
    if isinstance(rng, BlockRNG):
        return BlockMaskedStream(rng, shape)
    return MaskedStream(rng.generators, shape)
