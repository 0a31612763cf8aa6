"""Robust reductions in JAX (docs/channels.md, "Robust reductions"): the twins of
:mod:`fedbandit_env.network.robust` for one run, jittable, with no Python branch on traced
values.

``median``, ``trimmed_mean`` (Zhu, Koppel, Velasquez & Liu, "Byzantine-Resilient Decentralized
Multi-Armed Bandits", TMLR), ``median_of_means`` (Demirel, Yildirim & Tekin, "Federated
Multi-Armed Bandits Under Byzantine Attacks", arXiv 2205.04134) and ``geometric_median``
(Weiszfeld's algorithm in Vardi & Zhang's modified form, a ``lax.while_loop`` with the numpy
twin's stopping rule: at most
:data:`~fedbandit_env.network.robust.WEISZFELD_ITERATIONS` steps, each receiver stopping once
its step is below :data:`~fedbandit_env.network.robust.WEISZFELD_TOL`). Inputs: ``values``
(..., S, dim), ``arrived`` (..., S) with the slots in ascending sender id, ``count`` (...);
outputs (..., dim), 0 where nothing arrived.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from fedbandit_env.network.robust import (
    WEISZFELD_ITERATIONS,
    WEISZFELD_TOL,
    group_layout,
    nearest_point_if_better,
    weiszfeld_step,
)


def robust_reduce(
    reduce: str,
    values: jnp.ndarray,
    arrived: jnp.ndarray,
    count: jnp.ndarray,
    *,
    trim: int = 1,
    group_size: int = 1,
    order: jnp.ndarray | None = None,
) -> tuple[jnp.ndarray, jnp.ndarray]:
    """(value (..., dim), degenerate (...) bool) of robust reduction ``reduce`` (a static
    choice); ``order`` (..., S) uniforms ordering the senders of ``median_of_means``."""
    degenerate = jnp.zeros(count.shape, bool)
    if values.shape[-2] == 0:  # no slots: nothing can arrive
        return jnp.zeros((*count.shape, values.shape[-1]), values.dtype), degenerate
    if reduce == "median":
        return median(values, arrived, count), degenerate
    if reduce == "trimmed_mean":
        return trimmed_mean(values, arrived, count, trim)
    if reduce == "median_of_means":
        return median_of_means(values, arrived, count, group_size, order), degenerate
    if reduce == "geometric_median":
        return geometric_median(values, arrived, count), degenerate
    raise ValueError(f"reduce: unknown robust reduction {reduce!r}")  # pragma: no cover


def _sorted(values, arrived):
    return jnp.sort(jnp.where(arrived[..., None], values, jnp.inf), axis=-2)


def _at(xs, pos):
    idx = jnp.clip(pos, 0, xs.shape[-2] - 1)[..., None, None]
    idx = jnp.broadcast_to(idx, (*pos.shape, 1, xs.shape[-1]))
    return jnp.take_along_axis(xs, idx, axis=-2)[..., 0, :]


def _median_sorted(xs, count):
    lo = _at(xs, (count - 1) // 2)
    hi = _at(xs, count // 2)
    value = jnp.where((count % 2 == 1)[..., None], lo, (lo + hi) / 2)
    return jnp.where((count > 0)[..., None], value, 0.0)


def median(values, arrived, count):
    """Coordinate-wise median of the arrived values (mean of the two middle ones if even)."""
    return _median_sorted(_sorted(values, arrived), count)


def trimmed_mean(values, arrived, count, trim: int):
    """Coordinate-wise mean without the ``trim`` largest and smallest; the median (and
    ``degenerate``) where 1 <= count <= 2 trim."""
    xs = _sorted(values, arrived)
    pos = jnp.arange(xs.shape[-2])
    keep = (pos >= trim) & (pos < (count - trim)[..., None])
    kept = jnp.maximum(count - 2 * trim, 1).astype(xs.dtype)
    mean = jnp.where(keep[..., None], xs, 0.0).sum(axis=-2) / kept[..., None]
    degenerate = (count >= 1) & (count <= 2 * trim)
    value = jnp.where(degenerate[..., None], _median_sorted(xs, count), mean)
    return jnp.where((count > 0)[..., None], value, 0.0), degenerate


def median_of_means(values, arrived, count, group_size: int, order=None):
    """Coordinate-wise median of the means of consecutive groups of ``group_size`` arrived
    senders (ascending id, or the order of the uniforms ``order``), the last group taking the
    remainder."""
    slots, dim = values.shape[-2:]
    rank = jnp.broadcast_to(jnp.arange(slots, dtype=jnp.float32), arrived.shape)
    if order is not None:
        rank = order.astype(jnp.float32)
    first = jnp.argsort(jnp.where(arrived, rank, jnp.inf), axis=-1, stable=True)
    ordered = jnp.take_along_axis(values, first[..., None], axis=-2)
    pos, g_max = group_layout(slots, group_size)
    groups = jnp.maximum(count // group_size, 1)
    k = np.arange(pos.shape[0])[:, None]
    j = np.arange(pos.shape[1])[None, :]
    last = k == (groups - 1)[..., None, None]
    member = (pos < count[..., None, None]) & (k < groups[..., None, None])
    member = member & ((j < group_size) | last)
    candidates = jnp.take(ordered, np.minimum(pos, slots - 1).ravel(), axis=-2)
    candidates = candidates.reshape(*ordered.shape[:-2], *pos.shape, dim)
    sums = jnp.where(member[..., None], candidates, 0.0).sum(axis=-2)
    sizes = jnp.maximum(member.sum(axis=-1), 1).astype(values.dtype)
    means = sums / sizes[..., None]
    real = jnp.arange(g_max) < groups[..., None]
    value = median(means, real, groups)
    return jnp.where((count > 0)[..., None], value, 0.0)


def geometric_median(values, arrived, count):
    """Weiszfeld's algorithm in Vardi & Zhang's modified form from the coordinate-wise median
    (:func:`fedbandit_env.network.robust.geometric_median`; the same step,
    :func:`~fedbandit_env.network.robust.weiszfeld_step`, and the same final
    :func:`~fedbandit_env.network.robust.nearest_point_if_better`, in ``jax.numpy``)."""
    x = jnp.where(arrived[..., None], values, 0.0)
    z0 = median(values, arrived, count)

    def cond(carry):
        i, _, active = carry
        return (i < WEISZFELD_ITERATIONS) & active.any()

    def body(carry):
        i, z, active = carry
        new, step = weiszfeld_step(jnp, x, arrived, z)
        z = jnp.where(active[..., None], new, z)
        return i + 1, z, active & (step >= WEISZFELD_TOL)

    _, z, _ = jax.lax.while_loop(cond, body, (jnp.zeros((), jnp.int32), z0, count > 0))
    z = nearest_point_if_better(jnp, x, arrived, z)
    return jnp.where((count > 0)[..., None], z, 0.0)
