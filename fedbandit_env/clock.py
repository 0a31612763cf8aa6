"""Who pulls at an event: the ``clock`` option of an environment (docs/time.md, "clock").

Every environment is lock-step by default (``"sync"``): all N agents pull at every step, and the
horizon T counts these rounds (N T pulls). An event clock makes one client pull per engine step,
as in the asynchronous federated linear bandits of Li & Wang (AISTATS 2022, Sec. 3: one client
active per event) and He, Wang, Min & Gu (NeurIPS 2022, Sec. 3: agents arrive in an arbitrary
order, regret bounded in the sum of the agents' pulls):

* ``{"kind": "one_random"}``: the active client is uniform over the N clients, drawn afresh at
  every event (with replacement).
* ``{"kind": "poisson", "rates": [lambda_1, ...], "stragglers": {"frac": f, "slowdown": k}}``:
  client m fires at rate lambda_m (default 1 for all); the events are the superposition of the
  N Poisson processes, so the client of an event is m with probability lambda_m / sum(lambda)
  and the time between events is exponential with rate sum(lambda). ``stragglers`` multiplies the
  rates of round(f N) clients, drawn per run, by k (f = 0.2, k = 0.1 when given as ``{}``).
* ``{"kind": "trace", "clients": [c_1, ..., c_T]}``: the client of each event, replayed (a
  logged event order); it must hold at least T entries.

Under an event clock the horizon T counts events, that is pulls: a run makes T pulls in all, T_m
of them by client m (sum_m T_m = T). Regret is charged per pull to the client that pulled.

The draws come from a run's own ``clock`` stream (:data:`fedbandit_env.seeding.STREAMS`), so no
other draw moves. Everything is checked by name: a wrong kind, key or value is a
:class:`~fedbandit_env.errors.ConfigError` naming ``clock``, the field and what it accepts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from fedbandit_env.errors import ConfigError
from fedbandit_env.validation import check_int, check_option_keys, check_real, option_kind

CLOCK_KINDS: tuple[str, ...] = ("sync", "one_random", "poisson", "trace")
"""The accepted ``clock`` kinds (a str, or a dict with ``"kind"``)."""

_KEYS = {
    "one_random": ("kind",),
    "poisson": ("kind", "rates", "stragglers"),
    "trace": ("kind", "clients"),
}
STRAGGLERS = {"frac": 0.2, "slowdown": 0.1}
"""The straggler defaults: a fifth of the clients at a tenth of their rate."""


@dataclass(frozen=True, eq=False)
class Clock:
    """A validated event clock (module docstring): ``kind``, the clients' base ``rates`` (N,)
    (poisson; ones for one_random), the stragglers' ``frac`` and ``slowdown``, and the
    replayed ``clients`` (T,) of a trace."""

    kind: str
    rates: np.ndarray
    frac: float = 0.0
    slowdown: float = 1.0
    clients: np.ndarray | None = None

    @property
    def timed(self) -> bool:
        """Whether events carry Poisson time stamps (else an event's time is its index)."""
        return self.kind == "poisson"

    def __reduce__(self) -> Any:  # pickles (worker processes) by value
        return (Clock, (self.kind, self.rates, self.frac, self.slowdown, self.clients))


def clock_option(value: Any, *, num_agents: int, horizon: int) -> Clock | None:
    """The :class:`Clock` of a ``clock`` argument, or None for lock-step (None or ``"sync"``)."""
    if value is None or (isinstance(value, str) and value == "sync"):
        return None
    if isinstance(value, str) and value == "one_random":
        value = {"kind": "one_random"}
    forms = "None, 'sync', 'one_random', or a dict with 'kind'"
    kind = option_kind("clock", value, CLOCK_KINDS, forms)
    if kind == "sync":
        return None
    check_option_keys("clock", value, kind, _KEYS[kind])
    ones = np.ones(num_agents)
    if kind == "one_random":
        return Clock("one_random", ones)
    if kind == "trace":
        return Clock("trace", ones, clients=_trace(value.get("clients"), num_agents, horizon))
    rates = ones if value.get("rates") is None else _rates(value["rates"], num_agents)
    frac, slowdown = 0.0, 1.0
    if value.get("stragglers") is not None:
        frac, slowdown = _stragglers(value["stragglers"])
    rates.setflags(write=False)
    return Clock("poisson", rates, frac, slowdown)


def _rates(value: Any, num_agents: int) -> np.ndarray:
    try:
        rates = np.array(value, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise ConfigError(f"clock: rates: expected {num_agents} positive numbers, got "
                          f"{value!r}") from err  # fmt: skip
    if rates.shape != (num_agents,) or not np.isfinite(rates).all() or (rates <= 0).any():
        raise ConfigError(f"clock: rates: expected {num_agents} finite positive numbers (one "
                          f"per client), got {value!r}")  # fmt: skip
    return rates


def _stragglers(value: Any) -> tuple[float, float]:
    if not isinstance(value, Mapping) or set(value) - set(STRAGGLERS):
        raise ConfigError(f"clock: stragglers: expected a dict with keys among "
                          f"{list(STRAGGLERS)}, got {value!r}")  # fmt: skip
    spec = {**STRAGGLERS, **value}
    frac = check_real("stragglers.frac", spec["frac"], low=0.0, high=1.0, where="clock")
    slowdown = check_real("stragglers.slowdown", spec["slowdown"], low=0.0, low_open=True,
                          where="clock")  # fmt: skip
    return frac, slowdown


def _trace(value: Any, num_agents: int, horizon: int) -> np.ndarray:
    if value is None or isinstance(value, str | bytes) or not hasattr(value, "__len__"):
        raise ConfigError(f"clock: 'trace' expects 'clients': a list of at least {horizon} "
                          f"client ids in [0, {num_agents - 1}], got {value!r}")  # fmt: skip
    clients = np.array(
        [check_int("clients", c, minimum=0, maximum=num_agents - 1, where="clock") for c in value],
        dtype=np.int64,
    )
    if len(clients) < horizon:
        raise ConfigError(f"clock: clients: expected at least horizon={horizon} client ids (one "
                          f"per event), got {len(clients)}")  # fmt: skip
    clients = clients[:horizon]
    clients.setflags(write=False)
    return clients


class EventClock:
    """The numpy engine's event clock of B runs: who pulls at the next event (``active``
    (B, N) bool, one client per run) and the time stamp of that event (``time`` (B,)), drawn
    from the runs' ``clock`` stream (child streams ``clients``, ``gaps``, ``stragglers``)."""

    @classmethod
    def of(cls, clock: Clock | None, streams: Any, num_agents: int,
           present: np.ndarray | None = None) -> EventClock | None:  # fmt: skip
        """The clock of an environment's runs (``streams(name)`` their named streams), drawn up
        to its first event among the ``present`` clients (B, N) (all without churn); None under
        lock-step."""
        if clock is None:
            return None
        stream = streams("clock")
        return cls(clock, stream, stream.num_runs, num_agents, present)

    def only_active(self, who: np.ndarray, *drawn: np.ndarray) -> tuple[np.ndarray, ...]:
        """The agents that pulled (``who`` (B, 1) the pulling runs, with the active client) and
        the step's draws (B, N) kept for them only (0 for the others)."""
        who = self.active & who
        return (who, *(np.where(who, x, 0.0) for x in drawn))

    def stamp(self, obs: Any, pulled: np.ndarray, moving: np.ndarray | None = None,
              present: np.ndarray | None = None) -> None:  # fmt: skip
        """Write the clock's fields into an engine observation: ``pulled`` (B, N) the clients
        that pulled at this step; then, for the ``moving`` runs, draw their next event among the
        ``present`` clients and give ``active`` (B, N), the client of each run's next event, and
        ``time`` (B,) its stamp."""
        if moving is not None:
            self.advance(moving, present)
        obs.pulled = np.broadcast_to(pulled, self.active.shape).copy()
        obs.active, obs.time = self.active.copy(), self.time.copy()

    def __init__(self, clock: Clock, stream: Any, num_runs: int, num_agents: int,
                 present: np.ndarray | None = None):  # fmt: skip
        self.clock, self.num_agents = clock, num_agents
        rates = np.broadcast_to(clock.rates, (num_runs, num_agents)).copy()
        slow = round(clock.frac * num_agents)
        if slow:  # each run's stragglers, a uniformly random subset of round(frac N) clients
            gens = stream.child("stragglers").generators
            for b, gen in enumerate(gens):  # once per reset
                rates[b, gen.permutation(num_agents)[:slow]] *= clock.slowdown
        self.rates = rates
        self.cumulative = client_cdf(rates)
        self.clients = stream.child("clients").buffered("uniform", ())
        self.gaps = stream.child("gaps").buffered("uniform", ()) if clock.timed else None
        self.event = np.zeros(num_runs, np.int64)  # events drawn so far, per run
        self.time = np.zeros(num_runs)
        self.active = np.zeros((num_runs, num_agents), bool)
        self.advance(np.ones(num_runs, bool), present)

    def advance(self, moving: np.ndarray, present: np.ndarray | None = None) -> None:
        """Draw the next event of the ``moving`` runs (B,) bool: its client and time stamp;
        with churn, among the ``present`` clients (B, N) (:func:`clock_weights`)."""
        rates, cumulative = self.rates, self.cumulative
        if present is not None:
            rates = clock_weights(self.rates, present)
            cumulative = client_cdf(rates)
        if self.clock.kind == "trace":
            index = np.minimum(self.event, len(self.clock.clients) - 1)
            client = self.clock.clients[index]
        else:
            client = client_of(self.clients.next(moving), cumulative)
        now = one_hot(client, self.num_agents)
        if present is not None:  # nobody present: the event passes without a pull
            now = now & present
        self.active = np.where(moving[:, None], now, self.active)
        if self.gaps is not None:
            gap = event_gap(self.gaps.next(moving), rates.sum(axis=1))
            self.time = np.where(moving, self.time + gap, self.time)
        else:  # the event's index: 0, 1, 2, ...
            self.time = np.where(moving, self.event.astype(np.float64), self.time)
        self.event = self.event + moving


# ----------------------------------------------------------------------------- shared formulas


def client_cdf(rates: Any, xp: Any = np) -> Any:
    """The cumulative client probabilities (..., N) of the rates (..., N): lambda_m / sum."""
    total = rates.sum(axis=-1, keepdims=True)
    return xp.cumsum(rates / total, axis=-1)


def clock_weights(rates: Any, present: Any, xp: Any = np) -> Any:
    """The clock rates (..., N) under churn (docs/time.md, "churn"): an absent client's share
    is redrawn among the present ones (its rate is 0); all the rates where nobody is present,
    so that the event (with no client) still passes and is stamped."""
    weights = xp.where(present, rates, 0.0)
    return xp.where(weights.sum(axis=-1, keepdims=True) > 0, weights, rates)


def client_of(u: Any, cumulative: Any, xp: Any = np) -> Any:
    """The client of an event from one uniform ``u`` (...) in [0, 1): the first m with
    u < F_m, i.e. the number of F_m <= u (the last client if rounding left F_N below 1)."""
    n = cumulative.shape[-1]
    return xp.minimum((cumulative <= u[..., None]).sum(axis=-1), n - 1)


def event_gap(u: Any, total_rate: Any, xp: Any = np) -> Any:
    """The time to the next event of N superposed Poisson clocks from one uniform ``u`` in
    [0, 1): an exponential of rate sum(lambda), -log(1 - u) / sum(lambda)."""
    return -xp.log1p(-u) / total_rate


def one_hot(client: Any, num_agents: int, xp: Any = np) -> Any:
    """(..., N) bool: True at each run's ``client``."""
    return client[..., None] == xp.arange(num_agents)
