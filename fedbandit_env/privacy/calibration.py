"""Noise calibration and parameter validators (docs/privacy.md, "Guarantees and calibration"):
Laplace (Dwork et al. 2006), classic Gaussian (Dwork & Roth 2014, Thm A.1; epsilon < 1 only) and
analytic Gaussian (Balle & Wang 2018, Thm 8; bisection on ``log sigma``, no scipy)."""

from __future__ import annotations

import math
from typing import Literal

from fedbandit_env.privacy.errors import PrivacyError
from fedbandit_env.validation import is_integral, is_real

GaussianCalibration = Literal["analytic", "classic"]

_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)


def check_epsilon(epsilon: float, *, allow_inf: bool = True, name: str = "epsilon") -> float:
    """``epsilon`` as a float; it must be > 0 (``inf`` allowed when ``allow_inf``: no noise)."""
    expected = "a positive number (or inf)" if allow_inf else "a positive finite number"
    if not is_real(epsilon):
        raise PrivacyError(name, expected, epsilon)
    value = float(epsilon)
    if math.isnan(value) or value <= 0 or (math.isinf(value) and not allow_inf):
        raise PrivacyError(name, expected, epsilon)
    return value


def check_delta(delta: float, *, allow_zero: bool = False, name: str = "delta") -> float:
    """``delta`` as a float in the open interval (0, 1) (or [0, 1) when ``allow_zero``)."""
    expected = "a number in [0, 1)" if allow_zero else "a number in the open interval (0, 1)"
    if not is_real(delta):
        raise PrivacyError(name, expected, delta)
    value = float(delta)
    low_ok = value >= 0 if allow_zero else value > 0
    if math.isnan(value) or not low_ok or value >= 1:
        raise PrivacyError(name, expected, delta)
    return value


def check_sensitivity(sensitivity: float, *, name: str = "sensitivity") -> float:
    """``sensitivity`` as a float; it must be positive and finite."""
    return check_positive(sensitivity, name)


def check_positive(value: float, name: str, *, allow_zero: bool = False) -> float:
    """A finite positive (or non-negative) float parameter such as a noise scale."""
    expected = "a non-negative finite number" if allow_zero else "a positive finite number"
    if not is_real(value):
        raise PrivacyError(name, expected, value)
    out = float(value)
    if not math.isfinite(out) or out < 0 or (out == 0 and not allow_zero):
        raise PrivacyError(name, expected, value)
    return out


def check_index(value: int, name: str, minimum: int = 1) -> int:
    """An int parameter ``>= minimum`` (a round, a count, a dimension)."""
    if not is_integral(value) or value < minimum:
        raise PrivacyError(name, f"an int >= {minimum}", value)
    return int(value)


def check_noise_scale(
    scale: float, epsilon: float, *, name: str = "epsilon", what: str = "noise scale"
) -> float:
    """``scale`` if it is a finite positive float, else a :class:`PrivacyError` naming
    ``name`` (docs/limits.md): an epsilon so small that the noise overflows to inf, or so large
    (for the sensitivity) that it underflows to 0, is refused instead of releasing a non-finite
    value or no noise at all."""
    # 1e4 x scale bounds every float64 Laplace or Gaussian draw times scale (|draw| < 40)
    if not (math.isfinite(scale * 1e4) and scale > 0.0):
        raise PrivacyError(
            name, f"a value whose {what} is a finite positive float (it is {scale!r})", epsilon
        )
    return scale


def laplace_scale(sensitivity: float, epsilon: float) -> float:
    """Laplace scale ``b = sensitivity / epsilon`` for pure epsilon-DP (0 when epsilon is inf)."""
    sensitivity = check_sensitivity(sensitivity)
    epsilon = check_epsilon(epsilon)
    if math.isinf(epsilon):
        return 0.0
    return check_noise_scale(sensitivity / epsilon, epsilon, what="Laplace scale")


def classic_gaussian_sigma(sensitivity: float, epsilon: float, delta: float) -> float:
    """``sigma = sensitivity * sqrt(2 ln(1.25/delta)) / epsilon``; valid only for epsilon < 1."""
    sensitivity = check_sensitivity(sensitivity)
    epsilon = check_epsilon(epsilon, allow_inf=False)
    delta = check_delta(delta)
    if epsilon >= 1:
        raise PrivacyError(
            "epsilon", "a number in (0, 1) for the classic Gaussian calibration", epsilon
        )
    sigma = sensitivity * math.sqrt(2.0 * math.log(1.25 / delta)) / epsilon
    return check_noise_scale(sigma, epsilon, what="Gaussian sigma")


def log_normal_cdf(x: float) -> float:
    """``log Phi(x)`` of the standard normal, accurate far into the lower tail."""
    if x > -20.0:
        return math.log(0.5 * math.erfc(-x / math.sqrt(2.0)))
    # asymptotic (Mills ratio) series: Phi(x) = phi(x)/|x| * (1 - 1/x^2 + 3/x^4 - 15/x^6 + ...)
    x2 = x * x
    series = 1.0 - 1.0 / x2 + 3.0 / x2**2 - 15.0 / x2**3 + 105.0 / x2**4
    return -0.5 * x2 - _LOG_SQRT_2PI - math.log(-x) + math.log(series)


def gaussian_delta(sigma: float, sensitivity: float, epsilon: float) -> float:
    """The exact delta of the Gaussian mechanism with ``sigma`` at ``epsilon`` (Balle & Wang
    2018, Thm 8): ``Phi(D/(2s) - e s/D) - exp(e) * Phi(-D/(2s) - e s/D)``."""
    sigma = check_positive(sigma, "sigma")
    sensitivity = check_sensitivity(sensitivity)
    epsilon = check_epsilon(epsilon, allow_inf=False)
    a = sensitivity / (2.0 * sigma)
    b = epsilon * sigma / sensitivity
    first = math.exp(log_normal_cdf(a - b))
    second = math.exp(epsilon + log_normal_cdf(-a - b))
    return max(0.0, first - second)


def analytic_gaussian_sigma(
    sensitivity: float, epsilon: float, delta: float, *, rtol: float = 1e-12
) -> float:
    """Smallest sigma with ``gaussian_delta(sigma) <= delta`` (Balle & Wang 2018), found by
    bisection on ``log sigma``. The returned value is on the safe side of the bracket."""
    sensitivity = check_sensitivity(sensitivity)
    epsilon = check_epsilon(epsilon, allow_inf=False)
    delta = check_delta(delta)
    try:
        sigma = _analytic_sigma(sensitivity, epsilon, delta, rtol)
    except (OverflowError, ZeroDivisionError, PrivacyError):
        sigma = math.nan
    return check_noise_scale(sigma, epsilon, what="Gaussian sigma")


def _analytic_sigma(sensitivity: float, epsilon: float, delta: float, rtol: float) -> float:
    lo = hi = sensitivity
    while gaussian_delta(hi, sensitivity, epsilon) > delta:
        lo, hi = hi, hi * 2.0
    while gaussian_delta(lo, sensitivity, epsilon) <= delta:
        lo, hi = lo / 2.0, lo
        if lo < sensitivity * 1e-300:  # pragma: no cover - delta(sigma) -> 1/2 as sigma -> 0
            break
    for _ in range(200):
        mid = math.sqrt(lo * hi)
        if gaussian_delta(mid, sensitivity, epsilon) > delta:
            lo = mid
        else:
            hi = mid
        if hi - lo <= rtol * hi:
            break
    return hi


def gaussian_sigma(
    sensitivity: float,
    epsilon: float,
    delta: float,
    calibration: GaussianCalibration = "analytic",
) -> float:
    """Gaussian noise standard deviation for (epsilon, delta)-DP under L2 ``sensitivity``:
    ``calibration="analytic"`` (default) or ``"classic"``; ``epsilon = inf`` gives 0 (no noise)."""
    if not isinstance(calibration, str) or calibration not in ("analytic", "classic"):
        raise PrivacyError("calibration", "'analytic' or 'classic'", calibration)
    if math.isinf(check_epsilon(epsilon)):
        check_sensitivity(sensitivity)
        check_delta(delta)
        return 0.0
    if calibration == "classic":
        return classic_gaussian_sigma(sensitivity, epsilon, delta)
    return analytic_gaussian_sigma(sensitivity, epsilon, delta)


def gaussian_zcdp_rho(sigma: float, sensitivity: float) -> float:
    """zCDP parameter ``rho = sensitivity^2 / (2 sigma^2)`` of one Gaussian release
    (Bun & Steinke 2016, Prop. 1.6)."""
    sigma = check_positive(sigma, "sigma")
    sensitivity = check_sensitivity(sensitivity)
    try:
        rho = sensitivity**2 / (2.0 * sigma**2)
    except (OverflowError, ZeroDivisionError):
        rho = math.inf
    if not math.isfinite(rho):
        raise PrivacyError("sigma", "a noise scale whose zCDP rho is finite", sigma)
    return rho
