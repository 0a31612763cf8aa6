"""Presets of Vial, Shakkottai & Srikant, "Robust Multi-Agent Multi-Armed Bandits" (2021) and "Robust Multi-Agent Bandits Over Undirected Graphs" (2022).

n honest and m malicious agents play copies of one K-armed Bernoulli bandit and exchange arm
ids over a ``gossip`` channel in mode ``pull_one_neighbour`` (``recommend``, dim 1, the channel
of ``gosine`` and ``robust_gosine``, docs/robust-gosine.md). The malicious agents hold the
**last** m ids (placement ``fixed``), so the honest agents are 0 .. n-1 and a learner told
``sticky_agents = n`` gives the honest agents sticky sets that cover every arm.

* ``FedBandit/Malicious-GosInE-v0``: GosInE's own instance (Chawla et al.'s code: n = 15,
  K = 40, mu_1 = 0.95, mu_2 = 0.85, the others 0.85 U(0, 1) sorted, one fixed draw) with m = 5
  malicious agents recommending ``rec_smart``, complete graph, T = 64,000.
* ``FedBandit/Malicious-Vial22-v0``: the 2022 paper's synthetic setting: K = 100 Bernoulli arms,
  n = 25 honest, m = 10 malicious (``rec_smart``), G(n + m, p) with ``p`` a keyword (default 1),
  resampled until the honest agents' subgraph and the whole graph are connected, one graph per
  ``graph_seed`` (every run of a batch shares it; a ``topology`` keyword replaces the sampled
  graph, as the bench does when it rebuilds the environment). The arms' means are not the paper's (not
  available to us): the same construction as the GosInE instance, mu_1 = 0.95, mu_2 = 0.85, the
  others 0.85 U(0, 1), from instance seed 1. T = 100,000.
"""

from __future__ import annotations

from typing import Any

import networkx as nx
import numpy as np

from fedbandit_env.envs import ACCEPTED, PARALLEL, VECTOR
from fedbandit_env.errors import ConfigError
from fedbandit_env.registration import register as register_env
from fedbandit_env.validation import check_int, check_real

RECOMMEND = {"recommend": {"kind": "gossip", "dim": 1, "mode": "pull_one_neighbour"}}
MAX_GRAPH_TRIES = 1000
"""G(n + m, p) samples drawn before giving up on a connected honest subgraph."""


def gosine_means(num_arms: int = 40, seed: int = 0) -> list[float]:
    """GosInE's instance: 0.95, 0.85, then ``num_arms - 2`` values 0.85 U(0, 1) sorted in
    decreasing order (one draw from ``seed``)."""
    rest = np.sort(0.85 * np.random.default_rng(seed).random(num_arms - 2))[::-1]
    return [0.95, 0.85, *rest.tolist()]


def malicious(num_honest: int, num_malicious: int, attack: str = "rec_smart") -> dict:
    """The adversary of the presets: the last ``num_malicious`` ids, attack ``attack``."""
    ids = list(range(num_honest, num_honest + num_malicious))
    return {"num_byzantine": num_malicious, "placement": "fixed", "byzantine_ids": ids,
            "attack": attack}  # fmt: skip


def honest_connected_graph(num_honest: int, num_malicious: int, p: float, seed: int) -> nx.Graph:
    """G(n + m, p) on nodes 0 .. n+m-1, drawn from ``seed`` and resampled until the subgraph of
    the honest nodes 0 .. n-1 and the whole graph are connected (the whole graph too: the
    GosInE learners need one connected graph)."""
    n = num_honest + num_malicious
    iu, ju = np.triu_indices(n, k=1)
    rng = np.random.default_rng(seed)
    for _ in range(MAX_GRAPH_TRIES):
        keep = rng.random(iu.size) < p
        G = nx.Graph()
        G.add_nodes_from(range(n))
        G.add_edges_from(zip(iu[keep].tolist(), ju[keep].tolist(), strict=True))
        if nx.is_connected(G) and nx.is_connected(G.subgraph(range(num_honest))):
            return G
    raise ConfigError(
        f"FedBandit/Malicious-Vial22-v0: p: no G({n}, {p}) with a connected honest subgraph in "
        f"{MAX_GRAPH_TRIES} samples from graph_seed {seed}; expected a larger p"
    )


VIAL22_KWARGS = ("p", "graph_seed", "num_honest", "num_malicious")


def vial22_kwargs(p, graph_seed, num_honest, num_malicious, kwargs: dict[str, Any]) -> dict:
    """The environment keywords of ``FedBandit/Malicious-Vial22-v0`` (module doc)."""
    where = "FedBandit/Malicious-Vial22-v0"
    p = check_real("p", p, low=0.0, high=1.0, low_open=True, where=where)
    seed = int(check_int("graph_seed", graph_seed, minimum=0, where=where))
    n = int(check_int("num_honest", num_honest, minimum=2, where=where))
    m = int(check_int("num_malicious", num_malicious, minimum=0, where=where))
    if "num_agents" in kwargs:
        raise ConfigError(
            f"{where}: num_agents: set by num_honest + num_malicious; got {kwargs['num_agents']!r}"
        )
    out = {
        "family": "homogeneous",
        "num_arms": 100,
        "means": gosine_means(100, seed=1),
        "horizon": 100_000,
        "reward": "bernoulli",
        "channels": RECOMMEND,
        "adversary": malicious(n, m) if m > 0 else None,
    }
    out.update(kwargs)
    out["num_agents"] = n + m
    if "topology" not in kwargs:  # a given topology (the bench passes the one it built) wins
        out["topology"] = honest_connected_graph(n, m, p, seed)
    return out


def vial22_parallel_env(p=1.0, graph_seed=0, num_honest=25, num_malicious=10, render_mode=None,
                        **kwargs):  # fmt: skip
    from fedbandit_env.parallel_env import FedBanditParallelEnv

    return FedBanditParallelEnv(
        render_mode=render_mode,
        **vial22_kwargs(p, graph_seed, num_honest, num_malicious, kwargs),
    )


def vial22_vector_env(num_runs=1, p=1.0, graph_seed=0, num_honest=25, num_malicious=10,
                      random_streams="per_run", **kwargs):  # fmt: skip
    from fedbandit_env.vector_env import FedBanditVectorEnv

    return FedBanditVectorEnv(
        num_runs, random_streams, **vial22_kwargs(p, graph_seed, num_honest, num_malicious, kwargs)
    )


def register() -> None:
    """Register this paper's preset ids."""
    register_env(
        "FedBandit/Malicious-GosInE-v0",
        PARALLEL,
        vector_entry_point=VECTOR,
        kwargs={
            "family": "homogeneous",
            "num_agents": 20,
            "num_arms": 40,
            "means": gosine_means(40, seed=0),
            "horizon": 64_000,
            "topology": "complete",
            "reward": "bernoulli",
            "channels": RECOMMEND,
            "adversary": malicious(15, 5),
        },
        description="Vial, Shakkottai & Srikant 2021 on GosInE's instance: 15 honest + 5 "
        "malicious (rec_smart, last ids), K = 40 Bernoulli, complete graph, T = 64,000.",
        accepted_kwargs=ACCEPTED,
    )
    register_env(
        "FedBandit/Malicious-Vial22-v0",
        "fedbandit_env.byzantine_envs.vial:vial22_parallel_env",
        vector_entry_point="fedbandit_env.byzantine_envs.vial:vial22_vector_env",
        description="Vial, Shakkottai & Srikant 2022 setting: 25 honest + 10 malicious "
        "(rec_smart, last ids), K = 100 Bernoulli, G(35, p) resampled until the honest subgraph "
        "is connected (p, graph_seed keywords), T = 100,000.",
        accepted_kwargs=tuple(k for k in ACCEPTED if k not in ("topology_kwargs", "num_agents"))
        + VIAL22_KWARGS,
    )
