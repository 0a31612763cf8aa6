"""The epoch machine of CDP-, DDP- and HDP-MAB in JAX (Li & Song, "Privacy-Preserving
Communication-Efficient Federated Multi-Armed Bandits", Algorithms 1, 3 and 5; docs/commeff.md).

Port of :mod:`agents.commeff.base` (the numpy twin, the model) for one run, vectorized over the
N agents and K arms; :mod:`agents.jax.commeff` binds it to the three structures' channels. Every
agent runs the same private successive elimination. Epoch ``r``: explore every active arm
``n_r = S_int(r) - S_int(r-1)`` times round-robin in index order, release the epoch's per-arm
means with Laplace noise of scale ``1 / (eps_msg n_r)`` folded into the running mean ``ybar``,
communicate ``ybar`` (the round), then keep arm k iff ``max_j ybar_j - ybar_k < 2 C(r)``
(the elimination line of Algorithms 1, 3 and 5). With one arm left, or after the round budget R
(Sec. IV-B), every agent commits to the arm of largest last aggregate.

==============  ==============================================================================
``r``           the epoch r (int32, per agent; agents of a run stay in lock step)
``active``      the active set A_r (N, K) bool; ``num_active`` |A_r|
``s_int``       S_int(r) = max(ceil S(r), S_int(r-1) + 1) (docs/commeff.md, Decision 2); int32
``s_prev``      S_int(r-1); ``n`` n_r = S_int(r) - S_int(r-1), the epoch's pulls per arm
``c``, ``h``    C(r) = c(r) + h(r): Hoeffding part sqrt(L_I / (2 N S)) and Laplace part
                r sqrt(8 L_K) / (sqrt(N) eps_msg S) (float32)
``epoch_sum``   the epoch's reward sums per arm (a compensated float32 sum); x_hat = sum / n_r
``own_sum``     the agent's exploration sums over every epoch (the delay slots' greedy arm)
``ybar``        the private running mean ybar_r = (S(r-1) ybar_{r-1} + n_r y_hat_r) / S(r)
``noise``       the standard Laplace draw of each arm for the epoch's release (N, K)
``aggregate``   the last round's aggregate of the ybar (what elimination and commit read)
``phase``       EXPLORE, COMMUNICATE or COMMIT; ``pos`` the position in the epoch or round
==============  ==============================================================================

Timing, the twin's (docs/commeff.md, "How a step runs" and Decision 18): each call of ``act``
folds in the last exploration reward, ends the epochs that are complete (privatise, upload),
closes the rounds whose aggregate has arrived (``delay`` pulled slots after the upload:
eliminate, start the next epoch or commit), then pulls by phase: the next arm of the round-robin,
the local greedy arm (the arg-max of the agent's own exploration mean over A_r, lowest index on
ties, Decision 7) or the committed arm. ``timing="paper"`` makes the upload a
communication-only step (``Action.pull`` False), ``"latency"`` sends it with a pull.

The schedule S(r), L_I, L_K depend only on public numbers (r, |A_r|, K, T, N_eff, eps_msg,
delta). ``init`` tabulates them in float64 with the twin's own :mod:`agents.commeff.schedule`
functions, for every epoch that can start within the horizon and every |A_r| in 1..K, so the
integer targets S_int, hence the epoch lengths and the rounds, are exactly the twin's; the
compiled program reads the tables. The hyperparameters, their checks, the checks of the facts
(channels, rewards in [0, 1], the first epoch fitting the horizon, ...) and N_eff, delay and
eps_msg are the twin's: ``init`` runs the twin's ``reset`` on the same facts, before tracing.

Every phase change is a mask (``jnp.where`` per agent), never a Python branch on traced values.
No ``lax.cond``: under the rollout's ``vmap`` a cond on a per-run predicate runs both branches,
so the epoch-end work (the release, the elimination, the next epoch's table look-ups, each
O(N K)) is computed every step and kept where an agent needs it.

Deviations, none in the algorithm: the Laplace noise comes from the step keys, and is drawn
where it is cheap. An exploring agent draws one standard Laplace per step, for the arm it pulls,
and keeps the draw of that arm's last pull of the epoch (``noise``); at the epoch's end these
are the release's (N, K) block, i.i.d. standard Laplace and independent of the rewards, as the
twin's one block per run and round from its ``privacy`` stream. (A block drawn at the epoch's
end would cost an (N, K) draw every step under ``vmap``.) Statistics are float32 (the
running means, the aggregates and C(r); the twin float64), the reward sums are compensated
float32 sums, and S_int is capped at 2^30 (the twin 2^53) -- an epoch longer than any horizon
the int32 clock can reach, never completed either way. A per-run ``delta`` (one number per run
of a numpy batch) is refused: a JAX learner acts for one run and does not know its index.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from agents.commeff import schedule
from agents.commeff.base import COMMIT, COMMUNICATE, EXPLORE
from fedbandit_env.errors import ConfigError
from fedbandit_env.jax.accumulate import Total, total_add, total_zeros
from fedbandit_env.jax.types import PULL, Action, Observation
from fedbandit_env.policy import FederationFacts
from fedbandit_env.scores import note_scores
from fedbandit_env.seeding import BatchedRNG

S_INT_CAP = schedule.s_int_cap(jnp.int32)
"""The JAX engine's cap of S_int (:func:`agents.commeff.schedule.s_int_cap` of int32)."""


class ScheduleTables(NamedTuple):
    """The schedule of Algorithms 1, 3 and 5 for epochs r = 1..rows and |A_r| = 1..K (row r - 1,
    column |A_r| - 1), from the twin's :mod:`agents.commeff.schedule` in float64:
    ``s_ceil`` min(ceil S(r), 2^30) int32, ``c_num`` L_I / (2 N_eff) float32 (c(r) =
    sqrt(c_num / S_int)) and ``h_num`` (rows,) r sqrt(8 L_K) / (sqrt(N_eff) eps_msg) float32
    (h(r) = h_num / S_int; 0 without noise)."""

    s_ceil: np.ndarray
    c_num: np.ndarray
    h_num: np.ndarray


def epochs_that_can_start(rounds: int | None, delta: float | None, *, num_arms: int,
                          horizon: int, n_eff: int, eps_msg: float) -> int:  # fmt: skip
    """The last epoch that can start within the horizon: the first r whose epoch cannot end
    (S_int(r) >= max(ceil S(r) at |A_r| = 1, r) > T pulls of one agent: S grows with |A_r|),
    or R with a round budget (epoch R + 1 is the commit of Sec. IV-B)."""
    kw = dict(num_arms=num_arms, horizon=horizon, n_eff=n_eff, eps_msg=eps_msg)
    r = 1
    while rounds is None or r < rounds:
        tilde = schedule.resolution(r, rounds, delta)
        lower = max(math.ceil(float(schedule.sample_target(r, 1, tilde, **kw))), r)
        if lower > horizon:
            break
        r += 1
    return r


def schedule_tables(rounds: int | None, delta: float | None, *, num_arms: int, horizon: int,
                    n_eff: int, eps_msg: float) -> ScheduleTables:  # fmt: skip
    """S(r) (the sample target), L_I / (2 N) and the Laplace width's numerator for every epoch
    that can start (:func:`epochs_that_can_start`) and every active-set size, as the twin's
    ``_start_epoch`` computes them (:func:`agents.commeff.schedule.sample_target`,
    :func:`~agents.commeff.schedule.integer_target`, :func:`~agents.commeff.schedule.widths`)."""
    kw = dict(num_arms=num_arms, horizon=horizon, n_eff=n_eff, eps_msg=eps_msg)
    rows = epochs_that_can_start(rounds, delta, **kw)
    r = np.arange(1, rows + 1, dtype=np.int64)[:, None]
    na = np.arange(1, num_arms + 1, dtype=np.int64)[None, :]
    tilde = schedule.resolution(r, rounds, delta)
    s_real = schedule.sample_target(r, na, tilde, **kw)
    s_ceil = np.minimum(schedule.integer_target(s_real, np.zeros_like(r)), S_INT_CAP)
    # c(r) = sqrt(L_I / (2 N S)) and h(r) = r sqrt(8 L_K) / (sqrt(N) eps_msg S) at S = 1
    c1, h1 = schedule.widths(r, na, np.ones_like(na), **kw)
    return ScheduleTables(
        s_ceil.astype(np.int32), (c1**2).astype(np.float32), h1[:, 0].astype(np.float32)
    )


class EliminationState(NamedTuple):
    """One run of the epoch machine (module docstring, the paper's names): per agent (N,) or
    (N, K). ``inbox`` the structure's receive buffer (DDP: the flooded sums and counts of the
    round; ``()`` otherwise); ``rounds_done`` and ``uploads`` () the run's completed rounds and
    upload steps (the twin's ``rounds_done`` and ``uploads``)."""

    active: jnp.ndarray
    num_active: jnp.ndarray
    r: jnp.ndarray
    s_prev: jnp.ndarray
    s_int: jnp.ndarray
    n: jnp.ndarray
    c: jnp.ndarray
    h: jnp.ndarray
    phase: jnp.ndarray
    pos: jnp.ndarray
    length: jnp.ndarray
    committed: jnp.ndarray
    epoch_sum: Total
    own_sum: Total
    ybar: jnp.ndarray
    aggregate: jnp.ndarray
    noise: jnp.ndarray
    explored_last: jnp.ndarray
    inbox: Any
    rounds_done: jnp.ndarray
    uploads: jnp.ndarray


def kth_active(active: jnp.ndarray, k: jnp.ndarray) -> jnp.ndarray:
    """Per row, the k-th active arm in index order (the round-robin order of Decision 3: the
    twin's ``order[pos % |A_r|]``)."""
    rank = jnp.cumsum(active.astype(jnp.int32), axis=1) - 1
    return jnp.argmax(active & (rank == k[:, None]), axis=1).astype(jnp.int32)


def best_active(values: jnp.ndarray, active: jnp.ndarray) -> jnp.ndarray:
    """Per row, the arg-max of ``values`` over the active arms, lowest index on ties
    (Decisions 5 and 7)."""
    score = jnp.where(active, values, -jnp.inf)
    note_scores(score)
    return jnp.argmax(score, axis=1).astype(jnp.int32)


class EliminationLearner:
    """Base class of the three ports: subclasses name their twin (``twin_class``), form an
    agent's aggregate from its deliveries (:meth:`_aggregate`) and may keep a receive buffer
    (:meth:`_inbox_init`, :meth:`_receive`, :meth:`_clear_inbox`)."""

    twin_class: type = type(None)

    def _bind_twin(self, twin: Any) -> None:
        self.twin = twin
        self.config = twin.config
        delta = self.config.delta
        if isinstance(delta, tuple) and len(delta) != 1:
            raise ConfigError(
                f"{twin.agent_id}: delta: expected one number on the JAX backend (a JAX learner "
                f"acts for one run and does not know its index), got {len(delta)} (one per "
                "run: use the numpy backend)"
            )
        self.channel_name = twin.channel_name

    @property
    def privacy_epsilon(self) -> float | None:
        """The twin's declaration: each message, hence the transcript, is ``eps_msg``-DP
        (Theorem 1's privacy part; ``N_eff * epsilon`` in ``"paper"`` mode, known after
        ``init``, None before)."""
        return self.twin.privacy_epsilon

    @property
    def epsilon_effective(self) -> float:
        """The DP level of each released message (after ``init``)."""
        return self.twin.epsilon_effective

    def channel_spec(self, config) -> Any:
        """The twin's channel (docs/commeff.md, the table of ids)."""
        return self.twin.channel_spec(config)

    # ------------------------------------------------------------------- init
    def init(self, key: jax.Array, facts: FederationFacts) -> EliminationState:
        """Epoch 1 for every agent (every arm active, ``ybar = 0``; the head of the epoch loop
        of Algorithms 1, 3 and 5). N_eff, the delay and eps_msg come from the twin's ``reset``
        on the same facts, which also checks them; the schedule tables are computed here."""
        twin = self.twin
        twin.reset(facts, BatchedRNG([np.random.SeedSequence(0)]))
        self.N, self.K, self.T = facts.num_agents, facts.num_arms, facts.horizon
        self.n_eff, self.delay, self.eps_msg = int(twin.n_eff), int(twin.delay), twin.eps_msg
        self.delta = None if twin.delta is None else float(twin.delta[0, 0])
        self.rounds = self.config.rounds
        self.paper = self.config.timing == "paper"
        self.tables = schedule_tables(
            self.rounds, self.delta, num_arms=self.K, horizon=self.T, n_eff=self.n_eff,
            eps_msg=self.eps_msg,
        )  # fmt: skip
        return self._first_epoch()

    def _first_epoch(self) -> EliminationState:
        """:meth:`_start_epoch` at reset, in numpy (no compiled call at ``init``): epoch 1 for
        every agent, all K >= 2 arms active, S_int(1) = max(ceil S(1), 1) pulls per arm."""
        n, k, t = self.N, self.K, self.tables
        s1 = max(int(t.s_ceil[0, k - 1]), 1)
        c = np.sqrt(t.c_num[0, k - 1] / np.float32(s1), dtype=np.float32)
        h = np.float32(t.h_num[0] / np.float32(s1))
        zk = np.zeros((n, k), np.float32)
        full = lambda value, dtype=np.int32: np.full(n, value, dtype)  # noqa: E731
        return EliminationState(
            active=np.ones((n, k), bool),
            num_active=full(k),
            r=full(1), s_prev=full(0), s_int=full(s1), n=full(s1),
            c=full(c, np.float32), h=full(h, np.float32),
            phase=full(EXPLORE),
            pos=full(0), length=full(min(k * s1, S_INT_CAP)), committed=full(0),
            epoch_sum=Total(zk, zk),
            own_sum=Total(zk, zk),
            ybar=zk,
            aggregate=zk,
            noise=zk,
            explored_last=np.zeros(n, bool),
            inbox=self._inbox_init(),
            rounds_done=np.zeros((), np.int32),
            uploads=np.zeros((), np.int32),
        )  # fmt: skip

    def run_attrs(self, state: EliminationState) -> dict[str, Any]:
        """The twin's after-run attributes from the final state batched over runs
        (:func:`fedbandit_env.bench.executors.jax_attrs`): ``rounds_done`` and ``uploads``
        (runs,), ``r``, ``num_active``, ``phase``, ``committed`` (runs, N), ``active`` (runs,
        N, K), and the constants ``delay``, ``n_eff`` and ``eps_msg`` of the twin's ``reset``.
        The twin's per-round ``history`` has no counterpart."""
        per_run = {
            name: np.asarray(getattr(state, name), np.int64)
            for name in ("rounds_done", "uploads", "r", "num_active", "phase", "committed")
        }
        return {
            **per_run,
            "active": np.asarray(state.active, bool),
            "delay": np.int64(self.delay),
            "n_eff": np.int64(self.n_eff),
            "eps_msg": np.float64(self.eps_msg),
        }

    def noise_scale(self, n: Any) -> Any:
        """The Laplace scale ``b_r = (1 / n_r) / eps_msg`` of a release after ``n_r`` pulls per
        arm (the twin's ``LaplaceMechanism(eps_msg, sensitivity=1/n_r).scale``; 0 without
        noise)."""
        if math.isinf(self.eps_msg):
            return 0.0 * n
        return (1.0 / n) / self.eps_msg

    # ------------------------------------------------------------------ epochs
    def _start_epoch(self, s: EliminationState, mask: jnp.ndarray) -> EliminationState:
        """Next epoch r + 1 for the agents in ``mask`` (the head of the epoch loop of
        Algorithms 1, 3 and 5): S_int(r) = max(ceil S(r), S_int(r-1) + 1) (Decision 2),
        n_r, C(r) = c(r) + h(r) and the epoch length |A_r| n_r; or the commit to the best
        last aggregate, with one arm left or the round budget R spent (Sec. IV-B,
        Decision 5)."""
        t = self.tables
        s_prev = jnp.where(mask, s.s_int, s.s_prev)
        r = s.r + mask.astype(jnp.int32)
        over = (r > self.rounds) if self.rounds is not None else jnp.zeros_like(mask)
        commit = mask & ((s.num_active == 1) | over)
        committed = jnp.where(commit, best_active(s.aggregate, s.active), s.committed)
        go = mask & ~commit
        row = jnp.clip(r, 1, t.s_ceil.shape[0]) - 1
        col = jnp.clip(s.num_active, 1, self.K) - 1
        s_int = jnp.maximum(jnp.asarray(t.s_ceil)[row, col], s_prev + 1)
        s_f = s_int.astype(jnp.float32)
        c = jnp.sqrt(jnp.asarray(t.c_num)[row, col] / s_f)
        h = jnp.asarray(t.h_num)[row] / s_f
        n = s_int - s_prev
        na = jnp.maximum(s.num_active, 1)
        length = jnp.where(n > S_INT_CAP // na, S_INT_CAP, na * n)  # saturating |A_r| n_r
        phase = jnp.where(commit, COMMIT, jnp.where(go, EXPLORE, s.phase))
        zero = total_zeros(s.epoch_sum.total.shape)
        epoch_sum = jax.tree_util.tree_map(
            lambda z, old: jnp.where(go[:, None], z, old), zero, s.epoch_sum
        )
        keep = lambda new, old: jnp.where(go, new, old)  # noqa: E731
        return s._replace(
            r=r, s_prev=s_prev, s_int=keep(s_int, s.s_int), n=keep(n, s.n), c=keep(c, s.c),
            h=keep(h, s.h), length=keep(length, s.length), pos=keep(0, s.pos),
            phase=phase.astype(jnp.int32), committed=committed, epoch_sum=epoch_sum,
        )  # fmt: skip

    def _privatise(self, s: EliminationState, done: jnp.ndarray) -> jnp.ndarray:
        """The epoch's private means ``y_hat = x_hat + Lap(1 / (eps_msg n_r))`` folded into the
        running mean ``ybar = (S(r-1) ybar + n_r y_hat) / S(r)`` (Algorithm 1, the
        privatisation lines; Algorithms 3 and 5 alike), for the agents in ``done``; the
        standard draws are the epoch's ``noise``."""
        n = s.n.astype(jnp.float32)[:, None]
        xhat = (s.epoch_sum.total - s.epoch_sum.carry) / jnp.maximum(n, 1.0)
        if math.isinf(self.eps_msg):
            yhat = xhat
        else:
            yhat = xhat + self.noise_scale(jnp.maximum(n, 1.0)) * s.noise
        s_new = jnp.maximum(s.s_int, 1).astype(jnp.float32)[:, None]
        s_old = s.s_prev.astype(jnp.float32)[:, None]
        ybar = jnp.where(s.active, (s_old / s_new) * s.ybar + (n / s_new) * yhat, 0.0)
        return jnp.where(done[:, None], ybar, s.ybar)

    def _eliminate(self, s: EliminationState, ready: jnp.ndarray, aggregate: jnp.ndarray):
        """The elimination line of Algorithms 1, 3 and 5 for the agents in ``ready``: keep k
        iff ``max_j agg_j - agg_k < 2 C(r)`` over the active arms, all drops at once."""
        agg = jnp.where(s.active, aggregate, -jnp.inf)
        best = agg.max(axis=1, keepdims=True)
        keep = s.active & (best - agg < 2.0 * (s.c + s.h)[:, None])
        active = jnp.where(ready[:, None], keep, s.active)
        return s._replace(
            active=active,
            num_active=active.sum(axis=1, dtype=jnp.int32),
            aggregate=jnp.where(ready[:, None], aggregate, s.aggregate),
            rounds_done=s.rounds_done + ready.any().astype(jnp.int32),
        )

    # ------------------------------------------------------------------ step
    def act(self, key: jax.Array, state: EliminationState, obs: Observation):
        """One step of Algorithms 1, 3 and 5 for every agent (the twin's ``act``): fold in the
        last exploration pull, end the complete epochs (privatise and upload), close the rounds
        whose aggregate has arrived (eliminate, then start the next epoch or commit), then pull
        by phase; the upload is a communication-only step under ``timing="paper"``."""
        s = self._fold(state, obs)
        s = self._receive(s, obs)
        done = (s.phase == EXPLORE) & (s.pos >= s.length)
        s = s._replace(
            ybar=self._privatise(s, done),
            phase=jnp.where(done, COMMUNICATE, s.phase).astype(jnp.int32),
            pos=jnp.where(done, 0, s.pos),
            uploads=s.uploads + done.any().astype(jnp.int32),
        )
        ready = (s.phase == COMMUNICATE) & (s.pos > self.delay)
        s = self._eliminate(s, ready, self._aggregate(s, obs))
        s = self._start_epoch(s, ready)
        explore, commit = s.phase == EXPLORE, s.phase == COMMIT
        round_robin = kth_active(s.active, s.pos % jnp.maximum(s.num_active, 1))
        arms = jnp.where(explore, round_robin, jnp.where(commit, s.committed, self._greedy(s)))
        s = s._replace(
            pos=s.pos + (~commit).astype(jnp.int32),  # a committed agent stays where it is
            explored_last=explore,
            noise=self._draw(key, s.noise, explore, arms),
            inbox=self._clear_inbox(s.inbox, done),
        )
        messages = {self.channel_name: (done, s.ybar)}
        pull = ~done.any() if self.paper else jnp.ones((), bool)
        return Action(arms, messages, pull), s

    def _draw(self, key: jax.Array, noise: jnp.ndarray, explore: jnp.ndarray,
              arms: jnp.ndarray) -> jnp.ndarray:  # fmt: skip
        """The Laplace mechanism's standard draws (module docstring, "Deviations"): each
        exploring agent draws Lap(1) for the arm it pulls now; the draw of an arm's last pull
        of the epoch is the one its release uses. Nothing is drawn without noise."""
        if math.isinf(self.eps_msg):
            return noise
        fresh = jax.random.laplace(key, (self.N,), jnp.float32)
        pulled = explore[:, None] & (arms[:, None] == jnp.arange(self.K))
        return jnp.where(pulled, fresh[:, None], noise)

    def _fold(self, s: EliminationState, obs: Observation) -> EliminationState:
        """Add the last step's exploration reward to the epoch sums and the agent's own sums
        (only agents that explored, after a step that pulled)."""
        explored = s.explored_last & (obs.phase == PULL)
        hit = (obs.last_arm[:, None] == jnp.arange(self.K)) & explored[:, None]
        x = jnp.where(hit, obs.last_reward[:, None], 0.0)
        return s._replace(epoch_sum=total_add(s.epoch_sum, x), own_sum=total_add(s.own_sum, x))

    def _greedy(self, s: EliminationState) -> jnp.ndarray:
        """The "local empirically best arm" of the delay slots (Algorithms 2 and 4, Decision 7):
        the arg-max of the agent's own exploration mean (every active arm was pulled S_int times)
        over A_r, lowest index on ties."""
        own = (s.own_sum.total - s.own_sum.carry) / jnp.maximum(s.s_int, 1)[:, None]
        return best_active(own, s.active)

    # ------------------------------------------------------------ channel hooks
    def _inbox_init(self) -> Any:
        """The receive buffer at reset (none: the aggregate arrives in one delivery)."""
        return ()

    def _receive(self, s: EliminationState, obs: Observation) -> EliminationState:
        """Per-step hook to collect multi-step deliveries (DDP's GIS hops, Algorithm 2)."""
        return s

    def _clear_inbox(self, inbox: Any, upload: jnp.ndarray) -> Any:
        """Empty the receive buffer of the agents that upload (a new round begins)."""
        return inbox

    def _aggregate(self, s: EliminationState, obs: Observation) -> jnp.ndarray:
        """Each agent's aggregate ybar(r) (N, K), read where the round closes."""
        raise NotImplementedError
