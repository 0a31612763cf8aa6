"""DDUCB in JAX (Martínez-Rubio, Kanade & Rebeschini, "Decentralized Cooperative Stochastic
Bandits", NeurIPS 2019).

Port of :mod:`agents.dducb` (the numpy twin, the model; docs/dducb.md) for one run, vectorized
over the N agents and K arms. DDUCB is the paper's Algorithm 1 (decentralized delayed UCB) with
the accelerated (Chebyshev) gossip of its Section 3; the rules the twin read in the authors'
code are followed as the twin follows them. The names are the twin's:

============  ==================================================================================
``alpha``     (N, 2K): the K reward sums then the K counts used for decisions, an estimate of
              the network average (sums / counts is the mean, ``N alpha_cnt`` the pulls)
``beta``      (N, 2K): y_0 of the stage being mixed
``gamma``     (N, 2K): own samples of the current stage
``delta``     (N, 2K): accumulated mixed stages (accelerated only; a compensated float32 sum)
``z``         (N, 2K): the mixing iterate z_r = y_r / T_r(1/lambda2), what is sent
``z_prev``    z_{r-1}
``r``         mixing rounds done in the stage (0..C-1)
``s``         the estimate of the network's total pulls (int32)
``C``         the stage length (docs/dducb.md, "Stage length"), a Python constant
============  ==================================================================================

Gossip matrix ``P = I - (kappa/d_max) L`` and ``lambda2 = max_{p>=2} |lambda_p(P)|``, from the
twin's :func:`agents.field_common.consensus_setup`; an agent needs only the sum of its
neighbours' iterates (the ``neighbors`` channel, dim 2K, ``reduce="sum"``, the twin's
``channel_spec``; the padded delivery gives the same run).

Timing, the twin's: env steps 1..K are the initialization (arm k at step k + 1, nothing sent);
from the decision at K pulls on, every step every agent pulls the arm of maximal index (step 1
of docs/dducb.md, "Per step") and sends its current iterate z (2K floats to every neighbour: one
message per directed edge per step). The next observation folds the reward in (``gamma[k] +=
(u, 1)``, ``alpha[k] += (u/N, 1/N)``, ``s += N``) and mixes the delivered iterates one round:
unaccelerated ``z_{r+1} = P z_r``, accelerated ``z_1 = P z_0``, ``z_{r+1} = a_r P z_r - b_r
z_{r-1}`` (the normalised Chebyshev recursion, coefficients
:func:`agents.dducb.chebyshev_coefficients`). After the C-th round the stage ends: ``s = (t -
C) N``; accelerated ``delta += z``, ``alpha = delta``, ``beta = gamma``; unaccelerated ``alpha =
z``, ``beta = z + gamma``; then ``gamma = 0``, ``z = beta``, ``r = 0``.

The stage schedule is a clock (``r`` counts to C), so every stage end is a mask (``jnp.where``
on ``r + 1 == C``); the end-of-stage values are computed every step and kept on the stage's last
round (a few (N, 2K) selects, the cost of a ``lax.cond`` under ``vmap`` too). ``stages`` counts
the stages ended (a schedule statistic, not in the twin).

Deviations, none in the algorithm: the tie-break uses one uniform per agent and step from the
step's key (the twin: its ``tiebreak`` stream, same ``floor(u k)``-th rule); statistics are
float32 (``delta`` compensated), ``s`` int32 (exact below 2^31 network pulls).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from agents.dducb import CHANNEL
from agents.dducb import DDUCB as NumpyDDUCB
from agents.jax.field_common import Mixing, mix
from fedbandit_env.jax.accumulate import Total, total_add
from fedbandit_env.jax.types import Action, Observation
from fedbandit_env.policy import FederationFacts
from fedbandit_env.seeding import BatchedRNG
from fedbandit_env.ties import argmax_one_uniform


class DDUCBState(NamedTuple):
    """The twin's :class:`agents.dducb.DDUCBState` for one run (module doc): ``alpha``,
    ``beta``, ``gamma``, ``z``, ``z_prev`` (N, 2K) float32, ``delta`` a compensated (N, 2K)
    sum, ``r``, ``s``, ``pulls`` () int32, ``sent_last`` () bool, and ``stages`` () int32 the
    stages ended so far."""

    alpha: jnp.ndarray
    beta: jnp.ndarray
    gamma: jnp.ndarray
    delta: Total
    z: jnp.ndarray
    z_prev: jnp.ndarray
    r: jnp.ndarray
    s: jnp.ndarray
    pulls: jnp.ndarray
    sent_last: jnp.ndarray
    stages: jnp.ndarray


def _select(pred: jnp.ndarray, new: Any, old: Any) -> Any:
    """``new`` where ``pred`` holds, else ``old``, leaf by leaf."""
    return jax.tree_util.tree_map(lambda a, b: jnp.where(pred, a, b), new, old)


def dducb_index(alpha: jnp.ndarray, s: jnp.ndarray, bonus: float, num_arms: int) -> jnp.ndarray:
    """Step 1 of docs/dducb.md, "Per step" (Algorithm 1's UCB on the gossiped averages):
    ``alpha_sum/alpha_cnt + sqrt(2 eta sigma^2 ln s / (N alpha_cnt))`` (``bonus = 2 eta
    sigma^2 / N``, ``ln max(s, 1)``); an arm with ``alpha_cnt <= 0`` has an infinite index."""
    K = num_arms
    sums, cnt = alpha[:, :K], alpha[:, K:]
    ok = cnt > 0
    safe = jnp.where(ok, cnt, 1.0)
    log_s = jnp.log(jnp.maximum(s, 1).astype(jnp.float32))
    value = sums / safe + jnp.sqrt(jnp.float32(bonus) * log_s / safe)
    return jnp.where(ok, value, jnp.inf)


class DDUCB:
    """DDUCB with accelerated or plain gossip of delayed stage statistics (port of
    :class:`agents.DDUCB`; module doc)."""

    twin_class: type = NumpyDDUCB
    agent_id = NumpyDDUCB.agent_id
    version = NumpyDDUCB.version
    privacy_epsilon = None

    def __init__(
        self,
        accelerated: bool = True,
        eta: float = 2.0,
        eps: float = 1.0 / 22.0,
        sigma: float = 1.0,
        stage_length: Any = "standard",
        kappa: float | None = None,
    ):
        # the twin validates the hyperparameters (DDUCBConfig) and, in init, the facts
        self.twin = NumpyDDUCB(accelerated, eta, eps, sigma, stage_length, kappa)
        self.config = self.twin.config

    def channel_spec(self, config) -> dict[str, dict[str, Any]]:
        """The twin's: ``neighbors`` (dim 2K, ``reduce="sum"``)."""
        return self.twin.channel_spec(config)

    # ------------------------------------------------------------------- init
    def init(self, key: jax.Array, facts: FederationFacts) -> DDUCBState:
        """Zero state before the initialization (docs/dducb.md, "Init"; ``s = K``); the
        constants (P, lambda2, C, the Chebyshev coefficients, the index's factor) from the
        twin's ``reset`` on the same facts, which also checks them (the family, the channel, a
        horizon longer than K, a connected graph, ``kappa``)."""
        twin = self.twin
        twin.reset(facts, BatchedRNG([np.random.SeedSequence(0)]))
        self.N, self.K, self.C = twin.N, twin.K, int(twin.C)
        self.bonus = float(twin.bonus)
        self.lambda2 = float(twin.consensus.lambda2)
        self.mixing = Mixing.from_consensus(twin.consensus)
        self._a = np.asarray(twin._a, np.float32)
        self._b = np.asarray(twin._b, np.float32)
        zeros = jnp.zeros((self.N, 2 * self.K), jnp.float32)
        i32 = jnp.int32
        return DDUCBState(
            alpha=zeros, beta=zeros, gamma=zeros, delta=Total(zeros, zeros), z=zeros,
            z_prev=zeros, r=jnp.zeros((), i32), s=jnp.asarray(self.K, i32),
            pulls=jnp.zeros((), i32), sent_last=jnp.zeros((), bool), stages=jnp.zeros((), i32),
        )  # fmt: skip

    # ------------------------------------------------------------- the step
    def act(self, key: jax.Array, state: DDUCBState, obs: Observation):
        """One env step for every agent (the twin's ``act``): fold in the last reward
        (:meth:`_fold_in`), mix the iterate sent with the last arm one round and end the stage
        after its C-th round (:meth:`_mix`); then pull arm t during the initialization (t < K
        pulls, nothing sent), else the arg-max of the index (docs/dducb.md step 1) and send z."""
        stepped = obs.step > 0
        mixing = stepped & state.sent_last  # the iterate went out with the last arm
        st = self._fold_in(state._replace(pulls=state.pulls + stepped.astype(jnp.int32)), obs)
        st = _select(mixing, self._mix(st, obs), st)
        u = jax.random.uniform(key, (self.N,), jnp.float32)
        greedy = argmax_one_uniform(dducb_index(st.alpha, st.s, self.bonus, self.K), u)
        init = st.pulls < self.K
        arms = jnp.where(init, st.pulls, greedy).astype(jnp.int32)
        st = st._replace(sent_last=~init)
        send = jnp.broadcast_to(~init, (self.N,))
        return Action(arms, {CHANNEL: (send, st.z)}), st

    def _fold_in(self, st: DDUCBState, obs: Observation) -> DDUCBState:
        """The reward of the last step (docs/dducb.md "Init" and "Per step" 2): at pulls <=
        K the initialization sample ``beta[k] = (u, 1)`` (and, at K pulls, ``alpha = beta/N``,
        ``z = beta``); later ``gamma[k] += (u, 1)``, ``alpha[k] += (u/N, 1/N)``, ``s += N``."""
        K, N = self.K, self.N
        stepped = obs.step > 0
        hit = (obs.last_arm[:, None] == jnp.arange(K, dtype=jnp.int32)) & stepped  # (N, K)
        hit2 = jnp.concatenate([hit, hit], axis=1)
        value = jnp.concatenate(
            [jnp.broadcast_to(obs.last_reward[:, None], (N, K)), jnp.ones((N, K), jnp.float32)],
            axis=1,
        )
        inc = jnp.where(hit2, value, 0.0)
        beta = jnp.where(hit2, value, st.beta)
        done = stepped & (st.pulls == K)  # init done: alpha = beta / N, the first stage starts
        initial = st._replace(
            beta=beta,
            alpha=jnp.where(done, beta / jnp.float32(N), st.alpha),
            z=jnp.where(done, beta, st.z),
        )
        later = st._replace(
            gamma=st.gamma + inc,
            alpha=st.alpha + inc / jnp.float32(N),
            s=st.s + jnp.int32(N),
        )
        return _select(st.pulls <= K, initial, later)

    def _mix(self, st: DDUCBState, obs: Observation) -> DDUCBState:
        """One exchange of the iterate (docs/dducb.md "Mixing"): ``P z_r`` (plain, or the first
        accelerated round), ``a_r P z_r - b_r z_{r-1}`` (accelerated, r >= 1); after the C-th
        round the end of the stage (docs/dducb.md "End of stage")."""
        pz = mix(self.mixing, st.z, obs.deliveries[CHANNEL])
        if self.config.accelerated:
            a, b = jnp.asarray(self._a)[st.r], jnp.asarray(self._b)[st.r]
            new = jnp.where(st.r >= 1, a * pz - b * st.z_prev, pz)
        else:
            new = pz
        r = st.r + 1
        running = st._replace(z=new, z_prev=st.z, r=r)
        zeros = jnp.zeros_like(st.gamma)
        if self.config.accelerated:
            delta = total_add(st.delta, new)
            alpha = delta.total - delta.carry
            beta = st.gamma
        else:
            delta, alpha, beta = st.delta, new, new + st.gamma
        ended = st._replace(
            alpha=alpha, beta=beta, gamma=zeros, delta=delta, z=beta, z_prev=zeros,
            r=jnp.zeros((), jnp.int32), s=(st.pulls - self.C) * jnp.int32(self.N),
            stages=st.stages + 1,
        )  # fmt: skip
        return _select(r >= self.C, ended, running)
