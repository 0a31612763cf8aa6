"""Decentralized FedUCB (Dubey & Pentland), registered as ``fed_lin_ucb_decentralized``.

The paper's decentralized algorithm is described in prose only (its appendix is missing); this
is our reconstruction, with every choice in docs/linear.md, "Decentralized FedUCB".

Agents talk only through ``flood`` channels (LOCAL protocol with TTL gamma), one per slot:
``flood`` carries slot 0 and ``flood_g`` slot g >= 1, so an agent can send one message per slot
and trial (``slot_channel``). A message sent with the pull of trial s from d <= gamma hops
arrives in the observation of trial s + d - 1 and is used from trial s + d. The agents are
partitioned into cliques of the power graph G^gamma
(``fedbandit_env.graphs.clique_cover``); an agent pools only its clique's data. Each agent keeps
gamma round-robin estimators (slot g is used in trials t with (t - 1) mod gamma = g), each with
its own privatizer tree (``GramTreePrivatizer`` over (N, gamma) trees, m = 1 + ceil(log2 ceil(T /
gamma)), the extra log gamma term of the paper's Remark 5) and its own sync state:

* after using slot g, an agent whose trigger ``Delta (ln det(W + U + c (rho_max - rho_min) I)
  - ln det W) >= D_dec`` fires broadcasts a request for g together with its own release of g
  (D_dec: Theorem 1's D with T -> T/gamma);
* a clique member receiving a request for g releases its own statistics of g in the same trial
  (if it has unreleased data); so all members hold each other's new releases of g within 2 gamma
  trials of the request; the releases (privatized cumulative (U_hat, u_hat)) replace the sender's
  entry in
  every receiver's table, so ``W_{i,g}`` is the sum of the latest releases of i's clique members,
  updated member by member as they arrive (never atomically).

The group size in beta, in the trigger inflation and in the initial W is the clique size c_i
c_i. Each message carries [request flag, slot, release number, U_hat (d^2), u_hat (d)]; a
request and the requester's own release of the slot travel in one message. Memory: the table of
members' releases is (B, N, gamma, c_max, d, d).

Timing (``timing``, docs/writing-agents.md, "Communication steps"): ``"paper"`` (the default)
sends a trigger's request and release in a communication step right after the pull that fired
it (broadcast at trial t, at distance d at the start of trial t + d) and answers with the
next pull; ``"latency"`` sends the trigger's messages with the next pull (one trial later).
With gamma >= 2 a communication step also advances messages already in flight by one hop.

A private agent clips rewards to [-B, B] (``clipped_rewards``) and floors the spectrum of every
``W_{i,g}`` at ``eig_floor`` when a member's release changes it (``eig_clip_events`` counts
the floored matrices per run), see :mod:`agents.fed_ucb_common`. The horizon must allow one sync
round: T >= 2 gamma + 1.
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
from fedbandit_env.graphs import clique_cover, power_graph
from fedbandit_env.kernels import check_linear, ucb_choice
from fedbandit_env.linear_kernels import GramTreeConstants, rarely_switching
from fedbandit_env.policy import FederationFacts, TeamAction, check_timing
from fedbandit_env.privacy import GramTreePrivatizer
from fedbandit_env.seeding import BatchedRNG
from fedbandit_env.validation import MAX_AGENTS, check_int

AGENT_ID = "fed_lin_ucb_decentralized"
VERSION = 2  # results version (docs/bench.md): 2, the paper's timing by default (1: latency)
FLOOD = "flood"
HEADER = 3  # request flag, slot, release number


@dataclass(frozen=True)
class FedLinUCBDecentralizedConfig(LinearFedUCBConfig):
    """The shared FedUCB hyperparameters plus ``gamma`` (the flood TTL, the number of slots and
    the hop radius of the cliques) and the ``timing`` of a trigger's messages."""

    gamma: int = 1
    timing: str = "paper"

    def __post_init__(self) -> None:
        aid = self.agent_id
        check_timing(aid, self.timing)
        gamma = check_int("gamma", self.gamma, minimum=1, maximum=MAX_AGENTS, where=aid)
        object.__setattr__(self, "gamma", gamma)
        super().__post_init__()


def dec_channel_spec(dim: int, gamma: int) -> dict[str, dict[str, Any]]:
    """One ``flood`` channel per slot (:func:`slot_channel`), TTL gamma, dim 3 + d^2 + d."""
    return {
        slot_channel(g): {"kind": "flood", "dim": HEADER + dim * dim + dim, "ttl": gamma}
        for g in range(gamma)
    }


@dataclass(frozen=True)
class DecParams:
    """What decentralized FedUCB reads at run time on one federation: N, K, d, T, gamma; the
    clique cover of G^gamma (``cliques``, each agent's clique ``clique_of``, its position
    ``pos`` in it and the clique's size c_i, ``size``); the privacy constants (None when not
    private; the extra log gamma of Remark 5), Proposition 2's ``rho_min``, ``rho_max``,
    ``kappa``; D_dec (``threshold``); the spectrum floor; the configuration."""

    num_agents: int
    num_arms: int
    dim: int
    horizon: int
    gamma: int
    cliques: tuple[tuple[int, ...], ...]
    clique_of: tuple[int, ...]
    pos: tuple[int, ...]
    size: tuple[float, ...]
    constants: GramTreeConstants | None
    rho_min: float
    rho_max: float
    kappa: float
    threshold: float
    eig_floor: float
    config: FedLinUCBDecentralizedConfig
    rho_gap: float = 0.0
    """``rho_max - rho_min`` (one float64 difference, so a compiled program that takes it as an
    argument rounds it once, as a constant)."""

    @property
    def c_max(self) -> int:
        """The largest clique's size."""
        return max(len(c) for c in self.cliques)

    @property
    def paper(self) -> bool:
        """Whether a trigger's messages go out in a communication step (``timing="paper"``)."""
        return self.config.timing == "paper"


def dec_params(config: FedLinUCBDecentralizedConfig, facts: FederationFacts) -> DecParams:
    """The :class:`DecParams` of a validated configuration on a federation; checks the family,
    the slot channels, a connected graph and T >= 2 gamma + 1. Pure: the numpy ``reset`` and
    the JAX ``make_params`` call it."""
    d = check_linear(AGENT_ID, facts)
    g, n, T = config.gamma, facts.num_agents, facts.horizon
    check_channel_spec(AGENT_ID, dec_channel_spec(d, g), facts)
    if len(facts.topology.components) != 1:
        raise ConfigError(f"{AGENT_ID}: topology: expected a connected graph")
    if T < 2 * g + 1:
        raise ConfigError(
            f"{AGENT_ID}: horizon: expected at least 2 * gamma + 1 = {2 * g + 1} trials "
            f"(a first use and one sync round of up to 2 gamma trials), got {T}"
        )
    cover = clique_cover(power_graph(facts.topology.graph, g))
    cliques = tuple(tuple(int(i) for i in c) for c in cover)
    clique_of, pos = [0] * n, [0] * n
    for c, members in enumerate(cliques):
        for p, member in enumerate(members):
            clique_of[member], pos[member] = c, p
    size = tuple(float(len(cliques[c])) for c in clique_of)
    c, rho_min, rho_max, kappa = regularizer(config, d, n, T, gamma=g)
    if c is not None:
        default_D = c.sync_threshold
    else:
        t_slot = T / g
        default_D = 2.0 * t_slot * d / (math.log(1.0 + t_slot / (d * config.lam)) + 1.0)
    threshold = default_D if config.sync_threshold is None else config.sync_threshold
    eig_floor = rho_min if config.eig_floor is None else config.eig_floor
    return DecParams(n, facts.num_arms, d, T, g, cliques, tuple(clique_of), tuple(pos), size, c,
                     rho_min, rho_max, kappa, threshold, eig_floor, config,
                     rho_gap=rho_max - rho_min)  # fmt: skip


class FedLinUCBDecentralized(FedUCBBase):
    """Decentralized FedUCB over the flood channel (see the module docstring)."""

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
        config = FedLinUCBDecentralizedConfig(
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
            gamma,
            timing,
        )
        super().__init__(config)
        self.timing, self.paper = config.timing, config.timing == "paper"
        self.gamma = config.gamma

    def channel_spec(self, config: EnvConfig):
        return dec_channel_spec(config.linear.dim if config.linear is not None else 1, self.gamma)

    # ------------------------------------------------------------------ reset
    def reset(self, facts: FederationFacts, rng: BatchedRNG) -> None:
        """Clique cover of G^gamma, the per-slot privatizer trees (the extra log gamma of
        Remark 5), ``W_{i,g}`` from the members' initial ``rho_min I`` and D_dec
        (:func:`dec_params`)."""
        p = self.params = dec_params(self.config, facts)  # checks the facts
        self._channels = [slot_channel(g) for g in range(self.gamma)]
        d, n, runs, g = p.dim, p.num_agents, facts.num_runs, p.gamma
        self.d, self.N, self.T = d, n, p.horizon
        self.cliques = p.cliques
        self.clique_of, self.pos = np.array(p.clique_of, np.int64), np.array(p.pos, np.int64)
        self.size = np.array(p.size, dtype=np.float64)
        c_max = p.c_max
        valid = np.arange(c_max)[None, :] < self.size[:, None]
        self.constants, self.threshold = p.constants, p.threshold
        self.rho_min, self.rho_max, self.kappa = p.rho_min, p.rho_max, p.kappa
        self.tree = None
        if p.constants is not None:
            self.tree = GramTreePrivatizer.from_constants(p.constants, (n, g),
                                                          rng=rng.child("privacy"))  # fmt: skip
        eye = np.eye(d)
        self.R_U = np.where(valid[None, :, None, :, None, None], self.rho_min * eye, 0.0)
        self.R_U = np.broadcast_to(self.R_U, (runs, n, g, c_max, d, d)).copy()
        self.R_u = np.zeros((runs, n, g, c_max, d))
        self.init_safeguards(runs, n)
        self._W = self.R_U.sum(axis=3)  # (B, N, gamma, d, d): W_{i,g}, floored
        self._w = self.R_u.sum(axis=3)
        self.seen = np.zeros((runs, n, g, c_max), dtype=np.int64)
        self.U = np.zeros((runs, n, g, d, d))
        self.u = np.zeros((runs, n, g, d))
        self.G = np.zeros((runs, n, g, d, d))
        self.g_vec = np.zeros((runs, n, g, d))
        self.Q = np.zeros((runs, n, g, d + 1, d + 1))
        self.since = np.zeros((runs, n, g))
        self.releases = np.zeros((runs, n, g), dtype=np.int64)
        self.pending = np.zeros((runs, n, g), dtype=bool)
        self._silent = np.zeros((runs, n, HEADER + d * d + d))
        self.n_requests = np.zeros(runs, dtype=np.int64)
        self._rows = np.indices((runs, n))
        self._runs = np.arange(runs)
        self._context = None
        self._dim = HEADER + d * d + d

    # ------------------------------------------------------------- the trial
    def W(self, slot: int) -> tuple[np.ndarray, np.ndarray]:
        """``(W_{i,g}, w_{i,g})`` of every run and agent for slot ``g``: the sums of the clique
        members' latest releases, with the spectrum of W floored."""
        return self._W[:, :, slot], self._w[:, :, slot]

    def _refresh(self, run: np.ndarray, agent: np.ndarray, slot: np.ndarray) -> None:
        """Recompute ``W``, ``w`` where a member's release changed (spectrum floor, counted once per
        changed matrix)."""
        key = np.unique(np.ravel_multi_index((run, agent, slot), self._W.shape[:3]))
        r, v, s = np.unravel_index(key, self._W.shape[:3])
        self._W[r, v, s] = self.floor_W(self.R_U[r, v, s].sum(axis=1), r)
        self._w[r, v, s] = self.R_u[r, v, s].sum(axis=1)

    def act(self, obs: VecObservation) -> TeamAction:
        """One trial under the configured ``timing``; this body is the latency timing: fold in
        the last pull, fire triggers, take what arrived, answer requests, choose with the
        slot of the next trial."""
        if self.paper:
            return self._act_paper(obs)
        runs, n = self._rows[0].shape
        trigger = np.zeros((runs, n), dtype=bool)
        used = None
        if obs.step > 0:
            used = (obs.step - 1) % self.gamma
            self._fold(obs, used)
            trigger = self._trigger(used)
            self._receive([obs.deliveries[name] for name in self._channels])
        messages = self._outgoing(trigger, used)
        slot = obs.step % self.gamma
        W, w = self.W(slot)
        V = W + self.U[:, :, slot]
        arms = ucb_choice(
            obs.context, V, w + self.u[:, :, slot], self.radius(V, self.size[None, :])
        )
        self._context = obs.context
        return TeamAction(arms, messages)

    # ------------------------------------------------------------- paper timing
    def _act_paper(self, obs: VecObservation) -> TeamAction:
        """The paper's timing: a trigger after the pull of trial t broadcasts the request and the
        release at trial t, so a run in which some agent triggers takes one communication step
        carrying those messages (they reach distance 1 at the start of trial t+1); answers to
        requests go out with the pull of the trial in which the requests arrive. Slots follow
        each run's own trials (runs may differ in their communication steps)."""
        runs, n = self._rows[0].shape
        trigger = np.zeros((runs, n), dtype=bool)
        used = None
        if obs.step > 0:
            fresh = (obs.phase == PULL) & (obs.pulls > 0)
            used = (obs.pulls - 1) % self.gamma  # (B,) the slot of the trial just pulled
            if fresh.any():
                self._fold_runs(obs, used, fresh)
                # no trigger after a run's last trial: it has finished, and would send nothing
                # (in a batch the others may still communicate; alone it would not be asked)
                trigger = self._trigger_runs(used) & (fresh & (obs.pulls < self.T))[:, None]
            self._receive([obs.deliveries[name] for name in self._channels])
        talk = trigger.any(axis=1)
        messages = self._outgoing_paper(trigger, used, talk, obs.pulls < self.T)
        slot = obs.pulls % self.gamma  # (B,) the slot of the next trial
        run = self._runs
        W, w = self._W[run, :, slot], self._w[run, :, slot]
        V = W + self.U[run, :, slot]
        arms = ucb_choice(
            obs.context, V, w + self.u[run, :, slot], self.radius(V, self.size[None, :])
        )
        self._context = obs.context
        return TeamAction(arms, messages, ~talk if talk.any() else None)

    def _fold_runs(self, obs: VecObservation, slot: np.ndarray, fresh: np.ndarray) -> None:
        """``_fold`` with one slot per run, only in the runs that pulled."""
        run = self._runs
        arrays = (self.U, self.u, self.G, self.g_vec, self.Q)
        views = tuple(a[run, :, slot] for a in arrays)  # copies (B, N, ...)
        self.fold(obs, self._context, self._rows, views, runs=fresh)
        for a, v in zip(arrays, views, strict=True):
            a[run, :, slot] = v
        self.since[run, :, slot] += fresh[:, None]

    def _trigger_runs(self, slot: np.ndarray) -> np.ndarray:
        """The trigger ``Delta (ln det(W + U + c_i (rho_max - rho_min) I) - ln det W) >= D_dec``
        for each run's slot just used."""
        run = self._runs
        W = self._W[run, :, slot]
        inflate = (self.size * (self.rho_max - self.rho_min))[None, :, None, None] * np.eye(self.d)
        logdet = self.logdet(W + self.U[run, :, slot] + inflate)
        return rarely_switching(logdet, self.logdet(W), self.since[run, :, slot], self.threshold)

    def _outgoing_paper(self, trigger, used, talk, live) -> dict:
        """A talking run sends only its triggers (request + own release of the slot just used);
        its pending requests wait for the next pull, when the trial they arrived for starts.
        The other runs answer their pending requests with this pull, as under latency. A run
        that has finished (``live`` False) answers nothing: the environment would not deliver
        it, so it is neither released nor counted."""
        answer = self.pending & (self.since > 0) & (~talk & live)[:, None, None]
        run = self._runs
        if used is not None:
            answer[run, :, used] |= trigger
        self.pending[~talk] = False
        return self._messages(answer, trigger, None if used is None else (run, slice(None), used))

    def _fold(self, obs: VecObservation, slot: int) -> None:
        """The last pull into the statistics of slot ``slot`` (every run pulled)."""
        views = tuple(a[:, :, slot] for a in (self.U, self.u, self.G, self.g_vec, self.Q))
        self.fold(obs, self._context, self._rows, views)
        self.since[:, :, slot] += 1

    def _trigger(self, slot: int) -> np.ndarray:
        """The trigger of :meth:`_trigger_runs` for one slot shared by every run."""
        W, _ = self.W(slot)
        inflate = (self.size * (self.rho_max - self.rho_min))[None, :, None, None] * np.eye(self.d)
        logdet = self.logdet(W + self.U[:, :, slot] + inflate)
        return rarely_switching(logdet, self.logdet(W), self.since[:, :, slot], self.threshold)

    def _receive(self, deliveries: list) -> None:
        """Requests mark the slot pending; newer releases of clique members replace their
        entries (the slot travels in the payload; every slot's channel is read at once)."""
        run, recv, orig, pay = (
            np.concatenate([getattr(dv, k) for dv in deliveries])
            for k in ("run", "receiver", "origin", "payload")
        )
        same = self.clique_of[recv] == self.clique_of[orig]
        run, recv, orig, pay = run[same], recv[same], orig[same], pay[same]
        if len(run) == 0:
            return
        req, slot, seq = pay[:, 0] > 0.5, pay[:, 1].astype(np.int64), pay[:, 2].astype(np.int64)
        self.pending[run[req], recv[req], slot[req]] = True
        pos = self.pos[orig]
        data = (seq > 0) & (seq > self.seen[run, recv, slot, pos])
        r, v, s, p = run[data], recv[data], slot[data], pos[data]
        d = self.d
        self.R_U[r, v, s, p] = pay[data, HEADER : HEADER + d * d].reshape(-1, d, d)
        self.R_u[r, v, s, p] = pay[data, HEADER + d * d :]
        self.seen[r, v, s, p] = seq[data]
        if len(r):
            self._refresh(r, v, s)

    def _outgoing(self, trigger: np.ndarray, used: int | None) -> dict:
        """One message per slot channel: a trigger (request + own release of the slot just
        used) and the answers to every pending request whose slot has unreleased data, all in
        this trial; a request for a slot with nothing new to release is moot."""
        answer = self.pending & (self.since > 0)
        if used is not None:
            answer[:, :, used] |= trigger
        self.pending[:] = False
        return self._messages(answer, trigger, None if used is None else np.s_[:, :, used])

    def _messages(self, answer: np.ndarray, trigger: np.ndarray, where: tuple | None) -> dict:
        """The slot channels' messages: ``answer`` (B, N, slots) says which slots release, the
        trigger flags go to the slots at ``where`` (the slot just used, or None)."""
        if not answer.any():
            silent = np.zeros(answer.shape[:2], dtype=bool)
            return {name: (silent, self._silent) for name in self._channels}
        U_hat, u_hat = self._release(answer)
        runs, n, g = answer.shape
        d = self.d
        payload = np.zeros((runs, n, g, self._dim))
        if where is not None:
            payload[(*where, 0)] = trigger
        payload[..., 1] = np.arange(g)
        payload[..., 2] = np.where(answer, self.releases, 0)
        payload[..., HEADER : HEADER + d * d] = U_hat.reshape(runs, n, g, d * d)
        payload[..., HEADER + d * d :] = u_hat
        self.n_requests += trigger.sum(axis=1)
        return {
            name: (answer[:, :, slot], payload[:, :, slot])
            for slot, name in enumerate(self._channels)
        }

    def _release(self, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Every agent and slot in ``mask`` releases its privatized cumulative statistics; its
        own entry of its table changes at once and its own unreleased data is cleared."""
        if self.tree is not None:
            rel = self.tree.release(self.Q, mask)
            U_hat, u_hat = rel.U_hat, rel.u_hat
        else:
            U_hat, u_hat = self.G + self.lam * np.eye(self.d), self.g_vec
        b, i, s = np.nonzero(mask)
        p = self.pos[i]
        self.R_U[b, i, s, p] = U_hat[b, i, s]  # one's own release counts at once
        self.R_u[b, i, s, p] = u_hat[b, i, s]
        self.releases[mask] += 1
        self.seen[b, i, s, p] = self.releases[b, i, s]
        self._refresh(b, i, s)
        for arr in (self.U, self.u, self.Q):
            arr[mask] = 0.0
        self.since[mask] = 0
        return U_hat, u_hat


def slot_channel(slot: int) -> str:
    """Name of the flood channel of a slot: ``flood`` for slot 0, ``flood_g`` for slot g."""
    return FLOOD if slot == 0 else f"{FLOOD}_{slot}"
