"""Centralized FedUCB in JAX (Dubey & Pentland, "Differentially-Private Federated Linear Bandits").

The JAX form of :mod:`agents.fed_lin_ucb` (the numpy learner, the model) for one run, batched
over the M agents: Algorithm 1 of the paper (CENTRALIZED FEDUCB) with the repairs listed in docs/linear.md,
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
from :func:`~fedbandit_env.linear_kernels.linear_privacy_constants`, Theorem 1's D, the fixed schedule,
the spectrum floor) are the params (:class:`agents.fed_lin_ucb.FedLinParams`, Algorithm 1,
line 1), made in Python by :func:`agents.fed_lin_ucb.fedlin_params`, which the numpy ``reset``
calls too and which checks the federation's facts; the compiled program uses them as constants.
The formulas both engines compute are written once: the radius
(:func:`fedbandit_env.linear_kernels.confidence_radius`), a pull's statistics and the trigger
(:mod:`fedbandit_env.linear_kernels`), when a sync is due
(:func:`agents.fed_lin_ucb.sync_due`) and the privatizer's tree
(:func:`fedbandit_env.privacy.gram_tree.insert_leaf`).

Communication over two ``server`` channels (aggregate "sum"): ``sync`` (dim 1) carries sync
requests, ``stats`` (dim d^2 + d) the releases (U_hat, u_hat). Timing (``timing``) as numpy:
``"paper"`` (default) syncs at the end of trial t in one communication step (every agent uploads
its release of the data through trial t and receives the sum, used from trial t+1); the trigger
needs the chosen x only, so the request travels with the pull of trial t. ``"latency"`` keeps the
one-step message latency (request with the pull of trial t+1, upload with trial t+2, the sum in
use from trial t+3). ``schedule="fixed"`` syncs after the data-independent trials
ceil(k (T - 1) / n) (paper) or at ceil(k (T - 2) / n) (latency).

The trigger's log-determinant (:func:`trigger_logdet`) needs no factor of its own each trial:
not private, it is V's factor (made for the choice) and the matrix determinant lemma; private,
a factor of ``V + M (rho_max - rho_min) I`` kept in the state and updated by rank one per pull.

Numerics: float32; one Cholesky factor per agent gives ``V^-1 u~``, the widths and ``ln det V``;
log-determinants enter as ``ln det V - d ln(M rho_min)`` summed term by term over the factor's
diagonal (no cancellation of large logs). The factors, solves and W's eigendecomposition are
plain XLA operations, not LAPACK's: on CPU, jaxlib's batched LAPACK kernels deadlocked XLA's
thread pool at B >= 60 runs of M = 100 agents (:mod:`fedbandit_env.jax.linear_kernels`, "Why no
LAPACK"). Counters as numpy, per run: ``n_sync``, ``since_sync``, ``capacity_refusals``
(N,), ``clipped_rewards`` (N,), ``eig_clip_events``. Where numpy raises on an indefinite V
(which the spectrum floor rules out) or warns on a full tree, a compiled program cannot: V's
factor turns NaN, and refusals are counted.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from agents.fed_lin_ucb import (
    AGENT_ID,
    STATS,
    SYNC,
    VERSION,
    FedLinParams,
    FedLinUCBConfig,
    fedlin_channel_spec,
    fedlin_params,
    sync_due,
)
from fedbandit_env.jax.batch import when_any
from fedbandit_env.jax.gram_tree import GramTree
from fedbandit_env.jax.linear_kernels import (
    cholesky,
    cholesky_update,
    last_pull,
    logdet_over,
    logdet_plus_rank_one,
    symmetric_eigen,
    ucb_choice,
)
from fedbandit_env.jax.types import PULL, Action, Observation
from fedbandit_env.linear_kernels import (
    GramTreeConstants,
    clip_rewards,
    confidence_radius,
    pull_terms,
    rarely_switching,
)
from fedbandit_env.policy import FederationFacts
from fedbandit_env.xp import is_zero, rounding_tolerance


class FedLinUCBState(NamedTuple):
    """One run of centralized FedUCB.

    Group statistics (one broadcast, the same for every agent): ``W`` (d, d), ``logdet_W`` ()
    (``ln det W - d ln(M rho_min)``), ``w`` (d,). Own statistics (N, ...): ``U``, ``u`` since the
    last release, ``flight_U``, ``flight_u`` released but not yet in W, ``G``, ``g`` the whole
    history, ``Q`` (d+1, d+1) the augmented leaf since the last release, ``tree`` the privatizer
    (``()`` when not private), ``last_release`` (N, d^2 + d). Sync state: ``since_sync`` () Delta,
    ``n_sync`` (). Counters: ``capacity_refusals`` (N,), ``clipped_rewards`` (N,),
    ``eig_clip_events`` (). ``context`` (N, K, d): the decision sets of the step being played.
    ``trigger`` (N, d, d): the Cholesky factor of ``W + flight + U + M (rho_max - rho_min) I``
    (:func:`trigger_logdet`; ``()`` when no trigger needs it: not private, or no trigger)."""

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
    n_sync: jnp.ndarray
    capacity_refusals: jnp.ndarray
    clipped_rewards: jnp.ndarray
    eig_clip_events: jnp.ndarray
    context: jnp.ndarray
    trigger: Any


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


def keeps_trigger_factor(p: FedLinParams) -> bool:
    """Whether the state keeps the trigger's own factor: a private agent with a log-det
    trigger (:func:`trigger_logdet`)."""
    return p.constants is not None and not (p.fixed_trials or is_zero(p.threshold))


def trigger_inflation(p: FedLinParams) -> jnp.ndarray:
    """``M (rho_max - rho_min) I`` (d, d), the trigger's regularization on top of V."""
    return p.trigger_shift * jnp.eye(p.dim, dtype=jnp.float32)


def trigger_logdet(chol: jnp.ndarray, trigger: Any, x: jnp.ndarray | None, p: FedLinParams):
    """``ln det(V + x x^T + M (rho_max - rho_min) I) - d ln(M rho_min)`` per agent, Algorithm
    1's trigger matrix (``x`` None: without the pull, the latency timing), without a new factor.

    Not private, ``rho_max = rho_min`` and the matrix is ``V + x x^T``: ``chol``, V's factor
    made for this trial's choice, is reused; the matrix determinant lemma gives ``ln det(V + x
    x^T) = ln det V + ln(1 + ||L^-1 x||^2)``
    (:func:`~fedbandit_env.jax.linear_kernels.logdet_plus_rank_one`). Private, the ``+ cI``
    term (``c = M (rho_max - rho_min) > 0``) keeps V's factor from giving the determinant, so
    ``trigger`` is the factor of ``A = V + cI`` itself, kept in the state: ``A`` changes by
    ``x x^T`` with each pull (a rank-1 update of the factor,
    :func:`~fedbandit_env.jax.linear_kernels.cholesky_update`, in :meth:`FedLinUCB._fold`), not
    at a release (U moves into flight: V is unchanged), and is factored anew when a sync's sum
    replaces W (with W's own floor and factor, :meth:`FedLinUCB._receive`); the lemma adds the
    pull about to be played. Either way the determinant is the one a new factor of the trigger
    matrix gives (numpy's ``slogdet``), up to float32 rounding."""
    own = chol if isinstance(trigger, tuple) else trigger
    scale = p.num_agents * p.rho_min
    if x is None:
        return logdet_over(own, scale)
    return logdet_plus_rank_one(own, x, scale)


def gram_tree(constants: GramTreeConstants | None, shape: tuple[int, ...]) -> GramTree | None:
    """The privatizer's trees of the paper's constants (None when not private)."""
    return None if constants is None else GramTree.from_constants(constants, shape)


def pull_statistics(context: jnp.ndarray, obs: Observation, config: Any, clipped: jnp.ndarray):
    """Algorithm 1's update terms of every agent's last pull, ``x x^T``, ``y x`` and the leaf
    ``z z^T`` of ``z = [x; y]`` (zeros where nothing was pulled); a private agent clips y to
    [-B, B] first (the privacy calibration needs |y| <= B), counted in ``clipped``."""
    x, y = last_pull(context, obs)
    if config.private:
        y, hit = clip_rewards(y, config.B)
        clipped = clipped + hit.astype(jnp.int32)
    return (*pull_terms(x, y, leaf=True), clipped)


def private_release(key, s: Any, tree: GramTree | None, mask, lam: float):
    """The releases of the agents in ``mask``: the tree's noisy prefix sums of their leaves
    ``s.Q`` (refusals of full trees counted), or ``G + lambda I`` and ``g`` when not private.
    Returns ``(U_hat, u_hat, tree state, capacity_refusals)``."""
    if tree is None:
        d = s.G.shape[-1]
        return s.G + lam * jnp.eye(d, dtype=jnp.float32), s.g, s.tree, s.capacity_refusals
    rel, state = tree.release(key, s.tree, s.Q, mask)
    refused = (mask & ~rel.released).astype(jnp.int32)
    refused = refused.sum(axis=tuple(range(1, refused.ndim)))  # per agent
    return rel.U_hat, rel.u_hat, state, s.capacity_refusals + refused


class FedLinUCB:
    """Centralized FedUCB (see the module docstring): :class:`agents.FedLinUCB` on JAX, on the
    params protocol (:class:`agents.fed_lin_ucb.FedLinParams`)."""

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
        self.config = FedLinUCBConfig(
            AGENT_ID, epsilon, delta, alpha, private, sync_threshold, beta_scale, lam, sigma, S,
            L, B, eig_floor, schedule, num_syncs, timing,
        )  # fmt: skip

    @property
    def privacy_epsilon(self) -> float:
        """Declared guarantee: (epsilon, delta)-DP per agent (``inf`` when ``private=False``)."""
        return self.config.epsilon

    def channel_spec(self, config) -> Any:
        """``sync`` (dim 1) and ``stats`` (dim d^2 + d), server, aggregate sum."""
        return fedlin_channel_spec(config.linear.dim if config.linear is not None else 1)

    def make_params(self, facts: FederationFacts) -> FedLinParams:
        """Algorithm 1 line 1's constants and every check of the facts:
        :func:`agents.fed_lin_ucb.fedlin_params`."""
        return fedlin_params(self.config, facts)

    # ------------------------------------------------------------------- init
    def init(self, key: jax.Array, params: FedLinParams) -> FedLinUCBState:
        """Algorithm 1 line 1: ``W = M rho_min I``, zero own statistics and empty privatizer
        trees."""
        p = params
        d, n, k, s = p.dim, p.num_agents, p.num_arms, p.dim + 1
        tree = gram_tree(p.constants, (n,))
        zeros = lambda *shape: jnp.zeros(shape, jnp.float32)  # noqa: E731
        return FedLinUCBState(
            W=(n * p.rho_min) * jnp.eye(d, dtype=jnp.float32),
            logdet_W=jnp.zeros((), jnp.float32),
            w=zeros(d),
            U=zeros(n, d, d), u=zeros(n, d),
            flight_U=zeros(n, d, d), flight_u=zeros(n, d),
            G=zeros(n, d, d), g=zeros(n, d),
            Q=zeros(n, s, s),
            tree=tree.init() if tree is not None else (),
            last_release=zeros(n, d * d + d),
            since_sync=jnp.zeros((), jnp.int32),
            n_sync=jnp.zeros((), jnp.int32),
            capacity_refusals=jnp.zeros(n, jnp.int32),
            clipped_rewards=jnp.zeros(n, jnp.int32),
            eig_clip_events=jnp.zeros((), jnp.int32),
            context=zeros(n, k, d),
            trigger=(jnp.broadcast_to(jnp.sqrt(n * p.rho_max) * jnp.eye(d, dtype=jnp.float32),
                                      (n, d, d)) if keeps_trigger_factor(p) else ()),
        )  # fmt: skip

    # -------------------------------------------------------------- the trial
    def act(self, key: jax.Array, state: FedLinUCBState, obs: Observation, params: FedLinParams):
        """One trial of Algorithm 1 under the configured ``timing`` (module docstring): fold in
        the last pull, take the controller's sum, release where a sync is due, choose, and
        request a sync when the trigger fires."""
        p = params
        fresh = (obs.phase == PULL) & (obs.pulls > 0)  # the last step was a trial
        s = self._fold(state, obs, fresh, p)
        # a sync's work (W's floor and factor, the releases) only in the steps some run syncs
        s = when_any(obs.deliveries[STATS].count > 0, lambda s: self._receive(s, obs, p), s)
        due = sync_due(p, fresh, obs.pulls, obs.deliveries[SYNC].count > 0)
        s = when_any(due, lambda s: self._release(key, s, due, p), s)
        V = s.W + s.flight_U + s.U  # flight: only in syncing runs under the paper timing
        u = s.w + s.flight_u + s.u
        chol = cholesky(V)
        arms = ucb_choice(obs.context, chol, u, radius(chol, p))
        request = self._request(s, chol, obs.context, arms, due, p)
        n = p.num_agents
        messages = {
            SYNC: (request, jnp.ones((n, 1), jnp.float32)),
            STATS: (jnp.broadcast_to(due, (n,)), s.last_release),
        }
        pull = ~due if p.paper else jnp.ones((), bool)
        return Action(arms, messages, pull), s._replace(context=obs.context)

    def _fold(self, s: FedLinUCBState, obs: Observation, fresh, p: FedLinParams):
        """Algorithm 1: the last pull's ``x x^T`` and ``y x`` into the agent's own statistics
        (``U, u, G, g`` and the leaf ``Q`` of ``z = [x; y]``, :func:`pull_statistics`). Delta
        counts the trial; the trigger's factor takes the pull by a rank-1 update (a no-op
        where nothing was pulled)."""
        xx, yx, zz, clipped = pull_statistics(s.context, obs, p.config, s.clipped_rewards)
        if keeps_trigger_factor(p):
            s = s._replace(trigger=cholesky_update(s.trigger, last_pull(s.context, obs)[0]))
        return s._replace(
            U=s.U + xx, u=s.u + yx, G=s.G + xx, g=s.g + yx, Q=s.Q + zz,
            since_sync=s.since_sync + fresh.astype(jnp.int32),
            clipped_rewards=clipped,
        )  # fmt: skip

    def _receive(self, s: FedLinUCBState, obs: Observation, p: FedLinParams) -> FedLinUCBState:
        """The controller's sum of the releases (Algorithm 1's sync): the new ``W`` (spectrum
        floored) and ``w`` replace the old ones; own data released with it leaves ``flight``."""
        stats = obs.deliveries[STATS]
        arrived = stats.count > 0
        d = p.dim
        total = stats.aggregate.astype(jnp.float32)
        W, real = floor_spectrum(total[: d * d].reshape(d, d), p.eig_floor)
        logdet_W = logdet_over(cholesky(W), p.num_agents * p.rho_min)
        keep = lambda new, old: jnp.where(arrived, new, old)  # noqa: E731
        if keeps_trigger_factor(p):  # flight is in W now: the trigger's matrix is W + U + cI
            trigger = cholesky(W + s.U + trigger_inflation(p))
            s = s._replace(trigger=keep(trigger, s.trigger))
        return s._replace(
            W=keep(W, s.W),
            logdet_W=keep(logdet_W, s.logdet_W),
            w=keep(total[d * d :], s.w),
            flight_U=keep(0.0, s.flight_U),
            flight_u=keep(0.0, s.flight_u),
            since_sync=keep(0, s.since_sync),
            n_sync=s.n_sync + arrived.astype(jnp.int32),
            eig_clip_events=s.eig_clip_events + (arrived & real).astype(jnp.int32),
        )

    def _release(self, key: jax.Array, s: FedLinUCBState, upload, p: FedLinParams):
        """Every agent of an uploading run releases its whole-history statistics
        (:func:`private_release`); its own data since the last release moves to ``flight`` (in
        W once the sum arrives)."""
        d, n = p.dim, p.num_agents
        mask = jnp.broadcast_to(upload, (n,))
        tree = gram_tree(p.constants, (n,))
        U_hat, u_hat, tree_state, refusals = private_release(key, s, tree, mask, p.config.lam)
        fresh = jnp.concatenate([U_hat.reshape(n, d * d), u_hat], axis=-1)
        up, up2 = mask[:, None], mask[:, None, None]
        return s._replace(
            last_release=jnp.where(up, fresh, s.last_release),
            flight_U=jnp.where(up2, s.flight_U + s.U, s.flight_U),
            flight_u=jnp.where(up, s.flight_u + s.u, s.flight_u),
            U=jnp.where(up2, 0.0, s.U),
            u=jnp.where(up, 0.0, s.u),
            Q=jnp.where(up2, 0.0, s.Q),
            tree=tree_state,
            capacity_refusals=refusals,
        )

    def _request(self, s: FedLinUCBState, chol, context, arms, due,
                 p: FedLinParams) -> jnp.ndarray:  # fmt: skip
        """Algorithm 1's trigger ``(Delta + 1) [ln det(W + U + M (rho_max - rho_min) I) - ln det
        W] >= D`` per agent, none while a sync is under way. Paper timing: after the trial about
        to be played, with ``U + x x^T`` (the request travels with the pull); latency: on
        ``W + flight + U``. The log-determinant from V's factor ``chol`` or the kept one
        (:func:`trigger_logdet`)."""
        n = p.num_agents
        if p.fixed_trials or is_zero(p.threshold):
            return jnp.zeros(n, bool)
        x = context[jnp.arange(n), arms] if p.paper else None
        logdet = trigger_logdet(chol, s.trigger, x, p)
        weight = s.since_sync.astype(jnp.float32) + 1.0
        return rarely_switching(logdet, s.logdet_W, weight, p.threshold) & ~due


def radius(chol: jnp.ndarray, p: FedLinParams) -> jnp.ndarray:
    """Proposition 2 for the group of M agents from V's Cholesky factor
    (:func:`fedbandit_env.linear_kernels.confidence_radius` on ``ln det V - d ln(M rho_min)``),
    times beta_scale."""
    return confidence_radius(
        logdet_over(chol, p.num_agents * p.rho_min), 0.0, alpha=p.config.alpha,
        sigma=p.config.sigma, S=p.config.S, rho_max=p.rho_max, kappa=p.kappa,
        group=p.num_agents, beta_scale=p.config.beta_scale,
    )  # fmt: skip
