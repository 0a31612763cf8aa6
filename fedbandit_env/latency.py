"""Message latency: the ``latency`` option of an environment (docs/time.md, "latency").

Every channel delivers a message at some step after it is sent (the same step for ``neighbors``,
``gossip``, ``server`` and ``push``; hop h - 1 steps later for ``flood``; after the sinks'
eccentricity for ``hierarchical``: docs/architecture.md, "Timing conventions"). ``latency`` adds a
fixed delay of L engine steps to every delivery of every channel:

* ``L`` (an int >= 1) or ``{"kind": "fixed", "steps": L}``: what a channel delivers at engine step
  t reaches the receivers in the observation of engine step t + L. Messages arrive in the order
  they were sent (every message takes the same time). A message is charged when it is sent, as
  always: the messages of the last L steps of a run are charged and never delivered (in flight at
  the horizon).
* ``None`` or ``0``: no latency (the default): the channels' own timing.

Latency counts engine steps, communication-only steps included (a message travels while the
agents talk), where a reward delay counts pulls. A learner that relies on the channels' own
timing (a reply in the step after its request) refuses a latency by name (docs/time.md, "What
every learner does").

Per-link and random latencies (:class:`LinkLatency`) give each message its own delay, on the
channels whose deliveries are addressed per link (``neighbors`` without ``reduce``, one slot per
neighbour; ``push``, one per client):

* ``{"kind": "per_link", "steps": [[L_ji]], "server": [L_i]}``: the message from agent j to agent
  i takes L_ji >= 0 engine steps (an N x N matrix, row the sender; entries off the graph's edges
  unused); a server's download to client i takes ``server[i]`` (default 0);
* ``{"kind": "geometric", "mean": m, "max": D}``, ``{"kind": "uniform", "low": a, "high": b}``,
  ``{"kind": "pareto", "shape": a, "max": D}``: each message's latency drawn from the law of the
  same name of ``reward_delay`` (:func:`fedbandit_env.delay.draw_delay`, 1..D steps), per message
  from the run's ``latency`` stream.

Messages on a link arrive in the order they were sent, at most one per step: the message sent at
s with latency L arrives at a = max(s + L, a_prev + 1), a_prev the arrival of the link's previous
message (first in, first out). Since a link carries at most one message per step, a - s never
exceeds the largest latency. With a fixed per-link latency this is s + L exactly.
:class:`LinkLine` (numpy) and the JAX engine keep, per channel and link, a ring of D + 1 arrival
steps (:func:`link_enter`, :func:`link_arrive`, written once against an array namespace): a step
writes each link's new message and reads one position, O(links x dim).

The numpy engine keeps the last L steps' delivery records of each channel (:class:`LatencyLine`);
an engine step then costs O(L) records of memory and one swap per channel, whatever L
(``benchmarks/bench_time_options.py`` times it).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from fedbandit_env.delay import (
    RANDOM_DELAY_KINDS,
    RandomDelay,
    draw_delay,
    fixed_option,
    random_law,
)
from fedbandit_env.errors import ConfigError
from fedbandit_env.validation import check_int
from fedbandit_env.xp import put_along

LATENCY_KINDS: tuple[str, ...] = ("fixed", "per_link", *RANDOM_DELAY_KINDS)
"""The accepted ``latency`` kinds (an int is ``fixed``)."""
LINK_CHANNELS: tuple[str, ...] = ("neighbors", "push")
"""The channel kinds that take a per-link or random latency (deliveries addressed per link)."""


@dataclass(frozen=True, eq=False)
class LinkLatency:
    """A per-link or random latency (module docstring): ``kind``; ``steps`` (N, N) int64 the
    per-link latencies (row the sender) and ``server`` (N,) the server-to-client ones
    (``per_link``); ``law`` the random law; ``max`` the largest latency in steps."""

    kind: str
    max: int
    steps: np.ndarray | None = None
    server: np.ndarray | None = None
    law: RandomDelay | None = None

    def __reduce__(self) -> Any:  # pickles (worker processes) by value
        return (LinkLatency, (self.kind, self.max, self.steps, self.server, self.law))


def latency_option(value: Any, *, horizon: int, num_agents: int = 0) -> int | LinkLatency | None:
    """The latency of a ``latency`` argument: L >= 1 in engine steps (fixed), a
    :class:`LinkLatency`, or None for none."""
    if isinstance(value, Mapping) and value.get("kind") in RANDOM_DELAY_KINDS:
        law = random_law("latency", value, horizon)
        return LinkLatency(value["kind"], law.max, law=law)
    if isinstance(value, Mapping) and value.get("kind") == "per_link":
        return _per_link(value, horizon, num_agents)
    return fixed_option("latency", value, "steps", "the latency L in engine steps", horizon,
                        "an int, or a dict with kind 'fixed', 'per_link', 'geometric', 'uniform'"
                        " or 'pareto'", kinds=LATENCY_KINDS)  # fmt: skip


def _per_link(value: Mapping, horizon: int, n: int) -> LinkLatency:
    extra = sorted(set(value) - {"kind", "steps", "server"})
    if extra or "steps" not in value:
        raise ConfigError(f"latency: 'per_link' expects 'steps' (an {n} x {n} matrix of steps, "
                          f"row the sender) and optionally 'server' ({n} steps), got keys "
                          f"{sorted(value)}")  # fmt: skip
    steps = _steps("steps", value["steps"], (n, n), horizon)
    server = _steps("server", value.get("server", [0] * n), (n,), horizon)
    top = int(max(steps.max(initial=0), server.max(initial=0)))
    for arr in (steps, server):
        arr.setflags(write=False)
    return LinkLatency("per_link", top, steps=steps, server=server)


def _steps(name: str, value: Any, shape: tuple[int, ...], horizon: int) -> np.ndarray:
    try:
        arr = np.asarray(value)
    except (TypeError, ValueError):
        arr = np.zeros(0)
    if arr.shape != shape or arr.dtype.kind not in "iu":
        raise ConfigError(f"latency: {name}: expected integers of shape {shape} (steps), got "
                          f"{value!r}")  # fmt: skip
    for v in arr.ravel():
        check_int(name, int(v), minimum=0, maximum=horizon, where="latency")
    return arr.astype(np.int64)


def check_link_channels(channels: Mapping[str, Any]) -> None:
    """Refuse, by name, a channel whose deliveries are not addressed per link."""
    for name, ch in channels.items():
        kind = getattr(ch, "kind", None)
        if kind not in LINK_CHANNELS or getattr(ch, "reduce", None) is not None:
            raise ConfigError(
                f"channels.{name}: latency: expected a channel kind among {list(LINK_CHANNELS)} "
                f"(neighbors without reduce) under a per-link or random latency (one delay per "
                f"addressed message), got {kind!r}"
                + ("" if getattr(ch, "reduce", None) is None else f" with reduce={ch.reduce!r}")
            )


class LatencyLine:
    """The numpy engine's deliveries in flight: per channel, the records of the last L steps
    (oldest first), started with L empty records."""

    def __init__(self, latency: int, channels: Mapping[str, Any]):
        self.latency = latency
        self.line = {name: deque(ch.empty_delivery() for _ in range(latency))
                     for name, ch in channels.items()}  # fmt: skip

    def shift(self, deliveries: dict[str, Any]) -> dict[str, Any]:
        """This step's records enter the line; the records sent L steps ago leave it (what the
        receivers observe now)."""
        out = {}
        for name, record in deliveries.items():
            line = self.line[name]
            line.append(record)
            out[name] = line.popleft()
        return out


# ----------------------------------------------------------------------------- per message


def link_enter(ring: tuple[Any, Any, Any], step: Any, latency: Any, mask: Any, payload: Any,
               xp: Any = np) -> tuple[Any, Any, Any]:  # fmt: skip
    """The arrival ring after the messages a channel delivered at engine step ``step`` enter it:
    ``ring`` = (mask (..., S, R + 1) bool, payload (..., S, R + 1, dim), last (..., S) the arrival
    step of each link's last message), S links, R positions and one spare; ``mask`` (..., S) the
    messages, ``payload`` (..., S, dim), ``latency`` (..., S) their latencies. A message arrives
    at a = max(step + latency, last + 1) (first in, first out, one per step) and is written at
    position a mod R; a link without a message writes to the spare position R, never read. One
    write per link: O(S dim)."""
    ring_mask, ring_pay, last = ring
    size = ring_mask.shape[-1] - 1
    arrival = xp.maximum(step + latency, last + 1)
    at = xp.where(mask, arrival % size, size)[..., None]
    ring_mask = put_along(xp, ring_mask, at, mask[..., None], axis=-1)
    wide = xp.broadcast_to(at[..., None], (*at.shape, payload.shape[-1]))
    ring_pay = put_along(xp, ring_pay, wide, payload[..., None, :], axis=-2)
    return ring_mask, ring_pay, xp.where(mask, arrival, last)


def link_arrive(ring: tuple[Any, Any, Any], step: Any,
                xp: Any = np) -> tuple[tuple[Any, Any, Any], Any, Any]:  # fmt: skip
    """The messages that arrive at engine step ``step`` (mask (..., S), payload (..., S, dim),
    read at position step mod R) and the ring with that position cleared: O(S dim)."""
    ring_mask, ring_pay, last = ring
    size = ring_mask.shape[-1] - 1
    now = xp.full((*ring_mask.shape[:-1], 1), step % size)
    mask = xp.take_along_axis(ring_mask, now, axis=-1)[..., 0]
    payload = xp.take_along_axis(ring_pay, now[..., None], axis=-2)[..., 0, :]
    ring_mask = put_along(xp, ring_mask, now, False, axis=-1)
    return (ring_mask, ring_pay, last), mask, xp.where(mask[..., None], payload, 0.0)


def slot_latency(latency: LinkLatency, senders: np.ndarray, receivers: np.ndarray) -> np.ndarray:
    """The per-link latency of each slot: ``steps[sender, receiver]`` (a padded slot, sender
    -1: 0)."""
    return np.where(senders >= 0, latency.steps[np.maximum(senders, 0), receivers], 0)


class LinkLine:
    """The numpy engine's messages in flight under a per-link or random latency: per channel an
    arrival ring of ``max + 1`` steps over its links (a ``neighbors`` slot (i, d), or a client
    of ``push``); the random latencies drawn per message from the runs' ``latency`` stream."""

    def __init__(self, latency: LinkLatency, channels: Mapping[str, Any], stream: Any,
                 num_runs: int, num_agents: int):  # fmt: skip
        self.latency, self.step = latency, 0
        self.rings, self.fixed, self.draws = {}, {}, {}
        for name, ch in channels.items():
            empty = ch.empty_delivery()
            links = empty.mask[0].size if ch.kind == "neighbors" else num_agents
            shape = (num_runs, links, latency.max + 2)  # R = max + 1 positions and a spare
            self.rings[name] = (np.zeros(shape, bool), np.zeros((*shape, ch.dim)),
                                np.full((num_runs, links), -1, np.int64))  # fmt: skip
            if latency.law is not None:
                self.draws[name] = stream.child(f"channel/{name}").buffered("uniform", (links,))
            elif ch.kind == "neighbors":
                senders = empty.senders if empty.senders.ndim == 2 else empty.senders[0]
                receivers = np.broadcast_to(np.arange(num_agents)[:, None], senders.shape)
                self.fixed[name] = slot_latency(latency, senders, receivers).reshape(-1)
            else:
                self.fixed[name] = latency.server

    def shift(self, deliveries: dict[str, Any]) -> dict[str, Any]:
        """This step's deliveries enter the rings; what is due now leaves them."""
        self.step += 1
        out = {}
        for name, record in deliveries.items():
            neighbors = hasattr(record, "mask")
            mask = record.mask if neighbors else record.received
            runs = mask.shape[0]
            flat_mask = mask.reshape(runs, -1)
            flat_pay = record.payload.reshape(runs, flat_mask.shape[1], -1)
            if name in self.draws:
                lat = draw_delay(self.draws[name].next(), self.latency.law)
            else:
                lat = self.fixed[name]
            ring = link_enter(self.rings[name], self.step, lat, flat_mask, flat_pay)
            self.rings[name], got, pay = link_arrive(ring, self.step)
            if neighbors:
                out[name] = type(record)(record.senders, got.reshape(mask.shape),
                                         pay.reshape(record.payload.shape))  # fmt: skip
            else:
                out[name] = type(record)(got, pay)
        return out
