"""Agent registry: learners are found by id, never imported by name (DESIGN.md §2).

Installed packages add learners through the ``fedbandit.agents`` entry-point group
(``my_agent = "my_pkg.module:MyTeamPolicy"``); code can also call :func:`register_agent`.
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


def register_agent(agent_id: str, entry_point: Callable[..., Any] | str) -> None:
    """Register a team-policy class (or factory) under ``agent_id``."""
    if not agent_id or not isinstance(agent_id, str):
        raise ConfigError(f"agent_id: expected a non-empty string, got {agent_id!r}")
    _AGENTS[agent_id] = entry_point


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
    except TypeError as err:
        raise ConfigError(f"{agent_id}: bad keyword arguments {sorted(kwargs)}: {err}") from None
