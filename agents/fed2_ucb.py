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

import numpy as np

from agents.fed_mab_common import (
    FedMABBase,
    Schedule,
    check_schedule,
    check_width,
    schedule_value,
)
from fedbandit_env.validation import check_real

AGENT_ID = "fed2_ucb"


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


class Fed2UCB(FedMABBase):
    """Batched Fed2-UCB (module docstring)."""

    agent_id = AGENT_ID
    version = 1

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
        spec = super().channel_spec(config)
        spec["server"]["join_round"] = join_rounds(config.num_agents, self.g, self.agent_id)
        return spec

    def pulls_per_arm(self, p: int) -> int:
        """``f(p)``: pulls per active arm in phase p."""
        return schedule_value(self.agent_id, "f", self.f, p)

    def width(self, p: np.ndarray, runs: np.ndarray) -> np.ndarray:
        """``B_p = width_scale (sqrt(sigma^2 eta_p ln T) + sqrt(sigma_c^2 ln T / M(p)))``
        (module docstring), with the clients of the phase from the join schedule."""
        joined = self.joined()[runs]  # (R, N) the clients of phase p
        M = joined.sum(axis=1)
        total = np.array([self.cumulative_pulls(int(q)) for q in p], dtype=np.float64)
        before = np.array(  # F(1, c_i - 1) for each agent i: c_i - 1 = join_round[i]
            [self.cumulative_pulls(int(r)) for r in self.join_round], dtype=np.float64
        )
        F = total[:, None] - before[None, :]
        eta = np.where(joined, 1.0 / np.where(joined, F, 1.0), 0.0).sum(axis=1) / M**2
        return self.width_scale * (
            np.sqrt(self.sigma**2 * eta * self.log_T) + np.sqrt(self.sigma_c**2 * self.log_T / M)
        )
