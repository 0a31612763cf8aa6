"""DDP-MAB (Algorithm 3) over the GIS flood (Algorithm 2; docs/commeff.md).

Decentralized: in the round's upload step every agent floods ``ybar_i`` over the env's ``flood``
channel (ttl >= diameter; ``cost_model="gis"`` counts every edge that carried a message in each
hop of Algorithm 2). Hop h arrives h - 1 slots after the upload (the first hop is free), so after the upload step and ``d_G - 1`` delay slots every agent
holds all M vectors; it averages them itself (the running means ``ybar``) and eliminates. All
agents hold identical data, hence identical active sets. During the upload and delay slots agents
play their local greedy arm. Timing: under ``timing="paper"`` the upload is a communication
step (the free first hop) and only the ``d_G - 1`` delay slots are pulled; ``"latency"``
adds the upload slot (see :mod:`agents.commeff.base`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from agents.commeff.base import (
    EliminationParams,
    EliminationTeam,
    check_no_drop,
    elimination_params,
    flood_average,
)
from agents.commeff.config import EliminationConfig
from fedbandit_env.config import EnvConfig
from fedbandit_env.engine import VecObservation
from fedbandit_env.errors import ConfigError
from fedbandit_env.policy import FederationFacts, require_channel

AGENT_ID = "ddp_mab"
VERSION = 2  # results version: the paper's timing by default (communication-only steps)
CHANNEL = "flood"


def ddp_channel_spec(num_arms: int) -> dict[str, dict[str, Any]]:
    """The ``flood`` channel (dim K, GIS cost)."""
    return {CHANNEL: {"kind": "flood", "dim": num_arms, "cost_model": "gis"}}


def _bind(config: EliminationConfig, facts: FederationFacts) -> tuple[int, int]:
    """The flood channel (kind, dim, ttl >= the diameter, no drops) on one connected graph of
    >= 2 agents: N_eff = M, delay d_G - 1."""
    aid = config.agent_id
    require_channel(aid, facts, CHANNEL, "flood", facts.num_arms)
    topo = facts.topology
    if topo.num_components != 1 or facts.num_agents < 2:
        raise ConfigError(
            f"{aid}: topology: expected one connected graph of >= 2 agents, got "
            f"{topo.num_components} component(s) of sizes {list(topo.component_sizes)}"
        )
    ttl = int(facts.channels[CHANNEL]["ttl"])
    if ttl < topo.diameter:
        raise ConfigError(
            f"{aid}: channels.flood.ttl: expected >= the diameter {topo.diameter} "
            f"(GIS must reach every agent), got {ttl}"
        )
    check_no_drop(aid, facts, CHANNEL)
    return facts.num_agents, topo.diameter - 1


def ddp_params(config: EliminationConfig, facts: FederationFacts) -> EliminationParams:
    """DDP-MAB's :class:`~agents.commeff.base.EliminationParams` on a federation (pure: the
    numpy ``reset`` and the JAX ``make_params`` call it)."""
    return elimination_params(config, facts, CHANNEL, _bind)


class DDPMAB(EliminationTeam):
    """DDP-MAB (optionally with a round budget, Cor. 1), id ``ddp_mab``."""

    agent_id = AGENT_ID
    version = VERSION
    channel_name = CHANNEL

    def channel_spec(self, config: EnvConfig):
        return ddp_channel_spec(config.num_arms)

    def make_params(self, facts: FederationFacts) -> EliminationParams:
        return ddp_params(self.config, facts)

    def _reset_channel(self, facts: FederationFacts) -> None:
        B, N, K = facts.num_runs, facts.num_agents, facts.num_arms
        self.recv_sum = np.zeros((B, N, K))
        self.recv_count = np.zeros((B, N), dtype=np.int64)

    def _receive(self, obs: VecObservation) -> None:
        d = obs.deliveries[CHANNEL]
        if len(d.run):
            np.add.at(self.recv_sum, (d.run, d.receiver), d.payload)
            np.add.at(self.recv_count, (d.run, d.receiver), 1)

    def _aggregate(self, obs: VecObservation, ready: np.ndarray) -> np.ndarray:
        return flood_average(self.ybar, self.recv_sum, self.recv_count)

    def _messages(self, upload: np.ndarray):
        self.recv_sum[upload] = 0.0
        self.recv_count[upload] = 0
        return {CHANNEL: (upload, self.ybar.copy())}
