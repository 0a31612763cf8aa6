"""Shared set-up of the DP recommender agents' tests (the reproduction's instance,
docs/dp-recsys.md)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

import fedbandit_env
from fedbandit_env.policy import TeamPolicy

MEANS = np.linspace(0.9, 0.0, 10)  # the reproduction's means: 0.9, 0.8, ..., 0.0
GAUSSIAN = {"kind": "gaussian", "sigma": 0.1}


def make_venv(policy: TeamPolicy, runs: int = 2, **kwargs: Any):
    """A homogeneous vector env with the channels the policy asks for (unless given)."""
    env_kwargs = {
        "family": "homogeneous",
        "num_agents": 6,
        "means": MEANS[:4],
        "horizon": 60,
        "topology": "ring",
        "reward": GAUSSIAN,
        **kwargs,
    }
    if "channels" not in env_kwargs:
        preview = fedbandit_env.make_vec("FedBandit/Homogeneous-v0", num_runs=1, **env_kwargs)
        env_kwargs["channels"] = policy.channel_spec(preview.config)
    return fedbandit_env.make_vec("FedBandit/Homogeneous-v0", num_runs=runs, **env_kwargs)


def rollout(
    policy: TeamPolicy,
    runs: int = 2,
    seed: int = 0,
    hook: Callable[[int, Any, Any], None] | None = None,
    before_step: Callable[[int, Any], None] | None = None,
    **kwargs: Any,
) -> dict[str, Any]:
    """Play a whole episode; returns arms (S, B, N), per-channel sends (S, B, N) and payloads
    (S, B, N, dim), rewards (S, B, N), ``pulls`` (S, B), the env and the final info, over the S
    engine steps (S = T unless the learner takes communication steps). ``hook(t, policy, action)``
    runs after each ``act`` (t = the step being chosen); ``before_step(t, venv)`` before ``act``."""
    venv = make_venv(policy, runs, **kwargs)
    obs, info = venv.reset(seed=seed)
    policy.reset(venv.facts, venv.agent_rng())
    arms, sends, payloads, rewards, pulls = [], {}, {}, [], []
    t = 0
    while not venv.engine.truncated:
        t += 1
        if before_step is not None:
            before_step(t, venv)
        action = policy.act(obs)
        if hook is not None:
            hook(t, policy, action)
        arms.append(action.arms.copy())
        for name, message in action.messages.items():
            send, payload = message[:2]  # a gossip pull may add its exclusion mask
            sends.setdefault(name, []).append(np.array(send, copy=True))
            payloads.setdefault(name, []).append(np.array(payload, copy=True))
        pull = np.ones(venv.num_runs, dtype=bool) if action.pull is None else action.pull
        pulls.append(np.array(pull, dtype=bool) & ~venv.engine.done_runs)
        obs, reward, _, _, info = venv.step(action.arms, action.messages, action.pull)
        rewards.append(reward.copy())
    return {
        "pulls": np.stack(pulls),  # (steps, B): which runs pulled in each engine step
        "arms": np.stack(arms),
        "sends": {k: np.stack(v) for k, v in sends.items()},
        "payloads": {k: np.stack(v) for k, v in payloads.items()},
        "rewards": np.stack(rewards),
        "venv": venv,
        "info": info,
    }
