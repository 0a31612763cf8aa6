"""``push`` in JAX: the server's downloads, one addressed message per client.

Mirrors :mod:`fedbandit_env.network.push` for one run (docs/channels.md, "`push`"): slot j of
the send mask and payloads is the server's message to client j (the team policy plays the server
of Li & Wang, AISTATS 2022, Alg. 1, or He et al., NeurIPS 2022, Alg. 1). Same-step delivery; each
message costs ``c1`` and ``dim`` floats; with ``drop_prob`` each is lost independently (one
uniform per client per step), still charged and counted in ``dropped``.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from fedbandit_env.jax.channels.base import JaxChannel
from fedbandit_env.jax.types import link_charge
from fedbandit_env.network.ledger import AGENT_SERVER


class PushDelivery(NamedTuple):
    """``received`` (N,): the server's message arrived; ``payload`` (N, dim), zeros else."""

    received: jnp.ndarray
    payload: jnp.ndarray


class Push(JaxChannel):
    kind = "push"

    def empty(self):
        n = self.num_agents
        return PushDelivery(jnp.zeros(n, bool), jnp.zeros((n, self.dim), jnp.float32))

    def transmit(self, key: jax.Array, state, send, payload):
        kept = self.kept(key, send.shape)
        received = send if kept is None else send & kept
        pushed = send.sum(dtype=jnp.int32)
        charge = link_charge(AGENT_SERVER, pushed, self.dim, self.c1 * pushed,
                             pushed - received.sum(dtype=jnp.int32))  # fmt: skip
        return PushDelivery(received, jnp.where(received[:, None], payload, 0.0)), state, charge
