"""FedLinUCB (He, Wang, Min & Gu, NeurIPS 2022, Algorithm 1), registered as
``fed_lin_ucb_async``.

Decisions and their reasons: docs/async-linear.md. M clients share theta*; one client acts per
event (an event clock). The acting client decides on the server statistics it downloaded last,
keeps its new data in a local buffer, and when its determinant has grown by the factor
(1 + alpha) it uploads the buffer and downloads the server's sums: one round trip that it alone
starts (no server push). Channels and the event's steps: :mod:`agents.async_common`.

Per client m (batched over runs and clients): the downloaded ``Phi_m`` (lambda I plus the
uploads it covers) and ``u_m``, the local increments ``Phi_loc_m``, ``u_loc_m`` since its last
exchange. The server: ``Phi_ser = lambda I + every upload``, ``u_ser``.

* **Decision** (line 6): ``argmax <x, theta_m> + beta ||x||_{Phi_m^-1}``, ``theta_m = Phi_m^-1 u_m``
  with a constant ``beta`` (the authors' experiments: 0.5); the first maximum within rounding wins ties.
  ``beta="theory"`` uses OFUL's radius instead, ``R sqrt(d ln(1 + n_m / (d lambda)) + 2 ln(1/delta))
  + sqrt(lambda)`` with ``n_m`` the pulls its downloaded sums cover (Li & Wang's width,
  :func:`agents.dislinucb.exploration_width`); the messages then carry the count (one float
  more). With
  ``use_local=True`` it decides on ``Phi_m + Phi_loc_m`` and ``u_m + u_loc_m`` instead (not the
  paper's rule; an option).
* **Update** (line 8): ``x x^T`` and ``y x`` into the local increments.
* **Exchange** (lines 9-12): if ``det(Phi_m + Phi_loc_m) > (1 + alpha) det(Phi_m)``, the client
  uploads ``(Phi_loc_m, u_loc_m)`` (one message of d^2 + d floats) and clears it; the server adds
  it and sends the client ``(Phi_ser, u_ser)`` back (one message), which replaces
  ``(Phi_m, u_m)``.

Every client starts from ``Phi_m = lambda I`` (the authors' code starts from 0 and a
pseudo-inverse; docs/async-linear.md). ``alpha = inf`` never communicates: every client then
decides on ``lambda I`` alone, since its own data sit in the local buffer.

Numerics: ``Phi_m^-1`` and ``ln det Phi_m`` are recomputed when a download lands;
``(Phi_m + Phi_loc_m)^-1`` and its log-det follow Sherman-Morrison and the matrix determinant
lemma after each pull.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np

from agents.async_common import (
    AsyncEventTeam,
    OfulWidth,
    acting_arms,
    async_channel_spec,
    check_async_federation,
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
from fedbandit_env.validation import check_flag, check_real

AGENT_ID = "fed_lin_ucb_async"
VERSION = 1  # results version (docs/bench.md)


def channels_of(config: Any, counted: bool = False) -> dict[str, dict[str, Any]]:
    """The two channels on an environment configuration (:func:`agents.async_common.
    async_channel_spec`), messages of :func:`stats_size` floats."""
    d = config.linear.dim if config.linear is not None else 1
    return async_channel_spec(stats_size(d, counted), stats_size(d, counted))


@dataclass(frozen=True)
class FedLinUCBAsyncConfig:
    """``alpha``: the determinant growth (1 + alpha) that triggers an exchange (> 0, ``inf``:
    never); ``beta``: the constant exploration width, or ``"theory"`` (OFUL's radius with the
    noise scale ``R`` and confidence ``delta``); ``lam``: the ridge; ``use_local``: decide on the
    local increments too (module docstring)."""

    alpha: float = 1.0
    beta: float | str = 0.5
    lam: float = 1.0
    use_local: bool = False
    R: float = 0.1
    delta: float = 0.1

    def __post_init__(self) -> None:
        set_ = partial(object.__setattr__, self)
        set_("alpha", check_real("alpha", self.alpha, low=0.0, low_open=True, allow_inf=True,
                                 where=AGENT_ID))  # fmt: skip
        if not (isinstance(self.beta, str) and self.beta == "theory"):
            if isinstance(self.beta, str):
                raise ConfigError(f"{AGENT_ID}: beta: expected a number >= 0 or 'theory', got "
                                  f"{self.beta!r}")  # fmt: skip
            set_("beta", check_real("beta", self.beta, low=0.0, where=AGENT_ID))
        set_("lam", check_real("lam", self.lam, low=0.0, low_open=True, where=AGENT_ID))
        set_("use_local", check_flag("use_local", self.use_local, where=AGENT_ID))
        set_("R", check_real("R", self.R, low=0.0, where=AGENT_ID))
        set_("delta", check_real("delta", self.delta, low=0.0, high=1.0, low_open=True,
                                 high_open=True, where=AGENT_ID))  # fmt: skip

    @property
    def counted(self) -> bool:
        """The messages carry the pulls they cover (``beta="theory"`` needs them)."""
        return isinstance(self.beta, str) and self.beta == "theory"

    @property
    def width(self) -> OfulWidth:
        """OFUL's radius of ``beta="theory"`` (:func:`agents.dislinucb.exploration_width`)."""
        return OfulWidth(lam=self.lam, delta=self.delta, R=self.R)


@dataclass(frozen=True)
class FedLinAsyncParams:
    """What FedLinUCB reads at run time: M, K, d, the horizon T, ln(1 + alpha) and the
    configuration."""

    num_agents: int
    num_arms: int
    dim: int
    horizon: int
    log_ratio: float
    config: FedLinUCBAsyncConfig


def stats_size(dim: int, counted: bool = False) -> int:
    """Floats of one message: a Gram matrix (d^2), a vector (d) and, with ``beta="theory"``,
    the pulls they cover (1)."""
    return dim * dim + dim + int(counted)


def fed_lin_async_params(config: FedLinUCBAsyncConfig, facts: FederationFacts) -> FedLinAsyncParams:
    """The :class:`FedLinAsyncParams` of a validated configuration on a federation; checks the
    family, the event clock and the channels. Pure: the numpy ``reset`` and the JAX
    ``make_params`` call it."""
    d = check_linear(AGENT_ID, facts)
    size = stats_size(d, config.counted)
    check_async_federation(AGENT_ID, facts, size, size)
    return FedLinAsyncParams(facts.num_agents, facts.num_arms, d, facts.horizon,
                             log_threshold(1.0 + config.alpha), config)  # fmt: skip


class FedLinUCBAsync(AsyncEventTeam):
    """Batched FedLinUCB of He et al. (module docstring)."""

    agent_id = AGENT_ID
    version = VERSION
    privacy_epsilon = math.inf

    def __init__(self, alpha: float = 1.0, beta: float | str = 0.5, lam: float = 1.0,
                 use_local: bool = False, R: float = 0.1, delta: float = 0.1):  # fmt: skip
        self.config = FedLinUCBAsyncConfig(alpha, beta, lam, use_local, R, delta)

    def channel_spec(self, config: EnvConfig) -> dict[str, dict[str, Any]]:
        return channels_of(config, self.config.counted)

    # ------------------------------------------------------------------ reset
    def reset(self, facts: FederationFacts, rng: BatchedRNG) -> None:
        """Every client and the server at ``lambda I`` (:func:`fed_lin_async_params` checks
        the facts)."""
        p = self.params = fed_lin_async_params(self.config, facts)
        B, N, d, lam = facts.num_runs, p.num_agents, p.dim, self.config.lam
        self.d = d
        eye = lam * np.eye(d)
        self.Phi = np.broadcast_to(eye, (B, N, d, d)).copy()
        self.u = np.zeros((B, N, d))
        self.Phi_loc, self.u_loc = np.zeros((B, N, d, d)), np.zeros((B, N, d))
        self.Phi_inv = np.broadcast_to(np.eye(d) / lam, (B, N, d, d)).copy()
        self.W_inv = self.Phi_inv.copy()  # (Phi + Phi_loc)^-1
        self.logdet = np.full((B, N), d * math.log(lam))  # ln det Phi
        self.logdet_all = self.logdet.copy()  # ln det(Phi + Phi_loc)
        self.Phi_ser, self.u_ser = np.broadcast_to(eye, (B, d, d)).copy(), np.zeros((B, d))
        self.n, self.n_loc, self.n_ser = np.zeros((B, N)), np.zeros((B, N)), np.zeros(B)
        self.exchanges = np.zeros(B, dtype=np.int64)
        self._start(B, N, stats_size(d, self.config.counted), p.horizon)

    # ------------------------------------------------------------------ event
    def _choose(self, obs: VecObservation) -> np.ndarray:
        """Line 6 for the acting client of each run (the others' arms are not pulled)."""
        runs, c = np.arange(self.u.shape[0]), obs.active.argmax(axis=1)
        local = self.config.use_local
        if local:
            v_inv, u = self.W_inv[runs, c], self.u[runs, c] + self.u_loc[runs, c]
        else:
            v_inv, u = self.Phi_inv[runs, c], self.u[runs, c]
        if self.config.counted:
            n = self.n[runs, c] + (self.n_loc[runs, c] if local else 0.0)
            width = exploration_width(n, self.d, self.config.width)
        else:
            width = np.full(len(runs), self.config.beta)
        return acting_arms(obs, v_inv, u, width)

    def _fold(self, obs: VecObservation, fresh: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Lines 8-10 for the client that pulled in each fresh run: the pull into the local
        increments; an upload (a communication step) if the determinant grew by 1 + alpha."""
        r = np.flatnonzero(fresh)
        c = obs.pulled[r].argmax(axis=1)
        x = self._context[r, c, obs.last_arm[r, c]]
        xx, yx = pull_terms(x, obs.last_reward[r, c])
        self.Phi_loc[r, c] += xx
        self.u_loc[r, c] += yx
        self.n_loc[r, c] += 1.0
        self.W_inv[r, c], grown = rank_one(self.W_inv[r, c], x)
        self.logdet_all[r, c] += grown
        fires = ratio_fires(self.logdet_all[r, c], self.logdet[r, c], self.params.log_ratio)
        send = np.zeros(self.u.shape[:2], dtype=bool)
        if not fires.any():
            return send, self._zeros
        ru, cu = r[fires], c[fires]
        send[ru, cu] = True
        payload = np.zeros(self._zeros.shape)
        count = self.n_loc[ru, cu] if self.config.counted else None
        payload[ru, cu] = pack(self.Phi_loc[ru, cu], self.u_loc[ru, cu], count)
        self.Phi_loc[ru, cu], self.u_loc[ru, cu], self.n_loc[ru, cu] = 0.0, 0.0, 0.0
        return send, payload

    def _serve(self, up, runs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Lines 10-11 at the server: the upload into its sums, and the sums back to the
        uploader."""
        r = np.flatnonzero(runs)
        dPhi, du, dn = unpack(up.aggregate[r], self.d)
        self.Phi_ser[r] += dPhi
        self.u_ser[r] += du
        if dn is not None:
            self.n_ser[r] += dn
        send = np.zeros(self.u.shape[:2], dtype=bool)
        send[r, self._uploader[r]] = True
        payload = np.zeros(self._zeros.shape)
        count = self.n_ser[r] if self.config.counted else None
        payload[r, self._uploader[r]] = pack(self.Phi_ser[r], self.u_ser[r], count)
        return send, payload

    def _receive(self, down) -> None:
        """Line 12 at the client: the server's sums replace its statistics."""
        rr, cc = np.nonzero(down.received)
        if len(rr) == 0:
            return
        np.add.at(self.exchanges, rr, 1)
        Phi, u, n = unpack(down.payload[rr, cc], self.d)
        self.Phi[rr, cc], self.u[rr, cc] = Phi, u
        if n is not None:
            self.n[rr, cc] = n
        self.Phi_inv[rr, cc] = np.linalg.inv(Phi)
        self.logdet[rr, cc] = np.linalg.slogdet(Phi)[1]
        self.W_inv[rr, cc] = self.Phi_inv[rr, cc]  # the local increments were just cleared
        self.logdet_all[rr, cc] = self.logdet[rr, cc]
