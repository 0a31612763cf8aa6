"""LinUCB / OFUL baselines for the linear contextual family (docs/linear.md).

* :class:`LinUCB` (``linucb``): every agent runs OFUL alone on its own data, no communication:
  ``V = lambda I + sum x x^T``, ``theta = V^-1 sum y x``, action
  ``argmax <x, theta> + beta ||x||_{V^-1}`` with the Proposition-2 radius
  ``beta = sigma sqrt(2 ln(2/alpha) + ln det V - d ln lambda) + S sqrt(lambda)`` (ties: lowest index).
* :class:`CentralizedLinUCB` (``centralized_linucb``): one OFUL on the raw data of **every**
  agent (``V = lambda I + sum over all agents``). An oracle upper reference: it reads every agent's
  raw data from the batched observation, breaking privacy and the communication model by design
  (excluded from light-cone tests).
"""

from __future__ import annotations

import math

import numpy as np

from baselines.config import LinUCBConfig
from baselines.params import linucb_params
from fedbandit_env.engine import VecObservation
from fedbandit_env.kernels import check_linear as check_linear  # re-exported
from fedbandit_env.kernels import ucb_choice  # re-exported
from fedbandit_env.linear_kernels import confidence_radius
from fedbandit_env.policy import (
    FederationFacts,
    TeamAction,
    TeamPolicy,
)
from fedbandit_env.seeding import BatchedRNG


def oful_beta(V: np.ndarray, lam: float, sigma: float, alpha: float, S: float) -> np.ndarray:
    """Proposition-2 radius with lambda I regularization (radicand clamped at 0):
    :func:`fedbandit_env.linear_kernels.confidence_radius` of one agent with ``rho_max =
    lambda``, from ``slogdet``."""
    log_scale = V.shape[-1] * math.log(lam)
    return confidence_radius(np.linalg.slogdet(V)[1], log_scale, alpha=alpha, sigma=sigma, S=S,
                             rho_max=lam)  # fmt: skip


class LinUCB(TeamPolicy):
    """Independent OFUL per agent (see the module docstring)."""

    agent_id = "linucb"
    event_time = ("clock", "latency", "churn")  # a client that did not pull adds nothing

    def __init__(
        self,
        lam: float = 1.0,
        sigma: float = 0.5,
        alpha: float = 0.1,
        S: float = 1.0,
        beta_scale: float = 1.0,
    ):
        self.config = LinUCBConfig(self.agent_id, lam, sigma, alpha, S, beta_scale)

    def reset(self, facts: FederationFacts, rng: BatchedRNG) -> None:
        self.params = linucb_params(self.config, facts)  # checks the family and the memory
        d = self.params.dim
        shape = (facts.num_runs, facts.num_agents)
        self.V = np.broadcast_to(self.config.lam * np.eye(d), (*shape, d, d)).copy()
        self.b = np.zeros((*shape, d))
        self._rows = np.indices(shape)
        self._context: np.ndarray | None = None

    def _fold(self, obs: VecObservation) -> tuple[np.ndarray, np.ndarray] | None:
        """The (x, y) of the last pull of every agent (None before the first pull)."""
        if obs.step == 0 or self._context is None:
            return None
        b, i = self._rows
        x, y = self._context[b, i, obs.last_arm], obs.last_reward
        if obs.pulled is not None:  # an event clock: the clients that did not pull add nothing
            x, y = x * obs.pulled[..., None], y * obs.pulled
        return x, y

    def _update(self, x: np.ndarray, y: np.ndarray) -> None:
        self.V += np.einsum("bni,bnj->bnij", x, x)
        self.b += y[..., None] * x

    def act(self, obs: VecObservation) -> TeamAction:
        pulled = self._fold(obs)
        if pulled is not None:
            self._update(*pulled)
        self._context = obs.context
        cfg = self.config
        beta = cfg.beta_scale * oful_beta(self.V, cfg.lam, cfg.sigma, cfg.alpha, cfg.S)
        return TeamAction(ucb_choice(obs.context, self.V, self.b, beta))


class CentralizedLinUCB(LinUCB):
    """One OFUL on every agent's pooled raw data (an oracle; see the module docstring)."""

    agent_id = "centralized_linucb"

    def _update(self, x: np.ndarray, y: np.ndarray) -> None:
        gram = np.einsum("bni,bnj->bij", x, x)
        self.V += gram[:, None]
        self.b += (y[..., None] * x).sum(axis=1)[:, None]
