"""What the JAX field learners share (DDUCB, coop-UCB2, GosInE; docs/field.md).

The consensus matrix ``P = I - (kappa/d_max) L`` of the topology and its spectral gap come from
:func:`agents.field_common.consensus_setup` (in Python, in the learner's params); this module
holds them in float32 (:class:`Mixing`) and re-exports the two functions both engines call
(:mod:`agents.field_common`, written against the array namespace):

* :func:`neighbour_sum` — the sum of the arrived neighbour messages and their count, from the
  aggregating delivery (``reduce="sum"``) or the padded one (the sum over the mask);
* :func:`mix` — ``x_i <- P_ii x_i + w sum_{j in N(i)} x_j`` with ``w = kappa/d_max``, a dropped
  message giving its weight to the receiver's own value (rows stay stochastic).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from agents.field_common import Consensus, mix, neighbour_max, neighbour_sum
from fedbandit_env.xp import is_jax

__all__ = ["Mixing", "mix", "neighbour_max", "neighbour_sum"]


class Mixing(NamedTuple):
    """The constants of one consensus round: ``self_weight`` (N,) the diagonal of ``P``,
    ``edge_weight`` w = kappa/d_max and ``degrees`` (N,), float32 / int32 (numpy constants, so
    that a learner may keep them across traces)."""

    self_weight: np.ndarray
    edge_weight: float
    degrees: np.ndarray

    @classmethod
    def from_consensus(cls, consensus: Consensus) -> Mixing:
        """A consensus setup (:func:`agents.field_common.consensus_setup`) in float32."""
        return cls(
            np.asarray(consensus.self_weight, np.float32),
            edge if is_jax(edge := consensus.edge_weight) else float(edge),  # traced: a param
            np.asarray(consensus.degrees, np.int32),
        )
