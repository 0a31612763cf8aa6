"""What the views accept at reset: run seeds and options, by Gymnasium's conventions.

The PettingZoo, vector and RL views (docs/architecture.md, "Seeding") take ``reset(seed=...,
options=...)``: an int, a list of run seeds or None (an unseeded reset continues the stream of
the last seeded one, :class:`SeedContinuation`), and a mapping of accepted options.
"""

from __future__ import annotations

import numbers
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from fedbandit_env.errors import ConfigError
from fedbandit_env.seeding import MAX_RUN_SEED, check_seed, named_child


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
