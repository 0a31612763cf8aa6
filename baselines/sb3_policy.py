"""``SB3Policy``: a trained stable-baselines3 model as a batched team policy, registered as
``sb3_policy`` (docs/rl.md).

.. warning:: **Load only model files you trust.** A saved SB3 model (``model_path``) is a zip
   that SB3 partly *unpickles*, and unpickling runs whatever code the file names: a model file
   from a colleague, a shared suite or a download can run arbitrary code on your machine with
   your permissions. ``model_path`` is therefore refused unless ``trust_model=True``; pass it only
   for a file you or someone you trust wrote (never for a file from an untrusted source), or
   load the model yourself and pass ``model=``. See docs/rl.md, "Trusting a model file".

Every agent of every run feeds its sufficient-statistics features
(:mod:`fedbandit_env.rl.features`, the observation the adapter trained on) to ONE shared model
(parameter sharing); the B x N observations go through the network in a single batched
``predict`` call per step. Like the training adapter, the policy sends each agent's own
``[counts, sums]`` over the ``neighbors`` channel (dim 2M) when the environment has it
(``channel_spec`` asks for it) and declares that statistics protocol in ``message_protocols``.

* ``deterministic=False`` (default, as in SB3's ``predict``): the arm is sampled from the model's
  categorical action distribution with an inverse-CDF draw from the ``policy`` child of the
  agents' stream (never torch's global RNG), so runs stay reproducible and batch-independent.
  Needs a policy with a categorical distribution (PPO, A2C). Sampling is the default because a
  bandit policy trained with PPO explores through it (docs/rl.md, "Greedy play does not explore").
* ``deterministic=True``: the model's greedy action (``model.predict(..., deterministic=True)``).

By id, through the bench or the CLI (the saved model's path is the one required kwarg, and
``trust_model=True`` says the file may be unpickled):
``evaluate(env_id, "sb3_policy", agent_kwargs={"model_path": "ppo.zip", "trust_model": True})``
or ``fedbandit run ENV sb3_policy --agent-kwargs '{"model_path": "ppo.zip", "trust_model":
true}'``; a suite cell names ``"sb3_policy"`` with the same ``agent_kwargs``. In code a model
object works too: ``SB3Policy(model=model)``.

Trust (docs/rl.md, "Trusting a model file"): SB3's ``load`` unpickles parts of the
zip, and a crafted file runs arbitrary code when unpickled, so a ``model_path`` is refused,
before the file is opened, unless ``trust_model=True``; every path that builds this learner
(the class, ``make_agent``, ``evaluate``, suites, ``OneLearner-v0``'s ``peers``, ``fedbandit
run`` and ``audit``) goes through this check.

Errors are raised before the first step and name ``sb3_policy`` and the field: a missing or unreadable ``model_path`` at construction; a model whose observation
space is not the features' ``Box(4M + 1)`` or whose action space is not ``Discrete(M)`` for the
environment at :meth:`reset`.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
from gymnasium import spaces

from fedbandit_env.config import EnvConfig
from fedbandit_env.engine import VecObservation
from fedbandit_env.errors import ConfigError
from fedbandit_env.policy import FederationFacts, TeamAction, TeamPolicy
from fedbandit_env.rl.features import (
    CHANNEL,
    STATISTICS_PROTOCOL,
    StatisticsFeatures,
    statistics_channel,
)
from fedbandit_env.seeding import BatchedRNG

AGENT_ID = "sb3_policy"
ALGOS = ("PPO", "A2C", "DQN")


def untrusted_model_error(model_path: Any) -> ConfigError:
    """The refusal to load a model file the user has not marked trusted (docs/rl.md, "Trusting
    a model file")."""
    return ConfigError(
        f"{AGENT_ID}: model_path: loading {os.fspath(model_path)!r} would unpickle it, and "
        "unpickling a file can run any code it contains; pass trust_model=True (agent_kwargs "
        '{"model_path": ..., "trust_model": true}) only for a file you trust, or pass '
        "model=<a loaded model>"
    )


def load_model(model_path: str | os.PathLike, algo: str, trust_model: bool = False) -> Any:
    """Load a saved SB3 model on the CPU; a clear :class:`ConfigError` if it cannot be read.
    SB3 unpickles parts of the file, so it is refused unless ``trust_model`` is True (the file
    is not even opened)."""
    if trust_model is not True:
        if not isinstance(trust_model, bool):
            raise ConfigError(f"{AGENT_ID}: trust_model: expected a bool, got {trust_model!r}")
        raise untrusted_model_error(model_path)
    if algo not in ALGOS:
        raise ConfigError(f"{AGENT_ID}: algo: expected one of {ALGOS}, got {algo!r}")
    if not isinstance(model_path, str | os.PathLike):
        raise ConfigError(
            f"{AGENT_ID}: model_path: expected the path of a saved SB3 model (.zip), "
            f"got {model_path!r}"
        )
    try:
        import stable_baselines3
    except ImportError:
        raise ConfigError(
            f"{AGENT_ID}: stable-baselines3 is not installed; install the 'rl' extra (docs/rl.md)"
        ) from None
    try:
        return getattr(stable_baselines3, algo).load(model_path, device="cpu")
    except FileNotFoundError:
        raise ConfigError(
            f"{AGENT_ID}: model_path: no saved model at {os.fspath(model_path)!r} "
            "(nor with '.zip' appended)"
        ) from None
    except Exception as err:  # SB3 raises ValueError, KeyError, zipfile errors, ...
        raise ConfigError(
            f"{AGENT_ID}: model_path: could not load {os.fspath(model_path)!r} as a saved "
            f"{algo} model: {err}"
        ) from err


class SB3Policy(TeamPolicy):
    """A shared SB3 model driving every agent (module doc)."""

    agent_id = AGENT_ID

    def __init__(
        self,
        model_path: str | os.PathLike | None = None,
        model: Any = None,
        algo: str = "PPO",
        deterministic: bool = False,
        share: bool | None = None,
        trust_model: bool = False,
    ):
        if model_path is None and model is None:
            raise ConfigError(
                f"{AGENT_ID}: model_path: required, the path of a saved SB3 model "
                '(agent_kwargs={"model_path": "ppo.zip"}), or pass model=<a loaded model>'
            )
        if model_path is not None and model is not None:
            raise ConfigError(f"{AGENT_ID}: model_path/model: expected one of them, got both")
        if not isinstance(deterministic, bool):
            raise ConfigError(f"{AGENT_ID}: deterministic: expected a bool, got {deterministic!r}")
        if share is not None and not isinstance(share, bool):
            raise ConfigError(f"{AGENT_ID}: share: expected None, True or False, got {share!r}")
        if not isinstance(trust_model, bool):
            raise ConfigError(f"{AGENT_ID}: trust_model: expected a bool, got {trust_model!r}")
        if model is None and not isinstance(model_path, str | os.PathLike):
            raise ConfigError(
                f"{AGENT_ID}: model_path: expected the path of a saved SB3 model (.zip), "
                f"got {model_path!r}"
            )
        if model is None and not trust_model:
            raise untrusted_model_error(model_path)
        self.model = load_model(model_path, algo, trust_model) if model is None else model
        self.source = repr(os.fspath(model_path)) if model_path is not None else "model object"
        self.deterministic = deterministic
        self.share = share

    @property
    def message_protocols(self) -> dict[str, str]:
        """It sends the features' statistics (``fedbandit_env.rl.declared_protocol``)."""
        return {} if self.share is False else {CHANNEL: STATISTICS_PROTOCOL}

    def channel_spec(self, config: EnvConfig):
        return None if self.share is False else statistics_channel(config.num_arms)

    def _check_spaces(self, facts: FederationFacts) -> None:
        """The model must observe exactly the features' Box and act with Discrete(num_arms)."""
        want = self.features.observation_space()
        have = self.model.observation_space
        if not isinstance(have, spaces.Box) or have.shape != want.shape:
            raise ConfigError(
                f"{AGENT_ID}: model.observation_space: expected a Box of shape {want.shape} "
                f"(4 * num_arms + 1 features for num_arms={facts.num_arms}), got {have} "
                f"(model from {self.source})"
            )
        if not (np.array_equal(have.low, want.low) and np.array_equal(have.high, want.high)):
            raise ConfigError(
                f"{AGENT_ID}: model.observation_space: expected bounds {want} for reward bounds "
                f"{facts.reward_bounds} (bounded rewards give features in [0, 1]), got {have} "
                f"(model from {self.source})"
            )
        act = self.model.action_space
        if not isinstance(act, spaces.Discrete) or act.n != facts.num_arms or act.start != 0:
            raise ConfigError(
                f"{AGENT_ID}: model.action_space: expected Discrete({facts.num_arms}), got "
                f"{act} (model from {self.source})"
            )

    def reset(self, facts: FederationFacts, rng: BatchedRNG) -> None:
        self.features = StatisticsFeatures(facts, self.share, owner=AGENT_ID)
        self._check_spaces(facts)
        if not self.deterministic and not hasattr(self.model.policy, "get_distribution"):
            raise ConfigError(
                f"{AGENT_ID}: deterministic: False samples from the action distribution and "
                f"needs a PPO/A2C model, got {type(self.model).__name__}"
            )
        self.shape = (facts.num_runs, facts.num_agents)
        self._u = rng.child("policy").buffered("uniform", (facts.num_agents,))

    def _sample(self, x: np.ndarray) -> np.ndarray:
        import torch

        policy = self.model.policy
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
