"""CDP-, DDP- and HDP-MAB in JAX (Li & Song, "Privacy-Preserving Communication-Efficient
Federated Multi-Armed Bandits": Algorithm 1 and Sec. IV-B, Algorithms 2-3, Algorithms 4-5;
docs/commeff.md).

Ports of :mod:`agents.commeff.cdp`, :mod:`~agents.commeff.ddp` and :mod:`~agents.commeff.hdp`
(the numpy twins, the model) for one run. The epoch machine they share -- private successive
elimination with S(r), C(r) = c(r) + h(r) and Laplace releases of scale 1 / (eps_msg n_r), the
timing, the tables of the schedule and the deviations -- is :mod:`agents.jax.commeff_common`;
this module binds it to each structure's channel, as the twins do:

=========  ===================  ===========================================================
id         structure            the round (upload step s, aggregate in the observation of)
=========  ===================  ===========================================================
cdp_mab    master-worker        ``server`` (mean over the ceil(p M) participants of step s):
                                step s; N_eff = ceil(p M), delay 0 (Alg. 1, Sec. IV-B)
ddp_mab    decentralized, GIS   ``flood`` (ttl >= d_G, ``cost_model="gis"``): hop h at step
                                s + h - 1; every agent averages its own ybar with the M - 1
                                it received, at step s + d_G - 1 (Alg. 2-3, Decisions 8, 15)
hdp_mab    hybrid, SAC + server ``hierarchical`` (component sinks, then the server): step s +
                                max(0, max_q ecc(SA_q) - 1); N_eff = M (Alg. 4-5, Decisions
                                9, 10, 13)
=========  ===================  ===========================================================

``init`` runs the twin's ``reset`` on the same facts: it checks the channel (kind, dim, the
server's ``"mean"``, the flood's ttl, a connected graph, ``drop_prob = 0``) and the federation,
and gives N_eff, the delay and eps_msg. Keyword arguments, declarations (``agent_id``,
``version``, ``privacy_epsilon``, ``channel_spec``) and refusals are the twins'.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax.numpy as jnp
import numpy as np

from agents.commeff.cdp import CDPMAB as NumpyCDPMAB
from agents.commeff.ddp import DDPMAB as NumpyDDPMAB
from agents.commeff.hdp import HDPMAB as NumpyHDPMAB
from agents.jax.commeff_common import EliminationLearner, EliminationState
from fedbandit_env.jax.types import Observation


class CDPMAB(EliminationLearner):
    """CDP-MAB / CE-CDP-MAB (Algorithm 1, Sec. IV-B: ``rounds``, ``delta``,
    ``participation``), port of :class:`agents.CDPMAB`. Every agent uploads ``ybar_i`` in the
    round's upload step; the server broadcasts the mean of its participants' uploads, which
    every agent takes as its aggregate."""

    twin_class = NumpyCDPMAB
    agent_id = NumpyCDPMAB.agent_id
    version = NumpyCDPMAB.version

    def __init__(
        self,
        epsilon: float = 1.0,
        privacy: str = "paper",
        rounds: int | None = None,
        delta: float | Sequence[float] | None = None,
        participation: float | None = None,
        timing: str = "paper",
    ):
        self._bind_twin(NumpyCDPMAB(epsilon, privacy, rounds, delta, participation, timing))
        self.participation = self.twin.participation

    def _aggregate(self, s: EliminationState, obs: Observation) -> jnp.ndarray:
        """Algorithm 1, the server's line: the mean of the participants' ``ybar``."""
        aggregate = obs.deliveries[self.channel_name].aggregate
        return jnp.broadcast_to(aggregate[None, :], s.ybar.shape)


class DDPMAB(EliminationLearner):
    """DDP-MAB (Algorithm 3 over the GIS flood of Algorithm 2; a round budget as Cor. 1), port
    of :class:`agents.DDPMAB`. Each agent floods ``ybar_i``, adds up the vectors delivered to it
    during the round (``inbox``: sums (N, K) and counts (N,)) and averages them with its own
    (Decision 15: the running means)."""

    twin_class = NumpyDDPMAB
    agent_id = NumpyDDPMAB.agent_id
    version = NumpyDDPMAB.version

    def __init__(
        self,
        epsilon: float = 1.0,
        privacy: str = "paper",
        rounds: int | None = None,
        delta: float | Sequence[float] | None = None,
        timing: str = "paper",
    ):
        self._bind_twin(NumpyDDPMAB(epsilon, privacy, rounds, delta, timing))

    def _inbox_init(self) -> Any:
        return (np.zeros((self.N, self.K), np.float32), np.zeros(self.N, np.int32))

    def _receive(self, s: EliminationState, obs: Observation) -> EliminationState:
        """Algorithm 2: the hops delivered this step, added to the round's sums and counts."""
        d = obs.deliveries[self.channel_name]
        total, count = s.inbox
        heard = jnp.where(d.mask[..., None], d.payload, 0.0).sum(axis=1)
        return s._replace(inbox=(total + heard, count + d.mask.sum(axis=1, dtype=jnp.int32)))

    def _clear_inbox(self, inbox: Any, upload: jnp.ndarray) -> Any:
        """A new round starts with the upload: empty sums and counts."""
        total, count = inbox
        return jnp.where(upload[:, None], 0.0, total), jnp.where(upload, 0, count)

    def _aggregate(self, s: EliminationState, obs: Observation) -> jnp.ndarray:
        """Algorithm 3's average: ``(ybar_i + sum_j ybar_j) / (1 + received)``."""
        total, count = s.inbox
        return (s.ybar + total) / (1.0 + count.astype(jnp.float32))[:, None]


class HDPMAB(EliminationLearner):
    """HDP-MAB (Algorithm 5, the sinks of Algorithm 4; a round budget as Cor. 2), port of
    :class:`agents.HDPMAB` (``aggregation`` ``"weighted"`` / ``"unweighted"``, ``cost_model``
    ``"edges"`` / ``"path"``). The hierarchical channel's broadcast is every agent's
    aggregate."""

    twin_class = NumpyHDPMAB
    agent_id = NumpyHDPMAB.agent_id
    version = NumpyHDPMAB.version

    def __init__(
        self,
        epsilon: float = 1.0,
        privacy: str = "paper",
        rounds: int | None = None,
        delta: float | Sequence[float] | None = None,
        aggregation: str = "weighted",
        cost_model: str = "edges",
        timing: str = "paper",
    ):
        self._bind_twin(
            NumpyHDPMAB(epsilon, privacy, rounds, delta, aggregation, cost_model, timing)
        )
        self.aggregation, self.cost_model = self.twin.aggregation, self.twin.cost_model

    def _aggregate(self, s: EliminationState, obs: Observation) -> jnp.ndarray:
        """Algorithm 5, the server's line: the combination of the sinks' component means."""
        aggregate = obs.deliveries[self.channel_name].aggregate
        return jnp.broadcast_to(aggregate[None, :], s.ybar.shape)
