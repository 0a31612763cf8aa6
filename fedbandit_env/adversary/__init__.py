"""Byzantine and crashed agents: roles, placements and pluggable attacks (docs/adversary.md).

``fedbandit_env.make_vec(id, adversary={"num_byzantine": 2, "attack": "zhu_code"})`` makes two
agents per run Byzantine: their messages on every channel come from the attack, not from the
learner, and they are not scored. Attacks are registered by id (:func:`register_attack`).
"""

from fedbandit_env.adversary.attacks import (
    COUNT_MODES,
    KNOWLEDGE,
    Attack,
    AttackSpec,
    AttackView,
    honest_max_counts,
    huge_count,
    list_attacks,
    make_attack,
    register_attack,
)
from fedbandit_env.adversary.roles import (
    BYZANTINE,
    CRASHED,
    HONEST,
    LOCAL_F_TRIES,
    PLACEMENTS,
    Adversary,
    AdversaryConfig,
    byzantine_neighbours,
    draw_roles,
)

__all__ = [
    "BYZANTINE",
    "COUNT_MODES",
    "CRASHED",
    "HONEST",
    "KNOWLEDGE",
    "LOCAL_F_TRIES",
    "PLACEMENTS",
    "Adversary",
    "AdversaryConfig",
    "Attack",
    "AttackSpec",
    "AttackView",
    "byzantine_neighbours",
    "draw_roles",
    "honest_max_counts",
    "huge_count",
    "list_attacks",
    "make_attack",
    "register_attack",
]
