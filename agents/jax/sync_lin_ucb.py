"""Sync-LinUCB in JAX: Li & Wang's synchronous baseline under an event clock (AISTATS 2022,
Sec. 6; the DisLinUCB rule of Wang, Hu, Chen & Wang, ICLR 2020, one client acting per event).

The JAX form of :mod:`agents.sync_lin_ucb` (the numpy learner, the model) for one run; the rules,
their decisions and the event's steps are those of docs/async-linear.md, "Sync-LinUCB". The names
are numpy's:

==================  ======================================================================
``A, b, n``         client i's statistics: its own data and every sync's sums
``dA, db, dn``      its upload buffer (own data since the last sync)
``logdet``          ln det(A_i + lam I) - d ln lam; ``logdet_ref``: at the last sync
``A_g, b_g, n_g``   the server's sums of every upload
``seen``            the clients the server knows (from their first pull)
``uploader``        the first client whose upload is in this observation (-1: none)
``pushed``          the clients the server sent its sums to with the last action
==================  ======================================================================

The hyperparameters, their validation, D and the checks of the facts are the params
(:func:`agents.sync_lin_ucb.sync_lin_params`, which the numpy ``reset`` calls too). The trigger
(:func:`fedbandit_env.linear_kernels.rarely_switching`), the width
(:func:`agents.dislinucb.exploration_width`), the payload layout (``pack``/``unpack``), a pull's
statistics and the decision (:func:`agents.jax.async_lin_ucb.ucb_arm`, the first arm within
rounding) are the numpy learner's own functions.

Deviations, none in the algorithm:

* numerics: float32 statistics; the acting client's log-determinant is recomputed from a
  Cholesky factor after each pull (numpy: the determinant lemma), and every client's after a
  sync (numpy: ``slogdet``), kept relative to ``d ln lam``; decisions solve with a factor (numpy:
  a Sherman-Morrison inverse);
* shapes: every step factors the acting client's statistics twice (its decision and its
  trigger); the server's sums and a sync's N refactorizations are rare work behind a batch-level
  ``lax.cond`` (:func:`fedbandit_env.jax.batch.when_any`).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp

from agents.async_common import DOWN, UP, pack, unpack
from agents.async_lin_ucb import channels_of, stats_size
from agents.dislinucb import exploration_width
from agents.jax.async_lin_ucb import finish_event, mean_staleness, ridge, ucb_arm
from agents.sync_lin_ucb import (
    AGENT_ID,
    VERSION,
    SyncLinParams,
    SyncLinUCBConfig,
    sync_lin_params,
)
from fedbandit_env.jax.batch import when_any
from fedbandit_env.jax.linear_kernels import cholesky, logdet_over
from fedbandit_env.jax.types import PULL, Observation
from fedbandit_env.linear_kernels import pull_terms, rarely_switching
from fedbandit_env.policy import FederationFacts


class SyncLinUCBState(NamedTuple):
    """One run of Sync-LinUCB (module docstring); counts are float32 (they enter the width)."""

    A: jnp.ndarray
    b: jnp.ndarray
    n: jnp.ndarray
    dA: jnp.ndarray
    db: jnp.ndarray
    dn: jnp.ndarray
    logdet: jnp.ndarray
    logdet_ref: jnp.ndarray
    A_dec: jnp.ndarray  # the decision statistics (refresh): A, b and n as of the last refresh
    b_dec: jnp.ndarray
    n_dec: jnp.ndarray
    A_g: jnp.ndarray
    b_g: jnp.ndarray
    n_g: jnp.ndarray
    seen: jnp.ndarray
    uploader: jnp.ndarray
    pushed: jnp.ndarray
    syncs: jnp.ndarray
    context: jnp.ndarray
    last_download: jnp.ndarray
    age_sum: jnp.ndarray
    decisions: jnp.ndarray


class SyncLinUCB:
    """Sync-LinUCB (module docstring): :class:`agents.SyncLinUCB` on JAX."""

    agent_id = AGENT_ID
    version = VERSION
    privacy_epsilon = math.inf
    event_time = ("clock",)

    def __init__(self, threshold="match_regret", lam: float = 0.1, delta: float = 0.1,
                 R: float = 0.1, alpha: float | None = None,
                 refresh: str = "on_receive"):  # fmt: skip
        self.config = SyncLinUCBConfig(threshold, lam, delta, R, alpha, refresh)

    def channel_spec(self, config):
        """``up`` (server, sum, no reply) and ``down`` (push), d^2 + d + 1 floats each."""
        return channels_of(config)

    def staleness(self, state: SyncLinUCBState):
        """(runs,) the mean events since the acting client's last sync at its decisions."""
        return mean_staleness(state)

    def make_params(self, facts: FederationFacts) -> SyncLinParams:
        """:func:`agents.sync_lin_ucb.sync_lin_params` (the checks of the facts, D)."""
        return sync_lin_params(self.config, facts)

    def init(self, key: jax.Array, params: SyncLinParams) -> SyncLinUCBState:
        """Empty statistics, buffers and server."""
        n, d = params.num_agents, params.dim
        zeros = lambda *shape: jnp.zeros(shape, jnp.float32)  # noqa: E731
        return SyncLinUCBState(
            A=zeros(n, d, d), b=zeros(n, d), n=zeros(n), dA=zeros(n, d, d), db=zeros(n, d),
            dn=zeros(n), logdet=zeros(n), logdet_ref=zeros(n), A_dec=zeros(n, d, d),
            b_dec=zeros(n, d), n_dec=zeros(n), A_g=zeros(d, d), b_g=zeros(d),
            n_g=zeros(), seen=jnp.zeros(n, bool), uploader=jnp.full((), -1, jnp.int32),
            pushed=jnp.zeros(n, bool), syncs=jnp.zeros((), jnp.int32),
            context=zeros(n, params.num_arms, d), last_download=jnp.zeros(n, jnp.int32),
            age_sum=zeros(), decisions=jnp.zeros((), jnp.int32),
        )  # fmt: skip

    # -------------------------------------------------------------- the event
    def act(self, key: jax.Array, state: SyncLinUCBState, obs: Observation,
            params: SyncLinParams):  # fmt: skip
        """The next step of the run's event: take the server's sums, or the uploads at the
        server (and send its sums to every seen client), or fold the pull (and, if the trigger
        fires, every seen client uploads); then decide the acting client's next pull."""
        p = params
        got = state.pushed & obs.deliveries[DOWN].received
        s = when_any(got.any(), lambda s: self._receive(s, obs, got, p), state)
        uploaded = (s.uploader >= 0) & (obs.deliveries[UP].count > 0)
        s, down_send, down_payload = self._serve(s, obs, uploaded, p)
        s, up_send, up_payload = self._fold(s, obs, p)
        c = jnp.argmax(obs.active)
        width = exploration_width(s.n_dec[c], p.dim, p.config)
        arm = ucb_arm(obs.context[c], s.A_dec[c], s.b_dec[c], width, p.config.lam)
        return finish_event(s, obs, got, c, arm, (up_send, up_payload),
                            (down_send, down_payload), p.horizon)  # fmt: skip

    def _receive(self, s: SyncLinUCBState, obs: Observation, got, p: SyncLinParams):
        """The server's sums replace a client's statistics where they arrived; its log-dets are
        recomputed (its buffer is empty)."""
        A, b, n = unpack(obs.deliveries[DOWN].payload.astype(jnp.float32), p.dim)
        A = jnp.where(got[:, None, None], A, s.A)
        logdet = jnp.where(got, logdet_over(cholesky(ridge(A, p.config.lam)), p.config.lam),
                           s.logdet)  # fmt: skip
        b, n = jnp.where(got[:, None], b, s.b), jnp.where(got, n, s.n)
        s = s._replace(A=A, b=b, n=n, logdet=logdet,
                       logdet_ref=jnp.where(got, logdet, s.logdet_ref))  # fmt: skip
        if p.config.refresh == "on_receive":
            s = s._replace(A_dec=jnp.where(got[:, None, None], A, s.A_dec),
                           b_dec=jnp.where(got[:, None], b, s.b_dec),
                           n_dec=jnp.where(got, n, s.n_dec))  # fmt: skip
        return s

    def _serve(self, s: SyncLinUCBState, obs: Observation, uploaded, p: SyncLinParams):
        """The server adds the uploads and sends its sums to every seen client (rare work)."""
        n, size = p.num_agents, stats_size(p.dim)
        none = (s, jnp.zeros(n, bool), jnp.zeros((n, size), jnp.float32))

        def serve(carry):
            s, _, _ = carry
            dA, db, dn = unpack(obs.deliveries[UP].aggregate.astype(jnp.float32), p.dim)
            dA, db, dn = (jnp.where(uploaded, x, 0.0) for x in (dA, db, dn))
            s = s._replace(A_g=s.A_g + dA, b_g=s.b_g + db, n_g=s.n_g + dn,
                           syncs=s.syncs + uploaded.astype(jnp.int32))  # fmt: skip
            send = uploaded & s.seen
            payload = jnp.where(send[:, None], pack(s.A_g, s.b_g, s.n_g)[None], 0.0)
            return s, send, payload

        return when_any(uploaded, serve, none)

    def _fold(self, s: SyncLinUCBState, obs: Observation, p: SyncLinParams):
        """The pull of the acting client into its statistics and buffer; if its trigger fires
        (DisLinUCB's rule on its own trials since the sync), every seen client uploads its
        buffer, and the buffers empty."""
        lam = p.config.lam
        fresh = (obs.phase == PULL) & obs.pulled.any()
        c = jnp.argmax(obs.pulled)
        x = jnp.where(fresh, s.context[c, jnp.maximum(obs.last_arm[c], 0)], 0.0)
        y = jnp.where(fresh, obs.last_reward[c], 0.0).astype(jnp.float32)
        xx, yx = pull_terms(x, y)
        one = fresh.astype(jnp.float32)
        A, b, nn = s.A.at[c].add(xx), s.b.at[c].add(yx), s.n.at[c].add(one)
        dA, db, dn = s.dA.at[c].add(xx), s.db.at[c].add(yx), s.dn.at[c].add(one)
        seen = s.seen.at[c].set(s.seen[c] | fresh)
        logdet_c = logdet_over(cholesky(ridge(A[c], lam)), lam)
        fires = fresh & rarely_switching(logdet_c, s.logdet_ref[c], dn[c], p.threshold)
        send = fires & seen
        payload = jnp.where(send[:, None], pack(dA, db, dn), 0.0)
        s = s._replace(
            A=A, b=b, n=nn, seen=seen,
            dA=jnp.where(fires, 0.0, dA), db=jnp.where(fires, 0.0, db),
            dn=jnp.where(fires, 0.0, dn),
            logdet=s.logdet.at[c].set(jnp.where(fresh, logdet_c, s.logdet[c])),
            A_dec=s.A_dec.at[c].set(jnp.where(fresh, A[c], s.A_dec[c])),
            b_dec=s.b_dec.at[c].set(jnp.where(fresh, b[c], s.b_dec[c])),
            n_dec=s.n_dec.at[c].set(jnp.where(fresh, nn[c], s.n_dec[c])),
        )  # fmt: skip
        return s, send, payload
