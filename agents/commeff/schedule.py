"""The shared elimination schedule of CDP/DDP/HDP-MAB (Algorithms 1, 3 and 5; docs/commeff.md).

Pure functions of public quantities (epoch ``r``, active-set size, K, T, N_eff, the per-message
privacy level), vectorised over arrays of epochs. All logs are natural logs.

* resolution target ``tilde_r``: ``2^-r`` (doubling, Alg. 1/3/5) or ``delta^(r/R)`` (budget R, Sec. IV-B);
* cumulative per-arm sample target ``S(r)`` and its integerisation ``S_int``;
* elimination width ``C(r) = c(r) + h(r)`` (Hoeffding part + Laplace part).

With ``eps_msg`` the DP level of one message, the paper's formulas are the case
``eps_msg = N_eff * epsilon``: ``h = r sqrt(8 L_K) / (sqrt(N_eff) eps_msg S)`` and the privacy term
of ``S`` is ``8 r sqrt(2 L_K) / (sqrt(N_eff) eps_msg tilde)``. ``eps_msg = inf`` means no noise.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np


def s_int_cap(int_dtype: object) -> int:
    """The cap of the integer epoch length S_int in ``int_dtype``: 2^53 in int64 (an epoch
    longer than any horizon; every integer below it is exact in float64), 2^30 in int32 (the
    JAX engine: an epoch of that length never completes within an int32 clock)."""
    return 2**53 if np.dtype(int_dtype).itemsize >= 8 else 2**30


S_INT_CAP = s_int_cap(np.int64)
"""The numpy engine's cap (:func:`s_int_cap` of int64)."""


def resolution(r: np.ndarray, rounds: int | None, delta) -> np.ndarray:
    """``tilde_r = 2^-r`` (doubling) or ``delta^(r/R)`` (round budget R, Sec. IV-B); ``delta`` is a
    number or an array broadcasting with ``r``."""
    r = np.asarray(r, dtype=np.float64)
    if rounds is None:
        return 2.0**-r
    return np.asarray(delta, dtype=np.float64) ** (r / rounds)


def _logs(r, num_active, num_arms: int, horizon: int) -> tuple[np.ndarray, np.ndarray]:
    r = np.asarray(r, dtype=np.float64)
    l_i = np.log(8.0 * np.asarray(num_active, dtype=np.float64) * r**2 * horizon)
    l_k = np.log(8.0 * num_arms * r**2 * horizon)
    return l_i, l_k


def sample_target(
    r, num_active, tilde, *, num_arms: int, horizon: int, n_eff: int, eps_msg: float
) -> np.ndarray:
    """Real-valued ``S(r) = max{8 L_I / (N tilde^2), 8 r sqrt(2 L_K) / (sqrt(N) eps_msg tilde)}``."""
    l_i, l_k = _logs(r, num_active, num_arms, horizon)
    hoeffding = 8.0 * l_i / (n_eff * tilde**2)
    if math.isinf(eps_msg):
        return hoeffding
    privacy = 8.0 * np.asarray(r) * np.sqrt(2.0 * l_k) / (math.sqrt(n_eff) * eps_msg * tilde)
    return np.maximum(hoeffding, privacy)


def integer_target(s_real: np.ndarray, s_prev: np.ndarray) -> np.ndarray:
    """``S_int(r) = max(ceil(S(r)), S_int(r-1) + 1)`` so every epoch has ``n_r >= 1``.

    Capped at 2^53 (an epoch longer than any horizon) so the integer cast cannot overflow."""
    s_cap = np.minimum(np.ceil(s_real), S_INT_CAP).astype(np.int64)
    return np.maximum(s_cap, np.asarray(s_prev, dtype=np.int64) + 1)


def widths(
    r, num_active, s_int, *, num_arms: int, horizon: int, n_eff: int, eps_msg: float
) -> tuple[np.ndarray, np.ndarray]:
    """``(c(r), h(r))``: ``c = sqrt(L_I / (2 N S))`` and ``h = r sqrt(8 L_K)/(sqrt(N) eps_msg S)``."""
    l_i, l_k = _logs(r, num_active, num_arms, horizon)
    s = np.asarray(s_int, dtype=np.float64)
    c = np.sqrt(l_i / (2.0 * n_eff * s))
    if math.isinf(eps_msg):
        return c, np.zeros_like(c)
    h = np.asarray(r) * np.sqrt(8.0 * l_k) / (math.sqrt(n_eff) * eps_msg * s)
    return c, h


def max_rounds(min_gap: float) -> int:
    """Thm. 1: the doubling schedule needs at most ``ceil(log2(1/Delta) + 1)`` rounds."""
    return math.ceil(math.log2(1.0 / min_gap) + 1.0)


class ScheduleTables(NamedTuple):
    """The schedule of Algorithms 1, 3 and 5 for epochs r = 1..rows and |A_r| = 1..K (row r - 1,
    column |A_r| - 1), computed in float64 by the functions above, for an engine whose
    integer targets are capped at ``cap`` (the JAX engine: :func:`s_int_cap` of int32):
    ``s_ceil`` min(ceil S(r), cap) int32, ``c_num`` L_I / (2 N_eff) float32 (c(r) =
    sqrt(c_num / S_int)) and ``h_num`` (rows,) r sqrt(8 L_K) / (sqrt(N_eff) eps_msg) float32
    (h(r) = h_num / S_int; 0 without noise)."""

    s_ceil: np.ndarray
    c_num: np.ndarray
    h_num: np.ndarray


def epochs_that_can_start(rounds: int | None, delta: float | None, *, num_arms: int,
                          horizon: int, n_eff: int, eps_msg: float) -> int:  # fmt: skip
    """The last epoch that can start within the horizon: the first r whose epoch cannot end
    (S_int(r) >= max(ceil S(r) at |A_r| = 1, r) > T pulls of one agent: S grows with |A_r|),
    or R with a round budget (epoch R + 1 is the commit of Sec. IV-B)."""
    kw = dict(num_arms=num_arms, horizon=horizon, n_eff=n_eff, eps_msg=eps_msg)
    r = 1
    while rounds is None or r < rounds:
        tilde = resolution(r, rounds, delta)
        lower = max(math.ceil(float(sample_target(r, 1, tilde, **kw))), r)
        if lower > horizon:
            break
        r += 1
    return r


def schedule_tables(rounds: int | None, delta: float | None, cap: int, *, num_arms: int,
                    horizon: int, n_eff: int, eps_msg: float) -> ScheduleTables:  # fmt: skip
    """S(r) (the sample target), L_I / (2 N) and the Laplace width's numerator for every epoch
    that can start (:func:`epochs_that_can_start`) and every active-set size, as the numpy
    learner's ``_start_epoch`` computes them (:func:`sample_target`, :func:`integer_target`,
    :func:`widths`)."""
    kw = dict(num_arms=num_arms, horizon=horizon, n_eff=n_eff, eps_msg=eps_msg)
    rows = epochs_that_can_start(rounds, delta, **kw)
    r = np.arange(1, rows + 1, dtype=np.int64)[:, None]
    na = np.arange(1, num_arms + 1, dtype=np.int64)[None, :]
    tilde = resolution(r, rounds, delta)
    s_real = sample_target(r, na, tilde, **kw)
    s_ceil = np.minimum(integer_target(s_real, np.zeros_like(r)), cap)
    # c(r) = sqrt(L_I / (2 N S)) and h(r) = r sqrt(8 L_K) / (sqrt(N) eps_msg S) at S = 1
    c1, h1 = widths(r, na, np.ones_like(na), **kw)
    return ScheduleTables(
        s_ceil.astype(np.int32), (c1**2).astype(np.float32), h1[:, 0].astype(np.float32)
    )
