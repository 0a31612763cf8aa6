"""coop-UCB2 (Landgren, Srivastava & Leonard), running-consensus UCB, registered as ``coop_ucb2``.

Decisions and their reasons: docs/coop-ucb2.md. N agents on a connected graph, K shared arms. Agent
i keeps, per arm k, ``nhat_i[k]`` and ``shat_i[k]``: its estimates of the per-agent average pull
count and reward sum.

Consensus matrix ``P = I - (kappa/d_max) L`` (:func:`fedbandit_env.graphs.consensus_weights`),
``kappa = 0.5`` by default (the paper's ``d_max/(d_max-1) > 1`` is not a valid step
size). Its off-diagonal weight is the same on every edge, so an agent needs only the sum of its
neighbours' messages (the aggregating ``neighbors`` delivery, ``reduce="sum"``, 2K floats per
directed edge per round).

Round t (t = 1..T, the environment's horizon counts pulls), "communicate, then pull" with a
communication step (docs/writing-agents.md, "Communication steps"):

1. communication step (rounds t >= 2): each agent sends ``(nhat_i + xi_i, shat_i + r_i xi_i)``,
   ``xi_i[k] = 1[agent i pulled k in round t-1]``, ``r_i`` its reward (``xi`` is reset every round,
   unlike the vip-mab copy, which keeps it), and applies row i of P to what it sent and received:
   ``nhat <- P (nhat + xi)``, ``shat <- P (shat + r xi)`` (a dropped message, not in the paper,
   gives its weight to the receiver);
2. pull: rounds 1..K pull arm t-1 (every agent samples each arm once; the consensus runs from
   round 2 on with zero initial state, so ``nhat == 1`` at round K+1); from round K+1 on, the arm
   of maximal

       Q_i[k] = shat/nhat + sigma sqrt(c0 (nhat + f(t)) / (N nhat) * ln(max(t, 2)) / nhat),
       f(t) = sqrt(ln(max(t, 2))),  c0 = 2 gamma / G(eta),  G(eta) = 1 - eta^2/16,

   uniform tie-break (one uniform per agent from its ``tiebreak`` stream).

A run takes 2T - 1 engine steps. Defaults: ``gamma = 2`` (the paper needs
``gamma > 1``), ``eta = 2`` (G = 0.75, the numba copy; ``eta = 0`` is the vip-mab form without G),
``sigma = 1``, ``kappa = 0.5``; ``ln(max(t, 2))`` avoids ``ln 1 = 0``. The original coop-UCB
(ECC'16, a graph constant instead of ``f(t)``) is not this id: ``dp_dec_ucb`` with
``epsilon = inf`` runs it. Not checked against the paper's text: ``gamma > 1`` and
``kappa in (0, 1]``; the index form and the consensus were read in third-party code only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from agents.channel_check import check_channel_spec
from agents.field_common import Consensus, consensus_setup, mix
from fedbandit_env.config import EnvConfig
from fedbandit_env.engine import COMMUNICATION, VecObservation
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
from fedbandit_env.validation import check_real

AGENT_ID = "coop_ucb2"
VERSION = 2  # results version; 2: +inf index where nhat <= 0 (was NaN under attacks)
CHANNEL = "neighbors"


@dataclass(frozen=True)
class CoopUCB2Config:
    """Hyperparameters of coop-UCB2: ``gamma`` (> 0) and ``eta`` (in [0, 4)) give the exploration
    constant ``c0 = 2 gamma / G(eta)``; ``sigma`` (> 0) scales the width; ``kappa`` (in (0, 1])
    is the consensus step of ``P = I - (kappa/d_max) L``."""

    gamma: float = 2.0
    eta: float = 2.0
    sigma: float = 1.0
    kappa: float = 0.5

    def __post_init__(self) -> None:
        gamma = check_real("gamma", self.gamma, low=0.0, low_open=True, where=AGENT_ID)
        eta = check_real(
            "eta",
            self.eta,
            low=0.0,
            high=4.0,
            high_open=True,
            hint="G(eta) = 1 - eta^2/16 must be positive",
            where=AGENT_ID,
        )
        sigma = check_real("sigma", self.sigma, low=0.0, low_open=True, where=AGENT_ID)
        kappa = check_real("kappa", self.kappa, low=0.0, low_open=True, high=1.0, where=AGENT_ID)
        for name, value in (("gamma", gamma), ("eta", eta), ("sigma", sigma), ("kappa", kappa)):
            object.__setattr__(self, name, value)

    @property
    def c0(self) -> float:
        """``2 gamma / G(eta)``."""
        return 2.0 * self.gamma / (1.0 - self.eta**2 / 16.0)


def coop_channel_spec(num_arms: int) -> dict[str, dict[str, Any]]:
    """``neighbors`` of dim 2K with the aggregating ``sum`` delivery."""
    return {CHANNEL: {"kind": "neighbors", "dim": 2 * num_arms, "reduce": "sum"}}


@dataclass(frozen=True)
class CoopParams:
    """What coop-UCB2 reads at run time on one federation: N, K, the consensus matrix ``P =
    I - (kappa/d_max) L`` of the topology (:class:`~agents.field_common.Consensus`) and the
    configuration."""

    num_agents: int
    num_arms: int
    consensus: Consensus
    config: CoopUCB2Config


def coop_params(config: CoopUCB2Config, facts: FederationFacts) -> CoopParams:
    """The :class:`CoopParams` of a validated configuration on a federation; checks the family,
    the channel, a horizon longer than K and a connected graph (the consensus). Pure: the
    numpy ``reset`` and the JAX ``make_params`` call it."""
    require_family(AGENT_ID, facts, MULTI_ARMED)
    K = facts.num_arms
    check_channel_spec(AGENT_ID, coop_channel_spec(K), facts)
    if facts.horizon <= K:
        raise ConfigError(
            f"{AGENT_ID}: horizon: expected more than K = {K} rounds (the initialization "
            f"pulls every arm once), got {facts.horizon}"
        )
    consensus = consensus_setup(AGENT_ID, facts, config.kappa)
    return CoopParams(facts.num_agents, K, consensus, config)


class CoopUCB2(TeamPolicy):
    """Batched coop-UCB2 over B runs and N agents; see the module docstring."""

    agent_id = AGENT_ID
    version = VERSION

    def __init__(
        self, gamma: float = 2.0, eta: float = 2.0, sigma: float = 1.0, kappa: float = 0.5
    ):
        self.config = CoopUCB2Config(gamma, eta, sigma, kappa)

    def channel_spec(self, config: EnvConfig) -> dict[str, dict[str, Any]]:
        return coop_channel_spec(config.num_arms)

    def reset(self, facts: FederationFacts, rng: BatchedRNG) -> None:
        """Zero consensus state (the initial rounds then leave ``nhat == 1`` at round K+1) and
        the consensus matrix ``P = I - (kappa/d_max) L`` of the topology."""
        self.params = coop_params(self.config, facts)  # checks the facts
        B, N, K = facts.num_runs, facts.num_agents, facts.num_arms
        self.consensus: Consensus = self.params.consensus
        self.N, self.K = N, K
        self.state = np.zeros((B, N, 2 * K))  # [nhat (K), shat (K)]
        self.outgoing = np.zeros((B, N, 2 * K))
        self._rows = np.indices((B, N))
        self._tiebreak = rng.child("tiebreak").buffered("uniform", (N,))
        self._send = np.ones((B, N), dtype=bool)
        self._quiet = np.zeros((B, N), dtype=bool)
        self._talk = np.zeros(B, dtype=bool)
        self._idle = np.zeros((B, N), dtype=np.int64)

    @property
    def nhat(self) -> np.ndarray:
        """``nhat_i[k]`` (B, N, K): the estimate of the per-agent average pull count."""
        return self.state[..., : self.K]

    @property
    def shat(self) -> np.ndarray:
        """``shat_i[k]`` (B, N, K): the estimate of the per-agent average reward sum."""
        return self.state[..., self.K :]

    def index(self, t: int) -> np.ndarray:
        """``Q`` (B, N, K) of round ``t`` (module docstring). Guard (docs/coop-ucb2.md,
        "Non-positive count estimates"): an arm whose count estimate ``nhat`` is not positive
        (only an attack drives the consensus of positive counts there) has +inf, the index of
        an arm without a sample, instead of the square root of a negative width (NaN)."""
        cfg = self.config
        positive = self.nhat > 0
        n = np.where(positive, self.nhat, 1.0)
        log_t = math.log(max(t, 2))
        width = cfg.c0 * (n + math.sqrt(log_t)) / (self.N * n) * log_t / n
        return np.where(positive, self.shat / n + cfg.sigma * np.sqrt(width), np.inf)

    def _choose(self, t: int) -> np.ndarray:
        """Step 2 of the module docstring: arm t-1 in the initial rounds, then the argmax of Q."""
        if t <= self.K:
            return np.full(self._idle.shape, t - 1, dtype=np.int64)
        return argmax_one_uniform(self.index(t), self._tiebreak.next())

    def act(self, obs: VecObservation) -> TeamAction:
        """One engine step of round t: after a pull, send ``(nhat + xi, shat + r xi)`` in a
        communication step; when the messages arrive, apply row i of P (step 1) and pull."""
        t = int(obs.pulls[0]) + 1  # the round whose arm is chosen (all runs share the schedule)
        if obs.step == 0:
            return TeamAction(self._choose(t), {CHANNEL: (self._quiet, self.outgoing)})
        if obs.phase[0] == COMMUNICATION:  # the round's consensus messages arrived: mix, pull
            self.state = mix(self.consensus, self.outgoing, obs.deliveries[CHANNEL])
            return TeamAction(self._choose(t), {CHANNEL: (self._quiet, self.outgoing)})
        b, i = self._rows  # after a pull: send (nhat + xi, shat + r xi) in a communication step
        K = self.K
        self.outgoing = self.state.copy()
        self.outgoing[b, i, obs.last_arm] += 1.0
        self.outgoing[b, i, K + obs.last_arm] += obs.last_reward
        return TeamAction(self._idle, {CHANNEL: (self._send, self.outgoing)}, self._talk)
