"""DDUCB, decentralized delayed UCB (Martínez-Rubio, Kanade & Rebeschini), registered as ``dducb``.

Decisions and their reasons: docs/dducb.md. N agents on a connected graph, K shared arms, every
agent pulls every step. Each agent keeps, per arm, pairs (reward sum, count) of K-vectors: ``alpha``
(used for decisions, an estimate of the network **average**), ``beta`` (being mixed in the current
stage), ``gamma`` (own samples of this stage) and, accelerated variant only, ``delta`` (accumulated
mixed stages); and a scalar ``s`` (estimate of the network's total pulls).

Gossip matrix: ``P = I - (kappa/d_max) L`` (:func:`fedbandit_env.graphs.consensus_weights`,
``kappa`` default ``d_max/(d_max+1)``). On a d-regular graph this is ``(I + A)/(d+1)``, the
authors' lazy normalised-Laplacian walk (their code); on irregular graphs (grid) the authors use
``I - D^{-1/2} L_norm D^{-1/2}/(d_max+1)``, which differs: we keep the suite's consensus matrix
(its off-diagonal weight is the same on every edge, so each agent only needs the sum of its
neighbours' messages: the aggregating ``neighbors`` delivery, ``reduce="sum"``).
``lambda2 = max_{p>=2} |lambda_p(P)|``.

Stage length ``C``: accelerated ``ceil(ln(2N/eps) / sqrt(2 ln(1/lambda2)))``, unaccelerated
``ceil(ln(N/eps) / ln(1/lambda2))`` (``stage_length="standard"``); ``"small"`` is the code's
C_small (the accelerated formula for both variants, divided by 3 (``ceil`` of the quotient) for
the accelerated one); an int fixes C. At least 1; a graph with ``lambda2 = 0`` (complete graph,
exact averaging in one round) has C = 1.

Init: steps 1..K pull arm k at step k+1 (all agents), ``beta = (rewards, 1)``, ``alpha = beta/N``
(alpha estimates the network average; the authors' code divides by K instead, which is
not followed: docs/dducb.md), ``gamma = delta = 0``, ``t = s = K``.

Per step r = 0..C-1 of a stage (step t, one neighbour exchange per step):

1. ``k* = argmax_k alpha_sum[k]/alpha_cnt[k] + sqrt(2 eta sigma^2 ln s / (N alpha_cnt[k]))``
   (uniform tie-break, one uniform per agent from its ``tiebreak`` stream; an arm whose
   ``alpha_cnt <= 0`` (the Chebyshev polynomial is not a stochastic matrix) has an infinite index);
2. pull k*, get u: ``gamma[k*] += (u, 1)``, ``alpha[k*] += (u/N, 1/N)``, ``s += N`` (one increment
   per agent-pull of the network; per-step arm choice, as the code);
3. each agent sends its current mixing iterate of ``beta`` (2K floats) to every neighbour with the
   arm of step t (the iterate does not depend on the reward of step t, so nothing waits); the
   delivery of step t is mixed before the choice of step t + 1.

Mixing: unaccelerated, ``y_{r+1} = P y_r``; accelerated, the Chebyshev recursion
``y_{r+1} = (2/lambda2) P y_r - y_{r-1}``, ``y_1 = P y_0/lambda2``, normalised by the same
recursion on the scalar 1, so that after C rounds ``beta = T_C(P/lambda2) y_0 / T_C(1/lambda2)``.
We run the recursion on the normalised iterates ``z_r = y_r / T_r(1/lambda2)`` (the same values,
without overflow): ``z_1 = P z_0``, ``z_{r+1} = a_r P z_r - b_r z_{r-1}`` with
``a_r = 2 T_r/(lambda2 T_{r+1})``, ``b_r = T_{r-1}/T_{r+1}``. A dropped message (``drop_prob > 0``,
not in the paper) gives its weight to the receiver's own value.

End of stage (after its C-th step, before the next choice): ``s = (t - C) N`` (t = pulls done).
Accelerated: ``delta += beta_mixed``, ``alpha = delta`` (a copy), ``beta = gamma``, ``gamma = 0``.
Unaccelerated: ``alpha = beta_mixed`` (a copy), ``beta = beta_mixed + gamma``, ``gamma = 0``.
Copies, not the code's aliased references (the aliasing double-counts own data).

Defaults (the authors' code): ``eta = 2``, ``eps = 1/22``, ``sigma = 1``. Not implemented: the
code's whole-operator-per-step mixing. Not checked against the paper's text: one communication round
per step and the per-step (rather than per-stage) arm choice.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from agents.channel_check import check_channel_spec
from agents.field_common import Consensus, consensus_setup, mix
from fedbandit_env.config import EnvConfig
from fedbandit_env.engine import VecObservation
from fedbandit_env.errors import ConfigError
from fedbandit_env.kernels import argmax_one_uniform
from fedbandit_env.policy import (
    MULTI_ARMED,
    FederationFacts,
    TeamAction,
    TeamPolicy,
    require_family,
)
from fedbandit_env.seeding import BatchedRNG
from fedbandit_env.validation import check_flag, check_int, check_real
from fedbandit_env.xp import log_of_round, namespace

AGENT_ID = "dducb"
VERSION = 1  # results version
CHANNEL = "neighbors"
STAGE_LENGTHS = ("standard", "small")


@dataclass(frozen=True)
class DDUCBConfig:
    """Hyperparameters of DDUCB (defaults from the authors' code): ``accelerated`` (Chebyshev
    mixing or plain powers of P), ``eta`` (> 0) and ``sigma`` (> 0) of the index width, ``eps``
    (in (0, 1)) the target accuracy of a stage's mixing, ``stage_length`` (``"standard"``,
    ``"small"`` or an int >= 1: the rule for C) and ``kappa`` (in (0, 1], None:
    ``d_max/(d_max+1)``) of the gossip matrix."""

    accelerated: bool = True
    eta: float = 2.0
    eps: float = 1.0 / 22.0
    sigma: float = 1.0
    stage_length: Any = "standard"
    kappa: float | None = None

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "accelerated", check_flag("accelerated", self.accelerated, where=AGENT_ID)
        )
        for name in ("eta", "sigma"):
            value = check_real(name, getattr(self, name), low=0.0, low_open=True, where=AGENT_ID)
            object.__setattr__(self, name, value)
        eps = check_real(
            "eps", self.eps, low=0.0, low_open=True, high=1.0, high_open=True, where=AGENT_ID
        )
        object.__setattr__(self, "eps", eps)
        if isinstance(self.stage_length, str):
            if self.stage_length not in STAGE_LENGTHS:
                raise ConfigError(
                    f"{AGENT_ID}: stage_length: expected 'standard', 'small' or an int >= 1, "
                    f"got {self.stage_length!r}"
                )
        else:
            c = check_int("stage_length", self.stage_length, minimum=1, where=AGENT_ID)
            object.__setattr__(self, "stage_length", int(c))
        if self.kappa is not None:
            kappa = check_real(
                "kappa",
                self.kappa,
                low=0.0,
                low_open=True,
                high=1.0,
                hint="or None: d_max/(d_max+1)",
                where=AGENT_ID,
            )
            object.__setattr__(self, "kappa", kappa)


def stage_length(
    num_agents: int, lambda2: float, eps: float, accelerated: bool, rule: Any = "standard"
) -> int:
    """The stage length C (module docstring; ``rule`` "standard", "small" or a fixed int); at
    least 1."""
    if not isinstance(rule, str):
        return int(rule)
    if lambda2 <= 1e-12:
        return 1
    accel = math.log(2 * num_agents / eps) / math.sqrt(2.0 * math.log(1.0 / lambda2))
    if rule == "small":
        c = accel / 3.0 if accelerated else accel
    elif accelerated:
        c = accel
    else:
        c = math.log(num_agents / eps) / math.log(1.0 / lambda2)
    return max(1, math.ceil(c))


def chebyshev_coefficients(lambda2: float, rounds: int) -> tuple[np.ndarray, np.ndarray]:
    """``(a_r, b_r)`` for r = 1..rounds-1 of the normalised recursion (module docstring):
    ``z_{r+1} = a_r P z_r - b_r z_{r-1}``. Index 0 is unused (``z_1 = P z_0``)."""
    a = np.zeros(max(rounds, 1))
    b = np.zeros(max(rounds, 1))
    if lambda2 <= 1e-12:
        return a, b
    rho = lambda2  # T_{r-1}/T_r at r = 1: T_0 / T_1 = lambda2
    for r in range(1, rounds):
        ratio = 2.0 / lambda2 - rho  # T_{r+1}/T_r
        a[r] = (2.0 / lambda2) / ratio
        b[r] = rho / ratio
        rho = 1.0 / ratio
    return a, b


def dducb_channel_spec(num_arms: int) -> dict[str, dict[str, Any]]:
    """``neighbors`` of dim 2K (the K sums, then the K counts of the iterate) with the
    aggregating ``sum`` delivery."""
    return {CHANNEL: {"kind": "neighbors", "dim": 2 * num_arms, "reduce": "sum"}}


@dataclass(frozen=True, eq=False)
class DDUCBParams:
    """What DDUCB reads at run time on one federation: N, K, the gossip matrix ``P = I -
    (kappa/d_max) L`` with its ``lambda2`` (:class:`~agents.field_common.Consensus`), the stage
    length C, the normalised Chebyshev coefficients ``a``, ``b`` (C,) float64
    (:func:`chebyshev_coefficients`; index 0 unused), the index's factor ``bonus = 2 eta sigma^2
    / N`` and the configuration."""

    num_agents: int
    num_arms: int
    consensus: Consensus
    stage_length: int
    a: np.ndarray
    b: np.ndarray
    bonus: float
    config: DDUCBConfig


def dducb_params(config: DDUCBConfig, facts: FederationFacts) -> DDUCBParams:
    """The :class:`DDUCBParams` of a validated configuration on a federation; checks the
    family, the channel, a horizon longer than K and a connected graph (with ``kappa``: the
    consensus). Pure: the numpy ``reset`` and the JAX ``make_params`` call it."""
    require_family(AGENT_ID, facts, MULTI_ARMED)
    N, K = facts.num_agents, facts.num_arms
    check_channel_spec(AGENT_ID, dducb_channel_spec(K), facts)
    if facts.horizon <= K:
        raise ConfigError(
            f"{AGENT_ID}: horizon: expected more than K = {K} steps (the initialization "
            f"pulls every arm once), got {facts.horizon}"
        )
    consensus = consensus_setup(AGENT_ID, facts, config.kappa)
    lam = consensus.lambda2
    C = stage_length(N, lam, config.eps, config.accelerated, config.stage_length)
    a, b = chebyshev_coefficients(lam, C)
    bonus = 2.0 * config.eta * config.sigma**2 / N
    return DDUCBParams(N, K, consensus, C, a, b, bonus, config)


def dducb_index(alpha: Any, s: Any, bonus: float, num_arms: int) -> Any:
    """Step 1 of the module docstring, the UCB on the gossiped averages ``alpha`` (..., 2K):
    ``alpha_sum/alpha_cnt + sqrt(2 eta sigma^2 ln s / (N alpha_cnt))`` (``bonus = 2 eta
    sigma^2 / N``, ``ln max(s, 1)``); an arm with ``alpha_cnt <= 0`` (the Chebyshev polynomial
    is not a stochastic matrix) has an infinite index. One function for both engines: numpy's
    ``s`` is one Python number for the batch (float64), JAX's an int32 scalar (float32)."""
    xp = namespace(alpha, s)
    K = num_arms
    sums, cnt = alpha[..., :K], alpha[..., K:]
    ok = cnt > 0
    safe = xp.where(ok, cnt, 1.0)
    value = sums / safe + xp.sqrt(bonus * log_of_round(xp, s) / safe)
    return xp.where(ok, value, xp.inf)


@dataclass
class DDUCBState:
    """What one DDUCB agent carries from step to step (batched: arrays (B, N, 2K), each the K
    reward sums then the K counts): ``alpha`` (used for decisions), ``beta`` (the stage's
    starting value y_0), ``gamma`` (own samples of the stage), ``delta`` (accumulated mixed
    stages, accelerated only), the mixing iterates ``z`` (z_r, what is sent) and ``z_prev``
    (z_{r-1}), ``r`` (mixing rounds done in the stage), ``s`` (estimate of the network's total
    pulls), ``pulls`` (pulls done) and ``sent_last`` (the last arm went out with an iterate)."""

    alpha: np.ndarray
    beta: np.ndarray
    gamma: np.ndarray
    delta: np.ndarray
    z: np.ndarray
    z_prev: np.ndarray
    r: int
    s: float
    pulls: int
    sent_last: bool

    @classmethod
    def initial(cls, shape: tuple[int, int, int], num_arms: int) -> DDUCBState:
        """Zeros before the initialization; ``s = K``."""
        zeros = [np.zeros(shape) for _ in range(6)]
        return cls(*zeros, r=0, s=float(num_arms), pulls=0, sent_last=False)


class DDUCB(TeamPolicy):
    """Batched DDUCB over B runs and N agents; see the module docstring."""

    agent_id = AGENT_ID
    version = VERSION

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

    def channel_spec(self, config: EnvConfig) -> dict[str, dict[str, Any]]:
        return dducb_channel_spec(config.num_arms)

    def reset(self, facts: FederationFacts, rng: BatchedRNG) -> None:
        """The gossip matrix, the stage length C and its Chebyshev coefficients, and the zero
        state before the initialization (module docstring, "Init"): :func:`dducb_params`,
        which checks the facts."""
        self.params = p = dducb_params(self.config, facts)
        B, N, K = facts.num_runs, facts.num_agents, facts.num_arms
        self.consensus: Consensus = p.consensus
        self.C = p.stage_length
        self._a, self._b = p.a, p.b
        self.N, self.K = N, K
        self.bonus = p.bonus
        self.state = DDUCBState.initial((B, N, 2 * K), K)
        self._rows = np.indices((B, N))
        self._tiebreak = rng.child("tiebreak").buffered("uniform", (N,))
        self._send = np.ones((B, N), dtype=bool)
        self._quiet = np.zeros((B, N), dtype=bool)

    # ------------------------------------------------------------------ updates
    def _fold_in(self, obs: VecObservation) -> None:
        """The reward of the last step: init sample (steps 1..K) or ``gamma``/``alpha``/``s``."""
        st = self.state
        b, i = self._rows
        arm, u = obs.last_arm, obs.last_reward
        K, N = self.K, self.N
        if st.pulls <= K:
            st.beta[b, i, arm] = u
            st.beta[b, i, K + arm] = 1.0
            if st.pulls == K:  # init done: alpha = beta / N, the first stage starts
                st.alpha = st.beta / N
                st.z = st.beta.copy()
            return
        st.gamma[b, i, arm] += u
        st.gamma[b, i, K + arm] += 1.0
        st.alpha[b, i, arm] += u / N
        st.alpha[b, i, K + arm] += 1.0 / N
        st.s += N

    def _mix(self, obs: VecObservation) -> None:
        """One exchange of the current iterate (sent at the last step), then, after C rounds,
        the end of the stage."""
        st = self.state
        pz = mix(self.consensus, st.z, obs.deliveries[CHANNEL])
        if self.config.accelerated and st.r >= 1:
            new = self._a[st.r] * pz - self._b[st.r] * st.z_prev
        else:
            new = pz
        st.z_prev, st.z = st.z, new
        st.r += 1
        if st.r < self.C:
            return
        st.s = float((st.pulls - self.C) * self.N)
        if self.config.accelerated:
            st.delta += st.z
            st.alpha = st.delta.copy()
            st.beta = st.gamma
        else:
            st.alpha = st.z.copy()
            st.beta = st.z + st.gamma
        st.gamma = np.zeros_like(st.gamma)
        st.z = st.beta.copy()
        st.z_prev = np.zeros_like(st.z)
        st.r = 0

    def index(self) -> np.ndarray:
        """The DDUCB index (B, N, K) from ``alpha`` and ``s`` (:func:`dducb_index`)."""
        return dducb_index(self.state.alpha, self.state.s, self.bonus, self.K)

    def act(self, obs: VecObservation) -> TeamAction:
        """Fold in the last reward, mix the iterate sent with it (one round), then choose: arm
        t-1 during the initialization, else the argmax of the index (steps 1-3)."""
        st = self.state
        K = self.K
        if obs.step > 0:
            st.pulls += 1
            mixing = st.sent_last  # the iterate went out with the last arm
            self._fold_in(obs)
            if mixing:
                self._mix(obs)
        if st.pulls < K:
            arms = np.full(self._send.shape, st.pulls, dtype=np.int64)
            st.sent_last = False
            return TeamAction(arms, {CHANNEL: (self._quiet, st.z)})
        arms = argmax_one_uniform(self.index(), self._tiebreak.next())
        st.sent_last = True
        return TeamAction(arms, {CHANNEL: (self._send, st.z.copy())})
