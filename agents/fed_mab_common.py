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

with the width ``B`` of the algorithm (:func:`agents.fed1_ucb.fed1_width`,
:func:`agents.fed2_ucb.fed2_width`). The server round costs no pull. When one arm is left, every agent commits to it and communication stops. The active set
is computed from the server's broadcast only, so every agent of a run holds the same one.

Agents that have not joined yet (Fed2-UCB's participation schedule, the ``join_round`` option of
the ``server`` channel) play the same arms as the others (the active set is public) but neither
keep their samples nor upload; they start their statistics in the phase they join, as the new
clients of the paper do. Their pulls count in the pseudo-regret like everyone's
(docs/fed-ucb12.md, "Inactive agents and regret").

The params (:class:`FedMABParams`, made by :func:`fed_mab_params` for either algorithm) hold the
checked facts, ln T, the join schedule and the pull schedule f tabulated for every phase the
horizon can reach; :func:`current_arm` and :func:`survivors` (the round-robin arm and the
elimination rule) are written once for both engines (numpy or ``jax.numpy`` arrays,
:mod:`fedbandit_env.xp`): the JAX learners (:mod:`agents.jax.fed_ucb`) call them too.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from agents.channel_check import check_channel_spec
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
from fedbandit_env.xp import namespace

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


def fed_channel_spec(num_arms: int) -> dict[str, dict[str, Any]]:
    """``server`` of dim K with aggregate ``"mean"`` (the server averages the local means)."""
    return {CHANNEL: {"kind": "server", "dim": num_arms, "aggregate": "mean"}}


def check_server(agent_id: str, have: dict[str, Any]) -> None:
    """The server must average every participating client's upload, without losses."""
    if have.get("participation") != 1.0:
        raise ConfigError(
            f"{agent_id}: channels.{CHANNEL}: expected aggregate 'mean' with "
            f"participation 1.0 (the server averages every participating client), got "
            f"aggregate {have.get('aggregate')!r} with participation "
            f"{have.get('participation')!r}"
        )
    if have.get("drop_prob", 0.0) != 0.0:
        raise ConfigError(
            f"{agent_id}: channels.{CHANNEL}.drop_prob: expected 0 (a lost upload "
            f"breaks the server's average), got {have.get('drop_prob')!r}"
        )


@dataclass(frozen=True)
class FedMABParams:
    """What the phase machine reads at run time on one federation: the learner's id, N, K, the
    horizon T and ``log_T = ln max(T, 2)``; ``join_round`` (N,) the server round (phase - 1)
    from which each client takes part (zeros without a join schedule); the pull schedule:
    ``f_const`` (a constant f) or, for a callable f, ``f_table[p] = f(p)`` and ``cum_table[p]
    = F(1, p) = f(1) + ... + f(p)`` for p = 0..P (int64; P the first phase with F(1, P) > T: no
    later phase can start within the horizon; empty but for p = 0 with a constant f);
    ``before`` (N,) int64 ``F(1, join_round[i])``, the pulls per arm a client missed before
    joining; ``f`` the schedule itself and the configuration."""

    agent_id: str
    num_agents: int
    num_arms: int
    horizon: int
    log_T: float
    join_round: np.ndarray
    f: Schedule
    f_const: int | None
    f_table: np.ndarray
    cum_table: np.ndarray
    before: np.ndarray
    config: Any


def pulls_per_arm(params: FedMABParams, p: int) -> int:
    """``f(p)``: pulls per active arm in phase p (checked a positive int)."""
    if params.f_const is not None:
        return params.f_const
    if p < len(params.f_table):
        return int(params.f_table[p])
    return schedule_value(params.agent_id, "f", params.f, p)


def cumulative_pulls(params: FedMABParams, p: int) -> int:
    """``F(1, p) = f(1) + ... + f(p)``: pulls per agent of each still active arm after phase p."""
    if params.f_const is not None:
        return params.f_const * p
    last = len(params.cum_table) - 1
    if p <= last:
        return int(params.cum_table[p])
    return int(params.cum_table[last]) + sum(
        pulls_per_arm(params, q) for q in range(last + 1, p + 1)
    )


def fed_mab_params(
    agent_id: str,
    config: Any,
    facts: FederationFacts,
    f: Schedule,
    check_channel: Callable[[dict[str, Any]], None] | None = None,
) -> FedMABParams:
    """The :class:`FedMABParams` of a learner (``agent_id``, its validated ``config`` and its
    pull schedule ``f``) on a federation; checks the family, the ``server`` channel (aggregate
    ``"mean"``, participation 1, no drops, then the learner's own ``check_channel`` of the
    channel's options) and f at phase 1 and at every phase the horizon can reach. Pure: the
    numpy ``reset`` and the JAX ``make_params`` call it (through
    :func:`agents.fed1_ucb.fed1_params`, :func:`agents.fed2_ucb.fed2_params`)."""
    require_family(agent_id, facts, MULTI_ARMED)
    N, K, T = facts.num_agents, facts.num_arms, facts.horizon
    check_channel_spec(agent_id, fed_channel_spec(K), facts)
    have = facts.channels[CHANNEL]
    check_server(agent_id, have)
    if check_channel is not None:
        check_channel(have)
    join = have.get("join_round")
    join_round = np.zeros(N, dtype=np.int64) if join is None else np.asarray(join)
    log_T = math.log(max(T, 2))
    f_const = None if callable(f) else schedule_value(agent_id, "f", f, 1)
    table, cum = [0], 0
    while f_const is None and cum <= T:  # f(p) of every phase the horizon can reach
        table.append(schedule_value(agent_id, "f", f, len(table)))
        cum += table[-1]
    f_table = np.asarray(table, dtype=np.int64)
    cum_table = np.cumsum(f_table)
    no_before = np.zeros(N, dtype=np.int64)
    params = FedMABParams(
        agent_id, N, K, T, log_T, join_round, f, f_const, f_table, cum_table, no_before, config
    )
    before = [cumulative_pulls(params, int(r)) for r in join_round]  # F(1, c_i - 1)
    return replace(params, before=np.asarray(before, dtype=np.int64))


def current_arm(active: Any, pos: Any) -> Any:
    """The arm of the next pull (...,): active arm number ``pos mod |active|`` in ascending
    order (round-robin; the committed arm once one is left), for ``active`` (..., K) and
    ``pos`` (...). Both engines call it."""
    xp = namespace(active, pos)
    n_active = active.sum(axis=-1)
    target = pos % xp.maximum(n_active, 1)
    rank = xp.cumsum(active, axis=-1) - 1
    return xp.argmax(active & (rank == target[..., None]), axis=-1)


def survivors(active: Any, mean: Any, width: Any) -> Any:
    """The elimination rule on the server's average ``mean`` (..., K): keep the active arms
    but those with ``mean_k + B < max_{j active} mean_j - B`` (``width`` B broadcast against
    (..., 1)). Both engines call it."""
    xp = namespace(active, mean)
    best = xp.max(xp.where(active, mean, -xp.inf), axis=-1, keepdims=True)
    return active & ~(mean + width < best - width)


class FedMABBase(TeamPolicy):
    """Batched Fed1-/Fed2-UCB phase machine over B runs and N agents (module docstring).

    Subclasses give their params (:meth:`make_params`, with the pull schedule and any limit on
    the server channel) and the width (:meth:`width`)."""

    payload_layouts = {CHANNEL: "arm_means"}  # the local sample mean of every arm (0: eliminated)

    def __init__(self, config: Any):
        self.config = config
        self.sigma, self.width_scale = config.sigma, config.width_scale

    def channel_spec(self, config):
        return fed_channel_spec(config.num_arms)

    # ------------------------------------------------------------------ hooks
    def make_params(self, facts: FederationFacts) -> FedMABParams:
        """The learner's :class:`FedMABParams` on a federation (checks the facts)."""
        raise NotImplementedError

    def width(self, p: np.ndarray, runs: np.ndarray) -> np.ndarray:
        """The confidence width B (len(runs),) of the runs ``runs`` after phase ``p`` of each."""
        raise NotImplementedError

    def pulls_per_arm(self, p: int) -> int:
        """``f(p)``: pulls per active arm in phase p (the algorithm's schedule)."""
        return pulls_per_arm(self.params, p)

    # ------------------------------------------------------------------ reset
    def reset(self, facts: FederationFacts, rng: BatchedRNG) -> None:
        """Phase 1 with every arm active, zero local statistics, the join schedule of the
        server channel (none: every client from phase 1)."""
        self.params = p = self.make_params(facts)  # checks the facts
        B, N, K = facts.num_runs, facts.num_agents, facts.num_arms
        self.join_round = p.join_round
        self.num_arms, self.horizon = K, facts.horizon
        self.log_T = p.log_T
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
        self._b, self._i = np.indices((B, N))
        self._zeros = np.zeros((B, N, K))
        self._no_send = np.zeros((B, N), dtype=bool)

    def cumulative_pulls(self, p: int) -> int:
        """F(1, p) = f(1) + ... + f(p): pulls per agent of each still active arm after phase p."""
        return cumulative_pulls(self.params, p)

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
        """(B,) the arm of the next pull (:func:`current_arm`)."""
        return current_arm(self.active, self.pos).astype(np.int64)

    def _eliminate(self, reply: Any, runs: np.ndarray) -> None:
        """The server's average of the phase's uploads: the elimination rule, the next phase."""
        idx = np.flatnonzero(runs)
        width = self.width(self.phase[idx], idx)[:, None]  # the clients of the phase just ended
        self.rounds[idx] += reply.count[idx] > 0
        self.num_phases[idx] += 1
        active = survivors(self.active[idx], reply.aggregate[idx], width)
        self.active[idx] = active
        self.committed[idx] = active.sum(axis=1) == 1
        self.phase[idx] += 1
        self.pos[idx] = 0
        f = np.array([self.pulls_per_arm(int(p)) for p in self.phase[idx]], dtype=np.int64)
        self.length[idx] = f * active.sum(axis=1)
