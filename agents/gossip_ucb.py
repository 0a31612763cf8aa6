"""Gossip_UCB and Fed_UCB (Zhu, Zhu, Liu & Liu, "Federated Bandit: A Gossiping Approach").

specs/gossip.md. Both are batched team policies over two channels:

* ``neighbors`` (kind neighbors, dim M): every step each agent sends its count estimate ñ_i to
  every neighbour (the always-on max-consensus of Eq. (1), §1.4);
* ``gossip`` (kind gossip, dim M): the environment activates one uniformly random edge per step;
  its endpoints exchange their estimate vectors ϑ (§1.4).

One round t follows the executable order of §2.3 with the §7 timing. In env step M + t an agent
submits (arm a_i(t), neighbors = ñ_i(t), gossip = ϑ_i(t−1)); the observation of that step holds
its reward X_i(t), the neighbours' ñ_j(t) and, if it is on the active edge, the partner's
ϑ_j(t−1). The agent then updates n, X̄ (phase B), ϑ (phase C) and ñ(t+1) (phase D) before
choosing round t+1. Initialization (§6 item 13): env steps 1..M pull arm k at step k+1, all agents
at once, without messages; the bonus's t is the post-initialization round index, so the
environment's horizon is T + M (the gossip presets already add M).

Choices (gossip.md §6): the init sample is part of S (item 3); natural logs in the bonus and
floor(log2 T) + 1 tree levels (item 4, ``privacy_levels="paper"`` for ceil(log2 T)); Fed_UCB noise
only on non-empty blocks (item 6, ``noise_on_empty_blocks``); the init sample gets its own Laplace
leaf by default (item 7, ``noisy_init=False`` reproduces the paper) and Eq. (12)'s privacy term
reads ln max(n, 2) so that noisy sample cannot strand an arm (``dp_log_floor=1`` is the paper's
ln n); argmax ties and lagging arms
are chosen uniformly at random (item 9); alpha1 = 64 / N^17 (item 10); the agents know N
(item 20); Fed_UCB's Laplace scale follows ``reward_clip`` or the env's finite reward bounds and
keeps the paper's 1/epsilon' for unbounded rewards, declaring that its guarantee then does not
hold (item 5, ``dp_guarantee_holds``). ``literal_line_order=True`` computes ñ(t+1) from the
pre-pull count, as Algorithm 1's line 5 does (item 1). ``GossipFedUCB(epsilon=inf)`` takes the
exact path and equals ``GossipUCB`` step for step (P6).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from fedbandit_env.config import EnvConfig
from fedbandit_env.engine import VecObservation
from fedbandit_env.errors import ConfigError
from fedbandit_env.kernels import argmax_one_uniform, check_number, scatter_add
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


class GossipUCB(TeamPolicy):
    """Gossip_UCB (gossip.md §2.2–2.3): UCB on gossiped estimates ϑ with the consistency rule."""

    agent_id = "gossip_ucb"
    version = 2  # v2: one choice uniform per agent for ties and lagging arms (was two per arm)

    def __init__(
        self,
        bonus_scale: float = 1.0,
        alpha1: float | None = None,
        literal_line_order: bool = False,
    ):
        self.bonus_scale = check_number(self.agent_id, "bonus_scale", bonus_scale, 0.0)
        self.alpha1_override = (
            None if alpha1 is None else check_number(self.agent_id, "alpha1", alpha1, 0.0)
        )
        self.literal_line_order = check_flag(
            "literal_line_order", literal_line_order, where=self.agent_id
        )
        self.epsilon = math.inf
        self.dp_guarantee_holds: bool | None = None  # set by reset (see GossipFedUCB)
        self.dp_caveats: tuple[str, ...] = ()

    @property
    def privacy_epsilon(self) -> float:
        """Declared per-agent epsilon-DP guarantee (``inf``: Gossip_UCB is not private)."""
        return self.epsilon

    def channel_spec(self, config: EnvConfig) -> dict[str, dict[str, Any]]:
        m = config.num_arms
        return {  # the max-consensus needs only the max over the neighbours: aggregating delivery
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
                f"{self.agent_id}: num_agents: expected N >= 3 (the paper's assumption, "
                f"gossip.md §1.1: N = 2 collapses to a centralized problem), got {n}"
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
        self.alpha1 = 64.0 / n**17 if self.alpha1_override is None else self.alpha1_override
        shape = (facts.num_runs, n, m)
        self.n = np.zeros(shape)  # own pulls, including the init pull
        self.S = np.zeros(shape)  # own reward sums (exact)
        self.xbar = np.zeros(shape)  # the mean the agent gossips: exact (Gossip_UCB) or noisy
        self.theta = np.zeros(shape)
        self.ntil = np.zeros(shape)
        self._rows = np.indices(shape[:2])
        self._flat_base = np.arange(shape[0] * n, dtype=np.int64).reshape(shape[:2]) * m
        self._rsqrt = np.ones(shape)  # 1 / sqrt(n), updated at the pulled arm only
        self._init_rewards = np.zeros(shape)
        self._choice = rng.child("choice").buffered("uniform", (n,))
        self._send = np.ones(shape[:2], dtype=bool)
        self._reset_privacy(facts, rng)

    def _reset_privacy(self, facts: FederationFacts, rng: BatchedRNG) -> None:
        """Gossip_UCB releases exact means (no privacy)."""
        self.dp_guarantee_holds = False
        self.dp_caveats = ("epsilon = inf: no privacy mechanism",)

    def _clip(self, reward: np.ndarray) -> np.ndarray:
        """The reward value the agent learns from (Fed_UCB may clip it, §6 item 5)."""
        return reward

    # ------------------------------------------------------------- the round
    @property
    def round(self) -> int:
        return self._round

    def act(self, obs: VecObservation) -> TeamAction:
        s = obs.step
        if s < self.M:  # initialization: arm s at env step s + 1
            if s > 0:
                self._record_init(obs, s - 1)
            arms = np.full(self._send.shape, s, dtype=np.int64)
            return TeamAction(arms)
        if s == self.M:
            self._record_init(obs, s - 1)
            self._finish_init()
        else:
            self._observe(obs)
        self._round = s - self.M + 1
        arms = self._decide(self._round)
        return TeamAction(
            arms,
            {
                NEIGHBORS: (self._send, self.ntil),  # replaced, never written, after sending
                GOSSIP: (self._send, self.theta.copy()),  # theta is updated in place
            },
        )

    def _record_init(self, obs: VecObservation, arm: int) -> None:
        self._init_rewards[..., arm] = self._clip(obs.last_reward)

    def _finish_init(self) -> None:
        """t = 0: n = 1, S = X(0), X̄ = ϑ = X(0), ñ = n (gossip.md §2.2)."""
        self.n[:] = 1.0
        self.S[:] = self._init_rewards
        self.xbar = self._initial_mean()
        self.theta = self.xbar.copy()
        self.ntil = self.n.copy()

    def _initial_mean(self) -> np.ndarray:
        return self._init_rewards.copy()

    def bonus(self, t: int) -> np.ndarray:
        """C_{i,k}(t) of Eq. (11), with n the count before this round's pull: the scalar
        ``bonus_scale sqrt(2 N ln t)`` times the kept ``1/sqrt(n)``."""
        c = self.bonus_scale * math.sqrt(2.0 * self.N * math.log(t))
        out = self._rsqrt * c
        out += self.alpha1
        return out

    def _decide(self, t: int) -> np.ndarray:
        """Phase A: lagging arms first, else the UCB argmax; one uniform ``u`` per agent picks
        the ``floor(u k)``-th of its ``k`` lagging arms, or of its ``k`` tied maxima."""
        u = self._choice.next()  # drawn every round (fixed stream use)
        index = self.bonus(t)
        index += self.theta
        arms = argmax_one_uniform(index, u)
        lag = self.n < self.ntil - self.N
        if lag.any():
            m = self.M
            rows = np.flatnonzero(lag.reshape(-1, m).any(axis=-1))
            k = np.count_nonzero(lag.reshape(-1, m)[rows], axis=-1)
            j = np.minimum((u.reshape(-1)[rows] * k).astype(np.int64), k - 1)
            first = np.cumsum(lag.reshape(-1, m)[rows], axis=-1) > j[:, None]
            arms.reshape(-1)[rows] = np.argmax(first, axis=-1)
        return arms.astype(np.int64)

    def _observe(self, obs: VecObservation) -> None:
        """Phases B–D of round t from the observation of its env step."""
        t = self._round
        arm = obs.last_arm
        flat = self._flat_base + arm
        pre_pull_n = self.n.copy() if self.literal_line_order else None
        old_mean = self.xbar.reshape(-1)[flat]  # only the pulled arm's X̄ moves
        reward = self._clip(obs.last_reward)
        scatter_add(self.n, flat, 1.0)
        scatter_add(self.S, flat, reward)
        self._rsqrt.reshape(-1)[flat] = 1.0 / np.sqrt(self.n.reshape(-1)[flat])
        self._update_mean(t, arm, reward)
        grad = self.xbar.reshape(-1)[flat] - old_mean  # (B, N); zero on the other arms
        gossip = obs.deliveries[GOSSIP]
        theta = self.theta  # updated in place (act sends a copy)
        got = np.flatnonzero(gossip.received.reshape(-1))
        if got.size:  # theta <- (theta + partner's) / 2 on the active edge's endpoints
            rows = theta.reshape(-1, self.M)
            rows[got] = 0.5 * (rows[got] + gossip.payload.reshape(-1, self.M)[got])
        scatter_add(theta, flat, grad)
        heard = obs.deliveries[NEIGHBORS]
        if isinstance(heard, NeighborsAggregate):  # max over arrived messages, 0 if none
            best_heard = heard.value
        else:  # a padded neighbors channel
            best_heard = np.where(heard.mask[..., None], heard.payload, 0.0).max(axis=2)
        own = pre_pull_n if pre_pull_n is not None else self.n
        self.ntil = np.maximum(own, best_heard)

    def _update_mean(self, t: int, arm: np.ndarray, reward: np.ndarray) -> None:
        flat = self._flat_base + arm
        self.xbar.reshape(-1)[flat] = self.S.reshape(-1)[flat] / self.n.reshape(-1)[flat]


class GossipFedUCB(GossipUCB):
    """Fed_UCB (gossip.md §2.4): Gossip_UCB on noisy means from binary-tree counters.

    Each agent privatizes its own running reward sums with a
    :class:`~fedbandit_env.privacy.TreeCounter` over the round index (``tree_index="round"``) or
    the arm's pull count (``"pull"``), per-level budget epsilon' = epsilon / levels; everything it
    sends is post-processing of those noisy sums, so each agent is epsilon-DP (gossip.md §1.6, §3).
    The counters draw their noise with ``noise_per="row"``: a round that closes only level-0
    blocks (odd t, round index) draws one Laplace per agent, for its pulled arm, and the other
    rounds one per (agent, arm) (results version 4; docs/privacy.md, "Binary-tree counter").
    The counters keep only the noise of their blocks (``exact_blocks=False``): a release is the
    agent's own exact running sum S plus that noise (results version 5). The bonus is Eq. (12)
    (``dp_bonus_scale`` multiplies its 128 factor) with ``ln n`` of its privacy term read as
    ``ln max(n, dp_log_floor)``. The paper's ``ln n`` (``dp_log_floor=1``)
    makes the privacy term zero at n = 1: an arm whose noisy initial estimate comes out far below
    zero then keeps an index below every other arm's and is never pulled again (a stranded arm).
    The default ``dp_log_floor=2`` keeps the term positive at n = 1, so every arm's index is
    dominated by its privacy term until its estimate rests on many pulls (docs/gossip.md,
    "Initial sample"); at n >= 2 the bonus is the paper's.

    Reward range and Laplace scale (§6 item 5): each block gets ``Lap(sensitivity / epsilon')``.

    * ``reward_clip=(lo, hi)``: rewards are clipped to [lo, hi] before the agent uses them (sums,
      means and counter, also at ``epsilon = inf``); sensitivity ``hi - lo``.
    * otherwise, when the environment's reward bounds are finite (Bernoulli, clipped Gaussian):
      those bounds, sensitivity ``hi - lo`` (clipping is then a no-op);
    * otherwise (unbounded Gaussian rewards, the paper's experiments): no clipping and the paper's
      scale ``1 / epsilon'`` (sensitivity 1), for reproduction. The DP guarantee then does **not**
      formally hold, and the agent says so.

    After ``reset``, ``dp_guarantee_holds`` is True iff the agent is formally epsilon-DP per agent:
    finite epsilon, bounded or clipped rewards, ``noisy_init=True`` (the paper's un-noised init
    sample is unprotected) and a level split that does not overspend (``privacy_levels="paper"``
    with T a power of two does, :attr:`TreeCounter.effective_epsilon`); ``dp_caveats`` lists what
    breaks it. ``sensitivity`` and ``reward_bounds`` (None when unbounded and unclipped) are the
    values in use. The bonus is kept literal (it assumes rewards in [0, 1], like the paper's
    Gaussian experiments, §6 item 21); for a wider range, ``dp_bonus_scale = (hi - lo)**2``
    widens its privacy term to the larger noise.
    """

    agent_id = "gossip_fed_ucb"
    # v5: releases are S + block noise (the counter keeps no exact blocks) and the bonus is
    # expanded into kept per-counter terms: the same formulas, other roundings (v4: one Laplace
    # per agent in leaf rounds; v3: one per arm, K - 1 unused)
    version = 5

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
        super().__init__(bonus_scale, alpha1, literal_line_order)
        self.dp_log_floor = check_number(self.agent_id, "dp_log_floor", dp_log_floor, 1.0)
        self.reward_clip = None if reward_clip is None else _check_clip(self.agent_id, reward_clip)
        self.reward_bounds: tuple[float, float] | None = None  # resolved by reset
        self.sensitivity: float | None = None
        epsilon = check_real(
            "epsilon", epsilon, hint="math.inf: no privacy", low=0.0, low_open=True, allow_inf=True,
            where=self.agent_id,
        )
        if not isinstance(tree_index, str) or tree_index not in ("round", "pull"):
            raise ConfigError(
                f"{self.agent_id}: tree_index: expected 'round' or 'pull', got {tree_index!r}"
            )
        if privacy_levels is not None and not (
            isinstance(privacy_levels, str) and privacy_levels == "paper"
        ):
            raise ConfigError(
                f"{self.agent_id}: privacy_levels: expected None or 'paper', got {privacy_levels!r}"
            )
        self.epsilon = float(epsilon)
        self.dp_bonus_scale = check_number(self.agent_id, "dp_bonus_scale", dp_bonus_scale, 0.0)
        self.noisy_init = check_flag("noisy_init", noisy_init, where=self.agent_id)
        self.tree_index = tree_index
        self.privacy_levels = privacy_levels
        self.noise_on_empty_blocks = check_flag(
            "noise_on_empty_blocks", noise_on_empty_blocks, where=self.agent_id
        )

    @property
    def private(self) -> bool:
        return not math.isinf(self.epsilon)

    def _reset_privacy(self, facts: FederationFacts, rng: BatchedRNG) -> None:
        """Resolve the reward range (class docstring), build the counter, state the guarantee."""
        lo, hi = facts.reward_bounds
        if self.reward_clip is not None:
            self.reward_bounds = self.reward_clip
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
                self.epsilon,
                rng=rng.child("privacy"),
                bounds=bounds,
                tree_index=self.tree_index,
                noise_on_empty_blocks=self.noise_on_empty_blocks,
                levels=self.privacy_levels,
                init_round=self.noisy_init,
                noise_per="row",  # one agent pulls one arm per round: no unused leaf draws
                exact_blocks=False,  # the exact part of a release is the agent's own S
            )
            if bounds is None:
                caveats.append(
                    f"unbounded rewards {facts.reward_bounds} and no reward_clip: Laplace scale "
                    "1/epsilon' assumes rewards in [0, 1] (paper reproduction)"
                )
            if not self.noisy_init:
                caveats.append("noisy_init=False: the initialization sample is released unnoised")
            if self.counter.effective_epsilon > self.epsilon * (1 + 1e-12):
                caveats.append(
                    f"privacy_levels='paper' overspends: effective epsilon "
                    f"{self.counter.effective_epsilon:g} > {self.epsilon:g}"
                )
        else:
            caveats.append("epsilon = inf: no privacy mechanism")
        self.dp_caveats = tuple(caveats)
        self.dp_guarantee_holds = not caveats

    def _clip(self, reward: np.ndarray) -> np.ndarray:
        if self.reward_clip is None:
            return reward
        return np.clip(reward, *self.reward_clip)

    def _initial_mean(self) -> np.ndarray:
        if self.counter is None:
            return super()._initial_mean()
        # n = 1 everywhere now (_finish_init): the bonus's per-counter terms
        self._inv_n = 1.0 / self.n
        self._ln_term = self._ln_floor(self.n) / (self.n * self.n * self.epsilon**2)
        if self.noisy_init:  # item 7: the init sample is one more leaf with its own noise
            self.counter.insert(0, self._init_rewards)
            return self.S + self.counter.noise()  # S = X(0) now
        return self._init_rewards.copy()  # the paper: X̄̃(0) = X(0), unprotected

    def _update_mean(self, t: int, arm: np.ndarray, reward: np.ndarray) -> None:
        if self.counter is None:
            super()._update_mean(t, arm, reward)
            return
        # the engine checked the arms; the counter reads only the pulled arms' blocks. A release
        # is the exact running sum S (init sample included) plus the noise of its blocks
        self.counter.insert_arms_unchecked(t, arm, np.asarray(reward, dtype=np.float64))
        flat = self._flat_base + arm
        noise = self.counter.noise_flat(flat.reshape(-1)).reshape(flat.shape)
        noisy_sum = self.S.reshape(-1)[flat] + noise
        n = self.n.reshape(-1)[flat]
        self.xbar.reshape(-1)[flat] = noisy_sum / n  # line 17: others keep
        self._refresh_log_n(flat, n)

    def _refresh_log_n(self, flat: np.ndarray, n: np.ndarray) -> None:
        """The bonus's per-counter terms ``1/n`` and ``ln max(n, dp_log_floor) / (n^2
        epsilon^2)`` at the counters ``flat`` whose counts became ``n`` (elementwise the same
        numbers as from the whole ``n``)."""
        self._inv_n.reshape(-1)[flat] = 1.0 / n
        self._ln_term.reshape(-1)[flat] = self._ln_floor(n) / (n * n * self.epsilon**2)

    def _ln_floor(self, n: np.ndarray) -> np.ndarray:
        """``ln max(n, dp_log_floor)`` (the privacy term's log, gossip.md; a floor of 1 is ln n)."""
        return np.log(n if self.dp_log_floor == 1.0 else np.maximum(n, self.dp_log_floor))

    def bonus(self, t: int) -> np.ndarray:
        """C_{i,k}(t) of Eq. (12) with ln max(n, dp_log_floor); Eq. (11) when epsilon is inf."""
        if not self.private:
            return super().bonus(t)
        # (2 N ln t / n)(1 + dp), dp = 128 N ln^2 T ln t ln n / (n eps^2), expanded into two
        # terms of kept per-counter factors: c1 / n + c2 ln n / (n^2 eps^2)
        ln_t, ln_big_t = math.log(t), math.log(self.T)
        c1 = 2.0 * self.N * ln_t
        c2 = c1 * self.dp_bonus_scale * 128.0 * self.N * ln_big_t**2 * ln_t
        inner = np.multiply(self._inv_n, c1)
        inner += self._ln_term * c2
        out = np.sqrt(inner, out=inner)
        if self.bonus_scale != 1.0:
            out *= self.bonus_scale
        out += self.alpha1
        return out
