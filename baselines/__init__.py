"""Baselines: simple and oracle learners (trivial agents, the index-policy zoo, the SB3 bridge)."""

from baselines.sb3_policy import SB3Policy

__all__ = ["SB3Policy"]
