"""Fed1-UCB and Fed2-UCB in JAX (Shi & Shen, "Federated Multi-Armed Bandits", AAAI'21).

Ports of :mod:`agents.fed1_ucb` and :mod:`agents.fed2_ucb` (the numpy twins, the model) and of
their shared phase machine :mod:`agents.fed_mab_common`, for one run, vectorized over the N
clients and K arms (docs/fed-ucb12.md). Clients see local means whose average is the global
mean; a server averages the clients' local sample means after every phase and eliminates arms
whose global estimate is clearly worse (the paper's Fed1-UCB for the exact model and Fed2-UCB
for the approximate one, with the constants of the authors' code). The names are the paper's
and the twin's:

================  ===================================================================
``sums``          the client's own reward sums per arm since it joined (compensated float32)
``counts``        its own pulls per arm since it joined (int32)
``active``        the active arm set (K,), the same for every client of the run
``phase``         p, the phase under way (1-based)
``pos``           the pulls made in the phase under way
``length``        f(p) |active|: the pulls of the phase
``rounds``        completed server rounds (rounds in which an upload arrived)
``num_phases``    completed phases (server rounds taken)
``f(p)``          pulls per active arm in phase p; ``F(c, p) = f(c) + ... + f(p)``
``M``             the clients whose uploads the server averages (Fed2: M(p), the schedule)
================  ===================================================================

Widths (docs/fed-ucb12.md, "Rules as implemented"), T the horizon:

* Fed1-UCB: ``B = width_scale sqrt(4 sigma^2 ln T / (M F(1, p)))``;
* Fed2-UCB: ``eta_p = (1/M(p)^2) sum_i 1/F(c_i, p)``,
  ``B_p = width_scale (sqrt(sigma^2 eta_p ln T) + sqrt(sigma_c^2 ln T / M(p)))``;

and the elimination rule ``eliminate k if mean_k + B < max_j mean_j - B`` of both.

Timing, the twin's: in phase p every client pulls each active arm f(p) times, round-robin over
the active arms in ascending order, all clients on the same arm; after the phase's last pull one
communication-only step (``pull`` False) in which every joined client uploads its local sample
means (zeros in the slots of eliminated arms) on the ``server`` channel (aggregate "mean", dim K),
and the average arrives in the same step; the next step applies the rule and starts phase p + 1
(or, with one arm left, commits to it: no more communication). Clients that have not joined
(Fed2's ``join_round`` schedule) play the same arms but keep no samples and do not upload.

The data-dependent schedule is masks: the elimination and the start of the next phase are
computed every step and kept with ``jnp.where`` where a server average has just arrived (K-sized
work, cheaper than a ``lax.cond``, which ``vmap`` turns into both branches anyway); the upload is
a mask on the ``server`` channel and ``pull`` is False in the step of a server round.

The hyperparameters, their validation, the checks of the facts (the family, the server channel's
aggregate, participation 1, no drops, Fed1: no join schedule) and the constants (f, ln T, the join
schedule, F(1, p)) are the twin's: ``init`` runs the twin's ``reset`` on the same facts (in
Python, before tracing) and reads them. A callable ``f`` is tabulated for every phase the
horizon can reach.

Deviations: statistics and widths are float32 (``sums`` compensated); a callable ``f`` is
checked (a positive int) at every phase the horizon can reach, in ``init``, where the twin checks
each phase when it starts.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from agents.fed1_ucb import Fed1UCB as NumpyFed1UCB
from agents.fed2_ucb import Fed2UCB as NumpyFed2UCB
from agents.fed_mab_common import CHANNEL
from fedbandit_env.jax.accumulate import Total, total_add
from fedbandit_env.jax.types import PULL, Action, Observation
from fedbandit_env.policy import FederationFacts
from fedbandit_env.seeding import BatchedRNG


class FedUCBState(NamedTuple):
    """One run of the phase machine (module docstring): ``sums`` (N, K) compensated and
    ``counts`` (N, K) int32, the clients' own statistics; ``active`` (K,); scalars ``phase``,
    ``pos``, ``length``, ``rounds``, ``num_phases`` (int32), ``committed`` and ``awaiting``
    (the run took the phase's server round in the last step)."""

    sums: Total
    counts: jnp.ndarray
    active: jnp.ndarray
    phase: jnp.ndarray
    pos: jnp.ndarray
    length: jnp.ndarray
    committed: jnp.ndarray
    awaiting: jnp.ndarray
    rounds: jnp.ndarray
    num_phases: jnp.ndarray


def current_arm(active: jnp.ndarray, pos: jnp.ndarray) -> jnp.ndarray:
    """The arm of the next pull (the twin's ``_current_arm``): active arm number
    ``pos mod |active|`` in ascending order (round-robin; the committed arm once one is left)."""
    n_active = active.sum(dtype=jnp.int32)
    target = pos % jnp.maximum(n_active, 1)
    rank = jnp.cumsum(active.astype(jnp.int32)) - 1
    return jnp.argmax(active & (rank == target)).astype(jnp.int32)


class _FedMAB:
    """The phase machine of Fed1- and Fed2-UCB (port of :class:`agents.fed_mab_common.FedMABBase`);
    subclasses give the width."""

    payload_layouts = {"server": "arm_means"}  # the twin's: one mean per arm

    twin_class: type
    agent_id: str
    version: int

    @property
    def privacy_epsilon(self) -> float | None:
        """The twin's declaration (None: no privacy guarantee is declared)."""
        return self.twin.privacy_epsilon

    def channel_spec(self, config) -> dict[str, dict[str, Any]]:
        """The twin's: ``server`` (dim K, aggregate "mean"; Fed2: with its join schedule)."""
        return self.twin.channel_spec(config)

    # ------------------------------------------------------------------- init
    def init(self, key: jax.Array, facts: FederationFacts) -> FedUCBState:
        """Phase 1 with every arm active and zero statistics (the twin's ``reset``, run on the
        same facts, which checks them and gives f, ln T and the join schedule)."""
        twin = self.twin
        twin.reset(facts, BatchedRNG([np.random.SeedSequence(0)]))
        self.N, self.K, self.log_T = facts.num_agents, twin.num_arms, float(twin.log_T)
        self.join_round = np.asarray(twin.join_round, np.int32)
        self._tabulate(facts.horizon)
        N, K = self.N, self.K
        zeros = jnp.zeros((N, K), jnp.float32)
        return FedUCBState(
            sums=Total(zeros, zeros),
            counts=jnp.zeros((N, K), jnp.int32),
            active=jnp.ones(K, bool),
            phase=jnp.ones((), jnp.int32),
            pos=jnp.zeros((), jnp.int32),
            length=jnp.asarray(twin.pulls_per_arm(1) * K, jnp.int32),
            committed=jnp.zeros((), bool),
            awaiting=jnp.zeros((), bool),
            rounds=jnp.zeros((), jnp.int32),
            num_phases=jnp.zeros((), jnp.int32),
        )

    def _tabulate(self, horizon: int) -> None:
        """f(p) and F(1, p) in Python: a constant f in closed form, a callable for every
        phase p the horizon can reach (until F(1, p) exceeds it)."""
        twin = self.twin
        if not callable(twin.config.f):  # an int, or Fed1's default floor(10 ln T)
            self.f_const = twin.pulls_per_arm(1)
            return
        self.f_const = None
        table, p = [0], 0
        while twin.cumulative_pulls(p) <= horizon:
            p += 1
            table.append(twin.pulls_per_arm(p))
        self.f_table = np.asarray(table, np.int32)  # f_table[p] = f(p), p = 1..P
        self.cum_table = np.cumsum(self.f_table).astype(np.int32)  # F(1, p)

    def pulls_per_arm(self, p: jnp.ndarray) -> jnp.ndarray:
        """f(p) of the traced phase p (the twin's schedule)."""
        if self.f_const is not None:
            return jnp.int32(self.f_const) * jnp.ones_like(p)
        return jnp.take(jnp.asarray(self.f_table), p, mode="clip")

    def cumulative_pulls(self, p: jnp.ndarray) -> jnp.ndarray:
        """F(1, p) = f(1) + ... + f(p): the pulls per client of an active arm after phase p."""
        if self.f_const is not None:
            return jnp.int32(self.f_const) * p
        return jnp.take(jnp.asarray(self.cum_table), p, mode="clip")

    def width(self, phase: jnp.ndarray, joined: jnp.ndarray) -> jnp.ndarray:
        """The confidence width B after phase ``phase`` with the clients ``joined`` (N,)."""
        raise NotImplementedError

    # -------------------------------------------------------------------- act
    def act(self, key: jax.Array, state: FedUCBState, obs: Observation):
        """One step of the phase machine (module docstring): fold in the last pull (joined
        clients), apply the elimination rule when the server's average arrived, then pull the
        round-robin arm, or upload in a communication step at the end of the phase."""
        s = state
        N, K = self.N, self.K
        join = jnp.asarray(self.join_round)
        # the last pull, folded into the statistics of the clients that have joined
        fresh = (obs.phase == PULL) & (obs.pulls > 0) & ~s.committed
        keep = fresh & (join <= s.rounds)
        arm = jnp.maximum(obs.last_arm, 0)
        hit = (arm[:, None] == jnp.arange(K, dtype=jnp.int32)) & keep[:, None]
        sums = total_add(s.sums, jnp.where(hit, obs.last_reward[:, None], 0.0))
        counts = s.counts + hit.astype(jnp.int32)
        s = s._replace(sums=sums, counts=counts)
        s = self._eliminate(s, obs.deliveries[CHANNEL])
        # the next step: a pull of the phase, or its server round
        talk = ~s.committed & (s.pos >= s.length)
        arms = jnp.broadcast_to(current_arm(s.active, s.pos), (N,))
        s = s._replace(pos=s.pos + (~s.committed & ~talk).astype(jnp.int32), awaiting=talk)
        send = talk & (join <= s.rounds)
        means = (s.sums.total - s.sums.carry) / jnp.maximum(s.counts, 1).astype(jnp.float32)
        payload = jnp.where(send[:, None] & s.active[None, :], means, 0.0)
        return Action(arms, {CHANNEL: (send, payload)}, ~talk), s

    def _eliminate(self, s: FedUCBState, reply: Any) -> FedUCBState:
        """Where the server's average of the phase's uploads arrived (``awaiting``): the
        elimination rule ``mean_k + B < max_j mean_j - B`` over the active arms, then phase
        p + 1 (or the commitment to the last arm); elsewhere the state is kept."""
        width = self.width(s.phase, jnp.asarray(self.join_round) <= s.rounds)
        mean = reply.aggregate
        best = jnp.max(jnp.where(s.active, mean, -jnp.inf))
        active = s.active & ~(mean + width < best - width)
        n_active = active.sum(dtype=jnp.int32)
        phase = s.phase + 1
        new = s._replace(
            active=active,
            phase=phase,
            pos=jnp.zeros((), jnp.int32),
            length=self.pulls_per_arm(phase) * n_active,
            committed=n_active == 1,
            rounds=s.rounds + (reply.count > 0).astype(jnp.int32),
            num_phases=s.num_phases + 1,
        )
        return jax.tree_util.tree_map(lambda a, b: jnp.where(s.awaiting, a, b), new, s)


class Fed1UCB(_FedMAB):
    """Fed1-UCB, the paper's exact model (port of :class:`agents.Fed1UCB`):
    a fixed federation, ``f`` pulls per active arm and phase (default ``floor(10 ln T)``)."""

    twin_class = NumpyFed1UCB
    agent_id = NumpyFed1UCB.agent_id
    version = NumpyFed1UCB.version

    def __init__(self, f=None, sigma: float = 0.5, width_scale: float = 1.0):
        # the twin validates the hyperparameters (Fed1UCBConfig) and, in init, the facts
        self.twin = NumpyFed1UCB(f, sigma, width_scale)
        self.config = self.twin.config

    def width(self, phase: jnp.ndarray, joined: jnp.ndarray) -> jnp.ndarray:
        """``B = width_scale sqrt(4 sigma^2 ln T / (M F(1, p)))`` (Fed1-UCB's width)."""
        cfg = self.config
        M = joined.sum(dtype=jnp.int32).astype(jnp.float32)
        n = self.cumulative_pulls(phase).astype(jnp.float32)
        c = jnp.float32(4.0 * cfg.sigma**2 * self.log_T)
        return jnp.float32(cfg.width_scale) * jnp.sqrt(c / (M * n))


class Fed2UCB(_FedMAB):
    """Fed2-UCB, the paper's approximate model (port of
    :class:`agents.Fed2UCB`): clients join through the server's ``join_round`` schedule of
    ``g`` (``g(p) = 2^p`` by default), ``f`` pulls per active arm and phase (default 100)."""

    twin_class = NumpyFed2UCB
    agent_id = NumpyFed2UCB.agent_id
    version = NumpyFed2UCB.version

    def __init__(self, f=100, g=None, sigma: float = 0.5, sigma_c: float = 0.02,
                 width_scale: float = 1.0):  # fmt: skip
        # the twin validates the hyperparameters (Fed2UCBConfig) and, in init, the facts
        self.twin = NumpyFed2UCB(f, g, sigma, sigma_c, width_scale)
        self.config = self.twin.config

    def init(self, key: jax.Array, facts: FederationFacts) -> FedUCBState:
        """The phase machine's start, plus ``F(1, c_i - 1)`` of every client's join phase."""
        state = super().init(key, facts)
        twin = self.twin
        self.before = np.asarray(
            [twin.cumulative_pulls(int(r)) for r in twin.join_round], np.float32
        )
        return state

    def width(self, phase: jnp.ndarray, joined: jnp.ndarray) -> jnp.ndarray:
        """``eta_p = (1/M(p)^2) sum_i 1/F(c_i, p)`` over the clients of phase p and
        ``B_p = width_scale (sqrt(sigma^2 eta_p ln T) + sqrt(sigma_c^2 ln T / M(p)))``."""
        cfg = self.config
        M = joined.sum(dtype=jnp.int32).astype(jnp.float32)
        F = self.cumulative_pulls(phase).astype(jnp.float32) - jnp.asarray(self.before)
        eta = jnp.where(joined, 1.0 / jnp.where(joined, F, 1.0), 0.0).sum() / (M * M)
        log_T = jnp.float32(self.log_T)
        return jnp.float32(cfg.width_scale) * (
            jnp.sqrt(jnp.float32(cfg.sigma**2) * eta * log_T)
            + jnp.sqrt(jnp.float32(cfg.sigma_c**2) * log_T / M)
        )
