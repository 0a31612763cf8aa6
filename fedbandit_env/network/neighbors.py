"""``neighbors`` channel: a sent payload reaches every graph neighbour in the same step (one hop).

Used for the count max-consensus of Gossip_UCB (gossip.md §1.4, every edge every round) and the
consensus averaging of DP-Dec-UCB (dp-recsys.md §4). Each directed delivery is one agent–agent
message of ``dim`` floats at cost ``c2``. Work per step is O(N * max degree * dim): no N x N
arrays, so sparse graphs scale linearly in N.

Drops (``drop_prob``): each directed message is lost independently with that probability; a lost
message is still charged (c2) and counted in ``dropped``; its ``mask`` entry is 0.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from gymnasium import spaces

from fedbandit_env.network.base import Channel, payload_space
from fedbandit_env.network.ledger import AGENT_AGENT
from fedbandit_env.seeding import BatchedRNG


@dataclass
class NeighborsDelivery:
    """``senders`` (N, D): neighbour ids, -1 padded (fixed); ``mask`` (B, N, D): a message from
    that neighbour arrived; ``payload`` (B, N, D, dim): its content (zeros where none)."""

    senders: np.ndarray
    mask: np.ndarray
    payload: np.ndarray


class NeighborsChannel(Channel):
    kind = "neighbors"

    def __init__(self, name, topology, dim, **kwargs):
        super().__init__(name, topology, dim, **kwargs)
        self.senders = topology.neighbors
        self.valid = self.senders >= 0
        self._gather = np.where(self.valid, self.senders, 0)
        self.max_degree = int(self.senders.shape[1])
        self._drops = None
        self._empty = None

    def _reset(self, rng: BatchedRNG) -> None:
        shape = (self.num_agents, self.max_degree)
        self._drops = rng.buffered("uniform", shape) if self.drop_prob > 0 else None
        mask = np.zeros((self.num_runs, *shape), dtype=bool)
        payload = np.zeros((self.num_runs, *shape, self.dim))
        mask.setflags(write=False)
        payload.setflags(write=False)
        self._empty = NeighborsDelivery(self.senders, mask, payload)

    def empty_delivery(self) -> NeighborsDelivery:
        return self._empty

    def transmit(self, step: int, send: np.ndarray, payload: np.ndarray):
        drop_u = self._drops.next() if self._drops is not None else None
        charge = self._charge()
        if not send.any():
            return self._empty, charge
        transmitted = self.valid & send[:, self._gather]  # (B, N, D): receiver-major
        mask = transmitted if drop_u is None else transmitted & (drop_u >= self.drop_prob)
        out = payload[:, self._gather]
        np.copyto(out, 0.0, where=~mask[..., None])  # a select, not 0 * x: no -0.0 from x < 0
        count = transmitted.sum(axis=(1, 2))
        charge.messages[:, AGENT_AGENT] = count
        charge.floats[:, AGENT_AGENT] = count * self.dim
        charge.cost[:, AGENT_AGENT] = self.c2 * count
        charge.dropped[:] = count - mask.sum(axis=(1, 2))
        charge.sent[:] = send * self.topology.degrees[None, :]
        return NeighborsDelivery(self.senders, mask, out), charge

    def observation_space(self) -> spaces.Dict:
        d = self.max_degree
        return spaces.Dict(
            {
                "senders": spaces.Box(-1, self.num_agents - 1, (d,), np.int64),
                "mask": spaces.MultiBinary(d),
                "payload": payload_space((d, self.dim)),
            }
        )

    def agent_observation(self, delivery: NeighborsDelivery, b: int, i: int) -> dict[str, Any]:
        return {
            "senders": delivery.senders[i].copy(),
            "mask": delivery.mask[b, i].astype(np.int8),
            "payload": delivery.payload[b, i].copy(),
        }

    def delivery_from_observations(self, observations: list[dict[str, Any]]) -> NeighborsDelivery:
        mask = np.stack([o["mask"] for o in observations]).astype(bool)[None]
        payload = np.stack([o["payload"] for o in observations])[None]
        return NeighborsDelivery(self.senders, mask, payload)
