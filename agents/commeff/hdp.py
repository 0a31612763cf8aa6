"""HDP-MAB (Algorithm 5) over the hierarchical channel (Algorithm 4 finds the sinks;
docs/commeff.md).

Hybrid: in the round's upload step every agent sends ``ybar_i`` on the env's ``hierarchical``
channel; it travels to its component's sink (SAC, sinks at the component centres, FindSinkAgents),
each sink averages its component, uploads to the server, which combines (``"weighted"`` by
default = the all-agent mean, or the printed ``"unweighted"`` mean of component means) and
broadcasts to every agent after ``max(0, max_q ecc(SA_q) - 1)`` further slots (a global
barrier). Cost: ``"edges"`` model by default, ``"path"`` (Thm. 4) as option, plus ``c1 Q``.
``N_eff = M``. Greedy local play during the delay slots. Timing: the upload is a
communication step under ``timing="paper"`` and a greedy upload slot under ``"latency"``
(see :mod:`agents.commeff.base`).
"""

from __future__ import annotations

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

AGENT_ID = "hdp_mab"
VERSION = 2  # results version: the paper's timing by default (communication-only steps)
CHANNEL = "hierarchical"
AGGREGATIONS = ("weighted", "unweighted")
COST_MODELS = ("edges", "path")


@dataclass(frozen=True)
class HDPConfig(EliminationConfig):
    """:class:`~agents.commeff.config.EliminationConfig` plus the server's ``aggregation``
    (``"weighted"``: the all-agent mean; ``"unweighted"``: the mean of component means) and the
    channel's ``cost_model`` (``"edges"`` or ``"path"``)."""

    aggregation: str = "weighted"
    cost_model: str = "edges"

    def __post_init__(self) -> None:
        super().__post_init__()
        aid = self.agent_id
        if not isinstance(self.aggregation, str) or self.aggregation not in AGGREGATIONS:
            raise ConfigError(
                f"{aid}: aggregation: expected one of {AGGREGATIONS}, got {self.aggregation!r}"
            )
        if not isinstance(self.cost_model, str) or self.cost_model not in COST_MODELS:
            raise ConfigError(
                f"{aid}: cost_model: expected one of {COST_MODELS}, got {self.cost_model!r}"
            )


def hdp_channel_spec(num_arms: int, aggregation: str, cost_model: str) -> dict[str, dict[str, Any]]:
    """The ``hierarchical`` channel (dim K, the server's combination, the cost model)."""
    return {
        CHANNEL: {
            "kind": "hierarchical",
            "dim": num_arms,
            "aggregate": aggregation,
            "cost_model": cost_model,
        }
    }


def _bind(config: HDPConfig, facts: FederationFacts) -> tuple[int, int]:
    """The hierarchical channel (kind, dim, a known aggregate, no drops): N_eff = M, the
    channel's delay."""
    aid = config.agent_id
    require_channel(aid, facts, CHANNEL, "hierarchical", facts.num_arms)
    desc = facts.channels[CHANNEL]
    if desc["aggregate"] not in AGGREGATIONS:
        raise ConfigError(
            f"{aid}: channels.hierarchical.aggregate: expected one of "
            f"{AGGREGATIONS}, got {desc['aggregate']!r}"
        )
    check_no_drop(aid, facts, CHANNEL)
    return facts.num_agents, int(desc["delay"])


def hdp_params(config: HDPConfig, facts: FederationFacts) -> EliminationParams:
    """HDP-MAB's :class:`~agents.commeff.base.EliminationParams` on a federation (pure: the
    numpy ``reset`` and the JAX ``make_params`` call it)."""
    return elimination_params(config, facts, CHANNEL, _bind)


class HDPMAB(EliminationTeam):
    """HDP-MAB (optionally with a round budget, Cor. 2), id ``hdp_mab``."""

    agent_id = AGENT_ID
    version = VERSION
    channel_name = CHANNEL

    def __init__(
        self,
        epsilon: float = 1.0,
        privacy: str = "paper",
        rounds: int | None = None,
        delta: float | Sequence[float] | None = None,
        aggregation: str = "weighted",
        cost_model: str = "edges",
        timing: str = "paper",
    ):
        self.config = HDPConfig(
            AGENT_ID, epsilon, privacy, rounds, delta, timing, aggregation, cost_model
        )

    @property
    def aggregation(self) -> str:
        return self.config.aggregation

    @property
    def cost_model(self) -> str:
        return self.config.cost_model

    def channel_spec(self, config: EnvConfig):
        return hdp_channel_spec(config.num_arms, self.config.aggregation, self.config.cost_model)

    def make_params(self, facts: FederationFacts) -> EliminationParams:
        return hdp_params(self.config, facts)
