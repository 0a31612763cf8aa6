"""``push`` channel: the server's downloads, one addressed message per client (docs/channels.md,
"`push`"): row j of the send mask and payloads is the server's message to client j, which the team
policy playing the server of Li & Wang (AISTATS 2022, Alg. 1) or He et al. (NeurIPS 2022, Alg. 1)
decides. Same-step delivery; each message costs ``c1`` and ``dim`` floats; a dropped one is
charged and counted; no agent's ``sent`` moves (the messages are the server's)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fedbandit_env.network.base import Channel
from fedbandit_env.network.ledger import AGENT_SERVER
from fedbandit_env.seeding import BatchedRNG


@dataclass
class PushDelivery:
    """``received`` (B, N): the server's message arrived; ``payload`` (B, N, dim) (zeros else)."""

    received: np.ndarray
    payload: np.ndarray


class PushChannel(Channel):
    kind = "push"

    def _reset(self, rng: BatchedRNG) -> None:
        n = self.num_agents
        self._drops = rng.buffered("uniform", (n,)) if self.drop_prob > 0 else None

    @property
    def silent_step_is_empty(self) -> bool:
        return self._drops is None

    def empty_delivery(self) -> PushDelivery:
        shape = (self.num_runs, self.num_agents)
        return PushDelivery(np.zeros(shape, dtype=bool), np.zeros((*shape, self.dim)))

    def transmit(self, step: int, send: np.ndarray, payload: np.ndarray):
        drop_u = self._drops.next() if self._drops is not None else None
        received = send if drop_u is None else send & (drop_u >= self.drop_prob)
        delivered = np.zeros(payload.shape)  # calloc: only the received rows are written
        delivered[received] = payload[received]
        pushed = send.sum(axis=1)
        charge = self._charge(AGENT_SERVER, pushed, self.c1 * pushed, pushed - received.sum(axis=1))
        return PushDelivery(received.copy(), delivered), charge
