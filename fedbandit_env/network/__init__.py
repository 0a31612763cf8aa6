"""Channels that deliver agents' messages over the topology, and the communication ledger."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fedbandit_env.errors import ConfigError
from fedbandit_env.graphs import Topology
from fedbandit_env.network.base import Channel
from fedbandit_env.network.flood import FloodChannel, FloodDelivery
from fedbandit_env.network.gossip import GossipChannel, GossipDelivery
from fedbandit_env.network.hierarchical import HierarchicalChannel, HierarchicalDelivery
from fedbandit_env.network.ledger import LINK_TYPES, Charge, Ledger
from fedbandit_env.network.neighbors import NeighborsAggregate, NeighborsChannel, NeighborsDelivery
from fedbandit_env.network.push import PushChannel, PushDelivery
from fedbandit_env.network.server import ServerChannel, ServerDelivery

CHANNEL_KINDS: dict[str, type[Channel]] = {
    "neighbors": NeighborsChannel,
    "gossip": GossipChannel,
    "server": ServerChannel,
    "flood": FloodChannel,
    "hierarchical": HierarchicalChannel,
    "push": PushChannel,
}


def make_channel(name: str, options: Mapping[str, Any], topology: Topology, c1: float, c2: float):
    opts = dict(options)
    cls = CHANNEL_KINDS[opts.pop("kind")]
    dim = opts.pop("dim")
    try:
        return cls(name, topology, dim, c1=c1, c2=c2, **opts)
    except TypeError as err:
        raise ConfigError(f"channels.{name}: unknown option for kind {cls.kind!r}: {err}") from None


__all__ = [
    "CHANNEL_KINDS",
    "LINK_TYPES",
    "Channel",
    "Charge",
    "FloodChannel",
    "FloodDelivery",
    "GossipChannel",
    "GossipDelivery",
    "HierarchicalChannel",
    "HierarchicalDelivery",
    "Ledger",
    "NeighborsAggregate",
    "NeighborsChannel",
    "NeighborsDelivery",
    "PushChannel",
    "PushDelivery",
    "ServerChannel",
    "ServerDelivery",
    "make_channel",
]
