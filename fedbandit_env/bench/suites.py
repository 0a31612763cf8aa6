"""Suites: named sets of cells (environment + kwargs, learner + kwargs, runs, horizon).

DESIGN.md §5. A cell's identity is the SHA-256 of its canonical JSON (env id and kwargs with the
horizon, agent id and kwargs): the results store keys rows by (cell hash, seed). Suites are
defined by ids, so learners added later by other packages are picked up by ``standard``; a cell
whose env or agent id is not registered in this installation is skipped with a note.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from fedbandit_env.agent_registry import list_agents
from fedbandit_env.errors import ConfigError, UnknownIdError
from fedbandit_env.registration import list_envs


def _canonical(value: Any) -> Any:
    """JSON-able canonical form (inf as a string, tuples as lists, sorted dict keys)."""
    if isinstance(value, float) and math.isinf(value):
        return "inf" if value > 0 else "-inf"
    if isinstance(value, dict):
        return {str(k): _canonical(v) for k, v in sorted(value.items())}
    if isinstance(value, list | tuple):
        return [_canonical(v) for v in value]
    return value


@dataclass(frozen=True)
class Cell:
    """One (environment, learner) configuration evaluated on ``runs`` seeds from ``seed``."""

    env_id: str
    agent_id: str
    horizon: int
    runs: int = 10
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    agent_kwargs: dict[str, Any] = field(default_factory=dict)
    seed: int = 0
    label: str = ""

    def __post_init__(self) -> None:
        for name in ("horizon", "runs"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"cell.{name}: expected a positive int, got {value!r}")

    @property
    def config(self) -> dict[str, Any]:
        return _canonical(
            {
                "env_id": self.env_id,
                "env_kwargs": {**self.env_kwargs, "horizon": self.horizon},
                "agent_id": self.agent_id,
                "agent_kwargs": self.agent_kwargs,
            }
        )

    @property
    def config_hash(self) -> str:
        text = json.dumps(self.config, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    @property
    def name(self) -> str:
        return self.label or self.agent_id

    @property
    def env_key(self) -> str:
        """The environment part of the config: cells with the same key are ranked together."""
        env = {"env_id": self.env_id, "env_kwargs": self.config["env_kwargs"]}
        return json.dumps(env, sort_keys=True)

    @property
    def seeds(self) -> list[int]:
        return list(range(self.seed, self.seed + self.runs))


@dataclass(frozen=True)
class Suite:
    """A named list of cells; ``baseline`` is the agent id regrets are normalized to."""

    name: str
    cells: tuple[Cell, ...]
    baseline: str = "ucb1"
    description: str = ""

    def available(self, note: Callable[[str], None] = print) -> list[Cell]:
        """The cells whose env and agent ids are registered here; the others are noted."""
        envs, agents = set(list_envs()), set(list_agents())
        out = []
        for cell in self.cells:
            missing = [
                i
                for i, ok in (
                    (cell.env_id, cell.env_id in envs),
                    (cell.agent_id, cell.agent_id in agents),
                )
                if not ok
            ]
            if missing:
                note(
                    f"suite {self.name}: skipping {cell.name} on {cell.env_id}: {missing} "
                    "not registered in this installation"
                )
            else:
                out.append(cell)
        return out


def _grid(env_id, env_kwargs, agents, horizon, runs, env_label="") -> tuple[Cell, ...]:
    cells = []
    for agent in agents:
        agent_id, kwargs, label = agent if isinstance(agent, tuple) else (agent, {}, "")
        cells.append(
            Cell(
                env_id,
                agent_id,
                horizon,
                runs,
                dict(env_kwargs),
                dict(kwargs),
                label=label or agent_id,
            )
        )
    return tuple(cells)


HETERO_SMALL = {"num_agents": 5, "num_arms": 5, "topology": "ring", "instance": "gossip"}
HOMO_SMALL = {"num_agents": 5, "num_arms": 5, "topology": "ring"}

QUICK_AGENTS = (
    "uniform",
    "ucb1",
    "ucb1_shared",
    "thompson_beta_shared",
    "gossip_ucb",
    ("gossip_fed_ucb", {"epsilon": 5.0}, "gossip_fed_ucb eps=5"),
    "centralized_ucb1",
)
QUICK_HOMO_AGENTS = (
    "uniform",
    "ucb1",
    "kl_ucb_shared",
    ("cdp_mab", {"epsilon": 1.0}, ""),
    ("dp_mw_ucb", {"epsilon": 2.0}, ""),
    ("dp_dec_ucb", {"epsilon": 2.0}, ""),
)

BASELINES = (
    "uniform",
    "flooding",
    "epsilon_greedy",
    "ucb1",
    "kl_ucb",
    "thompson_beta",
    "thompson_gaussian",
    "epsilon_greedy_shared",
    "ucb1_shared",
    "kl_ucb_shared",
    "thompson_beta_shared",
    "thompson_gaussian_shared",
    "centralized_ucb1",
)
MAB_REFERENCE = (
    "gossip_ucb",
    ("gossip_fed_ucb", {"epsilon": 2.0}, "gossip_fed_ucb eps=2"),
    ("dp_mw_ucb", {"epsilon": 2.0}, ""),
    ("dp_dec_ucb", {"epsilon": 2.0}, ""),
    ("cdp_mab", {"epsilon": 1.0}, ""),
    ("ddp_mab", {"epsilon": 1.0}, ""),
)
LINEAR_AGENTS = (
    "linucb",
    "centralized_linucb",
    ("fed_lin_ucb", {"epsilon": 1.0}, ""),
    ("fed_lin_ucb", {"private": False}, "fed_lin_ucb non-private"),
    ("fed_lin_ucb_decentralized", {"epsilon": 1.0, "gamma": 1}, ""),
)

SUITES: dict[str, Suite] = {
    "quick": Suite(
        "quick",
        _grid("FedBandit/Heterogeneous-v0", HETERO_SMALL, QUICK_AGENTS, 2000, 10)
        + _grid("FedBandit/Homogeneous-v0", HOMO_SMALL, QUICK_HOMO_AGENTS, 2000, 10),
        description="Two small cells (heterogeneous ring, homogeneous ring), 10 seeds, T=2000.",
    ),
    "standard": Suite(
        "standard",
        _grid(
            "FedBandit/Heterogeneous-v0",
            {**HETERO_SMALL, "num_agents": 10, "num_arms": 10},
            BASELINES + MAB_REFERENCE,
            10_000,
            20,
        )
        + _grid(
            "FedBandit/Homogeneous-v0",
            {**HOMO_SMALL, "num_agents": 10, "num_arms": 10},
            BASELINES + MAB_REFERENCE,
            10_000,
            20,
        )
        + _grid("FedBandit/LinearContextual-v0", {"num_agents": 10}, LINEAR_AGENTS, 10_000, 20),
        description="All families, every reference agent and baseline, 20 seeds, T=10^4.",
    ),
    "gossip": Suite(
        "gossip",
        _grid(
            "FedBandit/GossipTriangle-v0",
            {},
            ("gossip_ucb", "ucb1", "centralized_ucb1")
            + tuple(
                ("gossip_fed_ucb", {"epsilon": e}, f"gossip_fed_ucb eps={e:g}")
                for e in (1.0, 2.0, 5.0)
            ),
            100_005,
            20,
        ),
        description="Gossip paper setting (a), T = 10^5 rounds.",
    ),
    "dp_recsys": Suite(
        "dp_recsys",
        _grid(
            "FedBandit/Homogeneous-v0",
            {
                "num_agents": 20,
                "num_arms": 10,
                "topology": "ring",
                "reward": {"kind": "gaussian", "sigma": 0.1},
            },
            ("ucb1", "ucb1_shared")
            + tuple(
                ("dp_dec_ucb", {"epsilon": e}, f"dp_dec_ucb eps={e:g}") for e in (1.5, 2.0, 5.0)
            )
            + tuple(("dp_mw_ucb", {"epsilon": e}, f"dp_mw_ucb eps={e:g}") for e in (1.5, 2.0, 5.0)),
            10_000,
            10,
        ),
        description="DP recommender paper: M=20, K=10, cycle C20.",
    ),
    "linear": Suite(
        "linear",
        _grid(
            "FedBandit/LinearContextual-v0",
            {"num_agents": 20, "dim": 10, "num_arms": 10},
            ("linucb", "centralized_linucb")
            + tuple(
                (
                    "fed_lin_ucb",
                    {"epsilon": e, "beta_scale": 0.01},
                    f"fed_lin_ucb eps={e:g} beta_scale=0.01",
                )
                for e in (0.1, 1.0, 10.0)
            )
            + (
                (
                    "fed_lin_ucb",
                    {"private": False, "beta_scale": 0.01},
                    "fed_lin_ucb non-private beta_scale=0.01",
                ),
            ),
            5000,
            10,
        ),
        baseline="linucb",
        description="DP federated linear bandits: M=20, d=10, K=10, T=5000, beta_scale=0.01.",
    ),
    "commeff": Suite(
        "commeff",
        _grid(
            "FedBandit/Homogeneous-v0",
            {"num_agents": 50, "num_arms": 100, "topology": "star", "c1": 25.0},
            ("ucb1",)
            + tuple(("cdp_mab", {"epsilon": e}, f"cdp_mab eps={e:g}") for e in (0.1, 0.5, 1.0))
            + (("ddp_mab", {"epsilon": 1.0}, "ddp_mab eps=1 (star)"),),
            10_000,
            5,
        ),
        description="Commeff paper: M=50, K=100, T=10^4 (Fig. 4 and the star of Fig. 10).",
    ),
}


def get_suite(name: str) -> Suite:
    if name not in SUITES:
        raise UnknownIdError(f"suite {name!r} is not defined; suites: {sorted(SUITES)}")
    return SUITES[name]
