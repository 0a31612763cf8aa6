"""ByzRes-UCB, Byzantine-resilient decentralized UCB (Zhu, Koppel, Velasquez & Liu, TMLR), ``byzres_ucb``.

Zhu, Koppel, Velasquez & Liu, "Byzantine-Resilient Decentralized Multi-Armed Bandits" (TMLR;
arXiv 2310.07320). The rules below are those of the authors' MATLAB code (``dist_TMLR.m``, the
experiment in ``test_TMLR.m``); every decision where the code is broken or silent is in
docs/byzres-ucb.md. N agents on a graph play the same M arms (homogeneous family). Every round an
honest agent i sends its local sample means and pull counts ``[xbar_i (M), n_i (M)]`` (2M floats)
to every neighbour over a ``neighbors`` channel with per-neighbour delivery (``reduce=None``: the
filter below depends on the receiver's own counts, so no sender-side reduction can express it).

Init: every agent pulls arm 0, 1, ..., M-1 once (steps 1..M; not rounds of the paper: the
reproduction excludes them from the regret). Then, in round t = 1, 2, ... (t = pulls done - M + 1),
for each arm k, with ``(xhat_h, nhat_h)`` what neighbour h sent:

1. consistency filter ``A = {h : kappa * nhat_h[k] >= n_i[k]}`` (``dist_TMLR.m``: neighbours
   whose count is not far below the receiver's own);
2. if ``|A| <= 2f``: ``z = xbar_i[k]``, ``g = 1`` (UCB1);
3. else drop the f largest and the f smallest ``xhat_h[k]`` of A (values, not senders: equal
   values are interchangeable; the own value is never dropped),
   ``z = (xbar_i[k] + sum of the |A| - 2f kept) / (|A| - 2f + 1)``, ``eta = 1/(|A| - 2f + 1)``,
   ``g = (4 eta^2 + kappa eta + kappa) / 4``;
4. ``Q[k] = z + sqrt(2 g ln t / n_i[k])``; pull ``argmax_k Q`` (ties: uniform from the agent's
   own ``tiebreak`` stream, or the lowest arm id as MATLAB's ``sort`` does, ``tiebreak="lowest"``).

Only xbar and n are sent, never z (``dist_TMLR.m`` fuses the neighbours' ``bar``). The step is
batched over runs, agents and arms: step 3 sorts the (B, N, D, M) gather of the neighbours'
values with the filtered-out slots pushed to +inf, and keeps sorted positions f .. |A| - f - 1.

Timing (``sync``): ``"step"`` (default) sends the state with the step's arm, so the receiver fuses
its neighbours' state of one pull earlier than its own; ``"comm_step"`` takes a
communication-only step before every pull of a round (the code's fusion of the neighbours' latest
values; twice the engine steps, the same messages per round). Ablations (``fusion``): ``"mean"``
is the plain mean over every neighbour heard, no filter and no trimming (the rule above with the
filter off and f = 0; breaks under attack), ``"none"`` is UCB1 with ``sqrt(2 ln t / n)`` and no
communication (the single-agent baseline on the same reward streams).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from agents.byzres_fusion import fuse, index, payload
from agents.channel_check import check_channel_spec
from fedbandit_env.config import EnvConfig
from fedbandit_env.engine import PULL, VecObservation
from fedbandit_env.errors import ConfigError
from fedbandit_env.kernels import ArmTable, argmax_one_uniform
from fedbandit_env.policy import (
    FederationFacts,
    TeamAction,
    TeamPolicy,
    require_family,
)
from fedbandit_env.scores import note_scores
from fedbandit_env.seeding import BatchedRNG
from fedbandit_env.validation import check_int, check_real

AGENT_ID = "byzres_ucb"
VERSION = 2  # results version; 2: f defaults to the environment's declared bound (was 1)
CHANNEL = "neighbors"
TIEBREAKS = ("uniform", "lowest")
SYNCS = ("step", "comm_step")
FUSIONS = ("trimmed", "mean", "none")
FAMILIES = ("homogeneous",)  # every agent's arms have the same means (test_TMLR.m)


def _choice(name: str, value: Any, allowed: tuple[str, ...], meaning: str) -> str:
    if not isinstance(value, str) or value not in allowed:
        shown = ", ".join(repr(a) for a in allowed)
        raise ConfigError(f"{AGENT_ID}: {name}: expected one of {shown} ({meaning}), got {value!r}")
    return value


@dataclass(frozen=True)
class ByzResUCBConfig:
    """Hyperparameters of ByzRes-UCB.

    ``kappa`` (>= 1; 1.5 in ``test_TMLR.m``) of the count filter and the width g; ``f`` (int >= 0)
    the values trimmed at each end, which the paper takes to be the most Byzantine agents in any
    neighbourhood, known to the agents; None (the default) takes the environment's declared
    bound (``FederationFacts.byzantine_bound``: 0 without an adversary; the code's experiment
    passes f = 1, its true count); ``tiebreak`` ``"uniform"`` or ``"lowest"`` (code parity); ``sync``
    ``"step"`` or ``"comm_step"`` (module docstring); ``fusion`` ``"trimmed"`` (the algorithm),
    ``"mean"`` or ``"none"`` (ablations)."""

    TRACED_INTS: ClassVar[tuple[str, ...]] = ("f",)  # a traced argument on JAX (a sweep: 1 compile)

    kappa: float = 1.5
    f: int | None = None
    tiebreak: str = "uniform"
    sync: str = "step"
    fusion: str = "trimmed"

    def __post_init__(self) -> None:
        kappa = check_real(
            "kappa",
            self.kappa,
            low=1.0,
            hint="the filter kappa * n_h >= n_i must accept a neighbour with the same count",
            where=AGENT_ID,
        )
        object.__setattr__(self, "kappa", kappa)
        if self.f is not None:
            f = check_int(
                "f",
                self.f,
                minimum=0,
                hint="the most Byzantine neighbours of an agent, or None (the environment's bound)",
                where=AGENT_ID,
            )
            object.__setattr__(self, "f", int(f))
        _choice("tiebreak", self.tiebreak, TIEBREAKS, "ties uniform, or to the lowest arm id")
        _choice("sync", self.sync, SYNCS, "send with the pull, or a communication step first")
        _choice(
            "fusion",
            self.fusion,
            FUSIONS,
            "trimmed mean; plain-mean and no-communication ablations",
        )


def byzres_channel_spec(config: ByzResUCBConfig, num_arms: int) -> dict[str, Any] | None:
    """``neighbors`` of dim 2M with per-neighbour delivery; none for ``fusion="none"``."""
    if config.fusion == "none":
        return None
    return {CHANNEL: {"kind": "neighbors", "dim": 2 * num_arms}}


@dataclass(frozen=True)
class ByzResParams:
    """What ByzRes-UCB reads at run time on one federation: N, M, the ``f`` it trims with (the
    user's, or the environment's declared bound), its configuration and the row's notes
    (``"f = 1 < 2 Byzantine"``)."""

    TRACED_INTS: ClassVar[tuple[str, ...]] = ("f",)  # only compared with counts: traced on JAX
    REPORT_ONLY: ClassVar[tuple[str, ...]] = ("notes",)  # the row's, never the program's

    num_agents: int
    num_arms: int
    f: int
    config: ByzResUCBConfig
    notes: tuple[str, ...] = ()


def byzres_params(config: ByzResUCBConfig, facts: FederationFacts) -> ByzResParams:
    """The :class:`ByzResParams` of a validated configuration on a federation; refuses a family
    other than homogeneous (the fusion averages other agents' means of the same arm), a missing
    channel, an aggregating ``neighbors`` delivery and a horizon without a round after the
    init. Pure: the numpy ``reset`` and the JAX ``make_params`` call it."""
    require_family(AGENT_ID, facts, FAMILIES)
    M = facts.num_arms
    if config.fusion != "none":
        check_channel_spec(AGENT_ID, byzres_channel_spec(config, M), facts)
        reduce = facts.channels[CHANNEL].get("reduce")
        if reduce is not None:
            raise ConfigError(
                f"{AGENT_ID}: channels.{CHANNEL}.reduce: expected None (per-neighbour "
                f"delivery: the count filter depends on the receiver), got {reduce!r}"
            )
    if facts.horizon <= M:
        raise ConfigError(
            f"{AGENT_ID}: horizon: expected more than M = {M} pulls (the init pulls every "
            f"arm once), got {facts.horizon}"
        )
    f, notes = resolved_f(config, facts)
    return ByzResParams(facts.num_agents, M, f, config, notes)


def resolved_f(config: ByzResUCBConfig, facts: FederationFacts) -> tuple[int, tuple[str, ...]]:
    """The f the agents trim with and the row's notes: the user's f, or the environment's
    declared bound when f is None; a user f below the bound is run as given and noted
    (``"f = 1 < 2 Byzantine"``)."""
    bound = facts.byzantine_bound
    if config.f is None:
        return bound, ()
    if config.fusion == "trimmed" and config.f < bound:
        return config.f, (f"f = {config.f} < {bound} Byzantine",)
    return config.f, ()


@dataclass
class ByzResUCBState:
    """Per (run, agent, arm): ``s`` reward sums and ``n`` pull counts (the code's ``bar`` is
    s / n); the last round's fused estimate ``z``, width factor ``g`` and accepted-set size
    ``accepted`` (diagnostics); ``pulls`` folded in so far; ``comm_done`` (sync="comm_step"):
    this round's communication step has been taken."""

    s: np.ndarray
    n: np.ndarray
    z: np.ndarray
    g: np.ndarray
    accepted: np.ndarray
    pulls: int = 0
    comm_done: bool = False


class ByzResUCB(TeamPolicy):
    """Batched ByzRes-UCB over B runs and N agents; see the module docstring."""

    agent_id = AGENT_ID
    payload_layouts = {CHANNEL: "means"}  # [x̄ (M), n (M)] per agent
    version = VERSION

    def __init__(
        self,
        kappa: float = 1.5,
        f: int | None = None,
        tiebreak: str = "uniform",
        sync: str = "step",
        fusion: str = "trimmed",
    ):
        self.config = ByzResUCBConfig(kappa, f, tiebreak, sync, fusion)

    def channel_spec(self, config: EnvConfig) -> dict[str, dict[str, Any]] | None:
        return byzres_channel_spec(self.config, config.num_arms)

    def reset(self, facts: FederationFacts, rng: BatchedRNG) -> None:
        """Zero statistics, the tie-break stream; refuses a family other than homogeneous (the
        fusion averages other agents' means of the same arm), a missing channel, an
        aggregating ``neighbors`` delivery and a horizon without a round after the init."""
        self.params = byzres_params(self.config, facts)  # checks the facts
        B, N, M = facts.num_runs, facts.num_agents, facts.num_arms
        self.f, self._notes = self.params.f, self.params.notes
        self.M = M
        self.table = ArmTable.of(B, N, M)
        zeros = self.table.zeros
        self.state = ByzResUCBState(zeros(), zeros(), zeros(), zeros(), zeros())
        self._tiebreak = rng.child("tiebreak").buffered("uniform", (N,))
        self._all = np.ones((B, N), dtype=bool)
        self._none = np.zeros((B, N), dtype=bool)
        self._no_pull = np.zeros(B, dtype=bool)

    def notes(self) -> tuple[str, ...]:
        """``"f = 1 < 2 Byzantine"`` when a user's f is below the environment's bound."""
        return self._notes

    # ------------------------------------------------------------------ pieces
    def payload(self) -> np.ndarray:
        """What every agent sends: ``[xbar (M), n (M)]`` (B, N, 2M), xbar = 0 on unpulled arms."""
        return payload(self.state.s, self.state.n)

    def _fold_in(self, obs: VecObservation) -> None:
        pulled = np.broadcast_to((obs.phase == PULL)[:, None], obs.last_arm.shape)
        self.table.add(self.state.n, obs.last_arm, 1.0, where=pulled)
        self.table.add(self.state.s, obs.last_arm, obs.last_reward, where=pulled)

    def _choose(self, obs: VecObservation) -> np.ndarray:
        """Steps 1-4 for round t from the messages delivered in the last step."""
        cfg, st, M = self.config, self.state, self.M
        xbar = st.s / st.n  # every arm pulled once in the init
        if cfg.fusion == "none":
            st.z, st.g = xbar, np.ones_like(xbar)
            st.accepted = np.zeros_like(xbar)
        else:
            d = obs.deliveries[CHANNEL]
            trimmed = cfg.fusion == "trimmed"
            st.z, st.g, st.accepted = fuse(
                xbar,
                st.n,
                d.payload[..., :M],
                d.payload[..., M:],
                d.mask,
                cfg.kappa,
                self.f if trimmed else 0,
                filtered=trimmed,
            )
        q = index(st.z, st.g, st.n, st.pulls - M + 1)
        if cfg.tiebreak == "lowest":
            note_scores(q)
            self._tiebreak.next()  # drawn either way: the stream's use does not depend on it
            return q.argmax(axis=2)
        return argmax_one_uniform(q, self._tiebreak.next())

    def act(self, obs: VecObservation) -> TeamAction:
        """Fold in the last pull; init pulls; then, per round, (a communication step and) the
        choice of steps 1-4, sending ``[xbar, n]`` with it (``sync="step"``)."""
        cfg, st = self.config, self.state
        if obs.step > 0 and bool((obs.phase == PULL).any()):
            self._fold_in(obs)
            st.pulls += 1
            st.comm_done = False
        talking = cfg.fusion != "none"
        msgs = {}
        if st.pulls < self.M:  # init: arm `pulls` for everyone
            arms = np.full(self._all.shape, st.pulls, dtype=np.int64)
            if talking:
                send = self._all if cfg.sync == "step" else self._none
                msgs = {CHANNEL: (send, self.payload())}
            return TeamAction(arms, msgs)
        if talking and cfg.sync == "comm_step" and not st.comm_done:
            st.comm_done = True
            arms = np.zeros(self._all.shape, dtype=np.int64)
            return TeamAction(arms, {CHANNEL: (self._all, self.payload())}, pull=self._no_pull)
        arms = self._choose(obs)
        if talking:
            send = self._all if cfg.sync == "step" else self._none
            msgs = {CHANNEL: (send, self.payload())}
        return TeamAction(arms, msgs)
