"""LDP-UCB (Ren, Zhou, Liu & Shroff), UCB on locally private rewards, registered as ``ldp_ucb``.

Decisions and their reasons: docs/ldp-ucb.md. The *local* trust model: every agent privatizes
each reward itself, before it leaves the agent; the server (and every other agent) only ever sees
the privatized report. Federated form: N agents pull every round; after each pull round, a
communication step (docs/writing-agents.md, "Communication steps") in which every agent uploads,
over a ``server`` channel (aggregate ``"sum"``, full participation, dim 2K), the indicator of its
arm (K floats, in the clear) and its private report at that arm (K floats); the server sums the N
uploads and broadcasts the sums, so every agent holds the same global statistics: ``n_a``, the
number of reports of arm a (starting at the pseudo-count 1, as the authors' code), and ``S_a`` their
sum (starting at 0); ``n = sum_a n_a``. With N = 1 this is the paper's single learner.

Rewards are first mapped into [0, 1]: affinely through the environment's finite reward bounds,
or through a sigmoid when they are unbounded (Gaussian rewards, the authors' code's squashing);
``squash`` forces either.

* ``mechanism="laplace"`` (LDP-UCB-L): the report is ``r + Lap(1/epsilon)``
  (:class:`fedbandit_env.privacy.LaplaceMechanism`, sensitivity 1, drawn from the agent's
  ``privacy`` stream). Arms are forced-explored while ``n_a <= 4 ln(n + 1)`` (the lowest such
  arm); otherwise the index is ``S_a/n_a + sqrt(2 ln n / n_a) + sqrt(32 ln n / (epsilon^2 n_a))``
  (the authors' code).
* ``mechanism="bernoulli"`` (LDP-UCB-B): the report is one bit, 1 with probability
  ``(r e^epsilon + 1 - r)/(1 + e^epsilon)`` (a Bernoulli(r) draw passed through randomized
  response; one uniform from the ``privacy`` stream); UCB1 on the bits,
  ``S_a/n_a + w sqrt(2 ln n / n_a)`` with ``w = (e^epsilon + 1)/(e^epsilon - 1)`` by default (the
  paper's rescaled width, as recalled; docs/ldp-ucb.md) or ``w = 1`` with ``rescale_width=False``
  (the authors' code).

The arm of maximal index is pulled, ties broken uniformly (each agent its own ``tiebreak`` stream).
A run takes 2T - 1 engine steps. Privacy (declared ``privacy_epsilon = epsilon``,
``privacy_trust_model = "local"``): each reward is released once, through an epsilon-LDP
mechanism, so every report is epsilon-LDP with respect to the reward it carries; the arm ids are
not private. ``epsilon = inf`` sends the exact (squashed) reward (Bernoulli: a Bernoulli(r) bit).
Not checked against the paper's text: the rescaled width of LDP-UCB-B.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from agents.channel_check import check_channels
from fedbandit_env.config import EnvConfig
from fedbandit_env.engine import COMMUNICATION, VecObservation
from fedbandit_env.errors import ConfigError
from fedbandit_env.kernels import argmax_one_uniform
from fedbandit_env.policy import (
    MULTI_ARMED,
    FederationFacts,
    TeamAction,
    TeamPolicy,
    require_family,
)
from fedbandit_env.privacy import LaplaceMechanism
from fedbandit_env.privacy._random import LaplaceStream
from fedbandit_env.seeding import BatchedRNG
from fedbandit_env.validation import check_flag, check_real

AGENT_ID = "ldp_ucb"
CHANNEL = "server"
MECHANISMS = ("laplace", "bernoulli")
SQUASHES = ("auto", "bounds", "sigmoid")


@dataclass(frozen=True)
class LDPUCBConfig:
    """Hyperparameters of LDP-UCB: ``epsilon`` (> 0, ``inf``: exact rewards) of each report;
    ``mechanism`` ``"laplace"`` (LDP-UCB-L) or ``"bernoulli"`` (LDP-UCB-B); ``rescale_width``
    (LDP-UCB-B only); ``squash`` ``"auto"``, ``"bounds"`` or ``"sigmoid"`` (rewards into [0, 1])."""

    epsilon: float = 1.0
    mechanism: str = "laplace"
    rescale_width: bool = True
    squash: str = "auto"

    def __post_init__(self) -> None:
        eps = check_real(
            "epsilon", self.epsilon, low=0.0, low_open=True, allow_inf=True, where=AGENT_ID
        )
        object.__setattr__(self, "epsilon", eps)
        if not isinstance(self.mechanism, str) or self.mechanism not in MECHANISMS:
            raise ConfigError(
                f"{AGENT_ID}: mechanism: expected one of {list(MECHANISMS)}, got {self.mechanism!r}"
            )
        object.__setattr__(
            self, "rescale_width", check_flag("rescale_width", self.rescale_width, where=AGENT_ID)
        )
        if not isinstance(self.squash, str) or self.squash not in SQUASHES:
            raise ConfigError(
                f"{AGENT_ID}: squash: expected one of {list(SQUASHES)}, got {self.squash!r}"
            )


class LDPUCB(TeamPolicy):
    """Batched LDP-UCB (B runs, N agents sharing a server); see the module docstring."""

    agent_id = AGENT_ID
    version = 2  # 2: +inf index where n <= 0, ln of a total of at least 1 (was NaN)
    privacy_trust_model = "local"

    def __init__(
        self,
        epsilon: float = 1.0,
        mechanism: str = "laplace",
        rescale_width: bool = True,
        squash: str = "auto",
    ):
        self.config = LDPUCBConfig(epsilon, mechanism, rescale_width, squash)

    @property
    def privacy_epsilon(self) -> float:
        """Declared guarantee: each reward report is epsilon-LDP (``inf``: not private)."""
        return self.config.epsilon

    def channel_spec(self, config: EnvConfig) -> dict[str, dict[str, Any]]:
        return {CHANNEL: {"kind": "server", "dim": 2 * config.num_arms, "aggregate": "sum"}}

    def reset(self, facts: FederationFacts, rng: BatchedRNG) -> None:
        """Pseudo-count 1 per arm, the mechanism's noise stream and constants, the squashing."""
        cfg = self.config
        require_family(AGENT_ID, facts, MULTI_ARMED)
        B, N, K = facts.num_runs, facts.num_agents, facts.num_arms
        check_channels(self, facts)
        participation = facts.channels[CHANNEL].get("participation", 1.0)
        if participation != 1.0:
            raise ConfigError(
                f"{AGENT_ID}: channels.{CHANNEL}.participation: expected 1.0 (the server sums "
                f"every agent's report), got {participation!r}"
            )
        lo, hi = facts.reward_bounds
        squash = cfg.squash
        if squash == "auto":
            squash = "bounds" if math.isfinite(lo) and math.isfinite(hi) else "sigmoid"
        if squash == "bounds" and not (math.isfinite(lo) and math.isfinite(hi)):
            raise ConfigError(
                f"{AGENT_ID}: squash: 'bounds' needs finite reward bounds, got {facts.reward_bounds}"
            )
        self.squash, self.lo, self.hi = squash, lo, hi
        self.N, self.K = N, K
        eps = cfg.epsilon
        self.counts = np.ones((B, K))  # pseudo-count 1 per arm (the authors' code)
        self.sums = np.zeros((B, K))
        self.outgoing = np.zeros((B, N, 2 * K))
        privacy = rng.child("privacy")
        if cfg.mechanism == "laplace":
            self.scale = LaplaceMechanism(eps, 1.0).scale if math.isfinite(eps) else 0.0
            self._noise = LaplaceStream(privacy, (N,)) if self.scale > 0 else None
            self.width = 1.0
            self.priv_coef = 32.0 / eps**2 if math.isfinite(eps) else 0.0
        else:
            self._bits = privacy.buffered("uniform", (2, N))
            e = math.exp(eps) if eps < 700 else math.inf
            self.keep = 1.0 if math.isinf(e) else e / (1.0 + e)  # P(report = b | b)
            rescale = cfg.rescale_width and math.isfinite(e)
            self.width = (e + 1.0) / (e - 1.0) if rescale else 1.0
        self._rows = np.indices((B, N))
        self._tiebreak = rng.child("tiebreak").buffered("uniform", (N,))
        self._send = np.ones((B, N), dtype=bool)
        self._quiet = np.zeros((B, N), dtype=bool)
        self._talk = np.zeros(B, dtype=bool)
        self._idle = np.zeros((B, N), dtype=np.int64)

    # ------------------------------------------------------------------ the client side
    def unit_reward(self, reward: np.ndarray) -> np.ndarray:
        """Rewards mapped into [0, 1] (affine through the bounds, or a sigmoid)."""
        if self.squash == "sigmoid":
            return 1.0 / (1.0 + np.exp(-reward))
        return np.clip((reward - self.lo) / (self.hi - self.lo), 0.0, 1.0)

    def report(self, reward: np.ndarray) -> np.ndarray:
        """The epsilon-LDP report (B, N) of each agent's reward, made at the agent."""
        r = self.unit_reward(reward)
        if self.config.mechanism == "laplace":
            return r if self._noise is None else r + self.scale * self._noise.next()
        u = self._bits.next()  # (B, 2, N): the Bernoulli(r) draw, then randomized response
        bit = u[:, 0] < r
        keep = u[:, 1] < self.keep
        return np.where(keep, bit, ~bit).astype(np.float64)

    # ------------------------------------------------------------------ the learner side
    def index(self) -> np.ndarray:
        """The index (B, K) of the global statistics; forced exploration (Laplace) first."""
        # guard (docs/ldp-ucb.md, "Counts"): an arm with no count (n <= 0: none yet, or an
        # attack's negative indicators) has +inf, the index of an arm without a sample, and the
        # total enters ln as at least 1; before, both gave NaN
        positive = self.counts > 0
        n, s = np.where(positive, self.counts, 1.0), self.sums
        total = np.maximum(self.counts.sum(axis=1, keepdims=True), 1.0)
        log_n = np.log(total)
        value = s / n + self.width * np.sqrt(2.0 * log_n / n)
        if self.config.mechanism == "laplace":
            value = value + np.sqrt(self.priv_coef * log_n / n)
            value = np.where(positive, value, np.inf)
            pulls = np.maximum(self.counts.sum(axis=1, keepdims=True), 0.0)
            forced = self.counts <= 4.0 * np.log(pulls + 1.0)
            first = forced & (np.cumsum(forced, axis=1) == 1)  # the lowest forced arm
            return np.where(
                forced.any(axis=1, keepdims=True), np.where(first, np.inf, -np.inf), value
            )
        return np.where(positive, value, np.inf)

    def act(self, obs: VecObservation) -> TeamAction:
        """After a pull: upload the arm indicator and the private report (a communication
        step); when the server's sums arrive: update the global statistics and choose."""
        if obs.step > 0 and obs.phase[0] != COMMUNICATION:  # after a pull: upload the reports
            b, i = self._rows
            K = self.K
            self.outgoing = np.zeros_like(self.outgoing)
            self.outgoing[b, i, obs.last_arm] = 1.0
            self.outgoing[b, i, K + obs.last_arm] = self.report(obs.last_reward)
            return TeamAction(self._idle, {CHANNEL: (self._send, self.outgoing)}, self._talk)
        if obs.step > 0:  # the server's sums arrived
            total = obs.deliveries[CHANNEL].aggregate
            self.counts += total[:, : self.K]
            self.sums += total[:, self.K :]
        index = np.broadcast_to(self.index()[:, None, :], (*self._idle.shape, self.K))
        arms = argmax_one_uniform(index, self._tiebreak.next())
        return TeamAction(arms, {CHANNEL: (self._quiet, self.outgoing)})
