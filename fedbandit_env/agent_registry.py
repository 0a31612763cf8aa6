"""Agent registry: learners are found by id, never imported by name (DESIGN.md §2).

Installed packages add learners through the ``fedbandit.agents`` entry-point group
(``my_agent = "my_pkg.module:MyTeamPolicy"``); code can also call :func:`register_agent`, with the
class (or factory) itself or its import path ``"module:attr"``.

The registry is per process. A registration made at runtime reaches the workers of the joblib
and Ray executors because every work unit carries its learner's entry (:func:`agent_entry`) and
the worker re-registers it (:func:`ensure_agent`) before running: an import path is imported in
the worker, a class travels by pickle (by reference when its module is importable there, by
value through cloudpickle otherwise).
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Callable
from importlib.metadata import entry_points
from typing import Any

from fedbandit_env.errors import ConfigError, UnknownIdError

ENTRY_POINT_GROUP = "fedbandit.agents"

_AGENTS: dict[str, Callable[..., Any] | str] = {}
_loaded_entry_points = False


def _discover() -> None:
    global _loaded_entry_points
    if _loaded_entry_points:
        return
    _loaded_entry_points = True
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        _AGENTS.setdefault(ep.name, ep.value)


Entry = Callable[..., Any] | str


def register_agent(agent_id: str, entry_point: Entry) -> None:
    """Register a team-policy class (or factory), or its import path ``"module:attr"``, under
    ``agent_id`` (an import path is imported on first use)."""
    if not agent_id or not isinstance(agent_id, str):
        raise ConfigError(f"agent_id: expected a non-empty string, got {agent_id!r}")
    if isinstance(entry_point, str):
        module, sep, attr = entry_point.partition(":")
        if not (module and sep and attr):
            raise ConfigError(
                f"{agent_id}: entry_point: expected 'module:attr' or a callable, "
                f"got {entry_point!r}"
            )
    elif not callable(entry_point):
        raise ConfigError(
            f"{agent_id}: entry_point: expected 'module:attr' or a callable, got {entry_point!r}"
        )
    _AGENTS[agent_id] = entry_point


def agent_entry(agent_id: str) -> Entry:
    """The registered entry of ``agent_id`` (an import path or the loaded callable), to ship to
    another process with the work that needs it."""
    _discover()
    if agent_id not in _AGENTS:
        agent_class(agent_id)  # raises the UnknownIdError with suggestions
    return _AGENTS[agent_id]


def ensure_agent(agent_id: str, entry: Entry) -> None:
    """Make ``agent_id`` resolve to ``entry`` in this process (a worker), unless it already
    does; the entry comes from the registry of the process that planned the work."""
    _discover()
    current = _AGENTS.get(agent_id)
    if current is not entry and current != entry:
        register_agent(agent_id, entry)


def list_agents() -> list[str]:
    """Ids of every registered learner (entry points included), sorted."""
    _discover()
    return sorted(_AGENTS)


def agent_class(agent_id: str) -> Callable[..., Any]:
    _discover()
    if agent_id not in _AGENTS:
        close = difflib.get_close_matches(agent_id, list(_AGENTS), n=3)
        hint = f" Did you mean {close}?" if close else ""
        raise UnknownIdError(
            f"agent id {agent_id!r} is not registered; registered agents: {list_agents()}.{hint}"
        )
    entry = _AGENTS[agent_id]
    if isinstance(entry, str):
        module, _, attr = entry.partition(":")
        entry = getattr(importlib.import_module(module), attr)
        _AGENTS[agent_id] = entry
    return entry


def make_agent(agent_id: str, **kwargs: Any) -> Any:
    """Instantiate a registered learner; unknown keyword arguments raise a clear error."""
    cls = agent_class(agent_id)
    try:
        return cls(**kwargs)
    except ConfigError:  # a checked argument (ConfigTypeError is also a TypeError): as raised
        raise
    except TypeError as err:
        raise ConfigError(f"{agent_id}: bad keyword arguments {sorted(kwargs)}: {err}") from None
