"""A Gymnasium single-agent view: one learning agent among peers (docs/rl.md).

``gymnasium.make("FedBandit/OneLearner-v0", env_id=..., peers="ucb1_shared", learner=0,
**env_kwargs)`` gives a ``gymnasium.Env`` in which agent ``learner`` of one run of ``env_id`` is
controlled by the caller and every other agent by the registered team policy ``peers`` (any id of
``fedbandit_env.list_agents()``, ``peer_kwargs`` passed to it).

* Observation: the learner's ``Box(4M + 1, float32)`` sufficient statistics
  (:mod:`fedbandit_env.rl.features`). Action: ``Discrete(M)``, the learner's arm.
* Channels: when ``channels`` is not given the env gets the peers' ``channel_spec`` or, if they
  name none, the statistics channel (``neighbors``, dim 2M). The learner sends its own
  ``[counts, sums]`` on that channel, and reads its neighbours' statistics from it, only if the
  peers speak the same protocol (they declare ``message_protocols = {"neighbors":
  "counts_sums"}``, as the ``*_shared`` baselines and ``sb3_policy`` do) or do not use the
  channel at all. Peers that use a ``neighbors`` channel of dim 2M for their own protocol
  (``dp_dec_ucb`` sends consensus estimates on it) are not mixed with statistics: by default
  (``share=None``) the learner is then **silent** (it sends nothing, its neighbour features stay
  0, and the peers see it as a neighbour whose messages never arrive); ``share=True`` raises a
  :class:`~fedbandit_env.ConfigError` naming the learner, the channel and the peers. The learner
  sends nothing on other channels; the peers' messages pass through unchanged.
* Reward: the learner's local reward (``reward_mode="local"``) or minus its pseudo-regret
  (``"regret"``, training-time information; see :mod:`fedbandit_env.rl.sb3_vec_env`).
* Episodes truncate at the horizon; there is no termination. ``info`` holds the learner's
  ``instant_regret`` and ``cumulative_regret``.
* Registration: ``import fedbandit_env`` registers the id (Gymnasium 1.x loads no plugins on
  ``import gymnasium``); ``gymnasium.make("fedbandit_env:FedBandit/OneLearner-v0", ...)`` imports
  the package itself.
* Seeding: ``reset(seed=s)`` (a non-negative int) plays run seed s (the same run the PettingZoo
  and vector views play with s); a later ``reset()`` without a seed continues the stream seeded
  by the last seeded reset (Gymnasium's convention, :class:`~fedbandit_env.seeding.
  SeedContinuation`), so the sub-envs of ``SyncVectorEnv.reset(seed=0)`` or SB3's
  ``make_vec_env(seed=0)`` never replay each other's episodes; with no seed ever given the
  stream starts from OS entropy. ``info["run_seed"]`` is the run seed played. ``options`` must
  be None or empty.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from fedbandit_env.agent_registry import make_agent
from fedbandit_env.config import make_config
from fedbandit_env.errors import ConfigError
from fedbandit_env.policy import TeamPolicy
from fedbandit_env.registration import check_env_id, make_vec, spec
from fedbandit_env.reset_args import SeedContinuation, check_reset_options
from fedbandit_env.rl.features import (
    CHANNEL,
    STATISTICS_PROTOCOL,
    StatisticsFeatures,
    declared_protocol,
    has_statistics_channel,
    statistics_channel,
)
from fedbandit_env.seeding import check_seed
from fedbandit_env.validation import ConfigTypeError, check_int

REWARD_MODES = ("local", "regret")


class RenderModeError(ConfigError, TypeError):
    """An unsupported ``render_mode``. Also a ``TypeError``: SB3's ``make_vec_env`` first tries
    ``render_mode="rgb_array"`` and retries without it on a TypeError."""


GYM_ID = "FedBandit/OneLearner-v0"


class OneLearnerEnv(gym.Env):
    """One learning agent among peers running a registered team policy (module doc)."""

    metadata = {"render_modes": ["ansi"]}

    def __init__(
        self,
        env_id: str = "FedBandit/Heterogeneous-v0",
        peers: str | TeamPolicy = "ucb1_shared",
        learner: int = 0,
        reward_mode: str = "local",
        peer_kwargs: dict[str, Any] | None = None,
        render_mode: str | None = None,
        share: bool | None = None,
        **env_kwargs: Any,
    ):
        check_env_id(env_id)
        if not isinstance(peers, str | TeamPolicy):
            raise ConfigTypeError(
                f"peers: expected a registered learner id or a TeamPolicy, got {peers!r}"
            )
        if peer_kwargs is not None and not isinstance(peer_kwargs, dict):
            raise ConfigTypeError(f"peer_kwargs: expected a dict or None, got {peer_kwargs!r}")
        if not isinstance(reward_mode, str) or reward_mode not in REWARD_MODES:
            raise ConfigError(f"reward_mode: expected one of {REWARD_MODES}, got {reward_mode!r}")
        if render_mode is not None and not (
            isinstance(render_mode, str) and render_mode == "ansi"
        ):
            raise RenderModeError(f"render_mode: expected None or 'ansi', got {render_mode!r}")
        if share is not None and not isinstance(share, bool):
            raise ConfigError(f"share: expected None, True or False, got {share!r}")
        self.peers = make_agent(peers, **(peer_kwargs or {})) if isinstance(peers, str) else peers
        preview = make_config(**{**spec(env_id).kwargs, **env_kwargs})
        wanted = self.peers.channel_spec(preview) or {}
        if "channels" not in env_kwargs:
            env_kwargs["channels"] = wanted or statistics_channel(preview.num_arms)
        self.venv = make_vec(env_id, num_runs=1, **env_kwargs)
        n = self.venv.num_agents
        learner = check_int("learner", learner, minimum=0, maximum=n - 1)
        self.learner = learner
        self.reward_mode = reward_mode
        self.render_mode = render_mode
        share = self._statistics_sharing(share, wanted, peers)
        self.features = StatisticsFeatures(self.venv.facts, share, owner=f"agent_{learner}")
        self.observation_space = self.features.observation_space()
        self.action_space = gym.spaces.Discrete(self.venv.num_arms)
        self._run_seed: int | None = None
        self._seeds = SeedContinuation()
        self._obs = None
        self._info: dict[str, Any] = {}

    def _statistics_sharing(self, share: bool | None, wanted: dict, peers: Any) -> bool | None:
        """Whether the learner may share statistics with these peers (module doc, Channels)."""
        clash = (
            has_statistics_channel(self.venv.facts)
            and CHANNEL in wanted
            and declared_protocol(self.peers, CHANNEL) != STATISTICS_PROTOCOL
        )
        if not clash:
            return share
        if share:
            name = peers if isinstance(peers, str) else type(peers).__name__
            raise ConfigError(
                f"agent_{self.learner}: channels.{CHANNEL}: the peers {name!r} use this channel "
                f"for their own messages, not the {STATISTICS_PROTOCOL!r} statistics protocol "
                "([counts, sums]); pass share=False (or leave share=None) to let the learner "
                "play silently among them"
            )
        return False

    @property
    def run_seed(self) -> int | None:
        """The run seed of the current episode."""
        return self._run_seed

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        check_reset_options(options)
        if seed is not None:
            seed = check_seed(seed)
        super().reset(seed=seed)
        self._run_seed = self._seeds.next(seed)
        self._obs, _ = self.venv.reset(seed=self._run_seed)
        self.peers.reset(self.venv.facts, self.venv.agent_rng())
        self.features.reset()
        self.features.update(self._obs)
        self._info = {"instant_regret": 0.0, "cumulative_regret": 0.0, "run_seed": self._run_seed}
        return self.features.features()[0, self.learner], dict(self._info)

    def _messages(self, team_messages: dict) -> dict:
        i = self.learner
        out = {}
        for name, (send, payload) in team_messages.items():
            send, payload = send.copy(), payload.copy()
            send[0, i] = False
            out[name] = (send, payload)
        own = self.features.messages()
        if CHANNEL in own:
            send, payload = out.get(CHANNEL, (np.zeros_like(own[CHANNEL][0]), own[CHANNEL][1]))
            send[0, i] = True
            payload[0, i] = own[CHANNEL][1][0, i]
            out[CHANNEL] = (send, payload)
        return out

    def step(self, action: Any):
        if self._obs is None:
            raise ConfigError("step: call reset() before the first step")
        if not self.action_space.contains(action):
            raise ConfigError(
                f"agent_{self.learner}: arm: expected an int in [0, {self.action_space.n - 1}], "
                f"got {action!r}"
            )
        team = self.peers.act(self._obs)
        arms = team.arms.copy()
        arms[0, self.learner] = int(action)
        obs, rewards, terminated, truncated, info = self.venv.step(
            arms, self._messages(team.messages)
        )
        self._obs = obs
        self.features.update(obs)
        i = self.learner
        reward = -info.instant_regret[0, i] if self.reward_mode == "regret" else rewards[0, i]
        self._info = {
            "instant_regret": float(info.instant_regret[0, i]),
            "cumulative_regret": float(info.cumulative_regret[0, i]),
            "run_seed": self._run_seed,
        }
        return (
            self.features.features()[0, i],
            float(reward),
            bool(terminated[0, i]),
            bool(truncated[0, i]),
            dict(self._info),
        )

    def render(self) -> str | None:
        if self.render_mode != "ansi" or self._obs is None:
            return None
        return (
            f"step {self._obs.step}/{self.venv.horizon}  agent_{self.learner} "
            f"arm {int(self._obs.last_arm[0, self.learner])}  "
            f"regret {self._info['cumulative_regret']:.2f}"
        )


def register_gymnasium_envs() -> None:
    """Register the single-agent view with Gymnasium (idempotent)."""
    if GYM_ID not in gym.registry:
        gym.register(id=GYM_ID, entry_point=f"{__name__}:OneLearnerEnv")
