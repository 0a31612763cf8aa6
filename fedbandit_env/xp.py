"""Array namespaces: the one place where a formula learns which engine calls it
(docs/architecture.md, "Shared kernels").

A formula that both engines compute is written once against an array namespace ``xp``, numpy
or ``jax.numpy``, for one run with any leading batch axes (``...``): the numpy engine calls it
on its (B, N, ...) batch, the JAX engine on one run's (N, ...) arrays under ``vmap`` and
``jit``. :func:`namespace` infers ``xp`` from the arguments, so the numpy engine never imports
JAX. The few operations whose spelling differs between the two (a stable sort, a loop with a
data-dependent end) have a helper here; everything else is the common subset of the two APIs.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from types import ModuleType
from typing import Any, TypeVar

import numpy as np

Carry = TypeVar("Carry")


def is_jax(array: Any) -> bool:
    """Whether ``array`` is a JAX array or tracer (read from its type, without importing
    JAX)."""
    return type(array).__module__.split(".", 1)[0] in ("jax", "jaxlib")


def namespace(*arrays: Any) -> ModuleType:
    """``jax.numpy`` if any of ``arrays`` is a JAX array or tracer, else ``numpy``."""
    if any(is_jax(a) for a in arrays):
        import jax.numpy as jnp

        return jnp
    return np


def is_number(value: Any) -> bool:
    """Whether ``value`` is a Python or numpy scalar number (not an array or a tracer)."""
    return isinstance(value, int | float | np.number)


def is_inf(value: Any) -> bool:
    """Whether a parameter is infinite (``epsilon = inf``: no privacy). A parameter that the
    JAX rollout traces is never infinite (docs/jax.md, "Compiling once"), so a tracer is
    not."""
    return is_number(value) and math.isinf(value)


def is_zero(value: Any) -> bool:
    """Whether a parameter is 0 (a scale of 0: no noise). A parameter that the JAX rollout
    traces is never 0, so a tracer is not."""
    return is_number(value) and value == 0


def log_of(xp: ModuleType, value: Any) -> Any:
    """``ln value``: ``math.log`` of a Python or numpy number (float64, as the numpy engine
    computes it), ``xp.log`` of an array or a traced parameter."""
    return math.log(value) if is_number(value) else xp.log(value)


def sqrt_of(xp: ModuleType, value: Any) -> Any:
    """``sqrt(value)``: ``math.sqrt`` of a Python or numpy number, ``xp.sqrt`` of an array or a
    traced parameter."""
    return math.sqrt(value) if is_number(value) else xp.sqrt(value)


def argsort_stable(xp: ModuleType, a: Any, axis: int = -1) -> Any:
    """A stable arg-sort along ``axis`` (equal keys keep their order) in ``xp``."""
    if xp is np:
        return np.argsort(a, axis=axis, kind="stable")
    return xp.argsort(a, axis=axis, stable=True)


def put_along(xp: ModuleType, a: Any, indices: Any, values: Any, axis: int) -> Any:
    """``a`` with ``values`` written at ``indices`` along ``axis`` (``take_along_axis``'s
    inverse): numpy writes in place and returns ``a``; JAX returns a new array."""
    if xp is np:
        np.put_along_axis(a, indices, values, axis=axis)
        return a
    return xp.put_along_axis(a, indices, values, axis=axis, inplace=False)


RUNS_AXIS = "runs"
"""The name of the JAX rollout's ``vmap`` axis over runs (docs/jax.md, "Rare work")."""


def any_run(pred: Any) -> Any:
    """JAX: () bool, ``pred`` holds anywhere in some run of the batch (a ``psum`` over
    :data:`RUNS_AXIS`, the same for every run, so a ``lax.cond`` on it stays a branch under the
    rollout's ``vmap``); outside that ``vmap`` (no axis of that name), in this run."""
    import jax
    import jax.numpy as jnp

    here = jnp.any(jnp.asarray(pred, bool))
    try:
        return jax.lax.psum(here.astype(jnp.int32), RUNS_AXIS) > 0
    except NameError:  # no axis of that name: one run, or a vmap of the caller's own
        return here


def bounded_while(
    xp: ModuleType,
    cond: Callable[[Carry], Any],
    body: Callable[[Carry], Carry],
    init: Carry,
    max_trips: int,
) -> Carry:
    """``while cond(carry): carry = body(carry)``, at most ``max_trips`` times: a Python loop
    in numpy. In JAX, loops whose trip counts are known when the program compiles (a ``while``
    whose end is data reads its predicate on the host each iteration on a GPU; docs/jax.md,
    "Rollout"): ``ceil(max_trips / G)`` groups of ``G = ceil(sqrt(max_trips))`` iterations,
    each group and each iteration behind a ``lax.cond`` on "does the predicate hold in some run
    of the batch" (:func:`any_run`), a run whose predicate is false
    kept as it is. The same iterations as ``lax.while_loop`` under the rollout's ``vmap``, and
    once every run is done at most ``max_trips / G + G`` predicate reads. ``cond`` returns a
    scalar boolean per run; ``body`` keeps the carry's shapes and dtypes."""
    if xp is np:
        carry, trips = init, 0
        while trips < max_trips and bool(cond(carry)):
            carry, trips = body(carry), trips + 1
        return carry
    import jax

    group = math.isqrt(max(max_trips - 1, 0)) + 1
    groups = -(-max_trips // group)

    def live(c: Carry, trip: Any) -> Any:
        return cond(c) & (trip < max_trips)

    def once(trip: Any, c: Carry) -> Carry:
        go = live(c, trip)
        new = body(c)
        return jax.tree_util.tree_map(lambda a, b: xp.where(go, a, b), new, c)

    def inner(g: Any, i: Any, c: Carry) -> Carry:
        trip = g * group + i
        return jax.lax.cond(any_run(live(c, trip)), lambda c: once(trip, c), lambda c: c, c)

    def outer(g: Any, c: Carry) -> Carry:
        run = lambda c: jax.lax.fori_loop(0, group, lambda i, c: inner(g, i, c), c)  # noqa: E731
        return jax.lax.cond(any_run(live(c, g * group)), run, lambda c: c, c)

    return jax.lax.fori_loop(0, groups, outer, init)


def fori_loop(
    xp: ModuleType, steps: int, body: Callable[[int, Carry], Carry], init: Carry
) -> Carry:
    """``for i in range(steps): carry = body(i, carry)`` with a fixed trip count: a Python loop
    in numpy, ``lax.fori_loop`` in JAX."""
    if xp is np:
        carry = init
        for i in range(steps):
            carry = body(i, carry)
        return carry
    import jax

    return jax.lax.fori_loop(0, steps, body, init)


def log_of_round(xp: ModuleType, t: Any) -> Any:
    """ln max(t, 1) of a round ``t``: ``math.log`` of numpy's round (one Python number for the
    whole batch, as the numpy learners computed it), ``xp.log`` in the float dtype of a JAX
    scalar or an array of rounds."""
    if xp is np and np.ndim(t) == 0:
        return math.log(max(t, 1))
    return xp.log(xp.maximum(t, 1) * 1.0)


def rounding_tolerance(dtype: Any) -> float:
    """The relative size under which a difference in ``dtype`` is rounding, not a real one:
    1e-12 in float64, 1e-5 in float32 (1e-12 is below float32's resolution). One definition
    for the tie tolerance of :func:`fedbandit_env.ties.argmax_near_ties` and the spectrum
    floor's rounding deficit of the FedUCB safeguards."""
    return 1e-12 if np.dtype(dtype).itemsize >= 8 else 1e-5
