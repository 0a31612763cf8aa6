"""The phase machine that Fed1-UCB and Fed2-UCB share (Shi & Shen; docs/fed-ucb12.md).

Every run moves through phases p = 1, 2, ... in lock step: in phase p every participating agent
pulls each arm of the run's active set ``f(p)`` times, round-robin over the active arms in
ascending order, all agents on the same arm at the same time. After the last pull of the phase
the run takes one communication-only step (docs/writing-agents.md, "Communication steps"): each
participating agent uploads its local sample means of the active arms (its own pulls since it
joined, every phase so far; zeros in the slots of eliminated arms) over the ``server`` channel
(aggregate ``"mean"``), the server's average comes back in the same step, and every agent
applies the elimination rule

    eliminate k  if  mean_k + B < max_{j active} mean_j - B

with the width ``B`` of the algorithm (:meth:`FedMABBase.width`). The server round costs no
pull. When one arm is left, every agent commits to it and communication stops. The active set
is computed from the server's broadcast only, so every agent of a run holds the same one.

Agents that have not joined yet (Fed2-UCB's participation schedule, the ``join_round`` option of
the ``server`` channel) play the same arms as the others (the active set is public) but neither
keep their samples nor upload; they start their statistics in the phase they join, as the new
clients of the paper do. Their pulls count in the pseudo-regret like everyone's
(docs/fed-ucb12.md, "Inactive agents and regret").
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from agents.channel_check import check_channels
from fedbandit_env.engine import PULL, VecObservation
from fedbandit_env.errors import ConfigError
from fedbandit_env.policy import (
    MULTI_ARMED,
    FederationFacts,
    TeamAction,
    TeamPolicy,
    require_family,
)
from fedbandit_env.seeding import BatchedRNG
from fedbandit_env.validation import check_int, check_real

CHANNEL = "server"

Schedule = int | Callable[[int], int]
"""A phase schedule: a constant, or a function of the phase p = 1, 2, ... (a
callable lets a schedule grow with p). JSON configs (suites, the CLI) use the constant form."""


def check_schedule(agent_id: str, name: str, value: Any, default: Schedule | None) -> Schedule:
    """A positive int or a callable; None gives ``default``."""
    if value is None and default is not None:
        return default
    if callable(value):
        return value
    return check_int(name, value, minimum=1, where=agent_id, hint="or a callable of the phase")


def check_width(agent_id: str, config: Any) -> None:
    """Validate the ``sigma`` (> 0) and ``width_scale`` (>= 0) of a frozen config in place."""
    sigma = check_real("sigma", config.sigma, low=0.0, low_open=True, where=agent_id)
    width_scale = check_real("width_scale", config.width_scale, low=0.0, where=agent_id)
    object.__setattr__(config, "sigma", sigma)
    object.__setattr__(config, "width_scale", width_scale)


def schedule_value(agent_id: str, name: str, schedule: Schedule, p: int) -> int:
    """``schedule(p)`` checked to be a positive int."""
    value = schedule(p) if callable(schedule) else schedule
    return check_int(f"{name}({p})", value, minimum=1, where=agent_id)


class FedMABBase(TeamPolicy):
    """Batched Fed1-/Fed2-UCB phase machine over B runs and N agents (module docstring).

    Subclasses give the per-phase pull count (:meth:`pulls_per_arm`), the width
    (:meth:`width`) and may restrict the server channel (:meth:`check_channel`)."""

    payload_layouts = {CHANNEL: "arm_means"}  # the local sample mean of every arm (0: eliminated)

    def __init__(self, config: Any):
        self.config = config
        self.sigma, self.width_scale = config.sigma, config.width_scale

    def channel_spec(self, config):
        return {CHANNEL: {"kind": "server", "dim": config.num_arms, "aggregate": "mean"}}

    # ------------------------------------------------------------------ hooks
    def pulls_per_arm(self, p: int) -> int:
        """``f(p)``: pulls per active arm in phase p (the algorithm's schedule)."""
        raise NotImplementedError

    def width(self, p: np.ndarray, runs: np.ndarray) -> np.ndarray:
        """The confidence width B (len(runs),) of the runs ``runs`` after phase ``p`` of each."""
        raise NotImplementedError

    def check_channel(self, have: dict[str, Any]) -> None:
        """The server must average every participating client's upload, without losses."""
        if have.get("participation") != 1.0:
            raise ConfigError(
                f"{self.agent_id}: channels.{CHANNEL}: expected aggregate 'mean' with "
                f"participation 1.0 (the server averages every participating client), got "
                f"aggregate {have.get('aggregate')!r} with participation "
                f"{have.get('participation')!r}"
            )
        if have.get("drop_prob", 0.0) != 0.0:
            raise ConfigError(
                f"{self.agent_id}: channels.{CHANNEL}.drop_prob: expected 0 (a lost upload "
                f"breaks the server's average), got {have.get('drop_prob')!r}"
            )

    # ------------------------------------------------------------------ reset
    def reset(self, facts: FederationFacts, rng: BatchedRNG) -> None:
        """Phase 1 with every arm active, zero local statistics, the join schedule of the
        server channel (none: every client from phase 1)."""
        require_family(self.agent_id, facts, MULTI_ARMED)
        check_channels(self, facts)
        have = facts.channels[CHANNEL]
        self.check_channel(have)
        B, N, K = facts.num_runs, facts.num_agents, facts.num_arms
        join = have.get("join_round")
        self.join_round = np.zeros(N, dtype=np.int64) if join is None else np.asarray(join)
        self.num_arms, self.horizon = K, facts.horizon
        self.log_T = math.log(max(facts.horizon, 2))
        self.sums = np.zeros((B, N, K))
        self.counts = np.zeros((B, N, K))
        self.active = np.ones((B, K), dtype=bool)
        self.phase = np.ones(B, dtype=np.int64)  # the phase under way (1-based)
        self.pos = np.zeros(B, dtype=np.int64)  # pulls made in the phase under way
        self.length = np.full(B, self.pulls_per_arm(1) * K, dtype=np.int64)
        self.committed = np.zeros(B, dtype=bool)
        self.awaiting = np.zeros(B, dtype=bool)  # took the phase's server round last step
        self.rounds = np.zeros(B, dtype=np.int64)  # completed server rounds
        self.num_phases = np.zeros(B, dtype=np.int64)  # completed phases (server rounds)
        self._cum_f = [0]  # _cum_f[p] = f(1) + ... + f(p)
        self._b, self._i = np.indices((B, N))
        self._zeros = np.zeros((B, N, K))
        self._no_send = np.zeros((B, N), dtype=bool)

    def cumulative_pulls(self, p: int) -> int:
        """F(1, p) = f(1) + ... + f(p): pulls per agent of each still active arm after phase p."""
        while len(self._cum_f) <= p:
            self._cum_f.append(self._cum_f[-1] + self.pulls_per_arm(len(self._cum_f)))
        return self._cum_f[p]

    def joined(self) -> np.ndarray:
        """(B, N): the agents that take part in the phase under way."""
        return self.join_round[None, :] <= self.rounds[:, None]

    # -------------------------------------------------------------------- act
    def act(self, obs: VecObservation) -> TeamAction:
        """Fold in the last pull (clients that have joined), apply the elimination rule when
        the server's average arrived, then pull the round-robin arm or upload in a
        communication step at the end of the phase (module docstring)."""
        if obs.step > 0:
            fresh = (obs.phase == PULL) & (obs.pulls > 0) & ~self.committed
            keep = fresh[:, None] & self.joined()
            arm = np.maximum(obs.last_arm, 0)
            self.sums[self._b, self._i, arm] += np.where(keep, obs.last_reward, 0.0)
            self.counts[self._b, self._i, arm] += keep
        if self.awaiting.any():
            self._eliminate(obs.deliveries[CHANNEL], self.awaiting)
        talk = ~self.committed & (self.pos >= self.length)
        self.awaiting = talk
        arms = self._team_arms()
        self.pos += ~self.committed & ~talk
        if not talk.any():
            return TeamAction(arms, {CHANNEL: (self._no_send, self._zeros)})
        send = talk[:, None] & self.joined()
        means = self.sums / np.maximum(self.counts, 1.0)
        payload = np.where(send[..., None] & self.active[:, None, :], means, 0.0)
        return TeamAction(arms, {CHANNEL: (send, payload)}, ~talk)

    def _team_arms(self) -> np.ndarray:
        """(B, N): every agent of a run plays the run's current arm."""
        return np.broadcast_to(self._current_arm()[:, None], self._b.shape).copy()

    def _current_arm(self) -> np.ndarray:
        """(B,) the arm of the next pull: the committed arm, or the active arm number
        ``pos mod |active|`` in ascending order (round-robin)."""
        n_active = self.active.sum(axis=1)
        target = self.pos % np.maximum(n_active, 1)
        rank = np.cumsum(self.active, axis=1) - 1
        return np.argmax(self.active & (rank == target[:, None]), axis=1).astype(np.int64)

    def _eliminate(self, reply: Any, runs: np.ndarray) -> None:
        """The server's average of the phase's uploads: the elimination rule, the next phase."""
        idx = np.flatnonzero(runs)
        width = self.width(self.phase[idx], idx)[:, None]  # the clients of the phase just ended
        self.rounds[idx] += reply.count[idx] > 0
        self.num_phases[idx] += 1
        mean = reply.aggregate[idx]
        active = self.active[idx]
        best = np.max(np.where(active, mean, -np.inf), axis=1, keepdims=True)
        active &= ~(mean + width < best - width)
        self.active[idx] = active
        self.committed[idx] = active.sum(axis=1) == 1
        self.phase[idx] += 1
        self.pos[idx] = 0
        f = np.array([self.pulls_per_arm(int(p)) for p in self.phase[idx]], dtype=np.int64)
        self.length[idx] = f * active.sum(axis=1)
