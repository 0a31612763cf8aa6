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
    env_version = spec(env_id).version
    learner_version = int(getattr(policy, "version", 1))
    note = getattr(policy, "results_note", "")
    return (
        f"fedbandit {package_version()} / env {env_id} v{env_version} / "
        f"learner {agent_id} v{learner_version}" + (f" ({note})" if note else "")
    )


def current_results_version(env_id: str, agent_id: str, agent_kwargs: dict[str, Any]) -> str:
    """The results version a run of (env, learner id, kwargs) would get now (builds the
    learner to read its ``version``)."""
    from fedbandit_env.agent_registry import make_agent

    return results_version(env_id, agent_id, make_agent(agent_id, **dict(agent_kwargs)))
