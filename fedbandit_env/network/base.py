"""What every channel shares: configuration, validation and the per-step transmit contract.

A channel (docs/architecture.md, "One step") takes, each step, the send mask (B, N) and the payloads
(B, N, dim) that the agents submitted with their arms, and returns what is delivered to whom this
step (a channel-specific delivery record of arrays) plus a ledger :class:`Charge`. The payload slots
of agents that do not send are never delivered: the engine zeroes them when they hold NaN/inf, and
otherwise passes them as they are (any finite value), so a channel masks by selection
(``np.where``/``copyto``), not by multiplying with the mask (0 * x is -0.0 for x < 0). Deliveries
made at step t appear in the observation returned by step t, so a message's content can influence
its receivers' arms from step t + 1 on (one hop per step).

Randomness (gossip edges, participation, drops) comes from the run's ``network`` stream, with one
named sub-stream per channel; fixed-shape draws happen every step, whoever sends, so a run's
draws do not depend on the other runs of its batch.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

import numpy as np
from gymnasium import spaces

from fedbandit_env.errors import ConfigError
from fedbandit_env.graphs import Topology
from fedbandit_env.network.ledger import Charge
from fedbandit_env.seeding import BatchedRNG
from fedbandit_env.shapes import RunAgentPayload, RunAgents
from fedbandit_env.validation import check_int, check_real


def check_probability(name: str, value: float, *, allow_one: bool = True) -> float:
    return check_real(name, value, low=0.0, high=1.0, high_open=not allow_one)


def payload_space(shape: tuple[int, ...]) -> spaces.Box:
    return spaces.Box(-np.inf, np.inf, shape=shape, dtype=np.float64)


class Channel(ABC):
    """Base class: ``name`` (the key in actions/observations), ``kind`` and payload ``dim``."""

    kind: str = ""
    supports_per_receiver: bool = False
    """True where :meth:`transmit` also takes ``per_receiver=(senders, payloads)``: ``senders``
    (B, N) bool marks the agents whose message depends on who receives it (Byzantine
    equivocation, docs/adversary.md) and ``payloads`` (B, N, N, dim) holds, at ``[b, j, i]``, what
    sender j's message to receiver i carries. It replaces j's row of ``payload`` for that
    receiver; what is sent, charged and dropped does not change."""

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

    @abstractmethod
    def observation_space(self) -> spaces.Dict:
        """Per-agent observation space of this channel's deliveries."""

    @abstractmethod
    def agent_observation(self, delivery: Any, b: int, i: int) -> dict[str, Any]:
        """Agent i's view (run b) of a delivery: fixed-shape arrays matching the space."""

    @abstractmethod
    def delivery_from_observations(self, observations: list[dict[str, Any]]) -> Any:
        """Inverse of :meth:`agent_observation` for one run (B = 1), agents in order."""

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind, "dim": self.dim, "drop_prob": self.drop_prob}

    @property
    def silent_step_is_empty(self) -> bool:
        """A step in which nobody sends on this channel draws no random number, changes no state,
        delivers :meth:`empty_delivery` and charges nothing: then the engine does not call
        :meth:`transmit` in a step the learner gave no message for. False unless a channel
        says so (a channel with drops draws every step; one with messages in flight delivers
        them)."""
        return False

    def check_per_receiver(self, senders: np.ndarray, payloads: np.ndarray) -> None:
        """Refuse per-receiver payloads (:attr:`supports_per_receiver`) of the wrong shape."""
        shape = (self.num_runs, self.num_agents, self.num_agents, self.dim)
        if payloads.shape != shape or senders.shape != shape[:2]:
            raise ConfigError(
                f"channels.{self.name}: per-receiver payloads: expected senders {shape[:2]} and "
                f"payloads {shape}, got {senders.shape} and {payloads.shape}"
            )

    def _charge(self) -> Charge:
        return Charge.zeros(self.num_runs, self.num_agents)
