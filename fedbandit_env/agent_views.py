"""The channels' per-agent dict edge: each channel's observation space, agent i's view of a
delivery and its inverse for one run, from each kind's field layout (the observation's
``channels`` entry, module doc of :mod:`fedbandit_env.parallel_env`; docs/channels.md). The
PettingZoo view packs observations with them and :class:`~fedbandit_env.policy.ParallelPolicyAdapter`
unpacks them; the batched channels (:mod:`fedbandit_env.network`) deliver arrays only.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces

from fedbandit_env.network import (
    Channel,
    FloodDelivery,
    GossipDelivery,
    HierarchicalDelivery,
    NeighborsAggregate,
    NeighborsDelivery,
    PushDelivery,
    ServerDelivery,
)

RUN, AGENT, FIXED = "run", "agent", "fixed"
"""Where a field's value sits in the delivery: per run ``[b]``, per agent ``[b, i]``, or fixed
per agent ``[i]`` (read from the channel when unpacking)."""


def payload_space(shape: tuple[int, ...]) -> spaces.Box:
    return spaces.Box(-np.inf, np.inf, shape=shape, dtype=np.float64)


def _layout(channel: Channel) -> tuple[type, dict[str, tuple[spaces.Space, str, type]]]:
    """The delivery class of ``channel`` and, per observation field, (space, where the value
    sits, the delivery's dtype)."""
    n, dim = channel.num_agents, channel.dim
    step = spaces.Box(-1, np.iinfo(np.int64).max, (), np.int64)
    if channel.kind == "gossip":
        # partner: a Box, not Discrete(N + 1, start=-1): -1 means "not on the edge", and
        # discrete spaces with negative values break TorchRL's one-hot specs
        return GossipDelivery, {
            "partner": (spaces.Box(-1, n - 1, shape=(), dtype=np.int64), AGENT, np.int64),
            "received": (spaces.Discrete(2), AGENT, bool),
            "payload": (payload_space((dim,)), AGENT, np.float64),
        }
    if channel.kind == "hierarchical":
        return HierarchicalDelivery, {
            "aggregate": (payload_space((dim,)), RUN, np.float64),
            "count": (spaces.Discrete(n + 1), RUN, np.int64),
            "sent_step": (step, RUN, np.int64),
        }
    if channel.kind == "push":
        return PushDelivery, {
            "received": (spaces.Discrete(2), AGENT, bool),
            "payload": (payload_space((dim,)), AGENT, np.float64),
        }
    if channel.kind == "server":
        fields = {
            "aggregate": (payload_space((dim,)), RUN, np.float64),
            "count": (spaces.Discrete(n + 1), RUN, np.int64),
            "participating": (spaces.Discrete(2), AGENT, bool),
        }
        if channel.aggregate == "trimmed_mean":
            fields["degenerate"] = (spaces.Discrete(2), RUN, bool)
        return ServerDelivery, fields
    slots = channel.num_slots if channel.kind == "flood" else channel.max_degree
    padded = {
        "senders": (spaces.Box(-1, n - 1, (slots,), np.int64), FIXED, np.int64),
        "mask": (spaces.MultiBinary(slots), AGENT, bool),
        "sent_step": (spaces.Box(-1, np.iinfo(np.int64).max, (slots,), np.int64), AGENT, np.int64),
        "payload": (payload_space((slots, dim)), AGENT, np.float64),
    }
    if channel.kind == "flood":
        return FloodDelivery, padded
    if channel.reduce is None:  # neighbors
        del padded["sent_step"]
        return NeighborsDelivery, padded
    fields = {
        "value": (payload_space((dim,)), AGENT, np.float64),
        "count": (spaces.Box(0, slots, (), np.int64), AGENT, np.int64),
    }
    if channel.reduce == "trimmed_mean":
        fields["degenerate"] = (spaces.Discrete(2), AGENT, bool)
    return NeighborsAggregate, fields


def _key(channel: Channel) -> tuple:
    """What :func:`_layout` reads of a channel."""
    slots = {"flood": "num_slots", "neighbors": "max_degree"}.get(channel.kind)
    slots = None if slots is None else getattr(channel, slots)
    return (channel.kind, channel.num_agents, channel.dim, getattr(channel, "aggregate", None),
            getattr(channel, "reduce", None), slots)  # fmt: skip


_FIELDS: dict[tuple, tuple[type, dict[str, tuple[bool, Any, str, type]]]] = {}


def _fields(channel: Channel) -> tuple[type, dict[str, tuple[bool, Any, str, type]]]:
    """:func:`_layout` without its spaces, kept per channel configuration (the per-step views
    read it for every agent): per field (Discrete?, the space's dtype, where, the delivery's
    dtype)."""
    key = _key(channel)
    if key not in _FIELDS:
        cls, fields = _layout(channel)
        _FIELDS[key] = cls, {name: (isinstance(space, spaces.Discrete), space.dtype, where, dtype)
                             for name, (space, where, dtype) in fields.items()}  # fmt: skip
    return _FIELDS[key]


def channel_space(channel: Channel) -> spaces.Dict:
    """Per-agent observation space of ``channel``'s deliveries."""
    return spaces.Dict({name: f[0] for name, f in _layout(channel)[1].items()})


def channel_observation(channel: Channel, delivery: Any, b: int, i: int) -> dict[str, Any]:
    """Agent i's view (run b) of a delivery: fixed-shape arrays matching :func:`channel_space`
    (a Discrete field as an ``np.int64``, any other as an array of its space's dtype)."""
    fields = _fields(channel)[1]
    if channel.kind == "flood":  # sparse rows: agent i's slots, padded
        values = {"senders": delivery.senders[i], **_flood_slots(channel, delivery, b, i)}
    else:
        at = {RUN: b, AGENT: (b, i), FIXED: i}
        values = {k: getattr(delivery, k)[at[f[2]]] for k, f in fields.items()}
    out = {}
    for k, (discrete, space_dtype, _, _) in fields.items():
        out[k] = np.int64(values[k]) if discrete else np.array(values[k], space_dtype)
    return out


def channel_delivery(channel: Channel, observations: list[dict[str, Any]]) -> Any:
    """Inverse of :func:`channel_observation` for one run (B = 1), agents in order."""
    if channel.kind == "flood":
        return _flood_delivery(channel, observations)
    cls, fields = _fields(channel)
    out = {}
    for name, (_, _, where, dtype) in fields.items():
        if where == FIXED:
            out[name] = getattr(channel, name)
        else:
            rows = [o[name] for o in observations] if where == AGENT else observations[0][name]
            out[name] = np.array(rows, dtype=dtype)[None]
    return cls(**out)


def _flood_slots(channel: Channel, delivery: FloodDelivery, b: int, i: int) -> dict[str, Any]:
    """Agent i's padded slots (run b) of a flood delivery's sparse rows."""
    s = channel.num_slots
    mask = np.zeros(s, dtype=np.int8)
    sent_step = np.full(s, -1, dtype=np.int64)
    payload = np.zeros((s, channel.dim))
    sel = (delivery.run == b) & (delivery.receiver == i)
    slots = delivery.slot[sel]
    mask[slots] = 1
    sent_step[slots] = delivery.sent_step[sel]
    payload[slots] = delivery.payload[sel]
    return {"mask": mask, "sent_step": sent_step, "payload": payload}


def _flood_delivery(channel: Channel, observations: list[dict[str, Any]]) -> FloodDelivery:
    receiver, slot = np.nonzero(np.stack([o["mask"] for o in observations]).astype(bool))
    origin = channel.senders[receiver, slot]
    sent_step = np.stack([o["sent_step"] for o in observations])[receiver, slot]
    payload = np.stack([o["payload"] for o in observations])[receiver, slot]
    return FloodDelivery(
        channel.senders,
        run=np.zeros(len(receiver), dtype=np.int64),
        receiver=receiver.astype(np.int64),
        origin=origin,
        slot=slot.astype(np.int64),
        hops=channel.topology.hop_distances[receiver, origin].astype(np.int64),
        sent_step=sent_step.astype(np.int64),
        payload=payload.reshape(len(receiver), channel.dim),
    )
