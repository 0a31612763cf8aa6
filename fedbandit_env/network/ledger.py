"""The communication ledger: messages, floats and cost per link type, per run.

Link types ``agent_agent`` (cost ``c2``) and ``agent_server`` (``c1``); docs/environments.md,
"Channels", and docs/adversary.md, "Ledger" (the Byzantine column).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

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

    def bill(self, link: int, messages: Any, dim: int, cost: Any) -> None:
        """``messages`` (B,) of ``dim`` floats each on link type ``link``, at ``cost`` (B,)."""
        self.messages[:, link] = messages
        self.floats[:, link] = messages * dim
        self.cost[:, link] = cost

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
        self.reset()

    def reset(self) -> None:
        self.step = Charge.zeros(self.num_runs, self.num_agents)
        self.total = Charge.zeros(self.num_runs, self.num_agents)
        zeros = np.zeros(self.num_runs, dtype=np.int64)
        self.byzantine_messages = zeros.copy()  # (B,) cumulative, sent by Byzantine agents
        self.byzantine_floats = zeros.copy()
        self.step_byzantine_messages = zeros.copy()  # (B,) of the last step
        self.step_byzantine_floats = zeros.copy()

    def record(
        self,
        charges: list[Charge],
        byzantine: np.ndarray | None = None,
        dims: list[int] | None = None,
    ) -> None:
        """One step's charges, one per channel that transmitted: ``step`` becomes their sum
        (zero without any), added to ``total``. ``byzantine`` (B, N) bool and ``dims`` (the
        payload dim of each charge's channel) fill the Byzantine column."""
        self.step = Charge.zeros(self.num_runs, self.num_agents)
        for charge in charges:
            self.step.add(charge)
            self.total.add(charge)
        if byzantine is None:
            return
        if dims is None or len(dims) != len(charges):
            raise ValueError("dims: expected one payload dim per charge")
        messages = np.zeros(self.num_runs, dtype=np.int64)
        floats = np.zeros(self.num_runs, dtype=np.int64)
        for charge, dim in zip(charges, dims, strict=True):
            sent = np.where(byzantine, charge.sent, 0).sum(axis=1)
            messages += sent
            floats += sent * int(dim)
        self.step_byzantine_messages, self.step_byzantine_floats = messages, floats
        self.byzantine_messages = self.byzantine_messages + messages
        self.byzantine_floats = self.byzantine_floats + floats

    def drop(self, dropped: np.ndarray) -> None:
        """Count ``dropped`` (B,) messages lost at arrival (a receiver away: docs/time.md,
        "churn") in the last step's charge and the total; they were charged when sent."""
        self.step.dropped = self.step.dropped + dropped
        self.total.dropped = self.total.dropped + dropped

    def summary(self, b: int) -> dict[str, dict[str, float]]:
        """Plain-Python view of run ``b`` for infos: step and cumulative figures per link type,
        and the Byzantine column (``byzantine_messages``, ``byzantine_floats``: the part of
        ``messages`` and ``floats`` the Byzantine agents sent; 0 without an adversary)."""
        out: dict[str, dict[str, float]] = {}
        byzantine = {
            "step": (self.step_byzantine_messages, self.step_byzantine_floats),
            "total": (self.byzantine_messages, self.byzantine_floats),
        }
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
            row["byzantine_messages"] = int(byzantine[name][0][b])
            row["byzantine_floats"] = int(byzantine[name][1][b])
            out[name] = row
        return out
