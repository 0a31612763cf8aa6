"""Tie-breaking arg-max rules: one function per rule, one source for both engines
(docs/architecture.md, "Shared kernels").

Every rule takes an index (..., M) and uniforms, picks an arm per row (the last axis), reports
the index to :func:`fedbandit_env.scores.note_scores` (the bench's NaN count, docs/bench.md
"Flags") and runs on numpy or ``jax.numpy`` arrays alike (:mod:`fedbandit_env.xp`):

* :func:`argmax_one_uniform`: one uniform per row; among the k arms of exactly maximal index,
  the floor(u k)-th in arm order (the rule of the reference agents and numpy baselines);
* :func:`argmax_uniform_ties`: one uniform per arm; among the exact maxima, the arm of the
  largest uniform (the JAX baselines' rule);
* :func:`argmax_near_ties`: one uniform per arm; among the arms within a relative
  :func:`~fedbandit_env.xp.rounding_tolerance` of the maximum (1e-12 in float64, 1e-5 in
  float32), the arm of the largest uniform (DisLinUCB, whose first decision on unit-norm
  features is a tie up to rounding);
* :func:`argmax_first_near_ties`: no uniform; among the arms within that tolerance, the first
  (the "first maximum wins" of Li & Wang's and He et al.'s code, made deterministic under
  rounding: Async-LinUCB, FedLinUCB).

A row whose maximum is NaN keeps numpy's arg-max (the first NaN) under
:func:`argmax_one_uniform`; the NaN count flags it either way.
"""

from __future__ import annotations

import numpy as np

from fedbandit_env.scores import note_scores
from fedbandit_env.shapes import Batched, BatchedArms
from fedbandit_env.xp import namespace, rounding_tolerance


def argmax_one_uniform(index: BatchedArms, u: Batched) -> Batched:
    """Arg-max over the last axis; among the k arms of exactly maximal index, the
    floor(u k)-th in arm order, ``u`` one uniform per row (the shape of ``index`` without its
    last axis): uniformly at random. numpy returns the plain arg-max when no row has a tie (the
    common case, one pass fewer); the rule is the same."""
    xp = namespace(index, u)
    note_scores(index)
    arms = xp.argmax(index, axis=-1)
    best = xp.take_along_axis(index, arms[..., None], axis=-1)
    tied = index >= best
    # no row with a tie: one tied arm per row, and none missing from a NaN row
    if xp is np and np.count_nonzero(tied) == arms.size and not np.isnan(best).any():
        return arms
    k = tied.sum(axis=-1)
    r = xp.minimum((u * k).astype(k.dtype), k - 1)
    chosen = xp.argmax(tied & (xp.cumsum(tied, axis=-1) - 1 == r[..., None]), axis=-1)
    return xp.where(k > 0, chosen, arms)


def argmax_uniform_ties(index: BatchedArms, u: BatchedArms) -> Batched:
    """Arg-max over the last axis; ties between exactly equal maxima broken by the largest of
    the uniforms ``u`` (the shape of ``index``, one per arm): uniformly at random."""
    xp = namespace(index, u)
    if xp is not np:  # the same arm and NaN flag in one pass over the arms
        return _uniform_ties_one_pass(index, u)
    note_scores(index)
    best = index.max(axis=-1, keepdims=True)
    return xp.argmax(xp.where(index >= best, u, -1.0), axis=-1)


def _uniform_ties_one_pass(index: BatchedArms, u: BatchedArms) -> Batched:
    """:func:`argmax_uniform_ties` in JAX as one reduction over the last axis (XLA then reads
    the index once, where the max and the arg-max read it twice): the largest (index, uniform,
    -arm) in lexicographic order, a NaN entry ranked above all as (inf, 2). A row holding a NaN
    thus ends on a uniform of 2 and picks arm 0, as numpy's two passes do (its maximum is NaN,
    no arm compares >= it, the arg-max of all -1 is the first); :func:`note_scores` gets one
    NaN per such row in place of the index (the same flag, without a second read of it)."""
    import jax
    import jax.numpy as jnp

    nan = jnp.isnan(index)
    value = jnp.where(nan, jnp.inf, index)
    draw = jnp.where(nan, 2.0, u).astype(index.dtype)
    arm = jax.lax.broadcasted_iota(jnp.int32, index.shape, index.ndim - 1)

    def better(a: tuple, b: tuple) -> tuple:
        (va, ua, ia), (vb, ub, ib) = a, b
        take = (vb > va) | ((vb == va) & ((ub > ua) | ((ub == ua) & (ib < ia))))
        return jnp.where(take, vb, va), jnp.where(take, ub, ua), jnp.where(take, ib, ia)

    # the identity: every arm beats it (a uniform, or 2 for a NaN, is above -1)
    init = (jnp.array(-jnp.inf, index.dtype), jnp.array(-1.0, index.dtype),
            jnp.array(index.shape[-1], jnp.int32))  # fmt: skip
    _, top, best = jax.lax.reduce((value, draw, arm), init, better, (index.ndim - 1,))
    any_nan = top >= 2.0
    note_scores(jnp.where(any_nan, jnp.nan, 0.0))  # NaN in the rows holding one: the same flag
    return jnp.where(any_nan, 0, best)


def argmax_near_ties(index: BatchedArms, u: BatchedArms) -> Batched:
    """Arg-max over the last axis; among the arms within a relative
    :func:`~fedbandit_env.xp.rounding_tolerance` of the best value (``index >= top - tol max(1, |top|)``), the arm of the largest of the
    uniforms ``u`` (the shape of ``index``)."""
    xp = namespace(index, u)
    note_scores(index)
    top = index.max(axis=-1, keepdims=True)
    tie = index >= top - rounding_tolerance(index.dtype) * xp.maximum(1.0, xp.abs(top))
    return xp.argmax(xp.where(tie, u, -1.0), axis=-1)


def argmax_first_near_ties(index: BatchedArms) -> Batched:
    """Arg-max over the last axis; among the arms within a relative
    :func:`~fedbandit_env.xp.rounding_tolerance` of the best value, the first (lowest id)."""
    xp = namespace(index)
    note_scores(index)
    top = index.max(axis=-1, keepdims=True)
    tie = index >= top - rounding_tolerance(index.dtype) * xp.maximum(1.0, xp.abs(top))
    return xp.argmax(tie, axis=-1)
