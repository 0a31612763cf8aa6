"""Robust GosInE: GosInE with the blocking rule of Vial, Shakkottai & Srikant, "Robust
Multi-Agent Multi-Armed Bandits" (MobiHoc 2021, arXiv 2007.03812), registered as
``robust_gosine``.

Decisions and their reasons: docs/robust-gosine.md. n honest and m malicious agents face copies
of the same K-armed bandit and exchange **only arm ids**; a malicious agent recommends whatever
it likes. Everything except the blocking is the suite's GosInE (:mod:`agents.gosine`, reused by
subclassing): sticky set, slots U and L, UCB over the active set, phase j ending after pull
``j^beta``, swap of U and L, insertion of a recommended inactive arm into L.

Blocking (rule ``"2021"``), at the end of phase j, for every agent i:

1. ``B_j`` = i's most-played active arm of phase j (the arm it recommends itself, ties at
   random from its ``recommend`` stream, as GosInE);
2. if ``j >= 2`` and i received a recommendation ``rec`` from agent ``src`` at the end of phase
   j - 1 and ``rec != B_j`` (the recommended arm did not become i's most-played arm of the phase
   that followed), i blocks ``src`` until phase ``ceil(j^eta)``; re-blocking an agent that is
   already blocked keeps the later expiry;
3. i pulls one neighbour uniformly among those it does not block (``blocked_until[h] <= j``):
   the ``gossip`` channel's exclusion mask in mode ``pull_one_neighbour`` (docs/channels.md),
   with the same single uniform draw per agent and step as GosInE's pull; with every neighbour
   blocked it pulls nobody and nothing is charged.

Rule ``"none"`` blocks nobody and sends no mask: exactly the suite's ``gosine`` (same streams,
same bits). Sticky sets: ``s = ceil(K / sticky_agents)`` arms from ``(i s) mod K``; the paper
sizes the sets by the number n of honest agents, so ``sticky_agents`` defaults (None) to
``N - f`` with f the environment's declared bound on Byzantine agents
(``FederationFacts.byzantine_bound``: N without an adversary, as GosInE; which agents are
Byzantine is never observed). Rule ``"none"`` keeps GosInE's N. The 2022 rule (Vial, Shakkottai & Srikant, "Robust Multi-Agent Bandits Over
Undirected Graphs", arXiv 2203.00076) is not implemented: its thresholds were not available to
us (docs/robust-gosine.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from agents.gosine import (
    CHANNEL,
    GosInE,
    GosInEConfig,
    GosInEParams,
    arm_ids,
    default_sticky_size,
    gosine_params,
)
from fedbandit_env.engine import VecObservation
from fedbandit_env.errors import ConfigError
from fedbandit_env.policy import FederationFacts, TeamAction
from fedbandit_env.seeding import BatchedRNG
from fedbandit_env.validation import check_int, check_real

AGENT_ID = "robust_gosine"
# results version; 2: sticky_agents defaults to the declared honest agents N - f (was N)
VERSION = 2
RULES = ("2021", "none")
"""Blocking rules: Vial, Shakkottai & Srikant (2021), or no blocking (plain GosInE)."""


@dataclass(frozen=True)
class RobustGosInEConfig(GosInEConfig):
    """GosInE's ``alpha`` and ``beta``, plus ``rule`` (one of :data:`RULES`), ``eta`` (> 1: a
    source blocked at the end of phase j stays blocked until phase ``ceil(j^eta)``) and
    ``sticky_agents`` (None: the honest agents N - f the environment declares, N for rule
    ``"none"``; else an int >= 1: the sticky-set size is ``ceil(K / sticky_agents)``)."""

    rule: str = "2021"
    eta: float = 2.0
    sticky_agents: int | None = None
    agent_id: ClassVar[str] = AGENT_ID

    def __post_init__(self) -> None:
        super().__post_init__()
        if not isinstance(self.rule, str) or self.rule not in RULES:
            raise ConfigError(f"{AGENT_ID}: rule: expected one of {list(RULES)}, got {self.rule!r}")
        eta = check_real("eta", self.eta, low=1.0, low_open=True, where=AGENT_ID)
        object.__setattr__(self, "eta", eta)
        if self.sticky_agents is not None:
            n = int(check_int("sticky_agents", self.sticky_agents, minimum=1, where=AGENT_ID))
            object.__setattr__(self, "sticky_agents", n)


def block_until(j: int, eta: float) -> int:
    """``ceil(j^eta)``, the first phase in which a source blocked at the end of phase j may be
    pulled again (exact integer power for an integral eta)."""
    if float(eta).is_integer():
        return j ** int(eta)
    return math.ceil(j**eta)


def robust_sticky_size(
    config: RobustGosInEConfig, bound: int, num_agents: int, num_arms: int
) -> tuple[int, str]:
    """``ceil(K / sticky_agents)`` (default: the honest agents ``N - f`` the environment
    declares; GosInE's ``N`` for rule ``"none"``) and how it is written in errors."""
    n = config.sticky_agents
    if n is None:
        if config.rule == "none" or bound == 0:
            return default_sticky_size(num_agents, num_arms)
        n = num_agents - bound
        return math.ceil(num_arms / n), f"ceil(K/(N - f)) = ceil({num_arms}/{n})"
    if n > num_agents:
        raise ConfigError(
            f"{AGENT_ID}: sticky_agents: expected an int in [1, N = {num_agents}], got {n}"
        )
    return math.ceil(num_arms / n), f"ceil(K/sticky_agents) = ceil({num_arms}/{n})"


def robust_notes(config: RobustGosInEConfig, num_agents: int, bound: int) -> tuple[str, ...]:
    """``"sticky_agents = 8 > 6 honest"`` when a user's sticky_agents counts more honest
    agents than the environment's declared bound leaves (rule ``"2021"``)."""
    n = config.sticky_agents
    if n is not None and config.rule == "2021" and n > num_agents - bound:
        return (f"sticky_agents = {n} > {num_agents - bound} honest (N - f)",)
    return ()


def robust_gosine_params(config: RobustGosInEConfig, facts: FederationFacts) -> GosInEParams:
    """GosInE's params with robust GosInE's sticky-set size and notes (pure; both engines)."""
    bound = facts.byzantine_bound

    def size(num_agents: int, num_arms: int) -> tuple[int, str]:
        return robust_sticky_size(config, bound, num_agents, num_arms)

    notes = robust_notes(config, facts.num_agents, bound)
    return gosine_params(AGENT_ID, config, facts, size, notes)


class RobustGosInE(GosInE):
    """Batched synchronous GosInE with Vial, Shakkottai & Srikant's (2021) blocking; see the
    module docstring."""

    agent_id = AGENT_ID
    version = VERSION

    def __init__(
        self,
        alpha: float = 4.0,
        beta: int = 3,
        rule: str = "2021",
        eta: float = 2.0,
        sticky_agents: int | None = None,
    ):
        self.config = RobustGosInEConfig(alpha, beta, rule, eta, sticky_agents)

    def make_params(self, facts: FederationFacts) -> GosInEParams:
        """:func:`robust_gosine_params` of this configuration."""
        return robust_gosine_params(self.config, facts)

    def notes(self) -> tuple[str, ...]:
        """``"sticky_agents = 8 > 6 honest"`` when a user's sticky_agents counts more honest
        agents than the environment's declared bound leaves (rule ``"2021"``)."""
        return self.params.notes

    def reset(self, facts: FederationFacts, rng: BatchedRNG) -> None:
        """GosInE's state plus the blocklists ``blocked_until`` (B, N, N), the phase until which
        agent i blocks agent h (0: never blocked), and the last recommendation ``rec`` (B, N)
        and its source ``src`` (B, N), -1 where none arrived."""
        super().reset(facts, rng)  # its params: robust_gosine_params
        B, N = facts.num_runs, facts.num_agents
        self.blocked_until = np.zeros((B, N, N), dtype=np.int64)
        self.rec = np.full((B, N), -1, dtype=np.int64)
        self.src = np.full((B, N), -1, dtype=np.int64)
        self.blocks = 0  # blocking events so far, all runs (a diagnostic)

    def blocked(self, j: int) -> np.ndarray:
        """(B, N, N) bool: the agents each agent does not pull at the end of phase j."""
        return self.blocked_until > j

    def _block(self, j: int, best: np.ndarray) -> None:
        """The 2021 rule at the end of phase j: block the last source whose recommendation is
        not ``best`` (B_j, the phase's most-played active arm), until ``ceil(j^eta)``."""
        if j < 2:
            return
        b, i = self._rows
        suspect = (self.src >= 0) & (self.rec != best)
        h = np.where(suspect, self.src, 0)
        current = self.blocked_until[b, i, h]
        later = np.maximum(current, block_until(j, self.config.eta))
        self.blocked_until[b, i, h] = np.where(suspect, later, current)
        self.blocks += int(suspect.sum())

    def _phase_end(self) -> TeamAction:
        """GosInE's swap and recommendation (its B_j), then the blocking and the pull over the
        non-blocked neighbours (the exclusion mask)."""
        action = super()._phase_end()
        if self.config.rule == "none":
            return action
        j = self.phase - 1  # the phase that just ended (GosInE has moved on)
        self._block(j, self.outgoing[..., 0].astype(np.int64))
        send, payload = action.messages[CHANNEL]
        action.messages[CHANNEL] = (send, payload, self.blocked(j))
        return action

    def _insert(self, obs: VecObservation) -> None:
        """Remember the recommendation and its source (-1 where none arrived), then GosInE's
        insertion of a valid recommended arm into L."""
        d = obs.deliveries[CHANNEL]
        raw = d.payload[..., 0]
        valid = arm_ids(raw, d.received, self.K)
        # a reply that is no arm id (a malicious one may be anything) is never inserted (GosInE
        # ignores it), and as it cannot be B_j its source is blocked at the next phase end
        self.rec = np.where(valid, raw, -1).astype(np.int64)
        self.src = np.where(d.received, d.partner, -1)
        super()._insert(obs)
