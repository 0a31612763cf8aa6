"""Async-LinUCB in JAX (Li & Wang, "Asynchronous Upper Confidence Bound Algorithms for Federated
Linear Bandits", AISTATS 2022, Algorithm 1).

The JAX form of :mod:`agents.async_lin_ucb` (the numpy learner, the model) for one run; the
rules as implemented, their decisions and the event's steps are those of docs/async-linear.md.
The names are numpy's:

==================  ======================================================================
``A, b, n``         client i's statistics: its own data and every download (no regulariser)
``dA, db, dn``      its upload buffer (own data since its last upload)
``A_dec ...``       the statistics its decisions read (refreshed at its update, and at a
                    download with ``refresh="on_receive"``)
``logdet``          ln det(A_i + lam I) - d ln lam; ``logdet_ref``: of A_i - dA_i + lam I
``A_g, b_g, n_g``   the server's sums of every upload
``D, Dd, Dn``       the server's download buffer per client; ``seen``: clients it knows
``uploader``        the client whose upload is in this observation (-1: none)
``pushed``          the clients the server downloaded to with the last action
==================  ======================================================================

The hyperparameters, their validation and the checks of the facts (the family, the event
clock, the channels) are the params (:func:`agents.async_lin_ucb.async_lin_params`, which the
numpy ``reset`` calls too). The triggers (:func:`agents.async_common.ratio_fires`), the width
(:func:`agents.dislinucb.exploration_width`), the payload layout (``pack``/``unpack``), a pull's
statistics and the tie rule (:func:`fedbandit_env.ties.argmax_first_near_ties`) are the numpy
learner's own functions.

Deviations, none in the algorithm:

* numerics: float32 statistics; a client's log-determinants are recomputed from a Cholesky
  factor (numpy: the determinant lemma after a pull, ``slogdet`` after a download), kept
  relative to ``d ln lam``; the decision solves with the acting client's factor (numpy: a
  Sherman-Morrison inverse); the tie and trigger tolerance is float32's relative 1e-5;
* shapes: every step factors the acting client's two matrices (its decision statistics and its
  updated statistics, d x d each); the server's N download checks (N factors) and the clients'
  refactorization after a download are rare work behind a batch-level ``lax.cond``
  (:func:`fedbandit_env.jax.batch.when_any`), run in the steps where some run of the batch has
  an upload (a download) to take.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from agents.async_common import DOWN, UP, pack, ratio_fires, unpack
from agents.async_lin_ucb import (
    AGENT_ID,
    VERSION,
    AsyncLinParams,
    AsyncLinUCBConfig,
    async_lin_params,
    channels_of,
    stats_size,
)
from agents.dislinucb import exploration_width
from fedbandit_env.jax.batch import when_any
from fedbandit_env.jax.linear_kernels import cholesky, logdet_over, triangular_solve
from fedbandit_env.jax.types import PULL, Action, Observation
from fedbandit_env.linear_kernels import pull_terms
from fedbandit_env.policy import FederationFacts
from fedbandit_env.ties import argmax_first_near_ties
from fedbandit_env.xp import is_inf


class AsyncLinUCBState(NamedTuple):
    """One run of Async-LinUCB (module docstring); counts are float32 (they enter the width)."""

    A: jnp.ndarray
    b: jnp.ndarray
    n: jnp.ndarray
    dA: jnp.ndarray
    db: jnp.ndarray
    dn: jnp.ndarray
    A_dec: jnp.ndarray
    b_dec: jnp.ndarray
    n_dec: jnp.ndarray
    logdet: jnp.ndarray
    logdet_ref: jnp.ndarray
    A_g: jnp.ndarray
    b_g: jnp.ndarray
    n_g: jnp.ndarray
    D: jnp.ndarray
    Dd: jnp.ndarray
    Dn: jnp.ndarray
    seen: jnp.ndarray
    uploader: jnp.ndarray
    pushed: jnp.ndarray
    uploads: jnp.ndarray
    downloads: jnp.ndarray
    context: jnp.ndarray
    last_download: jnp.ndarray
    age_sum: jnp.ndarray
    decisions: jnp.ndarray


def ridge(A: jnp.ndarray, lam: float) -> jnp.ndarray:
    """``A + lam I`` (float32)."""
    d = A.shape[-1]
    return A + jnp.float32(lam) * jnp.eye(d, dtype=jnp.float32)


def ucb_arm(context, A, b, width, lam: float):
    """The first arm within rounding of the best ``<x, theta> + width ||x||_{V^-1}`` over one
    client's decision set ``context`` (K, d), V = A + lam I, theta = V^-1 b (one factor)."""
    chol = cholesky(ridge(A, lam))
    z = triangular_solve(chol, jnp.concatenate([b[:, None], context.T], axis=-1))
    zb, zx = z[:, :1], z[:, 1:]
    theta = triangular_solve(chol, zb, transpose=True)[:, 0]
    quad = (zx * zx).sum(axis=0)
    return argmax_first_near_ties(context @ theta + width * jnp.sqrt(jnp.maximum(quad, 0.0)))


def aged(s: Any, obs: Observation, got, deciding, c, horizon: int) -> dict[str, Any]:
    """Staleness (numpy: :meth:`agents.async_common.AsyncEventTeam.staleness`): the clients
    that got a download restart their age at this pull count; a decision of a live run adds the
    acting client ``c``'s age (events since its last download)."""
    last = jnp.where(got, obs.pulls, s.last_download).astype(jnp.int32)
    deciding = deciding & (obs.pulls < horizon)
    age = (obs.pulls - last[c]).astype(jnp.float32)
    return {"last_download": last, "age_sum": s.age_sum + jnp.where(deciding, age, 0.0),
            "decisions": s.decisions + deciding.astype(jnp.int32)}  # fmt: skip


def finish_event(s: Any, obs: Observation, got, c, arm, up: tuple, down: tuple,
                 horizon: int) -> tuple[Action, Any]:
    """The end of a step of an event, shared by the three ports (the numpy
    :meth:`agents.async_common.AsyncEventTeam.act`): the acting client ``c`` plays ``arm``; the
    state remembers who uploaded (``up`` = (send, payload)), whom the server pushed to (``down``),
    the decision sets and the staleness; a step that sends is a communication step."""
    (up_send, up_payload), (down_send, down_payload) = up, down
    arms = jnp.zeros(obs.active.shape[-1], jnp.int32).at[c].set(arm.astype(jnp.int32))
    talking = up_send.any() | down_send.any()
    s = s._replace(uploader=jnp.where(up_send.any(), jnp.argmax(up_send), -1).astype(jnp.int32),
                   pushed=down_send, context=obs.context,
                   **aged(s, obs, got, ~talking, c, horizon))  # fmt: skip
    return Action(arms, {UP: (up_send, up_payload), DOWN: (down_send, down_payload)}, ~talking), s


def mean_staleness(state: Any) -> np.ndarray:
    """(runs,) the mean staleness of a batch's final states (NaN before any decision)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.asarray(state.age_sum, np.float64) / np.asarray(state.decisions)


class AsyncLinUCB:
    """Async-LinUCB (module docstring): :class:`agents.AsyncLinUCB` on JAX."""

    agent_id = AGENT_ID
    version = VERSION
    privacy_epsilon = math.inf
    event_time = ("clock",)

    def __init__(self, gamma_u: float = 5.0, gamma_d: float = 5.0, lam: float = 0.1,
                 delta: float = 0.1, R: float = 0.1, alpha: float | None = None,
                 refresh: str = "on_receive", sync_on_join: bool = False):  # fmt: skip
        self.config = AsyncLinUCBConfig(gamma_u, gamma_d, lam, delta, R, alpha, refresh,
                                        sync_on_join)  # fmt: skip

    def channel_spec(self, config) -> Any:
        """``up`` (server, sum, no reply) and ``down`` (push), d^2 + d + 1 floats each."""
        return channels_of(config)

    def staleness(self, state: AsyncLinUCBState) -> np.ndarray:
        """(runs,) the mean events since the acting client's last download at its decisions."""
        return mean_staleness(state)

    def make_params(self, facts: FederationFacts) -> AsyncLinParams:
        """:func:`agents.async_lin_ucb.async_lin_params` (the checks of the facts)."""
        return async_lin_params(self.config, facts)

    def init(self, key: jax.Array, params: AsyncLinParams) -> AsyncLinUCBState:
        """Empty statistics, buffers and server."""
        n, d = params.num_agents, params.dim
        zeros = lambda *shape: jnp.zeros(shape, jnp.float32)  # noqa: E731
        return AsyncLinUCBState(
            A=zeros(n, d, d), b=zeros(n, d), n=zeros(n), dA=zeros(n, d, d), db=zeros(n, d),
            dn=zeros(n), A_dec=zeros(n, d, d), b_dec=zeros(n, d), n_dec=zeros(n),
            logdet=zeros(n), logdet_ref=zeros(n), A_g=zeros(d, d), b_g=zeros(d), n_g=zeros(),
            D=zeros(n, d, d), Dd=zeros(n, d), Dn=zeros(n), seen=jnp.zeros(n, bool),
            uploader=jnp.full((), -1, jnp.int32), pushed=jnp.zeros(n, bool),
            uploads=jnp.zeros((), jnp.int32), downloads=jnp.zeros((), jnp.int32),
            context=zeros(n, params.num_arms, d),
            last_download=jnp.zeros(n, jnp.int32), age_sum=zeros(), decisions=jnp.zeros((), jnp.int32),
        )  # fmt: skip

    # -------------------------------------------------------------- the event
    def act(self, key: jax.Array, state: AsyncLinUCBState, obs: Observation,
            params: AsyncLinParams):  # fmt: skip
        """The next step of the run's event: take the downloads, or the upload at the server
        (and push what fires), or fold the pull (and upload if it fires); then decide the
        acting client's next pull (module docstring of :mod:`agents.async_common`)."""
        p = params
        got = state.pushed & obs.deliveries[DOWN].received
        s = when_any(got.any(), lambda s: self._receive(s, obs, got, p), state)
        uploaded = (s.uploader >= 0) & (obs.deliveries[UP].count > 0)
        s, down_send, down_payload = self._serve(s, obs, uploaded, p)
        s, up_send, up_payload = self._fold(s, obs, p)
        if p.config.sync_on_join:  # a static setting: one program each way
            s, down_send, down_payload = self._join(s, obs, up_send, down_send, down_payload, p)
        c = jnp.argmax(obs.active)
        width = exploration_width(s.n_dec[c], p.dim, p.config)
        arm = ucb_arm(obs.context[c], s.A_dec[c], s.b_dec[c], width, p.config.lam)
        return finish_event(s, obs, got, c, arm, (up_send, up_payload),
                            (down_send, down_payload), p.horizon)  # fmt: skip

    def _join(self, s: AsyncLinUCBState, obs: Observation, up_send, down_send, down_payload,
              p: AsyncLinParams):  # fmt: skip
        """``sync_on_join`` (numpy :meth:`agents.AsyncLinUCB._join`): on a step without an
        upload or a download, a client the server has not seen downloads the server's sums
        before its first decision (if the server holds any); its buffer starts empty."""
        c = jnp.argmax(obs.active)
        idle = ~(up_send.any() | down_send.any())
        live = obs.active.any() & (obs.pulls < p.horizon)
        join = idle & live & ~s.seen[c] & (s.n_g > 0)
        to = join & (jnp.arange(p.num_agents) == c)
        payload = jnp.where(to[:, None], pack(s.A_g, s.b_g, s.n_g), down_payload)
        s = s._replace(seen=s.seen | to, D=jnp.where(to[:, None, None], 0.0, s.D),
                       Dd=jnp.where(to[:, None], 0.0, s.Dd), Dn=jnp.where(to, 0.0, s.Dn))  # fmt: skip
        return s, down_send | to, payload

    def _receive(self, s: AsyncLinUCBState, obs: Observation, got, p: AsyncLinParams):
        """The downloads that arrived, into the clients' statistics; both log-dets and (with
        ``refresh="on_receive"``) the decision statistics refreshed where one arrived."""
        lam = p.config.lam
        dA, db, dn = unpack(obs.deliveries[DOWN].payload.astype(jnp.float32), p.dim)
        A = jnp.where(got[:, None, None], s.A + dA, s.A)
        b = jnp.where(got[:, None], s.b + db, s.b)
        n = jnp.where(got, s.n + dn, s.n)
        logdet = jnp.where(got, logdet_over(cholesky(ridge(A, lam)), lam), s.logdet)
        ref = jnp.where(got, logdet_over(cholesky(ridge(A - s.dA, lam)), lam), s.logdet_ref)
        s = s._replace(A=A, b=b, n=n, logdet=logdet, logdet_ref=ref,
                       downloads=s.downloads + got.sum(dtype=jnp.int32))  # fmt: skip
        if p.config.refresh == "on_receive":
            s = s._replace(A_dec=jnp.where(got[:, None, None], A, s.A_dec),
                           b_dec=jnp.where(got[:, None], b, s.b_dec),
                           n_dec=jnp.where(got, n, s.n_dec))  # fmt: skip
        return s

    def _serve(self, s: AsyncLinUCBState, obs: Observation, uploaded, p: AsyncLinParams):
        """The server's side of an upload: its sums, the others' download buffers, and a
        download to every seen client whose ratio passes gamma_D (rare work)."""
        n, size = p.num_agents, stats_size(p.dim)
        none = (s, jnp.zeros(n, bool), jnp.zeros((n, size), jnp.float32))

        def serve(carry):
            s, _, _ = carry
            dA, db, dn = unpack(obs.deliveries[UP].aggregate.astype(jnp.float32), p.dim)
            dA, db, dn = (jnp.where(uploaded, x, 0.0) for x in (dA, db, dn))
            others = s.seen & (jnp.arange(n) != s.uploader)
            s = s._replace(A_g=s.A_g + dA, b_g=s.b_g + db, n_g=s.n_g + dn,
                           D=jnp.where(others[:, None, None], s.D + dA, s.D),
                           Dd=jnp.where(others[:, None], s.Dd + db, s.Dd),
                           Dn=jnp.where(others, s.Dn + dn, s.Dn),
                           uploads=s.uploads + uploaded.astype(jnp.int32))  # fmt: skip
            if is_inf(p.log_gamma_d):  # a constant: never downloads
                return s, jnp.zeros(n, bool), jnp.zeros((n, size), jnp.float32)
            lam = p.config.lam
            logdet_g = logdet_over(cholesky(ridge(s.A_g, lam)), lam)
            logdet_rest = logdet_over(cholesky(ridge(s.A_g - s.D, lam)), lam)
            send = uploaded & s.seen & ratio_fires(logdet_g, logdet_rest, p.log_gamma_d)
            payload = jnp.where(send[:, None], pack(s.D, s.Dd, s.Dn), 0.0)
            s = s._replace(D=jnp.where(send[:, None, None], 0.0, s.D),
                           Dd=jnp.where(send[:, None], 0.0, s.Dd),
                           Dn=jnp.where(send, 0.0, s.Dn))  # fmt: skip
            return s, send, payload

        return when_any(uploaded, serve, none)

    def _fold(self, s: AsyncLinUCBState, obs: Observation, p: AsyncLinParams):
        """The pull of the acting client into its statistics and buffer (the server sees a new
        client, whose download buffer starts as the server's sums), and an upload if its trigger
        fires."""
        n, lam = p.num_agents, p.config.lam
        fresh = (obs.phase == PULL) & obs.pulled.any()
        c = jnp.argmax(obs.pulled)
        new = fresh & ~s.seen[c]
        x = jnp.where(fresh, s.context[c, jnp.maximum(obs.last_arm[c], 0)], 0.0)
        y = jnp.where(fresh, obs.last_reward[c], 0.0).astype(jnp.float32)
        xx, yx = pull_terms(x, y)
        one = fresh.astype(jnp.float32)
        A, b = s.A.at[c].add(xx), s.b.at[c].add(yx)
        nn = s.n.at[c].add(one)
        dA, db, dn = s.dA.at[c].add(xx), s.db.at[c].add(yx), s.dn.at[c].add(one)
        logdet_c = logdet_over(cholesky(ridge(A[c], lam)), lam)
        fires = fresh & ratio_fires(logdet_c, s.logdet_ref[c], p.log_gamma_u)
        send = (jnp.arange(n) == c) & fires
        row = pack(dA[c], db[c], dn[c])
        s = s._replace(
            A=A, b=b, n=nn,
            dA=dA.at[c].set(jnp.where(fires, 0.0, dA[c])),
            db=db.at[c].set(jnp.where(fires, 0.0, db[c])),
            dn=dn.at[c].set(jnp.where(fires, 0.0, dn[c])),
            A_dec=s.A_dec.at[c].set(jnp.where(fresh, A[c], s.A_dec[c])),
            b_dec=s.b_dec.at[c].set(jnp.where(fresh, b[c], s.b_dec[c])),
            n_dec=s.n_dec.at[c].set(jnp.where(fresh, nn[c], s.n_dec[c])),
            logdet=s.logdet.at[c].set(jnp.where(fresh, logdet_c, s.logdet[c])),
            logdet_ref=s.logdet_ref.at[c].set(jnp.where(fires, logdet_c, s.logdet_ref[c])),
            seen=s.seen.at[c].set(s.seen[c] | fresh),
            D=s.D.at[c].set(jnp.where(new, s.A_g, s.D[c])),
            Dd=s.Dd.at[c].set(jnp.where(new, s.b_g, s.Dd[c])),
            Dn=s.Dn.at[c].set(jnp.where(new, s.n_g, s.Dn[c])),
        )  # fmt: skip
        return s, send, jnp.where(send[:, None], row, 0.0)
