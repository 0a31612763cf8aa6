"""DisLinUCB in JAX (Wang, Hu, Chen & Wang, "Distributed Bandit Learning: Near-Optimal Regret with
Efficient Communication", ICLR 2020).

The JAX form of :mod:`agents.dislinucb` (the numpy learner, the model) for one run, vectorized
over the N clients and K arms; the rules as implemented are those of docs/dislinucb.md. N clients share
theta*, each runs LinUCB on its local statistics, and a server sums the clients' buffered
updates when a client's log-det trigger fires (the paper's Algorithm 1, event-triggered
communication). The names are the paper's and numpy's:

==============  ==========================================================================
``A``, ``b``    A_i = sum x x^T (no regulariser) and b_i = sum r x: client i's local statistics
``n``           n_i: the samples in them (int32)
``dA, db, dn``  the upload buffers (Delta A_i, Delta b_i, Delta n_i) since the last sync
``A_g ...``     the server's global sums (A_g, b_g, n_g), as every client rebuilds them
``logdet_sync`` ln det(A_i - dA_i + lam I) - d ln lam: the statistics of the last sync
``n_sync``      the syncs of the run (int32)
==============  ==========================================================================

* **Decision** (docs/dislinucb.md, "Rules"): ``V = A_i + lam I``, ``theta = V^-1 b_i``,
  ``UCB(x) = <x, theta> + alpha_t ||x||_{V^-1}``, ``alpha_t = R sqrt(d ln(1 + n_i/(d lam)) +
  2 ln(1/delta)) + sqrt(lam)`` or a fixed ``alpha``.
* **Update**: ``x x^T``, ``r x`` and one count into the local statistics and the buffers.
* **Trigger**: after the update, ``dn_i ln(det(A_i + lam I) / det(A_i - dA_i + lam I)) >= D``.
* **Sync**: every client's buffer to the server, the global sums back to everyone, who replace
  their local statistics with them.

Timing, numpy's (docs/dislinucb.md, "Channels and timing"): two ``server`` channels with
aggregate "sum", ``sync`` (dim 1, the requests) and ``stats`` (dim d^2 + d + 1, the buffers).
The trigger needs the chosen x only (``ln det(V + x x^T) = ln det V + ln(1 + x^T V^-1 x)``), so
a client whose trigger will fire after trial t sends its request with that pull; everybody sees
it in that step's observation and the run takes one communication-only step (``pull`` False)
in which every client uploads its buffer and receives the sum, used from trial t + 1.
``sync_threshold=0`` syncs after every trial without requests. The data-dependent sync rounds
are masks (``jnp.where`` on ``due`` and on the arrival of the sum), never Python branches.

The hyperparameters and their validation (:class:`agents.dislinucb.DisLinUCBConfig`), the
checks of the facts (the family, the channels: aggregate "sum", participation 1, no drops, no
join schedule) and the threshold D (the documented heuristic ``T / (N d ln(N T))`` when
``sync_threshold`` is None) are the params (:func:`agents.dislinucb.dislin_params`, which the
numpy ``reset`` calls too), made in Python before tracing. The width alpha_t
(:func:`agents.dislinucb.exploration_width`), the upload (:func:`agents.dislinucb.
upload_buffers`), a pull's statistics and the trigger (:mod:`fedbandit_env.linear_kernels`) are
the numpy learner's own functions.

Deviations, none in the algorithm:

* ties: UCB values within a relative :func:`fedbandit_env.xp.rounding_tolerance` (1e-5 in float32; numpy's
  1e-12 is a float64 tolerance) of the best are broken by the largest of (N, K) uniforms drawn
  from the step's key (numpy: its ``tiebreak`` stream, same rule);
* numerics: float32 statistics (not compensated); V's Cholesky factor is recomputed every step
  (numpy updates V^-1 by Sherman-Morrison and ln det V by the determinant lemma), which
  gives ``V^-1 b``, the widths and ``ln det V`` at once; log-determinants are kept relative to
  ``d ln lam`` (term by term over the factor's diagonal); counts are int32.

Cost of the masks: the global factor ``chol(A_g + lam I)`` is computed every step, a sync or
not (one d x d factor per run).
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from agents.dislinucb import (
    AGENT_ID,
    STATS,
    SYNC,
    VERSION,
    DisLinParams,
    DisLinUCBConfig,
    dislin_channel_spec,
    dislin_params,
    exploration_width,
    upload_buffers,
)
from fedbandit_env.jax.linear_kernels import cholesky, last_pull, logdet_over, triangular_solve
from fedbandit_env.jax.types import PULL, Action, Observation
from fedbandit_env.linear_kernels import pull_terms, rarely_switching
from fedbandit_env.policy import FederationFacts
from fedbandit_env.ties import argmax_near_ties
from fedbandit_env.xp import is_zero


class DisLinUCBState(NamedTuple):
    """One run of DisLinUCB (module docstring): per client (N, ...) ``A``, ``b``, ``n``, ``dA``,
    ``db``, ``dn``, ``logdet_sync``; the global sums ``A_g`` (d, d), ``b_g`` (d,), ``n_g`` ();
    ``syncing`` () the run uploaded with the last action (the sum arrives in this observation);
    ``n_sync`` () and ``n_requests`` () the syncs and the requests sent; ``context`` (N, K, d)
    the decision sets of the step being played."""

    A: jnp.ndarray
    b: jnp.ndarray
    n: jnp.ndarray
    dA: jnp.ndarray
    db: jnp.ndarray
    dn: jnp.ndarray
    logdet_sync: jnp.ndarray
    A_g: jnp.ndarray
    b_g: jnp.ndarray
    n_g: jnp.ndarray
    syncing: jnp.ndarray
    n_sync: jnp.ndarray
    n_requests: jnp.ndarray
    context: jnp.ndarray


class DisLinUCB:
    """DisLinUCB (see the module docstring): :class:`agents.DisLinUCB` on JAX, on the params
    protocol (:class:`agents.dislinucb.DisLinParams`)."""

    agent_id = AGENT_ID
    version = VERSION
    privacy_epsilon = math.inf  # explicitly not private

    def __init__(
        self,
        sync_threshold: float | None = None,
        lam: float = 0.2,
        delta: float = 0.01,
        R: float = 0.5,
        alpha: float | None = None,
    ):
        self.config = DisLinUCBConfig(sync_threshold, lam, delta, R, alpha)

    def channel_spec(self, config) -> Any:
        """``sync`` (dim 1) and ``stats`` (dim d^2 + d + 1), server, aggregate sum."""
        return dislin_channel_spec(config.linear.dim if config.linear is not None else 1)

    def make_params(self, facts: FederationFacts) -> DisLinParams:
        """The threshold D and the checks of the facts: :func:`agents.dislinucb.dislin_params`."""
        return dislin_params(self.config, facts)

    # ------------------------------------------------------------------- init
    def init(self, key: jax.Array, params: DisLinParams) -> DisLinUCBState:
        """Zero local statistics, buffers and global sums (``V = lam I``)."""
        d, n = params.dim, params.num_agents
        zeros = lambda *shape: jnp.zeros(shape, jnp.float32)  # noqa: E731
        return DisLinUCBState(
            A=zeros(n, d, d), b=zeros(n, d), n=jnp.zeros(n, jnp.int32),
            dA=zeros(n, d, d), db=zeros(n, d), dn=jnp.zeros(n, jnp.int32),
            logdet_sync=zeros(n),
            A_g=zeros(d, d), b_g=zeros(d), n_g=jnp.zeros((), jnp.int32),
            syncing=jnp.zeros((), bool),
            n_sync=jnp.zeros((), jnp.int32),
            n_requests=jnp.zeros((), jnp.int32),
            context=zeros(n, params.num_arms, d),
        )  # fmt: skip

    # -------------------------------------------------------------- the trial
    def act(self, key: jax.Array, state: DisLinUCBState, obs: Observation, params: DisLinParams):
        """One engine step: fold in the last pull (Update), take the server's sum after a sync
        (Sync), upload the buffers if a sync is due (a communication step), choose the UCB arm
        (Decision) and request a sync when the trigger will fire after it (Trigger)."""
        p = params
        fresh = (obs.phase == PULL) & (obs.pulls > 0)  # the last step was a trial
        s = self._fold(state, obs, fresh, p)
        s = self._receive(s, obs, p)
        if not is_zero(p.threshold):
            due = fresh & (obs.deliveries[SYNC].count > 0)
        else:  # D = 0: a sync follows every trial, nobody requests it
            due = fresh
        payload, dA, db, dn = upload_buffers(s.dA, s.db, s.dn, due)
        s = s._replace(dA=dA, db=db, dn=dn)
        arms, quad, logdet = self._choose(key, obs.context, s, p)
        request = self._trigger(s, quad, logdet, p) & ~due
        n = p.num_agents
        messages = {
            SYNC: (request, jnp.ones((n, 1), jnp.float32)),
            STATS: (jnp.broadcast_to(due, (n,)), payload),
        }
        s = s._replace(
            syncing=due,
            n_requests=s.n_requests + request.sum(dtype=jnp.int32),
            context=obs.context,
        )
        return Action(arms, messages, ~due), s

    def _fold(self, s: DisLinUCBState, obs: Observation, fresh, p: DisLinParams):
        """Update: ``x x^T``, ``r x`` and one count into the local statistics and the buffers
        (zeros where nothing was pulled, e.g. after a communication step)."""
        x, y = last_pull(s.context, obs)
        one = jnp.broadcast_to(fresh, (p.num_agents,)).astype(jnp.int32)
        xx, rx = pull_terms(x, y)
        return s._replace(
            A=s.A + xx, dA=s.dA + xx, b=s.b + rx, db=s.db + rx, n=s.n + one, dn=s.dn + one
        )

    def _receive(self, s: DisLinUCBState, obs: Observation, p: DisLinParams) -> DisLinUCBState:
        """Sync, the clients' side: the server's sum of the buffers goes into the global sums,
        which replace every client's local statistics (and the trigger's reference
        ``ln det(A_g + lam I)``), where the run uploaded last step and the sum arrived."""
        stats = obs.deliveries[STATS]
        got = s.syncing & (stats.count > 0)
        d, n, lam = p.dim, p.num_agents, p.config.lam
        total = stats.aggregate.astype(jnp.float32)
        A_g = jnp.where(got, s.A_g + total[: d * d].reshape(d, d), s.A_g)
        b_g = jnp.where(got, s.b_g + total[d * d : d * d + d], s.b_g)
        n_g = jnp.where(got, s.n_g + jnp.round(total[-1]).astype(jnp.int32), s.n_g)
        eye = jnp.float32(lam) * jnp.eye(d, dtype=jnp.float32)
        logdet_g = logdet_over(cholesky(A_g + eye), lam)
        return s._replace(
            A=jnp.where(got, jnp.broadcast_to(A_g, (n, d, d)), s.A),
            b=jnp.where(got, jnp.broadcast_to(b_g, (n, d)), s.b),
            n=jnp.where(got, jnp.broadcast_to(n_g, (n,)), s.n),
            logdet_sync=jnp.where(got, jnp.broadcast_to(logdet_g, (n,)), s.logdet_sync),
            A_g=A_g, b_g=b_g, n_g=n_g,
            n_sync=s.n_sync + got.astype(jnp.int32),
        )  # fmt: skip

    def _choose(self, key: jax.Array, context: jnp.ndarray, s: DisLinUCBState, p: DisLinParams):
        """Decision: the UCB arms (N,), ``x^T V^-1 x`` of the chosen features and ``ln det V - d
        ln lam`` (N,), from one Cholesky factor of ``V = A + lam I`` per client."""
        d, n, lam = p.dim, p.num_agents, p.config.lam
        V = s.A + jnp.float32(lam) * jnp.eye(d, dtype=jnp.float32)
        chol = cholesky(V)
        # L^-1 b and L^-1 x_k in one forward substitution (no LAPACK: linear_kernels' docstring)
        z = triangular_solve(chol, jnp.concatenate([s.b[..., None],
                                                    jnp.swapaxes(context, -1, -2)], -1))  # fmt: skip
        zb, zx = z[..., :1], z[..., 1:]  # (N, d, 1), (N, d, K)
        theta = triangular_solve(chol, zb, transpose=True)[..., 0]
        quad = (zx * zx).sum(axis=-2)  # (N, K)
        mean = jnp.einsum("nkd,nd->nk", context, theta)
        ucb = mean + exploration_width(s.n, d, p.config)[:, None] * jnp.sqrt(jnp.maximum(quad, 0.0))
        u = jax.random.uniform(key, (n, p.num_arms), jnp.float32)
        arms = argmax_near_ties(ucb, u)
        chosen = jnp.take_along_axis(quad, arms[:, None], axis=-1)[:, 0]
        return arms, chosen, logdet_over(chol, lam)

    def _trigger(self, s: DisLinUCBState, quad, logdet, p: DisLinParams) -> jnp.ndarray:
        """Trigger after the trial about to be played (A' = A + x x^T, dA' = dA + x x^T, dn' =
        dn + 1, A' - dA' = A - dA): ``dn' [ln det(A + lam I) + ln(1 + x^T V^-1 x) -
        ln det(A - dA + lam I)] >= D``; never with D = 0 (everyone syncs anyway)."""
        if is_zero(p.threshold):
            return jnp.zeros(p.num_agents, bool)
        logdet_next = logdet + jnp.log1p(jnp.maximum(quad, 0.0))
        weight = s.dn.astype(jnp.float32) + 1.0
        return rarely_switching(logdet_next, s.logdet_sync, weight, p.threshold)
