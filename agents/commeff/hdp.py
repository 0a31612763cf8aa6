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

import numpy as np

from agents.commeff.base import EliminationTeam
from fedbandit_env.config import EnvConfig
from fedbandit_env.engine import VecObservation
from fedbandit_env.errors import ConfigError
from fedbandit_env.policy import FederationFacts

AGGREGATIONS = ("weighted", "unweighted")
COST_MODELS = ("edges", "path")


class HDPMAB(EliminationTeam):
    """HDP-MAB (optionally with a round budget, Cor. 2), id ``hdp_mab``."""

    agent_id = "hdp_mab"
    version = 2  # results version: the paper's timing by default (communication-only steps)
    channel_name = "hierarchical"

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
        super().__init__(epsilon, privacy, rounds, delta, timing)
        if not isinstance(aggregation, str) or aggregation not in AGGREGATIONS:
            raise ConfigError(
                f"{self.agent_id}: aggregation: expected one of {AGGREGATIONS}, got {aggregation!r}"
            )
        if not isinstance(cost_model, str) or cost_model not in COST_MODELS:
            raise ConfigError(
                f"{self.agent_id}: cost_model: expected one of {COST_MODELS}, got {cost_model!r}"
            )
        self.aggregation = aggregation
        self.cost_model = cost_model

    def channel_spec(self, config: EnvConfig):
        return {
            "hierarchical": {
                "kind": "hierarchical",
                "dim": config.num_arms,
                "aggregate": self.aggregation,
                "cost_model": self.cost_model,
            }
        }

    def _bind(self, facts: FederationFacts) -> tuple[int, int]:
        self.require_channel(facts, "hierarchical", "hierarchical", facts.num_arms)
        desc = facts.channels["hierarchical"]
        if desc["aggregate"] not in AGGREGATIONS:
            raise ConfigError(
                f"{self.agent_id}: channels.hierarchical.aggregate: expected one of "
                f"{AGGREGATIONS}, got {desc['aggregate']!r}"
            )
        self._check_channel_drop(facts)
        return facts.num_agents, int(desc["delay"])

    def _aggregate(self, obs: VecObservation, ready: np.ndarray) -> np.ndarray:
        delivery = obs.deliveries["hierarchical"]
        return np.broadcast_to(delivery.aggregate[:, None, :], self.ybar.shape)

    def _messages(self, upload: np.ndarray):
        return {"hierarchical": (upload, self.ybar.copy())}
