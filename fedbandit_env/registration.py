"""Environment registry: ``make``, ``make_vec``, ``register``, ``spec`` and ``list_envs``.

Ids follow the PettingZoo/Gymnasium form ``Namespace/Name-vN`` (docs/environments.md). Entry points are
callables or ``"module:attr"`` strings imported lazily. Unknown ids and keyword arguments raise
errors that list what exists. Each id is also registered in PettingZoo's own registry when the
installed PettingZoo has one (1.27+), so ``pettingzoo.make("parallel", id)`` works too: that entry
delegates to :func:`make`, so it applies our defaults and our keyword-argument check.

Every id has an AEC view too (:func:`make_aec`, ``pettingzoo.make("aec", id)``), derived with
``pettingzoo.utils.parallel_to_aec`` as PettingZoo's own parallel families do. ``max_cycles``
(PettingZoo's name for the episode length) is accepted wherever ``horizon`` is, as its alias: a
call's ``max_cycles`` overrides the id's default horizon; a call giving both with different
values raises.

Registering an id again replaces it in both registries with a ``UserWarning`` (Gymnasium's
convention), so both always build the same environment.
"""

from __future__ import annotations

import difflib
import importlib
import inspect
import re
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from fedbandit_env.config import resolve_max_cycles
from fedbandit_env.errors import ConfigError, UnknownIdError

ID_PATTERN = re.compile(
    r"^(?:(?P<namespace>[\w:.-]+)/)?(?P<name>[\w:.-]+?)(?:-v(?P<version>\d+))?$"
)


@dataclass(frozen=True)
class EnvSpec:
    """A registered environment: id, entry points and default keyword arguments."""

    id: str
    entry_point: Callable[..., Any] | str
    vector_entry_point: Callable[..., Any] | str | None = None
    kwargs: dict[str, Any] = field(default_factory=dict)
    description: str = ""
    accepted_kwargs: tuple[str, ...] | None = None
    version: int = 1
    """Results version: bump it when a change moves this environment's trajectories or random
    streams (docs/bench.md); stored rows of another version are never pooled with new ones."""


_REGISTRY: dict[str, EnvSpec] = {}


def load_entry(entry: Callable[..., Any] | str) -> Callable[..., Any]:
    """A registered entry point: the callable itself, or ``"module:attr"`` imported (an entry
    registered by code or an installed package, never one read from a file)."""
    if callable(entry):
        return entry
    module, _, attr = entry.partition(":")
    return getattr(importlib.import_module(module), attr)


def register(
    id: str,
    entry_point: Callable[..., Any] | str,
    *,
    vector_entry_point: Callable[..., Any] | str | None = None,
    kwargs: dict[str, Any] | None = None,
    description: str = "",
    accepted_kwargs: tuple[str, ...] | None = None,
    version: int = 1,
) -> EnvSpec:
    """Register an environment id (``Namespace/Name-vN``); an existing id is overridden with a
    ``UserWarning``, here and in PettingZoo's registry. ``version`` is the environment's results
    version (:attr:`EnvSpec.version`)."""
    if not ID_PATTERN.match(id) or "-v" not in id:
        raise ConfigError(f"id: expected 'Namespace/Name-vN', got {id!r}")
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise ConfigError(f"{id}: version: expected a positive int, got {version!r}")
    spec_ = EnvSpec(
        id,
        entry_point,
        vector_entry_point,
        dict(kwargs or {}),
        description,
        accepted_kwargs,
        version,
    )
    overriding = id in _REGISTRY
    if overriding:
        warnings.warn(f"Overriding environment {id!r} already in the registry.", stacklevel=2)
    _REGISTRY[id] = spec_
    _register_with_pettingzoo(spec_, warned=overriding)
    return spec_


class _PettingZooEntry:
    """PettingZoo's entry point of one of our ids: builds it with :func:`make` or
    :func:`make_aec` (our defaults, our unknown-kwarg error), so the registries cannot
    disagree."""

    def __init__(self, env_id: str, aec: bool = False):
        self.env_id = env_id
        self.aec = aec

    def __call__(self, **kwargs: Any) -> Any:
        return (make_aec if self.aec else make)(self.env_id, **kwargs)

    def __repr__(self) -> str:
        return f"fedbandit_env.{'make_aec' if self.aec else 'make'}({self.env_id!r}, ...)"


def _register_with_pettingzoo(spec_: EnvSpec, *, warned: bool) -> None:
    try:
        from pettingzoo.env_registry.registration import register as pz_register
    except ImportError:  # pettingzoo < 1.27 has no registry
        return
    with warnings.catch_warnings():
        if warned:  # PettingZoo would repeat our override warning
            warnings.filterwarnings(
                "ignore", message="Overriding environment", category=UserWarning
            )
        pz_register("parallel", spec_.id, entry_point=_PettingZooEntry(spec_.id), kwargs={})
        pz_register("aec", spec_.id, entry_point=_PettingZooEntry(spec_.id, aec=True), kwargs={})


def list_envs() -> list[str]:
    """Registered environment ids, sorted."""
    return sorted(_REGISTRY)


def spec(id: str) -> EnvSpec:
    """The :class:`EnvSpec` of an id; unknown ids raise an error listing the registered ones."""
    if id in _REGISTRY:
        return _REGISTRY[id]
    close = difflib.get_close_matches(id, list(_REGISTRY), n=3)
    hint = f" Did you mean {close}?" if close else ""
    raise UnknownIdError(f"env id {id!r} is not registered; registered ids: {list_envs()}.{hint}")


def check_env_id(env_id: Any, field: str = "env_id") -> str:
    """``env_id`` as a registered id, or a clear error naming ``field`` (a wrong type is a
    ``TypeError``, an unknown id an :class:`UnknownIdError` with suggestions)."""
    from fedbandit_env.validation import ConfigTypeError

    if not isinstance(env_id, str):
        raise ConfigTypeError(f"{field}: expected a registered id (str), got {env_id!r}")
    try:
        spec(env_id)
    except UnknownIdError as err:
        raise UnknownIdError(f"{field}: {err}") from None
    return env_id


def _check_kwargs(spec_: EnvSpec, kwargs: dict[str, Any], extra: tuple[str, ...]) -> None:
    accepted = spec_.accepted_kwargs
    if accepted is None:
        return
    unknown = sorted(set(kwargs) - set(accepted) - set(extra))
    if unknown:
        raise ConfigError(
            f"{spec_.id}: unknown keyword argument(s) {unknown}; accepted: {sorted(accepted)}"
        )


def _max_cycles_alias(kwargs: dict[str, Any]) -> dict[str, Any]:
    """A call's ``max_cycles`` as its ``horizon`` (so it overrides the id's default horizon)."""
    if kwargs.get("max_cycles") is None:
        kwargs.pop("max_cycles", None)
        return kwargs
    kwargs = dict(kwargs)
    kwargs["horizon"] = resolve_max_cycles(kwargs.get("horizon"), kwargs.pop("max_cycles"))
    return kwargs


def make(id: str, **kwargs: Any) -> Any:
    """A PettingZoo ``ParallelEnv`` for a registered id (spec defaults overridden by kwargs;
    its ``metadata["name"]`` is derived from the id)."""
    spec_ = spec(id)
    _check_kwargs(spec_, kwargs, ("render_mode", "max_cycles"))
    kwargs = _max_cycles_alias(kwargs)
    env = load_entry(spec_.entry_point)(**{**spec_.kwargs, **kwargs})
    from fedbandit_env.parallel_env import FedBanditParallelEnv

    if isinstance(env, FedBanditParallelEnv):
        env.name_from_id(id)
    return env


def make_aec(id: str, **kwargs: Any) -> Any:
    """The AEC view of a registered id: ``pettingzoo.utils.parallel_to_aec(make(id, ...))``."""
    from pettingzoo.utils.conversions import parallel_to_aec

    return parallel_to_aec(make(id, **kwargs))


def make_vec(id: str, num_runs: int = 1, **kwargs: Any) -> Any:
    """The vector view (B = ``num_runs`` runs as arrays) of a registered id."""
    spec_ = spec(id)
    if spec_.vector_entry_point is None:
        raise ConfigError(f"{id}: has no vector view registered")
    _check_kwargs(spec_, kwargs, ("max_cycles", "random_streams"))
    kwargs = _max_cycles_alias(kwargs)
    return load_entry(spec_.vector_entry_point)(num_runs=num_runs, **{**spec_.kwargs, **kwargs})


def signature_kwargs(fn: Callable[..., Any]) -> tuple[str, ...]:
    """Keyword parameters of a config builder, for unknown-kwarg errors."""
    return tuple(
        name
        for name, p in inspect.signature(fn).parameters.items()
        if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)
    )
