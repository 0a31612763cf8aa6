"""GosInE, gossiping insert-eliminate UCB (Chawla, Sankararaman, Ganesh & Shakkottai), synchronous
version, registered as ``gosine``.

Decisions and their reasons: docs/gosine.md. N agents on a connected graph, K shared arms; agents
exchange **only arm ids**, never rewards.

State of agent i (0-based id): a sticky set ``S_i`` of ``s = ceil(K/N)`` consecutive arms starting
at ``(i s) mod K`` (wrapping around; it never changes) and two extra slots ``U`` and ``L``, at first
the next two arms after the sticky block; the active set is ``S_i + {U, L}``. It keeps its own
per-arm counts and reward sums over **all** arms (kept when an arm leaves and re-enters the active
set, never reset per phase), as the authors' code.

Per step (t = pulls done so far, the global time): UCB restricted to the active set, index
``mean_k + sqrt(alpha ln(t + 1) / n_k)``, an unplayed active arm has an infinite index, ties
broken uniformly (one uniform per agent from its ``tiebreak`` stream), as the authors' code.

Phase j ends after pull ``j^beta`` (the authors' code). With ``dn`` the per-arm pulls during the
phase:

1. if ``dn(U) < dn(L)``, swap U and L (U is the more-played non-sticky arm);
2. communication step (docs/writing-agents.md, "Communication steps"): every agent offers its
   recommendation, its most-played active arm of the phase (ties uniformly at random, one
   uniform per agent from its ``recommend`` stream), and pulls the recommendation of one
   uniformly random neighbour: the ``gossip`` channel in ``mode="pull_one_neighbour"``
   (docs/channels.md), channel name ``recommend``, dim 1 (the arm id), N messages per phase;
3. if the recommended arm is not active, it replaces L.

The swap happens before the insertion, statistics are never reset, ``ln(t+1)`` uses global time
(all as the authors' code). Defaults ``alpha = 4``, ``beta = 3`` (the authors' code). A run takes T
pulls plus one communication step per phase end before the horizon (about ``T^(1/beta)``). Needs a
connected graph with N >= 2 and ``K >= ceil(K/N) + 2`` (room for U and L outside the sticky set).
Not implemented: the asynchronous version (per-agent phase clocks). Not checked against the paper's
text: the regret claims, and that the recommendation is the most-played arm of the last phase.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from agents.channel_check import check_channel_spec
from fedbandit_env.config import EnvConfig
from fedbandit_env.engine import COMMUNICATION, VecObservation
from fedbandit_env.errors import ConfigError
from fedbandit_env.kernels import argmax_one_uniform
from fedbandit_env.policy import (
    MULTI_ARMED,
    FederationFacts,
    TeamAction,
    TeamPolicy,
    require_family,
)
from fedbandit_env.seeding import BatchedRNG
from fedbandit_env.validation import check_int, check_real
from fedbandit_env.xp import namespace

AGENT_ID = "gosine"
VERSION = 1  # results version
CHANNEL = "recommend"
PULL_MODE = "pull_one_neighbour"


@dataclass(frozen=True)
class GosInEConfig:
    """Hyperparameters of GosInE: ``alpha`` (> 0) scales the UCB width; phase j ends after pull
    ``j^beta`` (``beta`` an int >= 2)."""

    alpha: float = 4.0
    beta: int = 3
    agent_id: ClassVar[str] = AGENT_ID  # the learner its errors name (a subclass sets its own)

    def __post_init__(self) -> None:
        where = self.agent_id
        object.__setattr__(
            self, "alpha", check_real("alpha", self.alpha, low=0.0, low_open=True, where=where)
        )
        object.__setattr__(self, "beta", int(check_int("beta", self.beta, minimum=2, where=where)))


def sticky_sets(
    num_agents: int, num_arms: int, size: int | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(sticky (N, K) bool, U (N,), L (N,))``, the initial state of every agent: ``s``
    consecutive arms from ``(i s) mod K``, then the next two arms; ``s = size``, by default
    ``ceil(K/N)``."""
    s = math.ceil(num_arms / num_agents) if size is None else int(size)
    start = (np.arange(num_agents) * s) % num_arms
    sticky = np.zeros((num_agents, num_arms), dtype=bool)
    for m in range(s):  # a loop over the block length, at reset only
        sticky[np.arange(num_agents), (start + m) % num_arms] = True
    return sticky, (start + s) % num_arms, (start + s + 1) % num_arms


def gosine_channel_spec() -> dict[str, dict[str, Any]]:
    """``recommend``: kind ``gossip``, dim 1, ``mode="pull_one_neighbour"``."""
    return {CHANNEL: {"kind": "gossip", "dim": 1, "mode": PULL_MODE}}


def default_sticky_size(num_agents: int, num_arms: int) -> tuple[int, str]:
    """GosInE's sticky-set size ``s = ceil(K/N)`` and how it is written in errors."""
    return math.ceil(num_arms / num_agents), "ceil(K/N)"


@dataclass(frozen=True)
class GosInEParams:
    """What GosInE (and robust GosInE) reads at run time on one federation: N, K, the sticky
    sets ``sticky`` (N, K) bool and the first slots ``U`` and ``L`` (N,) of every agent, the
    configuration and the row's notes."""

    num_agents: int
    num_arms: int
    sticky: np.ndarray
    U: np.ndarray
    L: np.ndarray
    config: Any
    notes: tuple[str, ...] = ()


def gosine_params(
    agent_id: str,
    config: Any,
    facts: FederationFacts,
    sticky_size: Any = default_sticky_size,
    notes: tuple[str, ...] = (),
) -> GosInEParams:
    """The :class:`GosInEParams` of a validated configuration on a federation, with the
    sticky-set size rule ``sticky_size(N, K) -> (s, how it is written)``; checks the family,
    the channel and its mode, a connected graph of at least 2 agents and ``K >= s + 2``. Pure:
    the numpy ``reset`` and the JAX ``make_params`` call it."""
    require_family(agent_id, facts, MULTI_ARMED)
    N, K = facts.num_agents, facts.num_arms
    check_channel_spec(agent_id, gosine_channel_spec(), facts)
    if N < 2 or facts.topology.num_components != 1:
        raise ConfigError(
            f"{agent_id}: topology: expected one connected graph of at least 2 agents, "
            f"got {facts.topology.num_components} component(s) of {N} agent(s)"
        )
    s, rule = sticky_size(N, K)
    if K < s + 2:
        raise ConfigError(
            f"{agent_id}: num_arms: expected K >= {rule} + 2 (the sticky set plus the "
            f"two slots U and L), got K = {K} with N = {N}"
        )
    sticky, u, l = sticky_sets(N, K, s)
    return GosInEParams(N, K, sticky, u, l, config, notes)


class GosInE(TeamPolicy):
    """Batched synchronous GosInE over B runs and N agents; see the module docstring."""

    agent_id = AGENT_ID
    payload_layouts = {CHANNEL: "arm"}  # the recommended arm id
    version = VERSION

    def __init__(self, alpha: float = 4.0, beta: int = 3):
        self.config = GosInEConfig(alpha, beta)

    def channel_spec(self, config: EnvConfig) -> dict[str, dict[str, Any]]:
        return gosine_channel_spec()

    def reset(self, facts: FederationFacts, rng: BatchedRNG) -> None:
        """Sticky sets, slots U and L, zero statistics; phase 1 ends after pull 1."""
        self.params = self.make_params(facts)  # checks the facts
        B, N, K = facts.num_runs, facts.num_agents, facts.num_arms
        self.N, self.K = N, K
        sticky, u, l = self.params.sticky, self.params.U, self.params.L
        self.sticky = sticky
        self.U = np.broadcast_to(u, (B, N)).copy()
        self.L = np.broadcast_to(l, (B, N)).copy()
        self.counts = np.zeros((B, N, K))
        self.sums = np.zeros((B, N, K))
        self.phase_start = np.zeros((B, N, K))
        self.phase = 1
        self.next_end = 1
        self._rows = np.indices((B, N))
        self._tiebreak = rng.child("tiebreak").buffered("uniform", (N,))
        self._recommend = rng.child("recommend").buffered("uniform", (N,))
        self._send = np.ones((B, N), dtype=bool)
        self._quiet = np.zeros((B, N), dtype=bool)
        self._talk = np.zeros(B, dtype=bool)
        self._idle = np.zeros((B, N), dtype=np.int64)
        self.outgoing = np.zeros((B, N, 1))
        self._refresh()

    def make_params(self, facts: FederationFacts) -> GosInEParams:
        """:func:`gosine_params` of this configuration (robust GosInE: its own size rule)."""
        return gosine_params(self.agent_id, self.config, facts)

    def active(self) -> np.ndarray:
        """Active sets (B, N, K) bool: sticky plus U and L."""
        b, i = self._rows
        act = np.broadcast_to(self.sticky, self.counts.shape).copy()
        act[b, i, self.U] = True
        act[b, i, self.L] = True
        return act

    def _refresh(self) -> None:
        """Cache the active mask (it changes only at phase ends)."""
        self._active = self.active()
        self._inactive = ~self._active

    def index(self, t: int) -> np.ndarray:
        """UCB over the active set (inactive arms -inf, unplayed active arms +inf)."""
        n = self.counts
        played = n > 0
        safe = np.where(played, n, 1.0)
        value = self.sums / safe + np.sqrt(self.config.alpha * math.log(t + 1) / safe)
        value = np.where(played, value, np.inf)
        value[self._inactive] = -np.inf
        return value

    def _phase_end(self) -> TeamAction:
        """Swap U/L, then offer the recommendation in a communication step."""
        b, i = self._rows
        dn = self.counts - self.phase_start
        swap = dn[b, i, self.U] < dn[b, i, self.L]
        self.U, self.L = np.where(swap, self.L, self.U), np.where(swap, self.U, self.L)
        score = np.where(self._active, dn, -1.0)
        rec = argmax_one_uniform(score, self._recommend.next())
        self.outgoing = rec[..., None].astype(np.float64)
        self.phase_start = self.counts.copy()
        self.phase += 1
        self.next_end = self.phase**self.config.beta
        return TeamAction(self._idle, {CHANNEL: (self._send, self.outgoing)}, self._talk)

    def _insert(self, obs: VecObservation) -> None:
        """A recommended arm that is not active replaces L. A reply that is no arm id (an
        integer in [0, K); a Byzantine neighbour may send anything, docs/adversary.md) counts
        as no recommendation."""
        d = obs.deliveries[CHANNEL]
        b, i = self._rows
        raw = d.payload[..., 0]
        valid = arm_ids(raw, d.received, self.K)
        rec = np.where(valid, raw, self.U).astype(np.int64)  # none: keep (U is active)
        new = self._inactive[b, i, rec]
        self.L = np.where(new, rec, self.L)
        self._refresh()

    def act(self, obs: VecObservation) -> TeamAction:
        """Fold in the last pull; at a phase end swap and recommend (steps 1-2), after the
        communication step insert (step 3); otherwise pull the UCB arm of the active set."""
        if obs.step > 0:
            if obs.phase[0] == COMMUNICATION:
                self._insert(obs)
            else:
                b, i = self._rows
                self.counts[b, i, obs.last_arm] += 1.0
                self.sums[b, i, obs.last_arm] += obs.last_reward
                if int(obs.pulls[0]) == self.next_end:
                    return self._phase_end()
        t = int(obs.pulls[0])
        arms = argmax_one_uniform(self.index(t), self._tiebreak.next())
        return TeamAction(arms, {CHANNEL: (self._quiet, self.outgoing)})


def arm_ids(raw: Any, received: Any, num_arms: int) -> Any:
    """(..., N) bool: the received recommendations that are arm ids, integers in [0, K) (either
    engine)."""
    xp = namespace(raw, received)
    return received & (raw >= 0) & (raw < num_arms) & (raw == xp.floor(raw))
