"""LinUCB / OFUL baselines for the linear contextual family in JAX (docs/linear.md).

The learners of :mod:`baselines.linucb` for one run, on the params protocol (the rollout ``vmap``s over runs), batched over
the N agents: every agent keeps ``V`` (N, d, d) and ``b`` (N, d) in float32.

* :class:`LinUCB` (``linucb``): every agent runs OFUL alone on its own data, no communication:
  ``V = lambda I + sum x x^T``, ``theta = V^-1 sum y x``, action
  ``argmax <x, theta> + beta ||x||_{V^-1}`` with the Proposition-2 radius
  ``beta = sigma sqrt(2 ln(2/alpha) + ln det V - d ln lambda) + S sqrt(lambda)`` (ties: lowest index).
* :class:`CentralizedLinUCB` (``centralized_linucb``): one OFUL on the raw data of **every**
  agent (``V = lambda I + sum over all agents``). An oracle upper reference: it reads every agent's
  raw data, breaking privacy and the communication model by design (excluded from light-cone
  tests).

Linear algebra: one Cholesky factor ``V = L L^T`` per agent and step gives ``theta`` (two
triangular solves), the widths ``||x||_{V^-1} = ||L^-1 x||`` and ``ln det V = 2 sum ln L_jj``
(the numpy twin inverts V; the same quantities, better conditioned in float32).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from baselines.config import LinUCBConfig
from baselines.params import LinUCBParams, linucb_params
from fedbandit_env.jax.linear_kernels import cholesky, oful_beta, pulled_rows, ucb_choice
from fedbandit_env.jax.types import Action, Observation
from fedbandit_env.policy import FederationFacts


class LinUCBState(NamedTuple):
    """``V`` (N, d, d) and ``b`` (N, d) per agent, and ``chosen`` (N, d) the feature vector of
    the arm each agent plays this step (to fold its pull next step)."""

    V: jnp.ndarray
    b: jnp.ndarray
    chosen: jnp.ndarray


class LinUCB:
    """Independent OFUL per agent (port of :class:`baselines.linucb.LinUCB`)."""

    agent_id = "linucb"
    event_time = ("clock", "latency", "churn")  # a client that did not pull adds nothing
    version = 1
    privacy_epsilon = None

    def __init__(
        self,
        lam: float = 1.0,
        sigma: float = 0.5,
        alpha: float = 0.1,
        S: float = 1.0,
        beta_scale: float = 1.0,
    ):
        self.config = LinUCBConfig(self.agent_id, lam, sigma, alpha, S, beta_scale)

    def channel_spec(self, config) -> Any:
        return None

    def make_params(self, facts: FederationFacts) -> LinUCBParams:
        return linucb_params(self.config, facts)

    def init(self, key: jax.Array, params: LinUCBParams) -> LinUCBState:
        n, d = params.num_agents, params.dim
        V = jnp.broadcast_to(params.lam * jnp.eye(d, dtype=jnp.float32), (n, d, d))
        return LinUCBState(V, jnp.zeros((n, d), jnp.float32), jnp.zeros((n, d), jnp.float32))

    def update(self, V, b, x, y):
        """Each agent's own pull: ``V += x x^T``, ``b += y x``."""
        return V + jnp.einsum("ni,nj->nij", x, x), b + y[:, None] * x

    def act(self, key: jax.Array, state: LinUCBState, obs: Observation, params: LinUCBParams):
        x, y = pulled_rows(state.chosen, obs)
        V, b = self.update(state.V, state.b, x, y)
        p = params
        chol = cholesky(V)
        beta = p.beta_scale * oful_beta(chol, p.lam, p.sigma, p.alpha, p.S)
        arms = ucb_choice(obs.context, chol, b, beta)
        chosen = obs.context[jnp.arange(p.num_agents), arms]
        return Action(arms, {}), LinUCBState(V, b, chosen)


class CentralizedLinUCB(LinUCB):
    """One OFUL on every agent's pooled raw data (an oracle; port of
    :class:`baselines.linucb.CentralizedLinUCB`)."""

    agent_id = "centralized_linucb"

    def update(self, V, b, x, y):
        """Every agent's pull enters every agent's statistics (all rows stay equal)."""
        gram = jnp.einsum("ni,nj->ij", x, x)
        return V + gram[None], b + (y[:, None] * x).sum(axis=0)[None]
