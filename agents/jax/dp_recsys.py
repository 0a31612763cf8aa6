"""DP-Master-worker UCB and DP-Decentralized UCB in JAX (Li, Song & Fragouli, "Federated
Recommendation System via Differential Privacy"; docs/dp-recsys.md).

The JAX forms of :mod:`agents.dp_master_worker_ucb` (Algorithm 1, ``dp_mw_ucb``) and
:mod:`agents.dp_decentralized_ucb` (Algorithm 2 with the repaired line 16, ``dp_dec_ucb``), the
numpy learners and the models, for one run, vectorized over the N (the paper's M) agents and K
arms, on the params protocol. Both keep one hybrid counter per agent and arm (the mechanism
``H_ij``, Figure 1; Chan, Shi & Song; :mod:`fedbandit_env.jax.hybrid_counter`, with the options
of the numpy learner's counters: same noise scales, blocks and release rule), into which each agent's reward enters at its pulled arm only
(Algorithm 1 lines 8 and 26, Algorithm 2 lines 8 and 22); rewards are clipped to ``clip`` there
only. ``epsilon = inf`` gives the non-private variants (the same counter, noiseless).

The paper's names:

=============  ==============================================================================
``counts``     n_ij: agent i's pulls of arm j (Algorithm 1; int32)
``sums``       the counters H_ij; their release is s_ij, the private reward sum
``held``       the arm played outside decision rounds (Algorithm 1 line 21: a_prev)
``eta``        Algorithm 1's rounds since the last switch (line 10: decide when a power of two)
``nhat``       n̂_ij: Algorithm 2's consensus count (line 12)
``shat``       ŝ_ij: Algorithm 2's consensus private sum (line 16, repaired: P (ŝ + Δs))
``outgoing``   (n̂_i + ξ_i, ŝ_i + Δs_i): what agent i sends its neighbours (dim 2K)
=============  ==============================================================================

The indices (natural logarithms, ``upsilon(n) = (1/eps) ln(1/delta) ln^{1.5} max(n, 1)``):

* Algorithm 1 lines 11-13: ``I_ij = s_ij/n_ij + sqrt(2 ln t / n_ij) + upsilon(n_ij)/n_ij`` with
  ``delta = T^-4`` (Theorem 1); the server averages the uploads (line 32) and every agent plays
  ``argmax_j I^avg_j``, lowest index on ties (lines 15-18);
* Algorithm 2 line 19: ``I_ij = shat/nhat + sigma sqrt(2 rho (nhat + c_i)/(M nhat) ln t / nhat)
  + upsilon(nhat)/nhat`` with ``delta = T^-rho / 2`` and the Lemma 2 constants ``c_i``; the
  consensus of Eq. (4), ``P = I - (kappa/d_max) L``, is applied row by row to what arrives on
  the ``neighbors`` channel (a lost message gives its weight to the receiver's own value).

Timing, the numpy learners' (``timing``; docs/dp-recsys.md, "Timing"):

* DP-MW-UCB ``"paper"``: rounds 1..K pull arms 0..K-1; from round K+1, a round t with ``eta`` a
  power of two is a decision round: a communication-only step (``pull=False``) in which every
  agent uploads its index vector over ``server`` (aggregate "mean") and receives the average,
  then the pull of the argmax in round t; the other rounds pull the held arm. ``"latency"``: the
  upload travels with the pull of step t and the argmax is played from step t+1 (step K+1
  repeats arm 0).
* DP-Dec-UCB ``"paper"``: every round t is a communication step (each agent sends (n̂ + ξ, ŝ +
  Δs) of its pull of round t-1) and then the pull of round t from the mixed values: 2T engine
  steps; ``"latency"``: one step per round, the values sent with the pulls and mixed one step
  late (step K+1 repeats arm 0).

The hyperparameters and their validation (the numpy learners' configuration classes), the
checks of the federation's facts and the constants (``ln(1/delta)``, the consensus weights,
``c_i``) are the params of the numpy learners' pure functions
:func:`~agents.dp_master_worker_ucb.dp_mw_params` and
:func:`~agents.dp_decentralized_ucb.dp_dec_params` (``make_params``, in Python, before tracing);
the counters' scales and levels come from :class:`~fedbandit_env.jax.hybrid_counter.HybridCounter`
on the params' shape, horizon, ``epsilon`` and ``clip``. The formulas are the numpy learners'
own functions, written once for both engines: the indices
(:func:`~agents.dp_master_worker_ucb.mw_index`, :func:`~agents.dp_decentralized_ucb.dec_index`,
with :func:`~agents.dp_recsys_common.privacy_width`), the reading of the server's reply
(:func:`~agents.dp_master_worker_ucb.read_reply`) and the consensus round
(:func:`~agents.dp_decentralized_ucb.consensus_round`).

``act`` is one pure function of the step: where the numpy learner branches on the step (the
initialization, the decision rounds, the communication phase of Algorithm 2) the port computes
the candidates and keeps one with ``jnp.where``, so every step computes the index and the
counter insertion even when the step does not use them (DP-Dec-UCB under ``"paper"``: both
phases' work in each of its 2T steps).

Deviations, none in the algorithms: DP-Dec-UCB's ties use one uniform per agent and step from
the step's key (numpy: its ``tiebreak`` stream, same rule, the ``floor(u k)``-th tied arm);
the counters' Laplace draws come from the key, one per agent and step as numpy's
``noise_per="row"``; statistics are float32 (the counters' exact sums compensated), so an
index tie that float64 breaks may be a tie here, or the reverse.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from agents.dp_decentralized_ucb import AGENT_ID as DEC_ID
from agents.dp_decentralized_ucb import CHANNEL as NEIGHBORS
from agents.dp_decentralized_ucb import VERSION as DEC_VERSION
from agents.dp_decentralized_ucb import (
    DPDecentralizedConfig,
    DPDecentralizedParams,
    consensus_round,
    dec_channel_spec,
    dec_index,
    dp_dec_params,
)
from agents.dp_master_worker_ucb import AGENT_ID as MW_ID
from agents.dp_master_worker_ucb import CHANNEL as SERVER
from agents.dp_master_worker_ucb import VERSION as MW_VERSION
from agents.dp_master_worker_ucb import (
    DPMasterWorkerConfig,
    DPMasterWorkerParams,
    dp_mw_params,
    is_power_of_two,
    mw_channel_spec,
    mw_index,
    read_reply,
)
from agents.dp_recsys_common import timed
from agents.jax.field_common import Mixing
from fedbandit_env.jax.hybrid_counter import HybridCounter, HybridCounterState
from fedbandit_env.jax.types import COMMUNICATION, PULL, Action, Observation
from fedbandit_env.policy import FederationFacts
from fedbandit_env.ties import argmax_one_uniform
from fedbandit_env.xp import is_jax

Params = DPMasterWorkerParams | DPDecentralizedParams


# ---------------------------------------------------------------- shared
@functools.lru_cache(maxsize=64)
def _counter(shape: tuple[int, int], horizon: int, epsilon: float,
             clip: tuple[float, float]) -> HybridCounter:  # fmt: skip
    return HybridCounter(shape, horizon, epsilon, bounds=clip)


def counter_of(params: Params) -> HybridCounter:
    """The counters H_ij (N, K) of the params: one item per pull (capacity the horizon), the
    configuration's ``epsilon`` and ``clip`` (the options of the numpy learner's counters,
    :func:`agents.dp_recsys_common.make_running_sums`; ``epsilon = inf``: noiseless, the
    exact sums). Built in Python (once per options) and read while tracing; with a traced
    ``epsilon`` (docs/jax.md, "Compiling once"), the counter of epsilon = 1 holding the traced
    value (``make_params`` checked the value itself)."""
    cfg, shape = params.config, (params.num_agents, params.num_arms)
    if is_jax(cfg.epsilon):
        base = _counter(shape, params.horizon, 1.0, cfg.clip).params
        return HybridCounter.from_params(dataclasses.replace(base, epsilon=cfg.epsilon))
    return _counter(shape, params.horizon, cfg.epsilon, cfg.clip)


def _select(pred: jnp.ndarray, new: Any, old: Any) -> Any:
    """``new`` where ``pred`` holds, else ``old``, leaf by leaf (same pytree structure)."""
    return jax.tree_util.tree_map(lambda a, b: jnp.where(pred, a, b), new, old)


# ---------------------------------------------------------------- Algorithm 1
class MWState(NamedTuple):
    """One run of DP-MW-UCB: ``counts`` (N, K) int32 n_ij, ``sums`` the counters H_ij,
    ``held`` (N,) int32 the arm held, ``undecided`` (N,) no decision yet (a_prev = None),
    ``eta`` (N,) int32, ``uploaded`` (N,) sent an index vector with the last pull
    (``"latency"``), ``awaiting`` (N,) uploaded in the last (communication) step (``"paper"``),
    ``decision_rounds`` () int32 the run's decision rounds so far."""

    counts: jnp.ndarray
    sums: HybridCounterState
    held: jnp.ndarray
    undecided: jnp.ndarray
    eta: jnp.ndarray
    uploaded: jnp.ndarray
    awaiting: jnp.ndarray
    decision_rounds: jnp.ndarray


class DPMasterWorkerUCB:
    """DP-Master-worker UCB (Algorithm 1; :class:`agents.DPMasterWorkerUCB` on JAX, on the
    params protocol: :class:`agents.dp_master_worker_ucb.DPMasterWorkerParams`): agents upload
    private UCB indices to a server that averages them; all agents play the argmax, deciding
    only when ``eta`` is a power of two."""

    agent_id = MW_ID
    version = MW_VERSION

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

    def channel_spec(self, config) -> dict[str, dict[str, Any]]:
        """``server`` (kind server, aggregate "mean", dim K)."""
        return mw_channel_spec(config.num_arms)

    def make_params(self, facts: FederationFacts) -> DPMasterWorkerParams:
        """:func:`agents.dp_master_worker_ucb.dp_mw_params` (``delta = T^-4``; checks the
        family, a horizon longer than the initialization, the server channel averaging all
        uploads); the counters' options are checked here too, before tracing."""
        params = dp_mw_params(self.config, facts)
        counter_of(params)
        return params

    def init(self, key: jax.Array, params: DPMasterWorkerParams) -> MWState:
        """Algorithm 1 lines 1-3: ``eta = 1``, the empty mechanisms ``H_ij``."""
        n, k = params.num_agents, params.num_arms
        return MWState(
            counts=jnp.zeros((n, k), jnp.int32),
            sums=counter_of(params).init(),
            held=jnp.zeros(n, jnp.int32),
            undecided=jnp.ones(n, bool),
            eta=jnp.ones(n, jnp.int32),
            uploaded=jnp.zeros(n, bool),
            awaiting=jnp.zeros(n, bool),
            decision_rounds=jnp.zeros((), jnp.int32),
        )

    def run_attrs(self, state: MWState) -> dict[str, np.ndarray]:
        """The numpy learner's after-run attributes from the final state batched over runs:
        ``decision_rounds`` (runs,) (fedbandit_env.bench.executors.jax_attrs)."""
        return {"decision_rounds": np.asarray(state.decision_rounds, np.int64)}

    def index(self, state: MWState, t: jnp.ndarray, params: DPMasterWorkerParams) -> jnp.ndarray:
        """The private UCB indices (N, K) at round ``t`` (Algorithm 1 lines 11-13,
        :func:`~agents.dp_master_worker_ucb.mw_index`) from the counters' releases and the
        counts (clamped at 1 where used before the initialization ends; such indices are never
        sent)."""
        n = jnp.maximum(state.counts, 1).astype(jnp.float32)
        value = counter_of(params).release(state.sums)
        return mw_index(value, n, t, params.config.epsilon, params.ln_inv_delta)

    def _fold_in_reward(self, key: jax.Array, s: MWState, obs: Observation, fresh: jnp.ndarray,
                        params: DPMasterWorkerParams) -> MWState:  # fmt: skip
        """Algorithm 1 lines 8 and 26: the last reward into the pulled arm's mechanism and its
        count + 1, if the last step was a pull (``fresh``)."""
        arm = obs.last_arm
        sums = counter_of(params).insert_arms(key, s.sums, arm, obs.last_reward, fresh)
        hit = (arm[:, None] == jnp.arange(params.num_arms, dtype=jnp.int32)) & fresh
        return s._replace(sums=sums, counts=s.counts + hit.astype(jnp.int32))

    def _fold_in_reply(self, s: MWState, aggregate: jnp.ndarray, got: jnp.ndarray) -> MWState:
        """The server's average ``I^avg`` arrived (``got`` (N,)):
        :func:`~agents.dp_master_worker_ucb.read_reply` (Algorithm 1 lines 16-21)."""
        held, undecided, eta = read_reply(aggregate, got, s.held, s.undecided, s.eta)
        return s._replace(held=held, undecided=undecided, eta=eta)

    def act(self, key: jax.Array, state: MWState, obs: Observation,
            params: DPMasterWorkerParams):  # fmt: skip
        """One engine step under the configured ``timing`` (module docstring)."""
        return timed(params.config.timing, self._act_paper, self._act_latency)(
            key, state, obs, params
        )

    def _act_paper(self, key: jax.Array, s: MWState, obs: Observation,
                   params: DPMasterWorkerParams):  # fmt: skip
        """Algorithm 1 as written (lines 10-27): fold in the last pull, read the server's reply
        if this run uploaded in the last step, then either open a decision round (a
        communication step: upload the indices with ``ln t``) or pull (arm t-1 in rounds
        1..K, else the held arm; ``eta`` + 1 closes the round)."""
        K = params.num_arms
        t = obs.pulls + 1  # the round of the next pull
        fresh = (obs.phase == PULL) & (obs.pulls > 0)
        s = self._fold_in_reward(key, s, obs, fresh, params)
        got = s.awaiting
        s = self._fold_in_reply(s, obs.deliveries[SERVER].aggregate, got)
        init = t <= K
        decide = ~init & ~got & (t <= params.horizon) & is_power_of_two(s.eta)  # line 10
        arms = jnp.where(init, t - 1, s.held)
        payload = jnp.where(decide[:, None], self.index(s, t, params), 0.0)  # lines 11-15
        s = s._replace(
            eta=s.eta + (~init & ~decide).astype(jnp.int32),
            awaiting=decide,
            decision_rounds=s.decision_rounds + decide.any().astype(jnp.int32),
        )
        action = Action(arms.astype(jnp.int32), {SERVER: (decide, payload)}, ~decide.any())
        return action, s

    def _act_latency(self, key: jax.Array, s: MWState, obs: Observation,
                     params: DPMasterWorkerParams):  # fmt: skip
        """Algorithm 1 with the uploads sent with the pulls: the reply to the upload of step
        t - 1 is read at step t (from step K+2 on), ``eta`` + 1 per step, and the upload of the
        indices at step t when ``eta`` is a power of two (module docstring, "latency")."""
        K = params.num_arms
        t = obs.step + 1
        s = self._fold_in_reward(key, s, obs, obs.step > 0, params)
        init = t <= K
        later = t > K + 1
        reply = obs.deliveries[SERVER]
        got = later & s.uploaded & (reply.count > 0)
        s = self._fold_in_reply(s, reply.aggregate, got)
        s = s._replace(eta=s.eta + later.astype(jnp.int32))
        decide = ~init & is_power_of_two(s.eta)
        payload = jnp.where(decide[:, None], self.index(s, t, params), 0.0)
        arms = jnp.where(init, t - 1, s.held)
        s = s._replace(
            uploaded=decide,
            decision_rounds=s.decision_rounds + decide.any().astype(jnp.int32),
        )
        return Action(arms.astype(jnp.int32), {SERVER: (decide, payload)}), s


# ---------------------------------------------------------------- Algorithm 2
class DecState(NamedTuple):
    """One run of DP-Dec-UCB: ``sums`` the counters H_ij; ``nhat``, ``shat`` (N, K) float32
    the consensus counts and private sums; ``outgoing`` (N, 2K) the last values sent (own
    value of the next mixing)."""

    sums: HybridCounterState
    nhat: jnp.ndarray
    shat: jnp.ndarray
    outgoing: jnp.ndarray


class DPDecentralizedUCB:
    """DP-Decentralized UCB (Algorithm 2 with the repaired line 16;
    :class:`agents.DPDecentralizedUCB` on JAX, on the params protocol:
    :class:`agents.dp_decentralized_ucb.DPDecentralizedParams`): running consensus on counts
    and private sums over the ``neighbors`` channel, each agent playing its own UCB index."""

    agent_id = DEC_ID
    version = DEC_VERSION

    def __init__(
        self,
        epsilon: float = 2.0,
        rho: float = 2.0,
        kappa: float | None = None,
        index_sigma: float = 1.0,
        clip: tuple[float, float] = (0.0, 1.0),
        ci_mode: str = "per_agent",
        delta_horizon: int | None = None,
        timing: str = "paper",
    ):
        clip = tuple(clip) if isinstance(clip, list | tuple) else clip
        self.config = DPDecentralizedConfig(
            epsilon, rho, kappa, index_sigma, clip, ci_mode, delta_horizon, timing
        )

    @property
    def privacy_epsilon(self) -> float:
        """Declared guarantee: epsilon-DP per agent over its whole transcript (``inf``: none)."""
        return self.config.epsilon

    def channel_spec(self, config) -> dict[str, dict[str, Any]]:
        """``neighbors`` (dim 2K, reduce "sum")."""
        return dec_channel_spec(config.num_arms)

    def make_params(self, facts: FederationFacts) -> DPDecentralizedParams:
        """:func:`agents.dp_decentralized_ucb.dp_dec_params`: the consensus matrix of Eq. (4),
        the Lemma 2 constants ``c_i``, ``ln(1/delta)``; checks the family, the horizon, the
        channel, a connected graph and a mixing spectrum below 1; the counters' options are
        checked here too, before tracing."""
        params = dp_dec_params(self.config, facts)
        counter_of(params)
        return params

    def init(self, key: jax.Array, params: DPDecentralizedParams) -> DecState:
        """Algorithm 2 lines 1-3: zero consensus state, the empty mechanisms ``H_ij``."""
        n, k = params.num_agents, params.num_arms
        zeros = jnp.zeros((n, k), jnp.float32)
        return DecState(
            sums=counter_of(params).init(),
            nhat=zeros,
            shat=zeros,
            outgoing=jnp.zeros((n, 2 * k), jnp.float32),
        )

    def _mix(self, s: DecState, delivery: Any,
             params: DPDecentralizedParams) -> tuple[jnp.ndarray, jnp.ndarray]:  # fmt: skip
        """Row i of P applied to agent i's own last message and its neighbours' (Algorithm 2
        lines 12 and 16): :func:`agents.dp_decentralized_ucb.consensus_round` with the float32
        consensus weights."""
        return consensus_round(
            Mixing.from_consensus(params.consensus), s.outgoing, delivery, params.num_arms
        )

    def _fold_in_reward(self, key: jax.Array, s: DecState, nhat, shat, obs: Observation,
                        active: jnp.ndarray, params: DPDecentralizedParams) -> DecState:  # fmt: skip
        """Algorithm 2 lines 8 and 22 and the messages of lines 12 and 16: the last reward into
        the pulled arm's mechanism (if the last step was a pull, ``active``), and the outgoing
        ``(n̂ + ξ, ŝ + Δs)`` with ``ξ_ij = 1[last arm = j]`` and ``Δs_ij`` the increment of the
        counter's release."""
        counter = counter_of(params)
        arm = obs.last_arm
        sums = counter.insert_arms(key, s.sums, arm, obs.last_reward, active)
        hit = (arm[:, None] == jnp.arange(params.num_arms, dtype=jnp.int32)) & active
        ds = jnp.where(hit, counter.release(sums) - counter.release(s.sums), 0.0)
        out = jnp.concatenate([nhat + hit.astype(jnp.float32), shat + ds], axis=1)
        return DecState(sums, nhat, shat, out)

    def _choose(self, key: jax.Array, nhat, shat, t, first: int,
                params: DPDecentralizedParams) -> jnp.ndarray:  # fmt: skip
        """Algorithm 2 lines 6-7: arm ``(t-1) mod K`` while ``t <= first``; else line 20: the
        argmax of the index of line 19 (:func:`~agents.dp_decentralized_ucb.dec_index`), ties
        broken by one uniform per agent."""
        u = jax.random.uniform(key, (params.num_agents,), jnp.float32)
        c = jnp.asarray(params.c, jnp.float32)
        best = argmax_one_uniform(dec_index(nhat, shat, t, c, params), u)
        return jnp.where(t <= first, (t - 1) % params.num_arms, best).astype(jnp.int32)

    def act(self, key: jax.Array, state: DecState, obs: Observation,
            params: DPDecentralizedParams):  # fmt: skip
        """One engine step under the configured ``timing`` (module docstring)."""
        return timed(params.config.timing, self._act_paper, self._act_latency)(
            key, state, obs, params
        )

    def _act_paper(self, key: jax.Array, s: DecState, obs: Observation,
                   params: DPDecentralizedParams):  # fmt: skip
        """Algorithm 2 as written: after a pull, a communication step sends (n̂ + ξ, ŝ + Δs);
        after the communication step, mix what arrived (lines 12, 16) and pull round t's arm
        (lines 6-7, 19-20)."""
        k_tie, k_privacy = jax.random.split(key)
        talk = obs.phase == COMMUNICATION  # the round's messages arrived: mix, then pull
        nhat, shat = self._mix(s, obs.deliveries[NEIGHBORS], params)
        arms = self._choose(k_tie, nhat, shat, obs.pulls + 1, params.num_arms, params)
        mixed = s._replace(nhat=nhat, shat=shat)
        folded = self._fold_in_reward(k_privacy, s, s.nhat, s.shat, obs, obs.step > 0, params)
        s = _select(talk, mixed, folded)
        send = jnp.broadcast_to(~talk, (params.num_agents,))
        arms = jnp.where(talk, arms, 0)
        return Action(arms, {NEIGHBORS: (send, s.outgoing)}, talk), s

    def _act_latency(self, key: jax.Array, s: DecState, obs: Observation,
                     params: DPDecentralizedParams):  # fmt: skip
        """Algorithm 2 with the messages sent with the pulls: mix what arrived (the values of
        the last step), fold in the last reward, choose (module docstring, "latency")."""
        k_tie, k_privacy = jax.random.split(key)
        nhat, shat = self._mix(s, obs.deliveries[NEIGHBORS], params)
        s = self._fold_in_reward(k_privacy, s, nhat, shat, obs, obs.step > 0, params)
        arms = self._choose(k_tie, nhat, shat, obs.step + 1, params.num_arms + 1, params)
        send = jnp.ones(params.num_agents, bool)
        return Action(arms, {NEIGHBORS: (send, s.outgoing)}), s
