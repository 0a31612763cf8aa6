"""Laplace and Gaussian output-perturbation mechanisms (immutable, validated configs whose
``privatize`` works on an array of any shape) and symmetric Gaussian matrix noise (Dubey &
Pentland, Algorithm 2, line 6); docs/privacy.md, "Guarantees and calibration".
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fedbandit_env.privacy._random import RNGLike, standard_noise
from fedbandit_env.privacy._validation import check_values
from fedbandit_env.privacy.calibration import (
    GaussianCalibration,
    check_delta,
    check_epsilon,
    check_positive,
    check_sensitivity,
    gaussian_sigma,
    gaussian_zcdp_rho,
    laplace_scale,
)
from fedbandit_env.privacy.errors import PrivacyError
from fedbandit_env.seeding import BatchedRNG
from fedbandit_env.validation import is_integral
from fedbandit_env.xp import namespace


@dataclass(frozen=True)
class LaplaceMechanism:
    """Pure epsilon-DP: release ``values + Lap(b)`` i.i.d. per entry, ``b = sensitivity/epsilon``.

    ``sensitivity`` is the L1 sensitivity of the whole released array to one neighbouring change.
    ``epsilon = inf`` releases the values unchanged.
    """

    epsilon: float
    sensitivity: float = 1.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon))
        object.__setattr__(self, "sensitivity", check_sensitivity(self.sensitivity))
        laplace_scale(self.sensitivity, self.epsilon)  # refuses a non-finite or zero scale

    @property
    def scale(self) -> float:
        """Laplace scale ``b``."""
        return laplace_scale(self.sensitivity, self.epsilon)

    @property
    def variance(self) -> float:
        """Per-entry noise variance ``2 b^2``."""
        return 2.0 * self.scale**2

    @property
    def delta(self) -> float:
        return 0.0

    def noise(self, shape: tuple[int, ...], rng: RNGLike) -> np.ndarray:
        """Noise of ``shape`` (zeros, and no draws, when epsilon is inf)."""
        if self.scale == 0.0:
            return np.zeros(shape)
        return self.scale * standard_noise(rng, "laplace", tuple(shape))

    def privatize(self, values: np.ndarray, rng: RNGLike) -> np.ndarray:
        arr = check_values(values)
        return arr + self.noise(arr.shape, rng)


@dataclass(frozen=True)
class GaussianMechanism:
    """(epsilon, delta)-DP: release ``values + N(0, sigma^2)`` i.i.d. per entry.

    ``sensitivity`` is the L2 sensitivity of the whole released array. ``calibration`` chooses
    the sigma formula (:func:`~fedbandit_env.privacy.calibration.gaussian_sigma`): "analytic"
    (Balle & Wang 2018, exact for any epsilon; default) or "classic" (epsilon < 1 only).
    The release is also ``rho``-zCDP with ``rho = sensitivity^2 / (2 sigma^2)``.
    """

    epsilon: float
    delta: float
    sensitivity: float = 1.0
    calibration: GaussianCalibration = "analytic"
    sigma: float = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon))
        object.__setattr__(self, "delta", check_delta(self.delta))
        object.__setattr__(self, "sensitivity", check_sensitivity(self.sensitivity))
        sigma = gaussian_sigma(self.sensitivity, self.epsilon, self.delta, self.calibration)
        object.__setattr__(self, "sigma", sigma)

    @property
    def variance(self) -> float:
        return self.sigma**2

    @property
    def rho(self) -> float:
        """zCDP parameter of one release, ``sensitivity^2 / (2 sigma^2)`` (inf when epsilon is
        inf: no noise, no guarantee)."""
        return math.inf if self.sigma == 0.0 else gaussian_zcdp_rho(self.sigma, self.sensitivity)

    def noise(self, shape: tuple[int, ...], rng: RNGLike) -> np.ndarray:
        if self.sigma == 0.0:
            return np.zeros(shape)
        return self.sigma * standard_noise(rng, "normal", tuple(shape))

    def privatize(self, values: np.ndarray, rng: RNGLike) -> np.ndarray:
        arr = check_values(values)
        return arr + self.noise(arr.shape, rng)


def upper_triangle_size(d: int) -> int:
    """Number of entries of a d x d upper triangle including the diagonal."""
    return d * (d + 1) // 2


def symmetric_from_upper(upper: Any, d: int, sigma: Any, diagonal_scale: float = 1.0) -> Any:
    """Symmetric (..., d, d) matrices from standard-normal draws of shape (..., d(d+1)/2): the
    upper triangle (row-major, diagonal included) is ``sigma * upper``, the diagonal is further
    multiplied by ``diagonal_scale``, and the lower triangle mirrors the upper one. Both
    engines: numpy in float64, JAX in the draws' dtype (one gather of each entry's draw)."""
    xp = namespace(upper)
    if xp is np:
        upper = np.asarray(upper, dtype=np.float64)
    if upper.shape[-1] != upper_triangle_size(d):
        raise PrivacyError(
            "upper", f"a last axis of length {upper_triangle_size(d)}", f"shape {upper.shape}"
        )
    rows, cols = np.triu_indices(d)
    entry = np.zeros((d, d), dtype=np.int32)  # each entry's position in the upper triangle
    entry[rows, cols] = entry[cols, rows] = np.arange(rows.size)
    scale = np.where(np.eye(d, dtype=bool), diagonal_scale, 1.0)
    return (sigma * upper)[..., entry] * xp.asarray(scale, dtype=upper.dtype)


def symmetric_gaussian_noise(
    d: int,
    sigma: float,
    size: tuple[int, ...],
    rng: RNGLike,
    *,
    diagonal_scale: float = 1.0,
) -> np.ndarray:
    """Symmetric Gaussian matrices of shape (*size, d, d) (:func:`symmetric_from_upper` of
    standard normal draws; docs/privacy.md): ``diagonal_scale = sqrt(2)`` gives the law of
    ``(N + N^T)/sqrt(2)`` (Dubey & Pentland, Algorithm 2, line 6) from ``d(d+1)/2`` draws instead
    of ``d^2``. With a ``BatchedRNG``, ``size[0]`` is the run axis."""
    if not is_integral(d) or d < 1:
        raise PrivacyError("d", "a positive int", d)
    sigma = check_positive(sigma, "sigma", allow_zero=True)
    diagonal_scale = check_positive(diagonal_scale, "diagonal_scale", allow_zero=True)
    size = tuple(int(s) for s in size)
    if isinstance(rng, BatchedRNG) and (len(size) == 0 or size[0] != rng.num_runs):
        raise PrivacyError("size", f"a leading run axis of length {rng.num_runs}", size)
    upper = standard_noise(rng, "normal", (*size, upper_triangle_size(int(d))))
    return symmetric_from_upper(upper, int(d), sigma, diagonal_scale)
