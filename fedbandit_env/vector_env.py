"""The vector view: B independent runs as arrays, for fast runners (docs/architecture.md).

``reset(seed=s)`` starts runs with seeds s, s+1, ..., s+B-1 (or an explicit list of B
non-negative ints); run b is bit-identical to a ``FedBanditParallelEnv`` reset with the same run
seed. An unseeded ``reset()`` continues the stream of the last seeded reset (Gymnasium's
convention, :class:`~fedbandit_env.reset_args.SeedContinuation`): it draws B new run seeds from a
generator seeded at that reset (fresh OS entropy if no seed was ever given). The run seeds
played are in ``seeds``. ``options`` must be None or empty (no reset options). ``step(arms, messages)``
takes arms (B, N) and per channel a payload array (B, N, dim) (everyone sends) or a tuple
``(send (B, N) bool or 0/1 ints, payload (B, N, dim))`` (the payload rows of agents that do not
send are ignored and may hold anything, even NaN), and returns
``(obs, rewards (B, N), terminated (B, N), truncated (B, N), info)`` with a
:class:`~fedbandit_env.engine.VecObservation` and a :class:`~fedbandit_env.engine.VecInfo`.
All runs share the horizon, so they end together; stepping past it raises. With ``adversary=``
(docs/adversary.md) the info's ``roles`` (B, N) int8 says who is honest, Byzantine or crashed
(``info.honest`` is the honest mask); the observations never carry roles.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from fedbandit_env.block_streams import RandomStreams
from fedbandit_env.config import make_config
from fedbandit_env.engine import Engine, VecInfo, VecObservation
from fedbandit_env.parallel_env import action_space, observation_space
from fedbandit_env.policy import FederationFacts
from fedbandit_env.reset_args import SeedContinuation, check_reset_options
from fedbandit_env.seeding import BatchedRNG
from fedbandit_env.step_args import Messages, agent_name
from fedbandit_env.validation import check_int


class FedBanditVectorEnv:
    """B runs of one federated bandit environment, stepped with arrays."""

    metadata = {"name": "fedbandit_vector_v0", "render_modes": []}

    def __init__(self, num_runs: int = 1, random_streams: RandomStreams = "per_run", **kwargs: Any):
        """``random_streams``: ``"per_run"`` (the default: run b is its seed run alone) or
        ``"block"`` (the privacy audits' whole-batch draws, :data:`~fedbandit_env.block_streams.RandomStreams`)."""
        num_runs = check_int("num_runs", num_runs, minimum=1)
        self.config = make_config(**kwargs)
        self.engine = Engine(self.config, num_runs, random_streams)
        self.num_runs = num_runs
        self.num_agents = self.config.num_agents
        self.num_arms = self.config.num_arms
        self.horizon = self.config.horizon
        self.possible_agents = [agent_name(i) for i in range(self.num_agents)]
        self.single_observation_space = observation_space(self.config, self.engine)
        self.single_action_space = action_space(self.config, self.engine)
        self.seeds: list[int] = []
        self._seeds = SeedContinuation()

    @property
    def facts(self) -> FederationFacts:
        return FederationFacts.from_config(self.config, self.num_runs, self.engine.channels)

    @property
    def channels(self):
        return self.engine.channels

    def agent_rng(self) -> BatchedRNG:
        """The agents' random stream of the current runs (docs/architecture.md, "Seeding")."""
        return self.engine.streams("agents")

    def reset(
        self, seed: int | Sequence[int] | None = None, options: dict | None = None
    ) -> tuple[VecObservation, VecInfo]:
        check_reset_options(options)
        self.seeds = self._seeds.batch(seed, self.num_runs)
        return self.engine.reset(self.seeds)

    def step(self, arms: np.ndarray, messages: Messages | None = None, pull=None):
        """``pull``: None/True (every run pulls), False or a bool array (B,) (the runs where it
        is False take a communication-only step, docs/architecture.md). ``truncated[b]`` is set
        once run b has made its ``horizon`` pulls; with communication steps runs may finish at
        different steps, and a finished run ignores the steps the others still take."""
        obs, rewards, info = self.engine.step(arms, messages, pull)
        shape = (self.num_runs, self.num_agents)
        terminated = np.zeros(shape, dtype=bool)
        truncated = np.repeat(self.engine.done_runs[:, None], self.num_agents, axis=1)
        return obs, rewards, terminated, truncated, info

    def close(self) -> None:
        return None
