"""``server`` in JAX (master-worker): uploads from participating agents, aggregate broadcast back.

Mirrors :mod:`fedbandit_env.network.server` for one run: the master-worker structure of Li &
Song (Sections III-B and IV; docs/commeff.md) and of Li, Song & Fragouli 2020 (Algorithm 1;
docs/dp-recsys.md). Each step the server accepts the uploads of the participating agents (all
of them, or a fresh uniformly random subset of ceil(p N) agents, docs/commeff.md, Decision 11:
the ceil(p N) smallest of one uniform per agent), sums or averages what arrived (or takes a
robust reduction of it: ``"median"``, ``"trimmed_mean"``, ``"median_of_means"``,
``"geometric_median"``; docs/channels.md, "Robust reductions"; the functions of
:mod:`fedbandit_env.network.robust`, shared with the numpy channels) and broadcasts it to
every agent in the same step (``reply="none"``: to nobody, docs/channels.md, "`push`").
Cost: ``c1`` per agent-server link used, an upload and its reply counting once (Li & Song,
Section III-B, Eq. (2)); the broadcast to agents that did not upload is free unless
``charge_broadcast`` (docs/commeff.md, Decision 12). Messages count uploads and deliveries.

Drops (``drop_prob``): each upload is lost independently, still charged and counted in
``dropped``; the broadcast (N messages) happens only if an upload arrived.

Join schedule (``join_round``, Fed2-UCB's clients that join over time, Shi & Shen 2021,
docs/fed-ucb12.md): agent i may upload once the server has completed ``join_round[i]`` rounds
(a round: a step in which an upload arrived). The state is the run's completed rounds; an
inactive agent's upload is refused like that of an agent the participation did not pick.

``grouping="random"`` (``median_of_means``) first splits the step's key into the key of the
participation and drops and a key for the (N,) ordering uniforms (:meth:`Server.keys`).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from fedbandit_env.jax.channels.base import JaxChannel
from fedbandit_env.jax.types import link_charge
from fedbandit_env.network.ledger import AGENT_SERVER
from fedbandit_env.network.robust import ROBUST, robust_reduce


class ServerDelivery(NamedTuple):
    """``aggregate`` (dim,) broadcast to every agent, ``count`` () uploads that arrived,
    ``participating`` (N,) the agent could upload this step (picked and active),
    ``degenerate`` () ``trimmed_mean`` fell back to the median (the channel always fills it,
    False for the other aggregates)."""

    aggregate: jnp.ndarray
    count: jnp.ndarray
    participating: jnp.ndarray
    degenerate: jnp.ndarray | None = None


class Server(JaxChannel):
    kind = "server"

    def __init__(self, twin):
        super().__init__(twin)
        self.aggregate = twin.aggregate
        self.trim = twin.trim
        self.group_size = twin.group_size
        self.random_groups = twin.aggregate == "median_of_means" and twin.grouping == "random"
        self.participation = twin.participation
        self.num_participants = twin.num_participants
        self.charge_broadcast = twin.charge_broadcast
        self.reply = twin.reply
        self.join_round = None if twin.join_round is None else np.asarray(twin.join_round, np.int32)

    def init(self):
        """The run's completed rounds (steps in which at least one upload arrived)."""
        return jnp.zeros((), jnp.int32)

    def empty(self):
        return ServerDelivery(
            jnp.zeros(self.dim, jnp.float32),
            jnp.zeros((), jnp.int32),
            jnp.ones(self.num_agents, bool),
            jnp.zeros((), bool),
        )

    def participants(self, key: jax.Array, rounds: jnp.ndarray) -> jnp.ndarray:
        """(N,) the agents whose uploads the server accepts this step: picked by the
        participation fraction and active by the join schedule."""
        n = self.num_agents
        mask = jnp.ones(n, bool)
        if self.num_participants < n:
            u = jax.random.uniform(key, (n,), jnp.float32)
            rank = jnp.argsort(jnp.argsort(u))
            mask = rank < self.num_participants
        if self.join_round is not None:
            mask = mask & (jnp.asarray(self.join_round) <= rounds)
        return mask

    def keys(self, key: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array | None]:
        """(participation key, drop key, grouping key or None without ``grouping="random"``)."""
        k_group = None
        if self.random_groups:
            key, k_group = jax.random.split(key)
        k_pick, k_drop = jax.random.split(key)
        return k_pick, k_drop, k_group

    def group_order(self, k_group: jax.Array | None) -> jnp.ndarray | None:
        """The (N,) uniforms that order the arrived uploads (``"random"``)."""
        if k_group is None:
            return None
        return jax.random.uniform(k_group, (self.num_agents,), jnp.float32)

    def transmit(self, key: jax.Array, state, send, payload):
        k_pick, k_drop, k_group = self.keys(key)
        participating = self.participants(k_pick, state)
        uploads = send & participating
        kept = self.kept(k_drop, uploads.shape)
        arrived = uploads if kept is None else uploads & kept
        count = arrived.sum(dtype=jnp.int32)
        degenerate = jnp.zeros((), bool)
        if self.aggregate in ROBUST:
            total, degenerate = robust_reduce(
                self.aggregate,
                payload,
                arrived,
                count,
                trim=self.trim,
                group_size=self.group_size,
                order=self.group_order(k_group),
            )
        else:
            total = jnp.where(arrived[:, None], payload, 0.0).sum(axis=0)
            if self.aggregate == "mean":
                total = total / jnp.maximum(count, 1).astype(jnp.float32)
        n = self.num_agents
        n_up = uploads.sum(dtype=jnp.int32)
        down = jnp.where(count > 0, n, 0) if self.reply == "broadcast" else 0
        links = n_up
        if self.charge_broadcast:
            links = links + jnp.where(count > 0, n - n_up, 0)
        charge = link_charge(AGENT_SERVER, n_up + down, self.dim, self.c1 * links, n_up - count)
        rounds = state + (count > 0).astype(jnp.int32)
        return ServerDelivery(total, count, participating, degenerate), rounds, charge
