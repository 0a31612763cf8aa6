"""Drifting rewards: the ``drift`` option of an environment (docs/time.md, "drift").

Garivier & Moulines (ALT 2011, Sec. 2) model a non-stationary bandit as piecewise-stationary
reward distributions with Upsilon_T breakpoints; a smooth drift moves the means a little at
every pull. Both are here, for the multi-armed families on both engines:

* ``{"kind": "piecewise", "change_points": [t_1, ...]}``: at the pull t_s (1-based, a run's own
  pull count) the means change, before that pull is drawn. ``"means"`` gives each segment's means
  ((S + 1, M), every agent alike, or (S + 1, N, M)); without it every change redraws the instance
  with the environment's own generator, from the run's ``drift`` stream (numpy) or key (JAX).
  ``{"kind": "piecewise", "rate": p}``: a change before each pull with probability p (the
  instance redrawn).
* ``{"kind": "smooth", "period": P, "amplitude": a, "center": c}``: every agent's arm k has mean
  ``mu_k(t) = c + a sin(2 pi t / P + 2 pi k / M)`` at pull t (the instance is this formula).

The linear family's instance is theta*: a piecewise drift redraws it at each change (by the
family's generator; no ``means``), and ``{"kind": "smooth", "period": P}`` turns it by 2 pi / P
per pull in the plane of theta*(0) and a unit vector u orthogonal to it, drawn once per run:
``theta*(t) = cos(2 pi t / P) theta*(0) + sin(2 pi t / P) |theta*(0)| u``
(:func:`rotated_theta`). A data set's logged rewards cannot drift: refused.

Regret is dynamic whenever drift is on: each pull is charged against the best arm of the means
in force at that pull (the environment's global expected rewards at that time). The formulas a
both engines compute (:func:`segment_of`, :func:`smooth_means`) are written once against an
array namespace. Everything here is checked by name: a wrong kind, key or value is a
:class:`~fedbandit_env.errors.ConfigError` naming ``drift``, the field and what it accepts.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from fedbandit_env.errors import ConfigError
from fedbandit_env.validation import check_int, check_option_keys, check_real, option_kind

DRIFT_KINDS: tuple[str, ...] = ("none", "piecewise", "smooth")
"""The accepted ``drift`` kinds (a str, or a dict with ``"kind"``)."""

_KEYS = {
    "piecewise": ("kind", "change_points", "rate", "means"),
    "smooth": ("kind", "period", "amplitude", "center"),
}
_LINEAR_KEYS = {"piecewise": ("kind", "change_points", "rate"), "smooth": ("kind", "period")}


@dataclass(frozen=True, eq=False)
class Drift:
    """A validated ``drift`` option (module docstring). ``change_points`` the sorted pull
    indices of a piecewise drift; ``rate`` its per-pull change probability instead (0: fixed
    points); ``means`` its segment means (S + 1, N, M) float64, or None (redraw the instance);
    ``period``, ``amplitude`` and ``center`` those of a smooth drift."""

    kind: str
    change_points: tuple[int, ...] = ()
    rate: float = 0.0
    means: np.ndarray | None = None
    period: float = 0.0
    amplitude: float = 0.0
    center: float = 0.0

    @property
    def redraws(self) -> bool:
        """A piecewise drift that redraws the instance at its changes."""
        return self.kind == "piecewise" and self.means is None

    def __reduce__(self) -> Any:  # pickles (programs' keys, worker processes) by value
        return (Drift, (self.kind, self.change_points, self.rate, self.means, self.period,
                        self.amplitude, self.center))  # fmt: skip


def drift_option(
    value: Any, *, horizon: int, num_agents: int, num_arms: int, family: str,
    bounds: tuple[float, float], fixed_means: bool, dataset: bool = False,
) -> Drift | None:  # fmt: skip
    """The :class:`Drift` of a ``drift`` argument, or None for no drift (None or ``"none"``).
    ``bounds`` the reward model's range of means; ``fixed_means`` whether the environment has
    one fixed instance (a piecewise drift then needs its segments' means); ``dataset`` whether
    the linear family's contexts and rewards are a data set's (refused)."""
    if value is None or (isinstance(value, str) and value == "none"):
        return None
    if isinstance(value, str) and value in DRIFT_KINDS:
        raise ConfigError(
            f"drift: {value!r} needs its settings; expected a dict such as "
            + ("{'kind': 'piecewise', 'change_points': [...]}" if value == "piecewise"
               else "{'kind': 'smooth', 'period': ..., 'amplitude': ..., 'center': ...}")
        )  # fmt: skip
    kind = option_kind("drift", value, DRIFT_KINDS, "None, the kind's name, or a dict with 'kind'")
    if kind == "none":
        return None
    accepted = (_LINEAR_KEYS if family == "linear" else _KEYS)[kind]
    where = " in the linear family (theta* drifts)" if family == "linear" else ""
    check_option_keys("drift", value, kind, accepted, where)
    if dataset:
        raise ConfigError("drift: a data set's contexts and rewards are logged and cannot drift; "
                          "drift needs the generated linear family (dataset=None)")  # fmt: skip
    if family == "linear" and kind == "smooth":
        if "period" not in value:
            raise ConfigError("drift: 'smooth' expects 'period' (theta* turns by 2 pi / period "
                              "per pull)")  # fmt: skip
        period = check_real("period", value["period"], low=0.0, low_open=True, where="drift")
        return Drift("smooth", period=period)
    if kind == "smooth":
        return _smooth(value, bounds)
    return _piecewise(value, horizon, num_agents, num_arms, bounds, fixed_means)


def _smooth(value: Mapping[str, Any], bounds: tuple[float, float]) -> Drift:
    for key in ("period", "amplitude", "center"):
        if key not in value:
            raise ConfigError(f"drift: 'smooth' expects {key!r} (mu_k(t) = center + amplitude "
                              "sin(2 pi t / period + 2 pi k / M))")  # fmt: skip
    period = check_real("period", value["period"], low=0.0, low_open=True, where="drift")
    amplitude = check_real("amplitude", value["amplitude"], low=0.0, where="drift")
    center = check_real("center", value["center"], where="drift")
    low, high = bounds
    if center - amplitude < low or center + amplitude > high:
        raise ConfigError(
            f"drift: center +- amplitude must stay within the reward model's means [{low:g}, "
            f"{high:g}], got center={center:g}, amplitude={amplitude:g}"
        )
    return Drift("smooth", period=period, amplitude=amplitude, center=center)


def _piecewise(
    value: Mapping[str, Any], horizon: int, num_agents: int, num_arms: int,
    bounds: tuple[float, float], fixed_means: bool,
) -> Drift:  # fmt: skip
    has_points, has_rate = "change_points" in value, "rate" in value
    if has_points == has_rate:
        raise ConfigError(
            "drift: 'piecewise' expects exactly one of 'change_points' (pull indices) or "
            f"'rate' (a change probability per pull), got {sorted(k for k in value if k != 'kind')}"
        )
    if has_rate:
        if "means" in value:
            raise ConfigError("drift: 'means' gives the segments of fixed change_points; with "
                              "'rate' every change redraws the instance")  # fmt: skip
        rate = check_real("rate", value["rate"], low=0.0, high=1.0, low_open=True, where="drift")
        if fixed_means:
            raise ConfigError("drift: 'rate' redraws the instance at each change, and this "
                              "environment has fixed means; give change_points and means")  # fmt: skip
        return Drift("piecewise", rate=rate)
    points = value["change_points"]
    if isinstance(points, str | bytes) or not hasattr(points, "__iter__"):
        raise ConfigError(f"drift: change_points: expected a list of pull indices in [2, "
                          f"{horizon}], got {points!r}")  # fmt: skip
    cps = tuple(check_int("change_points", t, minimum=2, maximum=max(horizon, 2), where="drift")
                for t in points)  # fmt: skip
    if not cps or any(b <= a for a, b in zip(cps, cps[1:], strict=False)):
        raise ConfigError(f"drift: change_points: expected strictly increasing pull indices in "
                          f"[2, {horizon}], got {list(points)!r}")  # fmt: skip
    means = value.get("means")
    if means is None:
        if fixed_means:
            raise ConfigError(
                "drift: this environment has fixed means, so a piecewise drift needs 'means': "
                f"{len(cps) + 1} segments of {num_arms} means (or of {num_agents} x {num_arms})"
            )
        return Drift("piecewise", change_points=cps)
    try:
        arr = np.array(means, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise ConfigError(f"drift: means: expected numbers, got {means!r}") from err
    segments = len(cps) + 1
    if arr.shape == (segments, num_arms):
        arr = np.repeat(arr[:, None, :], num_agents, axis=1)
    if arr.shape != (segments, num_agents, num_arms):
        raise ConfigError(
            f"drift: means: expected shape ({segments}, {num_arms}) or ({segments}, "
            f"{num_agents}, {num_arms}) (one row per segment: len(change_points) + 1), got "
            f"{np.shape(means)}"
        )
    low, high = bounds
    if not np.isfinite(arr).all() or arr.min() < low or arr.max() > high:
        raise ConfigError(f"drift: means: expected finite numbers in [{low:g}, {high:g}] (the "
                          f"reward model's), got min {arr.min()!r}, max {arr.max()!r}")  # fmt: skip
    arr.setflags(write=False)
    return Drift("piecewise", change_points=cps, means=arr)


class Changes:
    """When a piecewise drift changes, per run (numpy): at its change points, or with its
    ``rate`` per pull from the runs' ``changes`` child stream (only pulling runs draw)."""

    def __init__(self, drift: Drift, stream: Any):
        self.drift = drift
        self.draws = stream.child("changes").buffered("uniform", ()) if drift.rate else None

    def __call__(self, t: np.ndarray, pulling: np.ndarray) -> np.ndarray:
        """(B,) bool: the pulling runs whose pull ``t`` (B,) starts a new segment."""
        if self.drift.rate:
            return pulling & (self.draws.next(pulling) < self.drift.rate)
        return pulling & np.isin(t, self.drift.change_points)


class MeansDrift:
    """The numpy engine's drift of B runs' ``means`` (B, N, M), changed in place: the changes'
    draws and the redrawn instances come from the runs' ``drift`` stream (child streams
    ``changes`` and ``instances``); ``draw`` is the environment's instance generator. Made
    with the means in force at the first pull: segment 0 of given segment means, the smooth
    formula at t = 1, or the drawn instance (unchanged)."""

    def __init__(self, drift: Drift, draw: Callable[[np.random.Generator], Any], stream: Any,
                 means: np.ndarray):  # fmt: skip
        self.drift, self.draw, self.means = drift, draw, means
        self.changes, self.instances = Changes(drift, stream), stream.child("instances")
        if drift.means is not None:
            means[:] = drift.means[0]
        elif drift.kind == "smooth":
            self.advance(np.ones(len(means), np.int64), np.ones(len(means), bool))

    def advance(self, t: np.ndarray, pulling: np.ndarray) -> bool:
        """Move the pulling runs' means to those in force at their pull ``t`` (B,), before the
        pull is drawn; whether any changed (the engine then recomputes the gaps)."""
        drift, means = self.drift, self.means
        if drift.kind == "smooth":
            row = smooth_means(t, means.shape[-1], drift.period, drift.amplitude, drift.center)
            means[:] = np.where(pulling[:, None, None], row[:, None, :], means)
            return True
        changed = self.changes(t, pulling)
        if not changed.any():
            return False
        if drift.means is not None:
            segment = segment_of(t, drift.change_points)
            means[:] = np.where(changed[:, None, None], drift.means[segment], means)
        else:  # a new instance from each changed run's stream (rare: a loop over those runs)
            for b in np.flatnonzero(changed):
                means[b] = self.draw(self.instances.generators[b]).means
        return True


# ----------------------------------------------------------------------------- shared formulas


def segment_of(t: Any, change_points: tuple[int, ...], xp: Any = np) -> Any:
    """The segment (0..S) in force at pull ``t`` (any shape): the number of change points
    <= t (a change at t_s applies to the pull t_s itself)."""
    cps = xp.asarray(change_points)
    return xp.searchsorted(cps, t, side="right")


def smooth_means(
    t: Any, num_arms: int, period: float, amplitude: float, center: float, xp: Any = np,
    dtype: Any = None,
) -> Any:  # fmt: skip
    """mu_k(t) = center + amplitude sin(2 pi t / period + 2 pi k / M) for k = 0..M-1: shape
    ``t.shape + (M,)``."""
    t = xp.asarray(t, dtype=dtype)[..., None]
    k = xp.arange(num_arms, dtype=dtype)
    two_pi = 2.0 * math.pi
    return center + amplitude * xp.sin(two_pi * t / period + two_pi * k / num_arms)


def rotated_theta(t: Any, theta0: Any, u: Any, period: float, xp: Any = np) -> Any:
    """theta*(t) = cos(w t) theta0 + sin(w t) |theta0| u, w = 2 pi / period: ``theta0`` and
    ``u`` (..., d), u a unit vector orthogonal to theta0, ``t`` (...)."""
    angle = (2.0 * math.pi / period) * xp.asarray(t, dtype=theta0.dtype)[..., None]
    norm = xp.sqrt((theta0 * theta0).sum(axis=-1, keepdims=True))
    return xp.cos(angle) * theta0 + xp.sin(angle) * norm * u


def orthogonal_unit(theta0: Any, w: Any, xp: Any = np) -> Any:
    """The unit vector of ``w`` (..., d) orthogonal to ``theta0`` (one Gram-Schmidt step)."""
    hat = theta0 / xp.sqrt((theta0 * theta0).sum(axis=-1, keepdims=True))
    v = w - (w * hat).sum(axis=-1, keepdims=True) * hat
    return v / xp.sqrt((v * v).sum(axis=-1, keepdims=True))


def variation(means_by_pull: np.ndarray) -> float:
    """The variation budget V_T = sum_t max |mu_{t+1} - mu_t| of a (T, ..., M) sequence of means
    (Besbes, Gur & Zeevi 2014)."""
    steps = np.abs(np.diff(np.asarray(means_by_pull, np.float64), axis=0))
    return float(steps.reshape(len(steps), -1).max(axis=1).sum()) if len(steps) else 0.0
