"""DP-Decentralized UCB (Li, Song & Fragouli, Algorithm 2), registered as ``dp_dec_ucb``.

Decisions and their reasons: docs/dp-recsys.md.

Running consensus over the ``neighbors`` channel (dim 2K, aggregating ``reduce="sum"`` delivery;
a padded channel gives the same numbers) with ``P = I - (kappa/d_max) L`` (the paper's Eq. (4);
``kappa`` defaults to ``d_max/(d_max+1)``). Agent i keeps, per arm j, the consensus
count ``nhat_ij`` and the consensus private sum ``shat_ij`` and, each step, sends
``(nhat_i + xi_i, shat_i + ds_i)`` to its neighbours, where ``xi_ij = 1[last arm = j]`` and
``ds_ij`` is the increment of its hybrid counter of arm j (Algorithm 2 lines 12 and 16, with the
private sums mixed as ``P (shat + ds)``: line 16 alone would never add the new rewards). From what
it receives it applies row i of ``P``:

    nhat_i <- P_ii (nhat_i + xi_i) + sum_{k in N(i)} P_ik (nhat_k + xi_k)      (same for shat)

and plays the argmax (uniform random tie-break: one uniform per agent and step from its own
``tiebreak`` stream picks among the tied arms) of

    I_ij = shat_ij/nhat_ij + sigma sqrt(2 rho (nhat_ij + c_i)/(M nhat_ij) ln t / nhat_ij)
           + upsilon(nhat_ij)/nhat_ij,   upsilon(n) = (1/eps)(ln 2 + rho ln T) ln^{1.5} max(n, 1)

(Algorithm 2 lines 14 and 19; ``delta = T^-rho / 2`` with T the environment's horizon or
``delta_horizon``; ``sigma = index_sigma``, default 1 as the pseudocode; ``c_i`` from
:mod:`agents.graph_constants`, Lemma 2, chosen by ``ci_mode``). ``epsilon = inf`` gives the
non-private coop-UCB. Privacy: pure epsilon-DP per agent (docs/dp-recsys.md, "Privacy"); counts
travel in the clear.

Timing (``timing``, docs/writing-agents.md, "Communication steps"). ``"paper"`` (the default)
runs Algorithm 2 as written: every round t is a communication step (each agent sends
``(nhat_i + xi_i, shat_i + ds_i)`` with the increments of its pull of round t-1, and mixes what it
receives) followed by the pull of round t, chosen from the mixed values; a run takes 2T engine
steps. Rounds 1..K pull arms 0..K-1 (consensus from round 1 with zero state); from round
K+1 on ``nhat >= 1`` and the index is used. The invariants of the consensus hold as written
(``nhat == 1`` at round K+1; column sums equal the network's counts and private sums of rounds 1..t-1).

``"latency"`` sends the values with the pulls: the mixing done before choosing the arm of step
t + 1 uses the values every agent sent at step t, so the recursion runs one step late: the
estimates used at step t are the paper's ``nhat(t-1)``, ``shat(t-1)`` (pulls of steps 1..t-2);
step K+1 repeats arm 0 (the K-th pull has not been mixed yet) and from step K+2 on the index is
used (invariants shifted by that step). Under both, a dropped message (``drop_prob > 0``, not in
the paper) gives its weight to the receiver's own value, so rows stay stochastic.
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
    check_positive,
    make_running_sums,
    privacy_width,
    timed,
)
from agents.field_common import Consensus, consensus_setup, mix
from agents.graph_constants import CI_MODES, GraphConstants, graph_constants
from fedbandit_env.config import EnvConfig
from fedbandit_env.engine import COMMUNICATION, VecObservation
from fedbandit_env.errors import ConfigError
from fedbandit_env.kernels import argmax_one_uniform
from fedbandit_env.policy import FederationFacts, TeamAction, TeamPolicy, check_timing
from fedbandit_env.seeding import BatchedRNG
from fedbandit_env.validation import check_real
from fedbandit_env.xp import log_of_round, namespace

AGENT_ID = "dp_dec_ucb"
VERSION = 5  # results version (docs/bench.md); 5: +inf index where nhat <= 0
CHANNEL = "neighbors"


@dataclass(frozen=True)
class DPDecentralizedConfig:
    """Hyperparameters of DP-Dec-UCB: ``epsilon`` (> 0, ``inf``: non-private); ``rho`` (> 1, the
    exploration parameter of Algorithm 2 line 19); ``kappa`` (in (0, 1], None: ``d_max/(d_max+1)``)
    of Eq. (4); ``index_sigma`` (> 0) the sigma of the index; ``clip`` the counters' input range;
    ``ci_mode`` (``"per_agent"`` or ``"max"``) of the Lemma 2 constants; ``delta_horizon`` the T
    of ``delta = T^-rho / 2`` (None: the environment's horizon); ``timing``."""

    epsilon: float = 2.0
    rho: float = 2.0
    kappa: float | None = None
    index_sigma: float = 1.0
    clip: tuple[float, float] = (0.0, 1.0)
    ci_mode: str = "per_agent"
    delta_horizon: int | None = None
    timing: str = "paper"

    def __post_init__(self) -> None:
        check_timing(AGENT_ID, self.timing)
        object.__setattr__(self, "epsilon", check_epsilon(AGENT_ID, self.epsilon))
        rho = check_real(
            "rho",
            self.rho,
            hint="the regret bound needs rho > 1",
            low=1.0,
            low_open=True,
            where=AGENT_ID,
        )
        object.__setattr__(self, "rho", rho)
        if self.kappa is not None:
            kappa = check_real(
                "kappa",
                self.kappa,
                hint="or None: d_max/(d_max+1)",
                low=0.0,
                low_open=True,
                high=1.0,
                where=AGENT_ID,
            )
            object.__setattr__(self, "kappa", kappa)
        check_positive(AGENT_ID, "index_sigma", self.index_sigma)
        object.__setattr__(self, "clip", check_clip(AGENT_ID, self.clip))
        if not isinstance(self.ci_mode, str) or self.ci_mode not in CI_MODES:
            raise ConfigError(
                f"{AGENT_ID}: ci_mode: expected one of {CI_MODES}, got {self.ci_mode!r}"
            )
        object.__setattr__(self, "delta_horizon", check_delta_horizon(AGENT_ID, self.delta_horizon))


def dec_channel_spec(num_arms: int) -> dict[str, dict[str, Any]]:
    """``neighbors`` of dim 2K with the aggregating ``sum`` delivery: the sum over the neighbours
    that sent is all the mixing needs (a padded channel works too and gives the same numbers,
    agents/field_common.py)."""
    return {CHANNEL: {"kind": "neighbors", "dim": 2 * num_arms, "reduce": "sum"}}


@dataclass(frozen=True)
class DPDecentralizedParams:
    """What DP-Dec-UCB reads at run time on one federation: N (the paper's M), K, the horizon T
    (the counters' capacity), the consensus matrix of Eq. (4)
    (:class:`~agents.field_common.Consensus`), the Lemma 2 constants of ``P``
    (:class:`~agents.graph_constants.GraphConstants`) and the ``c`` (N,) of the index (per agent,
    or their maximum under ``ci_mode="max"``), ``ln(1/delta)`` with ``delta = T^-rho / 2`` (T:
    ``delta_horizon`` or the horizon) and the configuration."""

    num_agents: int
    num_arms: int
    horizon: int
    consensus: Consensus
    constants: GraphConstants
    c: np.ndarray
    ln_inv_delta: float
    config: DPDecentralizedConfig


def dp_dec_params(config: DPDecentralizedConfig, facts: FederationFacts) -> DPDecentralizedParams:
    """The :class:`DPDecentralizedParams` of a validated configuration on a federation; checks
    the family, a horizon longer than the initialization, the ``neighbors`` channel and the
    graph (connected, a mixing spectrum below 1). Pure: the numpy ``reset`` and the JAX
    ``make_params`` call it."""
    N, K = facts.num_agents, facts.num_arms
    check_facts(AGENT_ID, facts, init_steps=K + (0 if config.timing == "paper" else 1))
    check_channel_spec(AGENT_ID, dec_channel_spec(K), facts)
    consensus = consensus_setup(AGENT_ID, facts, config.kappa)
    constants = graph_constants(consensus.P, kappa=consensus.kappa)
    c = np.full(N, constants.c.max()) if config.ci_mode == "max" else constants.c.copy()
    horizon = config.delta_horizon or facts.horizon
    ln_inv_delta = math.log(2.0) + config.rho * math.log(horizon)  # delta = T^-rho/2
    return DPDecentralizedParams(N, K, facts.horizon, consensus, constants, c, ln_inv_delta, config)


def consensus_round(consensus: Any, outgoing: Any, delivery: Any, num_arms: int):
    """Row i of P applied to agent i's own last message ``outgoing`` (..., N, 2K) and its
    neighbours' (Algorithm 2 lines 12 and 16; :func:`agents.field_common.mix`): ``P_ii`` times
    its own plus ``kappa/d_max`` times the sum of what arrived; a lost message's weight goes to
    the receiver's own value. Returns the new ``(nhat, shat)``, each (..., N, K). Both engines
    call it (``consensus`` a :class:`~agents.field_common.Consensus`, or its float32
    ``Mixing`` on JAX)."""
    mixed = mix(consensus, outgoing, delivery)
    return mixed[..., :num_arms], mixed[..., num_arms:]


def dec_index(nhat: Any, shat: Any, t: Any, c: Any, params: DPDecentralizedParams) -> Any:
    """The DP-Dec-UCB index (..., N, K) at step ``t`` (Algorithm 2 lines 14 and 19) from the
    consensus state ``nhat``, ``shat`` and the Lemma 2 constants ``c`` (N,) in the engine's
    dtype. Guard (docs/dp-recsys.md, "Non-positive count estimates"): ``nhat <= 0`` happens
    only under an attack (or, on JAX, in the initialization, where the index is not used);
    such an arm has +inf, the index of an arm without a sample, not NaN. Both engines call it."""
    xp = namespace(nhat, shat)
    cfg = params.config
    positive = nhat > 0
    n = xp.where(positive, nhat, 1.0)
    spread = (n + c[:, None]) / (params.num_agents * n)
    width = cfg.index_sigma * xp.sqrt(2.0 * cfg.rho * spread * log_of_round(xp, t) / n)
    index = shat / n + width + privacy_width(n, cfg.epsilon, params.ln_inv_delta)
    return xp.where(positive, index, xp.inf)


class DPDecentralizedUCB(TeamPolicy):
    """Batched DP-Dec-UCB over B runs and N (the paper's M) agents; see the module docstring."""

    agent_id = AGENT_ID
    version = VERSION

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

    def channel_spec(self, config: EnvConfig):
        return dec_channel_spec(config.num_arms)

    # ---------------------------------------------------------------------------- reset
    def reset(self, facts: FederationFacts, rng: BatchedRNG) -> None:
        """Algorithm 2 lines 1-3: zero consensus state, one mechanism ``H_ij`` per agent and arm,
        the consensus matrix of Eq. (4) and the Lemma 2 constants ``c_i`` (:func:`dp_dec_params`)."""
        cfg = self.config
        self.params = p = dp_dec_params(cfg, facts)  # checks the facts
        self.paper = cfg.timing == "paper"
        self.consensus = p.consensus
        self.kappa, self.P = self.consensus.kappa, self.consensus.P
        self.constants = p.constants
        B, N, K = facts.num_runs, facts.num_agents, facts.num_arms
        self.c = p.c
        self.num_agents, self.num_arms = N, K
        self.ln_inv_delta = p.ln_inv_delta
        self.sums = make_running_sums(
            cfg.epsilon, (B, N, K), cfg.clip, rng.child("privacy"), facts.horizon
        )
        self._tiebreak = rng.child("tiebreak").buffered("uniform", (N,))  # one per agent
        self._b, self._i = np.indices((B, N))
        rows = np.arange(B * N, dtype=np.int64).reshape(B, N)
        self._row, self._out_row = rows * K, rows * (2 * K)  # flat (b, i, 0) of the two layouts
        self.nhat = np.zeros((B, N, K))
        self.shat = np.zeros((B, N, K))
        self.outgoing = np.zeros((B, N, 2 * K))  # (nhat + xi, shat + ds) sent with the last arm
        self._send = np.ones((B, N), dtype=bool)
        self._quiet = np.zeros((B, N), dtype=bool)
        self._talk = np.zeros(B, dtype=bool)  # the pull flag of a communication step
        self._no_arms = np.zeros((B, N), dtype=np.int64)

    # ------------------------------------------------------------------------------ act
    def _mix(self, obs: VecObservation) -> None:
        """Row i of P applied to agent i's own last message and its neighbours' (Algorithm 2
        lines 12 and 16):
        ``P_ii`` times its own plus ``kappa/d_max`` times the sum of what arrived (every edge
        of ``P`` has that weight); a lost message's weight goes to the receiver's own value."""
        self.nhat, self.shat = consensus_round(
            self.consensus, self.outgoing, obs.deliveries[CHANNEL], self.num_arms
        )

    def _fold_in_reward(self, obs: VecObservation) -> None:
        """Own pull of the last step: ``xi`` and the counter increment ``ds`` go out next."""
        K = self.num_arms
        out = np.concatenate([self.nhat, self.shat], axis=2)  # a fresh array, sent as it is
        if obs.step > 0:  # every agent pulled: xi = 1 and ds at its arm's two slots
            arm = obs.last_arm
            flat = (self._row + arm).reshape(-1)  # (b, i, arm) of the (B, N, K) counters
            before = self.sums.value.reshape(-1)[flat]
            after = self.sums.insert_flat(flat, obs.last_reward.reshape(-1), True)
            at = (self._out_row + arm).reshape(-1)  # (b, i, arm) of the (B, N, 2K) message
            sent = out.reshape(-1)
            sent[at] += 1.0
            sent[at + K] += after - before
        self.outgoing = out

    def index(self, t: int) -> np.ndarray:
        """The DP-Dec-UCB index (B, N, K) at step ``t`` from the consensus state
        (Algorithm 2 lines 14 and 19; :func:`dec_index`)."""
        return dec_index(self.nhat, self.shat, t, self.c, self.params)

    def act(self, obs: VecObservation) -> TeamAction:
        """One engine step under the configured ``timing`` (module docstring)."""
        return timed(self.config.timing, self._act_paper, self._act_latency)(obs)

    def _choose(self, t: int) -> np.ndarray:
        """Algorithm 2 lines 6-7 (arm t-1 in the initial rounds), else line 20: the argmax of
        the index of line 19."""
        if t <= self.num_arms:
            return np.full(self._b.shape, t - 1, dtype=np.int64)
        return argmax_one_uniform(self.index(t), self._tiebreak.next())

    def _act_paper(self, obs: VecObservation) -> TeamAction:
        """Algorithm 2 as written: round t = a communication step (send, then mix) and the pull of
        round t. All runs share the schedule, so they take their communication steps together."""
        if obs.phase[0] == COMMUNICATION:  # the round's messages arrived: mix, then pull
            self._mix(obs)
            arms = self._choose(int(obs.pulls[0]) + 1)
            return TeamAction(arms, {CHANNEL: (self._quiet, self.outgoing)})
        self._fold_in_reward(obs)  # the increments of the last pull go out (zero at reset)
        return TeamAction(self._no_arms, {CHANNEL: (self._send, self.outgoing)}, self._talk)

    def _act_latency(self, obs: VecObservation) -> TeamAction:
        """Algorithm 2 with the messages sent with the pulls: mix what arrived, fold in the
        last reward, choose (module docstring, "latency")."""
        t = obs.step + 1
        K = self.num_arms
        self._mix(obs)
        self._fold_in_reward(obs)
        if t <= K + 1:
            arms = np.full(self._b.shape, (t - 1) % K, dtype=np.int64)
        else:
            arms = argmax_one_uniform(self.index(t), self._tiebreak.next())
        return TeamAction(arms, {CHANNEL: (self._send, self.outgoing)})
