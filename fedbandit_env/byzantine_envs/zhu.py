"""Presets of Zhu, Koppel, Velasquez & Liu, "Byzantine-Resilient Decentralized Multi-Armed Bandits" (TMLR).

| id | what |
|---|---|
| ``FedBandit/Byzantine-ZhuTMLR-v0`` | the experiment of the authors' MATLAB code (``test_TMLR.m``, ``dist_TMLR.m``): homogeneous Bernoulli arms mu = [0.5, 0.45, 0.4, 0.3], N = 10 agents on the complete graph, agent 0 Byzantine with the code's attack ``zhu_code``, T = 9,996 rounds + 4 init pulls |

The code's adjacency ``ones(d)`` is 4 x 4 but indexed by 10 agents; the preset takes the complete
graph on the 10 agents it was meant to be (docs/byzres-ucb.md, "Decisions"). The ``neighbors``
channel carries the ``byzres_ucb`` payload ``[means (M), counts (M)]`` (dim 2M = 8) with
per-neighbour delivery, the layout the mean attacks fill.
"""

from __future__ import annotations

ZHU_TMLR = "FedBandit/Byzantine-ZhuTMLR-v0"
ZHU_MEANS = (0.5, 0.45, 0.4, 0.3)
ZHU_ROUNDS = 9_996  # k - d = 10,000 reward slots minus the 4 init pulls (test_TMLR.m)


def zhu_tmlr_kwargs() -> dict:
    """The keyword arguments of ``FedBandit/Byzantine-ZhuTMLR-v0`` (every one can be
    overridden at ``make``)."""
    m = len(ZHU_MEANS)
    return {
        "family": "homogeneous",
        "num_agents": 10,
        "means": list(ZHU_MEANS),
        "reward": "bernoulli",
        "topology": "complete",
        "horizon": ZHU_ROUNDS + m,
        "channels": {"neighbors": {"kind": "neighbors", "dim": 2 * m}},
        "adversary": {"num_byzantine": 1, "placement": "first", "attack": "zhu_code"},
    }


def register() -> None:
    """Register this paper's preset ids."""
    from fedbandit_env.envs import ACCEPTED, PARALLEL, VECTOR
    from fedbandit_env.registration import register as register_env

    register_env(
        ZHU_TMLR,
        PARALLEL,
        vector_entry_point=VECTOR,
        kwargs=zhu_tmlr_kwargs(),
        description="Zhu et al. (TMLR) code experiment: homogeneous Bernoulli "
        "[0.5, 0.45, 0.4, 0.3], N=10 complete graph, agent 0 Byzantine (zhu_code), "
        "T = 9,996 rounds + 4 init pulls.",
        accepted_kwargs=ACCEPTED,
    )
