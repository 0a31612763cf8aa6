"""Gossip_UCB and Fed_UCB (Zhu, Zhu, Liu & Liu, "Federated Bandit: A Gossiping Approach").

Gossip_UCB is Algorithm 1 of the paper, Fed_UCB is Algorithm 4 (Algorithm 1 on the private
means of Algorithms 2 and 3). Both are batched team policies: every array below is over
(runs B, agents N, arms M), and the names are the paper's:

==========  =========================================================================
``n``       n_{i,k}(t): own pulls of arm k, the initialization pull included
``S``       own reward sums (the numerator of Eq. (2), the initialization sample included)
``xbar``    X̄_{i,k}(t) of Eq. (2); Fed_UCB: the private mean X̄̃_{i,k}(t) of Algorithm 3
``theta``   ϑ_{i,k}(t): the gossiped estimate of the global mean (Fed_UCB: ϑ̃)
``ntil``    ñ_{i,k}(t+1): the estimate of max_j n_{j,k}, Eq. (1)
==========  =========================================================================

Two channels carry the messages: ``neighbors`` (every agent sends ñ to every neighbour each
round, Eq. (1)) and ``gossip`` (the environment activates one uniformly random edge per round;
its endpoints exchange ϑ, Algorithm 1 lines 17-22).

A round t is one env step. In env step M + t an agent submits its arm a_i(t) with ñ_i(t) on
``neighbors`` and ϑ_i(t-1) on ``gossip``; that step's observation holds its reward, the
neighbours' ñ_j(t) and, on the active edge, the partner's ϑ_j(t-1). Env steps 1..M are the
initialization (arm k at step k + 1, all agents at once, no messages), so the environment's
horizon is T + M and the t of the bonus counts rounds after the initialization. How each
ambiguity of the paper is resolved is written down in docs/gossip.md, "Decisions".
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from agents.channel_check import check_channel_spec
from agents.field_common import neighbour_max
from agents.gossip_index import decide, exploration_bonus, gossip_update
from agents.gossip_theory import alpha1 as paper_alpha1
from fedbandit_env.config import EnvConfig
from fedbandit_env.engine import VecObservation
from fedbandit_env.errors import ConfigError
from fedbandit_env.kernels import ArmTable, check_number
from fedbandit_env.policy import (
    MULTI_ARMED,
    FederationFacts,
    TeamAction,
    TeamPolicy,
    require_family,
)
from fedbandit_env.privacy import TreeCounter
from fedbandit_env.privacy.tree_counter import tree_params
from fedbandit_env.seeding import BatchedRNG
from fedbandit_env.validation import check_flag, check_real
from fedbandit_env.xp import namespace

__all__ = [
    "AGENT_ID",
    "FED_AGENT_ID",
    "FED_VERSION",
    "VERSION",
    "FedUCBConfig",
    "GossipConfig",
    "GossipFedUCB",
    "GossipParams",
    "GossipUCB",
    "bonus_parameters",
    "counter_options",
    "exploration_bonus",
    "gossip_channel_spec",
    "gossip_params",
    "learning_reward",
]

AGENT_ID = "gossip_ucb"
VERSION = 3  # results version: Eq. (11) evaluated as printed
FED_AGENT_ID = "gossip_fed_ucb"
FED_VERSION = 6  # results version: Eq. (12) evaluated as printed
NEIGHBORS, GOSSIP = "neighbors", "gossip"
TREE_INDEXES = ("round", "pull")
NO_PRIVACY = "epsilon = inf: no privacy mechanism"


# ---------------------------------------------------------------- hyperparameters
@dataclass(frozen=True)
class GossipConfig:
    """Hyperparameters of Gossip_UCB, validated on construction (errors name the agent, the
    field and the expected value).

    ``bonus_scale`` multiplies the square root of the bonus (1: Eq. (11) as printed);
    ``alpha1`` is the bonus's constant (None: the paper's 64 / N^17, resolved at reset);
    ``literal_line_order`` computes ñ(t+1) from the pre-pull count, as Algorithm 1's line 5 is
    placed (False: from the post-pull count, the reading under which Lemma 1 is exact)."""

    agent_id: str
    bonus_scale: float = 1.0
    alpha1: float | None = None
    literal_line_order: bool = False

    def __post_init__(self) -> None:
        aid = self.agent_id
        object.__setattr__(
            self, "bonus_scale", check_number(aid, "bonus_scale", self.bonus_scale, 0.0)
        )
        if self.alpha1 is not None:
            object.__setattr__(self, "alpha1", check_number(aid, "alpha1", self.alpha1, 0.0))
        object.__setattr__(
            self,
            "literal_line_order",
            check_flag("literal_line_order", self.literal_line_order, where=aid),
        )


@dataclass(frozen=True)
class FedUCBConfig(GossipConfig):
    """Hyperparameters of Fed_UCB: those of :class:`GossipConfig` and

    ``epsilon`` (> 0; ``math.inf``: no noise, Gossip_UCB exactly); ``dp_bonus_scale``
    multiplies the 128 of Eq. (12); ``dp_log_floor`` (>= 1) reads the ``ln n`` of Eq. (12)'s
    privacy term as ``ln max(n, dp_log_floor)`` (1: the paper); ``noisy_init`` gives the
    initialization sample its own Laplace leaf (False: the paper, unprotected);
    ``tree_index`` ``"round"`` (Algorithm 2 over the round index, the paper) or ``"pull"``
    (over the arm's pull count); ``privacy_levels`` None (floor(log2 T) + 1 tree levels) or
    ``"paper"`` (ceil(log2 T)); ``noise_on_empty_blocks`` (False: noise only on blocks that
    hold a pull, the paper's text); ``reward_clip`` None or (lo, hi) with finite lo < hi."""

    epsilon: float = 1.0
    dp_bonus_scale: float = 1.0
    dp_log_floor: float = 2.0
    noisy_init: bool = True
    tree_index: str = "round"
    privacy_levels: str | None = None
    noise_on_empty_blocks: bool = False
    reward_clip: tuple[float, float] | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        aid = self.agent_id
        epsilon = check_real(
            "epsilon", self.epsilon, hint="math.inf: no privacy", low=0.0, low_open=True,
            allow_inf=True, where=aid,
        )  # fmt: skip
        object.__setattr__(self, "epsilon", float(epsilon))
        for name in ("dp_bonus_scale", "dp_log_floor"):
            low = 1.0 if name == "dp_log_floor" else 0.0
            object.__setattr__(self, name, check_number(aid, name, getattr(self, name), low))
        for name in ("noisy_init", "noise_on_empty_blocks"):
            object.__setattr__(self, name, check_flag(name, getattr(self, name), where=aid))
        if not isinstance(self.tree_index, str) or self.tree_index not in TREE_INDEXES:
            raise ConfigError(
                f"{aid}: tree_index: expected 'round' or 'pull', got {self.tree_index!r}"
            )
        if self.privacy_levels is not None and self.privacy_levels != "paper":
            raise ConfigError(
                f"{aid}: privacy_levels: expected None or 'paper', got {self.privacy_levels!r}"
            )
        if self.reward_clip is not None:
            object.__setattr__(self, "reward_clip", _check_clip(aid, self.reward_clip))


def _check_clip(agent_id: str, clip: Any) -> tuple[float, float]:
    """``reward_clip``: (lo, hi) with finite lo < hi."""
    ok = (
        isinstance(clip, tuple | list)
        and len(clip) == 2
        and all(
            isinstance(c, int | float | np.integer | np.floating) and not isinstance(c, bool)
            for c in clip
        )
        and all(math.isfinite(c) for c in clip)
        and clip[0] < clip[1]
    )
    if not ok:
        raise ConfigError(
            f"{agent_id}: reward_clip: expected None or (lo, hi) with finite lo < hi, got {clip!r}"
        )
    return float(clip[0]), float(clip[1])


# ---------------------------------------------------------------- params
def gossip_channel_spec(num_arms: int) -> dict[str, dict[str, Any]]:
    """``neighbors`` (dim M; Eq. (1) needs only the max over the neighbours: the aggregating
    ``reduce="max"`` delivery) and ``gossip`` (dim M)."""
    return {
        NEIGHBORS: {"kind": "neighbors", "dim": num_arms, "reduce": "max"},
        GOSSIP: {"kind": "gossip", "dim": num_arms},
    }


@dataclass(frozen=True)
class GossipParams:
    """What Gossip_UCB and Fed_UCB read at run time on one federation: N, M, ``rounds`` T (the
    rounds after the initialization, horizon - M), ``alpha1`` (the configuration's, or the
    paper's 64 / N^17) and the configuration; Fed_UCB also the privacy it runs with (the class
    docstring of :class:`GossipFedUCB`): ``reward_clip`` (the configuration's), ``reward_bounds``
    (None when unbounded and unclipped), ``sensitivity``, ``private`` (finite epsilon: a tree
    counter runs, :func:`counter_options`), ``effective_epsilon`` (the counter's per-observation
    guarantee, None without one), ``dp_guarantee_holds`` and ``dp_caveats`` (what breaks the
    guarantee; Gossip_UCB: no privacy mechanism)."""

    num_agents: int
    num_arms: int
    rounds: int
    alpha1: float
    config: GossipConfig
    reward_clip: tuple[float, float] | None = None
    reward_bounds: tuple[float, float] | None = None
    sensitivity: float | None = None
    private: bool = False
    effective_epsilon: float | None = None
    dp_guarantee_holds: bool = False
    dp_caveats: tuple[str, ...] = (NO_PRIVACY,)


def gossip_params(config: GossipConfig, facts: FederationFacts) -> GossipParams:
    """The :class:`GossipParams` of a validated configuration (:class:`GossipConfig` or
    :class:`FedUCBConfig`) on a federation; checks the channels, the family, N >= 3, a horizon
    longer than M and a connected graph (errors name ``config.agent_id``). Pure: the numpy
    ``reset`` and the JAX ``make_params`` call it."""
    aid = config.agent_id
    n, m = facts.num_agents, facts.num_arms
    check_channel_spec(aid, gossip_channel_spec(m), facts)
    require_family(aid, facts, MULTI_ARMED)
    if n < 3:
        raise ConfigError(
            f"{aid}: num_agents: expected N >= 3 (the paper's assumption: N = 2 "
            f"collapses to a centralized problem), got {n}"
        )
    if facts.horizon <= m:
        raise ConfigError(
            f"{aid}: horizon: expected more than M = {m} steps (the initialization "
            f"pulls every arm once), got {facts.horizon}"
        )
    if len(facts.topology.components) != 1:
        raise ConfigError(f"{aid}: topology: expected a connected graph")
    alpha1 = paper_alpha1(n) if config.alpha1 is None else config.alpha1
    params = GossipParams(n, m, facts.horizon - m, alpha1, config)
    if isinstance(config, FedUCBConfig):
        return _with_privacy(params, config, facts)
    return params


def _with_privacy(params: GossipParams, cfg: FedUCBConfig, facts: FederationFacts) -> GossipParams:
    """Fed_UCB's reward range, sensitivity and guarantee (:class:`GossipFedUCB`'s docstring):
    the counter's budget from its :func:`~fedbandit_env.privacy.tree_counter.tree_params`."""
    lo, hi = facts.reward_bounds
    if cfg.reward_clip is not None:
        bounds: tuple[float, float] | None = cfg.reward_clip
    elif math.isfinite(lo) and math.isfinite(hi):
        bounds = (float(lo), float(hi))
    else:
        bounds = None
    private = not math.isinf(cfg.epsilon)
    params = replace(
        params, reward_clip=cfg.reward_clip, reward_bounds=bounds, private=private,
        sensitivity=1.0 if bounds is None else bounds[1] - bounds[0],
    )  # fmt: skip
    if not private:
        return replace(params, dp_caveats=(NO_PRIVACY,), dp_guarantee_holds=False)
    probe = tree_params(
        (params.num_agents, params.num_arms), params.rounds, cfg.epsilon, **counter_options(params)
    )
    caveats = []
    if bounds is None:
        caveats.append(
            f"unbounded rewards {facts.reward_bounds} and no reward_clip: Laplace scale "
            "1/epsilon' assumes rewards in [0, 1] (paper reproduction)"
        )
    if not cfg.noisy_init:
        caveats.append("noisy_init=False: the initialization sample is released unnoised")
    if probe.effective_epsilon > cfg.epsilon * (1 + 1e-12):
        caveats.append(
            f"privacy_levels='paper' overspends: effective epsilon "
            f"{probe.effective_epsilon:g} > {cfg.epsilon:g}"
        )
    return replace(
        params, effective_epsilon=probe.effective_epsilon, dp_caveats=tuple(caveats),
        dp_guarantee_holds=not caveats,
    )  # fmt: skip


def counter_options(params: GossipParams) -> dict[str, Any]:
    """The keyword arguments of Fed_UCB's tree counter (numpy
    :class:`~fedbandit_env.privacy.TreeCounter` and its JAX port alike), after its shape (N, M),
    the rounds T and epsilon: the reward range, the tree index, the empty-block rule, the levels,
    the initialization leaf (``noisy_init``) and noise-only blocks (the exact part of a release
    is the agent's own S)."""
    cfg = params.config
    return {
        "bounds": params.reward_bounds,
        "tree_index": cfg.tree_index,
        "noise_on_empty_blocks": cfg.noise_on_empty_blocks,
        "levels": cfg.privacy_levels,
        "init_round": cfg.noisy_init,
        "exact_blocks": False,
    }


def bonus_parameters(params: GossipParams) -> dict[str, Any]:
    """The keyword arguments of :func:`~agents.gossip_index.exploration_bonus` on these params:
    Eq. (11) (Gossip_UCB), or Eq. (12) with the agent's privacy parameters (Fed_UCB,
    Algorithm 4)."""
    cfg = params.config
    bonus = {"num_agents": params.num_agents, "alpha1": params.alpha1,
             "bonus_scale": cfg.bonus_scale}  # fmt: skip
    if isinstance(cfg, FedUCBConfig):
        bonus.update(epsilon=cfg.epsilon, horizon=params.rounds,
                     dp_bonus_scale=cfg.dp_bonus_scale, dp_log_floor=cfg.dp_log_floor)  # fmt: skip
    return bonus


def learning_reward(reward: Any, clip: tuple[float, float] | None) -> Any:
    """The reward value the agent learns from: clipped to ``clip`` = (lo, hi) (Fed_UCB's
    ``reward_clip``) or as observed (None); numpy or JAX arrays alike."""
    if clip is None:
        return reward
    return namespace(reward).clip(reward, *clip)


# ---------------------------------------------------------------- state
@dataclass
class GossipState:
    """The paper's per-agent variables after round t (module doc), each (B, N, M)."""

    n: np.ndarray
    S: np.ndarray
    xbar: np.ndarray
    theta: np.ndarray
    ntil: np.ndarray
    t: int = 0


class GossipUCB(TeamPolicy):
    """Gossip_UCB (Algorithm 1): UCB on gossiped estimates ϑ with the local consistency rule."""

    agent_id = AGENT_ID
    version = VERSION

    def __init__(
        self,
        bonus_scale: float = 1.0,
        alpha1: float | None = None,
        literal_line_order: bool = False,
    ):
        self.config = GossipConfig(self.agent_id, bonus_scale, alpha1, literal_line_order)
        self.dp_guarantee_holds: bool | None = None  # set by reset
        self.dp_caveats: tuple[str, ...] = ()

    @property
    def epsilon(self) -> float:
        return getattr(self.config, "epsilon", math.inf)

    @property
    def private(self) -> bool:
        return not math.isinf(self.epsilon)

    @property
    def privacy_epsilon(self) -> float:
        """Declared per-agent epsilon-DP guarantee (``inf``: Gossip_UCB is not private)."""
        return self.epsilon

    def channel_spec(self, config: EnvConfig) -> dict[str, dict[str, Any]]:
        return gossip_channel_spec(config.num_arms)

    # ------------------------------------------------------------------ reset
    def reset(self, facts: FederationFacts, rng: BatchedRNG) -> None:
        """The params (:func:`gossip_params`, which checks the facts), zero statistics, the
        choice stream and, Fed_UCB, the counter."""
        self.params = p = gossip_params(self.config, facts)
        n, m = p.num_agents, p.num_arms
        self.N, self.M = n, m
        self.T = p.rounds  # rounds after the initialization
        self.alpha1 = p.alpha1
        self.dp_guarantee_holds, self.dp_caveats = p.dp_guarantee_holds, p.dp_caveats
        self.table = ArmTable.of(facts.num_runs, n, m)
        self.state = GossipState(*(self.table.zeros() for _ in range(5)))
        self._init_rewards = self.table.zeros()  # X_{i,k}(0), filled during the initialization
        self._choice = rng.child("choice").buffered("uniform", (n,))  # ties and lagging arms
        self._send = np.ones((facts.num_runs, n), dtype=bool)
        self._reset_privacy(facts, rng)

    def _reset_privacy(self, facts: FederationFacts, rng: BatchedRNG) -> None:
        """Gossip_UCB releases exact means (no privacy)."""

    # the paper's variables, read from the state
    n = property(lambda self: self.state.n)
    S = property(lambda self: self.state.S)
    xbar = property(lambda self: self.state.xbar)
    theta = property(lambda self: self.state.theta)
    ntil = property(lambda self: self.state.ntil)

    @property
    def round(self) -> int:
        return self.state.t

    # ------------------------------------------------------------- the round
    def act(self, obs: VecObservation) -> TeamAction:
        s = obs.step
        if s > 0 and s <= self.M:  # the initialization pull of arm s - 1 at env step s
            self._init_rewards[..., s - 1] = self._reward(obs.last_reward)
        if s < self.M:
            return TeamAction(np.full(self._send.shape, s, dtype=np.int64))
        if s == self.M:
            self._initialize()
        else:
            self._observe(obs)
        self.state.t = s - self.M + 1
        return TeamAction(
            self._decide(self.state.t),
            {NEIGHBORS: (self._send, self.state.ntil), GOSSIP: (self._send, self.state.theta)},
        )

    def _reward(self, reward: np.ndarray) -> np.ndarray:
        """The reward value the agent learns from (Fed_UCB may clip it)."""
        return learning_reward(reward, self.params.reward_clip)

    def _initialize(self) -> None:
        """Algorithm 1's initialization (t = 0): n = 1, S = X(0), ϑ = X̄ = the initial mean,
        ñ = n."""
        s = self.state
        s.n[:] = 1.0
        s.S[:] = self._init_rewards
        s.xbar = self._initial_mean()
        s.theta = s.xbar.copy()
        s.ntil = s.n.copy()

    def _initial_mean(self) -> np.ndarray:
        """X̄(0) = X(0)."""
        return self._init_rewards.copy()

    def bonus_parameters(self) -> dict[str, Any]:
        """The keyword arguments of :func:`exploration_bonus` for this federation."""
        return bonus_parameters(self.params)

    def bonus(self, t: int) -> np.ndarray:
        """C_{i,k}(t) of Eq. (11) (Fed_UCB: Eq. (12)) on the current counts."""
        return exploration_bonus(self.state.n, t, **self.bonus_parameters())

    def _decide(self, t: int) -> np.ndarray:
        """Algorithm 1 lines 3-13: a lagging arm (line 6: n < ñ - N) if the agent has one,
        uniformly among them (line 13), else an arg-max of Q (lines 9-10), uniform on ties. One
        uniform per agent and round makes either choice: the ``floor(u k)``-th of the ``k``
        lagging arms, or of the ``k`` tied maxima."""
        s = self.state
        u = self._choice.next()
        return decide(s.theta, s.n, s.ntil, t, u, **self.bonus_parameters()).astype(np.int64)

    def _observe(self, obs: VecObservation) -> None:
        """The rest of round t from the observation of its env step: the pull (Algorithm 1
        lines 15-16, Eq. (2)), the gossip update (lines 17-22) and ñ(t+1) (line 5, Eq. (1))."""
        s, table = self.state, self.table
        arm, reward = obs.last_arm, self._reward(obs.last_reward)
        n_before, xbar_before = s.n.copy(), s.xbar.copy()
        table.add(s.n, arm, 1.0)  # line 16
        table.add(s.S, arm, reward)
        self._update_mean(arm, reward)  # line 15: X̄(t)
        s.theta = gossip_update(s.theta, obs.deliveries[GOSSIP], s.xbar, xbar_before)
        best_heard = neighbour_max(obs.deliveries[NEIGHBORS])  # Eq. (1): max over the ñ_j(t)
        own = n_before if self.config.literal_line_order else s.n
        s.ntil = np.maximum(own, best_heard)

    def _update_mean(self, arm: np.ndarray, reward: np.ndarray) -> None:
        """Eq. (2): X̄ = S / n (only the pulled arm's value changes)."""
        self.state.xbar = self.state.S / self.state.n


class GossipFedUCB(GossipUCB):
    """Fed_UCB (Algorithm 4): Gossip_UCB on private means from binary-tree counters.

    Each agent privatizes its own running reward sums with a
    :class:`~fedbandit_env.privacy.TreeCounter` (Algorithm 2's dyadic blocks over the round
    index, ``tree_index="round"``, or the arm's pull count, ``"pull"``), per-level budget
    epsilon' = epsilon / levels; everything it sends is post-processing of those noisy sums, so
    each agent is epsilon-DP. Algorithm 3: the pulled arm's private mean is (S + the noise of
    the counter's blocks) / n; the other arms keep theirs (Algorithm 4 line 17). The counters
    draw one Laplace per agent in rounds that close only level-0 blocks (``noise_per="row"``)
    and keep only their blocks' noise (``exact_blocks=False``): the exact part of a release is
    the agent's own S. The bonus is Eq. (12) (:func:`index`).

    Reward range and Laplace scale: each block gets ``Lap(sensitivity / epsilon')``.

    * ``reward_clip=(lo, hi)``: rewards are clipped to [lo, hi] before the agent uses them (sums,
      means and counter, also at ``epsilon = inf``); sensitivity ``hi - lo``.
    * otherwise, when the environment's reward bounds are finite (Bernoulli, clipped Gaussian):
      those bounds, sensitivity ``hi - lo`` (clipping is then a no-op);
    * otherwise (unbounded Gaussian rewards, the paper's experiments): no clipping and the paper's
      scale ``1 / epsilon'`` (sensitivity 1), for reproduction. The DP guarantee then does **not**
      formally hold, and the agent says so.

    After ``reset``, ``dp_guarantee_holds`` is True iff the agent is formally epsilon-DP per
    agent: finite epsilon, bounded or clipped rewards, ``noisy_init=True`` and a level split
    that does not overspend (:attr:`TreeCounter.effective_epsilon`); ``dp_caveats`` lists what
    breaks it. ``sensitivity`` and ``reward_bounds`` (None when unbounded and unclipped) are the
    values in use. The bonus assumes rewards in [0, 1], as the paper does; for a wider range
    ``dp_bonus_scale = (hi - lo)**2`` widens its privacy term to the larger noise.
    """

    agent_id = FED_AGENT_ID
    version = FED_VERSION

    def __init__(
        self,
        epsilon: float = 1.0,
        bonus_scale: float = 1.0,
        dp_bonus_scale: float = 1.0,
        noisy_init: bool = True,
        tree_index: str = "round",
        privacy_levels: str | None = None,
        noise_on_empty_blocks: bool = False,
        alpha1: float | None = None,
        literal_line_order: bool = False,
        reward_clip: tuple[float, float] | None = None,
        dp_log_floor: float = 2.0,
    ):
        self.config = FedUCBConfig(
            self.agent_id, bonus_scale, alpha1, literal_line_order, epsilon=epsilon,
            dp_bonus_scale=dp_bonus_scale, dp_log_floor=dp_log_floor, noisy_init=noisy_init,
            tree_index=tree_index, privacy_levels=privacy_levels,
            noise_on_empty_blocks=noise_on_empty_blocks, reward_clip=reward_clip,
        )  # fmt: skip
        self.reward_bounds: tuple[float, float] | None = None  # resolved by reset
        self.sensitivity: float | None = None
        self.dp_guarantee_holds = None
        self.dp_caveats = ()

    def _reset_privacy(self, facts: FederationFacts, rng: BatchedRNG) -> None:
        """The reward range and the guarantee (the params'), and the counter (None at
        ``epsilon = inf``)."""
        p = self.params
        self.reward_bounds, self.sensitivity = p.reward_bounds, p.sensitivity
        self.counter = None
        if p.private:
            self.counter = TreeCounter(
                (p.num_agents, p.num_arms), p.rounds, self.config.epsilon,
                rng=rng.child("privacy"),
                noise_per="row",  # one agent pulls one arm per round: no unused leaf draws
                **counter_options(p),
            )  # fmt: skip

    def _initial_mean(self) -> np.ndarray:
        """X̄̃(0): the initialization sample plus its own Laplace leaf (``noisy_init``), or the
        paper's unprotected X(0)."""
        if self.counter is None or not self.config.noisy_init:
            return self._init_rewards.copy()
        self.counter.insert(0, self._init_rewards)
        return self.state.S + self.counter.noise()  # S = X(0) now

    def _update_mean(self, arm: np.ndarray, reward: np.ndarray) -> None:
        """Algorithm 3 at the pulled arm: X̄̃ = (S + noise of its blocks) / n; Algorithm 4
        line 17: the other arms keep X̄̃(t-1)."""
        if self.counter is None:
            super()._update_mean(arm, reward)
            return
        s, table = self.state, self.table
        self.counter.insert_arms(s.t, arm, reward)
        noise = self.counter.noise_at(arm)
        table.put(s.xbar, arm, (table.gather(s.S, arm) + noise) / table.gather(s.n, arm))
