"""The pytrees that cross the JAX environment's boundary (docs/jax.md).

One run, unbatched: the rollout ``vmap``s over runs. Arrays are int32 for ids and counts and
float32 for rewards and payloads.
"""

from __future__ import annotations

from typing import Annotated, Any, NamedTuple

import jax.numpy as jnp

# the phases, defined once in the engine and re-exported here
from fedbandit_env.engine import COMMUNICATION as COMMUNICATION
from fedbandit_env.engine import PULL as PULL
from fedbandit_env.jax.accumulate import Count, Total
from fedbandit_env.shapes import AgentArms, AgentContexts, AgentPayload, Agents, Scalar


class Charge(NamedTuple):
    """What one channel transmitted in one step, per link type (agent-agent, agent-server):
    ``messages`` and ``floats`` (2,) int32, ``cost`` (2,) float32, ``dropped`` () int32."""

    messages: jnp.ndarray
    floats: jnp.ndarray
    cost: jnp.ndarray
    dropped: jnp.ndarray


def zero_charge() -> Charge:
    return Charge(
        jnp.zeros(2, jnp.int32), jnp.zeros(2, jnp.int32), jnp.zeros(2, jnp.float32),
        jnp.zeros((), jnp.int32),
    )  # fmt: skip


def link_charge(link: int, messages: jnp.ndarray, dim: int, cost: jnp.ndarray,
                dropped: jnp.ndarray) -> Charge:  # fmt: skip
    """The charge of ``messages`` messages of ``dim`` floats on one link type."""
    messages = jnp.asarray(messages, jnp.int32)
    onehot = jnp.arange(2) == link
    return Charge(
        jnp.where(onehot, messages, 0),
        jnp.where(onehot, messages * dim, 0),
        jnp.where(onehot, jnp.asarray(cost, jnp.float32), 0.0),
        jnp.asarray(dropped, jnp.int32),
    )


class Ledger(NamedTuple):
    """Cumulative communication of one run: ``messages``/``floats`` (2,) exact counts, ``cost``
    (2,) compensated sums, ``dropped`` () exact count; ``step`` the last step's charge."""

    messages: Count
    floats: Count
    cost: Total
    dropped: Count
    step: Charge


class Action(NamedTuple):
    """The team's action in one run: ``arms`` (N,) int32, ``messages`` {channel: (send (N,)
    bool, payload (N, dim) float32)} (a missing channel: nobody sends on it) and ``pull`` ()
    bool (False: a communication-only step)."""

    arms: Agents
    messages: dict[str, tuple[Agents, AgentPayload]]
    pull: Scalar = True


class Observation(NamedTuple):
    """What the agents observe after a step of one run: ``step`` engine steps so far,
    ``last_arm`` (N,) (-1 before the first pull), ``last_reward`` (N,), one delivery per channel,
    the linear family's decision sets ``context`` (N, K, d) of the next step (None otherwise),
    ``phase`` (:data:`PULL` or :data:`COMMUNICATION`) and ``pulls`` the pulls so far. Under an
    event clock (docs/time.md, "clock"; None under lock-step): ``active`` (N,) bool the client
    that pulls at the next step, ``pulled`` (N,) bool the clients that pulled at this step and
    ``time`` () the next event's time stamp. With a reward delay (None without): ``arrived_arm``
    (N,) the arm of the pull whose reward arrives now (-1: none) and ``arrived_reward`` (N,);
    ``last_reward`` is then 0 (docs/time.md, "reward_delay")."""

    step: Scalar
    last_arm: Agents
    last_reward: Agents
    deliveries: dict[str, Any]
    context: AgentContexts | None
    phase: Scalar
    pulls: Scalar
    active: Any = None
    pulled: Any = None
    time: Any = None
    arrived_arm: Any = None
    arrived_reward: Any = None
    arrived_pull: Any = None


class EnvState(NamedTuple):
    """The whole state of one run (a pytree).

    ``means`` (N, M) the reward parameters and ``gap`` (M,) the global gaps (multi-armed
    families); ``theta`` (d,) and ``context`` (N, K, d) (linear family); ``counts`` (N, M) int32
    pulls per agent and arm (the multi-armed regret is ``counts @ gap``, exact); ``regret``
    (N,) the linear family's compensated regret sums; ``error`` (3,) int32: the first bad input
    seen inside ``jit`` (code, step, agent; code 0: none, docs/jax.md "Errors"); ``drift`` a
    drift's own state (the linear family's smooth drift: theta*(0) and its plane vector u, (2, d);
    None otherwise, docs/time.md); ``clock`` an event clock's :class:`ClockState` (None under
    lock-step)."""

    step: Scalar
    pulls: Scalar
    streak: Scalar
    last_arm: Agents
    last_reward: Agents
    means: AgentArms | None
    gap: Annotated[Any, "(M,)"]
    theta: Annotated[Any, "(d,)"]
    context: AgentContexts | None
    counts: AgentArms
    regret: Total
    channels: dict[str, Any]
    ledger: Ledger
    error: jnp.ndarray
    drift: Any = None
    clock: Any = None
    delay: Any = None  # a reward delay's line: (arms (d, N) int32, rewards (d, N) float32)
    pool: Any = None  # the linear family's pool of arms (P, d) with arms={"kind": "pool"}
    latency: Any = None  # the deliveries in flight: each channel's record, stacked (L, ...)
    churn: Any = None  # (N,) bool the clients present at the next (or current) pull, docs/time.md


class ClockState(NamedTuple):
    """An event clock's state in one run (docs/time.md, "clock"): ``active`` (N,) bool the
    client of the next event, ``time`` () float32 its time stamp, ``event`` () int32 the events
    drawn so far and ``rates`` (N,) float32 the clients' rates after the stragglers."""

    active: Agents
    time: Scalar
    event: Scalar
    rates: Agents
