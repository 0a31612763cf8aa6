"""The communication ledger: messages, floats and cost per link type, per run (docs/environments.md,
"Channels").

Link types: ``agent_agent`` (cost ``c2`` per use) and ``agent_server`` (cost ``c1`` per use). Every
channel reports what one step transmitted as a :class:`Charge`; the ledger keeps the last step's
charge and the cumulative totals, batched over runs. Not sending costs nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

LINK_TYPES: tuple[str, ...] = ("agent_agent", "agent_server")
AGENT_AGENT, AGENT_SERVER = 0, 1


@dataclass
class Charge:
    """What one step transmitted, per run: arrays of shape (B, 2) over :data:`LINK_TYPES`.

    ``sent`` (B, N) counts the messages each agent originated this step (for per-agent reports).
    """

    messages: np.ndarray
    floats: np.ndarray
    cost: np.ndarray
    dropped: np.ndarray
    sent: np.ndarray

    @classmethod
    def zeros(cls, num_runs: int, num_agents: int) -> Charge:
        return cls(
            messages=np.zeros((num_runs, 2), dtype=np.int64),
            floats=np.zeros((num_runs, 2), dtype=np.int64),
            cost=np.zeros((num_runs, 2), dtype=np.float64),
            dropped=np.zeros(num_runs, dtype=np.int64),
            sent=np.zeros((num_runs, num_agents), dtype=np.int64),
        )

    def add(self, other: Charge) -> None:
        self.messages += other.messages
        self.floats += other.floats
        self.cost += other.cost
        self.dropped += other.dropped
        self.sent += other.sent


class Ledger:
    """Per-run communication totals; ``step`` is the last step's charge, ``total`` the sum."""

    def __init__(self, num_runs: int, num_agents: int):
        self.num_runs = num_runs
        self.num_agents = num_agents
        self.step = Charge.zeros(num_runs, num_agents)
        self.total = Charge.zeros(num_runs, num_agents)

    def reset(self) -> None:
        self.step = Charge.zeros(self.num_runs, self.num_agents)
        self.total = Charge.zeros(self.num_runs, self.num_agents)

    def record(self, charges: list[Charge]) -> None:
        """One step's charges, one per channel that transmitted: ``step`` becomes their sum
        (zero without any), added to ``total``."""
        self.step = Charge.zeros(self.num_runs, self.num_agents)
        for charge in charges:
            self.step.add(charge)
            self.total.add(charge)

    def summary(self, b: int) -> dict[str, dict[str, float]]:
        """Plain-Python view of run ``b`` for infos: step and cumulative figures per link type."""
        out: dict[str, dict[str, float]] = {}
        for name, charge in (("step", self.step), ("total", self.total)):
            row: dict[str, float] = {}
            for k, link in enumerate(LINK_TYPES):
                row[f"messages_{link}"] = int(charge.messages[b, k])
                row[f"floats_{link}"] = int(charge.floats[b, k])
                row[f"cost_{link}"] = float(charge.cost[b, k])
            row["messages"] = int(charge.messages[b].sum())
            row["floats"] = int(charge.floats[b].sum())
            row["cost"] = float(charge.cost[b].sum())
            row["dropped"] = int(charge.dropped[b])
            out[name] = row
        return out
