"""The registered environment ids of the multi-armed families and the gossip-paper presets.

| id | what |
|---|---|
| ``FedBandit/Heterogeneous-v0`` | local means per agent, regret on the global (average) means |
| ``FedBandit/Homogeneous-v0`` | one mean vector shared by every agent |
| ``FedBandit/GossipTriangle-v0`` | gossip paper (Zhu et al.), Fig. 2(a): N=3, M=5, complete graph K3 (lambda2 = 0.5), Gaussian rewards sigma=1, T = 10^6 + M |
| ``FedBandit/LinearContextual-v0`` | linear contextual: K actions in R^d per agent and step, reward <x, theta*> + noise |
| ``FedBandit/LinearPaper-v0`` | DP federated linear bandits (Dubey & Pentland 2020), paper-scale preset: d=10, M=100 agents, K=10, T=10^7 |
| ``FedBandit/ClassificationContextual-v0`` | real-data contextual bandit (one arm per class of a scikit-learn bundled data set) |
| ``FedBandit/DiabetesHospitals-v0`` | gossip paper, Fig. 2(c): 3 hospitals, 5 medication arms, Bernoulli pools from a user-supplied diabetic_data.csv |
| ``FedBandit/GossipPath10-v0`` | gossip paper (Zhu et al.), Fig. 2(b): N=10, M=10, path P10 (lambda2 = 0.9946), Gaussian sigma=1, T = 10^6 + M |

The presets add M steps to the paper's T = 10^6 because the reference agents spend the first M
steps on the initialization pulls (docs/gossip.md).
"""

from __future__ import annotations

from fedbandit_env.config import LINEAR_KWARGS, make_config
from fedbandit_env.registration import register, signature_kwargs

PARALLEL = "fedbandit_env.parallel_env:FedBanditParallelEnv"
VECTOR = "fedbandit_env.vector_env:FedBanditVectorEnv"
# max_cycles is accepted by every id as the alias of horizon (registration.make), not listed
ACCEPTED = tuple(
    k for k in signature_kwargs(make_config) if k not in (*LINEAR_KWARGS, "max_cycles")
)
LINEAR_ACCEPTED = tuple(
    k
    for k in signature_kwargs(make_config)
    if k not in ("means", "instance", "family", "max_cycles", "client_spread", "global_means")
)

GOSSIP_CHANNELS = ("neighbors", "gossip")


def register_builtin_envs() -> None:
    register(
        "FedBandit/Heterogeneous-v0",
        PARALLEL,
        vector_entry_point=VECTOR,
        kwargs={"family": "heterogeneous"},
        description="Heterogeneous local means; regret against the global best arm.",
        accepted_kwargs=ACCEPTED,
    )
    register(
        "FedBandit/Homogeneous-v0",
        PARALLEL,
        vector_entry_point=VECTOR,
        kwargs={"family": "homogeneous", "topology": "complete", "channels": ("neighbors",)},
        description="Every agent sees the same arm distributions.",
        accepted_kwargs=ACCEPTED,
    )
    register(
        "FedBandit/LinearContextual-v0",
        PARALLEL,
        vector_entry_point=VECTOR,
        kwargs={
            "family": "linear",
            "num_agents": 10,
            "num_arms": 10,
            "dim": 10,
            "horizon": 1000,
            "instance_seed": None,
            "channels": (),
        },
        description="Linear contextual bandit: K actions in R^d per agent and step (docs/linear.md).",
        accepted_kwargs=LINEAR_ACCEPTED,
    )
    register(
        "FedBandit/LinearPaper-v0",
        PARALLEL,
        vector_entry_point=VECTOR,
        kwargs={
            "family": "linear",
            "num_agents": 100,
            "num_arms": 10,
            "dim": 10,
            "horizon": 10_000_000,
            "instance_seed": None,
            "channels": (),
        },
        description="DP federated linear bandits preset: d=10, M=100, K=10, T=10^7, Bernoulli.",
        accepted_kwargs=LINEAR_ACCEPTED,
    )
    register(
        "FedBandit/ClassificationContextual-v0",
        "fedbandit_env.datasets.envs:classification_parallel_env",
        vector_entry_point="fedbandit_env.datasets.envs:classification_vector_env",
        description="Real-data contextual bandit from a scikit-learn bundled classification data "
        "set (wine, iris, digits, breast_cancer), IID or Dirichlet split across agents.",
        accepted_kwargs=tuple(
            k
            for k in LINEAR_ACCEPTED
            if k
            not in ("num_arms", "dim", "theta", "dataset", "shared_decision_sets", "instance_seed",
                    "arms")
        )
        + ("dataset", "features", "split", "dirichlet_alpha", "split_seed"),
    )
    register(
        "FedBandit/DiabetesHospitals-v0",
        "fedbandit_env.datasets.envs:diabetes_parallel_env",
        vector_entry_point="fedbandit_env.datasets.envs:diabetes_vector_env",
        description="Gossip paper Fig. 2(c): 3 hospitals x 5 medication arms from a user-supplied "
        "diabetic_data.csv (data_path=...; never downloaded).",
        accepted_kwargs=tuple(
            k
            for k in ACCEPTED
            if k
            not in (
                "means",
                "instance",
                "family",
                "reward",
                "num_agents",
                "num_arms",
                "instance_seed",
                "client_spread",
                "global_means",
            )
        )
        + ("data_path", "split", "exclusive_arms", "seed"),
    )
    for env_id, n, m, topology, figure in (
        ("FedBandit/GossipTriangle-v0", 3, 5, "complete", "Fig. 2(a): N=3, M=5, triangle"),
        ("FedBandit/GossipPath10-v0", 10, 10, "path", "Fig. 2(b): N=10, M=10, path P10"),
    ):
        register(
            env_id,
            PARALLEL,
            vector_entry_point=VECTOR,
            kwargs=gossip_preset(n, m, topology),
            description=f"Gossip paper {figure}, Gaussian(1) rewards.",
            accepted_kwargs=ACCEPTED,
        )


def gossip_preset(num_agents: int, num_arms: int, topology: str) -> dict:
    """The gossip paper's Fig. 2 settings: fixed seeded instance (docs/gossip.md), Gaussian(1)
    noise, T = 10^6 + M."""
    return {
        "family": "heterogeneous",
        "num_agents": num_agents,
        "num_arms": num_arms,
        "horizon": 1_000_000 + num_arms,
        "topology": topology,
        "reward": {"kind": "gaussian", "sigma": 1.0},
        "instance": "gossip",
        "instance_seed": 0,
        "channels": GOSSIP_CHANNELS,
    }
