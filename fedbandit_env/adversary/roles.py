"""Roles of the agents (honest, Byzantine, crashed), their placement, and what they do in a step
(docs/adversary.md).

:class:`AdversaryConfig` is the environment keyword ``adversary=`` (a dict or the dataclass).
At every reset each run draws its roles (B, N) int8 (0 honest, 1 Byzantine, 2 crashed) and its
crash pulls (B, N) from the run's own ``adversary`` stream, so the reward, instance, network and
learner streams do not move when the roles change. :class:`Adversary` is the engine's side: it
silences crashed agents, asks the attack for the Byzantine agents' messages on every channel,
and keeps the pull counts an omniscient attack may read.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fedbandit_env.adversary.attacks import (
    KNOWLEDGE,
    Attack,
    AttackSpec,
    AttackView,
    make_attack,
    set_knowledge,
)
from fedbandit_env.adversary.payloads import crashed_down
from fedbandit_env.errors import ConfigError
from fedbandit_env.seeding import BatchedRNG
from fedbandit_env.validation import ConfigTypeError, check_int, is_integral

HONEST, BYZANTINE, CRASHED = 0, 1, 2
"""The role codes of :attr:`Adversary.roles`."""

PLACEMENTS = ("uniform", "fixed", "first", "max_degree", "min_degree", "local_f", "code_fedmom")
"""Where roles sit (docs/adversary.md, "Placements"). ``code_fedmom``: f ids drawn uniformly
WITH replacement per run, as the authors' code of Demirel, Yildirim & Tekin (arXiv 2205.04134;
``np.random.randint(M, size=M_Byz)`` in Fed-MoM-UCB_sce1.py) does; the distinct ids are
Byzantine, so there may be fewer than f."""
LOCAL_F_TRIES = 1000
"""Placements ``local_f`` draws per run before giving up."""


def _field(name: str) -> str:
    return f"adversary.{name}"


def _ids(name: str, value: Any) -> tuple[int, ...] | None:
    if value is None:
        return None
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if isinstance(value, str | bytes) or not isinstance(value, Sequence):
        raise ConfigTypeError(f"{_field(name)}: expected a list of agent ids, got {value!r}")
    out = tuple(check_int(f"{_field(name)}[{k}]", v, minimum=0) for k, v in enumerate(value))
    if len(set(out)) != len(out):
        raise ConfigError(f"{_field(name)}: expected distinct agent ids, got {list(out)}")
    return out


@dataclass(frozen=True)
class AdversaryConfig:
    """Who is Byzantine or crashed, where they sit, and what the Byzantine agents send.

    ``num_byzantine`` (f) and ``num_crashed`` (non-negative ints; f defaults to 0, or to
    ``len(byzantine_ids)`` with ``placement="fixed"``), at least one honest agent
    (f + crashed < N, checked by :meth:`resolve`). ``placement``: ``"uniform"`` (default,
    without replacement, per run), ``"fixed"`` (``byzantine_ids``, ``crashed_ids``),
    ``"first"`` (the lowest ids: Byzantine first, then crashed), ``"max_degree"`` /
    ``"min_degree"`` (by topology degree, ties to the lowest id; Byzantine first, then
    crashed) or ``"local_f"`` (uniform, drawn again until every honest agent has at most
    ``local_f`` Byzantine neighbours, default f; an error after :data:`LOCAL_F_TRIES` tries).
    ``attack``: a registered attack id (:func:`~fedbandit_env.adversary.list_attacks`),
    ``attack_kwargs`` its keyword arguments, ``knowledge`` ``"oblivious"`` /
    ``"omniscient"`` / None (the attack's default). ``crash_at``: the pull from which the
    crashed agents are down, an int in [1, horizon] or ``"uniform"`` (uniform in [1, horizon]
    per crashed agent and run); None means horizon // 2 (at least 1). ``channels``: the
    channels the attack speaks on (None: every channel); the Byzantine agents are silent on
    the others."""

    num_byzantine: int | None = None
    num_crashed: int = 0
    placement: str = "uniform"
    byzantine_ids: tuple[int, ...] | None = None
    crashed_ids: tuple[int, ...] | None = None
    local_f: int | None = None
    attack: str = "silent"
    attack_kwargs: Mapping[str, Any] = field(default_factory=dict)
    knowledge: str | None = None
    crash_at: int | str | None = None
    channels: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        put = object.__setattr__
        if not isinstance(self.placement, str) or self.placement not in PLACEMENTS:
            raise ConfigError(
                f"{_field('placement')}: expected one of {list(PLACEMENTS)}, got {self.placement!r}"
            )
        fixed = self.placement == "fixed"
        put(self, "byzantine_ids", _ids("byzantine_ids", self.byzantine_ids))
        put(self, "crashed_ids", _ids("crashed_ids", self.crashed_ids))
        for name in ("byzantine_ids", "crashed_ids"):
            if getattr(self, name) is not None and not fixed:
                raise ConfigError(
                    f"{_field(name)}: only with placement='fixed', got placement {self.placement!r}"
                )
        if fixed and self.byzantine_ids is None and self.crashed_ids is None:
            raise ConfigError(
                f"{_field('byzantine_ids')}: placement='fixed' expects byzantine_ids and/or "
                "crashed_ids (lists of agent ids)"
            )
        byz_ids, crash_ids = self.byzantine_ids or (), self.crashed_ids or ()
        if set(byz_ids) & set(crash_ids):
            raise ConfigError(
                f"{_field('crashed_ids')}: expected ids disjoint from byzantine_ids, got both "
                f"{sorted(set(byz_ids) & set(crash_ids))}"
            )
        f = self.num_byzantine
        if f is None:
            f = len(byz_ids) if fixed else 0
        f = check_int(_field("num_byzantine"), f, minimum=0)
        crashed = self.num_crashed
        if fixed and crashed == 0 and crash_ids:
            crashed = len(crash_ids)
        crashed = check_int(_field("num_crashed"), crashed, minimum=0)
        if fixed and len(byz_ids) != f:
            raise ConfigError(
                f"{_field('byzantine_ids')}: expected num_byzantine = {f} ids, got {len(byz_ids)}"
            )
        if fixed and len(crash_ids) != crashed:
            raise ConfigError(
                f"{_field('crashed_ids')}: expected num_crashed = {crashed} ids, got "
                f"{len(crash_ids)}"
            )
        put(self, "num_byzantine", f)
        put(self, "num_crashed", crashed)
        if self.placement == "code_fedmom" and crashed:
            raise ConfigError(
                f"{_field('num_crashed')}: expected 0 with placement='code_fedmom' (the "
                f"authors' draw places Byzantine clients only), got {crashed}"
            )
        if self.local_f is not None:
            if self.placement != "local_f":
                raise ConfigError(
                    f"{_field('local_f')}: only with placement='local_f', got placement "
                    f"{self.placement!r}"
                )
            put(self, "local_f", check_int(_field("local_f"), self.local_f, minimum=0))
        if self.knowledge is not None and (
            not isinstance(self.knowledge, str) or self.knowledge not in KNOWLEDGE
        ):
            raise ConfigError(
                f"{_field('knowledge')}: expected one of {list(KNOWLEDGE)} or None, got "
                f"{self.knowledge!r}"
            )
        if not isinstance(self.attack_kwargs, Mapping):
            raise ConfigTypeError(
                f"{_field('attack_kwargs')}: expected a dict of the attack's keyword arguments, "
                f"got {self.attack_kwargs!r}"
            )
        put(self, "attack_kwargs", dict(self.attack_kwargs))
        self.make_attack()  # an unknown id, bad kwargs or knowledge: refused here
        crash_at = self.crash_at
        if crash_at is not None and crash_at != "uniform":
            if not is_integral(crash_at):
                raise ConfigTypeError(
                    f"{_field('crash_at')}: expected an int pull in [1, horizon] or 'uniform', "
                    f"got {crash_at!r}"
                )
            put(self, "crash_at", check_int(_field("crash_at"), crash_at, minimum=1))
        if self.channels is not None:
            names = self.channels
            if isinstance(names, str) or not isinstance(names, Sequence):
                raise ConfigTypeError(
                    f"{_field('channels')}: expected a list of channel names or None, got {names!r}"
                )
            if not all(isinstance(n, str) for n in names):
                raise ConfigTypeError(
                    f"{_field('channels')}: expected channel names (str), got {list(names)!r}"
                )
            put(self, "channels", tuple(names))

    @classmethod
    def of(cls, value: Any) -> AdversaryConfig | None:
        """The ``adversary=`` keyword as a config: None, a dict of the fields, or a config."""
        if value is None or isinstance(value, AdversaryConfig):
            return value
        if not isinstance(value, Mapping):
            raise ConfigTypeError(
                f"adversary: expected None, a dict or an AdversaryConfig, got {value!r}"
            )
        names = [f.name for f in dataclasses.fields(cls)]
        unknown = sorted(str(k) for k in value if k not in names)
        if unknown:
            raise ConfigError(f"adversary: unknown key(s) {unknown}; accepted: {names}")
        return cls(**value)

    def make_attack(self) -> Attack:
        """A fresh attack of this configuration (its knowledge set)."""
        return set_knowledge(make_attack(self.attack, **self.attack_kwargs), self.knowledge)

    def resolve(self, num_agents: int, horizon: int) -> AdversaryConfig:
        """This config checked against the environment's N and T, with ``crash_at`` and
        ``local_f`` defaults filled in."""
        f, crashed = self.num_byzantine, self.num_crashed
        if f + crashed > num_agents - 1:
            name = "num_byzantine" if f > 0 or crashed == 0 else "num_crashed"
            raise ConfigError(
                f"{_field(name)}: expected num_byzantine + num_crashed <= num_agents - 1 = "
                f"{num_agents - 1} (at least one honest agent), got {f} + {crashed}"
            )
        for name in ("byzantine_ids", "crashed_ids"):
            ids = getattr(self, name) or ()
            if ids and max(ids) >= num_agents:
                raise ConfigError(
                    f"{_field(name)}: expected agent ids in [0, {num_agents - 1}], got {max(ids)}"
                )
        crash_at = self.crash_at
        if crash_at is None:
            crash_at = max(1, horizon // 2)
        if crash_at != "uniform" and crash_at > horizon:
            raise ConfigError(
                f"{_field('crash_at')}: expected an int pull in [1, horizon = {horizon}] or "
                f"'uniform', got {crash_at}"
            )
        local_f = self.local_f
        if self.placement == "local_f" and local_f is None:
            local_f = f
        return dataclasses.replace(self, crash_at=crash_at, local_f=local_f)

    @property
    def active(self) -> bool:
        """Some agent is not honest."""
        return self.num_byzantine + self.num_crashed > 0


# -- placement ------------------------------------------------------------------------------------
def _ordered(order: np.ndarray, f: int, crashed: int, n: int) -> np.ndarray:
    roles = np.zeros(n, dtype=np.int8)
    roles[order[:f]] = BYZANTINE
    roles[order[f : f + crashed]] = CRASHED
    return roles


def byzantine_neighbours(roles: np.ndarray, neighbors: np.ndarray) -> np.ndarray:
    """(..., N) the number of Byzantine neighbours of every agent (``neighbors`` (N, D), -1
    padded)."""
    valid = neighbors >= 0
    byz = roles == BYZANTINE
    at = np.where(valid, neighbors, 0)
    return (np.take(byz, at, axis=-1) & valid).sum(axis=-1)


def draw_roles(config: AdversaryConfig, topology: Any, rng: BatchedRNG, seeds: Sequence[int]):
    """The roles (B, N) int8 of a batch: deterministic placements are the same for every run,
    the random ones are drawn per run from ``rng`` (the ``roles`` child of the adversary
    stream)."""
    n = topology.num_agents
    f, crashed = config.num_byzantine, config.num_crashed
    placement = config.placement
    if placement == "code_fedmom":  # with replacement: fewer than f distinct ids is possible
        rows = []
        for g in rng.generators:
            one = np.zeros(n, dtype=np.int8)
            one[g.integers(n, size=f)] = BYZANTINE
            rows.append(one)
        return np.stack(rows).astype(np.int8)
    if placement in ("uniform", "local_f"):
        rows = []
        for b, g in enumerate(rng.generators):
            rows.append(_draw_uniform(config, topology, g, seeds[b]))
        return np.stack(rows).astype(np.int8)
    if placement == "fixed":
        one = np.zeros(n, dtype=np.int8)
        one[list(config.byzantine_ids or ())] = BYZANTINE
        one[list(config.crashed_ids or ())] = CRASHED
    elif placement == "first":
        one = _ordered(np.arange(n), f, crashed, n)
    else:
        degrees = np.asarray(topology.degrees, dtype=np.int64)
        key = -degrees if placement == "max_degree" else degrees
        one = _ordered(np.argsort(key, kind="stable"), f, crashed, n)
    return np.repeat(one[None, :], rng.num_runs, axis=0)


def _draw_uniform(config: AdversaryConfig, topology: Any, g: np.random.Generator, seed: int):
    n = topology.num_agents
    f, crashed = config.num_byzantine, config.num_crashed
    tries = LOCAL_F_TRIES if config.placement == "local_f" else 1
    neighbors = topology.neighbors if config.placement == "local_f" else None
    for _ in range(tries):
        chosen = g.choice(n, size=f + crashed, replace=False)
        roles = _ordered(chosen, f, crashed, n)
        if neighbors is None:
            return roles
        honest = roles == HONEST
        if (byzantine_neighbours(roles, neighbors)[honest] <= config.local_f).all():
            return roles
    raise ConfigError(
        f"{_field('local_f')}: no placement of {f} Byzantine agents in which every honest "
        f"agent has at most local_f = {config.local_f} Byzantine neighbours was found in "
        f"{LOCAL_F_TRIES} tries (run seed {seed}); lower num_byzantine, raise local_f or use a "
        "denser topology"
    )


def draw_crash_pulls(
    config: AdversaryConfig, roles: np.ndarray, horizon: int, rng: BatchedRNG
) -> np.ndarray:
    """(B, N) int64: the pull from which each crashed agent is down (horizon + 1 for the
    others); ``crash_at="uniform"`` draws one per agent and run from ``rng`` (the ``crash``
    child), every agent's draw taken so the crashed agents' do not depend on the others."""
    crashed = roles == CRASHED
    if config.crash_at == "uniform":
        n = roles.shape[1]
        at = rng.per_run(lambda g: g.integers(1, horizon + 1, size=n))
    else:
        at = np.full(roles.shape, int(config.crash_at), dtype=np.int64)
    return np.where(crashed, at, horizon + 1).astype(np.int64)


# -- the engine's side ----------------------------------------------------------------------------
class Adversary:
    """The roles of a batch and their effect on each step's messages (module doc)."""

    def __init__(self, config: AdversaryConfig, spec: AttackSpec):
        self.config = config
        self.spec = spec
        self.attack = config.make_attack()
        self.omniscient = self.attack.knowledge == "omniscient"
        self.roles: np.ndarray | None = None
        self.per_receiver: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        """This step's per-receiver messages by channel: (speaking (B, N), payloads (B, N, N,
        dim)), from an attack that tells each receiver something else (equivocation)."""

    def reset(self, rng: BatchedRNG, seeds: Sequence[int], spec: AttackSpec) -> np.ndarray:
        """Draw the batch's roles and crash pulls and reset the attack; ``rng`` is the batch's
        ``adversary`` stream. Returns the roles (B, N) int8."""
        names = self.config.channels
        if names is not None:
            unknown = sorted(set(names) - set(spec.channels))
            if unknown:
                raise ConfigError(
                    f"{_field('channels')}: unknown channel(s) {unknown}; this environment has "
                    f"{sorted(spec.channels)}"
                )
            attacked = {k: v for k, v in spec.channels.items() if k in names}
            spec = dataclasses.replace(
                spec,
                channels=attacked,
                channel_kinds={k: v for k, v in spec.channel_kinds.items() if k in names},
            )
        pushed = sorted(k for k, kind in spec.channel_kinds.items() if kind == "push")
        if pushed:
            raise ConfigError(
                f"{_field('channels')}: expected the agents' channels only; {pushed} are push "
                f"channels, whose rows are the server's messages, not an agent's (name the "
                f"channels to attack without them)"
            )
        self.spec = spec
        self.attacked = tuple(spec.channels)
        self.roles = draw_roles(self.config, spec.topology, rng.child("roles"), seeds)
        self.crash_pull = draw_crash_pulls(
            self.config, self.roles, spec.horizon, rng.child("crash")
        )
        self.byzantine = self.roles == BYZANTINE
        self.any_byzantine = bool(self.byzantine.any())
        self.any_crashed = bool((self.roles == CRASHED).any())
        shape = (*self.roles.shape, spec.num_arms)
        self.pull_counts = np.zeros(shape, dtype=np.int64) if self.omniscient else None
        self.attack = self.config.make_attack()  # a fresh attack: no state of the last batch
        self.attack.reset(rng.child("attack"), self.roles.copy(), spec)
        return self.roles.copy()

    def count_pulls(self, flat_start: np.ndarray, arms: np.ndarray, pulling: np.ndarray) -> None:
        """Add this step's pulls to the pull counts (kept for omniscient attacks only)."""
        if self.pull_counts is not None:
            self.pull_counts.reshape(-1)[flat_start + arms] += pulling[:, None]

    def down(self, pulls_before: np.ndarray) -> np.ndarray:
        """(B, N) bool: the crashed agents that are down in a step taken after
        ``pulls_before`` (B,) pulls: from their crash pull on, and in the communication steps
        right before it."""
        return crashed_down(pulls_before, self.crash_pull)

    def messages(
        self,
        step: int,
        sends: dict[str, tuple[np.ndarray, np.ndarray]],
        channels: Mapping[str, Any],
        down: np.ndarray | None,
        extras: Mapping[str, Any],
    ) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """Every channel's (send, payload) after the roles: the down agents silenced, the
        Byzantine rows replaced by the attack's on the attacked channels (silent on the
        others). A channel the learner gave nothing on appears only if someone now sends."""
        out = {}
        self.per_receiver = {}
        shape = self.roles.shape
        for name, channel in channels.items():
            given = sends.get(name)
            if given is None:
                send = np.zeros(shape, dtype=bool)
                payload = np.zeros((*shape, channel.dim))
            else:
                send, payload = given
            if down is not None:
                send = send & ~down
            if self.any_byzantine:
                if name in self.attacked:
                    send, payload = self._attack(step, name, channel, send, payload, extras)
                else:
                    send = send & ~self.byzantine
            if given is not None or send.any():
                out[name] = (send, payload)
        return out

    def _attack(self, step, name, channel, send, payload, extras):
        """The channel's messages with the Byzantine rows from the attack; an attack that
        answers per receiver, (B, N, N, dim), leaves its rows to :attr:`per_receiver`."""
        dim = channel.dim
        view = AttackView(
            step=step,
            send=send,
            payload=payload,
            byzantine=self.byzantine,
            roles=self.roles,
            **(extras if self.omniscient else {}),
        )
        a_send, a_payload = self.attack.payload(name, dim, view)
        a_send, a_payload = self._check(name, channel, a_send, a_payload)
        speak = self.byzantine & a_send
        send = np.where(self.byzantine, a_send, send)
        if a_payload.ndim == 4:  # per receiver: the channel reads the Byzantine rows from here
            self.per_receiver[name] = (speak, a_payload)
            return send, np.where(speak[..., None], 0.0, payload)
        payload = np.where(speak[..., None], a_payload, payload)
        return send, payload

    def _check(self, name, channel, send, payload):
        shape = self.roles.shape
        dim = channel.dim
        where = f"attack {self.attack.attack_id!r}: channel {name!r}"
        send = np.asarray(send)
        payload = np.asarray(payload, dtype=np.float64)
        per_receiver = (*shape, shape[1], dim)
        if payload.shape == per_receiver and not channel.supports_per_receiver:
            raise ConfigError(
                f"{where}: per-receiver payloads {per_receiver} need a channel that delivers "
                f"each receiver its own message (neighbors or gossip), got kind {channel.kind!r}"
                f"; expected payload {(*shape, dim)}"
            )
        if send.shape != shape or payload.shape not in ((*shape, dim), per_receiver):
            raise ConfigError(
                f"{where}: payload() must return send {shape} and payload {(*shape, dim)} (or "
                f"{per_receiver} per receiver), got {send.shape} and {payload.shape}"
            )
        send = send.astype(bool)
        if not np.isfinite(payload[self.byzantine & send]).all():
            raise ConfigError(f"{where}: the Byzantine payloads hold NaN/inf")
        return send, payload
