"""``hierarchical`` channel (hybrid structure): members -> sink -> server -> every agent.

The hybrid structure of Li & Song (Section VI, Algorithms 4-5): SAC convergecast to each
component's sink, one upload per component, a broadcast from the server. Delay, aggregation,
cost models and drops: docs/channels.md, "`hierarchical`"; docs/commeff.md, Decisions 8-13.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

import numpy as np

from fedbandit_env.network.base import Channel
from fedbandit_env.network.ledger import AGENT_AGENT, AGENT_SERVER, Charge
from fedbandit_env.network.server import broadcast_links
from fedbandit_env.seeding import BatchedRNG
from fedbandit_env.validation import check_choice, check_flag

AGGREGATES = ("weighted", "unweighted", "sum")
COST_MODELS = ("edges", "path")


@dataclass
class HierarchicalDelivery:
    """``aggregate`` (B, dim) broadcast to every agent; ``count`` (B,) contributing agents
    (0 when nothing arrives this step); ``sent_step`` (B,) when those payloads were sent."""

    aggregate: np.ndarray
    count: np.ndarray
    sent_step: np.ndarray


class HierarchicalChannel(Channel):
    kind = "hierarchical"

    def __init__(
        self,
        name,
        topology,
        dim,
        *,
        aggregate: str = "weighted",
        cost_model: str = "edges",
        charge_broadcast: bool = False,
        **kwargs,
    ):
        super().__init__(name, topology, dim, **kwargs)
        self.aggregate = check_choice(f"channels.{name}.aggregate", aggregate, AGGREGATES)
        self.cost_model = check_choice(f"channels.{name}.cost_model", cost_model, COST_MODELS)
        self.charge_broadcast = check_flag(f"channels.{name}.charge_broadcast", charge_broadcast)
        comp = topology.component_of
        self.num_components = len(topology.components)
        self._member = np.zeros((self.num_agents, self.num_components))
        self._member[np.arange(self.num_agents), comp] = 1.0
        self._to_sink = topology.distance_to_sink
        self._is_sink = self._to_sink == 0
        ecc = np.asarray(topology.sink_eccentricities, dtype=np.int64)
        comp_edges = np.bincount(comp[topology.edges[:, 0]], minlength=self.num_components)
        self._edges_cost = ecc * comp_edges
        self.delay = max(0, int(ecc.max(initial=0)) - 1)

    def _reset(self, rng: BatchedRNG) -> None:
        self._drops = rng.buffered("uniform", (self.num_agents,)) if self.drop_prob > 0 else None
        self._pending: deque[tuple[int, HierarchicalDelivery]] = deque()

    def empty_delivery(self) -> HierarchicalDelivery:
        return HierarchicalDelivery(
            np.zeros((self.num_runs, self.dim)),
            np.zeros(self.num_runs, dtype=np.int64),
            np.full(self.num_runs, -1, dtype=np.int64),
        )

    def _combine(self, arrived: np.ndarray, payload: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        w = arrived.astype(np.float64)
        comp_sum = np.einsum("bn,bnd,nq->bqd", w, payload, self._member)
        comp_count = w @ self._member
        count = arrived.sum(axis=1)
        if self.aggregate == "sum":
            return comp_sum.sum(axis=1), count
        if self.aggregate == "weighted":
            return comp_sum.sum(axis=1) / np.maximum(count, 1)[:, None], count
        means = comp_sum / np.maximum(comp_count, 1)[..., None]
        active = comp_count > 0
        total = np.einsum("bqd,bq->bd", means, active.astype(np.float64))
        return total / np.maximum(active.sum(axis=1), 1)[:, None], count

    @property
    def silent_step_is_empty(self) -> bool:
        return self._drops is None and not self._pending

    def transmit(self, step: int, send: np.ndarray, payload: np.ndarray):
        drop_u = self._drops.next() if self._drops is not None else None
        charge = self._charge()
        if send.any():
            kept = None if drop_u is None else (drop_u >= self.drop_prob) | self._is_sink
            arrived = send if kept is None else send & kept
            total, count = self._combine(arrived, payload)
            sent_step = np.where(count > 0, step, -1)
            self._pending.append((step + self.delay, HierarchicalDelivery(total, count, sent_step)))
            charge = self._charge_round(send, arrived, count)
        if self._pending and self._pending[0][0] == step:
            return self._pending.popleft()[1], charge
        return self.empty_delivery(), charge

    def _charge_round(self, send, arrived, count) -> Charge:
        relays = (send * self._to_sink[None, :]).sum(axis=1)
        comp_active = (send.astype(np.float64) @ self._member) > 0
        uploads = ((arrived.astype(np.float64) @ self._member) > 0).sum(axis=1)
        if self.cost_model == "path":
            local_cost = self.c2 * relays
        else:
            local_cost = self.c2 * (comp_active * self._edges_cost[None, :]).sum(axis=1)
        dropped = send.sum(axis=1) - arrived.sum(axis=1)
        charge = self._charge(AGENT_AGENT, relays, local_cost, dropped, send)
        messages, links = broadcast_links(uploads, count, self.num_agents, self.charge_broadcast)
        charge.bill(AGENT_SERVER, messages, self.dim, self.c1 * links)
        return charge

    def describe(self) -> dict[str, Any]:
        return {
            **super().describe(),
            "aggregate": self.aggregate,
            "cost_model": self.cost_model,
            "delay": self.delay,
            "sinks": list(self.topology.sinks),
        }
