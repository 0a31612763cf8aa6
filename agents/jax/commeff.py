"""CDP-, DDP- and HDP-MAB in JAX (Li & Song, "Privacy-Preserving Communication-Efficient
Federated Multi-Armed Bandits": Algorithm 1 and Sec. IV-B, Algorithms 2-3, Algorithms 4-5;
docs/commeff.md).

The JAX forms of :mod:`agents.commeff.cdp`, :mod:`~agents.commeff.ddp` and
:mod:`~agents.commeff.hdp` (the numpy learners, the model) for one run, on the params protocol.
The epoch machine they share -- private successive elimination with S(r), C(r) = c(r) + h(r)
and Laplace releases of scale 1 / (eps_msg n_r), the timing, the tables of the schedule and the
deviations -- is :mod:`agents.jax.commeff_common`; this module binds it to each structure's
channel, as the numpy learners do:

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

``make_params`` is the numpy learner's params function (:func:`agents.commeff.cdp.cdp_params`,
:func:`~agents.commeff.ddp.ddp_params`, :func:`~agents.commeff.hdp.hdp_params`) plus the
schedule tables: it checks the channel (kind, dim, the server's ``"mean"``, the flood's ttl, a
connected graph, ``drop_prob = 0``) and the federation, and gives N_eff, the delay and eps_msg.
Keyword arguments, their validation (the numpy configuration dataclasses), declarations
(``agent_id``, ``version``, ``channel_spec``) and refusals are the numpy learners'.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax.numpy as jnp
import numpy as np

from agents.commeff.base import EliminationParams, flood_average
from agents.commeff.cdp import AGENT_ID as CDP_ID
from agents.commeff.cdp import CHANNEL as CDP_CHANNEL
from agents.commeff.cdp import VERSION as CDP_VERSION
from agents.commeff.cdp import CDPConfig, cdp_channel_spec, cdp_params
from agents.commeff.config import EliminationConfig
from agents.commeff.ddp import AGENT_ID as DDP_ID
from agents.commeff.ddp import CHANNEL as DDP_CHANNEL
from agents.commeff.ddp import VERSION as DDP_VERSION
from agents.commeff.ddp import ddp_channel_spec, ddp_params
from agents.commeff.hdp import AGENT_ID as HDP_ID
from agents.commeff.hdp import CHANNEL as HDP_CHANNEL
from agents.commeff.hdp import VERSION as HDP_VERSION
from agents.commeff.hdp import HDPConfig, hdp_channel_spec, hdp_params
from agents.jax.commeff_common import EliminationLearner, EliminationState, one_delta
from fedbandit_env.jax.types import Observation
from fedbandit_env.policy import FederationFacts


class CDPMAB(EliminationLearner):
    """CDP-MAB / CE-CDP-MAB (Algorithm 1, Sec. IV-B: ``rounds``, ``delta``,
    ``participation``), :class:`agents.CDPMAB` on JAX. Every agent uploads ``ybar_i`` in the
    round's upload step; the server broadcasts the mean of its participants' uploads, which
    every agent takes as its aggregate (the base's :meth:`_aggregate`)."""

    agent_id = CDP_ID
    version = CDP_VERSION
    channel_name = CDP_CHANNEL

    def __init__(
        self,
        epsilon: float = 1.0,
        privacy: str = "paper",
        rounds: int | None = None,
        delta: float | Sequence[float] | None = None,
        participation: float | None = None,
        timing: str = "paper",
    ):
        self.config = one_delta(
            CDPConfig(CDP_ID, epsilon, privacy, rounds, delta, timing, participation)
        )

    @property
    def participation(self) -> float | None:
        return self.config.participation

    def channel_spec(self, config) -> Any:
        return cdp_channel_spec(config.num_arms, self.config.participation)

    def _params(self, facts: FederationFacts) -> EliminationParams:
        return cdp_params(self.config, facts)


class DDPMAB(EliminationLearner):
    """DDP-MAB (Algorithm 3 over the GIS flood of Algorithm 2; a round budget as Cor. 1),
    :class:`agents.DDPMAB` on JAX. Each agent floods ``ybar_i``, adds up the vectors delivered
    to it during the round (``inbox``: sums (N, K) and counts (N,)) and averages them with its
    own (Decision 15: the running means)."""

    agent_id = DDP_ID
    version = DDP_VERSION
    channel_name = DDP_CHANNEL

    def __init__(
        self,
        epsilon: float = 1.0,
        privacy: str = "paper",
        rounds: int | None = None,
        delta: float | Sequence[float] | None = None,
        timing: str = "paper",
    ):
        self.config = one_delta(EliminationConfig(DDP_ID, epsilon, privacy, rounds, delta, timing))

    def channel_spec(self, config) -> Any:
        return ddp_channel_spec(config.num_arms)

    def _params(self, facts: FederationFacts) -> EliminationParams:
        return ddp_params(self.config, facts)

    def _inbox_init(self, params: EliminationParams) -> Any:
        n, k = params.num_agents, params.num_arms
        return (np.zeros((n, k), np.float32), np.zeros(n, np.int32))

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
        """Algorithm 3's average (:func:`agents.commeff.base.flood_average`)."""
        return flood_average(s.ybar, *s.inbox)


class HDPMAB(EliminationLearner):
    """HDP-MAB (Algorithm 5, the sinks of Algorithm 4; a round budget as Cor. 2),
    :class:`agents.HDPMAB` on JAX (``aggregation`` ``"weighted"`` / ``"unweighted"``,
    ``cost_model`` ``"edges"`` / ``"path"``). The hierarchical channel's broadcast is every
    agent's aggregate (the base's :meth:`_aggregate`)."""

    agent_id = HDP_ID
    version = HDP_VERSION
    channel_name = HDP_CHANNEL

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
        self.config = one_delta(
            HDPConfig(HDP_ID, epsilon, privacy, rounds, delta, timing, aggregation, cost_model)
        )

    @property
    def aggregation(self) -> str:
        return self.config.aggregation

    @property
    def cost_model(self) -> str:
        return self.config.cost_model

    def channel_spec(self, config) -> Any:
        return hdp_channel_spec(config.num_arms, self.config.aggregation, self.config.cost_model)

    def _params(self, facts: FederationFacts) -> EliminationParams:
        return hdp_params(self.config, facts)
