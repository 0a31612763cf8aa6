"""Clients that leave and join: the ``churn`` option of an environment (docs/time.md, "churn").

Every client takes part in every pull by default. ``churn`` makes clients absent for a while:

* ``{"kind": "schedule", "absences": [[m, leave, join], ...], "join_at": [t_1, ..., t_N]}``:
  client m is absent from pull ``leave`` to pull ``join - 1`` (``join`` None: it never returns);
  ``join_at[m]`` is the pull at which client m first appears (absent before it; 1: from the
  start), the late admission of Fed2-UCB-style federations. Either key may be left out.
* ``{"kind": "markov", "p_leave": p, "p_join": q}``: every client is present at pull 1; before
  each later pull, a present client leaves with probability p and an absent one returns with
  probability q, each client on its own (a two-state Markov chain per client).
* ``None``, ``"always"`` or ``{"kind": "always"}``: nobody leaves (the default).

Churn time is a run's own pull count t = 1..T, as drift time (docs/time.md): the presence of
pull t is drawn right after pull t - 1 (and announced in that step's observation, ``active``);
it holds for the communication-only steps between the two pulls and for pull t itself. What an
absent client does (the engine, both backends):

* it does not pull: under lock-step the others pull without it; under an event clock the
  event's client is drawn among the present clients only (its share of the clock is redrawn
  among them), and an event at which nobody is present passes without a pull;
* it sends nothing: its messages are not transmitted and not charged;
* it receives nothing: a message that reaches an absent client is dropped and counted in the
  ledger's ``dropped`` (the sender paid for it; with a latency this is decided at arrival);
* regret counts the clients that pulled: an absent client's regret is 0.

The topology stays as it was: an absent node's links carry nothing while it is away, so a graph
may fall apart into pieces for that time (a ring with one node away is a path). Channels whose
deliveries are not addressed to each client (``flood``, ``hierarchical`` and the ``server``
broadcast) are refused by name under churn; ``server`` with ``reply="none"`` (uploads only) and
``push`` (the server's addressed downloads) are accepted.

A learner that can run with clients away declares ``"churn"`` in its ``event_time``; any other is
refused by name (:func:`fedbandit_env.policy.check_event_time`). The formulas both engines compute
(:func:`scheduled_presence`, :func:`markov_presence`, :func:`drop_absent`) are written once
against an array namespace.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from fedbandit_env.errors import ConfigError
from fedbandit_env.validation import check_int, check_option_keys, check_real, option_kind

CHURN_KINDS: tuple[str, ...] = ("always", "schedule", "markov")
"""The accepted ``churn`` kinds (a str, or a dict with ``"kind"``)."""

_KEYS = {
    "always": ("kind",),
    "schedule": ("kind", "absences", "join_at"),
    "markov": ("kind", "p_leave", "p_join"),
}

CHURN_CHANNELS: tuple[str, ...] = ("neighbors", "gossip", "push", "server")
"""The channel kinds that run under churn (``server`` with ``reply="none"`` only)."""


@dataclass(frozen=True, eq=False)
class Churn:
    """A validated churn (module docstring): ``kind`` (``"schedule"`` or ``"markov"``); a
    schedule's absences as three (S,) int64 arrays ``clients``, ``leave`` and ``join`` (absent
    for leave <= t < join; T + 1: never back); a Markov churn's ``p_leave`` and ``p_join``."""

    kind: str
    clients: np.ndarray
    leave: np.ndarray
    join: np.ndarray
    p_leave: float = 0.0
    p_join: float = 0.0

    def __reduce__(self) -> Any:  # pickles (worker processes) by value
        return (Churn, (self.kind, self.clients, self.leave, self.join, self.p_leave, self.p_join))


def churn_option(value: Any, *, num_agents: int, horizon: int) -> Churn | None:
    """The :class:`Churn` of a ``churn`` argument, or None when nobody leaves."""
    if value is None or (isinstance(value, str) and value == "always"):
        return None
    forms = "None, 'always', or a dict with 'kind'"
    kind = option_kind("churn", value, CHURN_KINDS, forms)
    if kind == "always":
        return None
    check_option_keys("churn", value, kind, _KEYS[kind])
    none = np.zeros(0, np.int64)
    if kind == "markov":
        p_leave = check_real("p_leave", value.get("p_leave", 0.0), low=0.0, high=1.0,
                             where="churn")  # fmt: skip
        p_join = check_real("p_join", value.get("p_join", 0.0), low=0.0, high=1.0,
                            where="churn")  # fmt: skip
        return Churn("markov", none, none, none, p_leave, p_join)
    rows = _absences(value.get("absences"), num_agents, horizon)
    rows += _join_at(value.get("join_at"), num_agents, horizon)
    table = np.array(rows, dtype=np.int64).reshape(-1, 3)
    cols = [np.ascontiguousarray(table[:, j]) for j in range(3)]
    for col in cols:
        col.setflags(write=False)
    return Churn("schedule", *cols)


def _absences(value: Any, num_agents: int, horizon: int) -> list[tuple[int, int, int]]:
    if value is None:
        return []
    expected = (f"a list of [client, leave, join] with client in [0, {num_agents - 1}] and "
                f"1 <= leave < join <= {horizon + 1} (join None: never back)")  # fmt: skip
    if isinstance(value, str | bytes) or not hasattr(value, "__iter__"):
        raise ConfigError(f"churn: absences: expected {expected}, got {value!r}")
    rows = []
    for row in value:
        if isinstance(row, str | bytes) or not hasattr(row, "__len__") or len(row) != 3:
            raise ConfigError(f"churn: absences: expected {expected}, got the entry {row!r}")
        client = check_int("absences.client", row[0], minimum=0, maximum=num_agents - 1,
                           where="churn")  # fmt: skip
        leave = check_int("absences.leave", row[1], minimum=1, maximum=horizon, where="churn")
        join = horizon + 1 if row[2] is None else check_int(
            "absences.join", row[2], minimum=leave + 1, maximum=horizon + 1, where="churn")
        rows.append((client, leave, join))
    return rows


def _join_at(value: Any, num_agents: int, horizon: int) -> list[tuple[int, int, int]]:
    if value is None:
        return []
    if isinstance(value, str | bytes) or not hasattr(value, "__len__") or len(value) != num_agents:
        raise ConfigError(f"churn: join_at: expected {num_agents} pulls in [1, {horizon}] (the "
                          f"pull at which each client first appears), got {value!r}")  # fmt: skip
    starts = [check_int("join_at", t, minimum=1, maximum=horizon, where="churn") for t in value]
    return [(m, 1, t) for m, t in enumerate(starts) if t > 1]


def check_churn_channels(channels: dict[str, Any]) -> None:
    """Refuse, by name, a channel whose deliveries are not addressed to each client."""
    for name, ch in channels.items():
        kind = getattr(ch, "kind", None)
        if kind == "neighbors" and getattr(ch, "reduce", None) is not None:
            raise ConfigError(f"channels.{name}: churn: expected reduce=None (each neighbour's "
                              f"message apart, so an absent receiver can miss it), got "
                              f"reduce={ch.reduce!r}")  # fmt: skip
        if kind not in CHURN_CHANNELS or (kind == "server" and ch.reply != "none"):
            raise ConfigError(
                f"channels.{name}: churn: expected a channel kind among neighbors, gossip, push "
                f"or server with reply='none' (deliveries addressed to each client, so an "
                f"absent one can miss them), got {kind!r}"
                + ("" if kind != "server" else f" with reply={ch.reply!r}")
            )


# ----------------------------------------------------------------------------- shared formulas


def scheduled_presence(t: Any, churn: Churn, num_agents: int, xp: Any = np) -> Any:
    """(..., N) bool: the clients present at pull ``t`` (...) of a schedule: client m is
    present unless an absence (m, leave, join) has leave <= t < join."""
    clients, leave, join = (xp.asarray(a) for a in (churn.clients, churn.leave, churn.join))
    t = xp.asarray(t)[..., None]
    away = (t >= leave) & (t < join)  # (..., S)
    mine = clients[:, None] == xp.arange(num_agents)  # (S, N)
    return ~(away[..., :, None] & mine).any(axis=-2)


def markov_presence(present: Any, u: Any, p_leave: Any, p_join: Any, xp: Any = np) -> Any:
    """The presence before a pull from the last one and a uniform ``u`` per client in [0, 1):
    a present client stays unless u < p_leave; an absent one returns if u < p_join."""
    return xp.where(present, u >= p_leave, u < p_join)


def drop_absent(received: Any, present: Any, xp: Any = np) -> tuple[Any, Any]:
    """What an absent client does not receive: ``received`` (..., N) or (..., N, D) bool, the
    messages that reached each client (and slot); ``present`` (..., N). Returns the kept mask
    and the dropped count per run (...)."""
    here = present if received.ndim == present.ndim else present[..., None]
    axes = tuple(range(present.ndim - 1, received.ndim))
    return received & here, (received & ~here).sum(axis=axes)


# ----------------------------------------------------------------------------- numpy engine


class Presence:
    """The numpy engine's churn of B runs: ``present`` (B, N) bool, the clients present at the
    runs' next (or current) pull, drawn from the runs' ``churn`` stream (Markov)."""

    def __init__(self, churn: Churn, stream: Any, num_runs: int, num_agents: int):
        self.churn, self.num_agents = churn, num_agents
        shape = (num_runs, num_agents)
        self._u = stream.buffered("uniform", (num_agents,)) if churn.kind == "markov" else None
        if churn.kind == "markov":
            self.present = np.ones(shape, bool)
        else:
            self.present = np.broadcast_to(self._at(np.ones(num_runs, np.int64)), shape).copy()

    def _at(self, t: np.ndarray) -> np.ndarray:
        return scheduled_presence(t, self.churn, self.num_agents)

    def advance(self, pulls: np.ndarray, moving: np.ndarray) -> None:
        """The presence at pull ``pulls + 1`` of the ``moving`` runs (B,) bool."""
        if self._u is not None:
            churn = self.churn
            new = markov_presence(self.present, self._u.next(moving), churn.p_leave, churn.p_join)
        else:
            new = self._at(pulls + 1)
        self.present = np.where(moving[:, None], new, self.present)

    def silence(self, sends: dict[str, Any], kinds: dict[str, str]) -> dict[str, Any]:
        """The step's messages without those of absent clients (``push`` rows are the server's
        messages to each client: they are dropped at arrival instead)."""
        return {name: (send if kinds[name] == "push" else send & self.present, *rest)
                for name, (send, *rest) in sends.items()}  # fmt: skip

    def deliver(self, deliveries: dict[str, Any]) -> tuple[dict[str, Any], np.ndarray]:
        """The deliveries without what reached absent clients, and the dropped count (B,)."""
        out, dropped = {}, np.zeros(self.present.shape[0], np.int64)
        for name, record in deliveries.items():
            field = "mask" if hasattr(record, "mask") else "received"
            if not hasattr(record, field):  # the server's uploads (reply "none"): nobody receives
                out[name] = record
                continue
            kept, lost = drop_absent(getattr(record, field), self.present)
            out[name] = dataclasses.replace(record, **{field: kept})
            dropped += lost
        return out, dropped

