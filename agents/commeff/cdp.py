"""CDP-MAB (Algorithm 1) and its communication-efficient variant (Sec. IV-B; docs/commeff.md).

Master-worker over the env's ``server`` channel (kind ``server``, aggregate ``"mean"``). Every
agent explores and privatises (see :mod:`agents.commeff.base`); in the round's upload step all
agents send ``ybar_i``, the server keeps the uploads of its ``N = ceil(p M)`` participants of that
step (a fresh uniform subset per step; the channel's ``participation`` option) and
broadcasts their mean; every agent eliminates with ``2 C(r)`` computed with ``N_eff = N``.
Round budget R (Sec. IV-B): ``tilde_r = delta^(r/R)`` with ``delta`` a required number (the
reproduction script passes the instance's oracle gap), commit to the best aggregate after round R
(docs/commeff.md, "Decisions"). Cost per round: ``c1 * N`` (the broadcast is free). Timing: the
round is one communication
step (``timing="paper"``: instantaneous) or one greedy upload slot (``"latency"``), see
:mod:`agents.commeff.base`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from agents.commeff.base import (
    EliminationParams,
    EliminationTeam,
    check_no_drop,
    elimination_params,
)
from agents.commeff.config import EliminationConfig
from fedbandit_env.config import EnvConfig
from fedbandit_env.errors import ConfigError
from fedbandit_env.policy import FederationFacts, require_channel
from fedbandit_env.validation import check_probability

AGENT_ID = "cdp_mab"
VERSION = 2  # results version: the paper's timing by default (communication-only steps)
CHANNEL = "server"


@dataclass(frozen=True)
class CDPConfig(EliminationConfig):
    """:class:`~agents.commeff.config.EliminationConfig` plus ``participation`` p in (0, 1]
    (None: the channel's; the server keeps ceil(p M) uploads per round)."""

    participation: float | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        p = self.participation
        if p is not None:
            try:
                p = check_probability("participation", p)
            except ConfigError as err:
                raise ConfigError(f"{self.agent_id}: {err}") from None
            if p == 0.0:
                raise ConfigError(f"{self.agent_id}: participation: expected p in (0, 1], got 0")
            object.__setattr__(self, "participation", p)


def cdp_channel_spec(num_arms: int, participation: float | None) -> dict[str, dict[str, Any]]:
    """The ``server`` channel (dim K, the mean of the participants, participation p: 1 when
    None)."""
    p = 1.0 if participation is None else participation
    return {CHANNEL: {"kind": "server", "dim": num_arms, "aggregate": "mean", "participation": p}}


def _bind(config: CDPConfig, facts: FederationFacts) -> tuple[int, int]:
    """The server channel (kind, dim, the ``"mean"`` aggregate, no drops, the agent's p if
    given): N_eff = ceil(p M), no delay."""
    aid = config.agent_id
    require_channel(aid, facts, CHANNEL, "server", facts.num_arms)
    desc = facts.channels[CHANNEL]
    if desc["aggregate"] != "mean":
        raise ConfigError(
            f"{aid}: channels.server.aggregate: expected 'mean', got {desc['aggregate']!r}"
        )
    check_no_drop(aid, facts, CHANNEL)
    p = float(desc["participation"])
    if config.participation is not None and p != config.participation:
        raise ConfigError(
            f"{aid}: participation: the agent was given p={config.participation} but "
            f"channels.server.participation is {p}; expected them equal"
        )
    return math.ceil(p * facts.num_agents), 0


def cdp_params(config: CDPConfig, facts: FederationFacts) -> EliminationParams:
    """CDP-MAB's :class:`~agents.commeff.base.EliminationParams` on a federation (pure: the
    numpy ``reset`` and the JAX ``make_params`` call it)."""
    return elimination_params(config, facts, CHANNEL, _bind)


class CDPMAB(EliminationTeam):
    """CDP-MAB / CE-CDP-MAB (``rounds``, ``delta``, ``participation``), id ``cdp_mab``."""

    agent_id = AGENT_ID
    version = VERSION
    channel_name = CHANNEL

    def __init__(
        self,
        epsilon: float = 1.0,
        privacy: str = "paper",
        rounds: int | None = None,
        delta: float | Sequence[float] | None = None,
        participation: float | None = None,
        timing: str = "paper",
    ):
        self.config = CDPConfig(AGENT_ID, epsilon, privacy, rounds, delta, timing, participation)

    @property
    def participation(self) -> float | None:
        return self.config.participation

    def channel_spec(self, config: EnvConfig):
        return cdp_channel_spec(config.num_arms, self.config.participation)

    def make_params(self, facts: FederationFacts) -> EliminationParams:
        return cdp_params(self.config, facts)
