"""Presets of Demirel, Yıldırım & Tekin, "Federated Multi-Armed Bandits Under Byzantine Attacks" (arXiv 2205.04134).

The three scenarios of the authors' code (Fed-MoM-UCB_sce1.py, _sce2.py, _sce3.py), with the
client count, group size and Byzantine count that ``agents.fed_mom_ucb.derived_constants``
computes for each (docs/fed-mom-ucb.md, "Presets"):

| id | code | lambda, mapping | T | beta | C (c1) | attack | M, M_Z, B |
|---|---|---|---|---|---|---|---|
| ``FedBandit/Byzantine-FedMoM-Sce1-v0`` | sce1 | 0.2 arithmetic | 5e4 | omega + 0.05 | 1 | ``fedmom_sce1`` | 89, 17, 1 |
| ``FedBandit/Byzantine-FedMoM-Sce2-v0`` | sce2 | 0.2 arithmetic | 1e5 | 0.189 | 0.1 | ``fedmom_sce2`` | 92, 18, 1 |
| ``FedBandit/Byzantine-FedMoM-Sce3-v0`` | sce3 | 0.1 geometric | 5e4 | 0.11 | 0.1 | ``fedmom_sce1`` | 123, 12, 2 |

Common: K = 10 arms with generating means ``MU``, client local means drawn per run as
N(mu_k, 0.01^2) (``client_spread``, ``instance_seed=None``), regret against the generating
means, Gaussian rewards with sigma = 0.5, a ``server`` channel with the median-of-means
aggregate over groups of B consecutive clients, the Byzantine ids drawn with replacement
(``placement="code_fedmom"``). The other panels of the paper are keyword overrides: lambda =
0.25 in scenario 2 is ``num_agents=96`` with ``num_byzantine=24``; the harmonic and polynomial
mappings of scenario 3 are ``num_agents=193`` (B=2, M_Z=19) and ``num_agents=362`` (B=4,
M_Z=36) (``fedmom_preset`` builds them; the agent's keyword arguments per scenario are in
docs/fed-mom-ucb.md).
"""

from __future__ import annotations

from typing import Any

from fedbandit_env import registration

MU = (0.4, 0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.95)
"""The generating means mu_k of the authors' code (``mu_global``)."""
SIGMA, SIGMA_C = 0.5, 0.01

SCENARIOS: dict[int, dict[str, Any]] = {
    1: {
        "horizon": 50_000,
        "M": 89,
        "M_Z": 17,
        "B": 1,
        "beta": 0.1886,
        "C": 1.0,
        "attack": "fedmom_sce1",
    },
    2: {
        "horizon": 100_000,
        "M": 92,
        "M_Z": 18,
        "B": 1,
        "beta": 0.189,
        "C": 0.1,
        "attack": "fedmom_sce2",
    },
    3: {
        "horizon": 50_000,
        "M": 123,
        "M_Z": 12,
        "B": 2,
        "beta": 0.11,
        "C": 0.1,
        "attack": "fedmom_sce1",
    },
}
"""Each scenario of the authors' code: horizon, clients M, Byzantine draws M_Z, group size B,
the beta that decides which arms the attack treats as beta-optimal (scenario 1: omega + epsilon
= 0.18865, rounded; the same arms), the communication cost C per client and phase end, the
attack. M, M_Z and B are those ``agents.fed_mom_ucb.derived_constants`` gives (a test checks
it); the environment package does not import the agents."""


def fedmom_preset(
    scenario: int,
    *,
    horizon: int | None = None,
    num_agents: int | None = None,
    num_byzantine: int | None = None,
    group_size: int | None = None,
    beta: float | None = None,
) -> dict[str, Any]:
    """The environment keyword arguments of a scenario; the keywords replace the scenario's
    horizon, M, M_Z, B and the attack's beta (another panel of the paper: lambda = 0.25 in
    scenario 2, another mapping in scenario 3)."""
    s = SCENARIOS[scenario]
    M = s["M"] if num_agents is None else num_agents
    return {
        "family": "heterogeneous",
        "num_agents": M,
        "num_arms": len(MU),
        "horizon": s["horizon"] if horizon is None else horizon,
        "means": list(MU),
        "client_spread": SIGMA_C,
        "global_means": "generating",
        "instance_seed": None,
        "reward": {"kind": "gaussian", "sigma": SIGMA},
        "topology": "star",
        "channels": {
            "server": {
                "kind": "server",
                "dim": len(MU),
                "aggregate": "median_of_means",
                "group_size": s["B"] if group_size is None else group_size,
                "grouping": "consecutive",
            }
        },
        "c1": s["C"],
        "adversary": {
            "num_byzantine": s["M_Z"] if num_byzantine is None else num_byzantine,
            "placement": "code_fedmom",
            "attack": s["attack"],
            "attack_kwargs": {"beta": s["beta"] if beta is None else beta},
        },
    }


def register() -> None:
    """Register this paper's preset ids."""
    from fedbandit_env.envs import ACCEPTED, PARALLEL, VECTOR

    for scenario, what in (
        (1, "scenario 1: lambda=0.2 arithmetic, T=5e4, beta=omega+0.05, C=1"),
        (2, "scenario 2: lambda=0.2 arithmetic, T=1e5, beta=0.189, C=0.1, honest draws off beta"),
        (3, "scenario 3: lambda=0.1 geometric, T=5e4, beta=0.11, C=0.1"),
    ):
        registration.register(
            f"FedBandit/Byzantine-FedMoM-Sce{scenario}-v0",
            PARALLEL,
            vector_entry_point=VECTOR,
            kwargs=fedmom_preset(scenario),
            description=f"Fed-MoM-UCB (Demirel, Yildirim & Tekin) {what}.",
            accepted_kwargs=ACCEPTED,
        )
