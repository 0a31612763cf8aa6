"""JAX twins of the channels (docs/jax.md, "Channels"): one class per kind, built from the
validated numpy channel of the same configuration."""

from __future__ import annotations

import importlib

from fedbandit_env.jax.channels.base import JaxChannel
from fedbandit_env.network.base import Channel

KINDS = {
    "neighbors": "fedbandit_env.jax.channels.neighbors:Neighbors",
    "gossip": "fedbandit_env.jax.channels.gossip:Gossip",
    "server": "fedbandit_env.jax.channels.server:Server",
    "flood": "fedbandit_env.jax.channels.flood:Flood",
    "hierarchical": "fedbandit_env.jax.channels.hierarchical:Hierarchical",
    "push": "fedbandit_env.jax.channels.push:Push",
}


def jax_channel(twin: Channel) -> JaxChannel:
    """The JAX channel of a numpy channel (same kind and options)."""
    module, _, name = KINDS[twin.kind].partition(":")
    return getattr(importlib.import_module(module), name)(twin)


__all__ = ["KINDS", "JaxChannel", "jax_channel"]
