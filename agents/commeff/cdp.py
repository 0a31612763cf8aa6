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

import numpy as np

from agents.commeff.base import EliminationTeam
from fedbandit_env.config import EnvConfig
from fedbandit_env.engine import VecObservation
from fedbandit_env.errors import ConfigError
from fedbandit_env.network.base import check_probability
from fedbandit_env.policy import FederationFacts


class CDPMAB(EliminationTeam):
    """CDP-MAB / CE-CDP-MAB (``rounds``, ``delta``, ``participation``), id ``cdp_mab``."""

    agent_id = "cdp_mab"
    version = 2  # results version: the paper's timing by default (communication-only steps)
    channel_name = "server"

    def __init__(
        self,
        epsilon: float = 1.0,
        privacy: str = "paper",
        rounds: int | None = None,
        delta: float | Sequence[float] | None = None,
        participation: float | None = None,
        timing: str = "paper",
    ):
        super().__init__(epsilon, privacy, rounds, delta, timing)
        if participation is not None:
            try:
                participation = check_probability("participation", participation)
            except ConfigError as err:
                raise ConfigError(f"{self.agent_id}: {err}") from None
            if participation == 0.0:
                raise ConfigError(f"{self.agent_id}: participation: expected p in (0, 1], got 0")
        self.participation = participation

    def channel_spec(self, config: EnvConfig):
        p = 1.0 if self.participation is None else self.participation
        return {
            "server": {
                "kind": "server",
                "dim": config.num_arms,
                "aggregate": "mean",
                "participation": p,
            }
        }

    def _bind(self, facts: FederationFacts) -> tuple[int, int]:
        self.require_channel(facts, "server", "server", facts.num_arms)
        desc = facts.channels["server"]
        if desc["aggregate"] != "mean":
            raise ConfigError(
                f"{self.agent_id}: channels.server.aggregate: expected 'mean', got "
                f"{desc['aggregate']!r}"
            )
        self._check_channel_drop(facts)
        p = float(desc["participation"])
        if self.participation is not None and p != self.participation:
            raise ConfigError(
                f"{self.agent_id}: participation: the agent was given p={self.participation} but "
                f"channels.server.participation is {p}; expected them equal"
            )
        return math.ceil(p * facts.num_agents), 0

    def _aggregate(self, obs: VecObservation, ready: np.ndarray) -> np.ndarray:
        delivery = obs.deliveries["server"]
        return np.broadcast_to(delivery.aggregate[:, None, :], self.ybar.shape)

    def _messages(self, upload: np.ndarray):
        return {"server": (upload, self.ybar.copy())}
