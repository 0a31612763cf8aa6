"""Centralized FedUCB in JAX (Dubey & Pentland, "Differentially-Private Federated Linear Bandits").

Port of :mod:`agents.fed_lin_ucb` (the numpy twin, the model) for one run, batched over the M
agents: Algorithm 1 of the paper (CENTRALIZED FEDUCB) with the repairs listed in docs/linear.md,
"Decisions". Every agent runs LinUCB on ``V = W + U``, ``u~ = w + u_own``: ``(W, w)`` are the last
synchronized, privatized group statistics (the controller's sum of every agent's release, the same
for every agent of the run), ``(U, u_own)`` the agent's own exact data since. The regularizer is
the shifted privacy noise (``W`` starts at ``M rho_min I``), the radius is Proposition 2 (radicand
``2 ln(2/alpha) + ln det V - d ln(M rho_min)``, clamped at 0), and syncs follow the
rarely-switching log-det rule of Algorithm 1,

    (Delta + 1) [ln det(W + U + M (rho_max - rho_min) I) - ln det W] >= D,

with Delta the trials since the last sync and Theorem 1's D by default (``sync_threshold``
overrides it; 0 syncs every trial). Each agent privatizes its whole-history augmented Gram matrix
with the tree-based Gaussian mechanism (:class:`~fedbandit_env.jax.gram_tree.GramTree`, m levels
fixed from the horizon); ``private=False`` releases the exact ``G_i + lambda I``.

The constants (rho_min, rho_max, kappa of Proposition 2 and the tree's sigma_N, shift and depth
from :func:`~fedbandit_env.privacy.linear_privacy_constants`, Theorem 1's D, the fixed schedule,
the spectrum floor) are computed in Python by the numpy twin's ``reset`` (Algorithm 1, line 1),
which also validates the federation's facts; the compiled program uses them as constants.

Communication over two ``server`` channels (aggregate "sum"): ``sync`` (dim 1) carries sync
requests, ``stats`` (dim d^2 + d) the releases (U_hat, u_hat). Timing (``timing``) as the twin:
``"paper"`` (default) syncs at the end of trial t in one communication step (every agent uploads
its release of the data through trial t and receives the sum, used from trial t+1); the trigger
needs the chosen x only, so the request travels with the pull of trial t. ``"latency"`` keeps the
one-step message latency (request with the pull of trial t+1, upload with trial t+2, the sum in
use from trial t+3). ``schedule="fixed"`` syncs after the data-independent trials
ceil(k (T - 1) / n) (paper) or at ceil(k (T - 2) / n) (latency).

Numerics: float32; one Cholesky factor per agent gives ``V^-1 u~``, the widths and ``ln det V``;
log-determinants enter as ``ln det V - d ln(M rho_min)`` summed term by term over the factor's
diagonal (no cancellation of large logs). The factors, solves and W's eigendecomposition are
plain XLA operations, not LAPACK's: on CPU, jaxlib's batched LAPACK kernels deadlocked XLA's
thread pool at B >= 60 runs of M = 100 agents (:mod:`fedbandit_env.jax.linear_kernels`, "Why no
LAPACK"). Counters as the twin, per run: ``n_sync``, ``since_sync``, ``capacity_refusals``
(N,), ``clipped_rewards`` (N,), ``eig_clip_events``. Where the twin raises on an indefinite V
(which the spectrum floor rules out) or warns on a full tree, a compiled program cannot: V's
factor turns NaN, and refusals are counted.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from agents.fed_lin_ucb import STATS, SYNC
from agents.fed_lin_ucb import FedLinUCB as NumpyFedLinUCB
from fedbandit_env.jax.gram_tree import GramTree
from fedbandit_env.jax.linear_kernels import (
    cholesky,
    last_pull,
    logdet_over,
    symmetric_eigen,
    ucb_choice,
)
from fedbandit_env.jax.types import PULL, Action, Observation
from fedbandit_env.policy import FederationFacts
from fedbandit_env.seeding import BatchedRNG
from fedbandit_env.xp import rounding_tolerance


class FedLinUCBState(NamedTuple):
    """One run of centralized FedUCB.

    Group statistics (one broadcast, the same for every agent): ``W`` (d, d), ``logdet_W`` ()
    (``ln det W - d ln(M rho_min)``), ``w`` (d,). Own statistics (N, ...): ``U``, ``u`` since the
    last release, ``flight_U``, ``flight_u`` released but not yet in W, ``G``, ``g`` the whole
    history, ``Q`` (d+1, d+1) the augmented leaf since the last release, ``tree`` the privatizer
    (``()`` when not private), ``last_release`` (N, d^2 + d). Sync state: ``since_sync`` () Delta,
    ``requested`` () a request arrived in the last observation, ``n_sync`` (). Counters:
    ``capacity_refusals`` (N,), ``clipped_rewards`` (N,), ``eig_clip_events`` (). ``context``
    (N, K, d): the decision sets of the step being played."""

    W: jnp.ndarray
    logdet_W: jnp.ndarray
    w: jnp.ndarray
    U: jnp.ndarray
    u: jnp.ndarray
    flight_U: jnp.ndarray
    flight_u: jnp.ndarray
    G: jnp.ndarray
    g: jnp.ndarray
    Q: jnp.ndarray
    tree: Any
    last_release: jnp.ndarray
    since_sync: jnp.ndarray
    requested: jnp.ndarray
    n_sync: jnp.ndarray
    capacity_refusals: jnp.ndarray
    clipped_rewards: jnp.ndarray
    eig_clip_events: jnp.ndarray
    context: jnp.ndarray


def floor_spectrum(W: jnp.ndarray, floor: float) -> tuple[jnp.ndarray, jnp.ndarray]:
    """``W`` (d, d) with its eigenvalues clipped from below at ``floor`` (the FedUCB safeguard,
    :func:`agents.fed_ucb_common.floor_spectrum`), symmetrized; a ``W`` above the floor is kept
    bit for bit. Also returns whether the deficit was more than rounding (a counted event). The
    eigendecomposition is plain XLA (:func:`~fedbandit_env.jax.linear_kernels.symmetric_eigen`),
    not LAPACK's, whose batched CPU kernels can deadlock XLA's thread pool (that module's
    docstring)."""
    vals, vecs = symmetric_eigen(W)
    smallest = vals.min(axis=-1)
    low = smallest < floor
    scale = jnp.maximum(jnp.maximum(1.0, abs(floor)), jnp.abs(vals.max(axis=-1)))
    real = low & (floor - smallest > rounding_tolerance(W.dtype) * scale)
    fixed = (vecs * jnp.maximum(vals, floor)[None, :]) @ vecs.T
    return jnp.where(low, 0.5 * (fixed + fixed.T), W), real


class FedLinUCB:
    """Centralized FedUCB (see the module docstring; port of :class:`agents.FedLinUCB`)."""

    agent_id = "fed_lin_ucb"
    version = 2  # results version of the twin (docs/bench.md)

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
        # the twin validates the hyperparameters (FedLinUCBConfig) and, in init, the facts
        self.twin = NumpyFedLinUCB(
            epsilon, delta, alpha, private, sync_threshold, schedule, num_syncs, beta_scale,
            lam, sigma, S, L, B, eig_floor, timing,
        )  # fmt: skip
        self.config = self.twin.config
        self.paper = self.config.timing == "paper"

    @property
    def privacy_epsilon(self) -> float:
        """Declared guarantee: (epsilon, delta)-DP per agent (``inf`` when ``private=False``)."""
        return self.twin.privacy_epsilon

    def channel_spec(self, config) -> Any:
        return self.twin.channel_spec(config)

    # ------------------------------------------------------------------- init
    def init(self, key: jax.Array, facts: FederationFacts) -> FedLinUCBState:
        """Algorithm 1 line 1: ``W = M rho_min I``, zero own statistics, the privatizer trees
        with the constants of Proposition 2, and Theorem 1's D (or ``sync_threshold``), all
        computed by the numpy twin's ``reset`` on the same facts."""
        twin = self.twin
        twin.reset(facts, BatchedRNG([np.random.SeedSequence(0)]))
        d, n = twin.d, twin.M
        self.d, self.M = d, n
        self.rho_min, self.rho_max, self.kappa = twin.rho_min, twin.rho_max, twin.kappa
        self.scale = n * twin.rho_min  # logdets are taken relative to (M rho_min)^d
        self.threshold = float(twin.threshold)
        self.eig_floor = float(twin.eig_floor)
        self.fixed = self.config.schedule == "fixed"
        self.fixed_trials = np.asarray(twin._fixed_trials, np.int32) if self.fixed else None
        self.tree = GramTree.from_constants(twin.constants, (n,)) if twin.private else None
        eye = np.eye(d, dtype=np.float32)
        self._inflate = np.float32(n * (twin.rho_max - twin.rho_min)) * eye
        k, s = facts.num_arms, d + 1
        zeros = lambda *shape: jnp.zeros(shape, jnp.float32)  # noqa: E731
        return FedLinUCBState(
            W=jnp.asarray(np.float32(n * twin.rho_min) * eye),
            logdet_W=jnp.zeros((), jnp.float32),
            w=zeros(d),
            U=zeros(n, d, d), u=zeros(n, d),
            flight_U=zeros(n, d, d), flight_u=zeros(n, d),
            G=zeros(n, d, d), g=zeros(n, d),
            Q=zeros(n, s, s),
            tree=self.tree.init() if self.tree is not None else (),
            last_release=zeros(n, d * d + d),
            since_sync=jnp.zeros((), jnp.int32),
            requested=jnp.zeros((), bool),
            n_sync=jnp.zeros((), jnp.int32),
            capacity_refusals=jnp.zeros(n, jnp.int32),
            clipped_rewards=jnp.zeros(n, jnp.int32),
            eig_clip_events=jnp.zeros((), jnp.int32),
            context=zeros(n, k, d),
        )  # fmt: skip

    # -------------------------------------------------------------- the trial
    def act(self, key: jax.Array, state: FedLinUCBState, obs: Observation):
        """One trial of Algorithm 1 under the configured ``timing`` (module docstring)."""
        fresh = (obs.phase == PULL) & (obs.pulls > 0)  # the last step was a trial
        s = self._fold(state, obs, fresh)
        s = self._receive(s, obs)
        due = self._sync_due(obs, fresh) if self.paper else self._upload_now(obs, s)
        s = self._release(key, s, due)
        V = s.W + s.flight_U + s.U  # flight: only in syncing runs under the paper timing
        u = s.w + s.flight_u + s.u
        chol = cholesky(V)
        arms = ucb_choice(obs.context, chol, u, self.radius(chol))
        if self.paper:
            request = self._request_after(s, obs.context, arms, due)
        else:
            request = self._request(s, due)
        n = self.M
        messages = {
            SYNC: (request, jnp.ones((n, 1), jnp.float32)),
            STATS: (jnp.broadcast_to(due, (n,)), s.last_release),
        }
        pull = ~due if self.paper else jnp.ones((), bool)
        return Action(arms, messages, pull), s._replace(context=obs.context)

    def _fold(self, s: FedLinUCBState, obs: Observation, fresh) -> FedLinUCBState:
        """Algorithm 1: the last pull's ``x x^T`` and ``y x`` into the agent's own statistics
        (``U, u, G, g`` and the leaf ``Q`` of ``z = [x; y]``); a private agent clips y to
        [-B, B] first. Delta counts the trial."""
        x, y = last_pull(s.context, obs)
        clipped = s.clipped_rewards
        if self.config.private:  # the privacy calibration needs |y| <= B
            B = self.config.B
            yc = jnp.clip(y, -B, B)
            clipped = clipped + (yc != y).astype(jnp.int32)
            y = yc
        xx = jnp.einsum("ni,nj->nij", x, x)
        z = jnp.concatenate([x, y[:, None]], axis=-1)
        yx = y[:, None] * x
        return s._replace(
            U=s.U + xx, u=s.u + yx, G=s.G + xx, g=s.g + yx,
            Q=s.Q + jnp.einsum("ni,nj->nij", z, z),
            since_sync=s.since_sync + fresh.astype(jnp.int32),
            clipped_rewards=clipped,
        )  # fmt: skip

    def _receive(self, s: FedLinUCBState, obs: Observation) -> FedLinUCBState:
        """The controller's sum of the releases (Algorithm 1's sync): the new ``W`` (spectrum
        floored) and ``w`` replace the old ones; own data released with it leaves ``flight``."""
        stats = obs.deliveries[STATS]
        arrived = stats.count > 0
        d = self.d
        total = stats.aggregate.astype(jnp.float32)
        W, real = floor_spectrum(total[: d * d].reshape(d, d), self.eig_floor)
        logdet_W = logdet_over(cholesky(W), self.scale)
        keep = lambda new, old: jnp.where(arrived, new, old)  # noqa: E731
        return s._replace(
            W=keep(W, s.W),
            logdet_W=keep(logdet_W, s.logdet_W),
            w=keep(total[d * d :], s.w),
            flight_U=keep(0.0, s.flight_U),
            flight_u=keep(0.0, s.flight_u),
            since_sync=keep(0, s.since_sync),
            n_sync=s.n_sync + arrived.astype(jnp.int32),
            eig_clip_events=s.eig_clip_events + (arrived & real).astype(jnp.int32),
            requested=obs.deliveries[SYNC].count > 0,
        )

    def _is_fixed_trial(self, t: jnp.ndarray) -> jnp.ndarray:
        """Whether ``t`` is one of the fixed schedule's trials (sorted, searched)."""
        trials = jnp.asarray(self.fixed_trials)
        i = jnp.clip(jnp.searchsorted(trials, t), 0, trials.shape[0] - 1)
        return trials[i] == t

    def _sync_due(self, obs: Observation, fresh) -> jnp.ndarray:
        """Whether the run syncs now, right after the trial just pulled (paper timing)."""
        if self.fixed:
            return fresh & self._is_fixed_trial(obs.pulls)
        if self.threshold == 0.0:
            return fresh
        return fresh & (obs.deliveries[SYNC].count > 0)

    def _upload_now(self, obs: Observation, s: FedLinUCBState) -> jnp.ndarray:
        """Latency timing: whether the agents upload their releases with this pull."""
        if self.fixed:
            return self._is_fixed_trial(obs.step)
        if self.threshold == 0.0:  # D = 0: everyone knows a sync follows every trial
            return obs.step > 0
        return s.requested & (obs.step > 0)

    def _release(self, key: jax.Array, s: FedLinUCBState, upload) -> FedLinUCBState:
        """Every agent of an uploading run releases its whole-history statistics: the tree's
        noisy prefix sum (private) or ``G + lambda I`` and ``g``; its own data since the last
        release moves to ``flight`` (in W once the sum arrives)."""
        d, n = self.d, self.M
        mask = jnp.broadcast_to(upload, (n,))
        tree, refusals = s.tree, s.capacity_refusals
        if self.tree is not None:
            rel, tree = self.tree.release(key, s.tree, s.Q, mask)
            refusals = refusals + (mask & ~rel.released).astype(jnp.int32)
            U_hat, u_hat = rel.U_hat, rel.u_hat
        else:
            U_hat = s.G + jnp.float32(self.config.lam) * jnp.eye(d, dtype=jnp.float32)
            u_hat = s.g
        fresh = jnp.concatenate([U_hat.reshape(n, d * d), u_hat], axis=-1)
        up, up2 = mask[:, None], mask[:, None, None]
        return s._replace(
            last_release=jnp.where(up, fresh, s.last_release),
            flight_U=jnp.where(up2, s.flight_U + s.U, s.flight_U),
            flight_u=jnp.where(up, s.flight_u + s.u, s.flight_u),
            U=jnp.where(up2, 0.0, s.U),
            u=jnp.where(up, 0.0, s.u),
            Q=jnp.where(up2, 0.0, s.Q),
            tree=tree,
            capacity_refusals=refusals,
        )

    def _fires(self, s: FedLinUCBState, total: jnp.ndarray) -> jnp.ndarray:
        """Algorithm 1's trigger ``(Delta + 1) [ln det total - ln det W] >= D`` per agent."""
        lhs = logdet_over(cholesky(total + jnp.asarray(self._inflate)), self.scale) - s.logdet_W
        return (s.since_sync.astype(jnp.float32) + 1.0) * lhs >= self.threshold

    def _request_after(self, s: FedLinUCBState, context, arms, due) -> jnp.ndarray:
        """Paper timing: the trigger after the trial about to be played, with ``U + x x^T`` (it
        needs x only, so the request travels with the pull)."""
        if self.fixed or self.threshold == 0.0:
            return jnp.zeros(self.M, bool)
        x = context[jnp.arange(self.M), arms]
        fire = self._fires(s, s.W + s.U + jnp.einsum("ni,nj->nij", x, x))
        return fire & ~due

    def _request(self, s: FedLinUCBState, upload) -> jnp.ndarray:
        """Latency timing: the trigger on ``W + flight + U``; no request while a sync is under
        way."""
        if self.fixed or self.threshold == 0.0:
            return jnp.zeros(self.M, bool)
        return self._fires(s, s.W + s.flight_U + s.U) & ~upload

    def radius(self, chol: jnp.ndarray) -> jnp.ndarray:
        """Proposition 2 for the group of M agents (radicand with ``ln det V``, clamped at 0),
        times beta_scale: sigma sqrt(2 ln(2/alpha) + ln det V - d ln(M rho_min)) + S sqrt(M
        rho_max) + kappa sqrt(M)."""
        cfg, m = self.config, self.M
        radicand = 2.0 * math.log(2.0 / cfg.alpha) + logdet_over(chol, self.scale)
        beta = (
            cfg.sigma * jnp.sqrt(jnp.maximum(radicand, 0.0))
            + cfg.S * math.sqrt(m * self.rho_max)
            + self.kappa * math.sqrt(m)
        )
        return cfg.beta_scale * beta
