"""``server`` channel (master-worker): uploads from participating agents, aggregate broadcast back.

Li & Song (Sections III-B and IV; cost: Section III-B, Eq. (2)); Li, Song & Fragouli 2020
(Algorithm 1); participation schedule ``join_round`` after Fed2-UCB (Shi & Shen 2021). Semantics,
costs and drops: docs/channels.md, "`server`"; docs/commeff.md, Decisions 11-12; docs/fed-ucb12.md,
"Clients that join over time"; robust aggregates: docs/channels.md, "Robust reductions".
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from fedbandit_env.channel_options import check_join_round, check_robust_options, describe_robust
from fedbandit_env.errors import ConfigError
from fedbandit_env.network.base import Channel
from fedbandit_env.network.ledger import AGENT_SERVER
from fedbandit_env.network.robust import ROBUST, robust_reduce
from fedbandit_env.seeding import BatchedRNG
from fedbandit_env.validation import check_choice, check_flag, check_probability

AGGREGATES = ("mean", "sum", *ROBUST)
REPLIES = ("broadcast", "none")  # "none": the aggregate is the server's (docs/channels.md)


@dataclass
class ServerDelivery:
    """``aggregate`` (B, dim) broadcast to every agent (with ``reply="none"``: what reached the
    server, sent to nobody); ``count`` (B,) uploads that arrived;
    ``participating`` (B, N): the agent was picked to upload this step; ``degenerate`` (B,):
    ``trimmed_mean`` fell back to the median (1 <= count <= 2 trim; all False for the other
    aggregates, and by default)."""

    aggregate: np.ndarray
    count: np.ndarray
    participating: np.ndarray
    degenerate: np.ndarray | None = None

    def __post_init__(self) -> None:
        if self.degenerate is None:
            self.degenerate = np.zeros(np.shape(self.count), dtype=bool)


class ServerChannel(Channel):
    kind = "server"

    def __init__(
        self,
        name,
        topology,
        dim,
        *,
        aggregate: str = "mean",
        participation: float = 1.0,
        charge_broadcast: bool = False,
        join_round: Any = None,
        trim: int | None = None,
        group_size: int | None = None,
        grouping: str | None = None,
        reply: str = "broadcast",
        **kwargs,
    ):
        super().__init__(name, topology, dim, **kwargs)
        self.aggregate = check_choice(f"channels.{name}.aggregate", aggregate, AGGREGATES)
        self.reply = check_choice(f"channels.{name}.reply", reply, REPLIES)
        p = check_probability(f"channels.{name}.participation", participation)
        if p == 0.0:
            raise ConfigError(f"channels.{name}.participation: expected p in (0, 1], got 0")
        self.participation = p
        self.num_participants = math.ceil(p * self.num_agents)
        self.charge_broadcast = check_flag(f"channels.{name}.charge_broadcast", charge_broadcast)
        if self.reply == "none" and self.charge_broadcast:
            raise ConfigError(f"channels.{name}.charge_broadcast: expected False with reply "
                              "'none' (no broadcast is sent), got True")  # fmt: skip
        self.join_round = check_join_round(
            f"channels.{name}.join_round", join_round, self.num_agents
        )
        self.trim, self.group_size, self.grouping = check_robust_options(
            name, "aggregate", aggregate, trim, group_size, grouping
        )
        self._random_groups = aggregate == "median_of_means" and self.grouping == "random"

    def _reset(self, rng: BatchedRNG) -> None:
        n = self.num_agents
        self._pick = rng.buffered("uniform", (n,)) if self.num_participants < n else None
        self._drops = rng.buffered("uniform", (n,)) if self.drop_prob > 0 else None
        self._groups = (
            rng.child("grouping").buffered("uniform", (n,)) if self._random_groups else None
        )
        self._rounds = np.zeros(self.num_runs, dtype=np.int64)  # completed rounds per run
        self._join = None if self.join_round is None else np.asarray(self.join_round, np.int64)

    def empty_delivery(self) -> ServerDelivery:
        return ServerDelivery(
            np.zeros((self.num_runs, self.dim)),
            np.zeros(self.num_runs, dtype=np.int64),
            np.ones((self.num_runs, self.num_agents), dtype=bool),
            np.zeros(self.num_runs, dtype=bool),
        )

    def _participants(self) -> np.ndarray:
        if self._pick is None:
            return self.active
        chosen = np.argpartition(self._pick.next(), self.num_participants - 1, axis=1)
        mask = np.zeros((self.num_runs, self.num_agents), dtype=bool)
        np.put_along_axis(mask, chosen[:, : self.num_participants], True, axis=1)
        return mask & self.active

    @property
    def active(self) -> np.ndarray:
        """(B, N) bool: the agents whose uploads the server accepts in the next step (the
        participation schedule; every agent without one)."""
        if self._join is None:
            return np.ones((self.num_runs, self.num_agents), dtype=bool)
        return self._join[None, :] <= self._rounds[:, None]

    @property
    def silent_step_is_empty(self) -> bool:
        draws = (self._pick, self._drops, self._groups)
        return all(d is None for d in draws) and self._join is None

    def transmit(self, step: int, send: np.ndarray, payload: np.ndarray):
        participating = self._participants()
        drop_u = self._drops.next() if self._drops is not None else None
        order = self._groups.next() if self._groups is not None else None
        uploads = send & participating
        arrived = uploads if drop_u is None else uploads & (drop_u >= self.drop_prob)
        count = arrived.sum(axis=1)
        self._rounds += count > 0
        degenerate = np.zeros(self.num_runs, dtype=bool)
        if self.aggregate in ROBUST:
            total, degenerate = robust_reduce(
                self.aggregate,
                payload,
                arrived,
                count,
                trim=self.trim,
                group_size=self.group_size,
                order=order,
            )
        else:
            total = np.einsum("bn,bnd->bd", arrived.astype(np.float64), payload)
            if self.aggregate == "mean":
                total = total / np.maximum(count, 1)[:, None]
        n_up = uploads.sum(axis=1)
        if self.reply == "none":  # uploads only: the server keeps what arrived
            messages, links = n_up, n_up
        else:
            messages, links = broadcast_links(n_up, count, self.num_agents, self.charge_broadcast)
        charge = self._charge(AGENT_SERVER, messages, self.c1 * links, n_up - count, uploads)
        return ServerDelivery(total, count, participating, degenerate), charge

    def describe(self) -> dict[str, Any]:
        return {
            **super().describe(),
            "aggregate": self.aggregate,
            "participation": self.participation,
            "charge_broadcast": self.charge_broadcast,
            "join_round": None if self.join_round is None else list(self.join_round),
            **describe_robust(self.aggregate, self.trim, self.group_size, self.grouping),
            **({} if self.reply == "broadcast" else {"reply": self.reply}),  # keys of before
        }


def broadcast_links(uploads, count, num_agents: int, charge_broadcast: bool):
    """(messages, links) (B,) of a server round: ``uploads`` plus, where something arrived
    (``count`` > 0), the broadcast to all N agents; an upload and the reply on its two-way link
    are one link, the other agents' links count only with ``charge_broadcast``."""
    down = np.where(count > 0, num_agents, 0)
    extra = np.where(count > 0, num_agents - uploads, 0) if charge_broadcast else 0
    return uploads + down, uploads + extra
