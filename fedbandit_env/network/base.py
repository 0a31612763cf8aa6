"""What every channel shares: configuration, validation and the per-step transmit contract
(docs/channels.md, "What every channel does"; docs/architecture.md, "One step").
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

import numpy as np

from fedbandit_env.errors import ConfigError
from fedbandit_env.graphs import Topology
from fedbandit_env.network.ledger import AGENT_AGENT, Charge
from fedbandit_env.seeding import BatchedRNG
from fedbandit_env.shapes import RunAgentPayload, RunAgents
from fedbandit_env.validation import check_int, check_probability


class Channel(ABC):
    """Base class: ``name`` (the key in actions/observations), ``kind`` and payload ``dim``."""

    kind: str = ""
    supports_per_receiver: bool = False
    """True where :meth:`transmit` also takes ``per_receiver=(senders, payloads)``: the senders
    (B, N) whose message differs per receiver, and at ``payloads[b, j, i]`` (B, N, N, dim) what j's
    message to i carries (docs/adversary.md, "Per-receiver payloads (equivocation)")."""

    def __init__(
        self,
        name: str,
        topology: Topology,
        dim: int,
        *,
        c1: float,
        c2: float,
        drop_prob: float = 0.0,
    ):
        dim = check_int(f"channels.{name}.dim", dim, minimum=1)
        self.name = name
        self.topology = topology
        self.num_agents = topology.num_agents
        self.dim = int(dim)
        self.c1 = float(c1)
        self.c2 = float(c2)
        self.drop_prob = check_probability(f"channels.{name}.drop_prob", drop_prob, allow_one=False)
        self.num_runs = 0

    def reset(self, rng: BatchedRNG) -> None:
        """Start a batch of runs; ``rng`` is this channel's sub-stream of the network stream."""
        self.num_runs = rng.num_runs
        self._reset(rng)

    @abstractmethod
    def _reset(self, rng: BatchedRNG) -> None: ...

    @abstractmethod
    def transmit(self, step: int, send: RunAgents, payload: RunAgentPayload) -> tuple[Any, Charge]:
        """Deliveries of this step and what they cost: a fresh delivery record and a fresh
        :class:`Charge` (the learner owns the record's arrays)."""

    @abstractmethod
    def empty_delivery(self) -> Any:
        """A fresh delivery record of a step in which nothing arrives (used at reset)."""

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind, "dim": self.dim, "drop_prob": self.drop_prob}

    @property
    def silent_step_is_empty(self) -> bool:
        """True where a step in which nobody sends draws nothing, changes no state, delivers
        :meth:`empty_delivery` and charges nothing, so the engine may skip :meth:`transmit`
        (docs/architecture.md, "One step path"); False unless a channel says so."""
        return False

    def check_per_receiver(self, senders: np.ndarray, payloads: np.ndarray) -> None:
        """Refuse per-receiver payloads (:attr:`supports_per_receiver`) of the wrong shape."""
        shape = (self.num_runs, self.num_agents, self.num_agents, self.dim)
        if payloads.shape != shape or senders.shape != shape[:2]:
            raise ConfigError(
                f"channels.{self.name}: per-receiver payloads: expected senders {shape[:2]} and "
                f"payloads {shape}, got {senders.shape} and {payloads.shape}"
            )

    def _charge(self, link=AGENT_AGENT, messages=0, cost=0.0, dropped=0, sent=0) -> Charge:
        """A fresh :class:`Charge`: ``messages`` (B,) on link type ``link`` at ``cost`` (B,),
        ``dropped`` (B,) and ``sent`` (B, N); zero by default."""
        charge = Charge.zeros(self.num_runs, self.num_agents)
        charge.bill(link, messages, self.dim, cost)
        charge.dropped[:] = dropped
        charge.sent[:] = sent
        return charge
