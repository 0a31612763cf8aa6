"""Preset environment ids of the Byzantine-robust bandit papers (docs/adversary.md, "Presets").

One module per paper; each module's ``register()`` adds that paper's ids with the adversary its
experiments use (roles, placement and attack), so ``fedbandit_env.make(id)`` reproduces the
paper's setting and every keyword can still be overridden.
"""

from __future__ import annotations

from fedbandit_env.byzantine_envs import fedmom, vial, zhu


def register_byzantine_envs() -> None:
    """Register every Byzantine preset id (called by ``register_builtin_envs``)."""
    zhu.register()
    fedmom.register()
    vial.register()
