"""The bench's backends (docs/bench.md, "Backends"): ``numpy``, the vector engine that runs
every learner, and ``jax``, the compiled JAX backend (:mod:`fedbandit_env.jax`) that runs JAX
learners (the ports of the numpy learners, and a user's own :class:`~fedbandit_env.jax.JaxLearner`).

A cell's backend is part of its identity (its config, so its hash) and of its rows' results
version, so rows of two backends are never pooled. JAX is imported only when the ``jax``
backend is used: the bench works without the ``jax`` extra, and asking for the backend without
it is a :class:`~fedbandit_env.errors.ConfigError` naming the extra.

JAX learner ids follow the numpy registry's rule for ids read from a file (docs/reliability.md,
"Files are data"): :func:`lookup_jax_learner` finds registered ids (the ports, the user's
:func:`~fedbandit_env.jax.register_jax_agent` ids, installed plug-ins, and ``module:attr`` ids this
process's own code or command line resolved) and never imports a module an id names.
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import Any

from fedbandit_env.bench.datafiles import BACKENDS
from fedbandit_env.errors import ConfigError, UnknownIdError

NUMPY, JAX = BACKENDS
"""The backends a cell can run on (:data:`BACKENDS`); ``numpy`` is the default everywhere."""
JAX_EXTRA = "pip install 'fedbandit[jax]' (in a checkout: pip install -e '.[jax]')"


def check_backend(backend: Any) -> str:
    """``backend`` if it names a backend, else a :class:`ConfigError` naming the option and the
    expected values."""
    if not isinstance(backend, str) or backend not in BACKENDS:
        raise ConfigError(f"backend: expected one of {list(BACKENDS)}, got {backend!r}")
    return backend


def jax_installed() -> bool:
    """Whether JAX can be imported here (looked up, not imported)."""
    try:
        return importlib.util.find_spec("jax") is not None
    except (ImportError, ValueError):
        return False


def jax_backend() -> Any:
    """The :mod:`fedbandit_env.jax` module, imported now; without JAX a :class:`ConfigError`
    naming the backend and the extra to install."""
    try:
        return importlib.import_module("fedbandit_env.jax")
    except ImportError as err:
        detail = "" if "pip install" in str(err) else f" ({err})"
        raise ConfigError(
            f"backend: 'jax' needs JAX, which is not installed here{detail}; {JAX_EXTRA}"
        ) from None


def _learner_module() -> Any:
    return importlib.import_module("fedbandit_env.jax.learner")


def _load(entry: Any) -> Any:
    """A registered entry's class or factory (an import path of a registered id is imported:
    it was registered by code or an installed package, never read from a file)."""
    if callable(entry):
        return entry
    module, _, attr = str(entry).partition(":")
    target: Any = importlib.import_module(module)
    for part in attr.split("."):
        target = getattr(target, part)
    return target


def jax_entry(agent_id: str) -> Any:
    """The JAX registry's entry of ``agent_id`` (shipped with a work unit so that a worker
    process registers it too), or ``agent_id`` itself for an unregistered ``module:attr`` id
    (the worker resolves it again)."""
    entry = _learner_module().jax_agent_entry(agent_id)
    return agent_id if entry is None else entry


def ensure_jax_agent(agent_id: str, entry: Any) -> None:
    """Make ``agent_id`` resolve to ``entry`` in this process (a worker) unless it does."""
    if entry is None or entry == agent_id:
        return
    learner = _learner_module()
    current = learner.jax_agent_entry(agent_id)
    if current is not entry and current != entry:
        learner.register_jax_agent(agent_id, entry)


def lookup_jax_learner(agent_id: Any) -> Any | None:
    """The class or factory a JAX learner id names in this process's registry, or None (also
    when JAX is not installed). Never imports a module that an unregistered id names, and
    builds nothing: safe on ids read from a file."""
    if not isinstance(agent_id, str) or not agent_id or not jax_installed():
        return None
    try:
        entry = _learner_module().jax_agent_entry(agent_id)
        return None if entry is None else _load(entry)
    except (ImportError, AttributeError):  # a port not in this installation, a broken plug-in
        return None


def resolve_jax_learner(agent_id: str) -> str:
    """Make ``agent_id`` a JAX learner of this process's registry: a registered id as it is; a
    ``module:attr`` id that code or the command line names is imported and registered under
    itself, so that suites sweep it, worker processes find it and its rows are ranked. An
    unknown id is an :class:`UnknownIdError` listing the JAX learners."""
    fj = jax_backend()
    learner = _learner_module()
    if learner.jax_agent_entry(agent_id) is not None:
        return agent_id
    module, sep, attr = agent_id.partition(":")
    if not (module and sep and attr):
        raise UnknownIdError(
            f"agent: {agent_id!r} has no JAX learner; JAX learners: {fj.list_jax_agents()} "
            "(the other learners run on the numpy backend)"
        )
    try:
        _load(agent_id)
    except (ImportError, AttributeError) as err:
        raise UnknownIdError(
            f"agent: {agent_id!r} cannot be imported as 'module:attr' ({type(err).__name__}: "
            f"{err}); JAX learners: {fj.list_jax_agents()}"
        ) from None
    fj.register_jax_agent(agent_id, agent_id)
    return agent_id


def jax_learner(agent: Any, agent_kwargs: dict[str, Any], name: str | None = None):
    """The JAX learner of ``agent`` and its row label: an id (registered or ``module:attr``,
    :func:`fedbandit_env.jax.make_jax_agent`, built with ``agent_kwargs``), a learner class or
    factory (built with ``agent_kwargs``), or a learner object (``init`` and ``act``). The
    label is ``name``, else the id, the learner's ``agent_id``, or its class name."""
    fj = jax_backend()
    if isinstance(agent, str):
        if ":" in agent and _learner_module().jax_agent_entry(agent) is None:
            resolve_jax_learner(agent)  # named by code: registered, so its rows rank here
        return fj.make_jax_agent(agent, **agent_kwargs), name or agent
    if isinstance(agent, fj.JaxLearner) and not isinstance(agent, type):
        if agent_kwargs:
            raise ConfigError(
                f"agent_kwargs: a built JAX learner takes no kwargs, got {sorted(agent_kwargs)}"
            )
        learner = agent
    elif callable(agent):
        try:
            learner = agent(**agent_kwargs)
        except ConfigError:
            raise
        except TypeError as err:
            raise ConfigError(
                f"agent_kwargs: bad keyword arguments {sorted(agent_kwargs)}: {err}"
            ) from None
        if not isinstance(learner, fj.JaxLearner):
            raise ConfigError(
                f"agent: {agent!r} did not build a JAX learner (expected init(key, facts) and "
                "act(key, state, obs))"
            )
    else:
        raise ConfigError(
            f"agent: expected a JAX learner id, class or object (init(key, facts) and "
            f"act(key, state, obs)), got {agent!r:.80}"
        )
    label = name or getattr(learner, "agent_id", None)
    if not label:
        label = agent.__name__ if isinstance(agent, type) else type(learner).__name__
    return learner, str(label)


def jax_class_version(agent_id: str) -> tuple[int, str] | None:
    """(results version, results note) of a registered JAX learner, read from its class
    attributes without building it (``version``, default 1 for a class; ``results_note``); None
    when the id is not registered here (or names a factory without a ``version``)."""
    target = lookup_jax_learner(agent_id)
    if target is None:
        return None
    version = getattr(target, "version", None if not isinstance(target, type) else 1)
    if isinstance(version, bool) or not isinstance(version, int):
        return None
    note = getattr(target, "results_note", "")
    return version, note if isinstance(note, str) else ""


def lookup_learner(agent_id: Any, backend: str) -> Any | None:
    """The learner an id names in this process's registry of ``backend`` (never imported)."""
    from fedbandit_env.agent_registry import lookup_agent

    return lookup_jax_learner(agent_id) if backend == JAX else lookup_agent(agent_id)


def learner_known(agent_id: str, backend: str) -> bool:
    """Whether ``agent_id`` names a learner of ``backend``: registered, or (named by code) a
    ``module:attr`` that imports."""
    if backend == NUMPY:
        from fedbandit_env.agent_registry import is_known

        return is_known(agent_id)
    if not jax_installed():
        return False
    try:
        resolve_jax_learner(agent_id)
    except (ConfigError, UnknownIdError):
        return False
    return True


def list_jax_learners() -> list[str]:
    """Every JAX learner id (empty without JAX)."""
    return jax_backend().list_jax_agents() if jax_installed() else []
