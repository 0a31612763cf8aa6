"""The epoch machine of CDP-, DDP- and HDP-MAB in JAX (Li & Song, "Privacy-Preserving
Communication-Efficient Federated Multi-Armed Bandits", Algorithms 1, 3 and 5; docs/commeff.md).

The JAX form of :mod:`agents.commeff.base` (the numpy learner, the model) for one run,
vectorized over the N agents and K arms, on the params protocol
(:class:`EliminationJaxParams`); :mod:`agents.jax.commeff` binds it to the three structures'
channels. Every
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

Timing, the numpy learner's (docs/commeff.md, "How a step runs" and Decision 18): each call of ``act``
folds in the last exploration reward, ends the epochs that are complete (privatise, upload),
closes the rounds whose aggregate has arrived (``delay`` pulled slots after the upload:
eliminate, start the next epoch or commit), then pulls by phase: the next arm of the round-robin,
the local greedy arm (the arg-max of the agent's own exploration mean over A_r, lowest index on
ties, Decision 7) or the committed arm. ``timing="paper"`` makes the upload a
communication-only step (``Action.pull`` False), ``"latency"`` sends it with a pull.

The schedule S(r), L_I, L_K depend only on public numbers (r, |A_r|, K, T, N_eff, eps_msg,
delta). ``make_params`` tabulates them in float64 with the numpy learner's own
:func:`agents.commeff.schedule.schedule_tables`, for every epoch that can start within the
horizon and every |A_r| in 1..K, so the integer targets S_int, hence the epoch lengths and the
rounds, are exactly the numpy learner's; the compiled program reads the tables. The
hyperparameters and their checks are the numpy learner's configuration dataclasses; the checks
of the facts (channels, rewards in [0, 1], the first epoch fitting the horizon, ...) and N_eff,
delay and eps_msg are the numpy learner's params functions (:func:`agents.commeff.cdp.cdp_params`
and the like), run in ``make_params`` before tracing.

Every phase change is a mask (``jnp.where`` per agent), never a Python branch on traced values.
No ``lax.cond``: under the rollout's ``vmap`` a cond on a per-run predicate runs both branches,
so the epoch-end work (the release, the elimination, the next epoch's table look-ups, each
O(N K)) is computed every step and kept where an agent needs it.

Deviations, none in the algorithm: the Laplace noise comes from the step keys, and is drawn
where it is cheap. An exploring agent draws one standard Laplace per step, for the arm it pulls,
and keeps the draw of that arm's last pull of the epoch (``noise``); at the epoch's end these
are the release's (N, K) block, i.i.d. standard Laplace and independent of the rewards, as the
numpy learner's one block per run and round from its ``privacy`` stream. (A block drawn at the epoch's
end would cost an (N, K) draw every step under ``vmap``.) Statistics are float32 (the
running means, the aggregates and C(r); numpy: float64), the reward sums are compensated
float32 sums, and S_int is capped at 2^30 (numpy: 2^53) -- an epoch longer than any horizon
the int32 clock can reach, never completed either way. A per-run ``delta`` (one number per run
of a numpy batch) is refused: a JAX learner acts for one run and does not know its index.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from agents.commeff import schedule
from agents.commeff.base import (
    COMMIT,
    COMMUNICATE,
    EXPLORE,
    EliminationParams,
    broadcast_aggregate,
    noise_scale,
)
from agents.commeff.config import EliminationConfig
from agents.commeff.schedule import ScheduleTables
from fedbandit_env.errors import ConfigError
from fedbandit_env.jax.accumulate import Total, total_add, total_zeros
from fedbandit_env.jax.types import PULL, Action, Observation
from fedbandit_env.policy import FederationFacts
from fedbandit_env.scores import note_scores

S_INT_CAP = schedule.s_int_cap(jnp.int32)
"""The JAX engine's cap of S_int (:func:`agents.commeff.schedule.s_int_cap` of int32)."""


@dataclass(frozen=True, eq=False)
class EliminationJaxParams(EliminationParams):
    """The numpy learner's :class:`~agents.commeff.base.EliminationParams` (one run) plus the
    schedule ``tables`` the compiled program reads
    (:func:`agents.commeff.schedule.schedule_tables` at the int32 cap)."""

    tables: ScheduleTables | None = None


def jax_params(base: EliminationParams) -> EliminationJaxParams:
    """:class:`EliminationJaxParams` of the numpy learner's params on a federation."""
    delta = None if base.delta is None else base.delta[0]
    tables = schedule.schedule_tables(
        base.config.rounds, delta, S_INT_CAP, num_arms=base.num_arms, horizon=base.horizon,
        n_eff=base.n_eff, eps_msg=base.eps_msg,
    )  # fmt: skip
    return EliminationJaxParams(**vars(base), tables=tables)


@jax.tree_util.register_static
@dataclass(frozen=True)
class RunConstants:
    """The params' constants that the after-run attributes report (``run_attrs``): ``delay``,
    ``n_eff`` and ``eps_msg``. A static part of the state (no array leaves: it stays exact
    through ``jit``, ``vmap`` and ``scan``)."""

    delay: int
    n_eff: int
    eps_msg: float


class EliminationState(NamedTuple):
    """One run of the epoch machine (module docstring, the paper's names): per agent (N,) or
    (N, K). ``inbox`` the structure's receive buffer (DDP: the flooded sums and counts of the
    round; ``()`` otherwise); ``rounds_done`` and ``uploads`` () the run's completed rounds and
    upload steps (the numpy learner's ``rounds_done`` and ``uploads``); ``constants`` the
    params' :class:`RunConstants` (static)."""

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
    constants: RunConstants


def kth_active(active: jnp.ndarray, k: jnp.ndarray) -> jnp.ndarray:
    """Per row, the k-th active arm in index order (the round-robin order of Decision 3: the
    numpy learner's ``order[pos % |A_r|]``)."""
    rank = jnp.cumsum(active.astype(jnp.int32), axis=1) - 1
    return jnp.argmax(active & (rank == k[:, None]), axis=1).astype(jnp.int32)


def best_active(values: jnp.ndarray, active: jnp.ndarray) -> jnp.ndarray:
    """Per row, the arg-max of ``values`` over the active arms, lowest index on ties
    (Decisions 5 and 7)."""
    score = jnp.where(active, values, -jnp.inf)
    note_scores(score)
    return jnp.argmax(score, axis=1).astype(jnp.int32)


def one_delta(config: EliminationConfig) -> EliminationConfig:
    """``config``, refused if it gives one ``delta`` per run (a JAX learner acts for one run and
    does not know its index)."""
    delta = config.delta
    if isinstance(delta, tuple) and len(delta) != 1:
        raise ConfigError(
            f"{config.agent_id}: delta: expected one number on the JAX backend (a JAX learner "
            f"acts for one run and does not know its index), got {len(delta)} (one per "
            "run: use the numpy backend)"
        )
    return config


class EliminationLearner:
    """Base class of the three learners: subclasses validate their configuration in
    ``__init__`` (the numpy learner's dataclass, :func:`one_delta`), make the numpy learner's
    params (:meth:`_params`), name their channel (``channel_name``) and may form an agent's
    aggregate otherwise than the channel's broadcast (:meth:`_aggregate`) and keep a receive
    buffer (:meth:`_inbox_init`, :meth:`_receive`, :meth:`_clear_inbox`)."""

    channel_name: str = ""
    config: EliminationConfig

    @property
    def privacy_epsilon(self) -> float | None:
        """What is declared before the federation: ``epsilon`` in ``"per_message"`` mode or
        without noise, None in ``"paper"`` mode (``N_eff * epsilon``: the params'
        ``privacy_epsilon``)."""
        return self.config.declared_epsilon

    def _params(self, facts: FederationFacts) -> EliminationParams:
        raise NotImplementedError

    # ------------------------------------------------------------------- init
    def make_params(self, facts: FederationFacts) -> EliminationJaxParams:
        """The numpy learner's params (N_eff, the delay, eps_msg; the checks of the facts) and
        the schedule tables (:func:`jax_params`)."""
        return jax_params(self._params(facts))

    def init(self, key: jax.Array, params: EliminationJaxParams) -> EliminationState:
        """Epoch 1 for every agent (every arm active, ``ybar = 0``; the head of the epoch loop
        of Algorithms 1, 3 and 5)."""
        return first_epoch(params, self._inbox_init(params))

    def run_attrs(self, state: EliminationState) -> dict[str, Any]:
        """The numpy learner's after-run attributes from the final state batched over runs
        (:func:`fedbandit_env.bench.executors.jax_attrs`): ``rounds_done`` and ``uploads``
        (runs,), ``r``, ``num_active``, ``phase``, ``committed`` (runs, N), ``active`` (runs,
        N, K), and the params' constants ``delay``, ``n_eff`` and ``eps_msg`` (the numpy
        ``reset``'s). The numpy learner's per-round ``history`` has no counterpart."""
        per_run = {
            name: np.asarray(getattr(state, name), np.int64)
            for name in ("rounds_done", "uploads", "r", "num_active", "phase", "committed")
        }
        c = state.constants
        return {
            **per_run,
            "active": np.asarray(state.active, bool),
            "delay": np.int64(c.delay),
            "n_eff": np.int64(c.n_eff),
            "eps_msg": np.float64(c.eps_msg),
        }

    # ------------------------------------------------------------------ epochs
    def _start_epoch(
        self, s: EliminationState, mask: jnp.ndarray, p: EliminationJaxParams
    ) -> EliminationState:
        """Next epoch r + 1 for the agents in ``mask`` (the head of the epoch loop of
        Algorithms 1, 3 and 5): S_int(r) = max(ceil S(r), S_int(r-1) + 1) (Decision 2),
        n_r, C(r) = c(r) + h(r) and the epoch length |A_r| n_r; or the commit to the best
        last aggregate, with one arm left or the round budget R spent (Sec. IV-B,
        Decision 5)."""
        t, rounds = p.tables, p.config.rounds
        s_prev = jnp.where(mask, s.s_int, s.s_prev)
        r = s.r + mask.astype(jnp.int32)
        over = (r > rounds) if rounds is not None else jnp.zeros_like(mask)
        commit = mask & ((s.num_active == 1) | over)
        committed = jnp.where(commit, best_active(s.aggregate, s.active), s.committed)
        go = mask & ~commit
        row = jnp.clip(r, 1, t.s_ceil.shape[0]) - 1
        col = jnp.clip(s.num_active, 1, p.num_arms) - 1
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

    def _privatise(self, s: EliminationState, done: jnp.ndarray, eps_msg: float) -> jnp.ndarray:
        """The epoch's private means ``y_hat = x_hat + Lap(1 / (eps_msg n_r))`` folded into the
        running mean ``ybar = (S(r-1) ybar + n_r y_hat) / S(r)`` (Algorithm 1, the
        privatisation lines; Algorithms 3 and 5 alike), for the agents in ``done``; the
        standard draws are the epoch's ``noise``."""
        n = s.n.astype(jnp.float32)[:, None]
        xhat = (s.epoch_sum.total - s.epoch_sum.carry) / jnp.maximum(n, 1.0)
        if math.isinf(eps_msg):
            yhat = xhat
        else:
            yhat = xhat + noise_scale(eps_msg, jnp.maximum(n, 1.0)) * s.noise
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
    def act(self, key: jax.Array, state: EliminationState, obs: Observation,
            params: EliminationJaxParams):  # fmt: skip
        """One step of Algorithms 1, 3 and 5 for every agent (the numpy learner's ``act``):
        fold in the last exploration pull, end the complete epochs (privatise and upload),
        close the rounds whose aggregate has arrived (eliminate, then start the next epoch or
        commit), then pull by phase; the upload is a communication-only step under
        ``timing="paper"``."""
        p = params
        s = self._fold(state, obs, p.num_arms)
        s = self._receive(s, obs)
        done = (s.phase == EXPLORE) & (s.pos >= s.length)
        s = s._replace(
            ybar=self._privatise(s, done, p.eps_msg),
            phase=jnp.where(done, COMMUNICATE, s.phase).astype(jnp.int32),
            pos=jnp.where(done, 0, s.pos),
            uploads=s.uploads + done.any().astype(jnp.int32),
        )
        ready = (s.phase == COMMUNICATE) & (s.pos > p.delay)
        s = self._eliminate(s, ready, self._aggregate(s, obs))
        s = self._start_epoch(s, ready, p)
        explore, commit = s.phase == EXPLORE, s.phase == COMMIT
        round_robin = kth_active(s.active, s.pos % jnp.maximum(s.num_active, 1))
        arms = jnp.where(explore, round_robin, jnp.where(commit, s.committed, self._greedy(s)))
        s = s._replace(
            pos=s.pos + (~commit).astype(jnp.int32),  # a committed agent stays where it is
            explored_last=explore,
            noise=self._draw(key, s.noise, explore, arms, p.eps_msg),
            inbox=self._clear_inbox(s.inbox, done),
        )
        messages = {self.channel_name: (done, s.ybar)}
        pull = ~done.any() if p.config.timing == "paper" else jnp.ones((), bool)
        return Action(arms, messages, pull), s

    def _draw(self, key: jax.Array, noise: jnp.ndarray, explore: jnp.ndarray,
              arms: jnp.ndarray, eps_msg: float) -> jnp.ndarray:  # fmt: skip
        """The Laplace mechanism's standard draws (module docstring, "Deviations"): each
        exploring agent draws Lap(1) for the arm it pulls now; the draw of an arm's last pull
        of the epoch is the one its release uses. Nothing is drawn without noise."""
        if math.isinf(eps_msg):
            return noise
        n, k = noise.shape
        fresh = jax.random.laplace(key, (n,), jnp.float32)
        pulled = explore[:, None] & (arms[:, None] == jnp.arange(k))
        return jnp.where(pulled, fresh[:, None], noise)

    def _fold(self, s: EliminationState, obs: Observation, num_arms: int) -> EliminationState:
        """Add the last step's exploration reward to the epoch sums and the agent's own sums
        (only agents that explored, after a step that pulled)."""
        explored = s.explored_last & (obs.phase == PULL)
        hit = (obs.last_arm[:, None] == jnp.arange(num_arms)) & explored[:, None]
        x = jnp.where(hit, obs.last_reward[:, None], 0.0)
        return s._replace(epoch_sum=total_add(s.epoch_sum, x), own_sum=total_add(s.own_sum, x))

    def _greedy(self, s: EliminationState) -> jnp.ndarray:
        """The "local empirically best arm" of the delay slots (Algorithms 2 and 4, Decision 7):
        the arg-max of the agent's own exploration mean (every active arm was pulled S_int times)
        over A_r, lowest index on ties."""
        own = (s.own_sum.total - s.own_sum.carry) / jnp.maximum(s.s_int, 1)[:, None]
        return best_active(own, s.active)

    # ------------------------------------------------------------ channel hooks
    def _inbox_init(self, params: EliminationParams) -> Any:
        """The receive buffer at reset (none: the aggregate arrives in one delivery)."""
        return ()

    def _receive(self, s: EliminationState, obs: Observation) -> EliminationState:
        """Per-step hook to collect multi-step deliveries (DDP's GIS hops, Algorithm 2)."""
        return s

    def _clear_inbox(self, inbox: Any, upload: jnp.ndarray) -> Any:
        """Empty the receive buffer of the agents that upload (a new round begins)."""
        return inbox

    def _aggregate(self, s: EliminationState, obs: Observation) -> jnp.ndarray:
        """Each agent's aggregate ybar(r) (N, K), read where the round closes: by default the
        channel's broadcast aggregate (Algorithm 1's and Algorithm 5's server lines)."""
        return broadcast_aggregate(obs.deliveries[self.channel_name].aggregate, s.ybar)


def first_epoch(p: EliminationJaxParams, inbox: Any) -> EliminationState:
    """The numpy learner's ``_start_epoch`` at reset, in numpy (no compiled call at ``init``):
    epoch 1 for every agent, all K >= 2 arms active, S_int(1) = max(ceil S(1), 1) pulls per
    arm."""
    n, k, t = p.num_agents, p.num_arms, p.tables
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
        inbox=inbox,
        rounds_done=np.zeros((), np.int32),
        uploads=np.zeros((), np.int32),
        constants=RunConstants(int(p.delay), int(p.n_eff), float(p.eps_msg)),
    )  # fmt: skip
