"""``neighbors`` channel: a sent payload reaches every graph neighbour in the same step (one hop);
padded or aggregating deliveries, robust reductions among them (docs/channels.md, "`neighbors`"
and "Robust reductions"). Used by Gossip UCB's max-consensus (docs/gossip.md), DP-Dec-UCB and
the field's running-consensus agents.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from fedbandit_env.channel_options import check_robust_options, describe_robust
from fedbandit_env.network.base import Channel, Charge
from fedbandit_env.network.robust import ROBUST, robust_reduce
from fedbandit_env.seeding import BatchedRNG
from fedbandit_env.shapes import RunAgentPayload, RunAgents, RunAgentSlotPayload, RunAgentSlots
from fedbandit_env.validation import check_choice


@dataclass
class NeighborsDelivery:
    """``senders`` (N, D): neighbour ids, -1 padded (fixed); ``mask`` (B, N, D): a message from
    that neighbour arrived; ``payload`` (B, N, D, dim): its content (zeros where none)."""

    senders: np.ndarray
    mask: np.ndarray
    payload: np.ndarray


@dataclass
class NeighborsAggregate:
    """Aggregating delivery (``reduce`` set): ``value`` (B, N, dim) the reduction over the
    neighbours whose message arrived (0 where none did), ``count`` (B, N) how many arrived and
    ``degenerate`` (B, N) ``trimmed_mean`` fell back to the median (1 <= count <= 2 trim;
    all False for the other reductions, and by default)."""

    value: np.ndarray
    count: np.ndarray
    degenerate: np.ndarray | None = None

    def __post_init__(self) -> None:
        if self.degenerate is None:
            self.degenerate = np.zeros(np.shape(self.count), dtype=bool)


REDUCTIONS = (None, "sum", "mean", "max", *ROBUST)


class NeighborsChannel(Channel):
    kind = "neighbors"

    def __init__(
        self,
        name,
        topology,
        dim,
        reduce: str | None = None,
        *,
        trim: int | None = None,
        group_size: int | None = None,
        grouping: str | None = None,
        **kwargs,
    ):
        super().__init__(name, topology, dim, **kwargs)
        self.reduce = check_choice(f"channels.{name}.reduce", reduce, list(REDUCTIONS))
        self.trim, self.group_size, self.grouping = check_robust_options(
            name, "reduce", reduce, trim, group_size, grouping
        )
        self._random_groups = reduce == "median_of_means" and self.grouping == "random"
        self.senders = topology.neighbors  # (N, D): slot d of agent i, ascending ids, -1 padded
        self.valid = self.senders >= 0
        self._gather = np.where(self.valid, self.senders, 0)
        self.max_degree = int(self.senders.shape[1])
        sizes = np.asarray(topology.component_sizes, dtype=np.int64)  # every component a clique?
        self._cliques = int(topology.edges.shape[0]) == int((sizes * (sizes - 1) // 2).sum())
        self._drops = None
        self._groups = None

    def _reset(self, rng: BatchedRNG) -> None:
        shape = (self.num_agents, self.max_degree)
        self._drops = rng.buffered("uniform", shape) if self.drop_prob > 0 else None
        self._groups = (
            rng.child("grouping").buffered("uniform", shape) if self._random_groups else None
        )

    def empty_delivery(self) -> NeighborsDelivery | NeighborsAggregate:
        shape = (self.num_runs, self.num_agents)
        if self.reduce is not None:
            return NeighborsAggregate(
                np.zeros((*shape, self.dim)), np.zeros(shape, np.int64), np.zeros(shape, bool)
            )
        mask = np.zeros((*shape, self.max_degree), dtype=bool)
        return NeighborsDelivery(self.senders.copy(), mask, np.zeros((*mask.shape, self.dim)))

    @property
    def silent_step_is_empty(self) -> bool:
        return self._drops is None and self._groups is None

    supports_per_receiver = True

    def transmit(
        self,
        step: int,
        send: RunAgents,
        payload: RunAgentPayload,
        per_receiver: tuple[RunAgents, np.ndarray] | None = None,
    ) -> tuple[NeighborsDelivery | NeighborsAggregate, Charge]:
        """Each sender's payload to each of its neighbours; a message is lost with probability
        ``drop_prob`` (drawn every step for every slot, whoever sends; so are the uniforms of
        ``grouping="random"``). ``per_receiver`` (:attr:`Channel.supports_per_receiver`): the
        marked senders' messages differ per receiver; every reduction then works on the padded
        gather."""
        kept = self._drops.next() >= self.drop_prob if self._drops is not None else None
        order = self._groups.next() if self._groups is not None else None
        if not send.any():  # nobody sends: nothing arrives, nothing is charged
            return self.empty_delivery(), self._charge()
        degenerate = np.zeros(send.shape, bool)
        if self.reduce == "max" and self._cliques and kept is None and per_receiver is None:
            # cliques without drops: the component maximum and count, O(B N dim) whatever |E|
            value, count = _clique_max(self.topology.component_of, send, payload)
            return NeighborsAggregate(value, count, degenerate), self._charged(send, count)
        transmitted = self.valid & send.take(self._gather, axis=1)  # (B, N, D): slot d's sent
        heard = transmitted if kept is None else transmitted & kept
        count = heard.sum(axis=2)  # messages heard per agent
        charge = self._charged(send, count)
        if per_receiver is None:
            gathered = payload.take(self._gather, axis=1)  # (B, N, D, dim): slot d's payload
        else:
            gathered = self._gather_per_receiver(payload, *per_receiver)
        if self.reduce is None:
            out = np.where(heard[..., None], gathered, 0.0)
            return NeighborsDelivery(self.senders.copy(), heard, out), charge
        if self.reduce in ROBUST:
            value, degenerate = robust_reduce(
                self.reduce, gathered, heard, count,
                trim=self.trim, group_size=self.group_size, order=order,
            )  # fmt: skip
        else:
            value = _slot_reduce(self.reduce, gathered, heard, count)
        return NeighborsAggregate(value, count, degenerate), charge

    def _charged(self, send: RunAgents, count: RunAgents) -> Charge:
        """The step's charge: every sent message crosses each of its sender's edges (``sum_j
        send_j deg_j`` agent-agent messages of ``dim`` floats at ``c2``); those not heard
        (``count``) were dropped."""
        sent = send * self.topology.degrees[None, :]
        messages = sent.sum(axis=1)
        return self._charge(
            messages=messages,
            cost=self.c2 * messages,
            dropped=messages - count.sum(axis=1),
            sent=sent,
        )

    def _gather_per_receiver(
        self, payload: np.ndarray, senders: np.ndarray, payloads: np.ndarray
    ) -> np.ndarray:
        """The padded gather (B, N, D, dim) where slot d of receiver i holds
        ``payloads[b, j, i]`` for a marked sender j = ``senders[i, d]``, else ``payload[b, j]``."""
        self.check_per_receiver(senders, payloads)
        receiver = np.arange(self.num_agents)[:, None]  # (N, 1) against the (N, D) slots
        own = payloads[:, self._gather, receiver, :]  # (B, N, D, dim): sender's message to i
        marked = senders.take(self._gather, axis=1)[..., None]
        return np.where(marked, own, payload.take(self._gather, axis=1))

    def describe(self) -> dict[str, Any]:
        out = super().describe()
        if self.reduce is not None:
            out["reduce"] = self.reduce
        out.update(describe_robust(self.reduce, self.trim, self.group_size, self.grouping))
        return out


def _slot_reduce(
    reduce: str, gathered: RunAgentSlotPayload, heard: RunAgentSlots, count: RunAgents
) -> RunAgentPayload:
    """``sum``, ``mean`` or ``max`` over the heard slots of a padded gather (0 where none was
    heard). The sum adds the slots one after another in ascending sender id (a running sum, so
    the bits do not depend on the degree or on numpy's pairwise summation)."""
    if gathered.shape[2] == 0:  # no neighbour slots at all
        return np.zeros((*count.shape, gathered.shape[3]))
    if reduce == "max":
        value = np.where(heard[..., None], gathered, -np.inf).max(axis=2)
        return np.where((count == 0)[..., None], 0.0, value)
    value = np.cumsum(np.where(heard[..., None], gathered, 0.0), axis=2)[:, :, -1]
    return value / np.maximum(count, 1)[..., None] if reduce == "mean" else value


def _clique_max(
    component_of: np.ndarray, send: RunAgents, payload: RunAgentPayload
) -> tuple[RunAgentPayload, RunAgents]:
    """Max over the other senders of each agent's clique (0 where none sent): the component
    maximum, or the runner-up for the one agent holding it alone; and how many others sent
    (the messages each agent hears)."""
    starts = np.flatnonzero(np.r_[True, component_of[1:] != component_of[:-1]])
    v = np.where(send[..., None], payload, -np.inf)
    top = np.maximum.reduceat(v, starts, axis=1)[:, component_of]  # (B, N, dim)
    at_top = v == top
    n_top = np.add.reduceat(at_top.astype(np.int64), starts, axis=1)[:, component_of]
    runner = np.maximum.reduceat(np.where(at_top, -np.inf, v), starts, axis=1)[:, component_of]
    value = np.where(at_top & (n_top == 1), runner, top)
    others = np.add.reduceat(send.astype(np.int64), starts, axis=1)[:, component_of] - send
    np.copyto(value, 0.0, where=(others == 0)[..., None])  # nobody else sent: 0
    return value, others
