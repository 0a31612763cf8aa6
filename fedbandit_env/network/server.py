"""``server`` channel (master-worker): uploads from participating agents, aggregate broadcast back.

The master-worker structure of Li & Song (Sections III-B and IV; docs/commeff.md) and of Li, Song &
Fragouli 2020 (Algorithm 1; docs/dp-recsys.md): a server linked to every agent. In each step the
server accepts uploads from the participating agents (all of them, or a fresh uniformly random
subset of ceil(p N) agents per step, docs/commeff.md, Decision 11), sums or averages what arrived
(or takes a robust reduction of it, below), and broadcasts the result to every agent in the same
step. Cost: ``c1`` per agent–server link used; an upload and the reply on the same two-way link
count once (Li & Song, Section III-B, Eq. (2)), and the broadcast to agents that did not upload
is free unless ``charge_broadcast`` (docs/commeff.md, Decision 12). Messages count uploads and
deliveries.

Drops (``drop_prob``, not in the papers): each upload is lost independently with that
probability. A lost upload is still charged (one message, its link's c1) and counted in
``dropped``; the broadcast is never lost, and happens (N messages) only if an upload arrived.

Participation schedule (``join_round``, not in the commeff/dp-recsys papers; Fed2-UCB's clients that
join over time, Shi & Shen 2021, docs/fed-ucb12.md): a list of N non-negative ints. Agent i is
*active* once the server has completed ``join_round[i]`` rounds (a round is a step in which at least
one upload arrived; each run counts its own). An inactive agent's upload is refused: it is not
charged, not counted and not aggregated, exactly like the upload of an agent that the participation
fraction did not pick, and ``participating`` is False for it. The broadcast still reaches every
agent (the server's reply is public). At least one agent must join at round 0, otherwise no round
could ever happen. The schedule draws no randomness, so the channel's random streams are those of
the channel without it. Inactive agents still pull arms (the environment makes every agent pull
every step) and their pulls count in the pseudo-regret like any other agent's (docs/fed-ucb12.md,
"Inactive agents and regret").

Robust aggregates (docs/channels.md, "Robust reductions"; :mod:`fedbandit_env.network.robust`):
``aggregate`` ``"median"``, ``"trimmed_mean"`` (option ``trim``), ``"median_of_means"`` (options
``group_size`` and ``grouping``) or ``"geometric_median"`` over the uploads that arrived, in
ascending agent id. Uploads, broadcast and charges are those of ``"mean"``. ``degenerate`` (B,)
flags a ``trimmed_mean`` that fell back to the median. ``grouping="random"`` draws (N,) uniforms
per step from the channel's own sub-stream ``grouping``, so the participation and drop draws are
those of the same channel without it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from gymnasium import spaces

from fedbandit_env.errors import ConfigError
from fedbandit_env.network.base import Channel, check_probability, payload_space
from fedbandit_env.network.ledger import AGENT_SERVER
from fedbandit_env.network.robust import (
    ROBUST,
    check_robust_options,
    describe_robust,
    robust_reduce,
)
from fedbandit_env.seeding import BatchedRNG
from fedbandit_env.validation import check_flag, check_int

AGGREGATES = ("mean", "sum", *ROBUST)


@dataclass
class ServerDelivery:
    """``aggregate`` (B, dim) broadcast to every agent; ``count`` (B,) uploads that arrived;
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
        **kwargs,
    ):
        super().__init__(name, topology, dim, **kwargs)
        if not isinstance(aggregate, str) or aggregate not in AGGREGATES:
            raise ConfigError(
                f"channels.{name}.aggregate: expected one of {AGGREGATES}, got {aggregate!r}"
            )
        p = check_probability(f"channels.{name}.participation", participation)
        if p == 0.0:
            raise ConfigError(f"channels.{name}.participation: expected p in (0, 1], got 0")
        self.aggregate = aggregate
        self.participation = p
        self.num_participants = math.ceil(p * self.num_agents)
        self.charge_broadcast = check_flag(f"channels.{name}.charge_broadcast", charge_broadcast)
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
            mask = np.ones((self.num_runs, self.num_agents), dtype=bool)
        else:
            u = self._pick.next()
            chosen = np.argpartition(u, self.num_participants - 1, axis=1)
            mask = np.zeros((self.num_runs, self.num_agents), dtype=bool)
            np.put_along_axis(mask, chosen[:, : self.num_participants], True, axis=1)
        if self._join is not None:
            mask = mask & (self._join[None, :] <= self._rounds[:, None])
        return mask

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
        down = np.where(count > 0, self.num_agents, 0)
        links = n_up + (
            np.where(count > 0, self.num_agents - n_up, 0) if self.charge_broadcast else 0
        )
        charge = self._charge()
        charge.messages[:, AGENT_SERVER] = n_up + down
        charge.floats[:, AGENT_SERVER] = (n_up + down) * self.dim
        charge.cost[:, AGENT_SERVER] = self.c1 * links
        charge.dropped[:] = n_up - count
        charge.sent[:] = uploads
        return ServerDelivery(total, count, participating, degenerate), charge

    def observation_space(self) -> spaces.Dict:
        fields = {
            "aggregate": payload_space((self.dim,)),
            "count": spaces.Discrete(self.num_agents + 1),
            "participating": spaces.Discrete(2),
        }
        if self.aggregate == "trimmed_mean":
            fields["degenerate"] = spaces.Discrete(2)
        return spaces.Dict(fields)

    def agent_observation(self, delivery: ServerDelivery, b: int, i: int) -> dict[str, Any]:
        out = {
            "aggregate": delivery.aggregate[b].copy(),
            "count": np.int64(delivery.count[b]),
            "participating": np.int64(delivery.participating[b, i]),
        }
        if self.aggregate == "trimmed_mean":
            out["degenerate"] = np.int64(delivery.degenerate[b])
        return out

    def delivery_from_observations(self, observations: list[dict[str, Any]]) -> ServerDelivery:
        return ServerDelivery(
            observations[0]["aggregate"][None].copy(),
            np.array([observations[0]["count"]], dtype=np.int64),
            np.array([[o["participating"] for o in observations]], dtype=bool),
            np.array([bool(observations[0].get("degenerate", 0))]),
        )

    def describe(self) -> dict[str, Any]:
        return {
            **super().describe(),
            "aggregate": self.aggregate,
            "participation": self.participation,
            "charge_broadcast": self.charge_broadcast,
            "join_round": None if self.join_round is None else list(self.join_round),
            **describe_robust(self.aggregate, self.trim, self.group_size, self.grouping),
        }


def check_join_round(name: str, value: Any, num_agents: int) -> tuple[int, ...] | None:
    """The participation schedule: None, or N non-negative ints with at least one 0."""
    if value is None:
        return None
    if isinstance(value, str | bytes) or not hasattr(value, "__len__"):
        raise ConfigError(
            f"{name}: expected None or a list of {num_agents} non-negative ints (the server "
            f"round from which each agent may upload), got {value!r}"
        )
    if len(value) != num_agents:
        raise ConfigError(
            f"{name}: expected one round per agent ({num_agents}), got {len(value)} entries"
        )
    rounds = tuple(check_int(f"{name}[{i}]", r, minimum=0) for i, r in enumerate(value))
    if min(rounds) != 0:
        raise ConfigError(
            f"{name}: expected at least one agent that joins at round 0 (no round could happen "
            f"otherwise), got the earliest round {min(rounds)}"
        )
    return rounds
