"""Delayed rewards: the ``reward_delay`` option of an environment (docs/time.md, "reward_delay").

Joulani, György & Szepesvári (ICML 2013, Sec. 2) let the reward of the pull at t reach the
learner at t + tau_t; in stochastic problems the delay then adds to the regret a term that does
not grow with T. ``reward_delay`` gives every pull a fixed delay of d pulls:

* ``d`` (an int >= 1) or ``{"kind": "fixed", "pulls": d}``: the reward of a run's pull t reaches
  the agent that pulled in the observation of the run's pull t + d (delay time is a run's own pull
  count, as drift time: communication-only steps move nothing). Rewards due after the horizon
  never arrive. Regret is charged at pull time, as always.
* ``None`` or ``0``: no delay (the default): the reward is in the pull's own observation.

Random delays (geometric, heavy-tailed) are not built yet and are refused by name.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from fedbandit_env.errors import ConfigError
from fedbandit_env.validation import check_int, option_kind

DELAY_KINDS: tuple[str, ...] = ("fixed",)
"""The accepted ``reward_delay`` kinds (an int is ``fixed``)."""


def delay_option(value: Any, *, horizon: int) -> int | None:
    """The delay d >= 1 in pulls of a ``reward_delay`` argument, or None for no delay."""
    return fixed_option("reward_delay", value, "pulls", "the delay d in pulls", horizon,
                        "random delays are not built yet")  # fmt: skip


def fixed_option(name: str, value: Any, key: str, what: str, horizon: int,
                 why: str) -> int | None:  # fmt: skip
    """A fixed-delay option (``reward_delay``, ``latency``): an int in [0, horizon] or
    ``{"kind": "fixed", key: int}``, checked by ``name``; 0 and None are None (off). Another
    kind is refused with ``why``."""
    if value is None or (isinstance(value, int | np.integer) and not isinstance(value, bool)
                         and value == 0):  # fmt: skip
        return None
    if isinstance(value, Mapping):
        option_kind(f"{name}: kind", value, DELAY_KINDS, why)
        if sorted(value) != sorted(["kind", key]):
            raise ConfigError(f"{name}: 'fixed' expects exactly {key!r} ({what}), got keys "
                              f"{sorted(value)}")  # fmt: skip
        value = value[key]
    return check_int(name, value, minimum=0, maximum=horizon) or None


class DelayLine:
    """The numpy engine's rewards in flight, B runs of N agents: one slot per pull of the last
    d, holding the arms, rewards and who pulled (``arrive`` swaps a pull in and its d-th
    predecessor out)."""

    def __init__(self, delay: int, num_runs: int, num_agents: int):
        shape = (delay, num_runs, num_agents)
        self.delay = delay
        self.arms = np.full(shape, -1, np.int64)
        self.rewards = np.zeros(shape)
        self.runs = np.arange(num_runs)

    def arrive(self, pulls: np.ndarray, pulling: np.ndarray, arms: np.ndarray,
               rewards: np.ndarray, who: np.ndarray) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
        """The pulling runs' pull ``pulls`` (B,) (their new pull count) enters the line and the
        pull ``pulls - d`` leaves it: its arms (B, N) and rewards (B, N)
        (:func:`swap_delayed`)."""
        slot = delay_slot(pulls, self.delay)
        held = self.arms[slot, self.runs], self.rewards[slot, self.runs]
        out_arms, out_rewards, kept_arms, kept_rewards = swap_delayed(*held, pulling, arms,
                                                                      rewards, who)  # fmt: skip
        self.arms[slot, self.runs], self.rewards[slot, self.runs] = kept_arms, kept_rewards
        return out_arms, out_rewards

    def stamp(self, obs: Any, pulls: np.ndarray, pulling: np.ndarray, arms: np.ndarray,
              rewards: np.ndarray, who: np.ndarray) -> None:  # fmt: skip
        """Write the step's arrivals into an engine observation (``arrived_arm``,
        ``arrived_reward``) and hide the rewards drawn now (``last_reward`` 0: they arrive
        later)."""
        obs.arrived_arm, obs.arrived_reward = self.arrive(pulls, pulling, arms, rewards, who)
        obs.last_reward = np.zeros_like(obs.last_reward)


def swap_delayed(held_arms: Any, held_rewards: Any, pulling: Any, arms: Any, rewards: Any,
                 who: Any, xp: Any = np) -> tuple[Any, Any, Any, Any]:  # fmt: skip
    """One slot of the delay line at a step (leading batch axes: runs (B,), agents (..., N)):
    the pull it held leaves, its arms and rewards delivered where the run pulls (-1 and 0
    elsewhere, and where nothing was held); the pull made now enters, kept for the agents
    ``who`` pulled (-1 and 0 for the others). Returns (arrived arms, arrived rewards, the
    slot's new arms, its new rewards)."""
    now = xp.asarray(pulling)[..., None]
    out_arms = xp.where(now, held_arms, -1)
    out_rewards = xp.where(now, held_rewards, 0.0)
    kept_arms = xp.where(now, xp.where(who, arms, -1), held_arms)
    kept_rewards = xp.where(now, xp.where(who, rewards, 0.0), held_rewards)
    return out_arms, out_rewards, kept_arms, kept_rewards


def delay_slot(pulls: Any, delay: int) -> Any:
    """The slot of the delay line that pull ``pulls`` (its 1-based count) takes, and that the
    pull ``pulls - delay`` leaves: ``pulls mod delay``."""
    return pulls % delay
