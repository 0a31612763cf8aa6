"""What the two agents of the DP recommender paper share (Li, Song & Fragouli; docs/dp-recsys.md).

* :class:`ExactSums` — the running reward sums of every (run, agent, arm), without noise: the
  ``epsilon = inf`` (non-private) stand-in for one hybrid counter per agent and arm.
* :class:`HybridSums` — the private sums of every (run, agent, arm): one Chan–Shi–Song hybrid
  counter per agent and arm (the paper's mechanism H_ij, Figure 1),
  :class:`fedbandit_env.privacy.HybridCounter` over (N, K); each step inserts every agent's reward
  into its pulled arm's counter only (``HybridCounter.insert_flat`` at the flat (run, agent, arm)
  positions), which returns those counters' new releases;
* :func:`make_running_sums` — :class:`HybridSums` for a finite ``epsilon``, :class:`ExactSums`
  (same outputs as the counter at ``epsilon = inf``, faster) otherwise.
* :func:`privacy_width` — the privacy width ``upsilon(n)/n`` with
  ``upsilon(n) = (1/eps) ln(1/delta) ln^{1.5}(max(n, 1))`` (Algorithm 1 line 12, Algorithm 2
  line 14; natural logarithms), written once for both engines (numpy or ``jax.numpy`` arrays,
  :mod:`fedbandit_env.xp`).
* :func:`timed` — the step function of the configured ``timing``.
* validation helpers that raise :class:`fedbandit_env.ConfigError` naming the agent id and field.

Clipping: rewards are clipped to ``clip = (lo, hi)`` (default ``[0, 1]``) only when they are
inserted into the counters; the sensitivity of a counter is ``hi - lo``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

import numpy as np

from fedbandit_env.errors import ConfigError
from fedbandit_env.policy import MULTI_ARMED, FederationFacts, require_family
from fedbandit_env.privacy import HybridCounter
from fedbandit_env.seeding import BatchedRNG
from fedbandit_env.validation import MAX_HORIZON, check_int, check_real, is_real
from fedbandit_env.xp import is_inf, namespace

Step = TypeVar("Step", bound=Callable[..., Any])


class RunningSums(Protocol):
    """Per (run, agent, arm) running sums; ``value`` (B, N, K) holds the latest outputs."""

    value: np.ndarray

    def insert(
        self, arm: np.ndarray, reward: np.ndarray, runs: np.ndarray | None = None
    ) -> np.ndarray:
        """Insert each agent's reward (B, N) into its counter of ``arm`` (B, N) (only in the
        runs where ``runs`` (B,) holds, if given); return the new outputs of those counters."""

    def insert_flat(self, flat: np.ndarray, reward: np.ndarray, every_row: bool) -> np.ndarray:
        """:meth:`insert` at the flat (run, agent, arm) positions ``flat`` (1-D, at most one
        per (run, agent), in order, from the engine's checked arms) with ``reward`` (1-D);
        ``every_row``: one position for every (run, agent). Returns the new outputs there."""


class ExactSums:
    """Exact running sums of the clipped rewards (the non-private counters, ``epsilon = inf``)."""

    def __init__(self, shape: tuple[int, int, int], clip: tuple[float, float]):
        self.value = np.zeros(shape)
        self.lo, self.hi = clip
        self._b, self._i = np.indices(shape[:2])

    def insert(self, arm: np.ndarray, reward: np.ndarray, runs: np.ndarray | None = None):
        """Add the clipped rewards at ``arm`` (only in ``runs``); return the new sums there."""
        idx = (self._b, self._i, arm)
        if runs is not None:  # only the runs that pulled (communication steps)
            idx = tuple(x[runs] for x in idx)
            reward = reward[runs]
        self.value[idx] += np.clip(reward, self.lo, self.hi)
        return self.value[idx]

    def insert_flat(self, flat: np.ndarray, reward: np.ndarray, every_row: bool) -> np.ndarray:
        """Add the clipped rewards at the flat (run, agent, arm) positions; return the sums."""
        value = self.value.reshape(-1)
        value[flat] += np.clip(reward, self.lo, self.hi)
        return value[flat]


class HybridSums:
    """One hybrid counter per (run, agent, arm) (the mechanisms H_ij); ``value`` is their latest
    release.

    :meth:`insert` touches only the pulled counter of each (run, agent): the counter's
    ``insert_flat`` (its ``insert(values, mask)`` at one flat position per row) adds the reward
    there and returns the new outputs, read into ``value`` (the other counters' outputs are
    unchanged, since they received nothing). The counters draw one standard Laplace
    per (run, agent) and step (``noise_per="row"``: the one item of the step is the pulled arm's),
    from the agents' ``privacy`` stream, so a run's noise does not depend on the other runs of its
    batch or on the arms pulled, and no draw goes unused.
    """

    def __init__(
        self,
        epsilon: float,
        shape: tuple[int, int, int],
        clip: tuple[float, float],
        rng: BatchedRNG,
        horizon: int,
    ):
        self.counter = HybridCounter(
            shape[1:], horizon, epsilon, rng=rng, bounds=clip, noise_per="row"
        )
        self.value = np.zeros(shape)
        # flat (b, i, 0) position of each agent's counters (``arm`` comes from the engine,
        # which checked it, so ``row + arm`` stays in the agent's row)
        self._row = np.arange(shape[0] * shape[1], dtype=np.int64).reshape(shape[:2]) * shape[2]

    def insert(self, arm: np.ndarray, reward: np.ndarray, runs: np.ndarray | None = None):
        """``runs`` (B,) bool: insert only in these runs (the others took a communication step);
        the counter's per-step Laplace draw (one per agent) still happens for every run, so each
        run's noise depends only on its own sequence of steps."""
        flat = self._row + arm
        every_row = runs is None
        if not every_row:
            flat, reward = flat[runs], reward[runs]
        return self.insert_flat(flat.reshape(-1), reward.reshape(-1), every_row).reshape(flat.shape)

    def insert_flat(self, flat: np.ndarray, reward: np.ndarray, every_row: bool) -> np.ndarray:
        # the engine checked the arms and made the rewards; a counter takes one item per step
        """Add the clipped rewards at the flat (run, agent, arm) positions; return the sums."""
        released = self.counter.insert_flat(flat, np.asarray(reward, dtype=np.float64))
        self.value.reshape(-1)[flat] = released
        return released


def make_running_sums(
    epsilon: float,
    shape: tuple[int, int, int],
    clip: tuple[float, float],
    rng: BatchedRNG,
    horizon: int,
) -> RunningSums:
    """One counter per (run, agent, arm): exact sums for ``epsilon = inf``, hybrid counters
    (the mechanisms H_ij) otherwise; their noise comes from ``rng`` (the agents' ``privacy``
    child)."""
    if math.isinf(epsilon):
        return ExactSums(shape, clip)
    return HybridSums(epsilon, shape, clip, rng, horizon)


def privacy_width(n: Any, epsilon: float, ln_inv_delta: float) -> Any:
    """``upsilon(n)/n`` with ``upsilon(n) = (1/eps) ln(1/delta) ln^{1.5}(max(n, 1))`` (Algorithm 1
    line 12, Algorithm 2 line 14), in the dtype of ``n`` (numpy float64 for the numpy learners,
    float32 for the JAX ones: both engines call this function).

    Zero at ``n = 1`` (``ln 1 = 0``, as printed) and for ``epsilon = inf``. ``n`` must be >= 1 where
    used.
    """
    xp = namespace(n)
    if is_inf(epsilon):  # a traced epsilon is finite
        return xp.zeros_like(n, dtype=xp.result_type(n, 1.0))
    ln = xp.log(xp.maximum(n, 1.0))
    upsilon = ln_inv_delta / epsilon * (ln * xp.sqrt(ln))  # ln^1.5 (half the cost of ** 1.5)
    return upsilon / n


def timed(timing: str, paper: Step, latency: Step) -> Step:
    """The step function of ``timing`` (docs/writing-agents.md, "Communication steps"):
    ``paper`` for ``"paper"``, ``latency`` for ``"latency"``; both engines' ``act`` dispatch
    through it."""
    return paper if timing == "paper" else latency


# ------------------------------------------------------------------------------ validation


def _is_number(value: Any) -> bool:
    """True for real numbers other than bools."""
    return is_real(value)


def check_epsilon(agent_id: str, epsilon: Any) -> float:
    """``epsilon > 0``; ``math.inf`` selects the non-private variant."""
    return check_real(
        "epsilon",
        epsilon,
        hint="math.inf for the non-private variant",
        low=0.0,
        low_open=True,
        allow_inf=True,
        where=agent_id,
    )


def check_positive(agent_id: str, name: str, value: Any) -> float:
    """``value > 0`` (a finite number) or a ConfigError naming the agent and the field."""
    return check_real(name, value, low=0.0, low_open=True, where=agent_id)


def check_delta_horizon(agent_id: str, value: Any) -> int | None:
    """``None`` (use the environment's horizon T) or an int >= 2: the T in delta."""
    if value is None:
        return None
    return check_int(
        "delta_horizon",
        value,
        hint="or None: the env's horizon",
        minimum=2,
        maximum=MAX_HORIZON,
        where=agent_id,
    )


def check_clip(agent_id: str, clip: Any) -> tuple[float, float]:
    """``(lo, hi)`` with finite ``lo < hi``: the counters' input range."""
    ok = (
        isinstance(clip, tuple | list)
        and len(clip) == 2
        and all(_is_number(c) and math.isfinite(c) for c in clip)
        and clip[0] < clip[1]
    )
    if not ok:
        raise ConfigError(f"{agent_id}: clip: expected (lo, hi) with finite lo < hi, got {clip!r}")
    return float(clip[0]), float(clip[1])


def check_facts(agent_id: str, facts: FederationFacts, init_steps: int) -> None:
    """A multi-armed family and a horizon longer than the initialisation (``init_steps``: K
    round-robin steps, plus one step of message latency under ``timing="latency"``)."""
    require_family(agent_id, facts, MULTI_ARMED)
    if facts.horizon <= init_steps:
        latency = (
            " plus one step of message latency, during which arm 0 is pulled again"
            if init_steps > facts.num_arms
            else ""
        )
        raise ConfigError(
            f"{agent_id}: horizon: expected more than {init_steps} steps (the initialisation: "
            f"K = {facts.num_arms} round-robin steps{latency}), "
            f"got {facts.horizon}"
        )
