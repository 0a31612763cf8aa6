"""DDUCB in JAX (Martínez-Rubio, Kanade & Rebeschini, "Decentralized Cooperative Stochastic
Bandits", NeurIPS 2019).

The JAX form of :mod:`agents.dducb` (the numpy learner, the model; docs/dducb.md) for one run,
vectorized over the N agents and K arms, on the params protocol (:class:`agents.dducb.DDUCBParams`
from :func:`agents.dducb.dducb_params`). DDUCB is the paper's Algorithm 1 (decentralized delayed
UCB) with the accelerated (Chebyshev) gossip of its Section 3; the rules the numpy learner read in
the authors' code are followed as it follows them. The names are the numpy learner's:

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
``C``         the stage length (docs/dducb.md, "Stage length"), a Python constant of the params
============  ==================================================================================

Gossip matrix ``P = I - (kappa/d_max) L`` and ``lambda2 = max_{p>=2} |lambda_p(P)|``, from
:func:`agents.field_common.consensus_setup` (in the params); an agent needs only the sum of its
neighbours' iterates (the ``neighbors`` channel, dim 2K, ``reduce="sum"``,
:func:`agents.dducb.dducb_channel_spec`; the padded delivery gives the same run). The index is
:func:`agents.dducb.dducb_index` and one mixing round :func:`agents.field_common.mix`, the
functions the numpy learner calls.

Timing, the numpy learner's: env steps 1..K are the initialization (arm k at step k + 1, nothing sent);
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
the stages ended (a schedule statistic, not in the numpy learner).

Deviations, none in the algorithm: the tie-break uses one uniform per agent and step from the
step's key (numpy: its ``tiebreak`` stream, same ``floor(u k)``-th rule); statistics are
float32 (``delta`` compensated), ``s`` int32 (exact below 2^31 network pulls).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from agents.dducb import (
    AGENT_ID,
    CHANNEL,
    VERSION,
    DDUCBConfig,
    DDUCBParams,
    dducb_channel_spec,
    dducb_index,
    dducb_params,
)
from agents.jax.field_common import Mixing, mix
from fedbandit_env.jax.accumulate import Total, total_add
from fedbandit_env.jax.types import Action, Observation
from fedbandit_env.policy import FederationFacts
from fedbandit_env.ties import argmax_one_uniform


class DDUCBState(NamedTuple):
    """The numpy learner's :class:`agents.dducb.DDUCBState` for one run (module doc):
    ``alpha``, ``beta``, ``gamma``, ``z``, ``z_prev`` (N, 2K) float32, ``delta`` a compensated
    (N, 2K) sum, ``r``, ``s``, ``pulls`` () int32, ``sent_last`` () bool, and ``stages`` ()
    int32 the stages ended so far."""

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


class DDUCB:
    """DDUCB with accelerated or plain gossip of delayed stage statistics (:class:`agents.DDUCB`
    on JAX, on the params protocol: :class:`agents.dducb.DDUCBParams`; module doc)."""

    agent_id = AGENT_ID
    version = VERSION
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
        self.config = DDUCBConfig(accelerated, eta, eps, sigma, stage_length, kappa)

    def channel_spec(self, config) -> dict[str, dict[str, Any]]:
        """``neighbors`` (dim 2K, ``reduce="sum"``)."""
        return dducb_channel_spec(config.num_arms)

    def make_params(self, facts: FederationFacts) -> DDUCBParams:
        """P, lambda2, C, the Chebyshev coefficients and the index's factor (and the checks:
        the family, the channel, a horizon longer than K, a connected graph, ``kappa``):
        :func:`agents.dducb.dducb_params`."""
        return dducb_params(self.config, facts)

    # ------------------------------------------------------------------- init
    def init(self, key: jax.Array, params: DDUCBParams) -> DDUCBState:
        """Zero state before the initialization (docs/dducb.md, "Init"; ``s = K``)."""
        N, K = params.num_agents, params.num_arms
        zeros = jnp.zeros((N, 2 * K), jnp.float32)
        i32 = jnp.int32
        return DDUCBState(
            alpha=zeros, beta=zeros, gamma=zeros, delta=Total(zeros, zeros), z=zeros,
            z_prev=zeros, r=jnp.zeros((), i32), s=jnp.asarray(K, i32),
            pulls=jnp.zeros((), i32), sent_last=jnp.zeros((), bool), stages=jnp.zeros((), i32),
        )  # fmt: skip

    # ------------------------------------------------------------- the step
    def act(self, key: jax.Array, state: DDUCBState, obs: Observation, params: DDUCBParams):
        """One env step for every agent (the numpy learner's ``act``): fold in the last reward
        (:meth:`_fold_in`), mix the iterate sent with the last arm one round and end the stage
        after its C-th round (:meth:`_mix`); then pull arm t during the initialization (t < K
        pulls, nothing sent), else the arg-max of the index (docs/dducb.md step 1) and send z."""
        N, K = params.num_agents, params.num_arms
        stepped = obs.step > 0
        mixing = stepped & state.sent_last  # the iterate went out with the last arm
        st = state._replace(pulls=state.pulls + stepped.astype(jnp.int32))
        st = self._fold_in(st, obs, params)
        st = _select(mixing, self._mix(st, obs, params), st)
        u = jax.random.uniform(key, (N,), jnp.float32)
        greedy = argmax_one_uniform(dducb_index(st.alpha, st.s, params.bonus, K), u)
        init = st.pulls < K
        arms = jnp.where(init, st.pulls, greedy).astype(jnp.int32)
        st = st._replace(sent_last=~init)
        send = jnp.broadcast_to(~init, (N,))
        return Action(arms, {CHANNEL: (send, st.z)}), st

    def _fold_in(self, st: DDUCBState, obs: Observation, params: DDUCBParams) -> DDUCBState:
        """The reward of the last step (docs/dducb.md "Init" and "Per step" 2): at pulls <=
        K the initialization sample ``beta[k] = (u, 1)`` (and, at K pulls, ``alpha = beta/N``,
        ``z = beta``); later ``gamma[k] += (u, 1)``, ``alpha[k] += (u/N, 1/N)``, ``s += N``."""
        N, K = params.num_agents, params.num_arms
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

    def _mix(self, st: DDUCBState, obs: Observation, params: DDUCBParams) -> DDUCBState:
        """One exchange of the iterate (docs/dducb.md "Mixing"): ``P z_r`` (plain, or the first
        accelerated round), ``a_r P z_r - b_r z_{r-1}`` (accelerated, r >= 1); after the C-th
        round the end of the stage (docs/dducb.md "End of stage")."""
        C, accelerated = params.stage_length, params.config.accelerated
        pz = mix(Mixing.from_consensus(params.consensus), st.z, obs.deliveries[CHANNEL])
        if accelerated:
            a = jnp.asarray(params.a, jnp.float32)[st.r]
            b = jnp.asarray(params.b, jnp.float32)[st.r]
            new = jnp.where(st.r >= 1, a * pz - b * st.z_prev, pz)
        else:
            new = pz
        r = st.r + 1
        running = st._replace(z=new, z_prev=st.z, r=r)
        zeros = jnp.zeros_like(st.gamma)
        if accelerated:
            delta = total_add(st.delta, new)
            alpha = delta.total - delta.carry
            beta = st.gamma
        else:
            delta, alpha, beta = st.delta, new, new + st.gamma
        ended = st._replace(
            alpha=alpha, beta=beta, gamma=zeros, delta=delta, z=beta, z_prev=zeros,
            r=jnp.zeros((), jnp.int32), s=(st.pulls - C) * jnp.int32(params.num_agents),
            stages=st.stages + 1,
        )  # fmt: skip
        return _select(r >= C, ended, running)
