"""The lock-step epoch machine shared by CDP-, DDP- and HDP-MAB (Li & Song, Algorithms 1, 3
and 5; docs/commeff.md).

Every agent runs the same successive-elimination schedule. Epoch ``r``: explore every active arm
``n_r`` times round-robin in index order, privatise the epoch's per-arm means with Laplace noise
of scale ``1 / (eps_msg n_r)`` and fold them into the running mean ``ybar`` (Algorithm 1, lines
of the exploration phase), communicate ``ybar`` (subclasses: server, GIS flood, SAC + server),
then drop every arm whose aggregate trails the best by at least ``2 C(r)`` (the elimination line
of Algorithms 1, 3 and 5). With one arm left, or after the round budget R (Sec. IV-B: then the
best aggregate), everyone commits to it.

An agent is in one of three phases, computed each step from its own position in the schedule:
exploring (``pos < length`` of its epoch), communicating (from the epoch's end until its round
closes, ``delay`` pulled slots after the upload) or committed. Timing (``timing``; docs/commeff.md,
"Decisions"): ``"paper"`` (the default) makes the round's upload a communication-only step and
every further hop one pulled slot (GIS ``d_G - 1``, SAC ``max ecc(sink) - 1``) in which every
agent plays its local greedy arm; ``"latency"`` sends the upload with a pull instead, so a round
costs ``1 + delay`` slots.

State is kept per (run, agent) and every agent decides from its own rewards and the messages
delivered to it; agents of a run stay in lock step because they hold identical aggregates.
Laplace noise: the suite's :class:`~fedbandit_env.privacy.LaplaceMechanism` with L1 sensitivity
``1 / n_r`` (one reward moves one arm's epoch mean by at most ``1 / n_r``) and level ``eps_msg``,
drawn from the agent stream's ``privacy`` child: one fixed-shape (N, K) block per run and round
from that run's own generator, so run b of a batch equals its seed run alone, and paired seeds
share the noise across structures (the same standard draws, scaled by ``b_r``).
"""

from __future__ import annotations

import math
from abc import abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from agents.commeff import schedule
from agents.commeff.config import EliminationConfig
from fedbandit_env.engine import PULL, VecObservation
from fedbandit_env.errors import ConfigError
from fedbandit_env.kernels import ArmTable
from fedbandit_env.policy import (
    MULTI_ARMED,
    FederationFacts,
    TeamAction,
    TeamPolicy,
    require_family,
)
from fedbandit_env.scores import note_scores
from fedbandit_env.seeding import BatchedRNG
from fedbandit_env.xp import namespace

EXPLORE, COMMUNICATE, COMMIT = 0, 1, 2


def _standard_laplace(gen: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Standard Laplace draws, as :meth:`LaplaceMechanism.noise` makes them."""
    return gen.laplace(0.0, 1.0, size=shape)


@dataclass(frozen=True)
class RoundRecord:
    """One completed round of one run (agent 0's view; every agent of the run agrees)."""

    r: int
    step: int  # step whose arms were chosen right after the aggregate arrived
    tilde: float
    s_int: int
    n: int
    c: float
    h: float
    noise_scale: float
    active_before: int
    active_after: int


@dataclass(frozen=True)
class EliminationParams:
    """What the epoch machine reads on one federation (:func:`elimination_params`): the
    validated configuration, the channel it talks on (``""``: none), N, K, T, ``n_eff`` (the
    N of every formula), ``delay`` (pulled slots after the upload step until the aggregate
    arrives), ``eps_msg`` (the DP level of each released message: ``N_eff * epsilon`` in
    ``"paper"`` mode) and ``delta`` (the minimum gap of the ``Delta^(r/R)`` schedule, one per
    run; None without a round budget)."""

    config: EliminationConfig
    channel: str
    num_agents: int
    num_arms: int
    horizon: int
    n_eff: int
    delay: int
    eps_msg: float
    delta: tuple[float, ...] | None

    @property
    def privacy_epsilon(self) -> float:
        """The declared per-agent guarantee on this federation: each message, and by parallel
        composition over epochs the whole transcript, is ``eps_msg``-DP (Theorem 1's privacy
        part); ``inf``: no noise."""
        return self.eps_msg


Bind = Callable[[Any, FederationFacts], tuple[int, int]]
"""A structure's channel check: ``(config, facts) -> (N_eff, delay)``."""


def elimination_params(
    config: EliminationConfig, facts: FederationFacts, channel: str, bind: Bind
) -> EliminationParams:
    """The :class:`EliminationParams` of a structure on a federation, checking, in this order,
    the family and rewards in [0, 1] (the Laplace sensitivity ``1/n_r`` needs them), the
    structure's channel (``bind``, which gives N_eff and the delay), that the first epoch and
    its round fit the horizon, and one ``delta`` per run. Pure: the numpy ``reset`` and the
    JAX ``make_params`` call it."""
    aid = config.agent_id
    require_family(aid, facts, MULTI_ARMED)
    lo, hi = facts.reward_bounds
    if lo < 0.0 or hi > 1.0:
        raise ConfigError(
            f"{aid}: reward: expected rewards in [0, 1] (the Laplace sensitivity "
            f"1/n_r needs them), got bounds {facts.reward_bounds}"
        )
    n_eff, delay = bind(config, facts)
    eps_msg = config.eps_msg(n_eff)
    k, t = facts.num_arms, facts.horizon
    # initialisation: the first epoch of the doubling schedule plus its round must fit
    s1 = schedule.sample_target(1, k, 0.5, num_arms=k, horizon=t, n_eff=n_eff, eps_msg=eps_msg)
    need = k * int(schedule.integer_target(s1, 0)) + 1 + delay
    if t < need:
        raise ConfigError(
            f"{aid}: horizon: expected >= {need} (K * S_int(1) exploration slots "
            f"of the first epoch + {1 + delay} round slots), got {t}"
        )
    delta = config.delta_per_run(facts.num_runs)
    return EliminationParams(
        config, channel, facts.num_agents, k, t, n_eff, delay, eps_msg,
        None if delta is None else tuple(float(d) for d in delta),
    )  # fmt: skip


def check_no_drop(agent_id: str, facts: FederationFacts, channel: str) -> None:
    """The lock-step elimination needs every message: a channel that drops is refused."""
    drop = facts.channels[channel].get("drop_prob", 0.0)
    if drop:
        raise ConfigError(
            f"{agent_id}: channels.{channel}.drop_prob: expected 0 (the "
            f"lock-step elimination needs every message), got {drop}"
        )


def noise_scale(eps_msg: float, n: Any) -> Any:
    """The Laplace scale ``b_r = (1 / n_r) / eps_msg`` of a release after ``n_r`` pulls per arm
    (:class:`~fedbandit_env.privacy.LaplaceMechanism` ``(eps_msg, sensitivity=1/n_r).scale``;
    0 without noise), for either engine."""
    if math.isinf(eps_msg):
        return 0.0 * n
    return (1.0 / n) / eps_msg


def broadcast_aggregate(aggregate: Any, ybar: Any) -> Any:
    """Every agent's aggregate is the broadcast one (Algorithm 1's server line; Algorithm 5's
    server combination of the sinks' means): ``aggregate`` (..., K) to the shape of ``ybar``
    (..., N, K), for either engine."""
    xp = namespace(aggregate, ybar)
    return xp.broadcast_to(xp.expand_dims(aggregate, -2), ybar.shape)


def flood_average(ybar: Any, total: Any, count: Any) -> Any:
    """Algorithm 3's average over the GIS flood: ``(ybar_i + sum of the received ybar_j) /
    (1 + number received)``, for either engine (``total`` (..., N, K), ``count`` (..., N))."""
    return (ybar + total) / (1.0 + count)[..., None]


class EliminationTeam(TeamPolicy):
    """Base class: subclasses make their params (``make_params``: the structure's channel
    check), say what to send (``_messages``) and how an agent's aggregate is formed from what
    it received (``_receive``/``_aggregate``; default: the channel's broadcast aggregate)."""

    channel_name: str = ""

    def __init__(
        self,
        epsilon: float = 1.0,
        privacy: str = "paper",
        rounds: int | None = None,
        delta: float | tuple[float, ...] | None = None,
        timing: str = "paper",
    ):
        self.config = EliminationConfig(self.agent_id, epsilon, privacy, rounds, delta, timing)

    @abstractmethod
    def make_params(self, facts: FederationFacts) -> EliminationParams:
        """The structure's :class:`EliminationParams` (its ``*_params`` function)."""

    @property
    def privacy_epsilon(self) -> float | None:
        """Declared per-agent guarantee: each message, and by parallel composition over epochs
        the whole transcript, is ``eps_msg``-DP (Theorem 1's privacy part). In ``"paper"`` mode that is
        ``N_eff * epsilon``, known after :meth:`reset` (None before); ``inf``: no noise."""
        if hasattr(self, "eps_msg"):
            return self.eps_msg
        return self.config.declared_epsilon

    @property
    def epsilon_effective(self) -> float:
        """The DP level of each released message (``N_eff * epsilon`` in paper mode)."""
        return self.eps_msg

    # ------------------------------------------------------------------ reset
    def reset(self, facts: FederationFacts, rng: BatchedRNG) -> None:
        """Bind the channel, check the federation (:meth:`make_params`), and start epoch 1 for
        every agent (every arm active, ``ybar = 0``)."""
        self.params = p = self.make_params(facts)
        self.n_eff, self.delay, self.eps_msg = p.n_eff, p.delay, p.eps_msg
        B, N, K = facts.num_runs, facts.num_agents, facts.num_arms
        self.num_arms, self.horizon = K, facts.horizon
        shape = (B, N)
        self.active = np.ones((B, N, K), dtype=bool)
        self.num_active = np.full(shape, K, dtype=np.int64)
        self.order = np.broadcast_to(np.arange(K), (B, N, K)).copy()
        self.r = np.zeros(shape, dtype=np.int64)
        self.s_prev = np.zeros(shape, dtype=np.int64)
        self.s_int = np.zeros(shape, dtype=np.int64)
        self.n = np.zeros(shape, dtype=np.int64)
        self.tilde = np.zeros(shape)
        self.c = np.zeros(shape)
        self.h = np.zeros(shape)
        self.phase = np.full(shape, EXPLORE, dtype=np.int64)
        self.pos = np.zeros(shape, dtype=np.int64)
        self.length = np.zeros(shape, dtype=np.int64)
        self.committed = np.zeros(shape, dtype=np.int64)
        self.epoch_sum = np.zeros((B, N, K))
        self.own_sum = np.zeros((B, N, K))  # exploration sums (every active arm: s_int pulls)
        self.ybar = np.zeros((B, N, K))
        self.aggregate = np.zeros((B, N, K))
        self.explored_last = np.zeros(shape, dtype=bool)
        self.upload_step = np.full(shape, -1, dtype=np.int64)
        self.rounds_done = np.zeros(B, dtype=np.int64)
        self.uploads = np.zeros(B, dtype=np.int64)
        self.history: list[list[RoundRecord]] = [[] for _ in range(B)]
        self._privacy_rng = rng.child("privacy")  # one Generator per run
        self.table = ArmTable.of(B, N, K)
        delta = None if p.delta is None else np.array(p.delta)
        self.delta = None if delta is None else np.repeat(delta[:, None], N, axis=1)
        self._reset_channel(facts)
        self._start_epoch(np.ones(shape, dtype=bool), step=0)

    def _reset_channel(self, facts: FederationFacts) -> None:
        """Subclass hook for per-channel receive buffers."""

    # ------------------------------------------------------------------ epochs
    def _start_epoch(self, mask: np.ndarray, step: int) -> None:
        """Next epoch r + 1 for the (run, agent) pairs in ``mask`` (the head of the epoch loop of
        Algorithms 1, 3 and 5): its resolution ``tilde_r``, sample target ``S_int(r)``, width
        ``C(r) = c(r) + h(r)`` and round-robin order; or the commit, with one arm left or the
        round budget R spent (Sec. IV-B)."""
        cfg = self.config
        self.s_prev[mask] = self.s_int[mask]
        self.r[mask] += 1
        budget_over = cfg.rounds is not None and self.r > cfg.rounds
        commit = mask & ((self.num_active == 1) | budget_over)
        if commit.any():
            score = np.where(self.active, self.aggregate, -np.inf)
            note_scores(score)
            self.committed[commit] = np.argmax(score, axis=2)[commit]
            self.phase[commit] = COMMIT
        go = mask & ~commit
        if not go.any():
            return
        r, na = self.r[go], self.num_active[go]
        tilde = schedule.resolution(r, cfg.rounds, None if self.delta is None else self.delta[go])
        kw = dict(
            num_arms=self.num_arms, horizon=self.horizon, n_eff=self.n_eff, eps_msg=self.eps_msg
        )
        s_int = schedule.integer_target(schedule.sample_target(r, na, tilde, **kw), self.s_prev[go])
        c, h = schedule.widths(r, na, s_int, **kw)
        self.tilde[go], self.s_int[go], self.c[go], self.h[go] = tilde, s_int, c, h
        self.n[go] = s_int - self.s_prev[go]
        self.length[go] = na * self.n[go]
        self.pos[go] = 0
        self.phase[go] = EXPLORE
        self.epoch_sum[go] = 0.0
        self.order[go] = np.argsort(~self.active[go], axis=1, kind="stable")

    def _privatise(self, done: np.ndarray) -> None:
        """The epoch's private means ``yhat = epoch mean + Lap(1/(eps_msg n_r))`` folded into
        the running mean ``ybar = (S(r-1) ybar + n_r yhat) / S(r)`` (Algorithm 1, the
        privatisation lines; Algorithms 3 and 5 alike)."""
        n = self.n[done][:, None].astype(np.float64)
        xhat = self.epoch_sum[done] / n
        if math.isinf(self.eps_msg):
            yhat = xhat
        else:
            # LaplaceMechanism(eps_msg, sensitivity 1/n_r) per finishing run, one draw each
            noise = np.zeros(self.ybar.shape)
            runs = np.flatnonzero(done.any(axis=1))
            scale = noise_scale(self.eps_msg, self.n[runs, 0])
            standard = self._privacy_rng.rows(runs, _standard_laplace, noise.shape[1:])
            noise[runs] = scale[:, None, None] * standard
            yhat = xhat + noise[done]
        s_new = self.s_int[done][:, None].astype(np.float64)
        s_old = self.s_prev[done][:, None].astype(np.float64)
        ybar = (s_old / s_new) * self.ybar[done] + (n / s_new) * yhat
        self.ybar[done] = np.where(self.active[done], ybar, 0.0)

    def _eliminate(self, ready: np.ndarray, aggregate: np.ndarray, step: int) -> None:
        """The elimination line of Algorithms 1, 3 and 5: keep ``k`` iff ``max_j ybar_j -
        ybar_k < 2 C(r)`` (all drops at once)."""
        agg = np.where(self.active, aggregate, -np.inf)
        best = agg.max(axis=2, keepdims=True)
        width = (self.c + self.h)[..., None]
        keep = self.active & (best - agg < 2.0 * width)
        before = self.num_active.copy()
        self.aggregate[ready] = aggregate[ready]
        self.active[ready] = keep[ready]
        self.num_active = self.active.sum(axis=2)
        runs = np.flatnonzero(ready[:, 0])
        if runs.size == 0:
            return
        self.rounds_done[runs] += 1
        n = self.n[runs, 0]
        scale = noise_scale(self.eps_msg, n)  # of each run's round (0 when not private)
        columns = zip(
            runs.tolist(),
            self.r[runs, 0].tolist(),
            self.tilde[runs, 0].tolist(),
            self.s_int[runs, 0].tolist(),
            n.tolist(),
            self.c[runs, 0].tolist(),
            self.h[runs, 0].tolist(),
            scale.tolist(),
            before[runs, 0].tolist(),
            self.num_active[runs, 0].tolist(),
            strict=True,
        )
        for b, r, tilde, s_int, n_r, c, h, b_r, active_before, active_after in columns:
            self.history[b].append(
                RoundRecord(
                    r=r,
                    step=step,
                    tilde=tilde,
                    s_int=s_int,
                    n=n_r,
                    c=c,
                    h=h,
                    noise_scale=b_r,
                    active_before=active_before,
                    active_after=active_after,
                )
            )

    def _greedy(self) -> np.ndarray:
        """The "local empirically best arm" of the delay slots (Algorithms 2 and 4): the arg-max
        of the agent's own non-noisy exploration mean over the current active set, lowest index
        on ties (docs/commeff.md, "Decisions").

        Valid for the agents in the communication phase: each arm of the epoch's active set was
        explored ``n`` times in every epoch so far (round-robin), so its own pull count is
        ``s_int`` (no per-arm count is kept)."""
        mean = self.own_sum / self.s_int[..., None].astype(np.float64)
        note_scores(mean)
        return np.argmax(np.where(self.active, mean, -np.inf), axis=2)

    # ------------------------------------------------------------------ step
    def act(self, obs: VecObservation) -> TeamAction:
        """One step of Algorithms 1, 3 and 5 for every agent: fold in the last exploration pull,
        end the epochs that are complete (privatise and upload), close the rounds whose
        aggregate has arrived (eliminate, start the next epoch or commit), then pull by phase:
        the next arm of the round-robin, the local greedy arm, or the committed arm."""
        step = obs.step + 1  # the step these arms are for
        if obs.step > 0:
            self._fold(obs)
        self._receive(obs)
        upload = None
        done = (self.phase == EXPLORE) & (self.pos >= self.length)
        if done.any():
            self._privatise(done)
            self.phase[done] = COMMUNICATE
            self.pos[done] = 0
            self.upload_step[done] = step
            self.uploads += done[:, 0]
            upload = done
        ready = (self.phase == COMMUNICATE) & (self.pos > self.delay)
        if ready.any():
            self._eliminate(ready, self._aggregate(obs, ready), step)
            self._start_epoch(ready, step)
        explore, commit = self.phase == EXPLORE, self.phase == COMMIT
        communicate = self.phase == COMMUNICATE
        # round-robin: the explored arm is order[b, i, pos % |active|]; the slot of an agent
        # that does not explore is in range too, and its arm is replaced just below
        arms = self.table.gather(self.order, self.pos % np.maximum(self.num_active, 1))
        if communicate.any():
            arms = np.where(communicate, self._greedy(), arms)
        arms = np.where(commit, self.committed, arms)
        self.pos += ~commit  # a committed agent stays where it is
        self.explored_last = explore
        messages = {} if upload is None else self._messages(upload)
        pull = None
        if upload is not None and self.config.timing == "paper":
            pull = ~upload.any(axis=1)  # the upload is a communication-only step
        return TeamAction(arms, messages, pull)

    def _fold(self, obs: VecObservation) -> None:
        """Add last step's exploration reward to the epoch sums and the agent's own sums (only
        agents that explored, in runs whose last step pulled)."""
        explored = self.explored_last & (obs.phase == PULL)[:, None]
        self.table.add(self.epoch_sum, obs.last_arm, obs.last_reward, where=explored)
        self.table.add(self.own_sum, obs.last_arm, obs.last_reward, where=explored)

    # ------------------------------------------------------------------ channel hooks
    def _receive(self, obs: VecObservation) -> None:
        """Per-step hook to collect multi-step deliveries (DDP)."""

    def _aggregate(self, obs: VecObservation, ready: np.ndarray) -> np.ndarray:
        """Each agent's aggregate ``ybar_k(r)`` (B, N, K), valid where ``ready``: by default
        the channel's broadcast aggregate (CDP's server, HDP's server)."""
        return broadcast_aggregate(obs.deliveries[self.channel_name].aggregate, self.ybar)

    def _messages(self, upload: np.ndarray) -> dict[str, Any]:
        """Channel messages of an upload step: ``{name: (send (B, N), payload (B, N, K))}``;
        by default every uploading agent sends its ``ybar``."""
        return {self.channel_name: (upload, self.ybar.copy())}
