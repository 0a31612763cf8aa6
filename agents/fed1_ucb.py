"""Fed1-UCB (Shi & Shen, "Federated Multi-Armed Bandits", AAAI'21), registered as ``fed1_ucb``.

Decisions and their reasons: docs/fed-ucb12.md. The exact model: a fixed federation of N clients
whose local means differ (the heterogeneous family: agent i sees ``mu[i, k]``, the global mean is
their average) and one server. The phase machine is :mod:`agents.fed_mab_common`: in phase p every
client pulls each active arm ``f`` times (round-robin, all clients on the same arm), then one
communication-only step uploads the local sample means of the active arms and the server's average
comes back. With ``n = f(1) + ... + f(p)`` the pulls per client of an active arm so far and M the
clients whose upload arrived,

    B = width_scale * sqrt(4 sigma^2 ln T / (M n)),   eliminate k if mean_k + B < max_j mean_j - B.

When one arm is left every client commits to it and communication stops.

Resolved ambiguities:

* width constants: the authors' code's (``4 sigma^2``, said there to be "tuned from the original
  ones in the paper"), scaled by ``width_scale`` (default 1);
* ``f``: the code's ``floor(10 ln T)`` for every phase by default (T the horizon); an int or a
  callable of the phase;
* full participation per phase: the server channel must have participation 1, no join schedule
  and no drops (a missing client breaks the exact model's average);
* pseudo-regret against the global means (the environment's), not noisy draws.

Not checked against the paper's text: the paper's own width constants and the
log T regret claim.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from agents.fed_mab_common import (
    CHANNEL,
    FedMABBase,
    FedMABParams,
    Schedule,
    check_schedule,
    check_width,
    fed_mab_params,
)
from fedbandit_env.errors import ConfigError
from fedbandit_env.policy import FederationFacts
from fedbandit_env.xp import namespace

AGENT_ID = "fed1_ucb"
VERSION = 1  # results version (docs/bench.md)


@dataclass(frozen=True)
class Fed1UCBConfig:
    """``f``: pulls per active arm and phase (None: ``floor(10 ln T)``, an int or a callable of
    the phase); ``sigma``: the sub-Gaussian scale of the rewards; ``width_scale``: a factor on
    the confidence width."""

    f: Schedule | None = None
    sigma: float = 0.5
    width_scale: float = 1.0

    def __post_init__(self) -> None:
        check_width(AGENT_ID, self)
        if self.f is not None:
            object.__setattr__(self, "f", check_schedule(AGENT_ID, "f", self.f, None))


def check_fixed_clients(have: dict[str, Any]) -> None:
    """The exact model needs every client in every phase: no join schedule either."""
    if have.get("join_round") is not None:
        raise ConfigError(
            f"{AGENT_ID}: channels.{CHANNEL}.join_round: expected None (Fed1-UCB's "
            f"exact model needs every client in every phase; fed2_ucb takes clients that "
            f"join over time), got {have.get('join_round')!r}"
        )


def fed1_params(config: Fed1UCBConfig, facts: FederationFacts) -> FedMABParams:
    """The phase machine's params (:func:`agents.fed_mab_common.fed_mab_params`) with ``f``
    defaulting to ``floor(10 ln T)`` (the authors' code) once T is known, and a server channel
    without a join schedule. Pure: the numpy ``reset`` and the JAX ``make_params`` call it."""
    f = config.f
    if f is None:
        f = max(1, math.floor(10.0 * math.log(max(facts.horizon, 2))))
    return fed_mab_params(AGENT_ID, config, facts, f, check_fixed_clients)


def fed1_width(joined: Any, n: Any, log_T: Any, config: Fed1UCBConfig) -> Any:
    """``B = width_scale sqrt(4 sigma^2 ln T / (M n))`` (module docstring) with M the clients
    ``joined`` (..., N) and ``n = F(1, p)`` (...,) as floats. Both engines call it (``log_T`` a
    Python float: the constant ``4 sigma^2 ln T`` rounds once to the engine's dtype)."""
    M = joined.sum(axis=-1)
    return config.width_scale * namespace(n).sqrt(4.0 * config.sigma**2 * log_T / (M * n))


class Fed1UCB(FedMABBase):
    """Batched Fed1-UCB (module docstring)."""

    agent_id = AGENT_ID
    version = VERSION

    def __init__(self, f: Schedule | None = None, sigma: float = 0.5, width_scale: float = 1.0):
        super().__init__(Fed1UCBConfig(f, sigma, width_scale))
        self.f = self.config.f

    def make_params(self, facts: FederationFacts) -> FedMABParams:
        """:func:`fed1_params` (``f`` defaults to ``floor(10 ln T)``)."""
        return fed1_params(self.config, facts)

    def width(self, p: np.ndarray, runs: np.ndarray) -> np.ndarray:
        """``B = width_scale sqrt(4 sigma^2 ln T / (M n))`` (:func:`fed1_width`)."""
        n = np.array([self.cumulative_pulls(int(q)) for q in p], dtype=np.float64)
        return fed1_width(self.joined()[runs], n, self.log_T, self.config)
