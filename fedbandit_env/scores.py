"""NaN indices: the bench counts, per run, the steps in which a learner's index was NaN
(docs/bench.md, "Flags").

A learner picks the arm of largest index (a UCB, a sampled score, a fused estimate). When an
index is NaN (the square root or logarithm of a count estimate that an attack drove negative,
say) the arg-max is an arbitrary arm and the row's regret no longer measures the algorithm. The
shared arg-max helpers (:mod:`fedbandit_env.kernels` and their JAX versions) pass every index
they rank to :func:`note_scores`, and so do the learners that rank with a plain ``argmax``.
Outside a watch (the default) :func:`note_scores` does nothing.

* numpy: :func:`evaluate <fedbandit_env.bench.evaluate.evaluate>` runs the learner inside
  :func:`watching` a :class:`ScoreWatch` of its B runs and calls :meth:`ScoreWatch.close_step`
  after every ``act``; an index's leading axis is the run axis (the team-policy layout, arrays
  of shape (B, ...)).
* JAX: the rollout traces the learner's ``act`` inside :func:`watching` a
  :class:`TracedScores`, which collects one traced flag per index of the step (``act`` is traced
  for one run), and carries their OR into the run's count: no host round trip.

Only NaN is counted: ``+inf`` is the helpers' value of an arm not yet pulled and ``-inf`` of an
arm masked out, both deliberate; a NaN is never meant.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

import numpy as np

_WATCH: ContextVar[Any] = ContextVar("fedbandit_score_watch", default=None)


@dataclass
class ScoreWatch:
    """The NaN count of B numpy runs: ``nan_steps`` (B,) the steps in which some index of the
    run was NaN; ``seen`` whether the learner ranked any index through :func:`note_scores`
    (a learner that never does reports nothing, not zero)."""

    num_runs: int
    nan_steps: np.ndarray = field(init=False)
    seen: bool = False

    def __post_init__(self) -> None:
        self.nan_steps = np.zeros(self.num_runs, dtype=np.int64)
        self._step = np.zeros(self.num_runs, dtype=bool)

    def note(self, index: np.ndarray) -> None:
        """Mark the runs whose rows of ``index`` hold a NaN in this step (every run when the
        leading axis is not the run axis)."""
        self.seen = True
        nan = np.isnan(index)
        if index.ndim >= 1 and index.shape[0] == self.num_runs:
            self._step |= nan.reshape(self.num_runs, -1).any(axis=1)
        elif nan.any():
            self._step[:] = True

    def close_step(self) -> None:
        """End of one ``act``: count the runs marked in it."""
        self.nan_steps += self._step
        self._step[:] = False


@dataclass
class TracedScores:
    """The flags of one traced JAX ``act``: one boolean scalar per index it ranked."""

    flags: list[Any] = field(default_factory=list)

    def note(self, index: Any) -> None:
        import jax.numpy as jnp

        self.flags.append(jnp.isnan(index).any())

    def any_nan(self) -> Any:
        """The OR of the step's flags (a traced bool; False when nothing was ranked)."""
        import jax.numpy as jnp

        out = jnp.zeros((), bool)
        for flag in self.flags:
            out = out | flag
        return out


@contextlib.contextmanager
def watching(watch: ScoreWatch | TracedScores) -> Iterator[ScoreWatch | TracedScores]:
    """Route :func:`note_scores` to ``watch`` inside the block."""
    token = _WATCH.set(watch)
    try:
        yield watch
    finally:
        _WATCH.reset(token)


def note_scores(index: Any) -> None:
    """Report an index about to be ranked (an arg-max over its last axis) to the active watch;
    nothing outside one. Called by the shared arg-max helpers."""
    watch = _WATCH.get()
    if watch is not None:
        watch.note(index)
