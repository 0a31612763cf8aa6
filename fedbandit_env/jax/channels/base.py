"""What every JAX channel shares (docs/jax.md, "Channels").

A JAX channel is built from the numpy channel of the same configuration (which has validated
its options) and mirrors its semantics for one run: ``transmit(key, state, send, payload)``
takes the send mask (N,) and the payloads (N, dim) of one step and returns the delivery record
of that step, the channel's next state and the step's :class:`~fedbandit_env.jax.types.Charge`.
It is pure: randomness comes from ``key`` (drawn every step whoever sends), state is a pytree
(``()`` for a memoryless channel). Payload slots of agents that do not send are never
delivered; deliveries made at step t are in the observation of step t (one hop per step).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from fedbandit_env.network.base import Channel


class JaxChannel:
    """Base class: ``name``, ``kind``, payload ``dim`` and the costs of the numpy twin."""

    kind: str = ""

    def __init__(self, twin: Channel):
        self.twin = twin
        self.name = twin.name
        self.dim = twin.dim
        self.num_agents = twin.num_agents
        self.c1 = twin.c1
        self.c2 = twin.c2
        self.drop_prob = twin.drop_prob

    def init(self) -> Any:
        """The channel's state at reset (``()`` when it keeps none)."""
        return ()

    def empty(self) -> Any:
        """The delivery record of a step in which nothing arrives."""
        raise NotImplementedError

    def transmit(
        self, key: jax.Array, state: Any, send: jnp.ndarray, payload: jnp.ndarray
    ) -> tuple[Any, Any, Any]:
        """(delivery, next state, charge) of one step of one run."""
        raise NotImplementedError

    def kept(self, key: jax.Array, shape: tuple[int, ...]) -> jnp.ndarray | None:
        """Which messages survive ``drop_prob`` (None without drops): one uniform per message
        slot per step."""
        if self.drop_prob == 0.0:
            return None
        return jax.random.uniform(key, shape, jnp.float32) >= self.drop_prob
