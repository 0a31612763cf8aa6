"""Async-LinUCB (Li & Wang, AISTATS 2022, Algorithm 1), registered as ``async_lin_ucb``.

Decisions and their reasons: docs/async-linear.md. N clients share theta*; one client acts per
event (an event clock); a client uploads its new data when its own log-det ratio passes gamma_U,
and the server pushes each client the uploads it has not seen when the server's log-det ratio for
that client passes gamma_D. Channels and the event's steps: :mod:`agents.async_common`.

Per client i (batched over runs and clients): ``A_i``, ``b_i``, ``n_i`` (its own data and every
download; no regulariser inside), the upload buffer ``dA_i``, ``db_i``, ``dn_i`` (its own data
since its last upload), ``V_i^-1 = (A_i + lam I)^-1``. The server: ``A_g``, ``b_g``, ``n_g`` (every
upload) and, per client j it has seen, the download buffer ``D_j``, ``d_j``, ``m_j`` (the uploads of
the others since j's last download).

* **Decision** (line 5): the acting client plays ``argmax <x, theta_i> + alpha_i ||x||_{V_i^-1}``
  with ``theta_i = V_i^-1 b_i`` and ``alpha_i = R sqrt(d ln(1 + n_i / (d lam)) + 2 ln(1/delta)) +
  sqrt(lam)`` (or a fixed ``alpha``); the first maximum wins ties within rounding (the
  authors' code; :func:`fedbandit_env.ties.argmax_first_near_ties`).
* **Update** (lines 6-7): ``x x^T``, ``y x`` and one count into the statistics and the buffer.
* **Upload** (lines 8-10): if ``det(A_i + lam I) / det(A_i - dA_i + lam I) > gamma_U``, the
  client sends its buffer (one message of d^2 + d + 1 floats) and clears it. The server adds it
  to its sums and to the download buffer of every client it has seen but the uploader.
* **Download** (lines 11-14): then, for every client j it has seen (the uploader included), if
  ``det(A_g + lam I) / det(A_g - D_j + lam I) > gamma_D`` the server sends j its buffer (one
  message) and clears it; j adds it to its statistics.
* The server sees a client at its first pull, and sets the client's download buffer to
  everything uploaded so far (the authors' code: the buffer is delivered after the next upload).

``gamma_U = gamma_D = inf`` never communicates: N independent LinUCBs. ``gamma = 1`` sends
whenever a buffer holds anything (the ratio of a non-empty buffer is > 1).

``sync_on_join=True``: at a client's first activity, if the server holds any upload, the
server first sends it its sums (one download, on a communication step before its first
decision) and its download buffer starts empty; the default (the authors' code) lets the client
decide first on empty statistics and delivers its buffer after the next upload. The download is
an ordinary one (with ``refresh="on_local_update"`` it shapes the client's second decision).

``refresh``: ``"on_receive"`` (default) recomputes a client's decision statistics when a
download lands; ``"on_local_update"`` only at its own update, as the authors' code does (a
download then first shapes the client's decision after its next pull).

Numerics: ``V^-1`` follows Sherman-Morrison after a pull and is recomputed by inversion after a
download (at the client's next decision, the first thing that reads it); ``ln det`` follows the
matrix determinant lemma after a pull and ``slogdet`` after a download; the server's checks
compare ``slogdet`` differences with ln gamma. The server keeps ``ln det(A_g - D_j + lam I)`` per
client: another client's upload adds the same data to A_g and D_j, so only the uploader's value
moves (one ``slogdet``), and a download sets it to ``ln det(A_g + lam I)``; a client with an
empty buffer never downloads. An upload then costs two ``slogdet`` instead of one per client
(results version 2; version 1 recomputed every client's).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np

from agents.async_common import (
    REFRESH,
    AsyncEventTeam,
    acting_arms,
    async_channel_spec,
    check_async_federation,
    check_oful,
    check_ratio,
    log_threshold,
    pack,
    rank_one,
    ratio_fires,
    unpack,
)
from agents.dislinucb import exploration_width
from fedbandit_env.config import EnvConfig
from fedbandit_env.engine import VecObservation
from fedbandit_env.errors import ConfigError
from fedbandit_env.kernels import check_linear
from fedbandit_env.linear_kernels import pull_terms
from fedbandit_env.policy import FederationFacts
from fedbandit_env.seeding import BatchedRNG
from fedbandit_env.validation import check_flag

AGENT_ID = "async_lin_ucb"
VERSION = 2  # results version (docs/bench.md); 2: cached server log-dets (docs/async-linear.md)


def channels_of(config: Any) -> dict[str, dict[str, Any]]:
    """The two channels on an environment configuration (:func:`agents.async_common.
    async_channel_spec`), messages of :func:`stats_size` floats."""
    d = config.linear.dim if config.linear is not None else 1
    return async_channel_spec(stats_size(d), stats_size(d))


@dataclass(frozen=True)
class AsyncLinUCBConfig:
    """``gamma_u``, ``gamma_d``: the upload and download determinant ratios (>= 1, ``inf``:
    never); ``lam``: the ridge; ``delta``: the confidence level of alpha_i; ``R``: the reward
    noise's sub-Gaussian scale; ``alpha``: a fixed exploration width (None: alpha_i);
    ``refresh``: when a download reaches the decision statistics; ``sync_on_join``: a new
    client downloads the server's sums before its first decision (module docstring)."""

    gamma_u: float = 5.0
    gamma_d: float = 5.0
    lam: float = 0.1
    delta: float = 0.1
    R: float = 0.1
    alpha: float | None = None
    refresh: str = "on_receive"
    sync_on_join: bool = False

    def __post_init__(self) -> None:
        set_ = partial(object.__setattr__, self)
        set_("gamma_u", check_ratio(AGENT_ID, "gamma_u", self.gamma_u))
        set_("gamma_d", check_ratio(AGENT_ID, "gamma_d", self.gamma_d))
        check_oful(self, AGENT_ID)
        if self.refresh not in REFRESH:
            raise ConfigError(
                f"{AGENT_ID}: refresh: expected one of {REFRESH}, got {self.refresh!r}"
            )
        object.__setattr__(self, "sync_on_join", check_flag("sync_on_join", self.sync_on_join,
                                                            where=AGENT_ID))  # fmt: skip


@dataclass(frozen=True)
class AsyncLinParams:
    """What Async-LinUCB reads at run time: N, K, d, the horizon T, ln gamma_U, ln gamma_D and
    the configuration."""

    num_agents: int
    num_arms: int
    dim: int
    horizon: int
    log_gamma_u: float
    log_gamma_d: float
    config: AsyncLinUCBConfig


def stats_size(dim: int) -> int:
    """Floats of one message: ``dA`` (d^2), ``db`` (d) and ``dn`` (1)."""
    return dim * dim + dim + 1


def async_lin_params(config: AsyncLinUCBConfig, facts: FederationFacts) -> AsyncLinParams:
    """The :class:`AsyncLinParams` of a validated configuration on a federation; checks the
    family, the event clock and the channels. Pure: the numpy ``reset`` and the JAX
    ``make_params`` call it."""
    d = check_linear(AGENT_ID, facts)
    check_async_federation(AGENT_ID, facts, stats_size(d), stats_size(d))
    return AsyncLinParams(facts.num_agents, facts.num_arms, d, facts.horizon,
                          log_threshold(config.gamma_u), log_threshold(config.gamma_d), config)  # fmt: skip


class AsyncLinUCB(AsyncEventTeam):
    """Batched Async-LinUCB (module docstring)."""

    agent_id = AGENT_ID
    version = VERSION
    privacy_epsilon = math.inf

    def __init__(
        self,
        gamma_u: float = 5.0,
        gamma_d: float = 5.0,
        lam: float = 0.1,
        delta: float = 0.1,
        R: float = 0.1,
        alpha: float | None = None,
        refresh: str = "on_receive",
        sync_on_join: bool = False,
    ):
        self.config = AsyncLinUCBConfig(gamma_u, gamma_d, lam, delta, R, alpha, refresh,
                                        sync_on_join)  # fmt: skip

    def channel_spec(self, config: EnvConfig) -> dict[str, dict[str, Any]]:
        return channels_of(config)

    # ------------------------------------------------------------------ reset
    def reset(self, facts: FederationFacts, rng: BatchedRNG) -> None:
        """Empty statistics, buffers and server (:func:`async_lin_params` checks the facts)."""
        p = self.params = async_lin_params(self.config, facts)
        B, N, d, lam = facts.num_runs, p.num_agents, p.dim, self.config.lam
        self.d = d
        self.A, self.dA, self.D = (np.zeros((B, N, d, d)) for _ in range(3))
        self.b, self.db, self.Dd = (np.zeros((B, N, d)) for _ in range(3))
        self.n, self.dn, self.Dn = (np.zeros((B, N)) for _ in range(3))
        self.V_inv = np.broadcast_to(np.eye(d) / lam, (B, N, d, d)).copy()
        self.logdet = np.full((B, N), d * math.log(lam))  # ln det(A + lam I)
        self.logdet_ref = self.logdet.copy()  # ln det(A - dA + lam I)
        self.stale = np.zeros((B, N), dtype=bool)  # a download landed since the last refresh
        # the decision statistics (refresh): V^-1, b and n as of the last refresh
        self.dec_V_inv, self.dec_b, self.dec_n = self.V_inv.copy(), self.b.copy(), self.n.copy()
        self.A_g, self.b_g, self.n_g = np.zeros((B, d, d)), np.zeros((B, d)), np.zeros(B)
        self.logdet_rest = np.full((B, N), d * math.log(lam))  # ln det(A_g - D_j + lam I)
        self.seen = np.zeros((B, N), dtype=bool)
        self.uploads = np.zeros(B, dtype=np.int64)
        self.downloads = np.zeros(B, dtype=np.int64)
        self._eye = lam * np.eye(d)
        self._start(B, N, stats_size(d), p.horizon)

    # ------------------------------------------------------------------ event
    def _choose(self, obs: VecObservation) -> np.ndarray:
        """Line 5 for the acting client of each run (the others' arms are not pulled)."""
        runs, c = np.arange(self.n.shape[0]), obs.active.argmax(axis=1)
        self._refresh(runs, c)
        width = exploration_width(self.dec_n[runs, c], self.d, self.config)
        return acting_arms(obs, self.dec_V_inv[runs, c], self.dec_b[runs, c], width)

    def _fold(self, obs: VecObservation, fresh: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Lines 6-10 for the client that pulled in each fresh run: the server sees a new client
        (its download buffer starts as the server's sums); the pull goes into the statistics and
        the buffer; the client uploads (a communication step) if its trigger fires."""
        r = np.flatnonzero(fresh)
        c = obs.pulled[r].argmax(axis=1)
        new = ~self.seen[r, c]
        if new.any():
            rn, cn = r[new], c[new]
            self.seen[rn, cn] = True
            self.D[rn, cn], self.Dd[rn, cn], self.Dn[rn, cn] = self.A_g[rn], self.b_g[rn], self.n_g[rn]
            self.logdet_rest[rn, cn] = self.d * math.log(self.config.lam)  # A_g - D_j = 0
        self._refresh(r, c)
        x = self._context[r, c, obs.last_arm[r, c]]
        y = obs.last_reward[r, c]
        xx, yx = pull_terms(x, y)
        for stats, add in ((self.A, xx), (self.dA, xx), (self.b, yx), (self.db, yx)):
            stats[r, c] += add
        self.n[r, c] += 1.0
        self.dn[r, c] += 1.0
        self.V_inv[r, c], grown = rank_one(self.V_inv[r, c], x)
        self.logdet[r, c] += grown
        self.dec_V_inv[r, c], self.dec_b[r, c], self.dec_n[r, c] = (
            self.V_inv[r, c], self.b[r, c], self.n[r, c])  # fmt: skip
        fires = ratio_fires(self.logdet[r, c], self.logdet_ref[r, c], self.params.log_gamma_u)
        send = np.zeros(self.n.shape, dtype=bool)
        if not fires.any():
            return send, self._zeros
        ru, cu = r[fires], c[fires]
        send[ru, cu] = True
        payload = np.zeros(self._zeros.shape)  # calloc: only the senders' rows are written
        payload[ru, cu] = pack(self.dA[ru, cu], self.db[ru, cu], self.dn[ru, cu])
        self.dA[ru, cu], self.db[ru, cu], self.dn[ru, cu] = 0.0, 0.0, 0.0
        self.logdet_ref[ru, cu] = self.logdet[ru, cu]
        return send, payload

    def _serve(self, up, runs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The server's side of lines 8-14 in the runs that uploaded: the upload into its sums
        and into the download buffers of the seen clients but the uploader, then a download to
        every seen client whose ratio passes gamma_D."""
        r = np.flatnonzero(runs)
        self.uploads[r] += 1
        dA, db, dn = unpack(up.aggregate[r], self.d)
        self.A_g[r] += dA
        self.b_g[r] += db
        self.n_g[r] += dn
        others = self.seen[r].copy()
        others[np.arange(len(r)), self._uploader[r]] = False
        k, j = np.nonzero(others)
        self.D[r[k], j] += dA[k]
        self.Dd[r[k], j] += db[k]
        self.Dn[r[k], j] += dn[k]
        send = np.zeros(self.n.shape, dtype=bool)
        if math.isinf(self.params.log_gamma_d):
            return send, self._zeros
        V_g = self.A_g[r] + self._eye
        logdet_g = np.linalg.slogdet(V_g)[1]
        # A_g - D_j moves only for the uploader (its own upload is not in its buffer): the other
        # clients' cached ln det(A_g - D_j + lam I) stand (module docstring, "Numerics")
        u = self._uploader[r]
        rest_u = V_g - self.D[r, u]
        self.logdet_rest[r, u] = np.linalg.slogdet(rest_u)[1]
        rest = self.logdet_rest[r]
        fires = self.seen[r] & (self.Dn[r] > 0) & ratio_fires(logdet_g[:, None], rest,
                                                               self.params.log_gamma_d)  # fmt: skip
        if not fires.any():
            return send, self._zeros
        send[r] = fires
        self.logdet_rest[r] = np.where(fires, logdet_g[:, None], rest)  # D_j cleared: A_g itself
        payload = np.zeros(self._zeros.shape)  # calloc: only the senders' rows are written
        rr, cc = np.nonzero(send)
        payload[rr, cc] = pack(self.D[rr, cc], self.Dd[rr, cc], self.Dn[rr, cc])
        self.D[rr, cc], self.Dd[rr, cc], self.Dn[rr, cc] = 0.0, 0.0, 0.0
        return send, payload

    def _join(self, obs: VecObservation, idle: np.ndarray, send: np.ndarray,
              payload: np.ndarray) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
        """``sync_on_join``: in the ``idle`` runs whose acting client the server has not seen,
        the server sends it its sums (if it holds any) before the client's first decision; the
        client's download buffer starts empty."""
        if not self.config.sync_on_join:
            return send, payload
        runs, c = np.arange(len(idle)), obs.active.argmax(axis=1)
        live = obs.active.any(axis=1) & (obs.pulls < self.params.horizon)
        new = idle & live & ~self.seen[runs, c] & (self.n_g > 0)
        if not new.any():
            return send, payload
        r = np.flatnonzero(new)
        cj = c[r]
        self.seen[r, cj] = True
        self.D[r, cj], self.Dd[r, cj], self.Dn[r, cj] = 0.0, 0.0, 0.0
        self.logdet_rest[r, cj] = np.linalg.slogdet(self.A_g[r] + self._eye)[1]
        send, payload = send.copy(), np.array(payload)
        send[r, cj] = True
        payload[r, cj] = pack(self.A_g[r], self.b_g[r], self.n_g[r])
        return send, payload

    def _receive(self, down) -> None:
        """Lines 12-13 at the clients: a download into the statistics. ``V^-1``, both log-dets
        and (``refresh="on_receive"``) the decision statistics follow at the client's next
        decision (:meth:`_refresh`): nothing reads them before."""
        rr, cc = np.nonzero(down.received)
        if len(rr) == 0:
            return
        np.add.at(self.downloads, rr, 1)
        dA, db, dn = unpack(down.payload[rr, cc], self.d)
        self.A[rr, cc] += dA
        self.b[rr, cc] += db
        self.n[rr, cc] += dn
        self.stale[rr, cc] = True

    def _refresh(self, r: np.ndarray, c: np.ndarray) -> None:
        """Line 13's recomputation for the clients (r, c) a download reached since their last
        decision: ``V^-1`` and ``ln det(A + lam I)`` by inversion and ``slogdet``, the upload
        reference ``ln det(A - dA + lam I)``, and the decision statistics with
        ``refresh="on_receive"``. The same numbers as at the download's arrival: only the
        client's own pull changes A, and it comes after its decision."""
        late = self.stale[r, c]
        if not late.any():
            return
        rr, cc = r[late], c[late]
        V = self.A[rr, cc] + self._eye
        self.V_inv[rr, cc] = np.linalg.inv(V)
        self.logdet[rr, cc] = np.linalg.slogdet(V)[1]
        self.logdet_ref[rr, cc] = np.linalg.slogdet(V - self.dA[rr, cc])[1]
        if self.config.refresh == "on_receive":
            self.dec_V_inv[rr, cc], self.dec_b[rr, cc], self.dec_n[rr, cc] = (
                self.V_inv[rr, cc], self.b[rr, cc], self.n[rr, cc])  # fmt: skip
        self.stale[rr, cc] = False
