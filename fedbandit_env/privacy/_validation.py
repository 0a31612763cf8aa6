"""Validation of the shapes, horizons, bounds and run counts shared by the batched mechanisms."""

from __future__ import annotations

import math

import numpy as np

from fedbandit_env.privacy.calibration import check_index
from fedbandit_env.privacy.errors import PrivacyError
from fedbandit_env.seeding import BatchedRNG
from fedbandit_env.validation import MAX_HORIZON, is_integral


def check_shape(shape: tuple[int, ...]) -> tuple[int, ...]:
    if not (isinstance(shape, tuple | list) and all(is_integral(s) and s >= 1 for s in shape)):
        raise PrivacyError("shape", "a tuple of positive ints", shape)
    return tuple(int(s) for s in shape)


def check_horizon(horizon: int) -> int:
    if not is_integral(horizon) or not 1 <= horizon <= MAX_HORIZON:
        raise PrivacyError("horizon", f"an int in [1, {MAX_HORIZON}] (docs/limits.md)", horizon)
    return int(horizon)


def check_bounds(bounds: tuple[float, float] | None) -> tuple[float, float] | None:
    if bounds is None:
        return None
    try:
        lo, hi = (float(v) for v in bounds)
    except (TypeError, ValueError) as exc:
        raise PrivacyError("bounds", "a pair (lo, hi) with lo < hi", bounds) from exc
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        raise PrivacyError("bounds", "a pair (lo, hi) of finite numbers with lo < hi", bounds)
    return lo, hi


def resolve_runs(rng: BatchedRNG | None, num_runs: int | None, noisy: bool) -> int:
    if rng is not None and not isinstance(rng, BatchedRNG):
        raise PrivacyError("rng", "a BatchedRNG (or None when epsilon is inf)", rng)
    if noisy and rng is None:
        raise PrivacyError("rng", "a BatchedRNG when epsilon is finite", None)
    if rng is not None:
        if num_runs is not None and num_runs != rng.num_runs:
            raise PrivacyError("num_runs", f"rng.num_runs = {rng.num_runs}", num_runs)
        return rng.num_runs
    return 1 if num_runs is None else check_index(num_runs, "num_runs")


def check_values(
    values: np.ndarray, shape: tuple | None = None, name: str = "values"
) -> np.ndarray:
    """``values`` as a float64 array with finite entries, of exactly ``shape`` unless None."""
    arr = np.asarray(values, dtype=np.float64)
    if shape is not None and arr.shape != shape:
        raise PrivacyError(name, f"an array of shape {shape}", f"shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise PrivacyError(name, "finite numbers", "an array with NaN or inf")
    return arr


def check_mask(mask: np.ndarray | None, shape: tuple[int, ...], name: str = "mask") -> np.ndarray:
    """A bool mask of ``shape`` (all True when ``mask`` is None)."""
    if mask is None:
        return np.ones(shape, dtype=bool)
    arr = np.asarray(mask)
    if arr.shape != shape or arr.dtype != np.bool_:
        raise PrivacyError(name, f"a bool array of shape {shape}", f"{arr.dtype} {arr.shape}")
    return arr
