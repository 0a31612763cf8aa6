"""Fed-MoM-UCB (Demirel, Yildirim & Tekin, "Federated Multi-Armed Bandits Under Byzantine
Attacks", arXiv 2205.04134), registered as ``fed_mom_ucb``; decisions in docs/fed-mom-ucb.md.

Master-worker elimination with a median-of-means server. The constants are computed as in the
authors' code (Fed-MoM-UCB_sce1.py, :func:`derived_constants`): a mapping alpha(lambda) of the
Byzantine fraction lambda, eta = (alpha - lambda) / alpha, the number of clients
``M = ceil(4 ln(KT/delta) / (ln 2 (4 eta - 1) alpha))``, the group size
``B = floor(M / ceil(M alpha))``, the unavoidable margin
``omega = 8 sigma_c sqrt(ln 2 (4 eta - 1) / (B (2 eta - 1)))`` and ``beta = omega + epsilon``.

Phase p (the code's ``while t < T`` loop): while ``E > beta / 4`` and more than one arm is
active, every client pulls each active arm, in ascending id, ``L = s(p) - s(p-1)`` times in a
row (lockstep: all clients pull the same arm in the same step), and the phase's width is
``E_p = 2 (sigma / sqrt(s(p)) + sigma_c) sqrt((4 eta - 1) ln 2 / ((2 eta - 1) B))``
(``Ep_fn``). At the phase end, in a communication-only step, every client uploads its sample
means of all K arms (eliminated ones stale, as the code's ``mu_local_sample``) over the
``server`` channel, whose ``median_of_means`` aggregate (groups of B consecutive client ids,
the last group taking the remainder) is the code's ``U_k = np.median(group_means, axis=0)``;
every client then applies the code's elimination ``U_k <= max_k' U_k' - 2 E_p`` (the max over
all K arms, eliminated ones included) to the broadcast. When ``E <= beta / 4`` or one arm is
left, every client commits to the active arm of largest U for the rest of the horizon.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from agents.channel_check import check_channel_spec, spec_inputs
from fedbandit_env.engine import PULL, VecObservation
from fedbandit_env.errors import ConfigError
from fedbandit_env.kernels import ArmTable
from fedbandit_env.policy import (
    MULTI_ARMED,
    FederationFacts,
    TeamAction,
    TeamPolicy,
    byzantine_bound,
    require_family,
)
from fedbandit_env.seeding import BatchedRNG
from fedbandit_env.validation import check_real
from fedbandit_env.xp import namespace

AGENT_ID = "fed_mom_ucb"
VERSION = 2  # results version; 2: lam defaults to the environment's declared f / N (was 0.2)
CHANNEL = "server"
MAPPINGS = ("arithmetic", "geometric", "harmonic", "polynomial")
SCHEDULES = ("linear", "doubling")
CLIENTS = ("derived", "environment")
AGGREGATES = ("median_of_means", "mean")
"""The server's aggregate: the paper's median of means, or the plain mean of every upload (the
undefended ablation of the same uploads, the robust suite's plain learner of this layout)."""


def alpha_of(lam: float, mapping: str) -> float:
    """The mapping alpha(lambda) of the code's ``lam_map``: arithmetic (1 + 2 lambda) / 2,
    geometric sqrt(2 lambda), harmonic 4 lambda / (1 + 2 lambda), polynomial
    lambda (2.5 - lambda)."""
    if mapping == "arithmetic":
        return (1 + 2 * lam) / 2
    if mapping == "geometric":
        return math.sqrt(2 * lam)
    if mapping == "harmonic":
        return 4 * lam / (1 + 2 * lam)
    return lam * (2.5 - lam)


def s_of(schedule: str, p: int) -> int:
    """``s(p)``, the pulls per active arm after phase p (the code's ``sp_fn``): ``10 p``
    (``"linear"``) or ``2^p`` (``"doubling"``, so ``s(0) = 1``)."""
    return 10 * p if schedule == "linear" else 2**p


@dataclass(frozen=True)
class FedMoMConstants:
    """The derived constants of the authors' code (Fed-MoM-UCB_sce1.py): ``M`` clients, ``M_Z``
    Byzantine ones (``floor(M lambda)``), group size ``B``, ``G`` groups, ``alpha``, ``eta``,
    the margin ``omega`` and ``beta``."""

    M: int
    M_Z: int
    B: int
    G: int
    alpha: float
    eta: float
    omega: float
    beta: float

    def width(self, s, sigma: float, sigma_c: float):
        """``E_p`` after ``s`` pulls per arm (the code's ``Ep_fn``); ``s`` a number or an
        array."""
        eta, B = self.eta, self.B
        root = math.sqrt((4 * eta - 1) * math.log(2) / ((2 * eta - 1) * B))
        return 2 * (sigma / np.sqrt(s) + sigma_c) * root


def derived_constants(
    num_arms: int,
    horizon: int,
    lam: float = 0.2,
    mapping: str = "arithmetic",
    delta: float = 1e-3,
    epsilon: float = 0.05,
    beta: float | None = None,
    sigma_c: float = 0.01,
    num_clients: int | None = None,
) -> FedMoMConstants:
    """The constants of the authors' code for K = ``num_arms`` and T = ``horizon``:
    ``M = ceil(4 ln(K T / delta) / (ln 2 (4 eta - 1) alpha))`` (or ``num_clients`` when given),
    ``M_Z = floor(M lambda)``, ``B = floor(M / ceil(M alpha))``, ``G = floor(M / B)``,
    ``omega = 8 sigma_c sqrt(ln 2 (4 eta - 1) / (B (2 eta - 1)))`` and ``beta = omega + epsilon``
    (or the fixed ``beta`` of scenarios 2 and 3)."""
    alpha = alpha_of(lam, mapping)
    eta = (alpha - lam) / alpha
    if num_clients is None:
        M = int(
            math.ceil(
                4 * math.log(num_arms * horizon / delta) / (math.log(2) * (4 * eta - 1) * alpha)
            )
        )
    else:
        M = int(num_clients)
    M_Z = int(math.floor(M * lam))
    B = max(1, int(math.floor(M / math.ceil(M * alpha))))
    G = int(math.floor(M / B))
    omega = 8 * sigma_c * math.sqrt(math.log(2) * (4 * eta - 1) / (B * (2 * eta - 1)))
    return FedMoMConstants(
        M, M_Z, B, G, alpha, eta, omega, omega + epsilon if beta is None else beta
    )


def check_lam(lam: float, mapping: str, where: str = "lam") -> float:
    """``lam`` in [0, 0.5) with eta(lambda) = (alpha - lambda) / alpha > 1/2 for ``mapping``
    (the widths need 2 eta - 1 > 0); ``where`` names its origin in the error."""
    lam = check_real(where, lam, low=0.0, high=0.5, high_open=True, where=AGENT_ID)
    alpha = alpha_of(lam, mapping)
    if not alpha > 0 or not (alpha - lam) / alpha > 0.5:
        eta = (alpha - lam) / alpha if alpha > 0 else float("nan")
        raise ConfigError(
            f"{AGENT_ID}: {where}: expected eta(lambda) = (alpha - lambda) / alpha > 1/2 for the "
            f"{mapping} mapping (the widths need 2 eta - 1 > 0), got lam={lam!r} "
            f"(alpha={alpha:.4g}, eta={eta:.4g})"
        )
    return lam


@dataclass(frozen=True)
class FedMoMUCBConfig:
    """Hyperparameters. ``lam``: the Byzantine fraction the constants are built for, in
    [0, 0.5), or None (the default): the environment's declared bound over its clients,
    ``f / N`` (``FederationFacts.byzantine_bound``; 0 without an adversary), since the paper
    takes lambda known; ``mapping``: alpha(lambda), one of :data:`MAPPINGS`; ``delta`` in (0, 1);
    ``epsilon`` >= 0, or a fixed ``beta`` > 0 (the code's scenarios 2 and 3); ``sigma`` > 0 the
    reward noise; ``sigma_c`` >= 0 the clients' spread; ``schedule`` ``"linear"`` (s(p) = 10 p)
    or ``"doubling"`` (2^p); ``clients``: ``"derived"`` (the environment must have the derived
    M clients) or ``"environment"`` (M is the environment's N); ``aggregate``: one of
    :data:`AGGREGATES` (``"mean"``: the ablation without the median of means)."""

    lam: float | None = None
    mapping: str = "arithmetic"
    delta: float = 1e-3
    epsilon: float = 0.05
    beta: float | None = None
    sigma: float = 0.5
    sigma_c: float = 0.01
    schedule: str = "linear"
    clients: str = "derived"
    aggregate: str = "median_of_means"

    def __post_init__(self) -> None:
        put = object.__setattr__
        for name, choices in (("mapping", MAPPINGS), ("schedule", SCHEDULES), ("clients", CLIENTS),
                              ("aggregate", AGGREGATES)):  # fmt: skip
            value = getattr(self, name)
            if isinstance(value, str):
                value = value.lower()
            if not isinstance(value, str) or value not in choices:
                raise ConfigError(
                    f"{AGENT_ID}: {name}: expected one of {list(choices)}, got {getattr(self, name)!r}"
                )
            put(self, name, value)
        delta = check_real(
            "delta", self.delta, low=0.0, high=1.0, low_open=True, high_open=True, where=AGENT_ID
        )
        put(self, "delta", delta)
        put(self, "epsilon", check_real("epsilon", self.epsilon, low=0.0, where=AGENT_ID))
        if self.beta is not None:
            put(self, "beta", check_real("beta", self.beta, low=0.0, low_open=True, where=AGENT_ID))
        put(self, "sigma", check_real("sigma", self.sigma, low=0.0, low_open=True, where=AGENT_ID))
        put(self, "sigma_c", check_real("sigma_c", self.sigma_c, low=0.0, where=AGENT_ID))
        if self.lam is not None:
            put(self, "lam", check_lam(self.lam, self.mapping))

    def lam_for(self, num_agents: int, bound: int) -> float:
        """The lambda the constants are built for: ``lam``, or the environment's declared
        Byzantine fraction ``bound / num_agents`` when ``lam`` is None (checked like a user's,
        the error naming where it came from)."""
        if self.lam is not None:
            return self.lam
        where = f"lam (None: the environment's f / N = {bound} / {num_agents})"
        return check_lam(bound / num_agents, self.mapping, where)


def lam_notes(lam: float, num_agents: int, bound: int) -> tuple[str, ...]:
    """The row's note when lambda N, the Byzantine clients the constants are built for, is
    below the environment's declared bound."""
    if lam * num_agents < bound - 1e-9:
        return (f"lam N = {lam * num_agents:.3g} < {bound} Byzantine",)
    return ()


def fedmom_constants(
    config: FedMoMUCBConfig, num_arms: int, horizon: int, num_agents: int, bound: int = 0
) -> FedMoMConstants:
    """:func:`derived_constants` of a configuration for a federation of ``num_agents`` clients
    that declares at most ``bound`` Byzantine ones (``num_agents`` used as M with
    ``clients="environment"``; ``bound`` only when ``lam`` is None)."""
    c = config
    return derived_constants(
        num_arms,
        horizon,
        c.lam_for(num_agents, bound),
        c.mapping,
        c.delta,
        c.epsilon,
        c.beta,
        c.sigma_c,
        num_agents if c.clients == "environment" else None,
    )


def fedmom_group_size(config: FedMoMUCBConfig, num_agents: int, bound: int = 0) -> int:
    """``B = floor(N / ceil(N alpha))`` for the N clients of the environment."""
    alpha = alpha_of(config.lam_for(num_agents, bound), config.mapping)
    return max(1, int(math.floor(num_agents / math.ceil(num_agents * alpha))))


def fedmom_channel_spec(config: FedMoMUCBConfig, env_config: Any) -> dict[str, Any]:
    """``server`` of dim K: ``median_of_means`` with group size B, consecutive (or the plain
    ``mean``, ``aggregate="mean"``)."""
    if config.aggregate == "mean":
        return {CHANNEL: {"kind": "server", "dim": env_config.num_arms, "aggregate": "mean"}}
    size = fedmom_group_size(config, env_config.num_agents, byzantine_bound(env_config))
    return {
        CHANNEL: {
            "kind": "server",
            "dim": env_config.num_arms,
            "aggregate": "median_of_means",
            "group_size": size,
            "grouping": "consecutive",
        }
    }


def phase_length(schedule: str, p: int) -> int:
    """``L = s(p) - s(p - 1)``: pulls of each active arm in phase p."""
    return s_of(schedule, p) - s_of(schedule, p - 1)


@dataclass(frozen=True)
class FedMoMParams:
    """What Fed-MoM-UCB reads at run time on one federation: N clients, K arms, the derived
    constants ``k`` (M, M_Z, B, G, alpha, eta, omega, beta), the ``lam`` they are built for, the
    elimination's ``beta``, its configuration and the row's notes."""

    num_agents: int
    num_arms: int
    k: FedMoMConstants
    lam: float
    beta: float
    config: FedMoMUCBConfig
    notes: tuple[str, ...] = ()


def fedmom_params(config: FedMoMUCBConfig, facts: FederationFacts) -> FedMoMParams:
    """The :class:`FedMoMParams` of a validated configuration on a federation; checks the
    family, the client count, the channel and its options. Pure: the numpy ``reset`` and the
    JAX ``make_params`` call it."""
    require_family(AGENT_ID, facts, MULTI_ARMED)
    spec = fedmom_channel_spec(config, spec_inputs(facts))
    check_channel_spec(AGENT_ID, spec, facts)
    N, K = facts.num_agents, facts.num_arms
    bound = facts.byzantine_bound
    lam = config.lam_for(N, bound)
    k = fedmom_constants(config, K, facts.horizon, N, bound)
    if N != k.M:
        raise ConfigError(
            f"{AGENT_ID}: num_agents: expected M = {k.M} clients (derived from K={K}, "
            f"T={facts.horizon}, delta={config.delta}, lam={lam:.4g}, "
            f"mapping {config.mapping!r}), got {N}; or pass clients='environment'"
        )
    have = facts.channels[CHANNEL]
    grouped = config.aggregate == "median_of_means"
    for key, want in (("group_size", k.B), ("grouping", "consecutive")) if grouped else ():
        if have.get(key) != want:
            raise ConfigError(
                f"{AGENT_ID}: channels.{CHANNEL}.{key}: expected {want!r}, got {have.get(key)!r}"
            )
    if have.get("participation") != 1.0 or have.get("drop_prob", 0.0) != 0.0:
        raise ConfigError(
            f"{AGENT_ID}: channels.{CHANNEL}: expected participation 1.0 and drop_prob 0 "
            f"(every client uploads at every phase end), got participation "
            f"{have.get('participation')!r} and drop_prob {have.get('drop_prob', 0.0)!r}"
        )
    if have.get("join_round") is not None:
        raise ConfigError(
            f"{AGENT_ID}: channels.{CHANNEL}.join_round: expected None (every client "
            f"from phase 1), got {have.get('join_round')!r}"
        )
    return FedMoMParams(N, K, k, lam, k.beta, config, lam_notes(lam, N, bound))


def phase_arm(active: Any, pos: Any, L: Any, committed: Any, commit_arm: Any) -> Any:
    """(...) the arm of the next pull, for either engine: the committed arm, or the active arm
    number ``pos // L`` in ascending id (the code's ``for k in active_arms: for _ in
    range(L)``); ``active`` (..., K) bool."""
    xp = namespace(active, pos)
    target = pos // xp.maximum(L, 1)
    rank = xp.cumsum(active, axis=-1) - 1
    arm = xp.argmax(active & (rank == target[..., None]), axis=-1)
    return xp.where(committed, commit_arm, arm)


class FedMoMUCB(TeamPolicy):
    """Batched Fed-MoM-UCB over B runs and N clients (module docstring)."""

    agent_id = AGENT_ID
    payload_layouts = {CHANNEL: "arm_means"}  # a client's sample mean of every arm
    version = VERSION

    def __init__(
        self,
        lam: float | None = None,
        mapping: str = "arithmetic",
        delta: float = 1e-3,
        epsilon: float = 0.05,
        beta: float | None = None,
        sigma: float = 0.5,
        sigma_c: float = 0.01,
        schedule: str = "linear",
        clients: str = "derived",
        aggregate: str = "median_of_means",
    ):
        self.config = FedMoMUCBConfig(
            lam, mapping, delta, epsilon, beta, sigma, sigma_c, schedule, clients, aggregate
        )

    # ---------------------------------------------------------------- constants
    def constants(
        self, num_arms: int, horizon: int, num_agents: int, bound: int = 0
    ) -> FedMoMConstants:
        """:func:`fedmom_constants` of this configuration."""
        return fedmom_constants(self.config, num_arms, horizon, num_agents, bound)

    def group_size(self, num_agents: int, bound: int = 0) -> int:
        """:func:`fedmom_group_size` of this configuration."""
        return fedmom_group_size(self.config, num_agents, bound)

    def channel_spec(self, config):
        return fedmom_channel_spec(self.config, config)

    # -------------------------------------------------------------------- reset
    def reset(self, facts: FederationFacts, rng: BatchedRNG) -> None:
        """Every arm active, E = inf, phase 1; checks the client count and the channel."""
        self.params = fedmom_params(self.config, facts)  # checks the facts
        B, N, K = facts.num_runs, facts.num_agents, facts.num_arms
        k, lam = self.params.k, self.params.lam
        self.k = k
        self.lam = lam
        self._notes = self.params.notes
        self.beta = k.beta
        self.table = ArmTable.of(B, N, K)
        self.sums = self.table.zeros()  # (B, N, K) reward sums of each client
        self.counts = self.table.zeros()  # (B, N, K) pulls (equal on every client)
        self.active = np.ones((B, K), dtype=bool)
        self.U = np.zeros((B, K))  # the last broadcast
        self.E = np.full(B, np.inf)  # the width of the last phase (the code's Ep, 1e6 at first)
        self.p = np.ones(B, dtype=np.int64)  # the phase under way (1-based)
        self.pos = np.zeros(B, dtype=np.int64)  # pulls made in the phase under way
        self.L = np.full(B, self.phase_length(1), dtype=np.int64)
        self.committed = np.zeros(B, dtype=bool)
        self.commit_arm = np.zeros(B, dtype=np.int64)
        self.awaiting = np.zeros(B, dtype=bool)
        self.rounds = np.zeros(B, dtype=np.int64)  # completed phase-end uploads

    def notes(self) -> tuple[str, ...]:
        """``"lam N = 0.8 < 2 Byzantine"`` when a user's lambda covers fewer clients than the
        environment declares Byzantine."""
        return self._notes

    def phase_length(self, p: int) -> int:
        """``L = s(p) - s(p - 1)``: pulls of each active arm in phase p."""
        return phase_length(self.config.schedule, p)

    # ---------------------------------------------------------------------- act
    def act(self, obs: VecObservation) -> TeamAction:
        """Fold in the last pull, apply the elimination to the broadcast of a phase end, then
        pull the phase's current arm, or upload the sample means in a communication step."""
        if obs.step > 0:
            pulled = (obs.phase == PULL) & (obs.pulls > 0)
            mask = np.broadcast_to(pulled[:, None], obs.last_arm.shape)
            arm = np.maximum(obs.last_arm, 0)
            self.table.add(self.sums, arm, obs.last_reward, where=mask)
            self.table.add(self.counts, arm, 1.0, where=mask)
        if self.awaiting.any():
            self._eliminate(obs.deliveries[CHANNEL].aggregate, self.awaiting)
        n_active = self.active.sum(axis=1)
        talk = ~self.committed & (self.pos >= self.L * n_active)
        self.awaiting = talk
        arms = np.broadcast_to(self._current_arm()[:, None], self.sums.shape[:2]).copy()
        self.pos += ~self.committed & ~talk
        if not talk.any():  # no upload: the channel stays silent (and is not reduced)
            return TeamAction(arms, {})
        send = np.broadcast_to(talk[:, None], arms.shape).copy()
        means = self.sums / np.maximum(self.counts, 1.0)  # the code's mu_local_sample, all K arms
        payload = np.where(send[..., None], means, 0.0)
        return TeamAction(arms, {CHANNEL: (send, payload)}, ~talk)

    def _current_arm(self) -> np.ndarray:
        """(B,) the arm of the next pull: the committed arm, or the active arm number
        ``pos // L`` in ascending id (the code's ``for k in active_arms: for _ in range(L)``)."""
        return phase_arm(self.active, self.pos, self.L, self.committed, self.commit_arm).astype(
            np.int64
        )

    def _eliminate(self, U: np.ndarray, runs: np.ndarray) -> None:
        """The server's U of the phase just ended: the code's elimination
        ``U_k <= max U - 2 E_p`` over all K arms, then the next phase or the commitment."""
        idx = np.flatnonzero(runs)
        E = self.k.width(self._s(self.p[idx]), self.config.sigma, self.config.sigma_c)
        u = U[idx]
        self.U[idx] = u
        self.E[idx] = E
        self.rounds[idx] += 1
        before = self.active[idx]
        after = before & ~(u <= u.max(axis=1, keepdims=True) - 2 * E[:, None])
        none_left = ~after.any(axis=1)  # a stale max removed every active arm: keep the old set
        after[none_left] = before[none_left]
        self.active[idx] = after
        stop = (E <= self.beta / 4) | (after.sum(axis=1) <= 1)
        best = np.argmax(np.where(after, u, -np.inf), axis=1)
        self.committed[idx] = stop
        self.commit_arm[idx] = np.where(stop, best, self.commit_arm[idx])
        self.p[idx] += 1
        self.pos[idx] = 0
        self.L[idx] = self._s(self.p[idx]) - self._s(self.p[idx] - 1)

    def _s(self, p: np.ndarray) -> np.ndarray:
        """:func:`s_of` of an array of phases."""
        p = np.asarray(p, dtype=np.int64)
        return 10 * p if self.config.schedule == "linear" else np.left_shift(1, p)

    # ------------------------------------------------------------------- helpers
    def beta_regret(self, gaps: np.ndarray) -> np.ndarray:
        """The code's per-pull beta-regret ``r_k = 0 if gap_k < beta else gap_k - beta``
        (``arm_regrets`` in Fed-MoM-UCB_sce1.py) of pseudo-regret gaps."""
        gaps = np.asarray(gaps, dtype=np.float64)
        return np.where(gaps < self.beta, 0.0, gaps - self.beta)
