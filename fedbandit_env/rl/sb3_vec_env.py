"""Agents as a stable-baselines3 ``VecEnv`` (docs/rl.md, "SB3 VecEnv adapter").

``AgentsVecEnv(env_id, num_copies=C, **env_kwargs)`` runs C independent runs of a registered
environment through the batched vector view (``fedbandit_env.make_vec``, no per-agent envs) and
exposes every agent of every copy as one SB3 sub-env: ``num_envs = C * N``, sub-env
``c * N + i`` is agent i of copy c. This is parameter sharing, the usual way to train one SB3
policy on a multi-agent env (the shape of SuperSuit's ``pettingzoo_env_to_vec_env_v1`` +
``concat_vec_envs_v1``), without SuperSuit.

* Observations: (C * N, 4M + 1) float32 sufficient statistics (:mod:`fedbandit_env.rl.features`);
  the adapter sends each agent's own statistics over the ``neighbors`` channel (dim 2M), which it
  adds when ``channels`` is not given.
* Actions: (C * N,) arms. Rewards: (C * N,) float32, the local reward (``reward="local"``) or the
  negative pseudo-regret of the pull against the global best arm (``reward="regret"``). The
  latter is training-time information from ``infos`` (privileged, like a centralized critic):
  in the heterogeneous family the local reward points to the local best arm, not to the global
  best arm that regret is measured against, so only the regret signal trains for the benchmark's
  objective. The policy itself only ever sees its features.
* ``dones``: (C * N,) bool, ``True`` for every sub-env at the horizon (all copies end together;
  there is no termination, so infos carry ``TimeLimit.truncated = True``). **Autoreset**: on that
  step the returned observations are the first observations of the next episode and each info
  holds ``terminal_observation`` (SB3's convention).
* **Seeding**: ``seed(s)`` (a non-negative int) makes the next reset use run seeds
  ``s, s+1, ..., s+C-1`` (all agents of copy c share run seed s + c; the returned list has one
  entry per sub-env). Autoresets and later unseeded resets continue the stream seeded there
  (Gymnasium's convention, :class:`~fedbandit_env.reset_args.SeedContinuation`: C new run seeds
  drawn from a generator seeded by s), so a whole training run is reproducible from one seed and
  adapters seeded differently never replay each other's episodes. Unlike SuperSuit's
  ``SB3VecEnvWrapper.reset`` (which drops the seed; docs/rl.md) the seed is forwarded;
  with no seed ever given the stream starts from OS entropy, never the global numpy RNG.
* ``reset()`` returns the observations only and stores ``reset_infos`` (``{"run_seed": r}``
  for every sub-env, r the run seed of its copy; autoresets update them too); step infos carry
  the ``run_seed`` of the episode the step belongs to. Reset options are not supported
  (``set_options`` with a non-empty dict makes the next ``reset`` raise, listing the keys).
* VecEnv plumbing: the sub-envs are agents of one batched engine, not separate objects, so
  ``get_attr`` returns the adapter's attribute for each index, ``env_method`` calls the
  adapter's method once and repeats its result per index, ``set_attr`` applies to all sub-envs
  (a strict subset of indices raises), ``env_is_wrapped`` is False (no Gymnasium wrappers), and
  out-of-range indices raise. ``render_mode`` is None: SB3's ``render()`` warns and returns
  None.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from gymnasium import spaces
from stable_baselines3.common.vec_env.base_vec_env import VecEnv, VecEnvIndices

from fedbandit_env.errors import ConfigError
from fedbandit_env.registration import check_env_id, make_vec
from fedbandit_env.reset_args import check_reset_options
from fedbandit_env.rl.features import StatisticsFeatures, statistics_channel
from fedbandit_env.seeding import check_seed
from fedbandit_env.validation import check_int

REWARDS = ("local", "regret")


def check_reward_mode(reward: str) -> str:
    if not isinstance(reward, str) or reward not in REWARDS:
        raise ConfigError(f"reward_mode: expected one of {REWARDS}, got {reward!r}")
    return reward


class AgentsVecEnv(VecEnv):
    """Every agent of every copy of an environment as one SB3 sub-env (module doc)."""

    def __init__(
        self,
        env_id: str,
        num_copies: int = 1,
        reward_mode: str = "local",
        share: bool | None = None,
        **env_kwargs: Any,
    ):
        self.reward_mode = check_reward_mode(reward_mode)
        num_copies = check_int("num_copies", num_copies, minimum=1)
        check_env_id(env_id)
        if "channels" not in env_kwargs:
            probe = make_vec(env_id, num_runs=1, **env_kwargs)
            env_kwargs["channels"] = statistics_channel(probe.num_arms)
        self.venv = make_vec(env_id, num_runs=num_copies, **env_kwargs)
        self.env_id = env_id
        self.env_kwargs = env_kwargs
        self.num_copies = num_copies
        self.num_agents = self.venv.num_agents
        self.features = StatisticsFeatures(self.venv.facts, share)
        self.render_mode = None  # read by VecEnv.__init__ through get_attr
        super().__init__(
            num_copies * self.num_agents,
            self.features.observation_space(),
            spaces.Discrete(self.venv.num_arms),
        )
        self._next_seed: int | None = None
        self._actions: np.ndarray | None = None

    # ---------------------------------------------------------------- seeding
    def seed(self, seed: int | None = None) -> Sequence[int | None]:
        """Seed the next reset (None: a seed drawn from OS entropy); one run seed per sub-env."""
        if seed is None:
            seed = int(np.random.SeedSequence().entropy % (2**32))
        self._next_seed = check_seed(seed, "seed")
        return [self._next_seed + c for c in range(self.num_copies) for _ in range(self.num_agents)]

    @property
    def run_seeds(self) -> list[int]:
        """Run seeds of the current episode, one per copy."""
        return list(self.venv.seeds)

    def _start_episode(self) -> np.ndarray:
        seed, self._next_seed = self._next_seed, None
        obs, _ = self.venv.reset(seed=seed)  # None: continue the stream of the last seed
        self.features.reset()
        self.features.update(obs)
        self._episode_seeds = [self.venv.seeds[k // self.num_agents] for k in range(self.num_envs)]
        self.reset_infos = [{"run_seed": s} for s in self._episode_seeds]
        return self._flat(self.features.features())

    def _flat(self, x: np.ndarray) -> np.ndarray:
        return x.reshape(self.num_envs, *x.shape[2:])

    # ------------------------------------------------------------------- API
    def reset(self) -> np.ndarray:
        """Start an episode in every copy; returns the observations only, the reset infos
        (``{"run_seed": ...}`` per sub-env) are in ``reset_infos``. Cancels a pending
        ``step_async``. The environments take no reset options: options set with
        ``set_options`` raise here."""
        options, self._options = self._options, [{} for _ in range(self.num_envs)]
        for opts in options:
            check_reset_options(opts, owner="reset (set_options)")
        self._actions = None
        return self._start_episode()

    def step_async(self, actions: np.ndarray) -> None:
        actions = np.array(actions)  # a copy: the caller may reuse its buffer
        if actions.size != self.num_envs or not np.issubdtype(actions.dtype, np.integer):
            raise ConfigError(
                f"step_async: actions: expected {self.num_envs} integer arms (one per sub-env), "
                f"got shape {actions.shape} dtype {actions.dtype}"
            )
        self._actions = actions

    def step_wait(self):
        if self._actions is None:
            raise ConfigError("step_wait: call step_async(actions) first")
        arms = self._actions.reshape(self.num_copies, self.num_agents).astype(np.int64)
        self._actions = None
        vobs, rewards, terminated, truncated, info = self.venv.step(arms, self.features.messages())
        if self.reward_mode == "regret":
            rewards = -info.instant_regret
        self.features.update(vobs)
        obs = self._flat(self.features.features())
        dones = self._flat(terminated | truncated).astype(bool)
        truncs = self._flat(truncated & ~terminated)
        infos: list[dict[str, Any]] = [
            {"TimeLimit.truncated": bool(tr), "run_seed": s}
            for tr, s in zip(truncs, self._episode_seeds, strict=True)
        ]
        if dones.all():  # every copy ends at the same horizon
            for k, info_k in enumerate(infos):
                info_k["terminal_observation"] = obs[k]
            obs = self._start_episode()
        return obs, self._flat(rewards).astype(np.float32), dones, infos

    def close(self) -> None:
        self.venv.close()

    # ------------------------------------------------- attribute plumbing
    # The sub-envs are the agents of one batched engine, not separate objects: attributes and
    # methods are the adapter's own, the same for every index.
    def _indices(self, indices: VecEnvIndices) -> list[int]:
        out = [int(k) for k in self._get_indices(indices)]
        bad = [k for k in out if not 0 <= k < self.num_envs]
        if bad:
            raise ConfigError(
                f"indices: expected sub-env indices in [0, {self.num_envs}), got {bad}"
            )
        return out

    def get_attr(self, attr_name: str, indices: VecEnvIndices = None) -> list[Any]:
        """The adapter's attribute, once per requested sub-env (AttributeError if missing)."""
        value = getattr(self, attr_name)
        return [value for _ in self._indices(indices)]

    def set_attr(self, attr_name: str, value: Any, indices: VecEnvIndices = None) -> None:
        """Set an attribute of the adapter; only for all sub-envs at once (they share it)."""
        if sorted(set(self._indices(indices))) != list(range(self.num_envs)):
            raise ConfigError(
                f"set_attr: indices: the {self.num_envs} sub-envs are agents of one batched "
                f"engine and share their attributes; set {attr_name!r} for all of them "
                "(indices=None)"
            )
        setattr(self, attr_name, value)

    def env_method(
        self, method_name: str, *method_args, indices: VecEnvIndices = None, **method_kwargs
    ) -> list[Any]:
        """Call the adapter's method ONCE (the sub-envs share it) and return its result once
        per requested sub-env."""
        ks = self._indices(indices)
        result = getattr(self, method_name)(*method_args, **method_kwargs)
        return [result for _ in ks]

    def env_is_wrapped(self, wrapper_class: type, indices: VecEnvIndices = None) -> list[bool]:
        """No Gymnasium wrapper sits between SB3 and the agents: False for every sub-env."""
        return [False for _ in self._indices(indices)]
