"""Fed-MoM-UCB in JAX (Demirel, Yildirim & Tekin, "Federated Multi-Armed Bandits Under Byzantine
Attacks", arXiv 2205.04134).

The JAX form of :mod:`agents.fed_mom_ucb` (the numpy learner, the model) for one run, vectorized over the
N clients and K arms: master-worker successive elimination with a median-of-means server, the
rules and constants of the authors' code (Fed-MoM-UCB_sce1.py) as docs/fed-mom-ucb.md describes
them. The names are the numpy learner's (and the code's):

===============  ===================================================================
``sums``         per (client, arm) reward sums (compensated float32)
``counts``       per (client, arm) pulls (int32; equal on every client, lockstep)
``active``       the active arms (K,), replicated on every client from the broadcast
``U``            the last broadcast ``U_k = median_g(mean of group g's sample means)``
``E``            the width of the last phase, ``E_p = E(s(p))`` (``Ep_fn``)
``p``            the phase under way (1-based); ``pos`` its pulls so far; ``L = s(p) - s(p-1)``
``beta``         the margin ``omega + epsilon`` (or the fixed ``beta``); commit once ``E <= beta/4``
===============  ===================================================================

Channel, the numpy learner's (one ``fedmom_channel_spec``): ``server`` of dim K with
``aggregate="median_of_means"``, group size B (from N) and ``grouping="consecutive"``.

Timing, the numpy learner's: phase p pulls each active arm, in ascending id, L times in a row (all
clients the same arm in the same step); at its end a communication-only step (``pull`` False)
uploads every client's sample means of all K arms; the next step applies the elimination
``U_k <= max_k' U_k' - 2 E_p`` (the max over all K arms, stale ones included) to the broadcast
and starts phase p + 1, or commits to the active arm of largest U (lowest id on ties) when
``E_p <= beta / 4`` or one arm is left. Steps without an upload send nothing.

``act`` is one pure function of the step: the elimination is computed every step and kept
(``jnp.where``) only after a phase end; its cost is K-sized, nothing to save by a ``lax.cond``.
Phase, width and active set are per run (every client derives them from the same broadcast,
as in numpy). ``make_params`` is the numpy learner's pure
:func:`~agents.fed_mom_ucb.fedmom_params`, run in Python before tracing: it validates the client count (``clients="derived"``: N must be the derived M), the channel's
group size, grouping, participation, drops and join schedule, and provides the constants.
Options the JAX environment cannot build are refused by ``fedbandit_env.jax.make`` itself
(``client_spread`` and ``global_means``: the Gaussian client-means instance of the paper is
numpy-only, docs/jax.md), so ``clients="environment"`` runs here on the environment's own
instances (``Heterogeneous-v0``, ``Homogeneous-v0``).

Deviations, none in the algorithm: no randomness (the key is unused); statistics, U and the
width are float32 (numpy: float64), so the elimination may differ where ``U_k`` and
``max U - 2E`` agree to float32 rounding; the stop test ``E_p <= beta/4`` depends on p only
and is decided in float64 in Python while tracing (the first phase ``p_star`` that meets
it, :meth:`FedMoMUCB.stopping`), exactly as in numpy.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp

from agents.fed_mom_ucb import (
    AGENT_ID,
    CHANNEL,
    VERSION,
    FedMoMParams,
    FedMoMUCBConfig,
    fedmom_channel_spec,
    fedmom_constants,
    fedmom_params,
    phase_arm,
    phase_length,
    s_of,
)
from fedbandit_env.jax.accumulate import Total, total_add
from fedbandit_env.jax.types import PULL, Action, Observation
from fedbandit_env.policy import FederationFacts

NEVER = 2**31 - 1
"""``p_star`` when the width never reaches ``beta / 4`` (``2 sigma_c root > beta / 4``)."""


class FedMoMState(NamedTuple):
    """Per client: ``sums`` (N, K) compensated and ``counts`` (N, K) int32; per run (derived
    from the broadcasts): ``active`` (K,), ``U`` (K,), ``E`` (), the phase ``p``, its pulls
    ``pos`` and length ``L``, ``committed`` and ``commit_arm``, ``awaiting`` (the last step
    was a phase-end upload) and ``rounds`` (phase-end uploads so far)."""

    sums: Total
    counts: jnp.ndarray
    active: jnp.ndarray
    U: jnp.ndarray
    E: jnp.ndarray
    p: jnp.ndarray
    pos: jnp.ndarray
    L: jnp.ndarray
    committed: jnp.ndarray
    commit_arm: jnp.ndarray
    awaiting: jnp.ndarray
    rounds: jnp.ndarray


def s_array(schedule: str, p: jnp.ndarray) -> jnp.ndarray:
    """``s(p)`` (the code's ``sp_fn``) of a traced phase: ``10 p`` or ``2^p`` (int32)."""
    p = p.astype(jnp.int32)
    return 10 * p if schedule == "linear" else jnp.left_shift(jnp.int32(1), p)


def first_stopping_phase(k, sigma: float, sigma_c: float, beta: float, schedule: str) -> int:
    """The first phase p >= 1 with ``E(s(p)) <= beta / 4`` (E decreases in p), in float64 with
    the numpy learner's :meth:`~agents.fed_mom_ucb.FedMoMConstants.width`; :data:`NEVER` if none."""
    root = math.sqrt((4 * k.eta - 1) * math.log(2) / ((2 * k.eta - 1) * k.B))
    c = beta / (8 * root) - sigma_c  # E <= beta/4  <=>  sigma / sqrt(s) <= c
    if c <= 0:
        return NEVER
    s_needed = (sigma / c) ** 2
    guess = s_needed / 10 if schedule == "linear" else math.log2(max(s_needed, 1.0))
    p = max(1, min(NEVER, math.ceil(guess)))

    def stops(q: int) -> bool:
        return float(k.width(s_of(schedule, q), sigma, sigma_c)) <= beta / 4

    while p > 1 and stops(p - 1):
        p -= 1
    while not stops(p) and p < NEVER:
        p += 1
    return p


class FedMoMUCB:
    """Fed-MoM-UCB for the N clients of one run, on the params protocol
    (:class:`agents.fed_mom_ucb.FedMoMParams`; :class:`agents.FedMoMUCB` on JAX)."""

    agent_id = AGENT_ID
    version = VERSION  # the numpy learner's results version
    payload_layouts = {CHANNEL: "arm_means"}  # a client's sample mean of every arm
    privacy_epsilon = None

    def __init__(
        self,
        lam: float | None = None,
        mapping: str = "arithmetic",
        delta: float = 1e-3,
        epsilon: float = 0.05,
        beta: float | None = None,
        sigma: float = 0.5,
        sigma_c: float = 0.01,
        schedule: str = "linear",
        clients: str = "derived",
        aggregate: str = "median_of_means",
    ):
        self.config = FedMoMUCBConfig(
            lam, mapping, delta, epsilon, beta, sigma, sigma_c, schedule, clients, aggregate
        )

    def channel_spec(self, config):
        """``server`` of dim K, ``median_of_means`` with group size B, consecutive (or the plain
        ``mean``, ``aggregate="mean"``): :func:`agents.fed_mom_ucb.fedmom_channel_spec`."""
        return fedmom_channel_spec(self.config, config)

    def constants(self, num_arms: int, horizon: int, num_agents: int, bound: int = 0):
        """The derived constants (M, M_Z, B, G, alpha, eta, omega, beta):
        :func:`agents.fed_mom_ucb.fedmom_constants`."""
        return fedmom_constants(self.config, num_arms, horizon, num_agents, bound)

    def make_params(self, facts: FederationFacts) -> FedMoMParams:
        """:func:`agents.fed_mom_ucb.fedmom_params`: the constants, lam, beta and the notes;
        checks the facts."""
        return fedmom_params(self.config, facts)

    def init(self, key: jax.Array, params: FedMoMParams) -> FedMoMState:
        """Every arm active, E = inf, phase 1 of length s(1) - s(0)."""
        n, k = params.num_agents, params.num_arms
        zeros = jnp.zeros((n, k), jnp.float32)
        return FedMoMState(
            sums=Total(zeros, zeros),
            counts=jnp.zeros((n, k), jnp.int32),
            active=jnp.ones(k, bool),
            U=jnp.zeros(k, jnp.float32),
            E=jnp.full((), jnp.inf, jnp.float32),
            p=jnp.ones((), jnp.int32),
            pos=jnp.zeros((), jnp.int32),
            L=jnp.asarray(phase_length(params.config.schedule, 1), jnp.int32),
            committed=jnp.zeros((), bool),
            commit_arm=jnp.zeros((), jnp.int32),
            awaiting=jnp.zeros((), bool),
            rounds=jnp.zeros((), jnp.int32),
        )

    @staticmethod
    def stopping(params: FedMoMParams) -> tuple[int, float]:
        """``(p_star, root)`` in float64, in Python: the first phase whose width meets
        ``E <= beta / 4`` and ``sqrt((4 eta - 1) ln 2 / ((2 eta - 1) B))`` of the width."""
        k, cfg = params.k, params.config
        p_star = first_stopping_phase(k, cfg.sigma, cfg.sigma_c, params.beta, cfg.schedule)
        root = math.sqrt((4 * k.eta - 1) * math.log(2) / ((2 * k.eta - 1) * k.B))
        return p_star, root

    def width(self, p: jnp.ndarray, params: FedMoMParams) -> jnp.ndarray:
        """``E_p = 2 (sigma / sqrt(s(p)) + sigma_c) sqrt((4 eta - 1) ln 2 / ((2 eta - 1) B))``
        (the code's ``Ep_fn``), float32."""
        cfg = params.config
        s = s_array(cfg.schedule, p).astype(jnp.float32)
        root = self.stopping(params)[1]
        return (
            2.0
            * (jnp.float32(cfg.sigma) / jnp.sqrt(s) + jnp.float32(cfg.sigma_c))
            * (jnp.float32(root))
        )

    def _eliminate(self, state: FedMoMState, U: jnp.ndarray, params: FedMoMParams) -> FedMoMState:
        """The phase end's broadcast U (the code's median of group means): eliminate
        ``U_k <= max U - 2 E_p`` over all K arms (a stale max that would remove every active
        arm keeps the set), then commit to the active arm of largest U when ``E_p <= beta/4``
        or one arm is left, else start phase p + 1."""
        E = self.width(state.p, params)
        p_star = self.stopping(params)[0]
        before = state.active
        after = before & ~(U <= U.max() - 2.0 * E)
        after = jnp.where(after.any(), after, before)
        stop = (state.p >= p_star) | (after.sum() <= 1)
        best = jnp.argmax(jnp.where(after, U, -jnp.inf)).astype(jnp.int32)
        p = state.p + 1
        L = s_array(params.config.schedule, p) - s_array(params.config.schedule, p - 1)
        return state._replace(
            active=after,
            U=U,
            E=E,
            p=p,
            pos=jnp.zeros((), jnp.int32),
            L=L,
            committed=stop,
            commit_arm=jnp.where(stop, best, state.commit_arm),
            rounds=state.rounds + 1,
        )

    def _current_arm(self, state: FedMoMState) -> jnp.ndarray:
        """The arm of the next pull: the committed arm, or the active arm number ``pos // L``
        in ascending id (the code's ``for k in active_arms: for _ in range(L)``)."""
        return phase_arm(
            state.active, state.pos, state.L, state.committed, state.commit_arm
        ).astype(jnp.int32)

    def act(self, key: jax.Array, state: FedMoMState, obs: Observation, params: FedMoMParams):
        """One env step for every client: fold in the last pull, apply the elimination to the
        broadcast of a phase end (:meth:`_eliminate`), then pull the phase's current arm, or
        upload the sample means of all K arms in a communication-only step."""
        pulled = (obs.step > 0) & (obs.phase == PULL) & (obs.pulls > 0)
        arm = jnp.maximum(obs.last_arm, 0)
        hit = (arm[:, None] == jnp.arange(params.num_arms)) & pulled
        sums = total_add(state.sums, jnp.where(hit, obs.last_reward[:, None], 0.0))
        counts = state.counts + hit.astype(jnp.int32)
        state = state._replace(sums=sums, counts=counts)
        eliminated = self._eliminate(state, obs.deliveries[CHANNEL].aggregate, params)
        state = jax.tree_util.tree_map(
            lambda a, b: jnp.where(state.awaiting, a, b), eliminated, state
        )
        n_active = state.active.sum(dtype=jnp.int32)
        talk = ~state.committed & (state.pos >= state.L * n_active)
        n = params.num_agents
        arms = jnp.broadcast_to(self._current_arm(state), (n,)).astype(jnp.int32)
        state = state._replace(
            awaiting=talk, pos=state.pos + (~state.committed & ~talk).astype(jnp.int32)
        )
        send = jnp.broadcast_to(talk, (n,))
        means = (sums.total - sums.carry) / jnp.maximum(counts, 1).astype(jnp.float32)
        payload = jnp.where(send[:, None], means, 0.0)
        return Action(arms, {CHANNEL: (send, payload)}, ~talk), state
