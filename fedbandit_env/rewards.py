"""Reward models: how a pull of an arm with parameter ``mean`` turns into a reward.

Each model consumes one standard noise variate per pull (uniform or normal), drawn by the engine
from the run's ``rewards`` stream. ``expected`` gives the true expected reward of each parameter,
which is what pseudo-regret uses (for the clipped Gaussian it differs from the parameter).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar, Literal

import numpy as np

from fedbandit_env.errors import ConfigError
from fedbandit_env.validation import check_real

NoiseKind = Literal["uniform", "normal"]


@dataclass(frozen=True)
class Bernoulli:
    """Reward 1 with probability ``mean`` else 0; parameters must lie in [0, 1]."""

    name: ClassVar[str] = "bernoulli"
    noise: ClassVar[NoiseKind] = "uniform"

    @property
    def bounds(self) -> tuple[float, float]:
        return (0.0, 1.0)

    def validate(self, means: np.ndarray) -> None:
        if np.any(means < 0.0) or np.any(means > 1.0):
            raise ConfigError("means: expected values in [0, 1] for Bernoulli rewards")

    def sample(self, mean: np.ndarray, noise: np.ndarray) -> np.ndarray:
        return (noise < mean).astype(np.float64)

    def expected(self, means: np.ndarray) -> np.ndarray:
        return np.asarray(means, dtype=np.float64)


@dataclass(frozen=True)
class Gaussian:
    """Reward ``mean + sigma * z`` with z ~ N(0, 1) (unbounded; the gossip paper's Fig. 2 uses sigma = 1)."""

    sigma: float = 1.0
    name: ClassVar[str] = "gaussian"
    noise: ClassVar[NoiseKind] = "normal"

    def __post_init__(self) -> None:
        sigma = check_real("reward.sigma", self.sigma, low=0.0, low_open=True)
        object.__setattr__(self, "sigma", sigma)

    @property
    def bounds(self) -> tuple[float, float]:
        return (-math.inf, math.inf)

    def validate(self, means: np.ndarray) -> None:
        return None

    def sample(self, mean: np.ndarray, noise: np.ndarray) -> np.ndarray:
        return mean + self.sigma * noise

    def expected(self, means: np.ndarray) -> np.ndarray:
        return np.asarray(means, dtype=np.float64)


def _phi(x: float) -> float:
    return math.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)


def _cdf(x: float) -> float:
    return 0.5 * math.erfc(-x / math.sqrt(2.0))


def clipped_normal_mean(mean: float, sigma: float, low: float, high: float) -> float:
    """E[clip(X, low, high)] for X ~ N(mean, sigma^2), in closed form."""
    a = (low - mean) / sigma
    b = (high - mean) / sigma
    inside = mean * (_cdf(b) - _cdf(a)) + sigma * (_phi(a) - _phi(b))
    return low * _cdf(a) + high * (1.0 - _cdf(b)) + inside


@dataclass(frozen=True)
class ClippedGaussian:
    """Reward ``clip(mean + sigma * z, low, high)``: bounded, so privacy sensitivities hold.

    The expected reward of parameter ``mean`` is the clipped-normal mean, not ``mean`` itself.
    """

    sigma: float = 0.1
    low: float = 0.0
    high: float = 1.0
    name: ClassVar[str] = "clipped_gaussian"
    noise: ClassVar[NoiseKind] = "normal"

    def __post_init__(self) -> None:
        sigma = check_real("reward.sigma", self.sigma, low=0.0, low_open=True)
        object.__setattr__(self, "sigma", sigma)
        object.__setattr__(self, "low", check_real("reward.low", self.low))
        object.__setattr__(self, "high", check_real("reward.high", self.high))
        if not self.low < self.high:
            raise ConfigError(
                f"reward.low/high: expected finite low < high, got {self.low}, {self.high}"
            )

    @property
    def bounds(self) -> tuple[float, float]:
        return (self.low, self.high)

    def validate(self, means: np.ndarray) -> None:
        return None

    def sample(self, mean: np.ndarray, noise: np.ndarray) -> np.ndarray:
        return np.clip(mean + self.sigma * noise, self.low, self.high)

    def expected(self, means: np.ndarray) -> np.ndarray:
        flat = [
            clipped_normal_mean(float(m), self.sigma, self.low, self.high) for m in np.ravel(means)
        ]
        return np.asarray(flat, dtype=np.float64).reshape(np.shape(means))


RewardModel = Bernoulli | Gaussian | ClippedGaussian

_MODELS: dict[str, type] = {
    "bernoulli": Bernoulli,
    "gaussian": Gaussian,
    "clipped_gaussian": ClippedGaussian,
}


def make_reward_model(spec: str | dict | RewardModel) -> RewardModel:
    """A reward model from a name (``"bernoulli"``), a dict (``{"kind": "gaussian", "sigma": 1}``)
    or an instance."""
    if isinstance(spec, Bernoulli | Gaussian | ClippedGaussian):
        return spec
    if isinstance(spec, str):
        spec = {"kind": spec}
    if not isinstance(spec, dict) or "kind" not in spec:
        raise ConfigError(f"reward: expected a name, a dict with 'kind' or a model, got {spec!r}")
    params = dict(spec)
    kind = params.pop("kind")
    if kind not in _MODELS:
        raise ConfigError(f"reward.kind: expected one of {sorted(_MODELS)}, got {kind!r}")
    try:
        return _MODELS[kind](**params)
    except TypeError as err:
        raise ConfigError(f"reward: bad parameters for {kind!r}: {err}") from None
