"""Decentralized FedUCB in JAX (Dubey & Pentland, "Differentially-Private Federated Linear
Bandits", NeurIPS 2020, Section 4.2 and Remark 5).

The JAX form of :mod:`agents.fed_lin_ucb_decentralized` (the numpy learner, the model) for one
run, vectorized over the N agents, the gamma slots and the K arms. The paper describes its
decentralized variant in prose only, so the rules are the numpy learner's reconstruction, with
every choice in docs/linear.md, "Decentralized FedUCB". The names are the paper's and numpy's:

=================  =======================================================================
gamma              the flood TTL, the number of round-robin slots and the cliques' hop radius
``cliques``        a clique cover of the power graph G^gamma (static, the params'); agent i
                   pools only its clique's data; c_i its clique's size
``R_U``, ``R_u``   (N, gamma, c_max, ...) the table of the members' latest releases
                   (U_hat, u_hat) per slot; own entry at the agent's position
``W``, ``w``       W_{i,g} = sum of the table (spectrum floored where it changed), w_{i,g}
``U, u, G, g, Q``  own data per slot: since the last release (U, u), the whole history (G, g),
                   the augmented leaf Q = sum z z^T, z = [x; y], since the last release
``since``          Delta: trials in the slot since its last release (int32)
``releases``       the slot's releases so far (the release number ``seq`` of the messages)
``pending``        a member's request for the slot arrived and waits for an answer
``tree``           the privatizer: (N, gamma) Gram trees (Algorithm 2 of the paper) with
                   m = 1 + ceil(log2 ceil(T / gamma)) levels (the extra log gamma of Remark 5)
=================  =======================================================================

* **Decision** (Algorithm 1 with the clique as the group): slot g = (t - 1) mod gamma of trial
  t; ``V = W_{i,g} + U_{i,g}``, LinUCB with the Proposition-2 radius for c_i agents,
  ``sigma sqrt(2 ln(2/alpha) + ln det V - d ln(c_i rho_min)) + S sqrt(c_i rho_max) + kappa
  sqrt(c_i)`` (radicand clamped at 0), times beta_scale.
* **Trigger** after using slot g: ``Delta (ln det(W + U + c_i (rho_max - rho_min) I) -
  ln det W) >= D_dec`` (Theorem 1's D with T -> T / gamma by default): the agent broadcasts a
  request for g with its own release of g.
* **Answers**: a member holding a request for g releases its own statistics of g (if it has
  unreleased data); a newer release of a member replaces its entry in the receiver's table.

Communication over gamma ``flood`` channels with TTL gamma (``flood`` for slot 0, ``flood_g``
for slot g, dim 3 + d^2 + d: request flag, slot, release number, U_hat, u_hat). The flood
delivery is dense per (receiver, sender slot); a static table (from the channel's own
``senders`` layout, :class:`fedbandit_env.network.flood.FloodChannel`) maps each clique member
to its sender slot, so the receive is one gather per slot channel (a Python loop over the gamma
channels, none over agents or arms). A message on channel g always carries slot g (numpy
writes it; JAX uses the channel's slot).

Timing (``timing``, numpy's): ``"paper"`` (default) sends a trigger's request and release in a
communication-only step right after the pull that fired it (``pull`` False where any agent of
the run triggers); answers go out with the next pull; slots follow the run's trials (its pull
count); no trigger after the last trial. ``"latency"`` sends the trigger's messages with the
next pull. Both are masks on the step's trigger vector; pending requests are cleared after the
step's answers (paper timing: only in a pulling step).

The hyperparameters and their validation
(:class:`agents.fed_lin_ucb_decentralized.FedLinUCBDecentralizedConfig`), the checks of the
facts (linear family, the flood channels, a connected graph, T >= 2 gamma + 1), the cliques, the
privacy constants (rho_min, rho_max, kappa, the tree's sigma_N, shift and depth, from
:func:`fedbandit_env.linear_kernels.linear_privacy_constants` with gamma) and D_dec are the params
(:func:`agents.fed_lin_ucb_decentralized.dec_params`, which the numpy ``reset`` calls too), plus
the flood channels' sender columns of the clique members (:class:`DecJaxParams`), made in Python
before tracing. The radius, a pull's statistics and the trigger are the shared formulas of
:mod:`fedbandit_env.linear_kernels`; the tree is :func:`fedbandit_env.privacy.gram_tree.
insert_leaf`.

Deviations, none in the algorithm:

* the privacy noise is drawn from the step's key (:class:`fedbandit_env.jax.gram_tree.GramTree`);
  numpy draws from its ``privacy`` stream; float32 statistics (not compensated);
* ``eig_clip_events`` counts a matrix at most once per step (numpy counts twice when a
  member's release and the agent's own land in the same step and both sums need the floor);
  the floor's rounding tolerance is float32's (:func:`fedbandit_env.xp.rounding_tolerance`);
* where numpy raises on an indefinite V (which the floor rules out) or warns on a full tree,
  the compiled program cannot: V's factor turns NaN, and ``capacity_refusals`` counts refusals.

Cost of the masks: every step floors the spectrum (one ``eigh``) of all N gamma sums W and keeps
only those that changed, and draws the tree noise for every (agent, slot), releasing or not.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from agents.fed_lin_ucb_decentralized import (
    AGENT_ID,
    HEADER,
    VERSION,
    DecParams,
    FedLinUCBDecentralizedConfig,
    dec_channel_spec,
    dec_params,
    slot_channel,
)
from agents.jax.fed_lin_ucb import floor_spectrum, gram_tree, private_release, pull_statistics
from fedbandit_env.jax.linear_kernels import cholesky, logdet_over, ucb_choice
from fedbandit_env.jax.types import PULL, Action, Observation
from fedbandit_env.linear_kernels import confidence_radius, rarely_switching
from fedbandit_env.network.flood import FloodChannel
from fedbandit_env.policy import FederationFacts


class DecentralizedState(NamedTuple):
    """One run of decentralized FedUCB (module docstring for the names). Per agent and slot:
    ``R_U`` (N, gamma, c_max, d, d), ``R_u``, ``seen`` (N, gamma, c_max) the release number of
    each entry, ``W`` (N, gamma, d, d), ``w``, own ``U``, ``u``, ``G``, ``g``, ``Q``,
    ``since``, ``releases``, ``pending``; ``tree`` the privatizer (``()`` when not private);
    counters ``n_requests`` () (triggers), ``capacity_refusals`` (N,), ``clipped_rewards`` (N,),
    ``eig_clip_events`` (); ``context`` (N, K, d) the decision sets of the step being played."""

    R_U: jnp.ndarray
    R_u: jnp.ndarray
    seen: jnp.ndarray
    W: jnp.ndarray
    w: jnp.ndarray
    U: jnp.ndarray
    u: jnp.ndarray
    G: jnp.ndarray
    g: jnp.ndarray
    Q: jnp.ndarray
    since: jnp.ndarray
    releases: jnp.ndarray
    pending: jnp.ndarray
    tree: Any
    n_requests: jnp.ndarray
    capacity_refusals: jnp.ndarray
    clipped_rewards: jnp.ndarray
    eig_clip_events: jnp.ndarray
    context: jnp.ndarray


@dataclass(frozen=True)
class DecJaxParams(DecParams):
    """The numpy learner's params plus, per slot channel, each clique member's column in the
    flood delivery's senders table (``member_slot[g]``: N rows of c_max columns, -1 where
    there is none): the receive is then one gather per slot channel."""

    member_slot: tuple[tuple[tuple[int, ...], ...], ...] = ()


def member_columns(p: DecParams, facts: FederationFacts) -> tuple:
    """Each clique member's sender column of every slot channel (the channel's own ``senders``
    layout, :class:`fedbandit_env.network.flood.FloodChannel`)."""
    n, c_max = p.num_agents, p.c_max
    member = np.full((n, c_max), -1, np.int64)
    for i in range(n):
        clique = p.cliques[p.clique_of[i]]
        member[i, : len(clique)] = clique
    out = []
    for g in range(p.gamma):
        name = slot_channel(g)
        desc = facts.channels[name]
        senders = FloodChannel(name, facts.topology, desc["dim"], ttl=desc["ttl"], c1=facts.c1,
                               c2=facts.c2).senders  # fmt: skip
        col = np.full((n, c_max), -1, np.int32)
        for c in range(c_max):
            match = senders == member[:, c][:, None]  # (N, S)
            found = (member[:, c] >= 0) & match.any(axis=1)
            col[:, c] = np.where(found, match.argmax(axis=1), -1)
        out.append(tuple(map(tuple, col.tolist())))
    return tuple(out)


def _sizes(p: DecParams) -> jnp.ndarray:
    """c_i (N,) float32."""
    return jnp.asarray(np.asarray(p.size, np.float32))


class FedLinUCBDecentralized:
    """Decentralized FedUCB over the flood channels (see the module docstring):
    :class:`agents.FedLinUCBDecentralized` on JAX, on the params protocol
    (:class:`DecJaxParams`)."""

    agent_id = AGENT_ID
    version = VERSION

    def __init__(
        self,
        gamma: int = 1,
        epsilon: float = 1.0,
        delta: float = 0.1,
        alpha: float = 0.1,
        private: bool = True,
        sync_threshold: float | None = None,
        beta_scale: float = 1.0,
        lam: float = 1.0,
        sigma: float = 0.5,
        S: float = 1.0,
        L: float = 1.0,
        B: float = 1.0,
        eig_floor: float | None = None,
        timing: str = "paper",
    ):
        self.config = FedLinUCBDecentralizedConfig(
            AGENT_ID, epsilon, delta, alpha, private, sync_threshold, beta_scale, lam, sigma, S,
            L, B, eig_floor, gamma, timing,
        )  # fmt: skip

    @property
    def privacy_epsilon(self) -> float:
        """Declared guarantee: (epsilon, delta)-DP per agent (``inf`` when ``private=False``)."""
        return self.config.epsilon

    def channel_spec(self, config) -> Any:
        """One ``flood`` channel per slot, TTL gamma, dim 3 + d^2 + d."""
        return dec_channel_spec(config.linear.dim if config.linear is not None else 1,
                                self.config.gamma)  # fmt: skip

    def make_params(self, facts: FederationFacts) -> DecJaxParams:
        """The checks, cliques of G^gamma, privacy constants with the extra log gamma and D_dec
        (:func:`agents.fed_lin_ucb_decentralized.dec_params`) and the members' sender columns."""
        base = dec_params(self.config, facts)
        return DecJaxParams(**vars(base), member_slot=member_columns(base, facts))

    # ------------------------------------------------------------------- init
    def init(self, key: jax.Array, params: DecJaxParams) -> DecentralizedState:
        """The tables start at ``rho_min I`` per member, so ``W_{i,g} = c_i rho_min I``; zero own
        statistics; the (N, gamma) privatizer trees."""
        p = params
        d, n, G, c_max, s = p.dim, p.num_agents, p.gamma, p.c_max, p.dim + 1
        valid = np.arange(c_max)[None, :] < np.asarray(p.size)[:, None]  # (N, c_max)
        eye = p.rho_min * jnp.eye(d, dtype=jnp.float32)  # rho_min may be traced
        R_U = jnp.broadcast_to(
            jnp.where(valid[:, None, :, None, None], eye, 0.0), (n, G, c_max, d, d)
        )
        W = R_U[:, :, 0]
        for c in range(1, c_max):  # the members in order, one float32 sum at a time
            W = W + R_U[:, :, c]
        tree = gram_tree(p.constants, (n, G))
        zeros = lambda *shape: jnp.zeros(shape, jnp.float32)  # noqa: E731
        return DecentralizedState(
            R_U=R_U,
            R_u=zeros(n, G, c_max, d),
            seen=jnp.zeros((n, G, c_max), jnp.int32),
            W=W,
            w=zeros(n, G, d),
            U=zeros(n, G, d, d), u=zeros(n, G, d),
            G=zeros(n, G, d, d), g=zeros(n, G, d),
            Q=zeros(n, G, s, s),
            since=jnp.zeros((n, G), jnp.int32),
            releases=jnp.zeros((n, G), jnp.int32),
            pending=jnp.zeros((n, G), bool),
            tree=tree.init() if tree is not None else (),
            n_requests=jnp.zeros((), jnp.int32),
            capacity_refusals=jnp.zeros(n, jnp.int32),
            clipped_rewards=jnp.zeros(n, jnp.int32),
            eig_clip_events=jnp.zeros((), jnp.int32),
            context=zeros(n, p.num_arms, d),
        )  # fmt: skip

    # -------------------------------------------------------------- the trial
    def act(self, key: jax.Array, state: DecentralizedState, obs: Observation,
            params: DecJaxParams):  # fmt: skip
        """One engine step under the configured ``timing`` (module docstring): fold the last
        pull into its slot, fire the triggers, take what arrived, answer the requests and
        release, choose with the slot of the next trial."""
        p = params
        fresh = (obs.phase == PULL) & (obs.pulls > 0)  # the last step was a trial
        used = jnp.remainder(obs.pulls - 1, p.gamma)  # the slot of the trial just pulled
        in_used = jnp.arange(p.gamma) == used  # (gamma,)
        s = self._fold(state, obs, fresh, in_used, p)
        live = obs.pulls < p.horizon
        trigger = self._trigger(s, used, p) & fresh
        if p.paper:  # no trigger after the run's last trial: it would send nothing
            trigger = trigger & live
        s, changed = self._receive(s, obs, p)
        answer = s.pending & (s.since > 0)
        if p.paper:
            talk = trigger.any()
            answer = answer & ~talk & live  # a talking run's answers wait for the next pull
            pending = jnp.where(talk, s.pending, False)
        else:
            talk = jnp.zeros((), bool)
            pending = jnp.zeros_like(s.pending)
        flag = trigger[:, None] & in_used[None, :]  # (N, gamma): the request, in slot used
        answer = answer | flag
        s, U_hat, u_hat, changed = self._release(key, s._replace(pending=pending), answer,
                                                 changed, p)  # fmt: skip
        s = self._refresh(s, changed, p)
        messages = self._messages(answer, flag, s.releases, U_hat, u_hat, p)
        s = s._replace(n_requests=s.n_requests + trigger.sum(dtype=jnp.int32))
        arms = self._choose(s, obs.context, jnp.remainder(obs.pulls, p.gamma), p)
        return Action(arms, messages, ~talk), s._replace(context=obs.context)

    def _fold(self, s: DecentralizedState, obs: Observation, fresh, in_used, p: DecJaxParams):
        """Algorithm 1's update into the slot just used: ``x x^T``, ``y x`` into ``U, u, G, g``
        and ``z z^T`` into ``Q`` (:func:`agents.jax.fed_lin_ucb.pull_statistics`: a private
        agent clips y to [-B, B] first); Delta counts the trial."""
        xx, yx, zz, clipped = pull_statistics(s.context, obs, p.config, s.clipped_rewards)
        m = in_used.astype(jnp.float32)[None, :]  # (1, gamma)
        xx = xx[:, None] * m[..., None, None]
        yx = yx[:, None] * m[..., None]
        zz = zz[:, None] * m[..., None, None]
        tick = (fresh & in_used).astype(jnp.int32)[None, :]
        return s._replace(
            U=s.U + xx, u=s.u + yx, G=s.G + xx, g=s.g + yx, Q=s.Q + zz,
            since=s.since + tick, clipped_rewards=clipped,
        )  # fmt: skip

    def _trigger(self, s: DecentralizedState, used, p: DecJaxParams) -> jnp.ndarray:
        """The trigger of the slot just used, per agent: ``Delta (ln det(W + U + c_i (rho_max -
        rho_min) I) - ln det W) >= D_dec``."""
        W, U, since = s.W[:, used], s.U[:, used], s.since[:, used]
        size = _sizes(p)
        scale = (size * p.rho_min)[:, None]
        inflate = (size * p.rho_gap)[:, None, None]
        inflate = inflate * jnp.eye(p.dim, dtype=jnp.float32)
        logdet = logdet_over(cholesky(W + U + inflate), scale)
        return rarely_switching(logdet, logdet_over(cholesky(W), scale),
                                since.astype(jnp.float32), p.threshold)  # fmt: skip

    def _receive(self, s: DecentralizedState, obs: Observation, p: DecJaxParams):
        """What arrived from clique members on the slot channels: a request marks the slot
        pending; a newer release (release number above the entry's) replaces the sender's
        entry of the table. Returns the state and the (N, gamma) tables that changed."""
        rows = jnp.arange(p.num_agents)[:, None]
        arrived, pay = [], []
        for g in range(p.gamma):
            dv = obs.deliveries[slot_channel(g)]
            col = jnp.asarray(p.member_slot[g], jnp.int32)
            safe = jnp.maximum(col, 0)
            arrived.append((col >= 0) & dv.mask[rows, safe])
            pay.append(dv.payload[rows, safe])
        arrived, pay = jnp.stack(arrived, axis=1), jnp.stack(pay, axis=1)  # (N, gamma, c, .)
        d = p.dim
        req = arrived & (pay[..., 0] > 0.5)
        seq = jnp.round(pay[..., 2]).astype(jnp.int32)
        data = arrived & (seq > 0) & (seq > s.seen)
        U_new = pay[..., HEADER : HEADER + d * d].reshape(*pay.shape[:3], d, d)
        s = s._replace(
            pending=s.pending | req.any(axis=-1),
            R_U=jnp.where(data[..., None, None], U_new, s.R_U),
            R_u=jnp.where(data[..., None], pay[..., HEADER + d * d :], s.R_u),
            seen=jnp.where(data, seq, s.seen),
        )
        return s, data.any(axis=-1)

    def _release(self, key: jax.Array, s: DecentralizedState, answer, changed, p: DecJaxParams):
        """Every (agent, slot) in ``answer`` releases its privatized cumulative statistics
        (:func:`agents.jax.fed_lin_ucb.private_release`): its own entry of its table changes at
        once, its own unreleased data (U, u, Q, Delta) is cleared."""
        tree = gram_tree(p.constants, (p.num_agents, p.gamma))
        U_hat, u_hat, tree_state, refusals = private_release(key, s, tree, answer, p.config.lam)
        releases = s.releases + answer.astype(jnp.int32)
        own = np.arange(p.c_max)[None, :] == np.asarray(p.pos)[:, None]  # (N, c_max)
        own = answer[:, :, None] & jnp.asarray(own)[:, None, :]  # (N, gamma, c)
        a2, a3 = answer[..., None], answer[..., None, None]
        s = s._replace(
            R_U=jnp.where(own[..., None, None], U_hat[:, :, None], s.R_U),
            R_u=jnp.where(own[..., None], u_hat[:, :, None], s.R_u),
            seen=jnp.where(own, releases[:, :, None], s.seen),
            releases=releases,
            U=jnp.where(a3, 0.0, s.U), u=jnp.where(a2, 0.0, s.u), Q=jnp.where(a3, 0.0, s.Q),
            since=jnp.where(answer, 0, s.since),
            tree=tree_state, capacity_refusals=refusals,
        )  # fmt: skip
        return s, U_hat, u_hat, changed | answer

    def _refresh(self, s: DecentralizedState, changed, p: DecJaxParams) -> DecentralizedState:
        """``W_{i,g}`` and ``w_{i,g}`` recomputed from the table where it changed, the spectrum
        of W floored at ``eig_floor`` (a real clip counted in ``eig_clip_events``)."""
        floor = lambda W: floor_spectrum(W, p.eig_floor)  # noqa: E731
        W, real = jax.vmap(jax.vmap(floor))(s.R_U.sum(axis=2))
        return s._replace(
            W=jnp.where(changed[..., None, None], W, s.W),
            w=jnp.where(changed[..., None], s.R_u.sum(axis=2), s.w),
            eig_clip_events=s.eig_clip_events + (changed & real).sum(dtype=jnp.int32),
        )

    def _messages(self, answer, flag, releases, U_hat, u_hat, p: DecJaxParams) -> dict:
        """One message per slot channel from each releasing agent: [request flag, slot, release
        number, U_hat, u_hat] (numpy's layout)."""
        n, G, d = p.num_agents, p.gamma, p.dim
        header = jnp.stack(
            [
                flag.astype(jnp.float32),
                jnp.broadcast_to(jnp.arange(G, dtype=jnp.float32), (n, G)),
                jnp.where(answer, releases, 0).astype(jnp.float32),
            ],
            axis=-1,
        )
        payload = jnp.concatenate([header, U_hat.reshape(n, G, d * d), u_hat], axis=-1)
        return {slot_channel(g): (answer[:, g], payload[:, g]) for g in range(G)}

    def _choose(self, s: DecentralizedState, context, slot, p: DecJaxParams) -> jnp.ndarray:
        """Decision with the slot of the next trial: LinUCB on ``V = W + U``, ``w + u`` with the
        clique's Proposition-2 radius (:func:`radius`)."""
        V = s.W[:, slot] + s.U[:, slot]
        chol = cholesky(V)
        return ucb_choice(context, chol, s.w[:, slot] + s.u[:, slot], radius(chol, p))


def radius(chol: jnp.ndarray, p: DecParams) -> jnp.ndarray:
    """Proposition 2 for each agent's clique of c_i agents
    (:func:`fedbandit_env.linear_kernels.confidence_radius` on ``ln det V - d ln(c_i
    rho_min)``), times beta_scale."""
    return confidence_radius(
        logdet_over(chol, (_sizes(p) * p.rho_min)[:, None]), 0.0,
        alpha=p.config.alpha, sigma=p.config.sigma, S=p.config.S, rho_max=p.rho_max,
        kappa=p.kappa, group=_sizes(p), beta_scale=p.config.beta_scale,
    )  # fmt: skip
