"""Channels that deliver agents' messages over the topology, and the communication ledger."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from fedbandit_env.errors import ConfigError
from fedbandit_env.graphs import Topology
from fedbandit_env.network.base import Channel
from fedbandit_env.network.flood import FloodChannel, FloodDelivery
from fedbandit_env.network.gossip import GossipChannel, GossipDelivery
from fedbandit_env.network.hierarchical import HierarchicalChannel, HierarchicalDelivery
from fedbandit_env.network.ledger import LINK_TYPES, Charge, Ledger
from fedbandit_env.network.neighbors import (
    NeighborsAggregate,
    NeighborsChannel,
    NeighborsDelivery,
)
from fedbandit_env.network.server import ServerChannel, ServerDelivery
from fedbandit_env.validation import ConfigTypeError

CHANNEL_KINDS: dict[str, type[Channel]] = {
    "neighbors": NeighborsChannel,
    "gossip": GossipChannel,
    "server": ServerChannel,
    "flood": FloodChannel,
    "hierarchical": HierarchicalChannel,
}

ChannelsSpec = Sequence[str] | Mapping[str, Mapping[str, Any] | str] | None


def normalize_channels(spec: ChannelsSpec, default_dim: int) -> dict[str, dict[str, Any]]:
    """Channel specs as ``{name: {"kind": ..., "dim": ..., **options}}``.

    Accepts a list of kinds (each channel named after its kind, payload dim ``default_dim``) or a
    mapping from channel name to a kind or a dict of options (``kind`` defaults to the name).
    """
    if spec is None:
        return {}
    if isinstance(spec, str):
        raise ConfigError(
            f"channels: expected a list of kinds or a mapping, got the string {spec!r}"
        )
    if not isinstance(spec, Mapping | list | tuple):
        raise ConfigTypeError(
            f"channels: expected a list of kinds or a mapping {{name: kind or options}}, "
            f"got {spec!r}"
        )
    if isinstance(spec, Mapping):
        items = list(spec.items())
    else:
        items = [(kind, {"kind": kind}) for kind in spec]
    out: dict[str, dict[str, Any]] = {}
    for name, options in items:
        if not isinstance(name, str):
            raise ConfigError(f"channels: expected channel names (str), got {name!r}")
        if isinstance(options, str):
            options = {"kind": options}
        if not isinstance(options, Mapping):
            raise ConfigError(f"channels.{name}: expected a kind or a dict of options")
        opts = {"kind": name, "dim": default_dim, **options}
        if not isinstance(opts["kind"], str) or opts["kind"] not in CHANNEL_KINDS:
            raise ConfigError(
                f"channels.{name}.kind: expected one of {sorted(CHANNEL_KINDS)}, got {opts['kind']!r}"
            )
        if name in out:
            raise ConfigError(f"channels: the name {name!r} is used twice")
        out[str(name)] = dict(opts)
    return out


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
    "ServerChannel",
    "ServerDelivery",
    "make_channel",
    "normalize_channels",
]
