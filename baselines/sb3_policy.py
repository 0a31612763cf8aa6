"""``SB3Policy``: a trained stable-baselines3 model as a batched team policy
(issue 9, item 4).

Every agent of every run feeds its sufficient-statistics features
(:mod:`fedbandit_env.rl.features`, the observation the adapter trained on) to ONE shared model
(parameter sharing); the B x N observations go through the network in a single batched
``predict`` call per step. Like the training adapter, the policy sends each agent's own
``[counts, sums]`` over the ``neighbors`` channel (dim 2M) when the environment has it
(``channel_spec`` asks for it).

* ``deterministic=True`` (default): the model's greedy action (``model.predict(...,
  deterministic=True)``), no randomness at all.
* ``deterministic=False``: the arm is sampled from the model's categorical action distribution
  with an inverse-CDF draw from the ``policy`` child of the agents' stream (never torch's
  global RNG), so runs stay reproducible and batch-independent. Needs a policy with a
  categorical distribution (PPO, A2C).

Load with ``SB3Policy(path="model.zip", algo="PPO")`` or pass a model object
(``SB3Policy(model=model)``); through the bench:
``evaluate(env_id, SB3Policy, agent_kwargs={"path": "model.zip"})``. It is deliberately not an
entry point of ``fedbandit.agents``: it cannot be built without a model, and the quick comparison
builds every registered id without arguments. Register it for a session with
``fedbandit_env.register_agent("sb3", SB3Policy)`` to refer to it by id.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from fedbandit_env.config import EnvConfig
from fedbandit_env.engine import VecObservation
from fedbandit_env.errors import ConfigError
from fedbandit_env.policy import FederationFacts, TeamAction, TeamPolicy
from fedbandit_env.rl.features import StatisticsFeatures, statistics_channel
from fedbandit_env.seeding import BatchedRNG

ALGOS = ("PPO", "A2C", "DQN")


def load_model(path: str, algo: str) -> Any:
    """Load a saved SB3 model on the CPU."""
    if algo not in ALGOS:
        raise ConfigError(f"sb3: algo: expected one of {ALGOS}, got {algo!r}")
    try:
        import stable_baselines3
    except ImportError:
        raise ConfigError(
            "sb3: stable-baselines3 is not installed; install the 'rl' extra (docs/rl.md)"
        ) from None
    return getattr(stable_baselines3, algo).load(path, device="cpu")


class SB3Policy(TeamPolicy):
    """A shared SB3 model driving every agent (module doc)."""

    agent_id = "sb3"

    def __init__(
        self,
        path: str | None = None,
        model: Any = None,
        algo: str = "PPO",
        deterministic: bool = True,
        share: bool | None = None,
    ):
        if (path is None) == (model is None):
            raise ConfigError("sb3: path/model: expected exactly one of a saved path or a model")
        if not isinstance(deterministic, bool):
            raise ConfigError(f"sb3: deterministic: expected a bool, got {deterministic!r}")
        self.model = load_model(path, algo) if model is None else model
        self.deterministic = deterministic
        self.share = share

    def channel_spec(self, config: EnvConfig):
        return statistics_channel(config.num_arms)

    def reset(self, facts: FederationFacts, rng: BatchedRNG) -> None:
        self.features = StatisticsFeatures(facts, self.share)
        want = (self.features.dim,)
        have = tuple(self.model.observation_space.shape)
        if have != want:
            raise ConfigError(
                f"sb3: model.observation_space: expected shape {want} (4 * num_arms + 1 "
                f"features for {facts.num_arms} arms), got {have}"
            )
        n_actions = getattr(self.model.action_space, "n", None)
        if n_actions != facts.num_arms:
            raise ConfigError(
                f"sb3: model.action_space: expected Discrete({facts.num_arms}), got "
                f"{self.model.action_space}"
            )
        self.shape = (facts.num_runs, facts.num_agents)
        self._u = rng.child("policy").buffered("uniform", (facts.num_agents,))

    def _sample(self, x: np.ndarray) -> np.ndarray:
        import torch

        policy = self.model.policy
        if not hasattr(policy, "get_distribution"):
            raise ConfigError("sb3: deterministic: False needs a PPO/A2C model")
        with torch.no_grad():
            obs_t, _ = policy.obs_to_tensor(x)
            probs = policy.get_distribution(obs_t).distribution.probs.cpu().numpy()
        cdf = np.cumsum(probs.reshape(*self.shape, -1), axis=-1)
        u = self._u.next()[..., None] * cdf[..., -1:]
        return np.minimum((u >= cdf).sum(axis=-1), cdf.shape[-1] - 1)

    def act(self, obs: VecObservation) -> TeamAction:
        self.features.update(obs)
        x = self.features.features().reshape(-1, self.features.dim)
        if self.deterministic:
            arms, _ = self.model.predict(x, deterministic=True)
            arms = np.asarray(arms, dtype=np.int64).reshape(self.shape)
        else:
            arms = self._sample(x).astype(np.int64)
        return TeamAction(arms, self.features.messages())
