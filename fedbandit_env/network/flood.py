"""``flood`` channel: multi-hop relay with time-to-live ``ttl`` (gamma), one hop per step.

linear.md §1.4 (LOCAL protocol) and commeff.md §2.4 (GIS): a payload sent by v at step s reaches
every u with 1 <= d(u, v) <= ttl in the observation of step s + d(u, v) - 1, so hop 1 is the same
step (like ``neighbors``) and each further hop takes one step. Messages are relayed verbatim.

Cost models (per hop, charged at the step the hop happens, agent–agent links at ``c2``):

* ``"relay"`` (default, linear.md §2.8): every node within ttl - 1 hops of the origin forwards the
  message once to all its neighbours, so a broadcast costs sum_{u: d(v,u) <= ttl-1} deg(u)
  messages, duplicates included.
* ``"gis"`` (commeff.md §2.4 and A15): the ADV/REQ/DATA handshake; a hop costs ``c2`` per
  undirected edge that carried at least one DATA message. A DATA message for origin v crosses the
  directed edge x -> y at hop h iff d(v, x) = h - 1 and d(v, y) = h. With every agent sending at
  once this gives the spec's per-round figures (M = 50: complete 1225, star 98, ring 1250).

Deliveries are kept sparse (one row per delivered message), so rare senders cost little.

Drops (``drop_prob``): each delivery (receiver, origin) is lost independently with that
probability at the receiver. Relaying is not affected (a node whose own copy was lost still
forwards it: the loss is modelled between the network and the receiving agent, not per link, to
keep the arrival times exact), so the relay/GIS cost is charged in full; ``dropped`` counts the
lost deliveries.
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

COST_MODELS = ("relay", "gis")


@dataclass
class FloodDelivery:
    """Messages delivered this step, one row each: ``run``, ``receiver``, ``origin``, ``slot``
    (column of the origin in ``senders[receiver]``), ``hops``, ``sent_step`` and ``payload``
    (rows, dim). ``senders`` (N, S) lists, per receiver, the origins within ttl hops (-1 pad)."""

    senders: np.ndarray
    run: np.ndarray
    receiver: np.ndarray
    origin: np.ndarray
    slot: np.ndarray
    hops: np.ndarray
    sent_step: np.ndarray
    payload: np.ndarray


@dataclass
class _Ragged:
    """Receivers at exactly h hops from each origin, in CSR form."""

    indptr: np.ndarray
    receivers: np.ndarray
    slots: np.ndarray


class FloodChannel(Channel):
    kind = "flood"

    def __init__(self, name, topology, dim, *, ttl: int | None = None, cost_model="relay", **kw):
        super().__init__(name, topology, dim, **kw)
        diameter = int(topology.diameter)
        ttl = diameter if ttl is None else ttl
        if isinstance(ttl, bool) or not isinstance(ttl, int | np.integer) or ttl < 1:
            raise ConfigError(f"channels.{name}.ttl: expected a positive int, got {ttl!r}")
        if cost_model not in COST_MODELS:
            raise ConfigError(
                f"channels.{name}.cost_model: expected one of {COST_MODELS}, got {cost_model!r}"
            )
        self.ttl = int(ttl)
        self.cost_model = cost_model
        dist = topology.hop_distances
        self._build_slots(dist)
        self._build_costs(dist)

    def _build_slots(self, dist: np.ndarray) -> None:
        n = self.num_agents
        recv, orig = np.nonzero((dist >= 1) & (dist <= self.ttl))
        hops = dist[recv, orig]
        order = np.lexsort((orig, hops, recv))
        recv, orig, hops = recv[order], orig[order], hops[order]
        counts = np.bincount(recv, minlength=n)
        starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
        slot = np.arange(len(recv)) - starts[recv]
        self.num_slots = max(1, int(counts.max(initial=0)))
        self.senders = np.full((n, self.num_slots), -1, dtype=np.int64)
        self.senders[recv, slot] = orig
        self._by_hop: list[_Ragged] = []
        for h in range(1, self.ttl + 1):
            sel = hops == h
            o, r, s = orig[sel], recv[sel], slot[sel]
            by_origin = np.lexsort((r, o))
            o, r, s = o[by_origin], r[by_origin], s[by_origin]
            indptr = np.concatenate([[0], np.cumsum(np.bincount(o, minlength=n))])
            self._by_hop.append(_Ragged(indptr, r, s))

    def _build_costs(self, dist: np.ndarray) -> None:
        deg = self.topology.degrees
        n, edges = self.num_agents, self.topology.edges
        self.num_edges = len(edges)
        # relay: forwards at hop h by nodes at distance h-1 from the origin
        self._relay = np.stack(
            [((dist == h - 1) * deg[None, :]).sum(axis=1) for h in range(1, self.ttl + 1)]
        )
        # gis: for each hop and origin, the undirected edge ids and the DATA count on them
        x, y = edges[:, 0], edges[:, 1]
        self._gis_edges: list[tuple[np.ndarray, np.ndarray]] = []
        self._gis_data = np.zeros((self.ttl, n), dtype=np.int64)
        for h in range(1, self.ttl + 1):
            fwd = (dist[:, x] == h - 1) & (dist[:, y] == h)
            bwd = (dist[:, y] == h - 1) & (dist[:, x] == h)
            self._gis_data[h - 1] = fwd.sum(axis=1) + bwd.sum(axis=1)
            origin, edge = np.nonzero(fwd | bwd)
            indptr = np.concatenate([[0], np.cumsum(np.bincount(origin, minlength=n))])
            self._gis_edges.append((indptr, edge))

    def _reset(self, rng: BatchedRNG) -> None:
        shape = (self.num_agents, self.num_slots)
        self._drops = rng.buffered("uniform", shape) if self.drop_prob > 0 else None
        self._history: list[tuple[int, np.ndarray, np.ndarray, np.ndarray] | None]
        self._history = [None] * self.ttl

    def _rows(self, n: int = 0) -> dict[str, np.ndarray]:
        z = np.zeros(n, dtype=np.int64)
        return {"run": z, "receiver": z, "origin": z, "slot": z, "hops": z, "sent_step": z}

    def empty_delivery(self) -> FloodDelivery:
        return FloodDelivery(self.senders, **self._rows(), payload=np.zeros((0, self.dim)))

    def transmit(self, step: int, send: np.ndarray, payload: np.ndarray):
        drop_u = self._drops.next() if self._drops is not None else None
        b_idx, v_idx = np.nonzero(send)
        self._history[step % self.ttl] = (step, b_idx, v_idx, payload[b_idx, v_idx])
        charge = self._charge()
        charge.sent[b_idx, v_idx] = 1
        parts = []
        for h in range(1, self.ttl + 1):
            entry = self._history[(step - h + 1) % self.ttl]
            if entry is None or entry[0] != step - h + 1 or len(entry[1]) == 0:
                continue
            parts.append(self._hop(h, *entry))
            self._charge_hop(h, entry[1], entry[2], charge)
        if not parts:
            return self.empty_delivery(), charge
        cols = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
        order = np.lexsort((cols["slot"], cols["receiver"], cols["run"]))
        cols = {k: v[order] for k, v in cols.items()}
        if drop_u is not None:
            keep = drop_u[cols["run"], cols["receiver"], cols["slot"]] >= self.drop_prob
            charge.dropped[:] = np.bincount(cols["run"][~keep], minlength=self.num_runs)
            cols = {k: v[keep] for k, v in cols.items()}
        return FloodDelivery(self.senders, **cols), charge

    def _hop(self, h, sent_step, b_idx, v_idx, rows) -> dict[str, np.ndarray]:
        rag = self._by_hop[h - 1]
        start, stop = rag.indptr[v_idx], rag.indptr[v_idx + 1]
        counts = stop - start
        msg = np.repeat(np.arange(len(v_idx)), counts)
        offsets = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
        pos = start[msg] + offsets
        return {
            "run": b_idx[msg],
            "receiver": rag.receivers[pos],
            "origin": v_idx[msg],
            "slot": rag.slots[pos],
            "hops": np.full(len(msg), h, dtype=np.int64),
            "sent_step": np.full(len(msg), sent_step, dtype=np.int64),
            "payload": rows[msg],
        }

    def _charge_hop(self, h: int, b_idx: np.ndarray, v_idx: np.ndarray, charge) -> None:
        if self.cost_model == "relay":
            msgs = np.bincount(b_idx, weights=self._relay[h - 1, v_idx], minlength=self.num_runs)
            msgs = msgs.astype(np.int64)
            links = msgs
        else:
            msgs = np.bincount(b_idx, weights=self._gis_data[h - 1, v_idx], minlength=self.num_runs)
            msgs = msgs.astype(np.int64)
            indptr, edge = self._gis_edges[h - 1]
            start, stop = indptr[v_idx], indptr[v_idx + 1]
            counts = stop - start
            owner = np.repeat(np.arange(len(v_idx)), counts)
            offsets = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
            keys = np.unique(b_idx[owner] * self.num_edges + edge[start[owner] + offsets])
            links = np.bincount(keys // self.num_edges, minlength=self.num_runs)
        charge.messages[:, AGENT_AGENT] += msgs
        charge.floats[:, AGENT_AGENT] += msgs * self.dim
        charge.cost[:, AGENT_AGENT] += self.c2 * links

    def observation_space(self) -> spaces.Dict:
        s = self.num_slots
        return spaces.Dict(
            {
                "senders": spaces.Box(-1, self.num_agents - 1, (s,), np.int64),
                "mask": spaces.MultiBinary(s),
                "sent_step": spaces.Box(-1, np.iinfo(np.int64).max, (s,), np.int64),
                "payload": payload_space((s, self.dim)),
            }
        )

    def agent_observation(self, delivery: FloodDelivery, b: int, i: int) -> dict[str, Any]:
        s = self.num_slots
        mask = np.zeros(s, dtype=np.int8)
        sent_step = np.full(s, -1, dtype=np.int64)
        payload = np.zeros((s, self.dim))
        sel = (delivery.run == b) & (delivery.receiver == i)
        slots = delivery.slot[sel]
        mask[slots] = 1
        sent_step[slots] = delivery.sent_step[sel]
        payload[slots] = delivery.payload[sel]
        return {
            "senders": self.senders[i].copy(),
            "mask": mask,
            "sent_step": sent_step,
            "payload": payload,
        }

    def delivery_from_observations(self, observations: list[dict[str, Any]]) -> FloodDelivery:
        mask = np.stack([o["mask"] for o in observations]).astype(bool)
        receiver, slot = np.nonzero(mask)
        origin = self.senders[receiver, slot]
        hops = self.topology.hop_distances[receiver, origin].astype(np.int64)
        return FloodDelivery(
            self.senders,
            run=np.zeros(len(receiver), dtype=np.int64),
            receiver=receiver.astype(np.int64),
            origin=origin,
            slot=slot.astype(np.int64),
            hops=hops,
            sent_step=np.array(
                [observations[r]["sent_step"][s] for r, s in zip(receiver, slot, strict=True)],
                dtype=np.int64,
            ),
            payload=np.stack([o["payload"] for o in observations])[receiver, slot].reshape(
                len(receiver), self.dim
            ),
        )

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "ttl": self.ttl, "cost_model": self.cost_model}
