"""PettingZoo observation wrapper for learning agents (docs/rl.md, "Observation").

``StatisticsObservationWrapper(env)`` wraps a :class:`~fedbandit_env.FedBanditParallelEnv`:
every agent observes the flat ``Box(4M + 1, float32)`` of :mod:`fedbandit_env.rl.features`
(identical spaces across agents, as SuperSuit's ``MarkovVectorEnv`` and RLlib require) and acts
with a bare arm, ``Discrete(M)``. The wrapper sends each agent's own statistics over the
``neighbors`` channel when the env has one of dim 2M (see the features doc) and leaves every
other channel silent. Rewards, terminations, truncations and infos are the env's.

    env = StatisticsObservationWrapper(fedbandit_env.make(
        "FedBandit/Heterogeneous-v0", channels=statistics_channel(5)))
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from gymnasium import spaces
from pettingzoo import ParallelEnv

from fedbandit_env.errors import ActionError
from fedbandit_env.policy import ParallelPolicyAdapter
from fedbandit_env.rl.features import StatisticsFeatures


class StatisticsObservationWrapper(ParallelEnv):
    """Flat sufficient-statistics observations and ``Discrete(M)`` actions (module doc)."""

    def __init__(self, env: Any, share: bool | None = None):
        self.env = env
        base = env.unwrapped
        self._base = base
        self._decoder = ParallelPolicyAdapter(None, base)  # rebuilds batched observations
        self.features = StatisticsFeatures(base.facts, share)
        self.possible_agents = list(base.possible_agents)
        self.agents: list[str] = []
        self.metadata = {**base.metadata, "name": f"{base.metadata['name']}_statistics"}
        self.render_mode = base.render_mode
        self._obs_space = self.features.observation_space()
        self._act_space = spaces.Discrete(base.config.num_arms)

    @property
    def unwrapped(self) -> Any:
        return self._base

    def observation_space(self, agent: str) -> spaces.Box:
        """The same space object for every agent (no method cache: it would pin the env)."""
        self._base.observation_space(agent)  # unknown agents raise
        return self._obs_space

    def action_space(self, agent: str) -> spaces.Discrete:
        self._base.action_space(agent)
        return self._act_space

    def _observe(self, observations: Mapping[str, Any]) -> dict[str, np.ndarray]:
        self.features.update(self._decoder.observation_from_dicts(observations))
        feats = self.features.features()[0]
        return {a: feats[i] for i, a in enumerate(self.possible_agents)}

    def reset(self, seed: int | None = None, options: dict | None = None):
        observations, infos = self.env.reset(seed=seed, options=options)
        self.features.reset()
        self.agents = list(self.env.agents)
        return self._observe(observations), infos

    def step(self, actions: Mapping[str, Any]):
        messages = self.features.messages()
        full = {}
        for i, agent in enumerate(self.possible_agents):
            if agent not in actions:
                raise ActionError(agent, "action", "missing: every live agent must act each step")
            msgs = {
                name: {"send": int(send[0, i]), "payload": payload[0, i]}
                for name, (send, payload) in messages.items()
            }
            full[agent] = {"arm": actions[agent], "messages": msgs}
        observations, rewards, terms, truncs, infos = self.env.step(full)
        self.agents = list(self.env.agents)
        return self._observe(observations), rewards, terms, truncs, infos

    def render(self) -> Any:
        return self.env.render()

    def close(self) -> None:
        self.env.close()

    def state(self) -> np.ndarray:
        return self.env.state()


__all__ = ["StatisticsObservationWrapper"]
