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
from dataclasses import dataclass
from typing import Any

import numpy as np

from agents.gossip_index import exploration_bonus, index
from fedbandit_env.config import EnvConfig
from fedbandit_env.engine import VecObservation
from fedbandit_env.errors import ConfigError
from fedbandit_env.kernels import ArmTable, argmax_one_uniform, check_number
from fedbandit_env.network import NeighborsAggregate
from fedbandit_env.policy import (
    MULTI_ARMED,
    FederationFacts,
    TeamAction,
    TeamPolicy,
    require_family,
)
from fedbandit_env.privacy import TreeCounter
from fedbandit_env.seeding import BatchedRNG
from fedbandit_env.validation import check_flag, check_real

NEIGHBORS, GOSSIP = "neighbors", "gossip"
TREE_INDEXES = ("round", "pull")


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

    agent_id = "gossip_ucb"
    version = 3  # results version: Eq. (11) evaluated as printed

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
        m = config.num_arms
        return {  # Eq. (1) needs only the max over the neighbours: an aggregating delivery
            NEIGHBORS: {"kind": "neighbors", "dim": m, "reduce": "max"},
            GOSSIP: {"kind": "gossip", "dim": m},
        }

    # ------------------------------------------------------------------ reset
    def reset(self, facts: FederationFacts, rng: BatchedRNG) -> None:
        n, m = facts.num_agents, facts.num_arms
        self.require_channel(facts, NEIGHBORS, "neighbors", m)
        self.require_channel(facts, GOSSIP, "gossip", m)
        require_family(self.agent_id, facts, MULTI_ARMED)
        if n < 3:
            raise ConfigError(
                f"{self.agent_id}: num_agents: expected N >= 3 (the paper's assumption: N = 2 "
                f"collapses to a centralized problem), got {n}"
            )
        if facts.horizon <= m:
            raise ConfigError(
                f"{self.agent_id}: horizon: expected more than M = {m} steps (the initialization "
                f"pulls every arm once), got {facts.horizon}"
            )
        if len(facts.topology.components) != 1:
            raise ConfigError(f"{self.agent_id}: topology: expected a connected graph")
        self.N, self.M = n, m
        self.T = facts.horizon - m  # rounds after the initialization
        self.alpha1 = 64.0 / n**17 if self.config.alpha1 is None else self.config.alpha1
        self.table = ArmTable.of(facts.num_runs, n, m)
        self.state = GossipState(*(self.table.zeros() for _ in range(5)))
        self._init_rewards = self.table.zeros()  # X_{i,k}(0), filled during the initialization
        self._choice = rng.child("choice").buffered("uniform", (n,))  # ties and lagging arms
        self._send = np.ones((facts.num_runs, n), dtype=bool)
        self._reset_privacy(facts, rng)

    def _reset_privacy(self, facts: FederationFacts, rng: BatchedRNG) -> None:
        """Gossip_UCB releases exact means (no privacy)."""
        self.dp_guarantee_holds = False
        self.dp_caveats = ("epsilon = inf: no privacy mechanism",)

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
        return reward

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
        return {"num_agents": self.N, "alpha1": self.alpha1, "bonus_scale": self.config.bonus_scale}

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
        q = index(s.theta, s.n, t, **self.bonus_parameters())  # line 9
        lagging = s.n < s.ntil - self.N  # line 6
        q = np.where(lagging, np.inf, q)  # a lagging arm goes first (lines 7 and 13)
        return argmax_one_uniform(q, u).astype(np.int64)

    def _observe(self, obs: VecObservation) -> None:
        """The rest of round t from the observation of its env step: the pull (Algorithm 1
        lines 15-16, Eq. (2)), the gossip update (lines 17-22) and ñ(t+1) (line 5, Eq. (1))."""
        s, table = self.state, self.table
        arm, reward = obs.last_arm, self._reward(obs.last_reward)
        n_before, xbar_before = s.n.copy(), s.xbar.copy()
        table.add(s.n, arm, 1.0)  # line 16
        table.add(s.S, arm, reward)
        self._update_mean(arm, reward)  # line 15: X̄(t)
        gossip = obs.deliveries[GOSSIP]  # line 20: average with the partner's ϑ_j(t-1)
        averaged = 0.5 * (s.theta + gossip.payload)
        mixed = np.where(gossip.received[..., None], averaged, s.theta)
        s.theta = mixed + (s.xbar - xbar_before)  # lines 20 and 22: + X̄(t) - X̄(t-1)
        heard = obs.deliveries[NEIGHBORS]  # Eq. (1): max over the neighbours' ñ_j(t)
        if isinstance(heard, NeighborsAggregate):  # max over arrived messages, 0 if none
            best_heard = heard.value
        else:  # a padded neighbors channel
            best_heard = np.where(heard.mask[..., None], heard.payload, 0.0).max(axis=2)
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

    agent_id = "gossip_fed_ucb"
    version = 6  # results version: Eq. (12) evaluated as printed

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
        """Resolve the reward range (class docstring), build the counter, state the guarantee."""
        cfg = self.config
        lo, hi = facts.reward_bounds
        if cfg.reward_clip is not None:
            self.reward_bounds = cfg.reward_clip
        elif math.isfinite(lo) and math.isfinite(hi):
            self.reward_bounds = (float(lo), float(hi))
        else:
            self.reward_bounds = None
        bounds = self.reward_bounds
        self.sensitivity = 1.0 if bounds is None else bounds[1] - bounds[0]
        self.counter = None
        caveats = []
        if self.private:
            self.counter = TreeCounter(
                (facts.num_agents, facts.num_arms),
                self.T,
                cfg.epsilon,
                rng=rng.child("privacy"),
                bounds=bounds,
                tree_index=cfg.tree_index,
                noise_on_empty_blocks=cfg.noise_on_empty_blocks,
                levels=cfg.privacy_levels,
                init_round=cfg.noisy_init,
                noise_per="row",  # one agent pulls one arm per round: no unused leaf draws
                exact_blocks=False,  # the exact part of a release is the agent's own S
            )
            if bounds is None:
                caveats.append(
                    f"unbounded rewards {facts.reward_bounds} and no reward_clip: Laplace scale "
                    "1/epsilon' assumes rewards in [0, 1] (paper reproduction)"
                )
            if not cfg.noisy_init:
                caveats.append("noisy_init=False: the initialization sample is released unnoised")
            if self.counter.effective_epsilon > cfg.epsilon * (1 + 1e-12):
                caveats.append(
                    f"privacy_levels='paper' overspends: effective epsilon "
                    f"{self.counter.effective_epsilon:g} > {cfg.epsilon:g}"
                )
        else:
            caveats.append("epsilon = inf: no privacy mechanism")
        self.dp_caveats = tuple(caveats)
        self.dp_guarantee_holds = not caveats

    def _reward(self, reward: np.ndarray) -> np.ndarray:
        clip = self.config.reward_clip
        return reward if clip is None else np.clip(reward, *clip)

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

    def bonus_parameters(self) -> dict[str, Any]:
        """Algorithm 4's bonus: Eq. (12) with this agent's privacy parameters."""
        cfg = self.config
        return {
            **super().bonus_parameters(),
            "epsilon": cfg.epsilon,
            "horizon": self.T,
            "dp_bonus_scale": cfg.dp_bonus_scale,
            "dp_log_floor": cfg.dp_log_floor,
        }
