"""Batch-level predicates for rare work (docs/jax.md, "Rare work").

The rollout ``vmap``s one run's program over the runs of a batch under the axis name
:data:`RUNS_AXIS`. Inside it, a ``lax.cond`` on a per-run predicate computes both branches for
every run; :func:`any_run` turns the predicate into "does any run of the batch need it", the
same for every run, so the ``cond`` stays a branch and the rare work (a learner's
refactorization at a sync, a release) runs only in the steps where some run needs it. The work
inside the branch still masks per run. Outside the rollout's ``vmap`` (a learner's ``act``
called alone, or under a ``vmap`` without the axis name) it is the run's own predicate, so the
results are the same either way.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import jax

from fedbandit_env.xp import RUNS_AXIS, any_run

__all__ = ["RUNS_AXIS", "any_run", "traced_path", "when_any"]

_TRACE_AS: list[bool] = []  # set by traced_path while a benchmark traces one path


def when_any(pred: jax.Array, work, state):
    """``work(state)`` where some run of the batch has ``pred`` (:func:`any_run`), ``state``
    unchanged otherwise; ``work`` must leave the runs without ``pred`` as they are."""
    if _TRACE_AS:  # a benchmark tracing one path (traced_path): no branch
        return work(state) if _TRACE_AS[-1] else state
    return jax.lax.cond(any_run(pred), work, lambda s: s, state)


@contextlib.contextmanager
def traced_path(rare: bool) -> Iterator[None]:
    """While tracing inside it, :func:`when_any` takes one path without a branch: the rare work
    (``rare`` True, as in a step where some run needs it) or none. XLA's static cost of a
    ``cond`` counts every branch; ``benchmarks/bench_jax_anchor.py`` traces the two paths
    apart to count a step's bytes with and without the rare work. Never for results."""
    _TRACE_AS.append(bool(rare))
    try:
        yield
    finally:
        _TRACE_AS.pop()
