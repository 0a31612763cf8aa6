"""The shared core of the baseline zoo: batched index policies, independent or sharing statistics.

Every baseline of the zoo (``ucb1``, ``epsilon_greedy``, ``kl_ucb``, ``thompson_beta``,
``thompson_gaussian`` and their ``*_shared`` variants) is an :class:`IndexPolicy`: each agent keeps
the per-arm statistics of its own pulls, ``counts`` n[b, i, k] and ``sums`` s[b, i, k] (B, N, M),
computes an index per arm from the statistics it may use, and pulls an arm of maximal index with
a **uniform tie-break**: one uniform ``u`` per agent and step from the ``tiebreak`` child stream;
among the ``k`` arms of exactly maximal index the ``floor(u k)``-th in arm order is pulled
(:func:`argmax_one_uniform`). Learners whose indices are continuous random variables (Thompson
sampling) set ``ties = False``: exact ties have probability zero there, so they take the plain
arg-max and draw no tie-break numbers.

The statistics are (B, N, M) tables updated at each agent's pulled arm through
:class:`~fedbandit_env.kernels.ArmTable`; the independent variants keep the running total of own
pulls (``pulls``, the ``t`` of their index).

**Independent** variants use only their own statistics and send nothing.

**Share-statistics** variants (``shared = True``) talk over a channel named ``neighbors`` of kind
``neighbors`` and dimension 2M. Every step each agent sends its OWN local statistics
``[counts (M), sums (M)]`` (never anything it received): the statistics protocol of
:mod:`fedbandit_env.rl.features`, declared in ``message_protocols`` so that an RL learner of the
single-agent view shares with these peers (and only with peers that declare it). Each agent keeps, per neighbour slot, the
latest statistics it received from that neighbour (a dropped message keeps the previous one), and
uses

    n_used = n_own + sum over neighbours j of n_j(latest),  s_used = s_own + sum_j s_j(latest).

Because each agent only forwards its own counts, nothing is double counted: n_used is exactly the
number of pulls (own and one-hop neighbours', up to one step old) the agent has seen. Information
travels one hop and no further (no relaying), so the shared variants respect the light cone. In
the heterogeneous family the neighbours' samples come from their local means, so s_used / n_used
estimates the neighbourhood average of the local means: exactly the global mean on a complete
graph, a biased estimate on sparse graphs (a deliberately simple communicating learner, meant as
a baseline the privacy wrappers can privatize).

``total`` passed to :meth:`IndexPolicy.index` is ``n_used.sum(-1)``: the number of samples the
agent's index is built on (its "time" in UCB-style bonuses).

Received statistics may be noisy (a privacy wrapper privatizing the channel): negative aggregated
neighbour counts are treated as 0, and Beta Thompson sampling clips its success counts to
[0, n], so every index stays well defined.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from baselines.config import check_bounds
from baselines.params import (  # re-exported: their home is baselines.params
    CHANNEL,
    default_scale,
    index_params,
    statistics_channel_spec,
    unit_interval_bounds,
)
from fedbandit_env.config import EnvConfig
from fedbandit_env.engine import VecObservation
from fedbandit_env.kernels import (  # re-exported: their home is fedbandit_env.kernels
    ArmTable,
    argmax_one_uniform,
    argmax_uniform_ties,
    check_number,
)
from fedbandit_env.policy import (
    FederationFacts,
    TeamAction,
    TeamPolicy,
)
from fedbandit_env.rl.features import STATISTICS_PROTOCOL
from fedbandit_env.scores import note_scores
from fedbandit_env.seeding import BatchedRNG

__all__ = [
    "CHANNEL",
    "IndexPolicy",
    "argmax_one_uniform",
    "argmax_uniform_ties",
    "check_bounds",
    "check_number",
    "default_scale",
    "unit_interval_bounds",
]


class IndexPolicy(TeamPolicy):
    """Per-agent (counts, sums) statistics, optional one-hop sharing, index argmax.

    Subclasses implement :meth:`index` and may override :meth:`setup` (extra random streams,
    checks) and :meth:`transform_reward` (e.g. the Bernoulli trick)."""

    shared: ClassVar[bool] = False
    event_time: ClassVar[tuple[str, ...]] = ("clock", "reward_delay", "random_delay", "latency",
                                             "churn")  # fmt: skip
    lock_step_reason: ClassVar[str] = (
        "its shared variant sends its statistics at every step, a lock-step protocol"
    )
    ties: ClassVar[bool] = True  # False: continuous indices, plain arg-max, no tie-break draws
    uses_total: ClassVar[bool] = True  # False: index() ignores ``total`` (shared: not computed)
    version: ClassVar[int] = 2  # results version (docs/bench.md, "Results versions")

    # ----------------------------------------------------------- protocol
    @property
    def message_protocols(self) -> dict[str, str]:
        """What this learner sends on which channel (``fedbandit_env.rl.declared_protocol``)."""
        return {CHANNEL: STATISTICS_PROTOCOL} if self.shared else {}

    def channel_spec(self, config: EnvConfig):
        return statistics_channel_spec(self.shared, config.num_arms)

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        if cls.shared and "event_time" not in cls.__dict__:  # one-hop sharing is lock-step
            # its neighbours' latest statistics, however late; own rewards as they arrive (the
            # variant's delays are its independent parent's), but every agent at every step
            cls.event_time = tuple(o for o in cls.event_time if o != "clock")

    def reset(self, facts: FederationFacts, rng: BatchedRNG) -> None:
        config = getattr(self, "config", None)
        self.params = index_params(self.agent_id, config, facts, self.shared)  # checks facts
        B, N, M = facts.num_runs, facts.num_agents, facts.num_arms
        self.num_arms = M
        # t is the step when every agent pulls at every step and sees its reward at once
        self.lock_step = facts.clock == "sync" and not facts.reward_delay and facts.churn == "always"
        self.table = ArmTable.of(B, N, M)
        self.counts = self.table.zeros()
        self.sums = self.table.zeros()
        self.pulls = np.zeros((B, N, 1))  # running total of own pulls = counts.sum(-1)
        degree = self.params.degree
        # per neighbour slot d, slot-major so that each slot is contiguous: [counts, sums];
        # written only when a step's delivery misses some slot (see :meth:`_heard`)
        self._latest = np.zeros((degree, B, N, 2 * M))
        self._full: np.ndarray | None = None  # the last delivery's payload, if it filled every slot
        self._tiebreak = rng.child("tiebreak").buffered("uniform", (N,)) if self.ties else None
        self._send = np.ones((B, N), dtype=bool)
        self.setup(facts, rng)

    def act(self, obs: VecObservation) -> TeamAction:
        """One step for every agent: add the last pull to ``counts`` and ``sums``, form the
        index (own statistics, or own plus the neighbours' latest), pull an arm of maximal
        index (ties uniformly at random) and, in the shared variants, send own statistics."""
        if obs.step > 0 and obs.pulled is None and obs.arrived_arm is None:  # lock-step
            reward = self.transform_reward(obs.last_reward)
            self.table.add(self.counts, obs.last_arm, 1.0)
            self.table.add(self.sums, obs.last_arm, reward)
            self.pulls += 1.0
        elif obs.step > 0:  # an event clock or delayed rewards: the pulls that reached each agent
            arm, reward, got = obs.last_arm, obs.last_reward, obs.pulled
            if obs.arrived_arm is not None:  # the rewards of the pulls reward_delay ago
                arm, reward, got = obs.arrived_arm, obs.arrived_reward, obs.arrived_arm >= 0
            if arm.ndim == 3:  # a random delay: one slot per delay, several may arrive at once
                self._fold_slots(arm, reward, got)
            else:
                got = got.astype(np.float64)
                arm = np.maximum(arm, 0)  # nothing arrived: 0 added at arm 0
                self.table.add(self.counts, arm, got)
                self.table.add(self.sums, arm, self.transform_reward(reward) * got)
                self.pulls += got[..., None]
        messages = {}
        if self.shared:
            # (2, B, N, M): the neighbours' counts and sums, each added over the slots
            received = self._received(obs.deliveries[CHANNEL])
            n = self.counts + np.maximum(received[0], 0.0)
            s = self.sums + received[1]
            # exact for integer counts; None for an index that ignores it
            total = np.einsum("bnm->bn", n)[..., None] if self.uses_total else None
            index = self.index(n, s, total)
            payload = np.concatenate([self.counts, self.sums], axis=-1)
            messages[CHANNEL] = (self._send, payload)
        else:
            index = self.own_index(obs.step)
        if self._tiebreak is None:
            note_scores(index)
            arms = index.argmax(axis=-1)
        else:
            arms = argmax_one_uniform(index, self._tiebreak.next())
        return TeamAction(self.choose(arms), messages)

    def _fold_slots(self, arm: np.ndarray, reward: np.ndarray, got: np.ndarray) -> None:
        """Add the rewards that arrived in the slots (B, N, D) of a random delay
        (docs/time.md, "reward_delay"): every arrived pull counts once at its arm."""
        b, i, j = np.nonzero(got)  # the arrivals, in slot order (a few per agent at most)
        at = (b, i, arm[b, i, j])
        np.add.at(self.counts, at, 1.0)
        np.add.at(self.sums, at, self.transform_reward(reward[b, i, j]))
        self.pulls += got.sum(axis=-1, keepdims=True)

    def _received(self, heard) -> np.ndarray:
        """The neighbours' latest counts and sums, each summed over the neighbour slots in
        ascending slot order from 0 (2, B, N, M), after this step's padded delivery ``heard``.
        A delivery that fills every slot is kept as it is (the channel hands out a fresh array
        each step) and copied into the per-slot table only when a later delivery misses a slot,
        whose previous statistics must then be kept. One ``einsum`` adds the slots and splits
        counts from sums (the slot sum of the payload's agent-major layout read in place)."""
        B, N, D, width = heard.payload.shape
        M = width // 2
        if bool(heard.mask.all()):  # every slot heard: this payload is the table
            self._full = heard.payload
            table = self._full.reshape(B, N, D, 2, M)
            return np.einsum("bndcm->cbnm", table)
        if self._full is not None:  # the table is the last full payload: write it out first
            np.copyto(self._latest, self._full.transpose(2, 0, 1, 3))
            self._full = None
        for d, latest in enumerate(self._latest):
            np.copyto(latest, heard.payload[:, :, d], where=heard.mask[:, :, d, None])
        return np.einsum("dbncm->cbnm", self._latest.reshape(D, B, N, 2, M))

    @property
    def latest(self) -> np.ndarray:
        """The latest statistics received per neighbour slot, slot-major (D, B, N, 2M)."""
        if self._full is not None:
            return np.ascontiguousarray(self._full.transpose(2, 0, 1, 3))
        return self._latest.copy()

    def own_index(self, step: int) -> np.ndarray:
        """Independent variants: the index from own statistics after ``step`` pulls each
        (default: :meth:`index` on ``counts``, ``sums`` and the running total)."""
        return self.index(self.counts, self.sums, self.pulls)

    @staticmethod
    def unpulled_to_inf(index: np.ndarray, n: np.ndarray) -> np.ndarray:
        """``index`` with ``inf`` on arms of ``n <= 0`` (in place): every arm is tried once."""
        index[n <= 0] = np.inf
        return index

    # ------------------------------------------------------------ hooks
    def setup(self, facts: FederationFacts, rng: BatchedRNG) -> None:
        """Extra per-reset state (random streams, checks on ``facts``)."""

    def transform_reward(self, reward: np.ndarray) -> np.ndarray:
        """The value added to ``sums`` for a pull with local reward ``reward`` (B, N)."""
        return reward

    def choose(self, greedy: np.ndarray) -> np.ndarray:
        """Final arms (B, N) from the index arg-max (epsilon-greedy explores here)."""
        return greedy

    def index(self, n: np.ndarray, s: np.ndarray, total: np.ndarray) -> np.ndarray:
        """Per-arm index (B, N, M) from counts ``n``, sums ``s`` and ``total`` (B, N, 1) (None
        from the shared variants of a class with ``uses_total = False``)."""
        raise NotImplementedError
