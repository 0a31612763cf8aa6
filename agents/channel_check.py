"""The channels a reference agent needs, read from its own ``channel_spec``.

An agent states its channels once, in ``channel_spec(config)``. :func:`check_channels` compares
the environment's channels (``facts.channels``) with that statement before the first step, so
no agent keeps a second list of names, kinds and sizes. The ``channel_spec`` of the agents in
this package reads only ``num_agents``, ``num_arms``, ``linear.dim`` and
``adversary.num_byzantine`` (the declared bound f) of the configuration; :func:`spec_inputs`
rebuilds these from the federation's facts.

Compared: every channel the spec names must exist with the same ``kind`` and ``dim``, with the
same value of the options that change what a delivery means (:data:`MEANINGFUL`) and with at
least the reach the spec asks for (:data:`AT_LEAST`). Options
that only choose a delivery format (``reduce``: a padded ``neighbors`` delivery gives the same
numbers), schedules the agent adapts to (``join_round``) and other limits an algorithm puts on a
channel (full participation, no drops) are the agent's own business.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

from fedbandit_env.errors import ConfigError
from fedbandit_env.policy import FederationFacts, TeamPolicy, require_channel

MEANINGFUL: dict[str, Any] = {"aggregate": "mean", "mode": "edge", "reply": "broadcast"}
"""Options compared with the environment's, with the value a channel has when it names none."""
AT_LEAST: dict[str, Any] = {"ttl": 0}
"""Options the environment's channel must have at least as large as the spec's (a flood
channel's ``ttl``: messages must travel at least that far), with their value when not named."""


@dataclass(frozen=True)
class SpecInputs:
    """The fields of an environment configuration that ``channel_spec`` reads."""

    num_agents: int
    num_arms: int
    linear: Any
    adversary: Any = None


def spec_inputs(facts: FederationFacts) -> SpecInputs:
    """``num_agents``, ``num_arms``, ``linear.dim`` (None outside the linear family) and
    ``adversary.num_byzantine`` (None without a declared Byzantine bound)."""
    linear = SimpleNamespace(dim=int(facts.extra["dim"])) if facts.family == "linear" else None
    bound = facts.byzantine_bound
    adversary = SimpleNamespace(num_byzantine=bound) if bound else None
    return SpecInputs(facts.num_agents, facts.num_arms, linear, adversary)


def check_channels(policy: TeamPolicy, facts: FederationFacts) -> None:
    """Raise a :class:`ConfigError` naming the agent and the channel if the environment lacks a
    channel of ``policy.channel_spec`` or has it with another kind, size or meaning."""
    check_channel_spec(policy.agent_id, policy.channel_spec(spec_inputs(facts)), facts)


def check_channel_spec(aid: str, spec: dict[str, Any] | None, facts: FederationFacts) -> None:
    """:func:`check_channels` for a learner ``aid`` whose channel spec (on these facts) is
    ``spec``: what a pure params function calls, with no learner object at hand."""
    for name, want in (spec or {}).items():
        require_channel(aid, facts, name, want["kind"], want["dim"])  # present, kind and dim
        have = facts.channels[name]
        for key, default in MEANINGFUL.items():
            if key in want and have.get(key, default) != want[key]:
                raise ConfigError(
                    f"{aid}: channels.{name}: expected {key} {want[key]!r}, got {key} "
                    f"{have.get(key, default)!r}"
                )
        for key, default in AT_LEAST.items():
            if key in want and have.get(key, default) < want[key]:
                raise ConfigError(
                    f"{aid}: channels.{name}: expected {key} >= {want[key]!r}, got {key} "
                    f"{have.get(key, default)!r}"
                )


def check_every_upload_counts(aid: str, facts: FederationFacts, names: tuple[str, ...],
                              why: str) -> None:  # fmt: skip
    """Refuse, naming the agent and the channel, a channel of ``names`` that may lose or refuse
    a message (participation below 1, drops, a join schedule): the agent's sums need all
    (``why`` says why)."""
    for name in names:
        ch = facts.channels[name]
        if (
            ch.get("participation", 1.0) != 1.0
            or ch.get("drop_prob", 0.0) != 0.0
            or ch.get("join_round") is not None
        ):
            raise ConfigError(
                f"{aid}: channels.{name}: expected participation 1, no drops and no join "
                f"schedule ({why})"
            )
