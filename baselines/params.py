"""The index baselines' run-time parameters (docs/writing-agents.md, "Params"): a frozen
:class:`IndexParams` made by the pure :func:`index_params` from a learner's validated
configuration and the federation's public facts. The numpy learners' ``reset`` and the JAX
learners' ``make_params`` both call it, so a derived constant (the UCB scale, KL-UCB's
bisection depth, the reward bounds mapped to [0, 1]) has one definition.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from baselines.config import (
    DiscountedUCBConfig,
    EpsilonGreedyConfig,
    KLUCBConfig,
    SlidingWindowUCBConfig,
    ThompsonBetaConfig,
    ThompsonGaussianConfig,
    UCB1Config,
    check_bounds,
)
from fedbandit_env.errors import ConfigError
from fedbandit_env.policy import MULTI_ARMED, FederationFacts, require_channel, require_family

CHANNEL = "neighbors"
"""The channel of the share-statistics variants: padded ``neighbors`` of dim 2M."""


@dataclass(frozen=True)
class IndexParams:
    """What an index learner reads at run time, for one federation.

    ``num_agents``, ``num_arms``; ``degree`` the neighbour slots of a share-statistics variant
    (0 for an independent one); ``alpha`` and ``scale`` (UCB1; ``scale`` also Gaussian Thompson
    sampling); ``c`` and ``iterations`` (KL-UCB: the ``c ln ln t`` weight and the bisection's
    halvings); ``lo`` and ``hi`` (the reward range mapped onto [0, 1]: KL-UCB and Beta Thompson
    sampling); ``epsilon`` (epsilon-greedy's exploration rate)."""

    num_agents: int
    num_arms: int
    degree: int = 0
    alpha: float = 2.0
    scale: float = 1.0
    c: float = 0.0
    iterations: int = 0
    lo: float = 0.0
    hi: float = 1.0
    epsilon: float = 0.0


def default_scale(facts: FederationFacts) -> float:
    """Reward scale for UCB-style bonuses: the reward range when bounded, else 1 (the
    sub-Gaussian parameter of sigma = 1 Gaussian rewards, the gossip paper's experiments)."""
    lo, hi = facts.reward_bounds
    return float(hi - lo) if math.isfinite(lo) and math.isfinite(hi) else 1.0


def unit_interval_bounds(agent_id: str, facts: FederationFacts, bounds: Any) -> tuple[float, float]:
    """The reward range [lo, hi] mapped to [0, 1]: the env's bounds, or the ``bounds`` kwarg when
    the env's rewards are unbounded (rewards are then clipped to it)."""
    if bounds is None:
        lo, hi = facts.reward_bounds
        if not (math.isfinite(lo) and math.isfinite(hi)):
            raise ConfigError(
                f"{agent_id}: reward: expected bounded rewards (bernoulli or clipped_gaussian), "
                f"got bounds {facts.reward_bounds}; pass bounds=(low, high) to clip them"
            )
        return float(lo), float(hi)
    return check_bounds(agent_id, bounds)


def index_params(agent_id: str, config: Any, facts: FederationFacts, shared: bool) -> IndexParams:
    """The :class:`IndexParams` of index learner ``agent_id`` with configuration ``config`` (one
    of the zoo's config dataclasses, already validated; another learner's, or None, gives the
    shapes alone) on a federation: checks the family (and, for a share-statistics variant, the
    ``neighbors`` channel of dim 2M) and derives the constants. Pure: the same arguments give
    the same params, and nothing is stored."""
    require_family(agent_id, facts, MULTI_ARMED)
    n, m = facts.num_agents, facts.num_arms
    degree = 0
    if shared:
        require_channel(agent_id, facts, CHANNEL, "neighbors", 2 * m)
        degree = int(facts.topology.neighbors.shape[1])
    base = {"num_agents": n, "num_arms": m, "degree": degree}
    if isinstance(config, UCB1Config):
        scale = default_scale(facts) if config.scale is None else config.scale
        return IndexParams(**base, alpha=config.alpha, scale=scale)
    if isinstance(config, KLUCBConfig):
        lo, hi = unit_interval_bounds(agent_id, facts, config.bounds)
        iterations = math.ceil(math.log2(1.0 / config.precision))
        return IndexParams(**base, c=config.c, iterations=iterations, lo=lo, hi=hi)
    if isinstance(config, EpsilonGreedyConfig):
        return IndexParams(**base, epsilon=config.epsilon)
    if isinstance(config, ThompsonBetaConfig):
        lo, hi = unit_interval_bounds(agent_id, facts, config.bounds)
        return IndexParams(**base, lo=lo, hi=hi)
    if isinstance(config, ThompsonGaussianConfig):
        scale = default_scale(facts) if config.scale is None else config.scale
        return IndexParams(**base, scale=scale)
    return IndexParams(**base)  # a user's subclass: its own setup reads its own config


def statistics_channel_spec(shared: bool, num_arms: int) -> dict[str, dict[str, Any]] | None:
    """The channel a share-statistics variant asks for: padded ``neighbors`` of dim 2M (an
    independent variant asks for none)."""
    return {CHANNEL: {"kind": "neighbors", "dim": 2 * num_arms}} if shared else None


@dataclass(frozen=True)
class TeamShape:
    """The run-time parameters of the trivial learners (``uniform``, ``flooding``): the
    federation's N and M."""

    num_agents: int
    num_arms: int


def flooding_channel_spec(num_arms: int) -> dict[str, dict[str, Any]]:
    """``flooding``'s channel: ``neighbors`` of dim M with the aggregating ``max`` delivery
    (the max over the neighbours is all it needs: no padded copy)."""
    return {CHANNEL: {"kind": "neighbors", "dim": num_arms, "reduce": "max"}}


def trivial_params(agent_id: str, facts: FederationFacts, flooding: bool) -> TeamShape:
    """:class:`TeamShape` of ``uniform`` or ``flooding`` (which checks its ``neighbors``
    channel of dim M)."""
    if flooding:
        require_channel(agent_id, facts, CHANNEL, "neighbors", facts.num_arms)
    return TeamShape(facts.num_agents, facts.num_arms)


@dataclass(frozen=True)
class PooledParams:
    """The run-time parameters of ``centralized_ucb1``: N, M and the bonus ``scale``."""

    num_agents: int
    num_arms: int
    scale: float


def pooled_params(config: Any, facts: FederationFacts) -> PooledParams:
    """:class:`PooledParams` of ``centralized_ucb1`` with its validated configuration (a
    multi-armed family only)."""
    require_family(config.agent_id, facts, MULTI_ARMED)
    return PooledParams(facts.num_agents, facts.num_arms, config.scale)


@dataclass(frozen=True)
class LinUCBParams:
    """The run-time parameters of ``linucb`` and ``centralized_linucb``: N, the K actions of a
    decision set, the dimension d, and OFUL's ``lam``, ``sigma``, ``alpha``, ``S`` and
    ``beta_scale``."""

    num_agents: int
    num_actions: int
    dim: int
    lam: float
    sigma: float
    alpha: float
    S: float
    beta_scale: float


def linucb_params(config: Any, facts: FederationFacts) -> LinUCBParams:
    """:class:`LinUCBParams` of a LinUCB learner with its validated configuration (the linear
    family only; the memory the Gram matrices take is checked)."""
    from fedbandit_env.kernels import check_linear

    d = check_linear(config.agent_id, facts)
    cfg = config
    return LinUCBParams(facts.num_agents, facts.num_arms, d, cfg.lam, cfg.sigma, cfg.alpha,
                        cfg.S, cfg.beta_scale)  # fmt: skip


@dataclass(frozen=True)
class ForgettingParams:
    """What the non-stationary learners read at run time (:mod:`baselines.nonstationary`): N,
    M, the bonus ``scale * sqrt(xi ln t / n)``'s ``xi`` and ``scale``, D-UCB's discount
    ``gamma`` (1 for SW-UCB), SW-UCB's ``window`` and ``slots`` = min(window, T), the pulls its
    ring of past pulls holds (both 0 for D-UCB)."""

    num_agents: int
    num_arms: int
    xi: float
    scale: float
    gamma: float = 1.0
    window: int = 0
    slots: int = 0


def discount_tuning(horizon: int, changes: int, scale: float) -> float:
    """Garivier and Moulines' (2011) D-UCB discount for T steps with ``changes`` breakpoints
    Upsilon_T: ``1 - sqrt(Upsilon_T / T) / (4 B)``, B the reward bound (Sec. 3, the tuning of
    their D-UCB regret bound)."""
    return 1.0 - math.sqrt(changes / horizon) / (4.0 * scale)


def window_tuning(horizon: int, changes: int, scale: float) -> int:
    """Garivier and Moulines' (2011) SW-UCB window for T steps with ``changes`` breakpoints:
    ``ceil(2 B sqrt(T ln T / Upsilon_T))`` (Sec. 4, the tuning of their SW-UCB regret bound),
    at least 1."""
    return max(1, math.ceil(2.0 * scale * math.sqrt(horizon * math.log(horizon) / changes)))


def forgetting_params(
    agent_id: str, config: DiscountedUCBConfig | SlidingWindowUCBConfig, facts: FederationFacts
) -> ForgettingParams:
    """The :class:`ForgettingParams` of ``discounted_ucb`` or ``sw_ucb`` on a federation: the
    multi-armed family, the bonus scale (None: the reward range, :func:`default_scale`) and the
    discount or window (None: the paper's tuning for the horizon). Pure."""
    require_family(agent_id, facts, MULTI_ARMED)
    scale = default_scale(facts) if config.scale is None else config.scale
    base = {"num_agents": facts.num_agents, "num_arms": facts.num_arms, "xi": config.xi,
            "scale": scale}  # fmt: skip
    bound = scale if scale > 0 else 1.0  # the tuning's reward bound B
    if isinstance(config, DiscountedUCBConfig):
        gamma = config.gamma
        if gamma is None:
            gamma = discount_tuning(facts.horizon, config.changes, bound)
            if not 0.0 < gamma <= 1.0:
                raise ConfigError(
                    f"{agent_id}: gamma: the default 1 - sqrt(changes / T) / (4 B) is {gamma:g}, "
                    f"expected a number in (0, 1]; pass gamma or fewer changes"
                )
        return ForgettingParams(**base, gamma=float(gamma))
    window = config.window
    if window is None:
        window = window_tuning(facts.horizon, config.changes, bound)
    return ForgettingParams(**base, window=int(window), slots=min(int(window), facts.horizon))
