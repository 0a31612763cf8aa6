"""Robust reductions of the ``neighbors`` and ``server`` channels, per receiver over the senders
whose message arrived (definitions: docs/channels.md, "Robust reductions"): ``median``,
``trimmed_mean`` (Zhu, Koppel, Velasquez & Liu, TMLR), ``median_of_means`` (Demirel, Yildirim &
Tekin, arXiv 2205.04134) and ``geometric_median`` (Weiszfeld, in Vardi & Zhang's modified form).

Every function takes ``values`` (..., S, dim), ``arrived`` (..., S) bool (slots in ascending
sender id) and ``count`` (...), and returns (..., dim), 0 where nothing arrived. A shared kernel
of both engines (docs/architecture.md, "Shared kernels").
"""

from __future__ import annotations

from typing import Any

import numpy as np

from fedbandit_env.shapes import Batched, BatchedSlotPayload, BatchedSlots
from fedbandit_env.xp import argsort_stable, bounded_while, namespace

ROBUST = ("median", "trimmed_mean", "median_of_means", "geometric_median")
"""The robust reductions, in the order docs/channels.md lists them."""

WEISZFELD_ITERATIONS = 100  # at most this many Weiszfeld steps
WEISZFELD_TOL = 1e-6  # stop once a step moves the estimate by less than this (Euclidean)
WEISZFELD_FLOOR = 1e-8  # distances are floored at this; a point this close coincides
WEISZFELD_MARGIN = 1e-6  # relative margin a data point must beat the estimate by, at the end


def robust_reduce(
    reduce: str,
    values: BatchedSlotPayload,
    arrived: BatchedSlots,
    count: Batched,
    *,
    trim: int = 1,
    group_size: int = 1,
    order: BatchedSlots | None = None,
) -> tuple[Any, Batched]:
    """(value (..., dim), degenerate (...) bool) of robust reduction ``reduce`` (a static
    choice); ``order`` (..., S) uniforms that order the arrived senders of ``median_of_means``
    (None: ascending id). ``degenerate``: ``trimmed_mean`` with 1 <= count <= 2 trim (the
    median was used)."""
    xp = namespace(values, count)
    degenerate = xp.zeros(count.shape, dtype=bool)
    if values.shape[-2] == 0:  # no slots (an agent without neighbours): nothing can arrive
        return xp.zeros((*count.shape, values.shape[-1]), dtype=values.dtype), degenerate
    if reduce == "median":
        value = median(values, arrived, count)
    elif reduce == "trimmed_mean":
        value, degenerate = trimmed_mean(values, arrived, count, trim)
    elif reduce == "median_of_means":
        value = median_of_means(values, arrived, count, group_size, order)
    elif reduce == "geometric_median":
        value = geometric_median(values, arrived, count)
    else:  # pragma: no cover - the channels validate ``reduce``
        raise ValueError(f"reduce: expected one of {list(ROBUST)}, got {reduce!r}")
    return value, degenerate


def _sorted(values: Any, arrived: Any) -> Any:
    """Per coordinate, the arrived values in ascending order first, +inf after them."""
    xp = namespace(values, arrived)
    return xp.sort(xp.where(arrived[..., None], values, xp.inf), axis=-2)


def _at(xs: Any, pos: Any) -> Any:
    """``xs[..., pos, :]`` for a position per leading index (clipped into range)."""
    xp = namespace(xs, pos)
    idx = xp.clip(pos, 0, xs.shape[-2] - 1)[..., None, None]
    idx = xp.broadcast_to(idx, (*pos.shape, 1, xs.shape[-1]))
    return xp.take_along_axis(xs, idx, axis=-2)[..., 0, :]


def _median_sorted(xs: Any, count: Any) -> Any:
    """Median of the first ``count`` rows of the sorted ``xs`` (0 where count is 0)."""
    xp = namespace(xs, count)
    lo = _at(xs, (count - 1) // 2)
    hi = _at(xs, count // 2)
    odd = (count % 2 == 1)[..., None]
    with np.errstate(invalid="ignore", over="ignore"):  # inf - inf where fewer arrived
        value = xp.where(odd, lo, (lo + hi) / 2)
    return xp.where((count > 0)[..., None], value, 0.0)


def median(values: BatchedSlotPayload, arrived: BatchedSlots, count: Batched) -> Any:
    """Coordinate-wise median of the arrived values (mean of the two middle ones if even)."""
    return _median_sorted(_sorted(values, arrived), count)


def trimmed_mean(
    values: BatchedSlotPayload, arrived: BatchedSlots, count: Batched, trim: int
) -> tuple[Any, Batched]:
    """Coordinate-wise mean of the arrived values without the ``trim`` largest and smallest;
    the median (and ``degenerate`` True) where 1 <= count <= 2 trim."""
    xp = namespace(values, count)
    xs = _sorted(values, arrived)
    pos = np.arange(xs.shape[-2])
    keep = (pos >= trim) & (pos < (count - trim)[..., None])  # (..., S)
    kept = xp.maximum(count - 2 * trim, 1).astype(xs.dtype)
    mean = xp.where(keep[..., None], xs, 0.0).sum(axis=-2) / kept[..., None]
    degenerate = (count >= 1) & (count <= 2 * trim)
    value = xp.where(degenerate[..., None], _median_sorted(xs, count), mean)
    return xp.where((count > 0)[..., None], value, 0.0), degenerate


def group_layout(slots: int, group_size: int) -> tuple[np.ndarray, int]:
    """Positions (G_max, J) of the candidate members of each group of ``group_size`` among
    ``slots`` ordered senders (J = min(2 group_size - 1, slots): the last group may hold up to
    2 group_size - 1), and G_max = max(1, slots // group_size). Static: numpy for both
    engines."""
    g_max = max(1, slots // group_size)
    span = min(2 * group_size - 1, slots)
    return np.arange(g_max)[:, None] * group_size + np.arange(span)[None, :], g_max


def group_members(pos: np.ndarray, group_size: int, count: Any) -> tuple[Any, Any]:
    """(member (..., G_max, J) bool, groups (...)) for ``count`` ordered senders: G =
    max(1, count // group_size) groups; group k < G - 1 holds positions k g .. k g + g - 1, the
    last one every position from (G - 1) g to count - 1."""
    xp = namespace(count)
    groups = xp.maximum(count // group_size, 1)
    k = np.arange(pos.shape[0])[:, None]
    j = np.arange(pos.shape[1])[None, :]
    last = k == (groups - 1)[..., None, None]
    member = (
        (pos < count[..., None, None]) & (k < groups[..., None, None]) & ((j < group_size) | last)
    )
    return member, groups


def median_of_means(
    values: Any, arrived: Any, count: Any, group_size: int, order: Any = None
) -> Any:
    """Coordinate-wise median of the group means (groups of ``group_size`` consecutive arrived
    senders in ascending id, or in the order of the uniforms ``order``)."""
    xp = namespace(values, count)
    slots, dim = values.shape[-2:]
    rank = xp.broadcast_to(xp.arange(slots, dtype=values.dtype), arrived.shape)
    if order is not None:
        rank = order.astype(values.dtype)
    first = argsort_stable(xp, xp.where(arrived, rank, xp.inf))  # arrived first
    ordered = xp.take_along_axis(values, first[..., None], axis=-2)
    pos, g_max = group_layout(slots, group_size)
    member, groups = group_members(pos, group_size, count)
    candidates = xp.take(ordered, np.minimum(pos, slots - 1).ravel(), axis=-2)
    candidates = candidates.reshape(*ordered.shape[:-2], *pos.shape, dim)
    sums = xp.where(member[..., None], candidates, 0.0).sum(axis=-2)  # (..., G_max, dim)
    means = sums / xp.maximum(member.sum(axis=-1), 1).astype(values.dtype)[..., None]
    real = np.arange(g_max) < groups[..., None]
    value = median(means, real, groups)
    return xp.where((count > 0)[..., None], value, 0.0)


def geometric_median(values: Any, arrived: Any, count: Any) -> Any:
    """Weiszfeld's algorithm over the arrived payload vectors, in the modified form of Vardi &
    Zhang ("The multivariate L1-median and associated data depth", PNAS 2000), started at the
    coordinate-wise median; the step is :func:`weiszfeld_step` (its formula: docs/channels.md,
    "Geometric median, in detail"), then :func:`nearest_point_if_better`."""
    xp = namespace(values, count)
    x = xp.where(arrived[..., None], values, 0.0)

    def unfinished(carry: tuple[Any, Any, Any]) -> Any:
        i, _, active = carry
        return (i < WEISZFELD_ITERATIONS) & active.any()

    def step(carry: tuple[Any, Any, Any]) -> tuple[Any, Any, Any]:
        i, z, active = carry
        new, moved = weiszfeld_step(xp, x, arrived, z)
        z = xp.where(active[..., None], new, z)
        return i + 1, z, active & (moved >= WEISZFELD_TOL)

    start = (xp.zeros((), dtype=xp.int32), median(values, arrived, count), count > 0)
    _, z, _ = bounded_while(xp, unfinished, step, start, WEISZFELD_ITERATIONS)
    z = nearest_point_if_better(xp, x, arrived, z)
    return xp.where((count > 0)[..., None], z, 0.0)


def nearest_point_if_better(xp: Any, x: Any, arrived: Any, z: Any) -> Any:
    """The arrived point nearest to ``z`` where its sum of distances is below z's by more than
    a relative :data:`WEISZFELD_MARGIN`, else z. Weiszfeld approaches an optimum that is a data
    point only sublinearly, and 100 steps can end short of it; the margin keeps z in an exact
    tie (two points: every point between them is optimal) whatever the rounding."""
    dist = xp.sqrt(xp.square(x - z[..., None, :]).sum(axis=-1))  # (..., S)
    nearest = xp.argmin(xp.where(arrived, dist, xp.inf), axis=-1)
    point = xp.take_along_axis(x, nearest[..., None, None], axis=-2)[..., 0, :]
    to_point = xp.sqrt(xp.square(x - point[..., None, :]).sum(axis=-1))
    at_point = xp.where(arrived, to_point, 0.0).sum(axis=-1)
    at_z = xp.where(arrived, dist, 0.0).sum(axis=-1)
    better = at_point < (1.0 - WEISZFELD_MARGIN) * at_z
    return xp.where(better[..., None], point, z)


def weiszfeld_step(xp: Any, x: Any, arrived: Any, z: Any) -> tuple[Any, Any]:
    """(next estimate (..., dim), its step length (...)) of :func:`geometric_median`, in the
    array namespace ``xp`` (numpy or ``jax.numpy``)."""
    diff = x - z[..., None, :]
    dist = xp.sqrt(xp.square(diff).sum(axis=-1))  # (..., S)
    near = arrived & (dist < WEISZFELD_FLOOR)
    w = xp.where(arrived & ~near, 1.0 / xp.maximum(dist, WEISZFELD_FLOOR), 0.0)
    total = w.sum(axis=-1)
    far = total > 0
    mean = (w[..., None] * x).sum(axis=-2) / xp.where(far, total, 1.0)[..., None]
    mean = xp.where(far[..., None], mean, z)
    r = xp.sqrt(xp.square((w[..., None] * diff).sum(axis=-2)).sum(axis=-1))
    eta = near.sum(axis=-1).astype(r.dtype)
    g = xp.where(eta > 0, xp.minimum(1.0, eta / xp.where(r > 0, r, 1.0)), 0.0)
    g = xp.where((eta > 0) & (r == 0), 1.0, g)
    new = (1.0 - g)[..., None] * mean + g[..., None] * z
    return new, xp.sqrt(xp.square(new - z).sum(axis=-1))
