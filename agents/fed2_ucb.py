"""Fed2-UCB (Shi & Shen, "Federated Multi-Armed Bandits", AAAI'21), registered as ``fed2_ucb``.

Decisions and their reasons: docs/fed-ucb12.md. The approximate model: clients keep joining, and the
server's average over the M(p) clients of phase p estimates the global mean with a client-sampling
error (local means scatter around the global ones with standard deviation ``sigma_c``). The phase
machine is :mod:`agents.fed_mab_common`; clients join through the participation schedule of the
``server`` channel (its ``join_round`` option: agent i takes part from the server's round
``join_round[i]`` on, i.e. from phase ``join_round[i] + 1``). :meth:`Fed2UCB.channel_spec` builds
the schedule of ``g``: ``g(p)`` new clients in phase p (the code's ``2^p``: agents 0-1 in phase 1,
2-5 in phase 2, 6-13 in phase 3, ..., until the N agents are in). An environment whose server
channel has no schedule runs every client from phase 1 (M(p) = N).

In phase p every current client pulls each active arm ``f(p)`` times; then the server averages
the local sample means of the M(p) clients. With ``F(c, p) = f(c) + ... + f(p)`` (the pulls per
active arm of a client that joined in phase c),

    eta_p = (1 / M(p)^2) sum_{clients i} 1 / F(c_i, p),
    B_p = width_scale * (sqrt(sigma^2 eta_p ln T) + sqrt(sigma_c^2 ln T / M(p))),

and the elimination rule of Fed1-UCB. When one arm is left every client commits to it.

Resolved ambiguities: the authors' code's constants
(``f = 100``, ``g(p) = 2^p``, ``sigma = 1/2``, ``sigma_c = 1/50``) with a ``width_scale``; ``f``
and ``g`` are ints or callables of the phase; pseudo-regret against the environment's global
means (the mean over all N agents, not the noisy draws of the code). Clients that have not joined
yet play the phase's arms without keeping or uploading their samples and count in the regret
(docs/fed-ucb12.md, "Inactive agents and regret").

Not checked against the paper's text: the paper's width constants, that it
analyses ``f(p)`` of order ln T with ``g(p) = 2^p``, and the log T regret claim.
"""

from __future__ import annotations

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
    fed_channel_spec,
    fed_mab_params,
    schedule_value,
)
from fedbandit_env.policy import FederationFacts
from fedbandit_env.validation import check_real
from fedbandit_env.xp import namespace

AGENT_ID = "fed2_ucb"
VERSION = 1  # results version (docs/bench.md)


def join_rounds(num_agents: int, g: Schedule, agent_id: str = AGENT_ID) -> list[int]:
    """The participation schedule of ``g``: agent i's server round (phase - 1) of joining."""
    out: list[int] = []
    p = 1
    while len(out) < num_agents:
        out += [p - 1] * schedule_value(agent_id, "g", g, p)
        p += 1
    return out[:num_agents]


@dataclass(frozen=True)
class Fed2UCBConfig:
    """``f``: pulls per active arm and phase; ``g``: clients joining in phase p (None: ``2^p``);
    both ints or callables of the phase. ``sigma``: the rewards' sub-Gaussian scale;
    ``sigma_c``: the spread of the clients' local means around the global ones;
    ``width_scale``: a factor on the confidence width."""

    f: Schedule = 100
    g: Schedule | None = None
    sigma: float = 0.5
    sigma_c: float = 0.02
    width_scale: float = 1.0

    def __post_init__(self) -> None:
        check_width(AGENT_ID, self)
        object.__setattr__(self, "f", check_schedule(AGENT_ID, "f", self.f, None))
        object.__setattr__(self, "g", check_schedule(AGENT_ID, "g", self.g, lambda p: 2**p))
        sigma_c = check_real("sigma_c", self.sigma_c, low=0.0, where=AGENT_ID)
        object.__setattr__(self, "sigma_c", sigma_c)


def fed2_channel_spec(num_agents: int, num_arms: int, g: Schedule) -> dict[str, dict[str, Any]]:
    """``server`` of dim K with aggregate ``"mean"`` and the ``join_round`` schedule of ``g``."""
    spec = fed_channel_spec(num_arms)
    spec[CHANNEL]["join_round"] = join_rounds(num_agents, g, AGENT_ID)
    return spec


def fed2_params(config: Fed2UCBConfig, facts: FederationFacts) -> FedMABParams:
    """The phase machine's params (:func:`agents.fed_mab_common.fed_mab_params`): the join
    schedule is the server channel's (none: every client from phase 1). Pure: the numpy
    ``reset`` and the JAX ``make_params`` call it."""
    return fed_mab_params(AGENT_ID, config, facts, config.f)


def fed2_width(total: Any, before: Any, joined: Any, log_T: Any, config: Fed2UCBConfig) -> Any:
    """``eta_p = (1/M(p)^2) sum_i 1/F(c_i, p)`` over the clients ``joined`` (..., N) of phase p,
    with ``F(c_i, p) = total - before_i`` (``total = F(1, p)`` (...,), ``before`` (N,)
    ``F(1, c_i - 1)``, floats), and ``B_p = width_scale (sqrt(sigma^2 eta_p ln T) +
    sqrt(sigma_c^2 ln T / M(p)))`` (module docstring). Both engines call it; ``log_T`` is a
    Python float (numpy) or a float32 scalar (JAX: ``sigma_c^2 ln T`` is a float32 product)."""
    xp = namespace(total, before, joined)
    M = joined.sum(axis=-1)
    F = total[..., None] - before
    eta = xp.where(joined, 1.0 / xp.where(joined, F, 1.0), 0.0).sum(axis=-1) / (M * M)
    return config.width_scale * (
        xp.sqrt(config.sigma**2 * eta * log_T) + xp.sqrt(config.sigma_c**2 * log_T / M)
    )


class Fed2UCB(FedMABBase):
    """Batched Fed2-UCB (module docstring)."""

    agent_id = AGENT_ID
    version = VERSION

    def __init__(
        self,
        f: Schedule = 100,
        g: Schedule | None = None,
        sigma: float = 0.5,
        sigma_c: float = 0.02,
        width_scale: float = 1.0,
    ):
        super().__init__(Fed2UCBConfig(f, g, sigma, sigma_c, width_scale))
        self.f, self.g, self.sigma_c = self.config.f, self.config.g, self.config.sigma_c

    def channel_spec(self, config):
        return fed2_channel_spec(config.num_agents, config.num_arms, self.g)

    def make_params(self, facts: FederationFacts) -> FedMABParams:
        """:func:`fed2_params`."""
        return fed2_params(self.config, facts)

    def width(self, p: np.ndarray, runs: np.ndarray) -> np.ndarray:
        """``B_p`` (:func:`fed2_width`) with the clients of the phase from the join schedule."""
        total = np.array([self.cumulative_pulls(int(q)) for q in p], dtype=np.float64)
        before = self.params.before.astype(np.float64)  # F(1, c_i - 1): c_i - 1 = join_round[i]
        return fed2_width(total, before, self.joined()[runs], self.log_T, self.config)
