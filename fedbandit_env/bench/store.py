"""Results store: an embedded SQLite database, one row per (cell config hash, seed).

DESIGN.md §5. Append-only: rows are only ever inserted, each batch of finished runs in one
transaction, so a process killed mid-sweep leaves every finished row and no partial one, and a
re-run skips the (cell, seed) pairs already there. Regret curves are stored at log-spaced
checkpoints (JSON arrays).
"""

from __future__ import annotations

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

SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
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
    PRIMARY KEY (cell_hash, seed)
)
"""


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

    @property
    def numbers(self) -> tuple:
        """Everything but the timings: equal for equal runs under any executor."""
        return (
            self.cell_hash,
            self.seed,
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


def cell_epsilon(cell: Cell) -> float | None:
    eps = cell.agent_kwargs.get("epsilon")
    return None if eps is None else float(eps)


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
                "epsilon": cell_epsilon(cell),
                "wall_time": per_run_wall,
                "steps": json.dumps(result.steps.tolist()),
                "curve": json.dumps(result.regret_per_agent[r].tolist()),
                "created": time.time(),
            }
        )
    return rows


class ResultsStore:
    """Append-only SQLite store (``path`` ``":memory:"`` for a throwaway one)."""

    def __init__(self, path: str | Path = "fedbandit_results.sqlite"):
        self.path = str(path)
        self._conn = sqlite3.connect(self.path, timeout=60)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=FULL")
        self._conn.execute(SCHEMA)
        self._conn.commit()

    def close(self) -> None:
        self._conn.close()

    def done_seeds(self, cell_hash: str) -> set[int]:
        cur = self._conn.execute("SELECT seed FROM runs WHERE cell_hash = ?", (cell_hash,))
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

    def rows(self, suite: str | None = None) -> list[Row]:
        sql = "SELECT * FROM runs" + (" WHERE suite = ?" if suite else "")
        sql += " ORDER BY env_key, label, cell_hash, seed"
        cur = self._conn.execute(sql, (suite,) if suite else ())
        return [Row(*r) for r in cur.fetchall()]

    def count(self) -> int:
        return int(self._conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0])
