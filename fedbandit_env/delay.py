"""Delayed rewards: the ``reward_delay`` option of an environment (docs/time.md, "reward_delay").

Joulani, György & Szepesvári (ICML 2013, Sec. 2) let the reward of the pull at t reach the
learner at t + tau_t; in stochastic problems the delay then adds to the regret a term that does
not grow with T. ``reward_delay`` gives every pull a fixed delay of d pulls:

* ``d`` (an int >= 1) or ``{"kind": "fixed", "pulls": d}``: the reward of a run's pull t reaches
  the agent that pulled in the observation of the run's pull t + d (delay time is a run's own pull
  count, as drift time: communication-only steps move nothing). Rewards due after the horizon
  never arrive. Regret is charged at pull time, as always.
* ``None`` or ``0``: no delay (the default): the reward is in the pull's own observation.
* A random delay, drawn per pull and agent from the run's ``delay`` stream and capped at
  ``max`` pulls (:class:`RandomDelay`, :func:`draw_delay`):

  * ``{"kind": "geometric", "mean": m, "max": D}``: P(d = k) = p (1 - p)^(k - 1) on k >= 1, with
    p = 1 / m (mean m >= 1), then min(d, D);
  * ``{"kind": "uniform", "low": a, "high": b}``: uniform on the integers a..b (1 <= a <= b; D =
    b);
  * ``{"kind": "pareto", "shape": a, "max": D}``: heavy-tailed, d = ceil(V) for V Pareto with
    scale 1 and shape a > 0 (P(V > v) = v^-a), then min(d, D).

  Several rewards may then reach an agent at the same pull: the observation holds one slot per
  delay, slot j (0-based) the reward of the pull made j + 1 pulls before, with its arm and its
  pull (1-based; -1 where no reward arrives) (:class:`RandomDelayLine`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from fedbandit_env.errors import ConfigError
from fedbandit_env.validation import check_int, check_real, option_kind
from fedbandit_env.xp import put_along

DELAY_KINDS: tuple[str, ...] = ("fixed",)
"""The kinds of a fixed-delay option (``latency``; an int is ``fixed``)."""
RANDOM_DELAY_KINDS: tuple[str, ...] = ("geometric", "uniform", "pareto")
"""The random ``reward_delay`` kinds (:class:`RandomDelay`)."""
_RANDOM_KEYS = {"geometric": ("mean", "max"), "uniform": ("low", "high"), "pareto": ("shape", "max")}


@dataclass(frozen=True)
class RandomDelay:
    """A random reward delay (module docstring): ``kind``, its parameter ``a`` (the geometric
    mean, the uniform low end, the Pareto shape) and the largest delay ``max`` in pulls."""

    kind: str
    a: float
    max: int


def delay_option(value: Any, *, horizon: int) -> int | RandomDelay | None:
    """The delay of a ``reward_delay`` argument: d >= 1 in pulls (fixed), a
    :class:`RandomDelay`, or None for no delay."""
    if isinstance(value, Mapping) and value.get("kind") in RANDOM_DELAY_KINDS:
        return random_law("reward_delay", value, horizon)
    return fixed_option("reward_delay", value, "pulls", "the delay d in pulls", horizon,
                        "an int, or a dict with kind 'fixed', 'geometric', 'uniform' or "
                        "'pareto'", kinds=("fixed", *RANDOM_DELAY_KINDS))  # fmt: skip


def random_law(name: str, value: Mapping, horizon: int) -> RandomDelay:
    """The :class:`RandomDelay` of a random ``reward_delay`` or ``latency`` (``name``) dict."""
    kind = value["kind"]
    keys = _RANDOM_KEYS[kind]
    if sorted(value) != sorted(["kind", *keys]):
        raise ConfigError(f"{name}: {kind!r} expects exactly {list(keys)}, got keys "
                          f"{sorted(value)}")  # fmt: skip
    if kind == "uniform":
        low = check_int("low", value["low"], minimum=1, maximum=horizon, where=name)
        high = check_int("high", value["high"], minimum=low, maximum=horizon, where=name)
        return RandomDelay(kind, float(low), high)
    top = check_int("max", value["max"], minimum=1, maximum=horizon, where=name)
    if kind == "geometric":
        a = check_real("mean", value["mean"], low=1.0, where=name)
    else:
        a = check_real("shape", value["shape"], low=0.0, low_open=True, where=name)
    return RandomDelay(kind, a, top)


def fixed_option(name: str, value: Any, key: str, what: str, horizon: int,
                 why: str, kinds: tuple[str, ...] = DELAY_KINDS) -> int | None:  # fmt: skip
    """A fixed-delay option (``reward_delay``, ``latency``): an int in [0, horizon] or
    ``{"kind": "fixed", key: int}``, checked by ``name``; 0 and None are None (off). Another
    kind is refused with ``why`` (and the accepted ``kinds``)."""
    if value is None or (isinstance(value, int | np.integer) and not isinstance(value, bool)
                         and value == 0):  # fmt: skip
        return None
    if isinstance(value, Mapping):
        option_kind(f"{name}: kind", value, kinds, why)
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
        ``arrived_reward``, ``arrived_pull`` the pull each arrived reward was drawn at, -1:
        none) and hide the rewards drawn now (``last_reward`` 0: they arrive later)."""
        obs.arrived_arm, obs.arrived_reward = self.arrive(pulls, pulling, arms, rewards, who)
        obs.arrived_pull = np.where(obs.arrived_arm >= 0, (pulls - self.delay)[:, None], -1)
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


# ----------------------------------------------------------------------------- random delays


def draw_delay(u: Any, law: RandomDelay, xp: Any = np) -> Any:
    """The delays (...) in pulls of a :class:`RandomDelay` from uniforms ``u`` (...) in [0, 1),
    by inversion: geometric 1 + floor(log(1 - u) / log(1 - 1/m)) (1 when m = 1), uniform
    a + floor(u (b - a + 1)), Pareto ceil((1 - u)^(-1/a)); each capped at ``max`` and at least
    1."""
    if law.kind == "uniform":
        d = law.a + xp.floor(u * (law.max - law.a + 1))
    elif law.kind == "geometric":
        if law.a == 1.0:
            d = xp.ones_like(u)
        else:
            d = 1 + xp.floor(xp.log1p(-u) / np.log1p(-1.0 / law.a))
    else:
        d = xp.ceil(xp.exp(-xp.log1p(-u) / law.a))
    return xp.clip(d, 1, law.max).astype(xp.int32 if xp is not np else np.int64)


def line_order(pulls: Any, size: int, xp: Any = np) -> Any:
    """(..., D) the line positions of the pulls made 1..D pulls before pull ``pulls`` (...):
    position (pulls - 1 - j) mod D for slot j."""
    return (xp.asarray(pulls)[..., None] - 1 - xp.arange(size)) % size


def random_arrivals(line_arms: Any, line_rewards: Any, line_due: Any, pulls: Any, pulling: Any,
                    xp: Any = np) -> tuple[Any, Any, Any]:  # fmt: skip
    """The rewards that reach each agent at pull ``pulls`` (...) of the pulling runs, from a
    line (..., N, D) of arms, rewards and due pulls kept at position (pull mod D): slot j holds
    the pull made j + 1 pulls before, delivered where its due pull is now. Returns (arms,
    rewards, pulls) (..., N, D), -1 / 0 / -1 where nothing arrives."""
    size, lead = line_arms.shape[-1], line_arms.shape[:-1]
    rows = xp.arange(math.prod(lead)).reshape(*lead, 1) * size  # each (run, agent)'s row
    at = rows + line_order(pulls, size, xp)[..., None, :]  # flat positions in slot order
    now = xp.asarray(pulls)[..., None, None]
    arms, due = (xp.take(a.reshape(-1), at) for a in (line_arms, line_due))
    here = (due == now) & (arms >= 0) & xp.asarray(pulling)[..., None, None]
    rewards = xp.take(line_rewards.reshape(-1), at)
    made = now - 1 - xp.arange(size)
    return xp.where(here, arms, -1), xp.where(here, rewards, 0.0), xp.where(here, made, -1)


def random_enter(line: tuple[Any, Any, Any], pulls: Any, pulling: Any, who: Any, arms: Any,
                 rewards: Any, delays: Any, xp: Any = np) -> tuple[Any, Any, Any]:  # fmt: skip
    """The line after pull ``pulls`` of the pulling runs enters it at position pulls mod D: the
    arms and rewards of the agents ``who`` pulled, due at pull ``pulls + delays`` (-1: no
    pull)."""
    size = line[0].shape[-1]
    at = xp.broadcast_to((xp.asarray(pulls) % size)[..., None, None], (*arms.shape, 1))
    now = xp.asarray(pulling)[..., None]
    new = (xp.where(who, arms, -1), rewards, xp.asarray(pulls)[..., None] + delays)
    out = []
    for held, value in zip(line, new, strict=True):  # one read and one write per agent
        kept = xp.where(now, value, xp.take_along_axis(held, at, axis=-1)[..., 0])
        out.append(put_along(xp, held, at, kept[..., None].astype(held.dtype), axis=-1))
    return tuple(out)


class RandomDelayLine:
    """The numpy engine's rewards in flight under a random delay: (B, N, D) arms, rewards and
    due pulls, D the largest delay; the delays drawn per pull and agent from the runs' ``delay``
    stream."""

    def __init__(self, law: RandomDelay, stream: Any, num_runs: int, num_agents: int):
        shape = (num_runs, num_agents, law.max)
        self.law = law
        self.line = (np.full(shape, -1, np.int64), np.zeros(shape), np.zeros(shape, np.int64))
        self._u = stream.buffered("uniform", (num_agents,))

    def stamp(self, obs: Any, pulls: np.ndarray, pulling: np.ndarray, arms: np.ndarray,
              rewards: np.ndarray, who: np.ndarray) -> None:  # fmt: skip
        """Write the step's arrivals into an engine observation (``arrived_arm``,
        ``arrived_reward``, ``arrived_pull``, (B, N, D)), hide the rewards drawn now
        (``last_reward`` 0) and put the pull made now in the line."""
        out = random_arrivals(*self.line, pulls, pulling)
        obs.arrived_arm, obs.arrived_reward, obs.arrived_pull = out
        delays = draw_delay(self._u.next(pulling), self.law)
        self.line = random_enter(self.line, pulls, pulling, who, arms, rewards, delays)
        obs.last_reward = np.zeros_like(obs.last_reward)
