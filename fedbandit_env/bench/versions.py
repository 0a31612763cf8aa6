"""Results versions: which code produced a stored row (DESIGN.md §5, docs/bench.md).

A row's results version is ``"fedbandit <package version> / env <env id> v<env version> /
learner <learner id> v<learner version>"``: the package version, the environment's registered
``version`` (:func:`fedbandit_env.register`, default 1) and the learner's ``version`` attribute
(``TeamPolicy.version`` / ``PerAgentLearner.version``, default 1), followed by the learner's
optional ``results_note`` in parentheses (the library adapters put the library's version there). A change that moves an
environment's or a learner's results bumps its version, so rows of the old code never pool with
rows of the new one: the store keys rows by (cell hash, results version, seed) and the
leaderboard ranks only rows of the current version, noting the stale ones.
"""

from __future__ import annotations

from typing import Any

from fedbandit_env.registration import spec


def package_version() -> str:
    from fedbandit_env import __version__

    return __version__


def results_version(env_id: str, agent_id: str, policy: Any) -> str:
    """The results version of ``policy`` (a built learner, labelled ``agent_id``) on ``env_id``."""
    version = int(getattr(policy, "version", 1))
    return _format(env_id, spec(env_id).version, agent_id, version, getattr(policy, "results_note", ""))


def _format(env_id: str, env_version: int, agent_id: str, version: int, note: str) -> str:
    return (
        f"fedbandit {package_version()} / env {env_id} v{env_version} / "
        f"learner {agent_id} v{version}" + (f" ({note})" if note else "")
    )


def wrapper_suffix(privacy: Any) -> str:
    """The part of a results version that names the privacy wrapper (empty without one)."""
    from fedbandit_env.bench.evaluate import PRIVACY_WRAPPER_VERSION

    return f" / privacy wrapper v{PRIVACY_WRAPPER_VERSION}" if privacy else ""


def registered_results_version(env_id: str, agent_id: str, privacy: Any = None) -> str | None:
    """The results version rows of (``env_id``, ``agent_id``) get now, from the registries alone:
    the environment's registered version and the learner's class attributes
    (:func:`fedbandit_env.agent_registry.class_version`). Nothing is built or imported, so it is
    safe on ids read from a file; None when either id is not registered in this process (or the
    learner is a factory without a ``version`` attribute)."""
    from fedbandit_env.agent_registry import class_version
    from fedbandit_env.errors import UnknownIdError

    try:
        env_version = spec(env_id).version
    except (UnknownIdError, TypeError):
        return None
    learner = class_version(agent_id)
    if learner is None:
        return None
    return _format(env_id, env_version, agent_id, *learner) + wrapper_suffix(privacy)


def current_results_version(
    env_id: str, agent_id: str, agent_kwargs: dict[str, Any], privacy: Any = None
) -> str:
    """The results version a run of (env, learner id, kwargs) would get now (builds the
    learner to read its ``version``; for cells defined in code, never for ids read from a file:
    those use :func:`registered_results_version`)."""
    from fedbandit_env.agent_registry import make_agent

    policy = make_agent(agent_id, **dict(agent_kwargs))
    return results_version(env_id, agent_id, policy) + wrapper_suffix(privacy)
