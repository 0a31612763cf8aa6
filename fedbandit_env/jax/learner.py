"""Learners as pure functions (docs/jax.md, "Learners"): the :class:`JaxLearner` protocol and
the registry of JAX learner ids.

A JAX learner acts for the N agents of one run; the rollout ``vmap``s it over runs. The
protocol is gymnax's, with explicit params:

* ``make_params(facts) -> params``: the learner's run-time parameters on a federation (its
  validated hyperparameters and every derived constant), from the federation's public facts
  (:class:`~fedbandit_env.policy.FederationFacts`, one run); a pure function of the learner's
  configuration and the facts, run in Python before anything is traced, where the facts are
  checked;
* ``init(key, params) -> state``: the learner's state (a pytree) at reset;
* ``act(key, state, obs, params) -> (action, state)``: the
  :class:`~fedbandit_env.jax.types.Action` of the next step from the last
  :class:`~fedbandit_env.jax.types.Observation`.

Nothing is stored on the learner between calls. A learner in the older form (``init(key,
facts)`` and ``act(key, state, obs)``, without ``make_params``) is refused by name (a
:class:`~fedbandit_env.errors.ConfigError` saying what to add); a learner with nothing to
derive returns the facts, or None, from ``make_params``.

Optional attributes, as on a numpy team policy: ``agent_id`` (the row label), ``version`` (the
results version), ``privacy_epsilon`` (the declared epsilon) and ``channel_spec(config)`` (the
channels it needs when the caller names none). Agent i may only use row i of what it observes.

Registered ids are the numpy learners' ids: ``make_jax_agent("ucb1")`` is the JAX port of
``ucb1``. The ports are registered like the numpy learners, through entry points (group
``fedbandit.jax_agents`` in the package's ``pyproject.toml``); a user's own learner is
registered with :func:`register_jax_agent` or an entry point of the same group, and ranked like
any learner.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from importlib.metadata import entry_points
from typing import Any, Protocol, runtime_checkable

import jax

from fedbandit_env.errors import ConfigError, UnknownIdError
from fedbandit_env.jax.types import Observation
from fedbandit_env.per_agent import bad_kwargs_error
from fedbandit_env.policy import FederationFacts, check_event_time
from fedbandit_env.registration import load_entry


@runtime_checkable
class JaxLearner(Protocol):
    """What every JAX learner has: ``make_params``, ``init`` and ``act``."""

    def make_params(self, facts: FederationFacts) -> Any: ...

    def init(self, key: jax.Array, params: Any) -> Any: ...

    def act(self, key: jax.Array, state: Any, obs: Observation, params: Any) -> Any: ...


def _label(learner: Any) -> str:
    return str(getattr(learner, "agent_id", None) or type(learner).__name__)


def check_protocol(learner: Any) -> None:
    """Refuse, by name, a learner that is not on the params protocol: no ``make_params``, or
    an ``act`` that takes no params (the older ``act(key, state, obs)``)."""
    label = _label(learner)
    if not callable(getattr(learner, "make_params", None)):
        raise ConfigError(
            f"{label}: make_params: expected a method make_params(facts) -> params (the "
            "learner's constants, made once per federation; docs/jax.md, 'Learners as pure "
            "functions'), with init(key, params) and act(key, state, obs, params); the older "
            "init(key, facts) / act(key, state, obs) form is no longer run"
        )
    act = getattr(learner, "act", None)
    if not callable(act) or not callable(getattr(learner, "init", None)):
        raise ConfigError(f"{label}: expected methods init(key, params) and act(key, state, "
                          "obs, params)")  # fmt: skip
    try:
        fields = inspect.signature(act).parameters.values()
    except (TypeError, ValueError):  # a builtin or C callable: trust it
        return
    positional = [p for p in fields if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if len(positional) < 4 and not any(p.kind is p.VAR_POSITIONAL for p in fields):
        raise ConfigError(
            f"{label}: act: expected act(key, state, obs, params), got act"
            f"{inspect.signature(act)} (the older form; docs/jax.md, 'Learners as pure "
            "functions')"
        )


def params_of(learner: Any, facts: FederationFacts) -> Any:
    """The learner's params on a federation (``make_params``, where the facts are checked),
    after :func:`check_protocol` and the event-time check (an event clock the learner does not
    declare in ``event_time`` is refused by name: :func:`fedbandit_env.policy.check_event_time`)."""
    check_protocol(learner)
    check_event_time(learner, facts)
    return learner.make_params(facts)


def bound(
    learner: Any, params: Any
) -> tuple[Callable[[jax.Array], Any], Callable[[jax.Array, Any, Observation], Any]]:
    """``(init(key) -> state, act(key, state, obs) -> (action, state))`` with ``params``
    closed over."""

    def init(key: jax.Array) -> Any:
        return learner.init(key, params)

    def act(key: jax.Array, state: Any, obs: Observation) -> Any:
        return learner.act(key, state, obs, params)

    return init, act


def bind(
    learner: Any, facts: FederationFacts
) -> tuple[Callable[[jax.Array], Any], Callable[[jax.Array, Any, Observation], Any]]:
    """``(init(key) -> state, act(key, state, obs) -> (action, state))`` of ``learner`` on a
    federation: the params are made here, once, in Python (their checks run now) and closed
    over."""
    return bound(learner, params_of(learner, facts))


_USER: dict[str, Callable[..., Any]] = {}
GROUP = "fedbandit.jax_agents"


def register_jax_agent(agent_id: str, factory: Callable[..., Any] | str) -> None:
    """Register a JAX learner (a class or factory, or ``"module:attr"``) under ``agent_id``."""
    _USER[agent_id] = factory


def _plugins() -> dict[str, Any]:
    """The installed entry points of :data:`GROUP`: the package's own ports (its
    ``pyproject.toml``) and any plug-in's."""
    return {ep.name: ep for ep in entry_points(group=GROUP)}


def shipped_jax_agents() -> list[str]:
    """The ids of the ports this package ships (its own entry points, by the id of the numpy
    learner each ports)."""
    return sorted(
        name
        for name, ep in _plugins().items()
        if ep.value.partition(":")[0].split(".")[0] in ("agents", "baselines")
    )


def jax_agent_entry(agent_id: str) -> Callable[..., Any] | str | None:
    """The registered entry of a JAX learner id (the user's, a port's or an installed
    plug-in's: a class or factory, or ``"module:attr"``), or None. Imports nothing, so it is
    safe on ids read from a file (the bench looks ids up here, never imports them)."""
    if agent_id in _USER:
        return _USER[agent_id]
    plugin = _plugins().get(agent_id)
    return None if plugin is None else plugin.value


def list_jax_agents() -> list[str]:
    """Every JAX learner id: the ports, the user's and the installed plug-ins'."""
    return sorted({*_USER, *_plugins()})


def make_jax_agent(agent_id: str, **kwargs: Any) -> Any:
    """The JAX learner of an id, built with ``kwargs``; an unknown id lists the known ones, and
    a keyword the learner does not take is a :class:`ConfigError` naming the learner, the
    keyword and the accepted ones."""
    if not isinstance(agent_id, str):
        raise ConfigError(f"agent: expected a JAX learner id (a string), got {agent_id!r:.80}")
    if agent_id in _USER:
        factory = load_entry(_USER[agent_id])
    elif agent_id in (plugins := _plugins()):
        factory = plugins[agent_id].load()
    elif ":" in agent_id:
        factory = load_entry(agent_id)
    else:
        raise UnknownIdError(
            f"agent: {agent_id!r} has no JAX learner; JAX learners: {list_jax_agents()} "
            "(the other learners run on the numpy backend)"
        )
    try:
        learner = factory(**kwargs)
    except ConfigError:  # a checked argument (ConfigTypeError is also a TypeError): as raised
        raise
    except TypeError as err:
        raise bad_kwargs_error(agent_id, factory, kwargs, err) from None
    if not isinstance(learner, JaxLearner):
        raise UnknownIdError(
            f"agent: {agent_id!r} is not a JAX learner (expected make_params(facts), "
            "init(key, params) and act(key, state, obs, params))"
        )
    return learner
