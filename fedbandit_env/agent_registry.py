"""Agent registry: learners are found by id, never imported by name (docs/architecture.md, "Registry").

Installed packages add learners through the ``fedbandit.agents`` entry-point group
(``my_agent = "my_pkg.module:MyTeamPolicy"``); code can also call :func:`register_agent`, with the
class (or factory) itself or its import path ``"module:attr"``.

The registry is per process. A registration made at runtime reaches the workers of the joblib
and Ray executors because every work unit carries its learner's entry (:func:`agent_entry`) and
the worker re-registers it (:func:`ensure_agent`) before running: an import path is imported in
the worker, a class travels by pickle (by reference when its module is importable there, by
value through cloudpickle otherwise).

Three learner shapes are accepted (docs/writing-agents.md): a batched ``TeamPolicy`` class, a
``PerAgentLearner`` class (one instance per agent, run through
:class:`fedbandit_env.per_agent.PerAgentTeam`), and, through an unregistered ``"module:attr"``
id, a PettingZoo parallel-view policy callable. Ids that are not registered also resolve without
registration: ``"module:attr"`` imports the attribute (a learner class, or a policy callable
whose ``agent_kwargs`` are bound as keyword arguments), and ``"mabwiser:<LearningPolicy>"`` /
``"smpybandits:<Policy>"`` build the library adapters of :mod:`fedbandit_env.library_learners`.
Such ids never enter the registry (``list_agents`` and the suites' sweeps do not see them), and
workers resolve them the same way.
"""

from __future__ import annotations

import difflib
import functools
import importlib
import inspect
from collections.abc import Callable
from importlib.metadata import entry_points
from typing import Any

from fedbandit_env.errors import ConfigError, UnknownIdError

ENTRY_POINT_GROUP = "fedbandit.agents"

_AGENTS: dict[str, Callable[..., Any] | str] = {}
_RESOLVED: dict[str, Any] = {}
"""Unregistered ``module:attr`` ids that code or the command line of this process resolved
(:func:`agent_class`): :func:`lookup_agent` finds them, so rows this process wrote can be read
back; a file can never add one."""
_loaded_entry_points = False

LIBRARY_PREFIXES = {
    "mabwiser": "fedbandit_env.library_learners:MABWiserLearner",
    "smpybandits": "fedbandit_env.library_learners:SMPyBanditsLearner",
}
"""Id prefixes of other bandit libraries' policies (``mabwiser:UCB1``) and their adapters."""


def _discover() -> None:
    global _loaded_entry_points
    if _loaded_entry_points:
        return
    _loaded_entry_points = True
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        _AGENTS.setdefault(ep.name, ep.value)


Entry = Callable[..., Any] | str


def register_agent(agent_id: str, entry_point: Entry) -> None:
    """Register a learner class (``TeamPolicy`` or ``PerAgentLearner``) or factory, or its import
    path ``"module:attr"``, under ``agent_id`` (an import path is imported on first use)."""
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


def _import(path: str) -> Any:
    module, _, attr = path.partition(":")
    target: Any = importlib.import_module(module)
    for part in attr.split("."):
        target = getattr(target, part)
    return target


def is_dynamic(agent_id: str) -> bool:
    """Whether an unregistered id names a library policy or a ``module:attr`` import path."""
    _discover()
    if agent_id in _AGENTS or not isinstance(agent_id, str):
        return False
    prefix, sep, rest = agent_id.partition(":")
    return bool(prefix and sep and rest)


def _resolve_dynamic(agent_id: str) -> Any:
    prefix, _, rest = agent_id.partition(":")
    if prefix in LIBRARY_PREFIXES:
        return _import(LIBRARY_PREFIXES[prefix])
    if agent_id in _RESOLVED:
        return _RESOLVED[agent_id]
    try:
        target = _import(agent_id)
    except (ImportError, AttributeError) as err:
        raise UnknownIdError(
            f"agent id {agent_id!r} is not registered and cannot be imported as 'module:attr' "
            f"({type(err).__name__}: {err}); registered agents: {list_agents()}"
        ) from None
    except Exception as err:  # the module itself fails: a syntax error, an exception at import
        raise UnknownIdError(
            f"agent id {agent_id!r}: importing module {prefix!r} raised "
            f"{type(err).__name__}: {_where_failed(err)} (--debug shows the traceback)"
        ) from err
    _RESOLVED[agent_id] = target
    return target


def _where_failed(err: Exception) -> str:
    """A failed import in one line: the message and the file and line it points at."""
    if isinstance(err, SyntaxError):
        return f"{err.msg} ({err.filename}, line {err.lineno})"
    tb = err.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    where = f" ({tb.tb_frame.f_code.co_filename}, line {tb.tb_lineno})" if tb is not None else ""
    return f"{err}{where}"


def lookup_agent(agent_id: Any) -> Any | None:
    """The learner ``agent_id`` names in this process's registry, or None; for ids read from a
    file (a results store, a reference or claims file). Never imports a module that the id
    names: it finds built-in and entry-point learners, ids registered in code
    (:func:`register_agent`), ``module:attr`` ids that this process's own code or command line
    already resolved, and the library adapters (``mabwiser:``, ``smpybandits:``, whose policy
    name is checked by the adapter against the library's own list when a learner is built).
    Nothing is instantiated (docs/reliability.md, "Files are data")."""
    if not isinstance(agent_id, str) or not agent_id:
        return None
    _discover()
    if agent_id in _AGENTS:
        try:
            return agent_class(agent_id)
        except (ImportError, AttributeError):  # a broken plug-in: not usable here
            return None
    if agent_id in _RESOLVED:
        return _RESOLVED[agent_id]
    prefix, sep, rest = agent_id.partition(":")
    if sep and rest and prefix in LIBRARY_PREFIXES:
        return _import(LIBRARY_PREFIXES[prefix])
    return None


def without_trust_flags(kwargs: Any) -> dict[str, Any]:
    """Learner kwargs read from a file, with every trust flag dropped (``trust_model`` and any
    other key starting with ``trust``): a file never marks itself or another file trusted, so a
    stored ``"trust_model": true`` is ignored (docs/reliability.md, "Files are data")."""
    return {k: v for k, v in dict(kwargs).items() if not str(k).startswith("trust")}


def class_version(agent_id: str) -> tuple[int, str] | None:
    """(results version, results note) of a registered learner, read from its class attributes
    without building it: ``version`` (default 1) and ``results_note`` (the library adapters
    compute theirs with ``class_results_note()``). None when the id is not registered here or
    its entry is a factory without a ``version`` attribute (only an instance would tell)."""
    target = lookup_agent(agent_id)
    if target is None:
        return None
    version = getattr(target, "version", None if not isinstance(target, type) else 1)
    if isinstance(version, bool) or not isinstance(version, int):
        return None
    note_of = getattr(target, "class_results_note", None)
    note = note_of() if callable(note_of) else getattr(target, "results_note", "")
    return version, note if isinstance(note, str) else ""


def is_known(agent_id: str) -> bool:
    """Whether ``agent_id`` is registered or resolves as a library or ``module:attr`` id."""
    if agent_id in list_agents():
        return True
    if not is_dynamic(agent_id):
        return False
    try:
        _resolve_dynamic(agent_id)
    except UnknownIdError:
        return False
    return True


def agent_entry(agent_id: str) -> Entry:
    """The registered entry of ``agent_id`` (an import path or the loaded callable), to ship to
    another process with the work that needs it (an unregistered library or ``module:attr`` id
    is its own entry: the worker resolves it again)."""
    _discover()
    if is_dynamic(agent_id):
        return agent_id
    if agent_id not in _AGENTS:
        agent_class(agent_id)  # raises the UnknownIdError with suggestions
    return _AGENTS[agent_id]


def ensure_agent(agent_id: str, entry: Entry) -> None:
    """Make ``agent_id`` resolve to ``entry`` in this process (a worker), unless it already
    does; the entry comes from the registry of the process that planned the work."""
    _discover()
    if entry == agent_id and is_dynamic(agent_id):
        return
    current = _AGENTS.get(agent_id)
    if current is not entry and current != entry:
        register_agent(agent_id, entry)


def list_agents() -> list[str]:
    """Ids of every registered learner (entry points included), sorted."""
    _discover()
    return sorted(_AGENTS)


def agent_class(agent_id: str) -> Callable[..., Any]:
    _discover()
    if is_dynamic(agent_id):
        return _resolve_dynamic(agent_id)
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
    """Build a learner by id, as a team policy (a per-agent learner or a policy callable comes
    wrapped in its adapter); unknown keyword arguments raise a clear error."""
    from fedbandit_env.per_agent import as_team_policy, per_agent_team

    cls = agent_class(agent_id)
    if is_dynamic(agent_id):
        prefix, _, policy = agent_id.partition(":")
        if prefix in LIBRARY_PREFIXES:
            return per_agent_team(cls, agent_id, {"policy": policy, **kwargs})
        if not isinstance(cls, type):  # a parallel-view policy callable
            try:
                inspect.signature(cls).bind({}, {}, **kwargs)
            except TypeError as err:
                raise ConfigError(
                    f"{agent_id}: bad keyword arguments {sorted(kwargs)}: expected "
                    f"policy(observations, infos, **kwargs): {err}"
                ) from None
            except ValueError:  # no signature to check (a builtin)
                pass
            policy_fn = functools.partial(cls, **kwargs) if kwargs else cls
            return as_team_policy(policy_fn, agent_id)
    if isinstance(cls, type):
        return as_team_policy(cls, agent_id, kwargs)
    try:
        made = cls(**kwargs)
    except ConfigError:  # a checked argument (ConfigTypeError is also a TypeError): as raised
        raise
    except TypeError as err:
        raise ConfigError(f"{agent_id}: bad keyword arguments {sorted(kwargs)}: {err}") from None
    return as_team_policy(made, agent_id)
