"""Single-MAB baseline of Fig. 8 (docs/commeff.md): every agent runs the elimination alone.

``N_eff = 1`` in every formula, no communication, non-private by default (``epsilon = inf``:
nothing is released). Each agent eliminates with its own running mean ``ybar_i``. For uniformity
with the federated agents it keeps their round structure: a communication step that sends
nothing (``timing="paper"``) or one local-greedy slot (``"latency"``) per round (see
:mod:`agents.commeff.base`). Not registered: a baseline for the reproduction script.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from agents.commeff.base import EliminationParams, EliminationTeam, elimination_params
from agents.commeff.config import EliminationConfig
from fedbandit_env.engine import VecObservation
from fedbandit_env.policy import FederationFacts


def _bind(config: EliminationConfig, facts: FederationFacts) -> tuple[int, int]:
    return 1, 0  # alone: N_eff = 1, no channel, no delay


class SingleMAB(EliminationTeam):
    """Independent per-agent elimination (``N_eff = 1``, no messages)."""

    agent_id = "single_mab"
    version = 2  # results version: the paper's timing by default (communication-only steps)

    def __init__(
        self,
        epsilon: float = float("inf"),
        privacy: str = "paper",
        rounds: int | None = None,
        delta: float | Sequence[float] | None = None,
        timing: str = "paper",
    ):
        super().__init__(epsilon, privacy, rounds, delta, timing)

    def make_params(self, facts: FederationFacts) -> EliminationParams:
        return elimination_params(self.config, facts, "", _bind)

    def _aggregate(self, obs: VecObservation, ready: np.ndarray) -> np.ndarray:
        return self.ybar

    def _messages(self, upload: np.ndarray):
        return {}
