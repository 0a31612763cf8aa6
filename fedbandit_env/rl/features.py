"""Per-agent sufficient statistics as a flat feature vector for learning agents (docs/rl.md).

:class:`StatisticsFeatures` is the batched computation shared by every RL-facing view (the
PettingZoo observation wrapper, the SB3 VecEnv adapter, the Gymnasium single-agent view and
``baselines.SB3Policy``). For B runs and N agents it keeps each agent's own per-arm counts and
reward sums and the latest statistics each neighbour sent, and produces features of shape
(B, N, 4M + 1), float32, the same layout for every agent (so one shared policy serves them all):

| slice | feature | range |
|---|---|---|
| ``[0, M)`` | own pull counts, ``log1p(n_k) / log1p(T)`` | [0, 1] |
| ``[M, 2M)`` | own empirical means, rescaled by the reward bounds (0 when unpulled) | [0, 1] (bounded rewards) |
| ``[2M, 3M)`` | neighbours' aggregated counts, ``log1p(sum_j n_jk) / log1p(D T)`` | [0, 1] |
| ``[3M, 4M)`` | neighbours' aggregated means ``sum_j s_jk / sum_j n_jk``, rescaled (0 when none) | [0, 1] (bounded rewards) |
| ``4M`` | time fraction ``t / T`` | [0, 1] |

with D the maximum degree. The features are for the multi-armed families only: on the linear
family (``LinearContextual-v0``, ``LinearPaper-v0``, ``ClassificationContextual-v0``) the arm
index points into a decision set that changes every step, so per-arm statistics say nothing and
the decision set is not in the features; every view built on them raises a ``ConfigError``
naming the family there. For unbounded rewards (Gaussian) means are not rescaled and the Box
is unbounded in those slices.

**Communication protocol.** The learner's action is only an arm; the features layer does the
talking for it, exactly like the ``*_shared`` baselines (:mod:`baselines.index`): every agent
sends its own ``[counts, sums]`` (2M floats) each step over the **statistics channel**, the
channel named ``neighbors`` (kind ``neighbors``, dim 2M), and the neighbour features aggregate the
latest message of each neighbour. The protocol has a name, :data:`STATISTICS_PROTOCOL`
(``"counts_sums"``); a team policy that sends ``[counts, sums]`` on a channel declares it in its
``message_protocols`` mapping (``{"neighbors": "counts_sums"}``, see :func:`declared_protocol`).
A channel's kind and dim alone do not say what it carries (``dp_dec_ucb`` sends consensus
estimates over a ``neighbors`` channel of dim 2M too), so views that mix the features layer with
other learners (the single-agent view) share only with peers that declare the protocol. Where the
features layer drives every agent (the PettingZoo wrapper, the SB3 adapter, ``SB3Policy``) it is
the only sender, and a matching channel carries the protocol by construction. Without such a
channel (or with ``share=False``) nothing is sent and the neighbour slices stay 0. Agent i's
features use only row i of what it observed, so learners built on them respect the light cone.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from gymnasium import spaces

from fedbandit_env.engine import VecObservation
from fedbandit_env.errors import ConfigError
from fedbandit_env.policy import MULTI_ARMED, FederationFacts, check_event_time, require_family
from fedbandit_env.validation import ConfigTypeError

CHANNEL = "neighbors"
"""Name of the statistics channel."""
STATISTICS_PROTOCOL = "counts_sums"
"""Name of the protocol: each agent sends its own ``[counts (M), sums (M)]`` every step."""


def statistics_channel(num_arms: int) -> dict[str, dict[str, Any]]:
    """The channel spec the features layer talks over."""
    return {CHANNEL: {"kind": "neighbors", "dim": 2 * num_arms}}


def has_statistics_channel(facts: FederationFacts) -> bool:
    """The environment has a channel of the statistics channel's name, kind and dim (it says
    nothing about what other learners send on it: see :func:`declared_protocol`)."""
    have = facts.channels.get(CHANNEL)
    return have is not None and have["kind"] == "neighbors" and have["dim"] == 2 * facts.num_arms


def declared_protocol(policy: Any, channel: str = CHANNEL) -> str | None:
    """The protocol ``policy`` declares for its messages on ``channel`` (its
    ``message_protocols`` mapping from channel name to protocol name), or None."""
    protocols = getattr(policy, "message_protocols", None) or {}
    return protocols.get(channel)


class _LockStep:
    """The RL views' features, for :func:`check_event_time`: no event-time option accepted."""

    lock_step_reason = "the RL views' features fold every agent's pull and reward at every step"

    def __init__(self, owner: str):
        self.agent_id = owner


class StatisticsFeatures:
    """Batched per-agent sufficient statistics and their flat features (module doc)."""

    def __init__(self, facts: FederationFacts, share: bool | None = None, owner: str = "features"):
        """``share``: send and read statistics (None: iff the env has the statistics channel);
        ``owner`` names the learner in error messages."""
        # per-arm statistics of a fixed arm set: meaningless where the arms are per-step feature
        # vectors (the linear family), whose decision sets these features would not show
        require_family(owner, facts, MULTI_ARMED)
        # the features fold every agent's pull and reward at every step (docs/time.md)
        check_event_time(_LockStep(owner), facts)
        available = has_statistics_channel(facts)
        if share is not None and not isinstance(share, bool | np.bool_):
            raise ConfigTypeError(f"{owner}: share: expected None, True or False, got {share!r}")
        if share is None:
            share = available
        if share and not available:
            raise ConfigError(
                f"{owner}: channels.{CHANNEL}: expected a 'neighbors' channel of dim "
                f"{2 * facts.num_arms} to share statistics, got {facts.channels.get(CHANNEL)}"
            )
        self.share = bool(share)
        self.num_runs, self.num_agents = facts.num_runs, facts.num_agents
        self.num_arms, self.horizon = facts.num_arms, facts.horizon
        self.degree = int(facts.topology.neighbors.shape[1])
        lo, hi = facts.reward_bounds
        self.bounded = math.isfinite(lo) and math.isfinite(hi)
        self.lo, self.width = (float(lo), float(hi - lo)) if self.bounded else (0.0, 1.0)
        self.dim = 4 * self.num_arms + 1
        self._b, self._i = np.indices((self.num_runs, self.num_agents))
        self._send = np.ones((self.num_runs, self.num_agents), dtype=bool)
        self.reset()

    def observation_space(self) -> spaces.Box:
        M = self.num_arms
        low = np.zeros(self.dim, dtype=np.float32)
        high = np.ones(self.dim, dtype=np.float32)
        if not self.bounded:
            low[M : 2 * M] = low[3 * M : 4 * M] = -np.inf
            high[M : 2 * M] = high[3 * M : 4 * M] = np.inf
        return spaces.Box(low, high, dtype=np.float32)

    def reset(self) -> None:
        shape = (self.num_runs, self.num_agents, self.num_arms)
        self.counts = np.zeros(shape)
        self.sums = np.zeros(shape)
        self.latest = np.zeros((*shape[:2], self.degree, 2 * self.num_arms))
        self.step = 0

    def update(self, obs: VecObservation) -> None:
        """Fold in one observation (the last pull, reward and deliveries)."""
        self.step = int(obs.step)
        if obs.step > 0:
            self.counts[self._b, self._i, obs.last_arm] += 1.0
            self.sums[self._b, self._i, obs.last_arm] += obs.last_reward
        if self.share:
            heard = obs.deliveries[CHANNEL]
            self.latest = np.where(heard.mask[..., None], heard.payload, self.latest)

    def messages(self) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """This step's outgoing statistics (empty when not sharing)."""
        if not self.share:
            return {}
        return {CHANNEL: (self._send, np.concatenate([self.counts, self.sums], axis=-1))}

    def _means(self, n: np.ndarray, s: np.ndarray) -> np.ndarray:
        mean = (s / np.maximum(n, 1.0) - self.lo) / self.width
        if self.bounded:
            mean = np.clip(mean, 0.0, 1.0)
        return np.where(n > 0, mean, 0.0)

    def features(self) -> np.ndarray:
        """(B, N, 4M + 1) float32 features of the current statistics."""
        M = self.num_arms
        received = self.latest.sum(axis=2)
        n_nb, s_nb = received[..., :M], received[..., M:]
        t = np.full((self.num_runs, self.num_agents, 1), self.step / self.horizon)
        out = np.concatenate(
            [
                np.log1p(self.counts) / math.log1p(self.horizon),
                self._means(self.counts, self.sums),
                np.log1p(n_nb) / math.log1p(max(self.degree, 1) * self.horizon),
                self._means(n_nb, s_nb),
                t,
            ],
            axis=-1,
        )
        return out.astype(np.float32)
