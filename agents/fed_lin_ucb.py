"""Centralized FedUCB (Dubey & Pentland, "Differentially-Private Federated Linear Bandits").

Algorithm 1 of the paper (CENTRALIZED FEDUCB), with the repairs listed in docs/linear.md,
"Decisions". Every agent runs LinUCB on ``V = W + U``, ``u~ = w + u_own``: ``(W, w)`` are the last
synchronized, privatized group statistics (the controller's sum of every agent's release),
``(U, u_own)`` the agent's own exact data since. The regularizer is the shifted privacy noise
(``W`` starts at ``M rho_min I``), the radius is Proposition 2 (radicand
``2 ln(2/alpha) + ln det V - d ln(M rho_min)``, clamped at 0), and syncs follow the
rarely-switching log-det rule of Algorithm 1,

    (Delta + 1) [ln det(W + U + M (rho_max - rho_min) I) - ln det W] >= D,

with Delta the trials since the last sync and Theorem 1's D by default (``sync_threshold`` overrides it; 0 syncs every trial). Each agent privatizes its
whole-history augmented Gram matrix with the tree-based Gaussian mechanism
(:class:`~fedbandit_env.privacy.GramTreePrivatizer`, constants of Proposition 2 from
:func:`~fedbandit_env.privacy.linear_privacy_constants`); ``private=False`` releases the exact
``G_i + lambda I`` (non-private FedUCB).

Communication over two ``server`` channels (aggregate "sum"): ``sync`` (dim 1) carries sync
requests, ``stats`` (dim d^2 + d) the releases (U_hat, u_hat).

Timing (``timing``, docs/writing-agents.md, "Communication steps"). ``"paper"`` (the default)
syncs at the end of trial t, after all M agents have acted on the state before it. The trigger
depends on the chosen x only (not on the reward), so an agent knows with its choice of trial t
whether its trigger fires after the trial and sends its request with that pull; the request reaches
everybody in that step's observation, and every agent of the run then takes one communication step
in which it uploads its release (data through trial t) and receives the sum, used from trial t+1 on.
With ``sync_threshold=0`` a sync follows every trial and nobody needs to request it.
``schedule="fixed"`` syncs after the data-independent trials ceil(k (T - 1) / n), k = 1..n
(T - 1 so that the last sync is used), so the sync pattern reveals nothing about the data.

``"latency"`` keeps the environment's one-step message latency (a sync 3 trials after its
trigger): an agent whose trigger fires after trial t requests a sync with its pull of trial t+1;
everybody sees the request in that step's observation and uploads its release (data through
trial t+1) with the pull of trial t+2; the sum reaches every agent's decisions from trial t+3.
Data released but not yet in W stays in the agent's own statistics meanwhile, so nothing is lost
or counted twice. With ``sync_threshold=0`` every agent uploads every step without requests (the
trial-t data then reaches the decisions of trial t+2); the fixed schedule syncs at
ceil(k (T - 2) / n) (T - 2 so the last sync completes within the horizon).

With ``num_syncs = n`` the tree depth is m = 1 + ceil(log2 n). When a tree is full the agent
re-sends its last release (no new privacy spent) and reports it in ``capacity_refusals``.
``beta_scale`` multiplies the radius (default 1 = theory); report it with every result.
A private agent clips rewards to [-B, B] (``B``, default 1; counted in ``clipped_rewards``) and
floors the spectrum of every synchronized W at ``eig_floor`` (counted in
``eig_clip_events``), see :mod:`agents.fed_ucb_common`. ``n_sync`` counts completed syncs per run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from agents.channel_check import check_channels
from agents.fed_ucb_common import FedUCBBase, LinearFedUCBConfig
from fedbandit_env.config import EnvConfig
from fedbandit_env.engine import PULL, VecObservation
from fedbandit_env.errors import ConfigError
from fedbandit_env.kernels import check_linear, ucb_choice
from fedbandit_env.policy import FederationFacts, TeamAction, check_timing
from fedbandit_env.privacy import GramTreePrivatizer, linear_privacy_constants
from fedbandit_env.seeding import BatchedRNG
from fedbandit_env.validation import MAX_HORIZON, check_int

SYNC, STATS = "sync", "stats"


@dataclass(frozen=True)
class FedLinUCBConfig(LinearFedUCBConfig):
    """The shared FedUCB hyperparameters plus the sync ``schedule`` (``"adaptive"``: the log-det
    rule; ``"fixed"``: ``num_syncs`` data-independent syncs) and the ``timing`` of a sync
    (``"paper"``: a communication step; ``"latency"``: messages travel with the pulls)."""

    schedule: str = "adaptive"
    num_syncs: int | None = None
    timing: str = "paper"

    def __post_init__(self) -> None:
        aid = self.agent_id
        check_timing(aid, self.timing)
        super().__post_init__()
        if not isinstance(self.schedule, str) or self.schedule not in ("adaptive", "fixed"):
            raise ConfigError(
                f"{aid}: schedule: expected 'adaptive' or 'fixed', got {self.schedule!r}"
            )
        if self.schedule == "fixed" or self.num_syncs is not None:
            num_syncs = check_int(
                "num_syncs",
                self.num_syncs,
                hint="with schedule='fixed'",
                minimum=1,
                maximum=MAX_HORIZON,
                where=aid,
            )
            object.__setattr__(self, "num_syncs", num_syncs)


class FedLinUCB(FedUCBBase):
    """Centralized FedUCB (see the module docstring)."""

    agent_id = "fed_lin_ucb"
    version = 2  # results version (docs/bench.md)

    def __init__(
        self,
        epsilon: float = 1.0,
        delta: float = 0.1,
        alpha: float = 0.1,
        private: bool = True,
        sync_threshold: float | None = None,
        schedule: str = "adaptive",
        num_syncs: int | None = None,
        beta_scale: float = 1.0,
        lam: float = 1.0,
        sigma: float = 0.5,
        S: float = 1.0,
        L: float = 1.0,
        B: float = 1.0,
        eig_floor: float | None = None,
        timing: str = "paper",
    ):
        config = FedLinUCBConfig(
            self.agent_id,
            epsilon,
            delta,
            alpha,
            private,
            sync_threshold,
            beta_scale,
            lam,
            sigma,
            S,
            L,
            B,
            eig_floor,
            schedule,
            num_syncs,
            timing,
        )
        super().__init__(config)
        self.timing, self.paper = config.timing, config.timing == "paper"
        self.schedule, self.num_syncs = config.schedule, config.num_syncs

    def channel_spec(self, config: EnvConfig):
        d = config.linear.dim if config.linear is not None else 1
        return {
            SYNC: {"kind": "server", "dim": 1, "aggregate": "sum"},
            STATS: {"kind": "server", "dim": d * d + d, "aggregate": "sum"},
        }

    # ------------------------------------------------------------------ reset
    def reset(self, facts: FederationFacts, rng: BatchedRNG) -> None:
        """Algorithm 1 line 1: ``W = M rho_min I``, zero own statistics, the privatizer trees
        with the constants of Proposition 2, and Theorem 1's D (or ``sync_threshold``)."""
        d = check_linear(self.agent_id, facts)
        check_channels(self, facts)
        for name in (SYNC, STATS):
            if facts.channels[name].get("participation", 1.0) != 1.0:
                raise ConfigError(f"{self.agent_id}: channels.{name}.participation: expected 1")
        n_agents, horizon = facts.num_agents, facts.horizon
        if horizon < 3:
            raise ConfigError(
                f"{self.agent_id}: horizon: expected at least 3 trials, got {horizon}"
            )
        span = horizon - 1 if self.paper else horizon - 2  # trials the fixed schedule spans
        if self.schedule == "fixed" and self.num_syncs > span:
            raise ConfigError(
                f"{self.agent_id}: num_syncs: expected at most horizon - {horizon - span} = "
                f"{span} (distinct sync trials of the fixed schedule), got {self.num_syncs}"
            )
        self.d, self.M, self.T = d, n_agents, horizon
        self.tree = None
        if self.private:
            n_max = self.num_syncs if self.schedule == "fixed" else None
            c = linear_privacy_constants(
                self.epsilon,
                self.delta,
                d,
                n_agents,
                horizon,
                alpha=self.alpha,
                L=self.L,
                B=self.B,
                n_max=n_max,
            )
            self.constants = c
            self.rho_min, self.rho_max, self.kappa = c.rho_min, c.rho_max, c.kappa
            default_D = c.sync_threshold
            self.tree = GramTreePrivatizer.from_constants(c, (n_agents,), rng=rng.child("privacy"))
        else:
            self.constants = None
            self.rho_min = self.rho_max = self.lam
            self.kappa = 0.0
            ell = math.log(1.0 + horizon * self.L**2 / (d * self.lam))
            default_D = 2.0 * horizon * d / (ell + 1.0)
        self.threshold = default_D if self.D is None else self.D
        runs = facts.num_runs
        shape = (runs, n_agents)
        eye = np.eye(d)
        self.W = np.broadcast_to(n_agents * self.rho_min * eye, (*shape, d, d)).copy()
        self._logdet_W: np.ndarray | None = None  # ln det W, kept until W changes (a sync)
        self.w = np.zeros((*shape, d))
        self.U, self.u = np.zeros((*shape, d, d)), np.zeros((*shape, d))
        self.flight_U, self.flight_u = np.zeros((*shape, d, d)), np.zeros((*shape, d))
        self.Q = np.zeros((*shape, d + 1, d + 1))
        self.G, self.g = np.zeros((*shape, d, d)), np.zeros((*shape, d))
        self.since_sync = np.zeros(runs)  # Delta: trials since the last completed sync
        self.n_sync = np.zeros(runs, dtype=np.int64)
        self.capacity_refusals = np.zeros(shape, dtype=np.int64)
        self.init_safeguards(runs, n_agents)
        self._inflate = n_agents * (self.rho_max - self.rho_min) * eye
        self._rows = np.indices(shape)
        self._context = None
        self._requested = np.zeros(runs, dtype=bool)
        self._ones = np.ones((*shape, 1))
        self._last_release = np.zeros((*shape, d * d + d))
        self._syncing = np.zeros(runs, dtype=bool)
        if self.schedule == "fixed":
            k = np.arange(1, self.num_syncs + 1)
            # latency: the release of trial t_k's data goes out with trial t_k + 1 and is in use
            # from t_k + 2, so the schedule spreads over T - 2 trials to complete every sync;
            # paper: a sync after trial T would never be used, so it spreads over T - 1
            self._fixed_trials = np.ceil(k * span / self.num_syncs).astype(np.int64)
            self._fixed = set(self._fixed_trials.tolist())

    # ------------------------------------------------------------- the trial
    def act(self, obs: VecObservation) -> TeamAction:
        """One trial of Algorithm 1 under the configured ``timing`` (module docstring)."""
        if self.paper:
            return self._act_paper(obs)
        if obs.step > 0:
            self._fold(obs)
            self._receive(obs)
        upload = self._upload_now(obs)
        payload = self._release(upload) if upload.any() else self._last_release
        request = self._request(upload)
        V = self.W + self.flight_U + self.U
        u = self.w + self.flight_u + self.u
        arms = ucb_choice(obs.context, V, u, self.radius(V, self.M))
        self._context = obs.context
        send_stats = np.broadcast_to(upload[:, None], self._ones.shape[:2])
        return TeamAction(arms, {SYNC: (request, self._ones), STATS: (send_stats, payload)})

    def _act_paper(self, obs: VecObservation) -> TeamAction:
        """Algorithm 1 with the sync at the end of trial t: one communication step between trial t
        and trial t+1."""
        if obs.step > 0:
            fresh = (obs.phase == PULL) & (obs.pulls > 0)
            if fresh.any():
                into = (self.U, self.u, self.G, self.g, self.Q)
                self.fold(obs, self._context, self._rows, into, runs=fresh)
                self.since_sync += fresh
            self._receive(obs)
        else:
            fresh = np.zeros(self.W.shape[0], dtype=bool)
        due = self._sync_due(obs, fresh)
        payload = self._release(due) if due.any() else self._last_release
        V = self.W + self.flight_U + self.U  # flight: only in syncing runs (arms unused there)
        u = self.w + self.flight_u + self.u
        arms = ucb_choice(obs.context, V, u, self.radius(V, self.M))
        request = self._request_after(obs.context, arms, due)
        self._context = obs.context
        send_stats = np.broadcast_to(due[:, None], self._ones.shape[:2])
        pull = ~due if due.any() else None
        return TeamAction(arms, {SYNC: (request, self._ones), STATS: (send_stats, payload)}, pull)

    def _sync_due(self, obs: VecObservation, fresh: np.ndarray) -> np.ndarray:
        """Runs that sync now, right after the trial just pulled (paper timing)."""
        if self.schedule == "fixed":
            return fresh & np.isin(obs.pulls, self._fixed_trials)
        if self.threshold == 0.0:
            return fresh
        return fresh & (obs.deliveries[SYNC].count > 0)

    def _request_after(self, context: np.ndarray, arms: np.ndarray, due: np.ndarray):
        """Algorithm 1's trigger after the trial about to be played: (Delta + 1) * lhs >= D with U +
        x x^T (the trigger needs x only, so the request travels with the pull)."""
        if self.schedule == "fixed" or self.threshold == 0.0:
            return np.zeros(self.W.shape[:2], dtype=bool)
        b, i = self._rows
        x = context[b, i, arms]
        total = self.W + self.U + np.einsum("bni,bnj->bnij", x, x) + self._inflate
        lhs = self.logdet(total) - self._w_logdet()
        fire = (self.since_sync[:, None] + 1.0) * lhs >= self.threshold
        return fire & ~due[:, None]

    def _w_logdet(self) -> np.ndarray:
        """``logdet(W)``, computed once per value of W (W changes only when a sync arrives)."""
        if self._logdet_W is None:
            self._logdet_W = self.logdet(self.W)
        return self._logdet_W

    def _fold(self, obs: VecObservation) -> None:
        """Algorithm 1: the last pull's ``x x^T`` and ``y x`` into the agent's own statistics."""
        self.fold(obs, self._context, self._rows, (self.U, self.u, self.G, self.g, self.Q))
        self.since_sync += 1

    def _receive(self, obs: VecObservation) -> None:
        """The controller's sum of the releases (Algorithm 1's sync): the new ``W`` (spectrum
        floored) and ``w`` replace the old ones; own data released with it leaves ``U``."""
        stats = obs.deliveries[STATS]
        arrived = stats.count > 0
        if arrived.any():
            d = self.d
            total = stats.aggregate[arrived]
            W = self.floor_W(total[:, : d * d].reshape(-1, d, d), np.flatnonzero(arrived))
            self.W[arrived] = W[:, None]
            self._logdet_W = None
            self.w[arrived] = total[:, None, d * d :]
            self.flight_U[arrived] = 0.0
            self.flight_u[arrived] = 0.0
            self.since_sync[arrived] = 0
            self.n_sync[arrived] += 1
        self._requested = obs.deliveries[SYNC].count > 0

    def _upload_now(self, obs: VecObservation) -> np.ndarray:
        """Latency timing: the runs whose agents upload their releases with this pull."""
        runs = self.W.shape[0]
        if self.schedule == "fixed":
            return np.full(runs, obs.step in self._fixed)
        if obs.step == 0:
            return np.zeros(runs, dtype=bool)
        if self.threshold == 0.0:  # D = 0: everyone knows a sync follows every trial
            return np.ones(runs, dtype=bool)
        return self._requested

    def _release(self, upload: np.ndarray) -> np.ndarray:
        """Every agent of the uploading runs releases its whole-history statistics."""
        d = self.d
        mask = np.broadcast_to(upload[:, None], upload.shape + (self.M,))
        if self.tree is not None:
            rel = self.tree.release(self.Q, mask)
            refused = mask & ~rel.released
            self.capacity_refusals += refused
            U_hat, u_hat = rel.U_hat, rel.u_hat
        else:
            U_hat, u_hat = self.G + self.lam * np.eye(d), self.g
        fresh = np.concatenate([U_hat.reshape(*U_hat.shape[:2], d * d), u_hat], axis=-1)
        self._last_release = np.where(mask[..., None], fresh, self._last_release)
        up = mask[..., None, None]
        self.flight_U = np.where(up, self.flight_U + self.U, self.flight_U)
        self.flight_u = np.where(mask[..., None], self.flight_u + self.u, self.flight_u)
        self.U = np.where(up, 0.0, self.U)
        self.u = np.where(mask[..., None], 0.0, self.u)
        self.Q = np.where(up, 0.0, self.Q)
        return self._last_release

    def _request(self, upload: np.ndarray) -> np.ndarray:
        """Adaptive trigger (Algorithm 1): (Delta + 1) * lhs >= D; no request while a sync is under
        way."""
        if self.schedule == "fixed" or self.threshold == 0.0:
            return np.zeros(self.W.shape[:2], dtype=bool)
        total = self.W + self.flight_U + self.U + self._inflate
        lhs = self.logdet(total) - self._w_logdet()
        fire = (self.since_sync[:, None] + 1.0) * lhs >= self.threshold
        return fire & ~upload[:, None]
