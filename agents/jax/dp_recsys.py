"""DP-Master-worker UCB and DP-Decentralized UCB in JAX (Li, Song & Fragouli, "Federated
Recommendation System via Differential Privacy"; docs/dp-recsys.md).

Ports of :mod:`agents.dp_master_worker_ucb` (Algorithm 1, ``dp_mw_ucb``) and
:mod:`agents.dp_decentralized_ucb` (Algorithm 2 with the repaired line 16, ``dp_dec_ucb``), the
numpy twins and the models, for one run, vectorized over the N (the paper's M) agents and K arms.
Both keep one hybrid counter per agent and arm (the mechanism ``H_ij``, Figure 1; Chan, Shi &
Song; :mod:`fedbandit_env.jax.hybrid_counter`, built from the twin's counter: same noise scales,
blocks and release rule), into which each agent's reward enters at its pulled arm only
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

Timing, the twins' (``timing``; docs/dp-recsys.md, "Timing"):

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

The hyperparameters, their validation, the checks of the federation's facts and the constants
(``ln(1/delta)``, the consensus weights, ``c_i``, the counters' scales) are the twins': ``init``
runs the twin's ``reset`` on the same facts (in Python, before tracing) and reads them.

``act`` is one pure function of the step: where the twin branches on the step (the
initialization, the decision rounds, the communication phase of Algorithm 2) the port computes
the candidates and keeps one with ``jnp.where``, so every step computes the index and the
counter insertion even when the step does not use them (DP-Dec-UCB under ``"paper"``: both
phases' work in each of its 2T steps).

Deviations, none in the algorithms: DP-Dec-UCB's ties use one uniform per agent and step from
the step's key (the twin: its ``tiebreak`` stream, same rule, the ``floor(u k)``-th tied arm);
the counters' Laplace draws come from the key, one per agent and step as the twin's
``noise_per="row"``; statistics are float32 (the counters' exact sums compensated), so an
index tie that float64 breaks may be a tie here, or the reverse.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from agents.dp_decentralized_ucb import CHANNEL as NEIGHBORS
from agents.dp_decentralized_ucb import DPDecentralizedUCB as NumpyDPDecentralizedUCB
from agents.dp_master_worker_ucb import CHANNEL as SERVER
from agents.dp_master_worker_ucb import DPMasterWorkerUCB as NumpyDPMasterWorkerUCB
from agents.dp_recsys_common import HybridSums
from fedbandit_env.jax.channels.neighbors import NeighborsAggregate
from fedbandit_env.jax.hybrid_counter import HybridCounter, HybridCounterState, is_power_of_two
from fedbandit_env.jax.types import COMMUNICATION, PULL, Action, Observation
from fedbandit_env.policy import FederationFacts
from fedbandit_env.scores import note_scores
from fedbandit_env.seeding import BatchedRNG
from fedbandit_env.ties import argmax_one_uniform


# ---------------------------------------------------------------- shared
def privacy_width(n: jnp.ndarray, epsilon: float, ln_inv_delta: float) -> jnp.ndarray:
    """``upsilon(n)/n``, ``upsilon(n) = (1/eps) ln(1/delta) ln^{1.5}(max(n, 1))`` (Algorithm 1
    line 12, Algorithm 2 line 14; the twin's :func:`agents.dp_recsys_common.privacy_width`):
    zero at ``n = 1`` and for ``epsilon = inf``. ``n`` float32, positive where used."""
    if math.isinf(epsilon):
        return jnp.zeros_like(n)
    ln = jnp.log(jnp.maximum(n, 1.0))
    return jnp.float32(ln_inv_delta / epsilon) * (ln * jnp.sqrt(ln)) / n


def counter_of(twin: Any, shape: tuple[int, int], clip: tuple[float, float],
               horizon: int) -> HybridCounter:  # fmt: skip
    """The JAX counters H_ij of a twin after its ``reset``: those of its
    :class:`~agents.dp_recsys_common.HybridSums`, or noiseless ones (``epsilon = inf``: the
    twin's exact sums, the same outputs)."""
    sums = twin.sums
    if isinstance(sums, HybridSums):
        return HybridCounter.from_twin(sums.counter)
    return HybridCounter(shape, horizon, math.inf, bounds=clip)


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
    """DP-Master-worker UCB (Algorithm 1; port of :class:`agents.DPMasterWorkerUCB`): agents
    upload private UCB indices to a server that averages them; all agents play the argmax,
    deciding only when ``eta`` is a power of two."""

    twin_class = NumpyDPMasterWorkerUCB
    agent_id = NumpyDPMasterWorkerUCB.agent_id
    version = NumpyDPMasterWorkerUCB.version

    def __init__(
        self,
        epsilon: float = 2.0,
        clip: tuple[float, float] = (0.0, 1.0),
        delta_horizon: int | None = None,
        timing: str = "paper",
    ):
        # the twin validates the hyperparameters (DPMasterWorkerConfig) and, in init, the facts
        self.twin = NumpyDPMasterWorkerUCB(epsilon, clip, delta_horizon, timing)
        self.config = self.twin.config
        self.paper = self.config.timing == "paper"

    @property
    def privacy_epsilon(self) -> float:
        """Declared guarantee: epsilon-DP per agent over its whole transcript (``inf``: none)."""
        return self.twin.privacy_epsilon

    def channel_spec(self, config) -> dict[str, dict[str, Any]]:
        """The twin's: ``server`` (kind server, aggregate "mean", dim K)."""
        return self.twin.channel_spec(config)

    def init(self, key: jax.Array, facts: FederationFacts) -> MWState:
        """Algorithm 1 lines 1-3: ``eta = 1``, the mechanisms ``H_ij``, ``delta = T^-4``; the
        constants from the twin's ``reset`` on the same facts, which checks them (the family,
        a horizon longer than the initialization, the server channel averaging all uploads)."""
        twin = self.twin
        twin.reset(facts, BatchedRNG([np.random.SeedSequence(0)]))
        self.N, self.K, self.T = facts.num_agents, facts.num_arms, facts.horizon
        self.ln_inv_delta = float(twin.ln_inv_delta)
        self.counter = counter_of(twin, (self.N, self.K), self.config.clip, facts.horizon)
        n = self.N
        return MWState(
            counts=jnp.zeros((n, self.K), jnp.int32),
            sums=self.counter.init(),
            held=jnp.zeros(n, jnp.int32),
            undecided=jnp.ones(n, bool),
            eta=jnp.ones(n, jnp.int32),
            uploaded=jnp.zeros(n, bool),
            awaiting=jnp.zeros(n, bool),
            decision_rounds=jnp.zeros((), jnp.int32),
        )

    def run_attrs(self, state: MWState) -> dict[str, np.ndarray]:
        """The twin's after-run attributes from the final state batched over runs:
        ``decision_rounds`` (runs,) (fedbandit_env.bench.executors.jax_attrs)."""
        return {"decision_rounds": np.asarray(state.decision_rounds, np.int64)}

    def index(self, state: MWState, t: jnp.ndarray) -> jnp.ndarray:
        """The private UCB indices (N, K) at round ``t`` (Algorithm 1 lines 11-13) from the
        counters' releases and the counts (counts clamped at 1 where used before the
        initialization ends; such indices are never sent)."""
        n = jnp.maximum(state.counts, 1).astype(jnp.float32)
        ln_t = jnp.log(jnp.asarray(t).astype(jnp.float32))
        width = jnp.sqrt(2.0 * ln_t / n)
        value = self.counter.release(state.sums)
        return value / n + width + privacy_width(n, self.config.epsilon, self.ln_inv_delta)

    def _fold_in_reward(self, key: jax.Array, s: MWState, obs: Observation,
                        fresh: jnp.ndarray) -> MWState:  # fmt: skip
        """Algorithm 1 lines 8 and 26: the last reward into the pulled arm's mechanism and its
        count + 1, if the last step was a pull (``fresh``)."""
        arm = obs.last_arm
        sums = self.counter.insert_arms(key, s.sums, arm, obs.last_reward, fresh)
        hit = (arm[:, None] == jnp.arange(self.K, dtype=jnp.int32)) & fresh
        return s._replace(sums=sums, counts=s.counts + hit.astype(jnp.int32))

    def _fold_in_reply(self, s: MWState, aggregate: jnp.ndarray, got: jnp.ndarray) -> MWState:
        """The server's average ``I^avg`` arrived (``got`` (N,)): the new decision is its argmax,
        lowest index on ties (lines 16-18); a switch (any first decision counts as one) resets
        ``eta`` to 1 (lines 19-21)."""
        note_scores(aggregate)
        new = jnp.argmax(aggregate).astype(jnp.int32)
        switched = got & (s.undecided | (new != s.held))
        return s._replace(
            held=jnp.where(got, new, s.held),
            undecided=s.undecided & ~got,
            eta=jnp.where(switched, 1, s.eta),
        )

    def act(self, key: jax.Array, state: MWState, obs: Observation):
        """One engine step under the configured ``timing`` (module docstring)."""
        if self.paper:
            return self._act_paper(key, state, obs)
        return self._act_latency(key, state, obs)

    def _act_paper(self, key: jax.Array, s: MWState, obs: Observation):
        """Algorithm 1 as written (lines 10-27): fold in the last pull, read the server's reply
        if this run uploaded in the last step, then either open a decision round (a
        communication step: upload the indices with ``ln t``) or pull (arm t-1 in rounds
        1..K, else the held arm; ``eta`` + 1 closes the round)."""
        K = self.K
        t = obs.pulls + 1  # the round of the next pull
        fresh = (obs.phase == PULL) & (obs.pulls > 0)
        s = self._fold_in_reward(key, s, obs, fresh)
        got = s.awaiting
        s = self._fold_in_reply(s, obs.deliveries[SERVER].aggregate, got)
        init = t <= K
        decide = ~init & ~got & (t <= self.T) & is_power_of_two(s.eta)  # line 10
        arms = jnp.where(init, t - 1, s.held)
        payload = jnp.where(decide[:, None], self.index(s, t), 0.0)  # lines 11-15
        s = s._replace(
            eta=s.eta + (~init & ~decide).astype(jnp.int32),
            awaiting=decide,
            decision_rounds=s.decision_rounds + decide.any().astype(jnp.int32),
        )
        action = Action(arms.astype(jnp.int32), {SERVER: (decide, payload)}, ~decide.any())
        return action, s

    def _act_latency(self, key: jax.Array, s: MWState, obs: Observation):
        """Algorithm 1 with the uploads sent with the pulls: the reply to the upload of step
        t - 1 is read at step t (from step K+2 on), ``eta`` + 1 per step, and the upload of the
        indices at step t when ``eta`` is a power of two (module docstring, "latency")."""
        K = self.K
        t = obs.step + 1
        s = self._fold_in_reward(key, s, obs, obs.step > 0)
        init = t <= K
        later = t > K + 1
        reply = obs.deliveries[SERVER]
        got = later & s.uploaded & (reply.count > 0)
        s = self._fold_in_reply(s, reply.aggregate, got)
        s = s._replace(eta=s.eta + later.astype(jnp.int32))
        decide = ~init & is_power_of_two(s.eta)
        payload = jnp.where(decide[:, None], self.index(s, t), 0.0)
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
    """DP-Decentralized UCB (Algorithm 2 with the repaired line 16; port of
    :class:`agents.DPDecentralizedUCB`): running consensus on counts and private sums over the
    ``neighbors`` channel, each agent playing its own UCB index."""

    twin_class = NumpyDPDecentralizedUCB
    agent_id = NumpyDPDecentralizedUCB.agent_id
    version = NumpyDPDecentralizedUCB.version

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
        # the twin validates the hyperparameters (DPDecentralizedConfig) and, in init, the facts
        self.twin = NumpyDPDecentralizedUCB(
            epsilon, rho, kappa, index_sigma, clip, ci_mode, delta_horizon, timing
        )
        self.config = self.twin.config
        self.paper = self.config.timing == "paper"

    @property
    def privacy_epsilon(self) -> float:
        """Declared guarantee: epsilon-DP per agent over its whole transcript (``inf``: none)."""
        return self.twin.privacy_epsilon

    def channel_spec(self, config) -> dict[str, dict[str, Any]]:
        """The twin's: ``neighbors`` (dim 2K, reduce "sum")."""
        return self.twin.channel_spec(config)

    def init(self, key: jax.Array, facts: FederationFacts) -> DecState:
        """Algorithm 2 lines 1-3: zero consensus state, the mechanisms ``H_ij``, the consensus
        matrix of Eq. (4) and the Lemma 2 constants ``c_i``, all from the twin's ``reset`` on the
        same facts, which checks them (the family, the horizon, the channel, a connected graph
        and a mixing spectrum below 1)."""
        twin = self.twin
        twin.reset(facts, BatchedRNG([np.random.SeedSequence(0)]))
        self.N, self.K = facts.num_agents, facts.num_arms
        cons = twin.consensus
        self.self_weight = np.asarray(cons.self_weight, np.float32)  # P_ii
        self.edge_weight = np.float32(cons.edge_weight)  # kappa / d_max, every edge of P
        self.degrees = np.asarray(cons.degrees, np.int32)
        self.c = np.asarray(twin.c, np.float32)
        self.ln_inv_delta = float(twin.ln_inv_delta)
        self.counter = counter_of(twin, (self.N, self.K), self.config.clip, facts.horizon)
        zeros = jnp.zeros((self.N, self.K), jnp.float32)
        return DecState(
            sums=self.counter.init(),
            nhat=zeros,
            shat=zeros,
            outgoing=jnp.zeros((self.N, 2 * self.K), jnp.float32),
        )

    def _mix(self, s: DecState, delivery: Any) -> tuple[jnp.ndarray, jnp.ndarray]:
        """Row i of P applied to agent i's own last message and its neighbours' (Algorithm 2
        lines 12 and 16): ``P_ii`` times its own plus ``kappa/d_max`` times the sum of what
        arrived; a lost message's weight goes to the receiver's own value."""
        if isinstance(delivery, NeighborsAggregate):
            total, count = delivery.value, delivery.count
        else:  # a padded neighbors channel
            total = jnp.where(delivery.mask[..., None], delivery.payload, 0.0).sum(axis=1)
            count = delivery.mask.sum(axis=1, dtype=jnp.int32)
        lost = (jnp.asarray(self.degrees) - count).astype(jnp.float32)
        w_self = jnp.asarray(self.self_weight) + self.edge_weight * lost
        mixed = w_self[:, None] * s.outgoing + self.edge_weight * total
        return mixed[:, : self.K], mixed[:, self.K :]

    def _fold_in_reward(self, key: jax.Array, s: DecState, nhat, shat, obs: Observation,
                        active: jnp.ndarray) -> DecState:  # fmt: skip
        """Algorithm 2 lines 8 and 22 and the messages of lines 12 and 16: the last reward into
        the pulled arm's mechanism (if the last step was a pull, ``active``), and the outgoing
        ``(n̂ + ξ, ŝ + Δs)`` with ``ξ_ij = 1[last arm = j]`` and ``Δs_ij`` the increment of the
        counter's release."""
        arm = obs.last_arm
        sums = self.counter.insert_arms(key, s.sums, arm, obs.last_reward, active)
        hit = (arm[:, None] == jnp.arange(self.K, dtype=jnp.int32)) & active
        ds = jnp.where(hit, self.counter.release(sums) - self.counter.release(s.sums), 0.0)
        out = jnp.concatenate([nhat + hit.astype(jnp.float32), shat + ds], axis=1)
        return DecState(sums, nhat, shat, out)

    def index(self, nhat: jnp.ndarray, shat: jnp.ndarray, t: jnp.ndarray) -> jnp.ndarray:
        """The DP-Dec-UCB index (N, K) at step ``t`` (Algorithm 2 lines 14 and 19) from the
        consensus state (``nhat`` clamped away from 0 where used before the initialization
        ends; those indices are never played)."""
        cfg = self.config
        positive = nhat > 0
        n = jnp.where(positive, nhat, 1.0)
        c = jnp.asarray(self.c)[:, None]
        spread = (n + c) / (jnp.float32(self.N) * n)
        ln_t = jnp.log(jnp.asarray(t).astype(jnp.float32))
        width = jnp.float32(cfg.index_sigma) * jnp.sqrt(
            jnp.float32(2.0 * cfg.rho) * spread * ln_t / n
        )
        index = shat / n + width + privacy_width(n, cfg.epsilon, self.ln_inv_delta)
        return jnp.where(positive, index, jnp.inf)  # the twin's guard

    def _choose(self, key: jax.Array, nhat, shat, t, first: int) -> jnp.ndarray:
        """Algorithm 2 lines 6-7: arm ``(t-1) mod K`` while ``t <= first``; else line 20: the
        argmax of the index of line 19, ties broken by one uniform per agent."""
        u = jax.random.uniform(key, (self.N,), jnp.float32)
        best = argmax_one_uniform(self.index(nhat, shat, t), u)
        return jnp.where(t <= first, (t - 1) % self.K, best).astype(jnp.int32)

    def act(self, key: jax.Array, state: DecState, obs: Observation):
        """One engine step under the configured ``timing`` (module docstring)."""
        if self.paper:
            return self._act_paper(key, state, obs)
        return self._act_latency(key, state, obs)

    def _act_paper(self, key: jax.Array, s: DecState, obs: Observation):
        """Algorithm 2 as written: after a pull, a communication step sends (n̂ + ξ, ŝ + Δs);
        after the communication step, mix what arrived (lines 12, 16) and pull round t's arm
        (lines 6-7, 19-20)."""
        k_tie, k_privacy = jax.random.split(key)
        talk = obs.phase == COMMUNICATION  # the round's messages arrived: mix, then pull
        nhat, shat = self._mix(s, obs.deliveries[NEIGHBORS])
        arms = self._choose(k_tie, nhat, shat, obs.pulls + 1, self.K)
        mixed = s._replace(nhat=nhat, shat=shat)
        folded = self._fold_in_reward(k_privacy, s, s.nhat, s.shat, obs, obs.step > 0)
        s = _select(talk, mixed, folded)
        send = jnp.broadcast_to(~talk, (self.N,))
        arms = jnp.where(talk, arms, 0)
        return Action(arms, {NEIGHBORS: (send, s.outgoing)}, talk), s

    def _act_latency(self, key: jax.Array, s: DecState, obs: Observation):
        """Algorithm 2 with the messages sent with the pulls: mix what arrived (the values of
        the last step), fold in the last reward, choose (module docstring, "latency")."""
        k_tie, k_privacy = jax.random.split(key)
        nhat, shat = self._mix(s, obs.deliveries[NEIGHBORS])
        s = self._fold_in_reward(k_privacy, s, nhat, shat, obs, obs.step > 0)
        arms = self._choose(k_tie, nhat, shat, obs.step + 1, self.K + 1)
        send = jnp.ones(self.N, bool)
        return Action(arms, {NEIGHBORS: (send, s.outgoing)}), s
