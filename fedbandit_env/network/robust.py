"""Robust reductions of the ``neighbors`` and ``server`` channels (docs/channels.md, "Robust
reductions"): per receiver, over the senders whose message arrived.

* ``median``: coordinate-wise median (an even count: the mean of the two middle values);
* ``trimmed_mean``: coordinate-wise, drop the ``trim`` largest and ``trim`` smallest values and
  average the rest (Zhu, Koppel, Velasquez & Liu, "Byzantine-Resilient Decentralized
  Multi-Armed Bandits", TMLR); with ``count <= 2 trim`` it falls back to the median and flags
  ``degenerate``;
* ``median_of_means``: the arrived senders (ascending id, or a random order drawn per step) in
  consecutive groups of ``group_size``, the last group taking the remainder; the coordinate-wise
  median of the group means (Demirel, Yildirim & Tekin, "Federated Multi-Armed Bandits Under
  Byzantine Attacks", arXiv 2205.04134);
* ``geometric_median``: the point minimising the sum of Euclidean distances to the arrived
  payload vectors, by Weiszfeld's algorithm started at the coordinate-wise median (in Vardi &
  Zhang's modified form, which does not stall when an iterate lands on a data point, and ending
  on the nearest data point where that is clearly better).

Every function takes the candidates ``values`` (..., S, dim) (any content where not arrived),
``arrived`` (..., S) bool with the S slots in ascending sender id, and ``count`` (...) the
number arrived, and returns (..., dim), 0 where nothing arrived. Vectorised over the leading
axes and the slots: the only Python loop is over Weiszfeld iterations.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from fedbandit_env.errors import ConfigError
from fedbandit_env.validation import check_int

ROBUST = ("median", "trimmed_mean", "median_of_means", "geometric_median")
"""The robust reductions, in the order docs/channels.md lists them."""

GROUPINGS = ("consecutive", "random")

WEISZFELD_ITERATIONS = 100
"""At most this many Weiszfeld steps."""
WEISZFELD_TOL = 1e-6
"""Stop once a Weiszfeld step moves the estimate by less than this (Euclidean)."""
WEISZFELD_FLOOR = 1e-8
"""Distances are floored at this; a point closer than this to the estimate coincides with it."""
WEISZFELD_MARGIN = 1e-6
"""Relative margin by which a data point must beat the final estimate
(:func:`nearest_point_if_better`)."""


def check_robust_options(
    name: str, field: str, reduce: Any, trim: Any, group_size: Any, grouping: Any
) -> tuple[int, int, str]:
    """(trim, group_size, grouping) of channel ``name`` whose reduction (option ``field``) is
    ``reduce``: each option only with the reduction it belongs to, defaults 1, 1 and
    ``"consecutive"``."""
    where = f"{field}={reduce!r}"
    if trim is not None and reduce != "trimmed_mean":
        raise ConfigError(
            f"channels.{name}.trim: expected no trim unless {field}='trimmed_mean', got trim "
            f"{trim!r} with {where}"
        )
    for option, value in (("group_size", group_size), ("grouping", grouping)):
        if value is not None and reduce != "median_of_means":
            raise ConfigError(
                f"channels.{name}.{option}: expected no {option} unless "
                f"{field}='median_of_means', got {value!r} with {where}"
            )
    trim = check_int(f"channels.{name}.trim", 1 if trim is None else trim, minimum=0)
    size = 1 if group_size is None else group_size
    size = check_int(f"channels.{name}.group_size", size, minimum=1)
    grouping = "consecutive" if grouping is None else grouping
    if not isinstance(grouping, str) or grouping not in GROUPINGS:
        raise ConfigError(
            f"channels.{name}.grouping: expected one of {list(GROUPINGS)}, got {grouping!r}"
        )
    return trim, size, grouping


def describe_robust(reduce: Any, trim: int, group_size: int, grouping: str) -> dict[str, Any]:
    """The options a robust reduction adds to a channel's ``describe()`` (none for others)."""
    if reduce == "trimmed_mean":
        return {"trim": trim}
    if reduce == "median_of_means":
        return {"group_size": group_size, "grouping": grouping}
    return {}


def robust_reduce(
    reduce: str,
    values: np.ndarray,
    arrived: np.ndarray,
    count: np.ndarray,
    *,
    trim: int = 1,
    group_size: int = 1,
    order: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """(value (..., dim), degenerate (...) bool) of robust reduction ``reduce``; ``order``
    (..., S) uniforms that order the arrived senders of ``median_of_means`` (None: ascending
    id). ``degenerate``: ``trimmed_mean`` with 1 <= count <= 2 trim (the median was used)."""
    degenerate = np.zeros(count.shape, dtype=bool)
    if values.shape[-2] == 0:  # no slots (an agent without neighbours): nothing can arrive
        return np.zeros((*count.shape, values.shape[-1])), degenerate
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


def _sorted(values: np.ndarray, arrived: np.ndarray) -> np.ndarray:
    """Per coordinate, the arrived values in ascending order first, +inf after them."""
    return np.sort(np.where(arrived[..., None], values, np.inf), axis=-2)


def _at(xs: np.ndarray, pos: np.ndarray) -> np.ndarray:
    """``xs[..., pos, :]`` for a position per leading index (clipped into range)."""
    idx = np.clip(pos, 0, xs.shape[-2] - 1)[..., None, None]
    idx = np.broadcast_to(idx, (*pos.shape, 1, xs.shape[-1]))
    return np.take_along_axis(xs, idx, axis=-2)[..., 0, :]


def _median_sorted(xs: np.ndarray, count: np.ndarray) -> np.ndarray:
    """Median of the first ``count`` rows of the sorted ``xs`` (0 where count is 0)."""
    lo = _at(xs, (count - 1) // 2)
    hi = _at(xs, count // 2)
    odd = (count % 2 == 1)[..., None]
    with np.errstate(invalid="ignore", over="ignore"):
        value = np.where(odd, lo, (lo + hi) / 2)
    return np.where((count > 0)[..., None], value, 0.0)


def median(values: np.ndarray, arrived: np.ndarray, count: np.ndarray) -> np.ndarray:
    """Coordinate-wise median of the arrived values (mean of the two middle ones if even)."""
    return _median_sorted(_sorted(values, arrived), count)


def trimmed_mean(
    values: np.ndarray, arrived: np.ndarray, count: np.ndarray, trim: int
) -> tuple[np.ndarray, np.ndarray]:
    """Coordinate-wise mean of the arrived values without the ``trim`` largest and smallest;
    the median (and ``degenerate`` True) where 1 <= count <= 2 trim."""
    xs = _sorted(values, arrived)
    pos = np.arange(xs.shape[-2])
    keep = (pos >= trim) & (pos < (count - trim)[..., None])  # (..., S)
    kept = np.maximum(count - 2 * trim, 1)
    mean = np.where(keep[..., None], xs, 0.0).sum(axis=-2) / kept[..., None]
    degenerate = (count >= 1) & (count <= 2 * trim)
    value = np.where(degenerate[..., None], _median_sorted(xs, count), mean)
    return np.where((count > 0)[..., None], value, 0.0), degenerate


def group_layout(slots: int, group_size: int) -> tuple[np.ndarray, int]:
    """Positions (G_max, J) of the candidate members of each group of ``group_size`` among
    ``slots`` ordered senders (J = min(2 group_size - 1, slots): the last group may hold up to
    2 group_size - 1), and G_max = max(1, slots // group_size)."""
    g_max = max(1, slots // group_size)
    span = min(2 * group_size - 1, slots)
    return np.arange(g_max)[:, None] * group_size + np.arange(span)[None, :], g_max


def group_members(
    pos: np.ndarray, group_size: int, count: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(member (..., G_max, J) bool, groups (...)) for ``count`` ordered senders: G =
    max(1, count // group_size) groups; group k < G - 1 holds positions k g .. k g + g - 1, the
    last one every position from (G - 1) g to count - 1."""
    groups = np.maximum(count // group_size, 1)
    k = np.arange(pos.shape[0])[:, None]
    j = np.arange(pos.shape[1])[None, :]
    last = k == (groups - 1)[..., None, None]
    member = (
        (pos < count[..., None, None]) & (k < groups[..., None, None]) & ((j < group_size) | last)
    )
    return member, groups


def median_of_means(
    values: np.ndarray,
    arrived: np.ndarray,
    count: np.ndarray,
    group_size: int,
    order: np.ndarray | None = None,
) -> np.ndarray:
    """Coordinate-wise median of the group means (groups of ``group_size`` consecutive arrived
    senders in ascending id, or in the order of the uniforms ``order``)."""
    slots, dim = values.shape[-2:]
    rank = np.broadcast_to(np.arange(slots, dtype=np.float64), arrived.shape)
    if order is not None:
        rank = order
    first = np.argsort(np.where(arrived, rank, np.inf), axis=-1, kind="stable")  # arrived first
    ordered = np.take_along_axis(values, first[..., None], axis=-2)
    pos, g_max = group_layout(slots, group_size)
    member, groups = group_members(pos, group_size, count)
    candidates = ordered.take(np.minimum(pos, slots - 1).ravel(), axis=-2)
    candidates = candidates.reshape(*ordered.shape[:-2], *pos.shape, dim)
    sums = np.where(member[..., None], candidates, 0.0).sum(axis=-2)  # (..., G_max, dim)
    means = sums / np.maximum(member.sum(axis=-1), 1)[..., None]
    real = np.arange(g_max) < groups[..., None]
    value = median(means, real, groups)
    return np.where((count > 0)[..., None], value, 0.0)


def geometric_median(values: np.ndarray, arrived: np.ndarray, count: np.ndarray) -> np.ndarray:
    """Weiszfeld's algorithm over the arrived payload vectors, in the modified form of Vardi &
    Zhang ("The multivariate L1-median and associated data depth", PNAS 2000) that does not
    stall on a data point: start at the coordinate-wise median z; the points within
    :data:`WEISZFELD_FLOOR` of z coincide with it (eta of them), each other point x_k weighs
    w_k = 1 / max(|x_k - z|, 1e-8); T = sum_k w_k x_k / sum_k w_k, r = |sum_k w_k (x_k - z)|
    and z <- (1 - g) T + g z with g = min(1, eta / r) (g = 0 without coinciding points: the
    plain Weiszfeld step). At most :data:`WEISZFELD_ITERATIONS` steps, each receiver stopping
    once its step is below :data:`WEISZFELD_TOL`; then the nearest arrived point replaces z
    where it is clearly better (:func:`nearest_point_if_better`)."""
    x = np.where(arrived[..., None], values, 0.0)
    z = median(values, arrived, count)
    active = count > 0
    for _ in range(WEISZFELD_ITERATIONS):
        if not active.any():
            break
        new, step = weiszfeld_step(np, x, arrived, z)
        z = np.where(active[..., None], new, z)
        active = active & (step >= WEISZFELD_TOL)
    z = nearest_point_if_better(np, x, arrived, z)
    return np.where((count > 0)[..., None], z, 0.0)


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
    array module ``xp`` (numpy, or ``jax.numpy`` for the JAX twin)."""
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
