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

from agents.channel_check import check_channel_spec
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
from fedbandit_env.xp import is_zero, namespace

AGENT_ID = "ldp_ucb"
VERSION = 2  # 2: +inf index where n <= 0, ln of a total of at least 1 (was NaN)
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


def ldp_channel_spec(num_arms: int) -> dict[str, dict[str, Any]]:
    """``server`` of dim 2K (the arm indicator and the report) with aggregate ``"sum"``."""
    return {CHANNEL: {"kind": "server", "dim": 2 * num_arms, "aggregate": "sum"}}


@dataclass(frozen=True)
class LDPUCBParams:
    """What LDP-UCB reads at run time on one federation: N, K; the squashing (``"bounds"`` or
    ``"sigmoid"``, resolved from ``"auto"``) and the reward bounds ``lo``, ``hi``; the
    mechanism's constants: ``scale`` the Laplace scale of a report (1/epsilon, 0 when
    ``epsilon = inf`` or LDP-UCB-B), ``priv_coef`` 32/epsilon^2 of the index (0 likewise),
    ``keep`` the probability that randomized response keeps the bit (LDP-UCB-B; 1 otherwise)
    and ``width`` the w of the UCB width (1 for LDP-UCB-L); the configuration."""

    num_agents: int
    num_arms: int
    squash: str
    lo: float
    hi: float
    scale: float
    priv_coef: float
    keep: float
    width: float
    config: LDPUCBConfig


def ldp_params(config: LDPUCBConfig, facts: FederationFacts) -> LDPUCBParams:
    """The :class:`LDPUCBParams` of a validated configuration on a federation; checks the
    family, the ``server`` channel (aggregate "sum", participation 1) and the squashing's
    bounds. Pure: the numpy ``reset`` and the JAX ``make_params`` call it."""
    require_family(AGENT_ID, facts, MULTI_ARMED)
    K = facts.num_arms
    check_channel_spec(AGENT_ID, ldp_channel_spec(K), facts)
    participation = facts.channels[CHANNEL].get("participation", 1.0)
    if participation != 1.0:
        raise ConfigError(
            f"{AGENT_ID}: channels.{CHANNEL}.participation: expected 1.0 (the server sums "
            f"every agent's report), got {participation!r}"
        )
    lo, hi = facts.reward_bounds
    squash = config.squash
    if squash == "auto":
        squash = "bounds" if math.isfinite(lo) and math.isfinite(hi) else "sigmoid"
    if squash == "bounds" and not (math.isfinite(lo) and math.isfinite(hi)):
        raise ConfigError(
            f"{AGENT_ID}: squash: 'bounds' needs finite reward bounds, got {facts.reward_bounds}"
        )
    eps = config.epsilon
    scale, priv_coef, keep, width = 0.0, 0.0, 1.0, 1.0
    if config.mechanism == "laplace":
        scale = LaplaceMechanism(eps, 1.0).scale if math.isfinite(eps) else 0.0
        priv_coef = 32.0 / eps**2 if math.isfinite(eps) else 0.0
    else:
        e = math.exp(eps) if eps < 700 else math.inf
        keep = 1.0 if math.isinf(e) else e / (1.0 + e)  # P(report = b | b)
        rescale = config.rescale_width and math.isfinite(e)
        width = (e + 1.0) / (e - 1.0) if rescale else 1.0
    return LDPUCBParams(facts.num_agents, K, squash, lo, hi, scale, priv_coef, keep, width, config)


def sigmoid(x: Any) -> Any:
    """The logistic function of numpy (``1 / (1 + e^-x)``) or JAX arrays (``jax.nn.sigmoid``,
    its own stable form): the one operation whose spelling differs between the engines here."""
    if namespace(x) is np:
        return 1.0 / (1.0 + np.exp(-x))
    import jax

    return jax.nn.sigmoid(x)


def unit_reward(reward: Any, params: LDPUCBParams) -> Any:
    """Rewards mapped into [0, 1] (docs/ldp-ucb.md, first rule): a sigmoid, or affine through
    the finite bounds, clipped. Both engines call it (numpy float64, JAX float32)."""
    if params.squash == "sigmoid":
        return sigmoid(reward)
    xp = namespace(reward)
    return xp.clip((reward - params.lo) / (params.hi - params.lo), 0.0, 1.0)


def report(reward: Any, draws: Any, params: LDPUCBParams) -> Any:
    """The epsilon-LDP report (..., N) of each agent's reward, made at the agent, from its
    standard draws: LDP-UCB-L ``r + scale * draws`` (``draws`` (..., N) standard Laplace; None
    and unused when the scale is 0); LDP-UCB-B a Bernoulli(r) bit (``draws[..., 0, :] < r``)
    through randomized response (kept where ``draws[..., 1, :] < keep``), ``draws`` (..., 2, N)
    uniforms. Both engines call it."""
    r = unit_reward(reward, params)
    if params.config.mechanism == "laplace":
        return r if is_zero(params.scale) else r + params.scale * draws
    xp = namespace(r, draws)
    bit = draws[..., 0, :] < r
    keep = draws[..., 1, :] < params.keep
    return xp.where(keep, bit, ~bit).astype(r.dtype)


def ldp_index(counts: Any, sums: Any, params: LDPUCBParams) -> Any:
    """The index (..., K) of the global statistics (``counts`` n_a from the pseudo-count 1, as
    floats, and ``sums`` S_a); LDP-UCB-L's forced exploration first (+inf at the lowest forced
    arm, -inf elsewhere). Guard (docs/ldp-ucb.md, "Counts"): an arm with no count (n <= 0: none
    yet, or an attack's negative indicators) has +inf, the index of an arm without a sample,
    and the total enters ln as at least 1; before, both gave NaN. Both engines call it."""
    xp = namespace(counts, sums)
    positive = counts > 0
    n = xp.where(positive, counts, 1.0)
    total = xp.maximum(counts.sum(axis=-1, keepdims=True), 1.0)
    log_n = xp.log(total)
    value = sums / n + params.width * xp.sqrt(2.0 * log_n / n)
    if params.config.mechanism == "laplace":
        value = value + xp.sqrt(params.priv_coef * log_n / n)
        value = xp.where(positive, value, xp.inf)
        pulls = xp.maximum(counts.sum(axis=-1, keepdims=True), 0.0)
        forced = counts <= 4.0 * xp.log(pulls + 1.0)
        first = forced & (xp.cumsum(forced, axis=-1) == 1)  # the lowest forced arm
        return xp.where(forced.any(axis=-1, keepdims=True), xp.where(first, xp.inf, -xp.inf), value)
    return xp.where(positive, value, xp.inf)


class LDPUCB(TeamPolicy):
    """Batched LDP-UCB (B runs, N agents sharing a server); see the module docstring."""

    agent_id = AGENT_ID
    version = VERSION
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
        return ldp_channel_spec(config.num_arms)

    def reset(self, facts: FederationFacts, rng: BatchedRNG) -> None:
        """Pseudo-count 1 per arm, the mechanism's noise stream; the squashing and the
        mechanism's constants from :func:`ldp_params`."""
        cfg = self.config
        self.params = p = ldp_params(cfg, facts)  # checks the facts
        B, N, K = facts.num_runs, facts.num_agents, facts.num_arms
        self.squash, self.lo, self.hi = p.squash, p.lo, p.hi
        self.N, self.K = N, K
        self.counts = np.ones((B, K))  # pseudo-count 1 per arm (the authors' code)
        self.sums = np.zeros((B, K))
        self.outgoing = np.zeros((B, N, 2 * K))
        privacy = rng.child("privacy")
        self.width = p.width
        if cfg.mechanism == "laplace":
            self.scale, self.priv_coef = p.scale, p.priv_coef
            self._noise = LaplaceStream(privacy, (N,)) if self.scale > 0 else None
        else:
            self._bits = privacy.buffered("uniform", (2, N))
            self.keep = p.keep
        self._rows = np.indices((B, N))
        self._tiebreak = rng.child("tiebreak").buffered("uniform", (N,))
        self._send = np.ones((B, N), dtype=bool)
        self._quiet = np.zeros((B, N), dtype=bool)
        self._talk = np.zeros(B, dtype=bool)
        self._idle = np.zeros((B, N), dtype=np.int64)

    # ------------------------------------------------------------------ the client side
    def unit_reward(self, reward: np.ndarray) -> np.ndarray:
        """Rewards mapped into [0, 1] (affine through the bounds, or a sigmoid)."""
        return unit_reward(reward, self.params)

    def report(self, reward: np.ndarray) -> np.ndarray:
        """The epsilon-LDP report (B, N) of each agent's reward, made at the agent."""
        if self.config.mechanism == "laplace":
            draws = None if self._noise is None else self._noise.next()
        else:
            draws = self._bits.next()  # (B, 2, N): the Bernoulli(r) draw, then randomized response
        return report(reward, draws, self.params)

    # ------------------------------------------------------------------ the learner side
    def index(self) -> np.ndarray:
        """The index (B, K) of the global statistics; forced exploration (Laplace) first
        (:func:`ldp_index`)."""
        return ldp_index(self.counts, self.sums, self.params)

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
