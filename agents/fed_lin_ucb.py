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
:func:`~fedbandit_env.linear_kernels.linear_privacy_constants`); ``private=False`` releases the exact
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
from typing import Any

import numpy as np

from agents.channel_check import check_channel_spec
from agents.fed_ucb_common import FedUCBBase, LinearFedUCBConfig, regularizer
from fedbandit_env.config import EnvConfig
from fedbandit_env.engine import PULL, VecObservation
from fedbandit_env.errors import ConfigError
from fedbandit_env.kernels import check_linear, ucb_choice
from fedbandit_env.linear_kernels import GramTreeConstants, rarely_switching
from fedbandit_env.policy import FederationFacts, TeamAction, check_timing
from fedbandit_env.privacy import GramTreePrivatizer
from fedbandit_env.seeding import BatchedRNG
from fedbandit_env.validation import MAX_HORIZON, check_int
from fedbandit_env.xp import is_zero, namespace

AGENT_ID = "fed_lin_ucb"
VERSION = 2  # results version (docs/bench.md): 2, the paper's timing by default (1: latency)
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


def fedlin_channel_spec(dim: int) -> dict[str, dict[str, Any]]:
    """Two ``server`` channels, aggregate "sum": ``sync`` (dim 1) for the requests and ``stats``
    (dim d^2 + d) for the releases (U_hat, u_hat)."""
    return {
        SYNC: {"kind": "server", "dim": 1, "aggregate": "sum"},
        STATS: {"kind": "server", "dim": dim * dim + dim, "aggregate": "sum"},
    }


@dataclass(frozen=True)
class FedLinParams:
    """What centralized FedUCB reads at run time on one federation (Algorithm 1, line 1): M, K,
    d, T; the privacy ``constants`` of Section 4.3 (None when not private), Proposition 2's
    ``rho_min``, ``rho_max``, ``kappa``; the sync ``threshold`` D (Theorem 1's, or the user's);
    the spectrum floor; the fixed schedule's sync trials (``()``: adaptive); the
    configuration."""

    num_agents: int
    num_arms: int
    dim: int
    horizon: int
    constants: GramTreeConstants | None
    rho_min: float
    rho_max: float
    kappa: float
    threshold: float
    eig_floor: float
    fixed_trials: tuple[int, ...]
    config: FedLinUCBConfig
    trigger_shift: float = 0.0
    """``M (rho_max - rho_min)``, the trigger's regularization on top of V (one float64 product,
    so a compiled program that takes it as an argument rounds it once, as a constant)."""

    @property
    def paper(self) -> bool:
        """Whether a sync is a communication step (``timing="paper"``)."""
        return self.config.timing == "paper"


def fedlin_params(config: FedLinUCBConfig, facts: FederationFacts) -> FedLinParams:
    """The :class:`FedLinParams` of a validated configuration on a federation; checks the family,
    the channels (participation 1), a horizon of at least 3 trials and a fixed schedule's
    ``num_syncs`` against it. Pure: the numpy ``reset`` and the JAX ``make_params`` call it."""
    d = check_linear(AGENT_ID, facts)
    check_channel_spec(AGENT_ID, fedlin_channel_spec(d), facts)
    for name in (SYNC, STATS):
        if facts.channels[name].get("participation", 1.0) != 1.0:
            raise ConfigError(f"{AGENT_ID}: channels.{name}.participation: expected 1")
    M, T = facts.num_agents, facts.horizon
    if T < 3:
        raise ConfigError(f"{AGENT_ID}: horizon: expected at least 3 trials, got {T}")
    # latency: the release of trial t_k's data goes out with trial t_k + 1 and is in use from
    # t_k + 2, so the schedule spreads over T - 2 trials to complete every sync; paper: a sync
    # after trial T would never be used, so it spreads over T - 1
    span = T - 1 if config.timing == "paper" else T - 2
    fixed = config.schedule == "fixed"
    if fixed and config.num_syncs > span:
        raise ConfigError(
            f"{AGENT_ID}: num_syncs: expected at most horizon - {T - span} = {span} (distinct "
            f"sync trials of the fixed schedule), got {config.num_syncs}"
        )
    n_max = config.num_syncs if fixed else None
    c, rho_min, rho_max, kappa = regularizer(config, d, M, T, n_max=n_max)
    if c is not None:
        default_D = c.sync_threshold
    else:
        ell = math.log(1.0 + T * config.L**2 / (d * config.lam))
        default_D = 2.0 * T * d / (ell + 1.0)
    threshold = default_D if config.sync_threshold is None else config.sync_threshold
    eig_floor = rho_min if config.eig_floor is None else config.eig_floor
    trials = ()
    if fixed:
        k = np.arange(1, config.num_syncs + 1)
        trials = tuple(np.ceil(k * span / config.num_syncs).astype(np.int64).tolist())
    return FedLinParams(M, facts.num_arms, d, T, c, rho_min, rho_max, kappa, threshold,
                        eig_floor, trials, config, trigger_shift=M * (rho_max - rho_min))  # fmt: skip


def is_fixed_trial(trials: tuple[int, ...], t: Any) -> Any:
    """Whether trial ``t`` is one of the fixed schedule's sync trials (sorted ``trials``)."""
    xp = namespace(t)
    trials = xp.asarray(trials)
    i = xp.clip(xp.searchsorted(trials, t), 0, trials.shape[0] - 1)
    return trials[i] == t


def sync_due(params: FedLinParams, fresh: Any, pulls: Any, requested: Any) -> Any:
    """The runs whose agents release now, with the trial just pulled (``fresh``; ``pulls``
    trials so far): after the fixed schedule's trials, after every trial with D = 0 (everyone
    knows a sync follows), else when a request arrived (``requested``). Paper timing: the sync
    is the communication step that follows the trial; latency: the releases travel with this
    step's pull (the request was sent with the last one)."""
    if params.fixed_trials:
        return fresh & is_fixed_trial(params.fixed_trials, pulls)
    if is_zero(params.threshold):
        return fresh
    return fresh & requested


class FedLinUCB(FedUCBBase):
    """Centralized FedUCB (see the module docstring)."""

    agent_id = AGENT_ID
    version = VERSION

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
        return fedlin_channel_spec(config.linear.dim if config.linear is not None else 1)

    # ------------------------------------------------------------------ reset
    def reset(self, facts: FederationFacts, rng: BatchedRNG) -> None:
        """Algorithm 1 line 1 (:func:`fedlin_params`): ``W = M rho_min I`` and its log-det, zero
        own statistics, the privatizer trees with the constants of Proposition 2, and
        Theorem 1's D (or ``sync_threshold``)."""
        p = self.params = fedlin_params(self.config, facts)  # checks the facts
        d, n_agents = p.dim, p.num_agents
        self.d, self.M, self.T = d, n_agents, p.horizon
        self.constants, self.threshold = p.constants, p.threshold
        self.rho_min, self.rho_max, self.kappa = p.rho_min, p.rho_max, p.kappa
        self.tree = None
        if p.constants is not None:
            self.tree = GramTreePrivatizer.from_constants(
                p.constants, (n_agents,), rng=rng.child("privacy")
            )
        runs = facts.num_runs
        shape = (runs, n_agents)
        eye = np.eye(d)
        self.W = np.broadcast_to(n_agents * self.rho_min * eye, (*shape, d, d)).copy()
        self.logdet_W = self.logdet(self.W)  # ln det W (B, N), new with every sync
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
        self._ones = np.ones((*shape, 1))
        self._last_release = np.zeros((*shape, d * d + d))

    # ------------------------------------------------------------- the trial
    def act(self, obs: VecObservation) -> TeamAction:
        """One trial of Algorithm 1 under the configured ``timing`` (module docstring): fold in
        the last pull, take the controller's sum, release where a sync is due, choose, and
        request a sync when the trigger fires."""
        fresh = (obs.phase == PULL) & (obs.pulls > 0)  # the last step was a trial
        if fresh.any():
            into = (self.U, self.u, self.G, self.g, self.Q)
            self.fold(obs, self._context, self._rows, into, runs=fresh)
            self.since_sync += fresh
        self._receive(obs)
        due = sync_due(self.params, fresh, obs.pulls, obs.deliveries[SYNC].count > 0)
        payload = self._release(due) if due.any() else self._last_release
        V = self.W + self.flight_U + self.U  # paper timing: flight only in syncing runs
        u = self.w + self.flight_u + self.u
        arms = ucb_choice(obs.context, V, u, self.radius(V, self.M))
        request = self._request(obs.context, arms, due)
        self._context = obs.context
        send_stats = np.broadcast_to(due[:, None], self._ones.shape[:2])
        pull = ~due if self.paper and due.any() else None
        return TeamAction(arms, {SYNC: (request, self._ones), STATS: (send_stats, payload)}, pull)

    def _receive(self, obs: VecObservation) -> None:
        """The controller's sum of the releases (Algorithm 1's sync): the new ``W`` (spectrum
        floored) and ``w`` replace the old ones; own data released with it leaves ``flight``."""
        stats = obs.deliveries[STATS]
        arrived = stats.count > 0
        if arrived.any():
            d = self.d
            total = stats.aggregate[arrived]
            W = self.floor_W(total[:, : d * d].reshape(-1, d, d), np.flatnonzero(arrived))
            self.W[arrived] = W[:, None]
            self.logdet_W[arrived] = self.logdet(W)[:, None]
            self.w[arrived] = total[:, None, d * d :]
            self.flight_U[arrived] = 0.0
            self.flight_u[arrived] = 0.0
            self.since_sync[arrived] = 0
            self.n_sync[arrived] += 1

    def _release(self, upload: np.ndarray) -> np.ndarray:
        """Every agent of the uploading runs releases its whole-history statistics (the tree's
        noisy prefix sum, or ``G + lambda I`` and ``g``); its own data since the last release
        moves to ``flight`` (in W once the sum arrives)."""
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

    def _request(self, context: np.ndarray, arms: np.ndarray, due: np.ndarray) -> np.ndarray:
        """Algorithm 1's trigger ``(Delta + 1) [ln det(W + U + M (rho_max - rho_min) I) - ln det
        W] >= D``, none while a sync is under way. Paper timing: after the trial about to be
        played, with ``U + x x^T`` (the trigger needs x only, so the request travels with the
        pull); latency: on the data so far, ``W + flight + U``."""
        if self.params.fixed_trials or self.threshold == 0.0:
            return np.zeros(self.W.shape[:2], dtype=bool)
        total = self.W + self.flight_U + self.U
        if self.paper:
            b, i = self._rows
            x = context[b, i, arms]
            total = total + np.einsum("bni,bnj->bnij", x, x)
        weight = self.since_sync[:, None] + 1.0
        fire = rarely_switching(self.logdet(total + self._inflate), self.logdet_W, weight,
                                self.threshold)  # fmt: skip
        return fire & ~due[:, None]
