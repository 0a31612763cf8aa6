"""ByzRes-UCB's fusion and index (Zhu, Koppel, Velasquez & Liu, "Byzantine-Resilient
Decentralized Multi-Armed Bandits", TMLR; the authors' ``dist_TMLR.m``), one source for both
engines (docs/architecture.md, "Shared kernels"; docs/byzres.md for the steps).

Written for one run with any leading batch axes against the array namespace of the arguments
(:mod:`fedbandit_env.xp`): :mod:`agents.byzres_ucb` calls these on (B, N, ...) float64 arrays,
:mod:`agents.jax.byzres_ucb` on one run's (N, ...) float32 arrays.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from fedbandit_env.xp import log_of_round, namespace


def width_factor(kept: Any, kappa: float) -> Any:
    """Step 3's width factor ``g = (4 eta^2 + kappa eta + kappa) / 4`` with
    ``eta = 1 / (kept + 1)`` (``dist_TMLR.m``), ``kept = |A| - 2f`` values fused with the own
    one."""
    eta = 1.0 / (kept + 1.0)
    return (4.0 * eta * eta + kappa * eta + kappa) / 4.0


def fuse(
    xbar: Any,
    n: Any,
    nb_mean: Any,
    nb_count: Any,
    heard: Any,
    kappa: float,
    f: int,
    filtered: bool = True,
) -> tuple[Any, Any, Any]:
    """Steps 1-3 for every agent and arm: ``xbar``, ``n`` (..., M) the receiver's own means and
    counts; ``nb_mean``, ``nb_count`` (..., D, M) what neighbour slot d sent; ``heard``
    (..., D) its message arrived.

    Step 1: ``A = {h : kappa nhat_h >= n_i}`` (``filtered=False``, the ``"mean"`` ablation:
    every heard neighbour; call it with f = 0). Step 2: ``|A| <= 2f`` gives UCB1 (``z = xbar``,
    ``g = 1``). Step 3: the accepted values sorted along the neighbour axis (filtered slots at
    +inf), sorted positions f .. |A| - f - 1 kept: ``z = (xbar + kept sum) / (|A| - 2f + 1)``.
    Returns z, g and ``|A|`` (..., M)."""
    xp = namespace(xbar, nb_mean)
    accepted = xp.broadcast_to(heard[..., None], nb_mean.shape)
    if filtered:
        accepted = accepted & (kappa * nb_count >= n[..., None, :])
    size = accepted.sum(axis=-2)  # |A| per (agent, arm)
    values = xp.sort(xp.where(accepted, nb_mean, xp.inf), axis=-2)  # accepted first, ascending
    pos = np.arange(values.shape[-2])[:, None]
    keep = (pos >= f) & (pos < (size - f)[..., None, :])  # drop the f smallest and f largest
    kept_sum = xp.where(keep, values, 0.0).sum(axis=-2)
    robust = size > 2 * f
    kept = xp.maximum(size - 2 * f, 0)
    z = xp.where(robust, (xbar + kept_sum) / (kept + 1.0), xbar)
    g = xp.where(robust, width_factor(kept, kappa), 1.0)
    return z, g, size


def index(z: Any, g: Any, n: Any, t: Any) -> Any:
    """Step 4: ``Q = z + sqrt(2 g ln t / n)`` (``dist_TMLR.m``), t the round (ln 1 = 0), n read
    as at least 1."""
    xp = namespace(z, n)
    return z + xp.sqrt(2.0 * g * log_of_round(xp, t) / xp.maximum(n, 1))


def payload(s: Any, n: Any) -> Any:
    """What every agent sends: ``[xbar (M), n (M)]`` (..., 2M), xbar = s / n and 0 on unpulled
    arms."""
    xp = namespace(s, n)
    return xp.concatenate([s / xp.maximum(n, 1.0), n * 1.0], axis=-1)
