"""``flood`` channel: multi-hop relay with time-to-live ``ttl`` (gamma), one hop per step.

The LOCAL protocol of decentralized FedUCB (Dubey & Pentland, Section 4.2; docs/linear.md) and
GIS (Li & Song, Algorithm 2, cost as in its Table I; docs/commeff.md, Decision 14). Arrival
times, the ``relay`` and ``gis`` cost models, drops and the vectorized step: docs/channels.md,
"`flood`".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from fedbandit_env.network.base import Channel
from fedbandit_env.network.ledger import AGENT_AGENT
from fedbandit_env.seeding import BatchedRNG
from fedbandit_env.validation import check_choice, check_int

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


def _ragged(keys: np.ndarray, num_keys: int) -> np.ndarray:
    """CSR row pointers of rows already sorted by ``keys`` in ``[0, num_keys)``."""
    return np.concatenate([[0], np.cumsum(np.bincount(keys, minlength=num_keys))])


def _expand(indptr: np.ndarray, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each key, all its CSR positions: (owner index into ``keys``, position)."""
    start = indptr[keys]
    counts = indptr[keys + 1] - start
    owner = np.repeat(np.arange(len(keys)), counts)
    offsets = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
    return owner, start[owner] + offsets


class FloodChannel(Channel):
    kind = "flood"

    def __init__(self, name, topology, dim, *, ttl: int | None = None, cost_model="relay", **kw):
        super().__init__(name, topology, dim, **kw)
        diameter = int(topology.diameter)
        ttl = max(diameter, 1) if ttl is None else ttl
        self.requested_ttl = check_int(f"channels.{name}.ttl", ttl, minimum=1)
        self.cost_model = check_choice(f"channels.{name}.cost_model", cost_model, COST_MODELS)
        # No message travels more than the diameter and the last relays happen at hop
        # diameter + 1, so a larger ttl delivers and charges exactly what diameter + 1 does
        # (docs/channels.md): the tables are built for the effective ttl only.
        self.ttl = min(self.requested_ttl, diameter + 1)
        dist = topology.hop_distances
        self._build_slots(dist)
        self._build_costs(dist)

    # Tables are indexed by key = (h - 1) * N + origin: what a message of that origin does at
    # hop h. One vectorized pass per step handles every message in flight, whatever its hop.

    def _build_slots(self, dist: np.ndarray) -> None:
        n = self.num_agents
        recv, orig = np.nonzero((dist >= 1) & (dist <= self.ttl))
        hops = dist[recv, orig]
        order = np.lexsort((orig, hops, recv))
        recv, orig, hops = recv[order], orig[order], hops[order]
        ptr = _ragged(recv, n)
        slot = np.arange(len(recv)) - ptr[recv]
        self.num_slots = max(1, int(np.diff(ptr).max(initial=0)))
        self.senders = np.full((n, self.num_slots), -1, dtype=np.int64)
        self.senders[recv, slot] = orig
        key = (hops - 1) * n + orig
        by_key = np.lexsort((recv, key))
        self._recv_ptr = _ragged(key[by_key], self.ttl * n)
        self._recv = recv[by_key]
        self._recv_slot = slot[by_key]

    def _build_costs(self, dist: np.ndarray) -> None:
        deg = self.topology.degrees
        n, edges, ttl = self.num_agents, self.topology.edges, self.ttl
        self.num_edges = len(edges)
        # relay: at hop h, every node at distance h - 1 from the origin forwards to its neighbours
        origin, node = np.nonzero((dist >= 0) & (dist <= ttl - 1))
        relay = np.bincount(dist[origin, node] * n + origin, weights=deg[node], minlength=ttl * n)
        self._relay = relay.astype(np.int64)  # flat, by key
        # gis: a DATA message for origin v crosses edge {x, y} at hop h = max(d(v, x), d(v, y))
        # iff the two distances differ (then they differ by one)
        dx, dy = dist[:, edges[:, 0]], dist[:, edges[:, 1]]
        hop = np.maximum(dx, dy)
        origin, edge = np.nonzero((dx != dy) & (hop <= ttl))
        key = (hop[origin, edge] - 1) * n + origin
        by_key = np.argsort(key, kind="stable")
        self._gis_data = np.bincount(key, minlength=ttl * n)  # flat, by key
        self._gis_ptr = _ragged(key[by_key], ttl * n)
        self._gis_edge = edge[by_key]

    def _reset(self, rng: BatchedRNG) -> None:
        shape = (self.num_agents, self.num_slots)
        self._drops = rng.buffered("uniform", shape) if self.drop_prob > 0 else None
        z = np.zeros(0, dtype=np.int64)
        self._flight = (z, z, z, np.zeros((0, self.dim)))  # sent_step, run, origin, payload

    def empty_delivery(self) -> FloodDelivery:
        z = np.zeros(0, dtype=np.int64)
        return FloodDelivery(self.senders, z, z, z, z, z, z, np.zeros((0, self.dim)))

    @property
    def silent_step_is_empty(self) -> bool:
        return self._drops is None and len(self._flight[0]) == 0

    def transmit(self, step: int, send: np.ndarray, payload: np.ndarray):
        drop_u = self._drops.next() if self._drops is not None else None
        b_new, v_new = np.nonzero(send)
        sent, b_idx, v_idx, rows = self._flight
        live = sent > step - self.ttl  # messages sent at s reach hop h = step - s + 1 <= ttl
        if not live.all() or len(b_new):
            sent = np.concatenate([sent[live], np.full(len(b_new), step, dtype=np.int64)])
            b_idx = np.concatenate([b_idx[live], b_new])
            v_idx = np.concatenate([v_idx[live], v_new])
            rows = np.concatenate([rows[live], payload[b_new, v_new]])
            self._flight = (sent, b_idx, v_idx, rows)
        if len(sent) == 0:
            return self.empty_delivery(), self._charge(sent=send)
        hops = step - sent + 1
        key = (hops - 1) * self.num_agents + v_idx
        msgs, links = self._hop_costs(key, hops, b_idx)
        msg, pos = _expand(self._recv_ptr, key)
        cols = {
            "run": b_idx[msg],
            "receiver": self._recv[pos],
            "origin": v_idx[msg],
            "slot": self._recv_slot[pos],
            "hops": hops[msg],
            "sent_step": sent[msg],
            "payload": rows[msg],
        }
        order = np.lexsort((cols["slot"], cols["receiver"], cols["run"]))
        cols = {k: v[order] for k, v in cols.items()}
        dropped = 0
        if drop_u is not None:
            keep = drop_u[cols["run"], cols["receiver"], cols["slot"]] >= self.drop_prob
            dropped = np.bincount(cols["run"][~keep], minlength=self.num_runs)
            cols = {k: v[keep] for k, v in cols.items()}
        charge = self._charge(AGENT_AGENT, msgs, self.c2 * links, dropped, send)
        return FloodDelivery(self.senders, **cols), charge

    def _hop_costs(self, key, hops, b_idx) -> tuple[np.ndarray, np.ndarray]:
        """(messages, links) (B,) of the hops made this step by the messages in flight."""
        table = self._relay if self.cost_model == "relay" else self._gis_data
        msgs = np.bincount(b_idx, weights=table[key], minlength=self.num_runs).astype(np.int64)
        if self.cost_model == "relay":
            return msgs, msgs
        owner, pos = _expand(self._gis_ptr, key)
        edge_at_hop = (b_idx[owner] * self.ttl + hops[owner] - 1) * self.num_edges
        used = np.unique(edge_at_hop + self._gis_edge[pos])  # each edge once per hop
        return msgs, np.bincount(used // (self.ttl * self.num_edges), minlength=self.num_runs)

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "ttl": self.requested_ttl, "cost_model": self.cost_model}
