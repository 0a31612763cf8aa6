"""DP-Master-worker UCB (Li, Song & Fragouli, Algorithm 1), registered as ``dp_mw_ucb``.

Decisions and their reasons: docs/dp-recsys.md.

Every agent keeps one hybrid counter per arm (Algorithm 1 line 2) whose output ``s_ij`` is its
private reward sum. In a *decision round* each agent uploads its index vector over the ``server``
channel (kind ``server``, aggregate ``"mean"``, dim K, full participation),

    I_ij(t) = s_ij/n_ij + sqrt(2 ln t / n_ij) + upsilon(n_ij)/n_ij,
    upsilon(n) = (1/eps) ln(1/delta) ln^{1.5} n,   delta = T^-4  (Algorithm 1 lines 12-13, Theorem
    1),

the server averages the vectors and broadcasts ``I^avg``, and every agent plays
``argmax_j I^avg_j`` with the common tie-break "lowest arm index" (lines 15-18), so all agents
play the same arm (lock step). Decisions happen only when ``eta`` — rounds since the last switch,
1 in the first round after initialisation — is a power of two (line 10; no previous arm at the
first decision, so it counts as a switch); agents send nothing in the other rounds, which the
ledger shows. ``epsilon = inf`` gives the non-private variant (exact sums, no privacy width).
Privacy: pure epsilon-DP per agent over the whole transcript (docs/dp-recsys.md, "Privacy"): each
reward enters one counter; the uploads are post-processing of counter outputs and public counts.

Timing (``timing``, docs/writing-agents.md, "Communication steps"). ``"paper"`` (the default)
follows Algorithm 1 as written: in a decision round t the agents first take a communication step
(upload the indices of the pulls of rounds 1..t-1 with ``ln t``, the server's average comes back in
the same step's observation) and then pull the argmax in round t; rounds 1..K pull arms 0..K-1
(lines 6-8), round K+1 is the first decision round. A run takes one engine step more per
decision round; T counts pulls.

``"latency"`` keeps the one-step round trip of an environment in which messages travel with the
pulls: a decision round t means "upload the indices computed from the pulls of steps 1..t-1
together with the pull of step t, and play the argmax from step t+1": the arm of step t itself
is the one held before. The ``eta`` schedule is the paper's, counted in upload steps; a switch
detected from the reply to the upload of step t resets ``eta(t) = 1``, so the next upload is at
t+1 (hold lengths 1, 2, 4, ...). Step K+1 (the first decision round, whose answer is not back
yet) repeats arm 0. This variant makes fewer decisions than the paper (about 2.1k instead of
3.3k per 10^4 rounds non-private at M = 20, K = 10).

In both, all agents play the same arm in every step.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from agents.channel_check import check_channel_spec
from agents.dp_recsys_common import (
    check_clip,
    check_delta_horizon,
    check_epsilon,
    check_facts,
    make_running_sums,
    privacy_width,
    timed,
)
from fedbandit_env.config import EnvConfig
from fedbandit_env.engine import PULL, VecObservation
from fedbandit_env.errors import ConfigError
from fedbandit_env.kernels import scatter_add
from fedbandit_env.policy import FederationFacts, TeamAction, TeamPolicy, check_timing
from fedbandit_env.scores import note_scores
from fedbandit_env.seeding import BatchedRNG
from fedbandit_env.xp import log_of_round, namespace

AGENT_ID = "dp_mw_ucb"
VERSION = 4  # results version (docs/bench.md)
CHANNEL = "server"


@dataclass(frozen=True)
class DPMasterWorkerConfig:
    """``epsilon`` > 0 (``math.inf``: non-private); ``clip``: the counters' input range;
    ``delta_horizon``: the T of ``delta = T^-4`` (None: the environment's horizon);
    ``timing``: ``"paper"`` or ``"latency"`` (module docstring)."""

    epsilon: float = 2.0
    clip: tuple[float, float] = (0.0, 1.0)
    delta_horizon: int | None = None
    timing: str = "paper"

    def __post_init__(self) -> None:
        object.__setattr__(self, "timing", check_timing(AGENT_ID, self.timing))
        object.__setattr__(self, "epsilon", check_epsilon(AGENT_ID, self.epsilon))
        object.__setattr__(self, "clip", check_clip(AGENT_ID, self.clip))
        object.__setattr__(self, "delta_horizon", check_delta_horizon(AGENT_ID, self.delta_horizon))


def mw_channel_spec(num_arms: int) -> dict[str, dict[str, Any]]:
    """``server`` of dim K with aggregate ``"mean"`` (the server averages the index vectors)."""
    return {CHANNEL: {"kind": "server", "dim": num_arms, "aggregate": "mean"}}


@dataclass(frozen=True)
class DPMasterWorkerParams:
    """What DP-MW-UCB reads at run time on one federation: N (the paper's M), K, the horizon T
    (the counters' capacity: one item per pull), ``ln(1/delta)`` with ``delta = T^-4`` (T:
    ``delta_horizon`` or the horizon; Theorem 1) and the configuration (``epsilon`` and ``clip``
    are the counters' options, :func:`~agents.dp_recsys_common.make_running_sums`)."""

    num_agents: int
    num_arms: int
    horizon: int
    ln_inv_delta: float
    config: DPMasterWorkerConfig


def dp_mw_params(config: DPMasterWorkerConfig, facts: FederationFacts) -> DPMasterWorkerParams:
    """The :class:`DPMasterWorkerParams` of a validated configuration on a federation; checks
    the family, a horizon longer than the initialization and the ``server`` channel, which must
    average every agent's upload (Algorithm 1 line 32: participation 1). Pure: the numpy
    ``reset`` and the JAX ``make_params`` call it."""
    K = facts.num_arms
    check_facts(AGENT_ID, facts, init_steps=K + (0 if config.timing == "paper" else 1))
    check_channel_spec(AGENT_ID, mw_channel_spec(K), facts)
    have = facts.channels[CHANNEL]
    if have.get("participation") != 1.0:
        raise ConfigError(
            f"{AGENT_ID}: channels.{CHANNEL}: expected aggregate 'mean' with participation "
            f"1.0 (the server averages all M index vectors), got aggregate "
            f"{have.get('aggregate')!r} with participation {have.get('participation')!r}"
        )
    horizon = config.delta_horizon or facts.horizon
    ln_inv_delta = 4.0 * math.log(horizon)  # delta = T^-4 (Theorem 1)
    return DPMasterWorkerParams(facts.num_agents, K, facts.horizon, ln_inv_delta, config)


def is_power_of_two(x: Any) -> Any:
    """Element-wise ``x`` in {1, 2, 4, ...} for positive ints (numpy or JAX)."""
    return (x > 0) & ((x & (x - 1)) == 0)


def mw_index(value: Any, n: Any, t: Any, epsilon: float, ln_inv_delta: float) -> Any:
    """The private UCB indices ``I_ij = s_ij/n_ij + sqrt(2 ln t / n_ij) + upsilon(n_ij)/n_ij``
    (Algorithm 1 lines 11-13) of the counters' releases ``value`` and the counts ``n`` (float,
    >= 1 where used) at round ``t``: an int or a scalar array, or one round per run (R,) for
    (R, N, K) statistics. Both engines call it (numpy float64, JAX float32)."""
    xp = namespace(value, n)
    ln_t = log_of_round(xp, t)
    if np.ndim(ln_t):  # one round per run
        ln_t = ln_t[..., None, None]
    return value / n + xp.sqrt(2.0 * ln_t / n) + privacy_width(n, epsilon, ln_inv_delta)


def read_reply(aggregate: Any, got: Any, held: Any, undecided: Any, eta: Any):
    """The server's average ``I^avg`` (..., K) arrived where ``got``: the new decision is its
    argmax, lowest index on ties (Algorithm 1 lines 16-18); a switch (a first decision counts as
    one) resets ``eta`` to 1 (lines 19-21). Returns the new ``(held, undecided, eta)``; both
    engines call it."""
    xp = namespace(aggregate, held)
    note_scores(aggregate)
    new = xp.argmax(aggregate, axis=-1)[..., None]  # lowest index on ties (line 18)
    switched = got & (undecided | (new != held))
    return xp.where(got, new, held), undecided & ~got, xp.where(switched, 1, eta)


class DPMasterWorkerUCB(TeamPolicy):
    """Batched DP-MW-UCB over B runs and N (the paper's M) agents; see the module docstring."""

    agent_id = AGENT_ID
    version = VERSION

    def __init__(
        self,
        epsilon: float = 2.0,
        clip: tuple[float, float] = (0.0, 1.0),
        delta_horizon: int | None = None,
        timing: str = "paper",
    ):
        clip = tuple(clip) if isinstance(clip, list | tuple) else clip
        self.config = DPMasterWorkerConfig(epsilon, clip, delta_horizon, timing)

    @property
    def privacy_epsilon(self) -> float:
        """Declared guarantee: epsilon-DP per agent over its whole transcript (``inf``: none)."""
        return self.config.epsilon

    def channel_spec(self, config: EnvConfig):
        return mw_channel_spec(config.num_arms)

    # ---------------------------------------------------------------------------- reset
    def reset(self, facts: FederationFacts, rng: BatchedRNG) -> None:
        """Algorithm 1 lines 1-3: ``eta = 1``, one mechanism ``H_ij`` per agent and arm, and
        ``delta = T^-4`` (Theorem 1; :func:`dp_mw_params`)."""
        self.params = dp_mw_params(self.config, facts)  # checks the facts
        self.paper = self.config.timing == "paper"
        B, N, K = facts.num_runs, facts.num_agents, facts.num_arms
        self.num_arms = K
        self.horizon = facts.horizon
        self.ln_inv_delta = self.params.ln_inv_delta
        self.counts = np.zeros((B, N, K))
        self.sums = make_running_sums(
            self.config.epsilon, (B, N, K), self.config.clip, rng.child("privacy"), facts.horizon
        )
        self._row = np.arange(B * N, dtype=np.int64).reshape(B, N) * K  # flat (b, i, 0)
        self.held = np.zeros((B, N), dtype=np.int64)  # the arm played outside decision rounds
        self.undecided = np.ones((B, N), dtype=bool)  # no decision yet (a_prev = None)
        self.eta = np.ones((B, N), dtype=np.int64)
        self.uploaded = np.zeros((B, N), dtype=bool)  # sent an index vector with the last pull
        self.awaiting = np.zeros(B, dtype=bool)  # paper timing: uploaded in the last step
        self.decision_rounds = np.zeros(B, dtype=np.int64)
        self._zeros = np.zeros((B, N, K))

    # ------------------------------------------------------------------------------ act
    def index(self, t: int | np.ndarray, runs: np.ndarray | None = None) -> np.ndarray:
        """Private UCB indices (B, N, K) at round ``t`` (Algorithm 1 lines 11-13) (an int, or one
        per run (B,)) from the current sums and counts; with ``runs`` (int indices) only those runs'
        rows (and ``t`` an int or one per listed run), the same numbers as ``index(t)[runs]``."""
        n, value = self.counts, self.sums.value
        if runs is not None:
            n, value = n[runs], value[runs]
        return mw_index(value, n, t, self.config.epsilon, self.ln_inv_delta)

    def _fold_in_reward(self, obs: VecObservation) -> None:
        """Algorithm 1 lines 8 and 26: the reward into the pulled arm's mechanism; its count + 1."""
        arm = obs.last_arm
        self.sums.insert(arm, obs.last_reward)
        scatter_add(self.counts, self._row + arm, 1.0)

    def _fold_in_reply(self, obs: VecObservation) -> None:
        """The server's average of the uploads of the last step: the new decision (Algorithm 1
        lines 16-21)."""
        reply = obs.deliveries[CHANNEL]
        got = self.uploaded & (reply.count > 0)[:, None]
        self.held, self.undecided, self.eta = read_reply(
            reply.aggregate, got, self.held, self.undecided, self.eta
        )

    def act(self, obs: VecObservation) -> TeamAction:
        """One engine step under the configured ``timing`` (module docstring)."""
        return timed(self.config.timing, self._act_paper, self._act_latency)(obs)

    def _act_paper(self, obs: VecObservation) -> TeamAction:
        """Algorithm 1 as written (lines 10-27): a decision round is a communication step (upload,
        average back), then the pull of the argmax; other rounds pull the held arm."""
        K = self.num_arms
        t = obs.pulls + 1  # (B,) the round of the next pull
        if obs.step > 0:  # the runs that pulled in the last step fold their rewards in
            fresh = (obs.phase == PULL) & (obs.pulls > 0)
            every = bool(fresh.all())
            flat, reward = self._row + obs.last_arm, obs.last_reward  # pulled arms, flat
            if not every:
                flat, reward = flat[fresh], reward[fresh]
            flat = flat.reshape(-1)
            self.sums.insert_flat(flat, reward.reshape(-1), every)
            scatter_add(self.counts, flat, 1.0)
        reply = self.awaiting
        if reply.any():
            self.held, self.undecided, self.eta = read_reply(
                obs.deliveries[CHANNEL].aggregate,
                reply[:, None],
                self.held,
                self.undecided,
                self.eta,
            )
        init = t <= K
        decide = ~init & ~reply & (t <= self.horizon) & is_power_of_two(self.eta[:, 0])
        arms = np.where(init[:, None], (t - 1)[:, None], self.held)
        # the runs that pull in the main loop close their round: eta += 1
        self.eta += (~init & ~decide)[:, None]
        self.awaiting = decide
        send = np.repeat(decide[:, None], self.held.shape[1], axis=1)
        payload = self._zeros
        if decide.any():  # only the deciding runs' indices are computed and sent
            runs = np.flatnonzero(decide)
            payload = np.zeros_like(self._zeros)
            payload[runs] = self.index(t[runs], runs)
            self.decision_rounds += decide
        pull = None if not decide.any() else ~decide
        return TeamAction(arms.astype(np.int64), {CHANNEL: (send, payload)}, pull)

    def _act_latency(self, obs: VecObservation) -> TeamAction:
        """Algorithm 1 with the uploads sent with the pulls: the reply is used one step later
        (module docstring, "latency")."""
        t = obs.step + 1
        K = self.num_arms
        if obs.step > 0:
            self._fold_in_reward(obs)
        if t <= K:
            arms = np.full(self.held.shape, t - 1, dtype=np.int64)
            self.uploaded = np.zeros_like(self.uploaded)
            return TeamAction(arms, {CHANNEL: (self.uploaded, self._zeros)})
        if t > K + 1:
            self._fold_in_reply(obs)
            self.eta += 1
        decide = is_power_of_two(self.eta)
        payload = self._zeros
        if decide.any():
            payload = np.where(decide[..., None], self.index(t), 0.0)
        self.uploaded = decide
        self.decision_rounds += decide.any(axis=1)
        return TeamAction(self.held.copy(), {CHANNEL: (decide, payload)})
