"""Privacy accountant: a per-agent, per-channel ledger of spent privacy, with basic (Dwork et al.
2006), advanced (Dwork, Rothblum & Vadhan 2010, heterogeneous form) and zCDP (Bun & Steinke 2016)
composition, and ``"best"`` of the three (docs/privacy.md, "Accountant": the formulas, parallel
composition, and why a count of 0 costs 0 even when one release costs inf).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np

from fedbandit_env.privacy.calibration import check_delta, check_epsilon, check_positive
from fedbandit_env.privacy.errors import PrivacyError
from fedbandit_env.validation import is_integral

Composition = Literal["basic", "advanced", "zcdp", "best"]

_FIELDS = ("count", "eps", "eps_sq", "eps_loss", "delta", "rho", "approx_eps", "approx_delta")


def basic_composition(
    epsilons: np.ndarray, deltas: np.ndarray | float = 0.0
) -> tuple[float, float]:
    """Basic composition of releases with the given (epsilon_i, delta_i)."""
    eps = np.asarray(epsilons, dtype=np.float64)
    dl = np.broadcast_to(np.asarray(deltas, dtype=np.float64), eps.shape)
    return float(eps.sum()), float(dl.sum())


def advanced_composition(
    epsilon: float, k: int, delta_prime: float, delta: float = 0.0
) -> tuple[float, float]:
    """Dwork–Rothblum–Vadhan: k adaptive (eps, delta)-DP releases are
    ``(sqrt(2k ln(1/delta')) eps + k eps (e^eps - 1), k delta + delta')``-DP."""
    epsilon = check_epsilon(epsilon, allow_inf=False)
    delta_prime = check_delta(delta_prime, name="delta_prime")
    delta = check_delta(delta, allow_zero=True)
    if not is_integral(k) or k < 0:
        raise PrivacyError("k", "a non-negative int", k)
    eps = math.sqrt(2 * k * math.log(1 / delta_prime)) * epsilon + k * epsilon * _expm1(epsilon)
    return eps, k * delta + delta_prime


def zcdp_to_dp(rho: np.ndarray | float, delta: float) -> np.ndarray:
    """rho-zCDP implies (rho + 2 sqrt(rho ln(1/delta)), delta)-DP (Bun & Steinke 2016)."""
    delta = check_delta(delta)
    rho = np.asarray(rho, dtype=np.float64)
    if np.any(rho < 0):
        raise PrivacyError("rho", "non-negative values", "a negative rho")
    return rho + 2.0 * np.sqrt(rho * math.log(1.0 / delta))


def pure_dp_zcdp_rho(epsilon: float) -> float:
    """A pure epsilon-DP release is (epsilon^2 / 2)-zCDP (Bun & Steinke 2016, Prop. 1.4)."""
    return _square(check_epsilon(epsilon, allow_inf=False)) / 2.0


def _expm1(epsilon: float) -> float:
    """e^epsilon - 1, inf (not an OverflowError) for epsilon beyond float range."""
    return math.expm1(epsilon) if epsilon < 709.0 else math.inf


def _square(epsilon: float) -> float:
    """epsilon^2, inf (not an OverflowError) for epsilon beyond sqrt of the float range."""
    return epsilon**2 if epsilon < 1e154 else math.inf


def _times(count: np.ndarray, per_release: float) -> np.ndarray:
    """``count * per_release``, with 0 where the count is 0 even when ``per_release`` is inf
    (no release costs nothing; ``0 * inf`` would be NaN)."""
    if math.isinf(per_release):
        return np.where(count > 0, per_release, 0.0)
    with np.errstate(over="ignore"):  # a finite cost times a count may overflow to inf
        return count * per_release


@dataclass(frozen=True)
class PrivacySpent:
    """Total privacy spent, arrays of shape (B, N): ``epsilon``, ``delta``, and ``releases``."""

    epsilon: np.ndarray
    delta: np.ndarray
    releases: np.ndarray
    composition: str


class PrivacyAccountant:
    """Ledger of releases per channel, run and agent (arrays of shape (num_runs, num_agents))."""

    def __init__(self, num_agents: int, num_runs: int = 1):
        for name, value in (("num_agents", num_agents), ("num_runs", num_runs)):
            if not is_integral(value) or value < 1:
                raise PrivacyError(name, "an int >= 1", value)
        self.num_agents = int(num_agents)
        self.num_runs = int(num_runs)
        self._ledger: dict[str, dict[str, np.ndarray]] = {}

    @property
    def channels(self) -> tuple[str, ...]:
        return tuple(self._ledger)

    def _entry(self, channel: str) -> dict[str, np.ndarray]:
        if not isinstance(channel, str) or not channel:
            raise PrivacyError("channel", "a non-empty str", channel)
        if channel not in self._ledger:
            shape = (self.num_runs, self.num_agents)
            self._ledger[channel] = {f: np.zeros(shape) for f in _FIELDS}
        return self._ledger[channel]

    def _counts(self, count: np.ndarray | int) -> np.ndarray:
        shape = (self.num_runs, self.num_agents)
        arr = np.asarray(count)
        if not (np.issubdtype(arr.dtype, np.integer) or arr.dtype == np.bool_):
            raise PrivacyError("count", "non-negative integers (or a bool mask)", arr.dtype)
        try:
            arr = np.broadcast_to(arr.astype(np.float64), shape)
        except ValueError as exc:
            raise PrivacyError("count", f"an array broadcastable to {shape}", arr.shape) from exc
        if np.any(arr < 0):
            raise PrivacyError("count", "non-negative integers", "a negative count")
        return arr

    def record(
        self,
        channel: str,
        epsilon: float,
        delta: float = 0.0,
        *,
        rho: float | None = None,
        count: np.ndarray | int = 1,
    ) -> None:
        """Record ``count`` releases, each (epsilon, delta)-DP (and rho-zCDP if given), on
        ``channel``; ``count`` is an int or an int/bool array broadcastable to (B, N)."""
        increments = self._increments(epsilon, delta, rho, count)
        e = self._entry(channel)
        for field, increment in increments.items():
            e[field] += increment

    def _increments(
        self, epsilon: float, delta: float, rho: float | None, count: np.ndarray | int
    ) -> dict[str, np.ndarray]:
        """What ``count`` releases add to the ledger fields (those they change), arrays of
        shape (B, N)."""
        epsilon = check_epsilon(epsilon, allow_inf=False)
        delta = check_delta(delta, allow_zero=True)
        n = self._counts(count)
        expm1 = _expm1(epsilon)
        if math.isinf(expm1):
            loss = _times(n, expm1)
        else:
            with np.errstate(over="ignore"):
                loss = n * epsilon * expm1
        inc = {
            "count": n,
            "eps": _times(n, epsilon),
            "eps_sq": _times(n, _square(epsilon)),
            "eps_loss": loss,
            "delta": n * delta,
        }
        if rho is not None:
            inc["rho"] = n * check_positive(rho, "rho", allow_zero=True)
        elif delta == 0.0:
            inc["rho"] = _times(n, pure_dp_zcdp_rho(epsilon))
        else:
            inc["approx_eps"] = _times(n, epsilon)
            inc["approx_delta"] = n * delta
        return inc

    def record_mechanism(
        self, channel: str, mechanism: object, count: np.ndarray | int = 1
    ) -> None:
        """Record releases of a mechanism with ``epsilon``, ``delta`` (and ``rho``) attributes,
        e.g. :class:`~fedbandit_env.privacy.mechanisms.LaplaceMechanism`."""
        epsilon = getattr(mechanism, "epsilon", None)
        delta = getattr(mechanism, "delta", 0.0)
        rho = getattr(mechanism, "rho", None)
        if epsilon is None:
            raise PrivacyError("mechanism", "an object with an epsilon attribute", mechanism)
        if rho is not None and not math.isfinite(rho):
            rho = None
        self.record(channel, epsilon, delta, rho=rho if delta > 0 else None, count=count)

    def spent(
        self,
        channel: str | None = None,
        *,
        composition: Composition = "basic",
        delta_prime: float | None = None,
    ) -> PrivacySpent:
        """Total spent per run and agent on ``channel`` (None: all channels composed).
        ``delta_prime`` is the slack of advanced composition and of the zCDP conversion."""
        _check_composition(composition, delta_prime)
        if channel is not None and channel not in self._ledger:
            raise PrivacyError("channel", f"one of {self.channels}", channel)
        return self._compose(self._totals(channel), composition, delta_prime)

    def spent_if_recorded(
        self,
        channel: str,
        epsilon: float,
        delta: float = 0.0,
        *,
        rho: float | None = None,
        count: np.ndarray | int = 1,
        composition: Composition = "basic",
        delta_prime: float | None = None,
    ) -> PrivacySpent:
        """``spent(composition=..., delta_prime=...)`` over all channels as it would be after
        ``record(channel, epsilon, delta, rho=rho, count=count)``, without recording anything
        (the numbers are bit-identical to recording and asking). Budget checks use it."""
        _check_composition(composition, delta_prime)
        pending = (channel, self._increments(epsilon, delta, rho, count))
        return self._compose(self._totals(None, pending), composition, delta_prime)

    def _totals(
        self,
        channel: str | None,
        pending: tuple[str, dict[str, np.ndarray]] | None = None,
    ) -> dict[str, np.ndarray]:
        """Ledger fields summed over ``channel`` (None: all channels), in ledger order; with
        ``pending = (name, increments)`` as if the increments were recorded on ``name``."""
        shape = (self.num_runs, self.num_agents)
        tot = {f: np.zeros(shape) for f in _FIELDS}
        extra_channel, extra = pending if pending is not None else (None, {})
        for name, e in self._ledger.items():
            if channel is None or name == channel:
                for f in _FIELDS:
                    tot[f] += e[f] + extra[f] if name == extra_channel and f in extra else e[f]
        if extra_channel is not None and extra_channel not in self._ledger:
            for f, increment in extra.items():
                tot[f] += increment
        return tot

    @staticmethod
    def _compose(
        tot: dict[str, np.ndarray], composition: Composition, delta_prime: float | None
    ) -> PrivacySpent:
        basic = (tot["eps"], tot["delta"])
        results = {"basic": basic}
        if composition in ("advanced", "best"):
            assert delta_prime is not None
            adv = np.sqrt(2 * math.log(1 / delta_prime) * tot["eps_sq"]) + tot["eps_loss"]
            adv_delta = np.where(tot["count"] > 0, tot["delta"] + delta_prime, 0.0)
            results["advanced"] = (adv, adv_delta)
        if composition in ("zcdp", "best"):
            assert delta_prime is not None
            z = zcdp_to_dp(tot["rho"], delta_prime) + tot["approx_eps"]
            z_delta = np.where(tot["count"] > 0, tot["approx_delta"] + delta_prime, 0.0)
            results["zcdp"] = (z, z_delta)
        if composition == "best":
            eps = np.minimum.reduce([r[0] for r in results.values()])
            dl = np.maximum.reduce([r[1] for r in results.values()])
        else:
            eps, dl = results[composition]
        return PrivacySpent(eps.copy(), dl.copy(), tot["count"].copy(), composition)


def _check_composition(composition: str, delta_prime: float | None) -> None:
    """``composition`` is known and, unless basic, comes with a ``delta_prime`` in (0, 1)."""
    if not isinstance(composition, str) or composition not in ("basic", "advanced", "zcdp", "best"):
        raise PrivacyError("composition", "'basic', 'advanced', 'zcdp' or 'best'", composition)
    if composition != "basic":
        if delta_prime is None:
            raise PrivacyError("delta_prime", f"a number in (0, 1) for {composition!r}", None)
        check_delta(delta_prime, name="delta_prime")
