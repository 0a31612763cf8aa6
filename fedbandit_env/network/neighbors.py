"""``neighbors`` channel: a sent payload reaches every graph neighbour in the same step (one hop).

Used for the count max-consensus of Gossip_UCB (gossip.md §1.4, every edge every round) and the
consensus averaging of DP-Dec-UCB (dp-recsys.md §4). Each directed delivery is one agent–agent
message of ``dim`` floats at cost ``c2``. Work per step is O(N * max degree * dim): no N x N
arrays, so sparse graphs scale linearly in N.

Drops (``drop_prob``): each directed message is lost independently with that probability; a lost
message is still charged (c2) and counted in ``dropped``; its ``mask`` entry is 0.

Aggregating delivery (``reduce``: ``"sum"``, ``"mean"`` or ``"max"``; default ``None``, the
padded per-neighbour form above). Instead of the (B, N, D, dim) padded copy, every agent receives
the reduction over the neighbours whose message arrived, :class:`NeighborsAggregate`
``value`` (B, N, dim) (0 where none arrived) and ``count`` (B, N). It equals the padded
reduction exactly: ``max`` is order-free; ``sum`` (and ``mean = sum / count``) add the
neighbours in ascending id order, as the padded sum over its neighbour axis does. Cost per step:

* ``max`` on a graph whose components are cliques (complete, hybrid of complete components),
  no drops: O(N dim) with the per-component maximum and runner-up, whatever |E|;
* ``sum``/``mean``, no drops, on an irregular graph (some neighbour slots padded), with SciPy:
  one sparse CSR product, O(|E| dim);
* otherwise a loop over the D neighbour slots of O(B N dim) vector work each: O(|E| dim) time
  on regular graphs and O(B N dim) memory (on a regular graph, where no slot is padded, the
  loop is faster than the CSR product with its transposed copies).

Charges, drop draws and the ledger are the same as in the padded form.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from gymnasium import spaces

from fedbandit_env.errors import ConfigError
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


@dataclass
class NeighborsAggregate:
    """Aggregating delivery (``reduce`` set): ``value`` (B, N, dim) the reduction over the
    neighbours whose message arrived (0 where none did) and ``count`` (B, N) how many arrived."""

    value: np.ndarray
    count: np.ndarray


REDUCTIONS = (None, "sum", "mean", "max")


def _clique_components(topology) -> bool:
    """Every component is a clique (complete graph or hybrid of complete components)."""
    sizes = np.asarray(topology.component_sizes, dtype=np.int64)
    return int(topology.edges.shape[0]) == int((sizes * (sizes - 1) // 2).sum())


class NeighborsChannel(Channel):
    kind = "neighbors"

    def __init__(self, name, topology, dim, reduce: str | None = None, **kwargs):
        super().__init__(name, topology, dim, **kwargs)
        if reduce not in REDUCTIONS:
            raise ConfigError(
                f"channels.{name}.reduce: expected one of {list(REDUCTIONS)}, got {reduce!r}"
            )
        self.reduce = reduce
        self.senders = topology.neighbors
        self.valid = self.senders >= 0
        self._gather = np.where(self.valid, self.senders, 0)
        self.max_degree = int(self.senders.shape[1])
        self._drops = None
        self._empty = None
        self._cliques = reduce is not None and _clique_components(topology)
        self._slot_full = self.valid.all(axis=0)  # slot d holds a neighbour for every agent
        self._degree = self.valid.sum(axis=1).astype(np.int64)  # (N,) neighbour slots in use
        self._isolated = int((self._degree == 0).sum())
        self._all_valid = bool(self.valid.all())  # regular graph: no padded slot
        self._total_degree = int(self._degree.sum())  # messages of a step where everyone sends
        self._csr = None
        if reduce in ("sum", "mean") and self.drop_prob == 0 and not self._all_valid:
            # an irregular graph: the slot loop would add padded slots, the CSR product does not
            # (on a regular graph, where no slot is padded, the slot loop is the faster one)
            self._csr = _adjacency(topology)

    def _reset(self, rng: BatchedRNG) -> None:
        shape = (self.num_agents, self.max_degree)
        self._drops = rng.buffered("uniform", shape) if self.drop_prob > 0 else None
        # the charge of a step in which every agent sends and nothing drops: the same every
        # such step (messages = total degree in every run), made once and read-only
        self._full_charge = self._constant_charge(self._fill_full_charge)
        if self.reduce is not None:
            # the counts of a step in which every agent sends and nothing drops: the same every
            # such step, handed out read-only
            self._full_count = np.repeat(self._degree[None, :], self.num_runs, axis=0)
            self._full_count.setflags(write=False)
            value = np.zeros((self.num_runs, self.num_agents, self.dim))
            count = np.zeros((self.num_runs, self.num_agents), dtype=np.int64)
            value.setflags(write=False)
            count.setflags(write=False)
            self._empty = NeighborsAggregate(value, count)
            return
        mask = np.zeros((self.num_runs, *shape), dtype=bool)
        payload = np.zeros((self.num_runs, *shape, self.dim))
        self._all_heard = np.ones((self.num_runs, *shape), dtype=bool)
        self._all_heard.setflags(write=False)
        mask.setflags(write=False)
        payload.setflags(write=False)
        self._empty = NeighborsDelivery(self.senders, mask, payload)

    def empty_delivery(self) -> NeighborsDelivery:
        return self._empty

    @property
    def idle_is_free(self) -> bool:
        return self.drop_prob == 0  # without drops nothing is drawn per step

    def _fill_full_charge(self, charge) -> None:
        charge.messages[:, AGENT_AGENT] = self._total_degree
        charge.floats[:, AGENT_AGENT] = self._total_degree * self.dim
        charge.cost[:, AGENT_AGENT] = self.c2 * self._total_degree
        charge.sent[:] = self.topology.degrees[None, :]

    def transmit(self, step: int, send: np.ndarray, payload: np.ndarray):
        drop_u = self._drops.next() if self._drops is not None else None
        everyone = send is self.everyone or bool(send.all())
        if drop_u is None and everyone:  # every message arrives: the constant charge
            if self.reduce is not None:
                value, count = self._aggregate(send, payload, None, True)
                return NeighborsAggregate(value, count), self._full_charge
            if self._all_valid:
                return self._transmit_everyone(payload)
        charge = self._charge()
        if not everyone and not send.any():
            return self._empty, charge
        if self.reduce is not None:
            return self._transmit_aggregate(send, payload, drop_u, charge, everyone)
        transmitted = self.valid & send.take(self._gather, axis=1)  # (B, N, D): receiver-major
        mask = transmitted if drop_u is None else transmitted & (drop_u >= self.drop_prob)
        out = payload.take(self._gather, axis=1)
        np.copyto(out, 0.0, where=~mask[..., None])  # a select, not 0 * x: no -0.0 from x < 0
        count = transmitted.sum(axis=(1, 2))
        charge.messages[:, AGENT_AGENT] = count
        charge.floats[:, AGENT_AGENT] = count * self.dim
        charge.cost[:, AGENT_AGENT] = self.c2 * count
        charge.dropped[:] = count - mask.sum(axis=(1, 2))
        charge.sent[:] = send * self.topology.degrees[None, :]
        return NeighborsDelivery(self.senders, mask, out), charge

    def _transmit_everyone(self, payload):
        """Padded delivery when every agent sends, nothing drops and every slot holds a
        neighbour: every message arrives, so no masking and the constant counts and charge
        (the same delivery and charge as the general path)."""
        out = payload.take(self._gather, axis=1)
        mask = self._all_heard  # read-only, the same every such step
        return NeighborsDelivery(self.senders, mask, out), self._full_charge

    # ------------------------------------------------------------ aggregating delivery
    def _aggregate(self, send, payload, drop_u, everyone: bool):
        """The reduction over the neighbours whose message arrived, and their count."""
        if drop_u is None and self._cliques and self.reduce == "max":
            value, count = self._clique_max(send, payload)
        elif drop_u is None and self._csr is not None:
            value, count = self._sparse_sum(send, payload)
        else:
            value, count = self._slot_loop(send, payload, drop_u, everyone)
        if self.reduce == "mean":
            value = np.divide(value, np.maximum(count, 1)[..., None])
        return value, count

    def _transmit_aggregate(self, send, payload, drop_u, charge, everyone: bool):
        """``everyone``: every agent sends (some messages may still drop)."""
        B = send.shape[0]
        if everyone:  # every agent sends to all its neighbours: the same count in every run
            messages = self._total_degree
        else:
            messages = (send * self.topology.degrees[None, :]).sum(axis=1)
        value, count = self._aggregate(send, payload, drop_u, everyone)
        charge.messages[:, AGENT_AGENT] = messages
        charge.floats[:, AGENT_AGENT] = messages * self.dim
        charge.cost[:, AGENT_AGENT] = self.c2 * messages
        if drop_u is not None:  # without drops every sent message arrives: dropped stays 0
            charge.dropped[:] = messages - count.reshape(B, -1).sum(axis=1)
        charge.sent[:] = self.topology.degrees if everyone else send * self.topology.degrees
        return NeighborsAggregate(value, count), charge

    def _slot_loop(self, send, payload, drop_u, sends_all: bool):
        """One pass per neighbour slot d (ascending neighbour id): exact, O(B N dim) memory.
        When every agent sends and nothing drops (the common case), the payloads need no
        masking and each agent hears from all its neighbours (count = degree)."""
        B, N = send.shape
        fill = -np.inf if self.reduce == "max" else 0.0
        everyone = drop_u is None and sends_all
        if everyone:
            masked = payload
            count = self._full_count
        else:
            count = np.zeros((B, N), dtype=np.int64)
            if drop_u is None:  # mask the senders once; each slot is then one gather
                masked = np.where(send[..., None], payload, fill)
                sends = send.astype(np.int64)
        value = None
        for d in range(self.max_degree):
            src, ok = self._gather[:, d], self.valid[:, d]
            if drop_u is None:
                x = masked.take(src, axis=1)
                if not self._slot_full[d]:
                    x[:, ~ok] = fill
                if not everyone:
                    c = sends.take(src, axis=1)
                    if not self._slot_full[d]:
                        c[:, ~ok] = 0
                    count += c
            else:
                c = ok & send[:, src] & (drop_u[:, :, d] >= self.drop_prob)
                x = np.where(c[..., None], payload[:, src], fill)
                count += c
            if value is None:
                value = x
            elif self.reduce == "max":
                np.maximum(value, x, out=value)
            else:
                value += x
        if value is None:
            value = np.zeros((B, N, self.dim))
        if self.reduce == "max" and not (everyone and self._isolated == 0):
            value[count == 0] = 0.0
        return value, count

    def _sparse_sum(self, send, payload):
        """Sum over sending neighbours: CSR rows add in ascending column order, like the padded
        sum over its neighbour axis."""
        B, N = send.shape
        x = np.where(send[..., None], payload, 0.0)  # (B, N, dim)
        xt = np.ascontiguousarray(x.transpose(1, 0, 2)).reshape(N, B * self.dim)
        value = (self._csr @ xt).reshape(N, B, self.dim).transpose(1, 0, 2)
        count = (self._csr @ send.T.astype(np.float64)).T.astype(np.int64)
        return np.ascontiguousarray(value), count

    def _clique_max(self, send, payload):
        """Max over the other senders of each clique: the component maximum, or the runner-up
        for the one agent holding it alone. O(B N dim), exact."""
        comp = self.topology.component_of
        starts = np.flatnonzero(np.r_[True, comp[1:] != comp[:-1]])
        v = np.where(send[..., None], payload, -np.inf)
        top = np.maximum.reduceat(v, starts, axis=1)[:, comp]  # (B, N, dim)
        at_top = v == top
        n_top = np.add.reduceat(at_top.astype(np.int64), starts, axis=1)[:, comp]
        runner = np.maximum.reduceat(np.where(at_top, -np.inf, v), starts, axis=1)[:, comp]
        value = np.where(at_top & (n_top == 1), runner, top)
        senders = np.add.reduceat(send.astype(np.int64), starts, axis=1)[:, comp]
        count = senders - send
        value[count == 0] = 0.0
        return value, count

    def describe(self) -> dict[str, Any]:
        out = super().describe()
        if self.reduce is not None:
            out["reduce"] = self.reduce
        return out

    def observation_space(self) -> spaces.Dict:
        d = self.max_degree
        if self.reduce is not None:
            return spaces.Dict(
                {"value": payload_space((self.dim,)), "count": spaces.Box(0, d, (), np.int64)}
            )
        return spaces.Dict(
            {
                "senders": spaces.Box(-1, self.num_agents - 1, (d,), np.int64),
                "mask": spaces.MultiBinary(d),
                "payload": payload_space((d, self.dim)),
            }
        )

    def agent_observation(self, delivery: NeighborsDelivery, b: int, i: int) -> dict[str, Any]:
        if self.reduce is not None:
            return {
                "value": delivery.value[b, i].copy(),
                "count": np.asarray(delivery.count[b, i], dtype=np.int64),
            }
        return {
            "senders": delivery.senders[i].copy(),
            "mask": delivery.mask[b, i].astype(np.int8),
            "payload": delivery.payload[b, i].copy(),
        }

    def delivery_from_observations(self, observations: list[dict[str, Any]]) -> NeighborsDelivery:
        if self.reduce is not None:
            value = np.stack([o["value"] for o in observations])[None]
            count = np.array([[int(o["count"]) for o in observations]], dtype=np.int64)
            return NeighborsAggregate(value, count)
        mask = np.stack([o["mask"] for o in observations]).astype(bool)[None]
        payload = np.stack([o["payload"] for o in observations])[None]
        return NeighborsDelivery(self.senders, mask, payload)


def _adjacency(topology):
    """Symmetric 0/1 CSR adjacency (ascending column ids per row), or None without SciPy."""
    try:
        from scipy import sparse
    except ImportError:  # pragma: no cover - SciPy is in the test extra
        return None
    e = topology.edges
    n = topology.num_agents
    rows = np.concatenate([e[:, 0], e[:, 1]])
    cols = np.concatenate([e[:, 1], e[:, 0]])
    csr = sparse.csr_matrix((np.ones(rows.size), (rows, cols)), shape=(n, n))
    csr.sort_indices()
    return csr
