"""FedLinUCB in JAX (He, Wang, Min & Gu, "A Simple and Provably Efficient Algorithm for
Asynchronous Federated Contextual Linear Bandits", NeurIPS 2022, Algorithm 1).

The JAX form of :mod:`agents.fed_lin_ucb_async` (the numpy learner, the model) for one run; the
rules as implemented, their decisions and the event's steps are those of docs/async-linear.md.
The names are numpy's: ``Phi, u`` the statistics each client downloaded last (lambda I
included), ``Phi_loc, u_loc`` its increments since, ``logdet`` ln det Phi - d ln lam per client,
``Phi_ser, u_ser`` the server's sums (lambda I included), ``uploader`` the client whose upload is
in this observation (-1: none), ``pushed`` the client the server answered with the last action.

The hyperparameters, their validation and the checks of the facts are the params
(:func:`agents.fed_lin_ucb_async.fed_lin_async_params`, which the numpy ``reset`` calls too);
the trigger, the payload layout, a pull's statistics and the tie rule are the numpy learner's
own functions.

Deviations, none in the algorithm: float32 statistics; the log-determinants come from Cholesky
factors (numpy: the determinant lemma after a pull, ``slogdet`` after a download), relative to
``d ln lam``; the trigger and tie tolerance is float32's relative 1e-5. Every step factors the
acting client's decision matrix and its grown matrix (d x d each); a download's refactorization
of the receiving client is rare work behind a batch-level ``lax.cond``.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from agents.async_common import DOWN, UP, pack, ratio_fires, unpack
from agents.dislinucb import exploration_width
from agents.fed_lin_ucb_async import (
    AGENT_ID,
    VERSION,
    FedLinAsyncParams,
    FedLinUCBAsyncConfig,
    channels_of,
    fed_lin_async_params,
)
from agents.jax.async_lin_ucb import finish_event, mean_staleness, ucb_arm
from fedbandit_env.jax.batch import when_any
from fedbandit_env.jax.linear_kernels import cholesky, logdet_over
from fedbandit_env.jax.types import PULL, Observation
from fedbandit_env.linear_kernels import pull_terms
from fedbandit_env.policy import FederationFacts


class FedLinUCBAsyncState(NamedTuple):
    """One run of FedLinUCB (module docstring)."""

    Phi: jnp.ndarray
    u: jnp.ndarray
    Phi_loc: jnp.ndarray
    u_loc: jnp.ndarray
    logdet: jnp.ndarray
    Phi_ser: jnp.ndarray
    u_ser: jnp.ndarray
    n: jnp.ndarray  # the pulls the downloaded sums cover (beta="theory"; zeros else)
    n_loc: jnp.ndarray
    n_ser: jnp.ndarray
    uploader: jnp.ndarray
    pushed: jnp.ndarray
    exchanges: jnp.ndarray
    context: jnp.ndarray
    last_download: jnp.ndarray
    age_sum: jnp.ndarray
    decisions: jnp.ndarray


class FedLinUCBAsync:
    """FedLinUCB of He et al. (module docstring): :class:`agents.FedLinUCBAsync` on JAX."""

    agent_id = AGENT_ID
    version = VERSION
    privacy_epsilon = math.inf
    event_time = ("clock",)

    def __init__(self, alpha: float = 1.0, beta: float | str = 0.5, lam: float = 1.0,
                 use_local: bool = False, R: float = 0.1, delta: float = 0.1):  # fmt: skip
        self.config = FedLinUCBAsyncConfig(alpha, beta, lam, use_local, R, delta)

    def channel_spec(self, config) -> Any:
        """``up`` (server, sum, no reply) and ``down`` (push), d^2 + d floats each (and the
        count with ``beta="theory"``)."""
        return channels_of(config, self.config.counted)

    def staleness(self, state: FedLinUCBAsyncState) -> np.ndarray:
        """(runs,) the mean events since the acting client's last download at its decisions."""
        return mean_staleness(state)

    def make_params(self, facts: FederationFacts) -> FedLinAsyncParams:
        """:func:`agents.fed_lin_ucb_async.fed_lin_async_params` (the checks of the facts)."""
        return fed_lin_async_params(self.config, facts)

    def init(self, key: jax.Array, params: FedLinAsyncParams) -> FedLinUCBAsyncState:
        """Every client and the server at ``lambda I``."""
        n, d, lam = params.num_agents, params.dim, params.config.lam
        eye = jnp.float32(lam) * jnp.eye(d, dtype=jnp.float32)
        zeros = lambda *shape: jnp.zeros(shape, jnp.float32)  # noqa: E731
        return FedLinUCBAsyncState(
            Phi=jnp.broadcast_to(eye, (n, d, d)), u=zeros(n, d), Phi_loc=zeros(n, d, d),
            u_loc=zeros(n, d), logdet=zeros(n), Phi_ser=eye, u_ser=zeros(d), n=zeros(n),
            n_loc=zeros(n), n_ser=zeros(),
            uploader=jnp.full((), -1, jnp.int32), pushed=jnp.zeros(n, bool),
            exchanges=jnp.zeros((), jnp.int32), context=zeros(n, params.num_arms, d),
            last_download=jnp.zeros(n, jnp.int32), age_sum=zeros(), decisions=jnp.zeros((), jnp.int32),
        )  # fmt: skip

    def act(self, key: jax.Array, state: FedLinUCBAsyncState, obs: Observation,
            params: FedLinAsyncParams):  # fmt: skip
        """The next step of the run's event: take the server's answer, or answer the upload at
        the server, or fold the pull (and upload if the determinant grew by 1 + alpha); then
        decide the acting client's next pull."""
        p, n = params, params.num_agents
        got = state.pushed & obs.deliveries[DOWN].received
        s = when_any(got.any(), lambda s: self._receive(s, obs, got, p), state)
        uploaded = (s.uploader >= 0) & (obs.deliveries[UP].count > 0)
        counted = p.config.counted
        dPhi, du, dn = unpack(obs.deliveries[UP].aggregate.astype(jnp.float32), p.dim)
        Phi_ser = jnp.where(uploaded, s.Phi_ser + dPhi, s.Phi_ser)
        u_ser = jnp.where(uploaded, s.u_ser + du, s.u_ser)
        n_ser = jnp.where(uploaded, s.n_ser + dn, s.n_ser) if counted else s.n_ser
        down_send = uploaded & (jnp.arange(n) == s.uploader)
        sums = pack(Phi_ser, u_ser, n_ser if counted else None)
        down_payload = jnp.where(down_send[:, None], sums, 0.0)
        s = s._replace(Phi_ser=Phi_ser, u_ser=u_ser, n_ser=n_ser)
        s, up_send, up_payload = self._fold(s, obs, p)
        c = jnp.argmax(obs.active)
        if p.config.use_local:
            V, w = s.Phi[c] + s.Phi_loc[c], s.u[c] + s.u_loc[c]
        else:
            V, w = s.Phi[c], s.u[c]
        if counted:  # OFUL's radius on the pulls the decision's sums cover
            pulls = s.n[c] + (s.n_loc[c] if p.config.use_local else 0.0)
            width = exploration_width(pulls, p.dim, p.config.width)
        else:
            width = jnp.float32(p.config.beta)
        arm = ucb_arm(obs.context[c], V, w, width, 0.0)
        return finish_event(s, obs, got, c, arm, (up_send, up_payload),
                            (down_send, down_payload), p.horizon)  # fmt: skip

    def _receive(self, s: FedLinUCBAsyncState, obs: Observation, got, p: FedLinAsyncParams):
        """The server's sums replace the statistics of the client they reached."""
        Phi, u, pulls = unpack(obs.deliveries[DOWN].payload.astype(jnp.float32), p.dim)
        Phi = jnp.where(got[:, None, None], Phi, s.Phi)
        return s._replace(
            Phi=Phi, u=jnp.where(got[:, None], u, s.u),
            n=jnp.where(got, pulls, s.n) if p.config.counted else s.n,
            logdet=jnp.where(got, logdet_over(cholesky(Phi), p.config.lam), s.logdet),
            exchanges=s.exchanges + got.sum(dtype=jnp.int32),
        )  # fmt: skip

    def _fold(self, s: FedLinUCBAsyncState, obs: Observation, p: FedLinAsyncParams):
        """The pull of the acting client into its increments; an upload (which clears them) if
        ``det(Phi + Phi_loc) > (1 + alpha) det(Phi)``."""
        fresh = (obs.phase == PULL) & obs.pulled.any()
        c = jnp.argmax(obs.pulled)
        x = jnp.where(fresh, s.context[c, jnp.maximum(obs.last_arm[c], 0)], 0.0)
        y = jnp.where(fresh, obs.last_reward[c], 0.0).astype(jnp.float32)
        xx, yx = pull_terms(x, y)
        loc, uloc = s.Phi_loc[c] + xx, s.u_loc[c] + yx
        nloc = s.n_loc[c] + jnp.where(fresh, 1.0, 0.0)
        grown = logdet_over(cholesky(s.Phi[c] + loc), p.config.lam)
        fires = fresh & ratio_fires(grown, s.logdet[c], p.log_ratio)
        send = (jnp.arange(p.num_agents) == c) & fires
        payload = jnp.where(send[:, None], pack(loc, uloc, nloc if p.config.counted else None),
                            0.0)  # fmt: skip
        s = s._replace(Phi_loc=s.Phi_loc.at[c].set(jnp.where(fires, 0.0, loc)),
                       u_loc=s.u_loc.at[c].set(jnp.where(fires, 0.0, uloc)),
                       n_loc=s.n_loc.at[c].set(jnp.where(fires, 0.0, nloc)))  # fmt: skip
        return s, send, payload
