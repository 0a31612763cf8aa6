"""Sync-LinUCB, Li & Wang's synchronous baseline under an event clock (AISTATS 2022, Sec. 6: the
DisLinUCB rule of Wang, Hu, Chen & Wang, ICLR 2020, with one client acting per event), registered
as ``sync_lin_ucb``.

Decisions and their reasons: docs/async-linear.md, "Sync-LinUCB". The clients' statistics and
decisions are Async-LinUCB's (:mod:`agents.async_lin_ucb`, fresh statistics); what differs is
the communication:

* **Trigger.** After the acting client's update, ``dn_i ln(det(A_i + lam I) / det(A_i - dA_i +
  lam I)) >= D`` (:func:`fedbandit_env.linear_kernels.rarely_switching`, DisLinUCB's rule).
* **Sync.** Every client the server has seen uploads its buffer (one message each, a
  communication step), the server adds them to its sums, and sends every seen client the sums
  (one message each, the next communication step), which replace the client's statistics:
  2 x (seen clients) messages per sync.
* **D.** ``threshold="match_regret"``: T / (N d ln T) (the authors' D2); ``"match_comm"``:
  T / (d ln T) (D3); or a number. The server sees a client at its first pull.
* **Refresh.** ``refresh="on_receive"`` (default) decides on the synced statistics from the
  next decision on; ``"on_local_update"`` keeps deciding on the statistics of the client's last
  own update until its next one, as the authors' code does (a sync replaces A, b and n but not
  the cached inverse, estimate and width): the setting of Async-LinUCB's A5 numbers.

Channels and the event's steps: :mod:`agents.async_common` (``up``: a server without reply;
``down``: the server's pushes).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from agents.async_common import (
    REFRESH,
    AsyncEventTeam,
    acting_arms,
    check_async_federation,
    check_oful,
    pack,
    rank_one,
    unpack,
)
from agents.async_lin_ucb import channels_of, stats_size
from agents.dislinucb import exploration_width
from fedbandit_env.config import EnvConfig
from fedbandit_env.engine import VecObservation
from fedbandit_env.errors import ConfigError
from fedbandit_env.kernels import check_linear
from fedbandit_env.linear_kernels import pull_terms, rarely_switching
from fedbandit_env.policy import FederationFacts
from fedbandit_env.seeding import BatchedRNG
from fedbandit_env.validation import check_real

AGENT_ID = "sync_lin_ucb"
VERSION = 1  # results version (docs/bench.md)
THRESHOLDS = ("match_regret", "match_comm")


def li_wang_threshold(kind: str, horizon: int, num_agents: int, dim: int) -> float:
    """Li & Wang's thresholds (their code): D2 = T / (N d ln T) ("match_regret") and
    D3 = T / (d ln T) ("match_comm")."""
    per = horizon / (dim * math.log(horizon))
    return per / num_agents if kind == "match_regret" else per


@dataclass(frozen=True)
class SyncLinUCBConfig:
    """``threshold``: D, a number >= 0 or one of :data:`THRESHOLDS`; ``lam``, ``delta``, ``R``,
    ``alpha``: Async-LinUCB's (the ridge, the confidence level, the noise scale, a fixed
    width); ``refresh``: when a sync reaches the decision statistics (module docstring)."""

    threshold: Any = "match_regret"
    lam: float = 0.1
    delta: float = 0.1
    R: float = 0.1
    alpha: float | None = None
    refresh: str = "on_receive"

    def __post_init__(self) -> None:
        if isinstance(self.threshold, str):
            if self.threshold not in THRESHOLDS:
                raise ConfigError(f"{AGENT_ID}: threshold: expected a number >= 0 or one of "
                                  f"{THRESHOLDS}, got {self.threshold!r}")  # fmt: skip
        else:
            threshold = check_real("threshold", self.threshold, low=0.0, where=AGENT_ID)
            object.__setattr__(self, "threshold", threshold)
        check_oful(self, AGENT_ID)
        if self.refresh not in REFRESH:
            raise ConfigError(
                f"{AGENT_ID}: refresh: expected one of {REFRESH}, got {self.refresh!r}"
            )


@dataclass(frozen=True)
class SyncLinParams:
    """N, K, d, the horizon, the threshold D and the configuration."""

    num_agents: int
    num_arms: int
    dim: int
    horizon: int
    threshold: float
    config: SyncLinUCBConfig


def sync_lin_params(config: SyncLinUCBConfig, facts: FederationFacts) -> SyncLinParams:
    """The params on a federation: the family, the event clock and the channels checked, D
    resolved."""
    d = check_linear(AGENT_ID, facts)
    check_async_federation(AGENT_ID, facts, stats_size(d), stats_size(d))
    D = config.threshold
    if isinstance(D, str):
        D = li_wang_threshold(D, facts.horizon, facts.num_agents, d)
    return SyncLinParams(facts.num_agents, facts.num_arms, d, facts.horizon, float(D), config)


class SyncLinUCB(AsyncEventTeam):
    """Batched Sync-LinUCB (module docstring)."""

    agent_id = AGENT_ID
    version = VERSION
    privacy_epsilon = math.inf

    def __init__(self, threshold: Any = "match_regret", lam: float = 0.1, delta: float = 0.1,
                 R: float = 0.1, alpha: float | None = None,
                 refresh: str = "on_receive"):  # fmt: skip
        self.config = SyncLinUCBConfig(threshold, lam, delta, R, alpha, refresh)

    def channel_spec(self, config: EnvConfig) -> dict[str, dict[str, Any]]:
        return channels_of(config)

    def reset(self, facts: FederationFacts, rng: BatchedRNG) -> None:
        """Empty statistics, buffers and server (:func:`sync_lin_params` checks the facts)."""
        p = self.params = sync_lin_params(self.config, facts)
        B, N, d, lam = facts.num_runs, p.num_agents, p.dim, self.config.lam
        self.d = d
        self.A, self.dA = np.zeros((B, N, d, d)), np.zeros((B, N, d, d))
        self.b, self.db = np.zeros((B, N, d)), np.zeros((B, N, d))
        self.n, self.dn = np.zeros((B, N)), np.zeros((B, N))
        self.V_inv = np.broadcast_to(np.eye(d) / lam, (B, N, d, d)).copy()
        self.logdet = np.full((B, N), d * math.log(lam))
        self.logdet_ref = self.logdet.copy()
        self.dec_V_inv, self.dec_b, self.dec_n = self.V_inv.copy(), self.b.copy(), self.n.copy()
        self.A_g, self.b_g, self.n_g = np.zeros((B, d, d)), np.zeros((B, d)), np.zeros(B)
        self.seen = np.zeros((B, N), dtype=bool)
        self.syncs = np.zeros(B, dtype=np.int64)
        self._eye = lam * np.eye(d)
        self._start(B, N, stats_size(d), p.horizon)

    def _choose(self, obs: VecObservation) -> np.ndarray:
        """Async-LinUCB's decision for the acting client, on its decision statistics."""
        runs, c = np.arange(self.n.shape[0]), obs.active.argmax(axis=1)
        width = exploration_width(self.dec_n[runs, c], self.d, self.config)
        return acting_arms(obs, self.dec_V_inv[runs, c], self.dec_b[runs, c], width)

    def _fold(self, obs: VecObservation, fresh: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The acting client's update; if its trigger fires, every seen client uploads."""
        r = np.flatnonzero(fresh)
        c = obs.pulled[r].argmax(axis=1)
        self.seen[r, c] = True
        x = self._context[r, c, obs.last_arm[r, c]]
        xx, yx = pull_terms(x, obs.last_reward[r, c])
        for stats, add in ((self.A, xx), (self.dA, xx), (self.b, yx), (self.db, yx)):
            stats[r, c] += add
        self.n[r, c] += 1.0
        self.dn[r, c] += 1.0
        self.V_inv[r, c], grown = rank_one(self.V_inv[r, c], x)
        self.logdet[r, c] += grown
        self.dec_V_inv[r, c], self.dec_b[r, c], self.dec_n[r, c] = (
            self.V_inv[r, c], self.b[r, c], self.n[r, c])  # fmt: skip
        fires = rarely_switching(self.logdet[r, c], self.logdet_ref[r, c], self.dn[r, c],
                                 self.params.threshold)  # fmt: skip
        send = np.zeros(self.n.shape, dtype=bool)
        if not fires.any():
            return send, self._zeros
        rs = r[fires]
        send[rs] = self.seen[rs]
        payload = np.where(send[..., None], pack(self.dA, self.db, self.dn), 0.0)
        self.dA[rs], self.db[rs], self.dn[rs] = 0.0, 0.0, 0.0
        return send, payload

    def _serve(self, up, runs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The server adds the uploads and sends its sums to every seen client."""
        r = np.flatnonzero(runs)
        dA, db, dn = unpack(up.aggregate[r], self.d)
        self.A_g[r] += dA
        self.b_g[r] += db
        self.n_g[r] += dn
        self.syncs[r] += 1
        send = np.zeros(self.n.shape, dtype=bool)
        send[r] = self.seen[r]
        payload = np.zeros_like(self._zeros)
        payload[r] = np.where(send[r][..., None], pack(self.A_g[r], self.b_g[r],
                                                       self.n_g[r])[:, None], 0.0)  # fmt: skip
        return send, payload

    def _receive(self, down) -> None:
        """The server's sums replace a seen client's statistics; its inverse and log-dets are
        recomputed (the buffer is empty)."""
        rr, cc = np.nonzero(down.received)
        if len(rr) == 0:
            return
        A, b, n = unpack(down.payload[rr, cc], self.d)
        self.A[rr, cc], self.b[rr, cc], self.n[rr, cc] = A, b, n
        V = A + self._eye
        self.V_inv[rr, cc] = np.linalg.inv(V)
        self.logdet[rr, cc] = np.linalg.slogdet(V)[1]
        self.logdet_ref[rr, cc] = self.logdet[rr, cc]
        if self.config.refresh == "on_receive":
            self.dec_V_inv[rr, cc], self.dec_b[rr, cc], self.dec_n[rr, cc] = (
                self.V_inv[rr, cc], b, n)  # fmt: skip
