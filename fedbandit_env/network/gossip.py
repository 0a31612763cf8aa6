"""``gossip`` channel: random pairwise exchanges over the graph's edges (docs/channels.md,
"`gossip`: `mode`"). ``mode="edge"``: one uniformly random edge per step, both ways (Gossip UCB's
asynchronous gossip, docs/gossip.md); ``mode="pull_one_neighbour"``: every agent pulls one random
neighbour (GosInE, docs/gosine.md), optionally with an exclusion mask (docs/robust-gosine.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from fedbandit_env.errors import ConfigError
from fedbandit_env.network.base import Channel
from fedbandit_env.seeding import BatchedRNG
from fedbandit_env.validation import check_choice


@dataclass
class GossipDelivery:
    """``partner`` (B, N): the other endpoint if the agent is on this step's edge, else -1;
    ``received`` (B, N): the partner's payload arrived; ``payload`` (B, N, dim)."""

    partner: np.ndarray
    received: np.ndarray
    payload: np.ndarray


GOSSIP_MODES = ("edge", "pull_one_neighbour")
EXCLUDE_MODES = ("pull_one_neighbour",)
"""The gossip modes that take an exclusion mask in the step's message (docs/channels.md)."""


class GossipChannel(Channel):
    kind = "gossip"
    takes_exclude = False  # True in the modes of EXCLUDE_MODES (set per instance)

    def __init__(self, name, topology, dim, mode: str = "edge", **kwargs):
        super().__init__(name, topology, dim, **kwargs)
        self.mode = check_choice(f"channels.{name}.mode", mode, list(GOSSIP_MODES))
        self.takes_exclude = mode in EXCLUDE_MODES
        self.edges = topology.edges
        if len(self.edges) == 0:
            raise ConfigError(f"channels.{name}: the gossip channel needs a graph with an edge")
        if mode == "pull_one_neighbour":
            self._neighbors = topology.neighbors  # (N, D), -1 padded, ascending ids
            self._degrees = np.asarray(topology.degrees, dtype=np.int64)

    def _reset(self, rng: BatchedRNG) -> None:
        self._rows = np.arange(self.num_runs)
        if self.mode == "pull_one_neighbour":
            n = self.num_agents
            self._edge_u = rng.buffered("uniform", (n,))
            self._drops = rng.buffered("uniform", (n,)) if self.drop_prob > 0 else None
            self._agents = np.arange(n)
            return
        self._edge_u = rng.buffered("uniform", (1,))
        self._drops = rng.buffered("uniform", (2,)) if self.drop_prob > 0 else None
        self._row_base = np.arange(self.num_runs, dtype=np.int64) * self.num_agents

    def empty_delivery(self) -> GossipDelivery:
        shape = (self.num_runs, self.num_agents)
        return GossipDelivery(
            np.full(shape, -1, dtype=np.int64),
            np.zeros(shape, dtype=bool),
            np.zeros((*shape, self.dim)),
        )

    def active_edges(self, u: np.ndarray) -> np.ndarray:
        idx = np.minimum((u[:, 0] * len(self.edges)).astype(np.int64), len(self.edges) - 1)
        return self.edges[idx]

    def pulled_neighbours(self, u: np.ndarray) -> np.ndarray:
        """Pull mode: the neighbour (B, N) each agent pulls from, -1 for an isolated agent;
        ``floor(u d_i)``-th neighbour in ascending id order for a uniform ``u`` (B, N)."""
        deg = self._degrees
        slot = np.minimum((u * deg).astype(np.int64), np.maximum(deg - 1, 0))
        partner = self._neighbors[self._agents, slot]  # (B, N); -1 where deg == 0
        return np.where(deg > 0, partner, -1)

    def allowed_neighbours(self, u: np.ndarray, exclude: np.ndarray) -> np.ndarray:
        """Pull mode with an exclusion mask (B, N, N): the ``floor(u d'_i)``-th of agent i's
        ``d'_i`` non-excluded neighbours in ascending id order, -1 where none is left."""
        nbrs = self._neighbors  # (N, D), -1 padded at the end
        valid = nbrs >= 0
        rows = np.arange(exclude.shape[0])[:, None, None]
        barred = exclude[rows, self._agents[:, None], np.where(valid, nbrs, 0)]  # (B, N, D)
        allowed = valid & ~barred
        left = allowed.sum(axis=2)  # d'_i (B, N)
        slot = np.minimum((u * left).astype(np.int64), np.maximum(left - 1, 0))
        rank = np.cumsum(allowed, axis=2)  # 1-based rank of each allowed slot
        pos = np.argmax(allowed & (rank == slot[..., None] + 1), axis=2)  # (B, N)
        partner = nbrs[self._agents, pos]
        return np.where(left > 0, partner, -1)

    def _transmit_pull(self, send: np.ndarray, payload: np.ndarray, exclude=None):
        u = self._edge_u.next()
        partner = (
            self.pulled_neighbours(u) if exclude is None else self.allowed_neighbours(u, exclude)
        )
        drop_u = self._drops.next() if self._drops is not None else None
        has = partner >= 0
        src = np.where(has, partner, 0)
        rows = self._rows[:, None]
        answered = has & send[rows, src]  # (B, N): the pulled neighbour sent: a reply goes out
        received = answered if drop_u is None else answered & (drop_u >= self.drop_prob)
        out = payload[rows, src]  # (B, N, dim): a gather, then a select (no -0.0)
        np.copyto(out, 0.0, where=~received[..., None])
        count = answered.sum(axis=1)
        sent = np.zeros((self.num_runs, self.num_agents), dtype=np.int64)
        np.add.at(sent, (np.broadcast_to(rows, src.shape)[answered], src[answered]), 1)
        dropped = count - received.sum(axis=1)
        charge = self._charge(messages=count, cost=self.c2 * count, dropped=dropped, sent=sent)
        return GossipDelivery(partner, received, out), charge

    supports_per_receiver = True

    def transmit(
        self,
        step: int,
        send: np.ndarray,
        payload: np.ndarray,
        exclude=None,
        per_receiver: tuple[np.ndarray, np.ndarray] | None = None,
    ):
        """``exclude`` (B, N, N) bool or None: pull mode's exclusion mask; the engine checks it
        and passes it only to a channel whose ``takes_exclude`` is True. ``per_receiver``
        (:attr:`Channel.supports_per_receiver`): a marked partner's reply to agent i is
        ``payloads[b, partner, i]``, in both modes."""
        if self.mode == "pull_one_neighbour":
            delivery, charge = self._transmit_pull(send, payload, exclude)
        elif exclude is not None:
            raise ConfigError(
                f"channels.{self.name}: exclude: expected no exclusion mask in mode 'edge' (only "
                "mode 'pull_one_neighbour' takes one)"
            )
        else:
            delivery, charge = self._transmit_edge(send, payload)
        if per_receiver is not None:
            self._per_receiver(delivery, *per_receiver)
        return delivery, charge

    def _per_receiver(self, delivery: GossipDelivery, marked: np.ndarray, payloads: np.ndarray):
        """Replace, in place, what a marked partner's message carries to each receiver."""
        self.check_per_receiver(marked, payloads)
        src = np.where(delivery.partner >= 0, delivery.partner, 0)
        rows = self._rows[:, None]
        own = payloads[rows, src, np.arange(self.num_agents)[None, :]]  # (B, N, dim)
        use = delivery.received & marked[rows, src]
        delivery.payload = np.where(use[..., None], own, delivery.payload)

    def _transmit_edge(self, send: np.ndarray, payload: np.ndarray):
        """Mode ``edge``: the two endpoints of one random edge exchange payloads."""
        edge = self.active_edges(self._edge_u.next())  # (B, 2)
        drop_u = self._drops.next() if self._drops is not None else None
        B, N = self.num_runs, self.num_agents
        ends = self._row_base[:, None] + edge  # flat (run, agent) positions of the endpoints
        sends = send.reshape(-1)[ends]  # (B, 2)
        got = sends[:, ::-1].copy()  # each endpoint hears the other's message
        if drop_u is not None:
            got &= drop_u[:, ::-1] >= self.drop_prob
        partner = np.full(B * N, -1, dtype=np.int64)
        partner[ends] = edge[:, ::-1]
        received = np.zeros(B * N, dtype=bool)
        received[ends] = got
        out = np.zeros((B * N, self.dim))
        out[ends] = np.where(got[..., None], payload.reshape(B * N, self.dim)[ends[:, ::-1]], 0.0)
        sent = np.zeros(B * N, dtype=np.int64)
        sent[ends] = sends
        count = sends.sum(axis=1)
        delivery = GossipDelivery(
            partner.reshape(B, N), received.reshape(B, N), out.reshape(B, N, self.dim)
        )
        dropped = count - got.sum(axis=1)
        charge = self._charge(
            messages=count, cost=self.c2 * count, dropped=dropped, sent=sent.reshape(B, N)
        )
        return delivery, charge

    def describe(self) -> dict[str, Any]:
        out = super().describe()
        if self.mode != "edge":
            out["mode"] = self.mode
        return out
