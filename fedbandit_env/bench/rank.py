"""Rank one learner against the shipped reference results (docs/bench.md, "Ranking a new
learner"): ``fedbandit rank ID`` runs the learner's cells of a suite into a store and ranks them
with the reference rows of the same tables, without re-running the published learners.

The learner's cells of a suite are its own cells there (a registered learner joins every open
suite's sweeps, and a paper suite may list it with specific kwargs); a learner the suite does
not list (a paper suite, or kwargs or a privacy wrapper of your own) gets one cell per
environment configuration of the suite, with the suite's horizon and seeds. Ids are resolved
like ``python -m`` resolves modules: a ``module:Class`` in the current folder works without
``PYTHONPATH``. On the JAX backend (``--backend jax``, docs/bench.md "Backends") the learner's
cells are the suite's cells moved to that backend, its rows are JAX rows, and they are ranked
beside the reference's rows of the same tables (numpy rows, and the JAX rows a reference file
may carry), each entry saying its backend.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fedbandit_env.agent_registry import agent_class, is_dynamic, list_agents, register_agent
from fedbandit_env.bench.backends import NUMPY, check_backend, resolve_jax_learner
from fedbandit_env.bench.store import ResultsStore, Row
from fedbandit_env.bench.suites import Cell, Suite


def current_folder_on_path() -> None:
    """Put the current folder first on ``sys.path`` and on ``PYTHONPATH`` (for worker
    processes), as ``python -m`` does, so that ``mymod:MyLearner`` resolves from the folder a
    command is run in."""
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.insert(0, cwd)
    parts = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if cwd not in parts:
        os.environ["PYTHONPATH"] = os.pathsep.join([cwd, *parts])


def resolve_learner(agent_id: str, backend: str = NUMPY) -> str:
    """Make ``agent_id`` a learner of this process's registry (of ``backend``): a registered id
    as it is; a ``module:Class`` id (a file of the current folder, say) is imported, because the
    user named it on the command line or in code, and registered under its id, so that suites
    sweep it and worker processes find it (they import it by the same path)."""
    if check_backend(backend) != NUMPY:
        return resolve_jax_learner(agent_id)
    if agent_id in list_agents():
        return agent_id
    agent_class(agent_id)  # imports it, or raises UnknownIdError with suggestions
    prefix = agent_id.partition(":")[0]
    if is_dynamic(agent_id) and prefix not in ("mabwiser", "smpybandits"):
        register_agent(agent_id, agent_id)
    return agent_id


def privacy_label(privacy: dict[str, Any]) -> str:
    """A short label for a cell's privacy wrapper: ``+privacy eps=1`` (the shorthand's
    epsilon), ``+privacy`` otherwise."""
    eps = privacy.get("epsilon")
    return f"+privacy eps={eps:g}" if isinstance(eps, int | float) else "+privacy"


def _label(agent_id: str, agent_kwargs: dict[str, Any], privacy: dict[str, Any]) -> str:
    parts = [agent_id]
    if agent_kwargs:
        parts.append(" ".join(f"{k}={v}" for k, v in sorted(agent_kwargs.items())))
    if privacy:
        parts.append(privacy_label(privacy))
    return " ".join(parts)


def learner_cells(
    suite: Suite,
    agent_id: str,
    agent_kwargs: dict[str, Any] | None = None,
    privacy: dict[str, Any] | None = None,
    note: Callable[[str], None] = lambda _msg: None,
    backend: str = NUMPY,
) -> list[Cell]:
    """The cells ``agent_id`` runs in ``suite`` on ``backend`` (see the module docstring);
    environments its ``reset`` (a JAX learner's ``init``) refuses are skipped, and ``note``
    says which and why."""
    agent_kwargs, privacy = dict(agent_kwargs or {}), dict(privacy or {})
    suite = suite.with_backend(backend)
    own = [c for c in suite.candidates() if c.agent_id == agent_id]
    if own and not agent_kwargs and not privacy:  # the suite's own checks (attack sweeps too)
        return suite.available(note, agent_id=agent_id)
    blocks: dict[str, Cell] = {}
    for cell in suite.candidates():
        blocks.setdefault(cell.env_key, cell)
    label = _label(agent_id, agent_kwargs, privacy)
    cells = [
        Cell(
            c.env_id,
            agent_id,
            c.horizon,
            c.runs,
            dict(c.env_kwargs),
            agent_kwargs,
            c.seed,
            label,
            privacy,
            backend,
        )  # fmt: skip
        for c in blocks.values()
    ]
    mine = Suite(suite.name, tuple(cells), suite.baseline, suite.description)
    return mine.available(note)


@dataclass(frozen=True)
class Ranking:
    """What :func:`rank_rows` ranks: the learner's rows, the reference rows of its tables,
    and the counts the page header shows."""

    rows: list[Row]
    mine: int
    reference: int
    reference_path: Path
    reference_version: str


def rank_rows(
    store: ResultsStore,
    cells: list[Cell],
    reference: str | Path | None = None,
    note: Callable[[str], None] = print,
) -> Ranking:
    """The learner's current rows in ``store`` (its ``cells``) and the reference's current rows
    of the same environment configurations (tables); the reference rows of a cell the store
    holds at the same version are replaced by the store's."""
    from fedbandit_env.bench.leaderboard import current_rows
    from fedbandit_env.bench.reference import current_reference_rows, load_reference, merge_rows

    mine = current_rows(store.rows_for(cells), note)
    ref = load_reference(reference)
    tables = {c.env_key for c in cells}
    theirs = [r for r in ref.rows() if _env_key(r) in tables]
    theirs = current_reference_rows(theirs, note)
    merged = merge_rows(mine, theirs)
    return Ranking(merged, len(mine), len(merged) - len(mine), ref.path, ref.package_version)


def _env_key(row: Row) -> str:
    """A row's table, in the form :attr:`Cell.env_key` has (the stored key may differ only in
    JSON spacing)."""
    env = json.loads(row.env_key)
    return json.dumps(env, sort_keys=True)
