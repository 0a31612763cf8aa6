"""Validated hyperparameters of the baselines.

Each learner of :mod:`baselines` that takes hyperparameters builds one of these frozen
dataclasses in ``__init__``; a bad value raises :class:`~fedbandit_env.errors.ConfigError`
naming the learner, the field and the expected value (``ucb1: alpha: expected a number >= 0,
got -1``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from fedbandit_env.errors import ConfigError
from fedbandit_env.kernels import check_number
from fedbandit_env.validation import check_int, check_real

__all__ = [
    "CentralizedUCB1Config",
    "DiscountedUCBConfig",
    "EpsilonGreedyConfig",
    "KLUCBConfig",
    "LinUCBConfig",
    "SlidingWindowUCBConfig",
    "ThompsonBetaConfig",
    "ThompsonGaussianConfig",
    "UCB1Config",
    "check_bounds",
]


def _number(cfg: Any, name: str, low: float, high: float = math.inf) -> None:
    """Replace field ``name`` of the frozen ``cfg`` by its checked float."""
    value = check_number(cfg.agent_id, name, getattr(cfg, name), low, high)
    object.__setattr__(cfg, name, value)


def check_bounds(agent_id: str, bounds: Any) -> tuple[float, float]:
    """``bounds``: (low, high) with finite low < high."""
    try:
        lo, hi = (float(x) for x in bounds)
    except (TypeError, ValueError):
        raise ConfigError(f"{agent_id}: bounds: expected (low, high), got {bounds!r}") from None
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        raise ConfigError(f"{agent_id}: bounds: expected finite low < high, got {bounds!r}")
    return lo, hi


@dataclass(frozen=True)
class UCB1Config:
    """UCB1: ``alpha`` (>= 0) in ``sqrt(alpha ln t / n)``; ``scale`` (>= 0) multiplies the bonus
    (None: the reward range, 1 for unbounded rewards)."""

    agent_id: str
    alpha: float = 2.0
    scale: float | None = None

    def __post_init__(self) -> None:
        _number(self, "alpha", 0.0)
        if self.scale is not None:
            _number(self, "scale", 0.0)


def _forgetting_bonus(cfg: Any) -> None:
    """Check the bonus settings D-UCB and SW-UCB share: ``xi`` >= 0, ``scale`` >= 0 or None,
    ``changes`` an int >= 1."""
    _number(cfg, "xi", 0.0)
    if cfg.scale is not None:
        _number(cfg, "scale", 0.0)
    changes = check_int("changes", cfg.changes, minimum=1, where=cfg.agent_id)
    object.__setattr__(cfg, "changes", changes)


@dataclass(frozen=True)
class DiscountedUCBConfig:
    """D-UCB (Garivier and Moulines 2011): ``gamma`` in (0, 1] the discount (None: their
    tuning ``1 - sqrt(changes / T) / (4 B)``, B the bonus scale); ``xi`` (>= 0) and ``scale``
    (>= 0; None: the reward range) in the bonus ``scale * sqrt(xi ln n_gamma / N_gamma)``;
    ``changes`` (>= 1) the number of change points the default ``gamma`` is tuned for."""

    agent_id: str
    gamma: float | None = None
    xi: float = 0.5
    scale: float | None = None
    changes: int = 1

    def __post_init__(self) -> None:
        if self.gamma is not None:
            gamma = check_real("gamma", self.gamma, low=0.0, high=1.0, low_open=True,
                               where=self.agent_id)  # fmt: skip
            object.__setattr__(self, "gamma", gamma)
        _forgetting_bonus(self)


@dataclass(frozen=True)
class SlidingWindowUCBConfig:
    """SW-UCB (Garivier and Moulines 2011): ``window`` (>= 1) the number of an agent's last
    pulls its statistics keep (None: their tuning ``ceil(2 B sqrt(T ln T / changes))``, B the
    bonus scale); ``xi`` (>= 0) and ``scale`` (>= 0; None: the reward range) in the bonus
    ``scale * sqrt(xi ln min(t, window) / N_window)``; ``changes`` (>= 1) the number of change
    points the default window is tuned for."""

    agent_id: str
    window: int | None = None
    xi: float = 0.6
    scale: float | None = None
    changes: int = 1

    def __post_init__(self) -> None:
        if self.window is not None:
            object.__setattr__(self, "window", check_int("window", self.window, minimum=1,
                                                         where=self.agent_id))  # fmt: skip
        _forgetting_bonus(self)


@dataclass(frozen=True)
class KLUCBConfig:
    """KL-UCB: ``c`` (>= 0) in ``ln t + c ln ln t``; ``precision`` in [1e-12, 0.5] of the
    bisection; ``bounds`` None (the environment's reward bounds) or (low, high)."""

    agent_id: str
    c: float = 0.0
    precision: float = 1e-6
    bounds: tuple[float, float] | None = None

    def __post_init__(self) -> None:
        _number(self, "c", 0.0)
        _number(self, "precision", 1e-12, 0.5)
        if self.bounds is not None:
            object.__setattr__(self, "bounds", check_bounds(self.agent_id, self.bounds))


@dataclass(frozen=True)
class EpsilonGreedyConfig:
    """Epsilon-greedy: the exploration rate ``epsilon`` in [0, 1]."""

    agent_id: str
    epsilon: float = 0.1

    def __post_init__(self) -> None:
        _number(self, "epsilon", 0.0, 1.0)


@dataclass(frozen=True)
class ThompsonBetaConfig:
    """Beta Thompson sampling: ``bounds`` None (the environment's reward bounds) or (low, high),
    the reward range mapped to [0, 1]."""

    agent_id: str
    bounds: tuple[float, float] | None = None

    def __post_init__(self) -> None:
        if self.bounds is not None:
            object.__setattr__(self, "bounds", check_bounds(self.agent_id, self.bounds))


@dataclass(frozen=True)
class ThompsonGaussianConfig:
    """Gaussian Thompson sampling: ``scale`` (>= 0) of the posterior's standard deviation
    (None: the reward range, 1 for unbounded rewards)."""

    agent_id: str
    scale: float | None = None

    def __post_init__(self) -> None:
        if self.scale is not None:
            _number(self, "scale", 0.0)


@dataclass(frozen=True)
class CentralizedUCB1Config:
    """Centralized UCB1: ``scale`` (>= 0) multiplies the bonus ``sqrt(2 ln t / n)``."""

    agent_id: str
    scale: float = 1.0

    def __post_init__(self) -> None:
        _number(self, "scale", 0.0)


@dataclass(frozen=True)
class LinUCBConfig:
    """OFUL: ridge ``lam`` (> 0), noise ``sigma`` (>= 0), confidence ``alpha`` in (0, 1), norm
    bound ``S`` (>= 0) and ``beta_scale`` (>= 0) multiplying the radius."""

    agent_id: str
    lam: float = 1.0
    sigma: float = 0.5
    alpha: float = 0.1
    S: float = 1.0
    beta_scale: float = 1.0

    def __post_init__(self) -> None:
        _number(self, "lam", 1e-12)
        _number(self, "sigma", 0.0)
        _number(self, "alpha", 1e-12, 1.0 - 1e-12)
        _number(self, "S", 0.0)
        _number(self, "beta_scale", 0.0)
