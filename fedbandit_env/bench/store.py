"""Results store: an embedded SQLite database, one row per (cell config hash, seed).

DESIGN.md §5. Append-only: rows are only ever inserted, each batch of finished runs in one
transaction, so a process killed mid-sweep leaves every finished row and no partial one, and a
re-run skips the (cell, seed) pairs already there. Regret curves are stored at log-spaced
checkpoints (JSON arrays). The ``epsilon`` column is the privacy guarantee the learner declares
(``TeamPolicy.privacy_epsilon``: NULL for none, ``inf`` for explicitly non-private), not a
kwarg of that name.

Each row records its results version (:mod:`fedbandit_env.bench.versions`: package,
environment and learner versions) and a row's identity is (cell hash, results version, seed): a
re-run after a version bump writes new rows beside the old ones, and the leaderboard ranks only
the current version's (docs/bench.md). A store written before results versions existed (no
``results_version`` column) is refused with a message, until :func:`migrate` keeps its rows
under the version ``"unversioned"`` (never current, so never ranked with new rows).

A cell may belong to several suites (its hash does not include the suite); the ``suite`` column
only records which suite wrote the row first, so a suite's rows are selected by its cells'
(hash, seed) pairs (:meth:`ResultsStore.rows_for`).
"""

from __future__ import annotations

import dataclasses
import json
import sqlite3
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from fedbandit_env.bench.evaluate import EvalResult
from fedbandit_env.bench.suites import Cell
from fedbandit_env.errors import ConfigError

SCHEMA = """
CREATE TABLE IF NOT EXISTS {table} (
    cell_hash TEXT NOT NULL,
    seed INTEGER NOT NULL,
    suite TEXT NOT NULL,
    env_id TEXT NOT NULL,
    agent_id TEXT NOT NULL,
    label TEXT NOT NULL,
    env_key TEXT NOT NULL,
    config TEXT NOT NULL,
    horizon INTEGER NOT NULL,
    final_regret_per_agent REAL NOT NULL,
    final_regret_network REAL NOT NULL,
    messages INTEGER NOT NULL,
    floats INTEGER NOT NULL,
    cost REAL NOT NULL,
    epsilon REAL,
    wall_time REAL NOT NULL,
    steps TEXT NOT NULL,
    curve TEXT NOT NULL,
    created REAL NOT NULL,
    results_version TEXT NOT NULL,
    PRIMARY KEY (cell_hash, results_version, seed)
)
"""

UNVERSIONED = "unversioned"
"""The results version :func:`migrate` gives the rows of a store older than results versions."""


def _columns(conn: sqlite3.Connection, table: str = "runs") -> list[str]:
    return [r[1] for r in conn.execute(f"PRAGMA table_info({table})").fetchall()]


def migrate(path: str | Path) -> int:
    """Add the ``results_version`` column to a store written before results versions, in one
    transaction: its rows keep their numbers under the version ``"unversioned"`` (stale for
    every learner, so the leaderboard never ranks them with new rows). Returns the rows kept."""
    conn = sqlite3.connect(str(path), timeout=60)
    try:
        if "results_version" in _columns(conn):
            return 0
        with conn:
            conn.execute(SCHEMA.format(table="runs_versioned"))
            conn.execute(
                "INSERT INTO runs_versioned SELECT *, ? FROM runs", (UNVERSIONED,)
            )
            conn.execute("DROP TABLE runs")
            conn.execute("ALTER TABLE runs_versioned RENAME TO runs")
        return int(conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0])
    finally:
        conn.close()


@dataclass(frozen=True)
class Row:
    """One finished run, as stored."""

    cell_hash: str
    seed: int
    suite: str
    env_id: str
    agent_id: str
    label: str
    env_key: str
    config: str
    horizon: int
    final_regret_per_agent: float
    final_regret_network: float
    messages: int
    floats: int
    cost: float
    epsilon: float | None
    wall_time: float
    steps: str
    curve: str
    created: float
    results_version: str = UNVERSIONED

    @property
    def numbers(self) -> tuple:
        """Everything but the timings: equal for equal runs under any executor."""
        return (
            self.cell_hash,
            self.seed,
            self.results_version,
            self.final_regret_per_agent,
            self.final_regret_network,
            self.messages,
            self.floats,
            self.cost,
            self.epsilon,
            self.steps,
            self.curve,
        )


def log_checkpoints(horizon: int, points: int = 60) -> np.ndarray:
    """Log-spaced steps in [1, horizon], always including the horizon."""
    return np.unique(np.geomspace(1, horizon, points).round().astype(np.int64))


def rows_from_result(cell: Cell, suite: str, result: EvalResult) -> list[dict[str, Any]]:
    """One row per run of an :class:`EvalResult` (its steps are the log checkpoints)."""
    per_run_wall = result.wall_time / len(result.seeds)
    rows = []
    for r, seed in enumerate(result.seeds):
        rows.append(
            {
                "cell_hash": cell.config_hash,
                "seed": int(seed),
                "suite": suite,
                "env_id": cell.env_id,
                "agent_id": cell.agent_id,
                "label": cell.name,
                "env_key": cell.env_key,
                "config": json.dumps(cell.config, sort_keys=True),
                "horizon": cell.horizon,
                "final_regret_per_agent": float(result.regret_per_agent[r, -1]),
                "final_regret_network": float(result.regret_network[r, -1]),
                "messages": int(result.messages[r].sum()),
                "floats": int(result.floats[r].sum()),
                "cost": float(result.cost[r].sum()),
                "epsilon": result.privacy_epsilon,
                "wall_time": per_run_wall,
                "steps": json.dumps(result.steps.tolist()),
                "curve": json.dumps(result.regret_per_agent[r].tolist()),
                "created": time.time(),
                "results_version": result.results_version,
            }
        )
    return rows


class ResultsStore:
    """Append-only SQLite store (``path`` ``":memory:"`` for a throwaway one). With
    ``create=False`` a missing file is an error instead of a new empty store."""

    def __init__(self, path: str | Path = "fedbandit_results.sqlite", create: bool = True):
        self.path = str(path)
        if not create and self.path != ":memory:" and not Path(self.path).is_file():
            raise ConfigError(
                f"store: {self.path} does not exist; run `fedbandit suite NAME --store "
                f"{self.path}` first"
            )
        self._conn = sqlite3.connect(self.path, timeout=60)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=FULL")
        self._conn.execute(SCHEMA.format(table="runs"))
        self._conn.commit()
        if "results_version" not in _columns(self._conn):
            self._conn.close()
            raise ConfigError(
                f"store: {self.path} was written before results versions (its rows do not say "
                "which package, environment and learner versions produced them), so its rows "
                "cannot be compared with new ones. Either move it aside and re-run your suites "
                "into a new store, or keep its rows as 'unversioned' (never ranked with new "
                "rows): python -c \"from fedbandit_env.bench.store import migrate; "
                f"migrate({self.path!r})\""
            )

    def close(self) -> None:
        self._conn.close()

    def done_seeds(self, cell_hash: str, results_version: str | None = None) -> set[int]:
        """Seeds of the cell already stored (of ``results_version`` only, when given)."""
        if results_version is None:
            cur = self._conn.execute("SELECT seed FROM runs WHERE cell_hash = ?", (cell_hash,))
        else:
            cur = self._conn.execute(
                "SELECT seed FROM runs WHERE cell_hash = ? AND results_version = ?",
                (cell_hash, results_version),
            )
        return {int(s) for (s,) in cur.fetchall()}

    def append(self, rows: Iterable[dict[str, Any]]) -> int:
        """Insert rows in one transaction (all or none); returns how many were inserted."""
        rows = list(rows)
        if not rows:
            return 0
        cols = list(rows[0])
        sql = f"INSERT INTO runs ({', '.join(cols)}) VALUES ({', '.join('?' for _ in cols)})"
        with self._conn:  # commits, or rolls back on error
            self._conn.executemany(sql, [tuple(r[c] for c in cols) for r in rows])
        return len(rows)

    def rows(self) -> list[Row]:
        """Every stored row."""
        cur = self._conn.execute("SELECT * FROM runs ORDER BY env_key, label, cell_hash, seed")
        return [Row(*r) for r in cur.fetchall()]

    def rows_for(self, cells: Iterable[Cell]) -> list[Row]:
        """The stored rows of ``cells`` (a suite's cells): each cell's (hash, seed) pairs,
        whichever suite wrote them, labelled with the cell's own label."""
        wanted = {cell.config_hash: cell for cell in cells}
        out = []
        hashes = list(wanted)
        for start in range(0, len(hashes), 500):  # SQLite's bound-parameter limit
            part = hashes[start : start + 500]
            sql = f"SELECT * FROM runs WHERE cell_hash IN ({', '.join('?' for _ in part)})"
            for r in self._conn.execute(sql, part).fetchall():
                row = Row(*r)
                cell = wanted[row.cell_hash]
                if cell.seed <= row.seed < cell.seed + cell.runs:
                    out.append(dataclasses.replace(row, label=cell.name))
        out.sort(key=lambda r: (r.env_key, r.label, r.cell_hash, r.seed))
        return out

    def count(self) -> int:
        return int(self._conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0])
