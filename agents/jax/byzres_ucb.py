"""ByzRes-UCB in JAX (Zhu, Koppel, Velasquez & Liu, "Byzantine-Resilient Decentralized
Multi-Armed Bandits", TMLR; arXiv 2310.07320).

The JAX form of :mod:`agents.byzres_ucb` (the numpy learner, the model) for one run, vectorized over the N
agents, their neighbour slots and the M arms. The rules are those of the authors' MATLAB code
(``dist_TMLR.m``), with the decisions of docs/byzres-ucb.md. The names are the numpy learner's:

============  =====================================================================
``s``         per (agent, arm) reward sums (compensated float32); ``xbar = s / n``
``n``         per (agent, arm) pull counts (int32)
``xhat_h``    neighbour h's sent sample means; ``nhat_h`` its sent counts
``A``         the consistency filter ``{h : kappa nhat_h[k] >= n_i[k]}`` (step 1)
``z``, ``g``  the fused estimate and the width factor (steps 2-3); ``accepted`` = ``|A|``
``Q``         the index ``z + sqrt(2 g ln t / n)`` (step 4)
============  =====================================================================

Channel, the numpy learner's (one ``byzres_channel_spec``): ``neighbors`` of dim 2M with per-neighbour
delivery (``reduce=None``); every agent sends ``[xbar (M), n (M)]`` (``fusion="none"``: no
channel, no message).

Timing, the numpy learner's: env steps 1..M are the initialization (every agent pulls arm s - 1 at env
step s); then round t = pulls - M + 1 chooses from the messages delivered in the last step.
``sync="step"``: the payload goes out with every pull, the initialization included;
``sync="comm_step"``: a communication-only step (``pull`` False) carries the payload before
every pull of a round, and nothing is sent otherwise.

``act`` is one pure function of the step: it computes the fusion and the choice every step and
keeps what the step calls for with ``jnp.where`` (the initialization arm, the communication
step's idle arm, or the round's choice), so the fusion's sort is paid on initialization and
communication steps too. The hyperparameters, their validation and the checks of the facts
(the homogeneous family, the channel, per-neighbour delivery, a horizon longer than M) are the
numpy learner's: ``make_params`` is its pure :func:`agents.byzres_ucb.byzres_params`, run in
Python before tracing; the formulas are :mod:`agents.byzres_fusion`, shared with it.

Deviations, none in the algorithm: the uniform tie-break (``tiebreak="uniform"``) takes one
uniform per agent and step from the step's key (numpy: its ``tiebreak`` stream, the same
``floor(u k)``-th of the k tied arms); statistics are float32 (sums compensated), so the filter
``kappa nhat >= n`` and the index are evaluated in float32 (numpy: float64), which can only
differ where ``kappa nhat`` rounds across an integer.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from agents.byzres_fusion import fuse, index, payload
from agents.byzres_ucb import (
    AGENT_ID,
    CHANNEL,
    VERSION,
    ByzResParams,
    ByzResUCBConfig,
    byzres_channel_spec,
    byzres_params,
)
from fedbandit_env.jax.accumulate import Total, total_add
from fedbandit_env.jax.types import PULL, Action, Observation
from fedbandit_env.policy import FederationFacts
from fedbandit_env.scores import note_scores
from fedbandit_env.ties import argmax_one_uniform


class ByzResState(NamedTuple):
    """Per (agent, arm): ``s`` reward sums (compensated) and ``n`` pull counts; the last
    round's ``z``, ``g`` and ``accepted`` (``|A|``, diagnostics); ``comm_done``
    (``sync="comm_step"``): this round's communication step has been taken."""

    s: Total
    n: jnp.ndarray
    z: jnp.ndarray
    g: jnp.ndarray
    accepted: jnp.ndarray
    comm_done: jnp.ndarray


class ByzResUCB:
    """ByzRes-UCB for the N agents of one run, on the params protocol (:class:`ByzResParams`)."""

    agent_id = AGENT_ID
    version = VERSION  # the numpy learner's results version
    payload_layouts = {CHANNEL: "means"}  # [x̄ (M), n (M)] per agent
    privacy_epsilon = None

    def __init__(
        self,
        kappa: float = 1.5,
        f: int | None = None,
        tiebreak: str = "uniform",
        sync: str = "step",
        fusion: str = "trimmed",
    ):
        self.config = ByzResUCBConfig(kappa, f, tiebreak, sync, fusion)

    def channel_spec(self, config):
        """``neighbors`` of dim 2M, per-neighbour delivery (None for ``fusion="none"``)."""
        return byzres_channel_spec(self.config, config.num_arms)

    def make_params(self, facts: FederationFacts) -> ByzResParams:
        """The f it trims with (the user's, or the environment's declared bound), N, M and
        the notes; checks the facts."""
        return byzres_params(self.config, facts)

    def init(self, key: jax.Array, params: ByzResParams) -> ByzResState:
        """Zero statistics."""
        shape = (params.num_agents, params.num_arms)
        zeros = jnp.zeros(shape, jnp.float32)
        return ByzResState(
            s=Total(zeros, zeros),
            n=jnp.zeros(shape, jnp.int32),
            z=zeros,
            g=zeros,
            accepted=jnp.zeros(shape, jnp.int32),
            comm_done=jnp.zeros((), bool),
        )

    def payload(self, state: ByzResState) -> jnp.ndarray:
        """What every agent sends: ``[xbar (M), n (M)]`` (N, 2M), xbar = 0 on unpulled arms."""
        return payload(state.s.total - state.s.carry, state.n.astype(jnp.float32))

    def _choose(self, key: jax.Array, state: ByzResState, obs: Observation, t: jnp.ndarray,
                params: ByzResParams):  # fmt: skip
        """Steps 1-4 of round t from the messages delivered in the last step: the fused z, g,
        ``|A|`` and the arm of largest Q (ties uniform, or the lowest id). Twice: state
        handling only (compensated float32 sums here, numpy's float64 state mutated there);
        the steps are :mod:`agents.byzres_fusion`'s ``fuse`` and ``index``."""
        cfg, M = params.config, params.num_arms
        n = state.n
        xbar = (state.s.total - state.s.carry) / jnp.maximum(n, 1).astype(jnp.float32)
        if cfg.fusion == "none":
            z, g, size = xbar, jnp.ones_like(xbar), jnp.zeros_like(n)
        else:
            d = obs.deliveries[CHANNEL]
            trimmed = cfg.fusion == "trimmed"
            z, g, size = fuse(
                xbar,
                n,
                d.payload[..., :M],
                d.payload[..., M:],
                d.mask,
                cfg.kappa,
                params.f if trimmed else 0,
                filtered=trimmed,
            )
        q = index(z, g, n, t)
        if cfg.tiebreak == "lowest":
            note_scores(q)
            arms = jnp.argmax(q, axis=1).astype(jnp.int32)
        else:
            u = jax.random.uniform(key, (params.num_agents,), jnp.float32)
            arms = argmax_one_uniform(q, u)
        return arms, z, g, size

    def act(self, key: jax.Array, state: ByzResState, obs: Observation, params: ByzResParams):
        """One env step for every agent: fold in the last pull; during the initialization pull
        arm ``pulls``; with ``sync="comm_step"`` take the round's communication step first;
        else choose by steps 1-4 (:meth:`_choose`) and send ``[xbar, n]`` with the pull
        (``sync="step"``)."""
        cfg, N, M = params.config, params.num_agents, params.num_arms
        pulled = (obs.step > 0) & (obs.phase == PULL)
        hit = (obs.last_arm[:, None] == jnp.arange(M)) & pulled
        s = total_add(state.s, jnp.where(hit, obs.last_reward[:, None], 0.0))
        n = state.n + hit.astype(jnp.int32)
        comm_done = state.comm_done & ~pulled
        state = state._replace(s=s, n=n, comm_done=comm_done)
        pulls = obs.pulls.astype(jnp.int32)
        talking = cfg.fusion != "none"
        init = pulls < M
        comm = talking and cfg.sync == "comm_step"
        in_comm = ~init & ~comm_done if comm else jnp.zeros((), bool)
        arms, z, g, size = self._choose(key, state, obs, pulls - M + 1, params)
        deciding = ~init & ~in_comm
        state = state._replace(
            z=jnp.where(deciding, z, state.z),
            g=jnp.where(deciding, g, state.g),
            accepted=jnp.where(deciding, size, state.accepted),
            comm_done=comm_done | in_comm,
        )
        arms = jnp.where(init, pulls, jnp.where(in_comm, 0, arms)).astype(jnp.int32)
        messages = {}
        if talking:
            send = jnp.ones(N, bool) if cfg.sync == "step" else jnp.broadcast_to(in_comm, (N,))
            messages[CHANNEL] = (send, self.payload(state))
        return Action(arms, messages, ~in_comm), state
