"""Row flags: what went wrong in a run, stored with its row and shown by the tables (docs/bench.md,
"Flags").

A row's ``flags`` column is a JSON object with any of:

* ``nan_index_steps`` (int >= 0): the steps in which some agent's index was NaN
  (:mod:`fedbandit_env.scores`); absent when the learner ranks no index through the shared
  helpers (nothing was watched, which is not "none");
* ``notes`` (list of str): the learner's own notes on its setting (``TeamPolicy.notes``, e.g.
  ``"f = 1 < 2 Byzantine"``: a robustness parameter below the environment's declared bound);
* ``staleness`` (a number >= 0): a learner's diagnostic, not a warning: the mean over the
  run's decisions of the events since the acting client's last download (the asynchronous
  learners, docs/async-linear.md); the tables show it in a column of its own;
* under the privacy wrapper: ``epsilon_per_release`` (the epsilon of one release the user asked
  for, the largest over the wrapped channels), ``epsilon_composed`` (the composed epsilon over
  the run, the largest over its agents: what the ``epsilon`` column holds) and
  ``clipped_fraction`` (the fraction of the sent payload coordinates the wrapper's clipping
  changed).

:func:`entry_flags` summarizes the rows of one leaderboard entry and :func:`format_flags` writes
the table cell. Rows read from a store or a reference are checked by :func:`check_flags` (files
are data: unknown keys and wrong types are refused).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

CLIP_WARNING = 0.01
"""A wrapped run warns when more than this fraction of its payload coordinates was clipped."""
KEYS = ("nan_index_steps", "notes", "epsilon_per_release", "epsilon_composed", "clipped_fraction",
        "staleness")
MAX_NOTES = 16
MAX_NOTE = 200


def result_flags(result: Any) -> list[dict[str, Any]]:
    """One flags dict per run of an :class:`~fedbandit_env.bench.evaluate.EvalResult`."""
    out = []
    for r in range(len(result.seeds)):
        flags: dict[str, Any] = {}
        if result.nan_index_steps is not None:
            flags["nan_index_steps"] = int(result.nan_index_steps[r])
        if result.notes:
            flags["notes"] = list(result.notes)
        if result.epsilon_per_release is not None:
            flags["epsilon_per_release"] = float(result.epsilon_per_release)
            flags["epsilon_composed"] = _json_float(float(result.epsilon_composed[r]))
            flags["clipped_fraction"] = float(result.clipped_fraction[r])
        staleness = getattr(result, "staleness", None)
        if staleness is not None and math.isfinite(float(staleness[r])):
            flags["staleness"] = float(staleness[r])
        out.append(flags)
    return out


def _json_float(value: float) -> float | str:
    return "inf" if math.isinf(value) else value


def dumps(flags: dict[str, Any]) -> str:
    """The column's text (sorted keys, compact)."""
    return json.dumps(flags, sort_keys=True, separators=(",", ":"))


def check_flags(flags: Any, place: str, error: type[Exception]) -> dict[str, Any]:
    """A parsed ``flags`` column is an object of the known keys with values of their types;
    ``error`` names ``place`` and the key otherwise."""
    if not isinstance(flags, dict):
        raise error(f"{place}: expected a JSON object, got {type(flags).__name__}")
    unknown = sorted(set(flags) - set(KEYS))
    if unknown:
        raise error(f"{place}: unknown keys {unknown[:5]}; expected keys among {list(KEYS)}")
    steps = flags.get("nan_index_steps", 0)
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 0:
        raise error(f"{place}.nan_index_steps: expected an int >= 0, got {steps!r}"[:300])
    notes = flags.get("notes", [])
    if (
        not isinstance(notes, list)
        or len(notes) > MAX_NOTES
        or not all(isinstance(n, str) and len(n) <= MAX_NOTE for n in notes)
    ):
        raise error(f"{place}.notes: expected a list of at most {MAX_NOTES} short strings")
    for key in ("epsilon_per_release", "epsilon_composed"):
        if key in flags:
            value = flags[key]
            ok = value == "inf" or (
                isinstance(value, int | float)
                and not isinstance(value, bool)
                and math.isfinite(value)
                and value >= 0
            )
            if not ok:
                raise error(f"{place}.{key}: expected a number >= 0 or 'inf', got {value!r}"[:300])
    if "staleness" in flags:
        value = flags["staleness"]
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        if not ok or not math.isfinite(value) or value < 0:
            raise error(f"{place}.staleness: expected a number >= 0, got {value!r}"[:300])
    if "clipped_fraction" in flags:
        value = flags["clipped_fraction"]
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
            raise error(
                f"{place}.clipped_fraction: expected a number in [0, 1], got {value!r}"[:300]
            )
    return flags


@dataclass(frozen=True)
class EntryFlags:
    """The flags of one leaderboard entry: NaN steps summed over its runs and the runs with
    any (None when no run was watched), the learner's notes, under the wrapper the
    per-release epsilon and the mean clipped fraction, and the mean staleness of a learner that
    reports one."""

    nan_steps: int | None = None
    nan_runs: int = 0
    runs: int = 0
    notes: tuple[str, ...] = ()
    epsilon_per_release: float | None = None
    clipped_fraction: float | None = None
    staleness: float | None = None  # a diagnostic (its own column), never a warning

    @property
    def any(self) -> bool:
        """Whether something is flagged (NaN indices, a note, more than
        :data:`CLIP_WARNING` clipped)."""
        clipped = self.clipped_fraction is not None and self.clipped_fraction > CLIP_WARNING
        return bool(self.nan_runs or self.notes or clipped)


def entry_flags(flags: Sequence[dict[str, Any]]) -> EntryFlags:
    """Summarize the parsed flags of an entry's rows."""
    watched = [f["nan_index_steps"] for f in flags if "nan_index_steps" in f]
    notes: list[str] = []
    for f in flags:
        notes += [n for n in f.get("notes", []) if n not in notes]
    released = [f["epsilon_per_release"] for f in flags if "epsilon_per_release" in f]
    clipped = [f["clipped_fraction"] for f in flags if "clipped_fraction" in f]
    stale = [f["staleness"] for f in flags if "staleness" in f]
    return EntryFlags(
        nan_steps=int(sum(watched)) if watched else None,
        nan_runs=sum(1 for s in watched if s > 0),
        runs=len(flags),
        notes=tuple(notes),
        epsilon_per_release=float(max(released)) if released else None,
        clipped_fraction=float(np.mean(clipped)) if clipped else None,
        staleness=float(np.mean(stale)) if stale else None,
    )


def format_flags(flags: EntryFlags | None) -> str:
    """The table's flags cell: ``NaN index in 40 steps (3/5 runs); f = 1 < 2 Byzantine; 45%
    of payload coordinates clipped``, or ``—`` when nothing is flagged."""
    if flags is None or not flags.any:
        return "—"
    parts = []
    if flags.nan_runs:
        parts.append(f"NaN index in {flags.nan_steps} steps ({flags.nan_runs}/{flags.runs} runs)")
    parts += list(flags.notes)
    if flags.clipped_fraction is not None and flags.clipped_fraction > CLIP_WARNING:
        parts.append(f"{100 * flags.clipped_fraction:.0f}% of payload coordinates clipped")
    return "; ".join(parts)
