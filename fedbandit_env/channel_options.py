"""What the channels accept beyond their kind and payload dim: the options of the robust
reductions (docs/channels.md, "Robust reductions") and the server's participation schedule
(docs/fed-ucb12.md, "Clients that join over time"), checked with the errors naming
``channels.<name>.<option>``, and what the robust options add to a channel's ``describe()``.
"""

from __future__ import annotations

from typing import Any

from fedbandit_env.errors import ConfigError
from fedbandit_env.validation import check_choice, check_int

GROUPINGS = ("consecutive", "random")


def check_robust_options(
    name: str, field: str, reduce: Any, trim: Any, group_size: Any, grouping: Any
) -> tuple[int, int, str]:
    """(trim, group_size, grouping) of channel ``name`` whose reduction (option ``field``) is
    ``reduce``: each option only with the reduction it belongs to, defaults 1, 1 and
    ``"consecutive"``."""
    where = f"{field}={reduce!r}"
    if trim is not None and reduce != "trimmed_mean":
        raise ConfigError(
            f"channels.{name}.trim: expected no trim unless {field}='trimmed_mean', got trim "
            f"{trim!r} with {where}"
        )
    for option, value in (("group_size", group_size), ("grouping", grouping)):
        if value is not None and reduce != "median_of_means":
            raise ConfigError(
                f"channels.{name}.{option}: expected no {option} unless "
                f"{field}='median_of_means', got {value!r} with {where}"
            )
    trim = check_int(f"channels.{name}.trim", 1 if trim is None else trim, minimum=0)
    size = 1 if group_size is None else group_size
    size = check_int(f"channels.{name}.group_size", size, minimum=1)
    grouping = "consecutive" if grouping is None else grouping
    return trim, size, check_choice(f"channels.{name}.grouping", grouping, list(GROUPINGS))


def describe_robust(reduce: Any, trim: int, group_size: int, grouping: str) -> dict[str, Any]:
    """The options a robust reduction adds to a channel's ``describe()`` (none for others)."""
    if reduce == "trimmed_mean":
        return {"trim": trim}
    if reduce == "median_of_means":
        return {"group_size": group_size, "grouping": grouping}
    return {}


def check_join_round(name: str, value: Any, num_agents: int) -> tuple[int, ...] | None:
    """The participation schedule: None, or N non-negative ints with at least one 0."""
    if value is None:
        return None
    if isinstance(value, str | bytes) or not hasattr(value, "__len__"):
        raise ConfigError(
            f"{name}: expected None or a list of {num_agents} non-negative ints (the server "
            f"round from which each agent may upload), got {value!r}"
        )
    if len(value) != num_agents:
        raise ConfigError(
            f"{name}: expected one round per agent ({num_agents}), got {len(value)} entries"
        )
    rounds = tuple(check_int(f"{name}[{i}]", r, minimum=0) for i, r in enumerate(value))
    if min(rounds) != 0:
        raise ConfigError(
            f"{name}: expected at least one agent that joins at round 0 (no round could happen "
            f"otherwise), got the earliest round {min(rounds)}"
        )
    return rounds
