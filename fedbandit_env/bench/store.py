"""Results store: an embedded SQLite database, one row per (cell config hash, results version,
seed).

docs/bench.md and docs/reliability.md. Append-only: rows are only ever inserted, each batch of finished runs in one
transaction, so a process killed mid-sweep leaves every finished row and no partial one, and a
re-run skips the (cell, seed) pairs already there. Regret curves are stored at log-spaced
checkpoints (JSON arrays). The ``epsilon`` column is the privacy guarantee the learner declares
(``TeamPolicy.privacy_epsilon``: NULL for none, ``inf`` for explicitly non-private), not a
kwarg of that name.

A cell may belong to several suites (its hash does not include the suite); the ``suite`` column
only records which suite wrote the row first, so a suite's rows are selected by its cells'
(hash, seed) pairs (:meth:`ResultsStore.rows_for`).

Each row records its results version (:mod:`fedbandit_env.bench.versions`: package,
environment and learner versions) and a row's identity is (cell hash, results version, seed): a
re-run after a version bump writes new rows beside the old ones, and the leaderboard ranks only
the current version's (docs/bench.md). A store written before results versions existed (no
``results_version`` column) is refused with a message, until
:func:`~fedbandit_env.bench.migrate.migrate` keeps its rows under the version ``"unversioned"``
(never current, so never ranked with new rows); the file checks and the migration live in
:mod:`fedbandit_env.bench.migrate`.

A row's backend (docs/bench.md, "Backends") is part of its identity too: it is in the cell's
config (``"backend": "jax"``; absent for numpy, so rows written before backends existed read as
numpy and keep their hashes), hence in the cell hash, and in the results version
(:func:`fedbandit_env.bench.versions.backend_suffix`). :attr:`Row.backend` reads it; the schema
is unchanged.

Any number of processes may write one store (docs/reliability.md, "Concurrent writers"): the
store is in WAL mode (readers never block a writer), every write is one ``BEGIN IMMEDIATE``
transaction under a long busy timeout, and inserts are idempotent: a run another process stored
first is compared column by column and skipped if identical, a :class:`StoreConflictError` if
not. Writers claim work units (table ``claims``) so that they split a suite instead of running
it twice. Read-only users open the file read-only and create nothing beside it; a path that is
not a store is refused before anything is written (docs/reliability.md, "Store files").
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import sqlite3
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from fedbandit_env.bench.datafiles import check_store_row, config_backend
from fedbandit_env.bench.evaluate import EvalResult
from fedbandit_env.bench.flags import dumps as dump_flags
from fedbandit_env.bench.flags import result_flags
from fedbandit_env.bench.migrate import (
    ADDED,
    BUSY_TIMEOUT,
    CLAIMS,
    COLUMNS,
    SCHEMA,
    UNVERSIONED,
    add_columns,
    check_schema,
    check_store_path,
    immediate,
    migrate,
    new_claims,
    retry_busy,
    select_columns,
    wal,
)
from fedbandit_env.bench.suites import Cell
from fedbandit_env.errors import StoreConflictError, StoreError, StoreWriteError


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
    flags: str = "{}"
    """What went wrong in the run, as JSON (docs/bench.md, "Flags";
    :mod:`fedbandit_env.bench.flags`): NaN indices, the learner's notes, privacy clipping."""
    compile_time: float = 0.0
    """The JAX backend's seconds of compiling, this run's share (included in ``wall_time``;
    0 on numpy and when the program was already compiled)."""

    @property
    def backend(self) -> str:
        """The backend that ran this row: its config's ``backend`` (``"numpy"`` when absent, as
        in every row written before backends existed)."""
        return config_backend(json.loads(self.config))

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
            self.results_version,
        )


if COLUMNS != tuple(f.name for f in dataclasses.fields(Row)):  # pragma: no cover
    raise AssertionError("store: Row and the schema's COLUMNS differ")
# Not compared when a run is stored twice: timings, which suite / label wrote it first, and
# the flags (diagnostics of the same run; a row stored before flags existed has none).
UNCHECKED = frozenset({"wall_time", "compile_time", "created", "suite", "label", "flags"})
__all__ = ["COLUMNS", "UNVERSIONED", "ResultsStore", "Row", "log_checkpoints", "migrate",
           "rows_from_result"]  # fmt: skip


CURVE_CHECKPOINTS = 100
"""Log-spaced checkpoints of a stored regret curve (fewer after rounding at short horizons,
where every early step is one)."""


def log_checkpoints(horizon: int, points: int = CURVE_CHECKPOINTS) -> np.ndarray:
    """Log-spaced steps in [1, horizon], always including the horizon."""
    return np.unique(np.geomspace(1, horizon, points).round().astype(np.int64))


def rows_from_result(cell: Cell, suite: str, result: EvalResult) -> list[dict[str, Any]]:
    """One row per run of an :class:`EvalResult` (its steps are the log checkpoints)."""
    if result.backend != cell.backend:
        raise StoreError(
            f"store: the result of {cell.name!r} ran on the {result.backend} backend and its cell "
            f"is a {cell.backend} cell; evaluate it with backend={cell.backend!r}"
        )
    per_run_wall = result.wall_time / len(result.seeds)
    per_agent, network, curves = _scored(result)
    flags = result_flags(result)
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
                "final_regret_per_agent": float(per_agent[r]),
                "final_regret_network": float(network[r]),
                "messages": int(result.messages[r].sum()),
                "floats": int(result.floats[r].sum()),
                "cost": float(result.cost[r].sum()),
                "epsilon": result.privacy_epsilon,
                "wall_time": per_run_wall,
                "steps": json.dumps(result.steps.tolist()),
                "curve": json.dumps(curves[r].tolist()),
                "created": time.time(),
                "results_version": result.results_version,
                "flags": dump_flags(flags[r]),
                "compile_time": result.compile_time / len(result.seeds),
            }
        )
    return rows


def _scored(result: EvalResult) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per run: the final regret per agent, the network regret and the per-agent curve a row
    stores. With an adversary (``result.roles``) only the honest agents are scored
    (docs/adversary.md, "Honest metrics"): their mean, their sum and their mean curve; the rows'
    results version says so (:func:`fedbandit_env.bench.versions.adversary_suffix`)."""
    if result.roles is None:
        return result.final_regret_per_agent, result.final_regret_network, result.regret_per_agent
    honest = result.honest[:, None, :]
    curves = np.where(honest, result.regret_by_agent, 0.0).sum(axis=2) / honest.sum(axis=2)
    return result.honest_regret_mean, result.honest_regret_sum, curves


CLAIM_TTL = 3600.0  # seconds after which a claim no longer defers its unit


def _create_store(path: Path) -> None:
    """Create an empty store at ``path`` atomically: it is built under a temporary name in the
    same folder and linked into place, so a concurrent writer or reader never sees a
    half-created file; if another process created it first, its store is kept."""
    if not os.access(path.parent, os.W_OK):
        raise StoreError(f"store: cannot create {path}: the folder {path.parent} is read-only")
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        conn = sqlite3.connect(tmp)
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute(SCHEMA.format(table="runs"))
            conn.execute(CLAIMS)
            conn.commit()
        finally:
            conn.close()
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass  # another writer created it first
        except OSError:  # a filesystem without hard links: exclusive create, then copy
            try:
                with open(path, "xb") as dst, open(tmp, "rb") as src:
                    dst.write(src.read())
            except FileExistsError:
                pass
    except (OSError, sqlite3.Error) as err:
        raise StoreError(f"store: cannot create {path} ({err})") from None
    finally:
        for suffix in ("", "-wal", "-shm", "-journal"):
            Path(f"{tmp}{suffix}").unlink(missing_ok=True)


def _file_state(path: Path) -> tuple:
    """What changes when a writer touches a store: the main file's identity, size and
    modification time, and whether a ``-wal`` file exists."""
    st = path.stat()
    return st.st_ino, st.st_size, st.st_mtime_ns, Path(f"{path}-wal").exists()


def _connect(path: Path, read_only: bool) -> tuple[sqlite3.Connection, tuple | None]:
    """A writer: autocommit (transactions are explicit ``BEGIN IMMEDIATE``), a long busy
    timeout (WAL mode and full sync are set once the file is known to be a store).

    A reader: ``mode=ro``, and ``immutable=1`` when the store is in WAL format without a
    ``-wal`` file (no writer is active), so that nothing is created beside it (a ``mode=ro``
    connection to a WAL store creates ``-wal`` and ``-shm`` and cannot remove them); with a
    ``-wal`` file (a writer is active, or was killed) the files it needs are already there.
    Returns the connection and, for an immutable one, the file's state at opening (see
    :meth:`ResultsStore._query`)."""
    state = None
    try:
        if read_only:
            uri = f"{path.absolute().as_uri()}?mode=ro"
            with open(path, "rb") as f:
                wal_format = f.read(20)[18:19] == b"\x02"
            if wal_format:
                state = _file_state(path)
                if state[-1]:  # a -wal file: a writer is active, or was killed
                    state = None
                else:
                    uri += "&immutable=1"
            conn = sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT, isolation_level=None)
            conn.execute("PRAGMA query_only=1")
        else:
            conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT, isolation_level=None)
        conn.execute("PRAGMA trusted_schema=OFF")
        return conn, state
    except sqlite3.DatabaseError as err:
        raise StoreError(f"store: {path} is not a readable SQLite database ({err})") from None
    except OSError as err:
        raise StoreError(f"store: {path} is not readable ({err.strerror})") from None


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b


class ResultsStore:
    """Append-only SQLite store (``path`` ``":memory:"`` for a throwaway one).

    ``create=False`` opens an existing store for reading only (``read_only`` defaults to it): a
    missing file is an error instead of a new empty store, the file is opened read-only and
    nothing is created beside it. A path that is not a store (a directory, an empty, text or
    binary file, an unreadable file, an SQLite database of something else) raises a
    :class:`~fedbandit_env.errors.StoreError` naming the path and what it is, before anything
    is written (docs/reliability.md, "Store files"). Any number of processes may write one
    store at the same time (:meth:`append`).
    """

    def __init__(
        self,
        path: str | Path = "fedbandit_results.sqlite",
        create: bool = True,
        read_only: bool | None = None,
    ):
        self.path = str(path)
        self.read_only = (not create) if read_only is None else read_only
        self._select = ", ".join(COLUMNS)
        if self.path == ":memory:":
            self._conn = sqlite3.connect(self.path, isolation_level=None)
            self._immutable_state = None
            self._conn.execute(SCHEMA.format(table="runs"))
            self._conn.execute(CLAIMS)
            return
        file = Path(self.path)
        exists = check_store_path(file, create and not self.read_only)
        if not exists:
            _create_store(file)
        self._file = file
        self._conn, self._immutable_state = _connect(file, self.read_only)
        try:
            self._check_schema()
        except BaseException:
            self._conn.close()
            raise

    def _check_schema(self) -> None:
        """The file holds a current ``runs`` table (:func:`~fedbandit_env.bench.migrate.check_schema`);
        a writer then sets WAL mode and full sync and keeps a current ``claims`` table."""
        check_schema(self.path, self._query, self._conn, self.read_only)
        if not self.read_only:  # only now that the file is known to be a store
            try:
                retry_busy(lambda: wal(self._conn))
                self._conn.execute("PRAGMA synchronous=FULL")
                self._conn.execute(CLAIMS)
                claim_cols = {r[1] for r in self._query("PRAGMA table_info(claims)")}
                if "results_version" not in claim_cols:  # claims are hints: rebuilt, not kept
                    self._write(lambda: new_claims(self._conn))
                have = {r[1] for r in self._query("PRAGMA table_info(runs)")}
                if not set(ADDED) <= have:  # a store older than row flags or compile times
                    self._write(lambda: add_columns(self._conn))
            except sqlite3.Error as err:
                raise StoreError(f"store: {self.path}: cannot write to it ({err})") from None
        have = {r[1] for r in self._query("PRAGMA table_info(runs)")}
        self._select = ", ".join(select_columns(have))

    def close(self) -> None:
        self._conn.close()

    def _query(self, sql: str, params: tuple | list = ()) -> list[tuple]:
        """The rows of a read query; any SQLite error is a :class:`StoreError` naming the store.

        A reader that opened an idle store as immutable checks that no writer has touched the
        file since it opened (a writer may start at any time); if one has, it reopens the store
        by the same rule (:func:`_connect`) and reads again. A query that fails on a file no
        writer touched is a damaged store: an error, never a second connection that could
        create files beside it."""
        try:
            if self._immutable_state is None:
                return self._conn.execute(sql, params).fetchall()
            failure = None
            if _file_state(self._file) == self._immutable_state:
                try:
                    rows = self._conn.execute(sql, params).fetchall()
                except sqlite3.DatabaseError as err:  # damaged, or torn by a writer since
                    failure = err
                if _file_state(self._file) == self._immutable_state:
                    if failure is not None:
                        raise failure
                    return rows
            self._conn.close()
            self._conn, self._immutable_state = _connect(self._file, True)
            return self._query(sql, params)
        except sqlite3.Error as err:
            raise StoreError(
                f"store: {self.path} is not a readable SQLite database ({err})"
            ) from None
        except OSError as err:
            raise StoreError(f"store: {self.path} is not readable ({err.strerror})") from None

    def done_seeds(self, cell_hash: str, results_version: str | None = None) -> set[int]:
        """Seeds of the cell already stored (of ``results_version`` only, when given)."""
        if results_version is None:
            rows = self._query("SELECT seed FROM runs WHERE cell_hash = ?", (cell_hash,))
        else:
            rows = self._query(
                "SELECT seed FROM runs WHERE cell_hash = ? AND results_version = ?",
                (cell_hash, results_version),
            )
        return {int(s) for (s,) in rows}

    def _write(self, fn):
        """Run ``fn()`` in one ``BEGIN IMMEDIATE`` transaction: it takes the write lock up front
        (waiting up to the busy timeout for another writer), commits, or rolls back on error."""
        if self.read_only:
            raise StoreError(f"store: {self.path} was opened read-only")
        try:
            return immediate(self._conn, fn)
        except sqlite3.Error as err:  # disk full, a file-size limit, a damaged file
            raise StoreWriteError(f"store: {self.path}: cannot write to it ({err})") from None

    def append(self, rows: Iterable[dict[str, Any]]) -> int:
        """Insert rows in one transaction (all or none); returns how many were new.

        Idempotent: a run (cell hash, results version, seed) already stored, by this or another
        process, is
        compared with the new one on every column but the timings, suite and label; equal, it is
        skipped; different, a :class:`StoreConflictError` names the run and the columns and
        nothing of the batch is written (results never change silently)."""
        rows = list(rows)
        if not rows:
            return 0
        cols = list(rows[0])
        sql = (
            f"INSERT INTO runs ({', '.join(cols)}) VALUES ({', '.join('?' for _ in cols)}) "
            "ON CONFLICT (cell_hash, results_version, seed) DO NOTHING"
        )

        def insert() -> int:
            new = 0
            for row in rows:
                if self._conn.execute(sql, tuple(row[c] for c in cols)).rowcount == 1:
                    new += 1
                else:
                    self._check_identical(row)
            self._conn.execute(
                "DELETE FROM claims WHERE cell_hash = ? AND results_version = ? AND first_seed = ?",
                (
                    rows[0]["cell_hash"],
                    rows[0]["results_version"],
                    min(int(r["seed"]) for r in rows),
                ),
            )
            return new

        return self._write(insert)

    def _check_identical(self, row: dict[str, Any]) -> None:
        checked = [c for c in row if c not in UNCHECKED]
        stored = self._conn.execute(
            f"SELECT {', '.join(checked)} FROM runs "
            "WHERE cell_hash = ? AND results_version = ? AND seed = ?",
            (row["cell_hash"], row["results_version"], row["seed"]),
        ).fetchone()
        differ = [c for c, old in zip(checked, stored, strict=True) if not _same(old, row[c])]
        if differ:
            raise StoreConflictError(
                f"store: {self.path}: run {row['label']!r} (cell {row['cell_hash']}, seed "
                f"{row['seed']}) is already stored with different {', '.join(differ)} at results "
                f"version {row['results_version']!r}; the learner or environment gives other "
                "results than when it was stored without a version bump (bump its version, use "
                "a new store, or remove those rows); nothing of this batch was written"
            )

    def claim(
        self, cell_hash: str, first_seed: int, owner: str, results_version: str = UNVERSIONED
    ) -> bool:
        """Claim the work unit (cell hash, results version, first seed) for ``owner`` unless
        another owner claimed it less than ``CLAIM_TTL`` seconds ago; returns whether ``owner``
        holds it. Claims only help concurrent writers split the work; :meth:`append` keeps rows
        exact whatever happens to them."""

        def take() -> bool:
            held = self._conn.execute(
                "SELECT owner, claimed FROM claims "
                "WHERE cell_hash = ? AND results_version = ? AND first_seed = ?",
                (cell_hash, results_version, first_seed),
            ).fetchone()
            now = time.time()
            if held is not None and held[0] != owner and now - held[1] < CLAIM_TTL:
                return False
            self._conn.execute(
                "INSERT OR REPLACE INTO claims "
                "(cell_hash, results_version, first_seed, owner, claimed) VALUES (?, ?, ?, ?, ?)",
                (cell_hash, results_version, first_seed, owner, now),
            )
            return True

        return bool(self._write(take))

    def rows(self) -> list[Row]:
        """Every stored row."""
        rows = self._query(
            f"SELECT {self._select} FROM runs "
            "ORDER BY env_key, label, cell_hash, results_version, seed"
        )
        return [self._row(r) for r in rows]

    def _row(self, values: tuple) -> Row:
        """A stored row, checked to be what the store writes (files are data: a row edited by
        hand or damaged is an error naming the store, the row and the column)."""
        check_store_row(dict(zip(COLUMNS, values, strict=True)), f"store: {self.path}", StoreError)
        return Row(*values)

    def rows_for(self, cells: Iterable[Cell]) -> list[Row]:
        """The stored rows of ``cells`` (a suite's cells): each cell's (hash, seed) pairs,
        whichever suite wrote them, labelled with the cell's own label."""
        wanted = {cell.config_hash: cell for cell in cells}
        out = []
        hashes = list(wanted)
        for start in range(0, len(hashes), 500):  # SQLite's bound-parameter limit
            part = hashes[start : start + 500]
            sql = (
                f"SELECT {self._select} FROM runs "
                f"WHERE cell_hash IN ({', '.join('?' for _ in part)})"
            )
            for r in self._query(sql, part):
                row = self._row(r)
                cell = wanted[row.cell_hash]
                if cell.seed <= row.seed < cell.seed + cell.runs:
                    out.append(dataclasses.replace(row, label=cell.name))
        out.sort(key=lambda r: (r.env_key, r.label, r.cell_hash, r.results_version, r.seed))
        return out

    def count(self) -> int:
        return int(self._query("SELECT COUNT(*) FROM runs")[0][0])
