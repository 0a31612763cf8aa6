"""The results store's file format: what a store file is, its schema, and the migration of
stores written by older versions (docs/reliability.md, "Store files"; docs/bench.md, "Results
versions").

:func:`check_store_path` looks at a path before SQLite opens it (at most its first 100 bytes,
writing nothing) and names what it is when it is not a store; :func:`check_schema` checks the
tables of an open one; :func:`migrate` adds the ``results_version`` column to a store written
before results versions, keeping its rows under :data:`UNVERSIONED`. The schema changes run in
``BEGIN IMMEDIATE`` transactions (:func:`immediate`), safe beside other processes using the
store. :mod:`fedbandit_env.bench.store` reads and writes the rows.
"""

from __future__ import annotations

import os
import sqlite3
import stat
import time
from collections.abc import Callable
from pathlib import Path

from fedbandit_env.errors import StoreError

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
    flags TEXT NOT NULL DEFAULT '{{}}',
    compile_time REAL NOT NULL DEFAULT 0,
    PRIMARY KEY (cell_hash, results_version, seed)
)
"""

COLUMNS = (
    "cell_hash",
    "seed",
    "suite",
    "env_id",
    "agent_id",
    "label",
    "env_key",
    "config",
    "horizon",
    "final_regret_per_agent",
    "final_regret_network",
    "messages",
    "floats",
    "cost",
    "epsilon",
    "wall_time",
    "steps",
    "curve",
    "created",
    "results_version",
    "flags",
    "compile_time",
)
"""The columns of table ``runs`` (the fields of :class:`fedbandit_env.bench.store.Row`).
The last two came later: ``flags`` (docs/bench.md, "Flags") and ``compile_time`` (the JAX
backend's seconds of compiling, per run, included in ``wall_time``; 0 on numpy). A store without
them reads as if every row's flags were ``{}`` and its compile time 0, and a writer adds them
(:func:`add_columns`)."""

ADDED = {"flags": "'{}'", "compile_time": "0"}
"""Columns added after the first versioned schema, with the value an older row reads as."""

UNVERSIONED = "unversioned"
"""The results version :func:`migrate` gives the rows of a store older than results versions."""

# Work units a writer is running (a hint so that concurrent writers split the work; rows, not
# claims, decide what is done: a stale claim of a killed process only defers that unit). A
# unit is (cell hash, results version, first seed): a version bump re-runs the cell.
CLAIMS = """
CREATE TABLE IF NOT EXISTS claims (
    cell_hash TEXT NOT NULL,
    results_version TEXT NOT NULL,
    first_seed INTEGER NOT NULL,
    owner TEXT NOT NULL,
    claimed REAL NOT NULL,
    PRIMARY KEY (cell_hash, results_version, first_seed)
)
"""

SQLITE_MAGIC = b"SQLite format 3\x00"
BUSY_TIMEOUT = 600.0  # seconds a writer waits for another one's transaction


def _kind(head: bytes, size: int) -> str:
    """What a file that is not an SQLite database looks like, for the error message."""
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError as err:  # a character cut by the 100-byte read is still text
        text = head[: err.start].decode("utf-8") if err.start >= len(head) - 3 else None
    if text is not None and all(c.isprintable() or c in "\t\r\n" for c in text):
        return f"a text file ({size} bytes)"
    return f"a binary file ({size} bytes)"


def check_store_path(path: Path, writable: bool) -> bool:
    """Raise a :class:`StoreError` naming ``path`` and what it is unless it is an SQLite file
    (or, for a writer, may become one: a missing file in an existing folder). Reads at most the
    first 100 bytes, writes nothing. Returns whether the file exists."""
    try:
        st = path.stat()
    except FileNotFoundError:
        if not writable:
            raise StoreError(
                f"store: {path} does not exist; run `fedbandit suite NAME --store {path}` first"
            ) from None
        if not path.parent.is_dir():
            raise StoreError(f"store: {path}: the folder {path.parent} does not exist") from None
        return False
    except OSError as err:
        raise StoreError(f"store: {path}: cannot look at it ({err.strerror})") from None
    if stat.S_ISDIR(st.st_mode):
        raise StoreError(f"store: {path} is a directory, not a results store file")
    if not stat.S_ISREG(st.st_mode):
        raise StoreError(f"store: {path} is not a regular file (a device, pipe or socket)")
    try:
        with open(path, "rb") as f:
            head = f.read(100)
    except OSError as err:
        raise StoreError(f"store: {path} is not readable ({err.strerror})") from None
    if not head:
        raise StoreError(
            f"store: {path} is an empty file, not a results store (an SQLite database written "
            "by `fedbandit suite`)"
        )
    if not head.startswith(SQLITE_MAGIC):
        raise StoreError(f"store: {path} is {_kind(head, st.st_size)}, not an SQLite results store")
    if writable and not os.access(path, os.W_OK):
        raise StoreError(f"store: {path} is read-only (no permission to write it)")
    if writable and not os.access(path.parent, os.W_OK):
        raise StoreError(
            f"store: {path}: its folder {path.parent} is read-only (a writer needs to create "
            f"{path.name}-wal beside it; read-only commands work there)"
        )
    return True


def check_schema(
    path: str, query: Callable[[str], list[tuple]], conn: sqlite3.Connection, read_only: bool
) -> None:
    """The store at ``path`` holds a ``runs`` table with every column of :data:`COLUMNS` (a writer
    adds the table to a database without tables); a store older than results versions is refused
    with the :func:`migrate` command to run. ``query`` runs a read query on the store."""
    try:
        tables = {n for (n,) in query("SELECT name FROM sqlite_master")}
        if "runs" not in tables and not tables and not read_only:
            conn.execute(SCHEMA.format(table="runs"))
            tables.add("runs")
        if "runs" not in tables:
            what = "an empty SQLite database" if not tables else "an SQLite database"
            raise StoreError(
                f"store: {path} is {what} without a 'runs' table, not a fedbandit results store"
            )
        have = {r[1] for r in query("PRAGMA table_info(runs)")}
    except sqlite3.DatabaseError as err:
        raise StoreError(f"store: {path} is not a readable SQLite database ({err})") from None
    missing = [c for c in COLUMNS if c not in have and c not in ADDED]
    if missing == ["results_version"]:
        raise StoreError(
            f"store: {path} was written before results versions (its rows do not say "
            "which package, environment and learner versions produced them), so its rows "
            "cannot be compared with new ones. Either move it aside and re-run your suites "
            "into a new store, or keep its rows as 'unversioned' (never ranked with new "
            'rows): python -c "from fedbandit_env.bench.store import migrate; '
            f'migrate({path!r})"'
        )
    if missing:
        raise StoreError(
            f"store: {path} has a 'runs' table without the columns {missing}, not a "
            "fedbandit results store"
        )


def select_columns(have: set[str]) -> list[str]:
    """The SELECT expressions of :data:`COLUMNS` on a table with the columns ``have``: a column
    of :data:`ADDED` that the table lacks reads as its default."""
    return [c if c in have or c not in ADDED else f"{ADDED[c]} AS {c}" for c in COLUMNS]


_ADDED_TYPES = {"flags": "TEXT", "compile_time": "REAL"}


def add_columns(conn: sqlite3.Connection) -> None:
    """Add the columns of :data:`ADDED` that a ``runs`` table lacks, with their defaults (in
    the caller's transaction; safe if another writer added them meanwhile)."""
    have = {r[1] for r in conn.execute("PRAGMA table_info(runs)").fetchall()}
    for name, default in ADDED.items():
        if name not in have:
            kind = _ADDED_TYPES[name]
            conn.execute(f"ALTER TABLE runs ADD COLUMN {name} {kind} NOT NULL DEFAULT {default}")


def wal(conn: sqlite3.Connection) -> None:
    if conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
        conn.execute("PRAGMA journal_mode=WAL")


def retry_busy(fn, timeout: float = BUSY_TIMEOUT):
    """Run ``fn``, retrying while SQLite reports the database busy (the busy handler does not
    cover every statement, e.g. changing the journal mode)."""
    deadline = time.monotonic() + timeout
    delay = 0.01
    while True:
        try:
            return fn()
        except sqlite3.OperationalError as err:
            if "locked" not in str(err) and "busy" not in str(err):
                raise
            if time.monotonic() > deadline:
                raise
            time.sleep(delay)
            delay = min(delay * 2, 0.5)


def immediate(conn: sqlite3.Connection, fn):
    """Run ``fn()`` in one ``BEGIN IMMEDIATE`` transaction on an autocommit connection: it takes
    the write lock up front (waiting up to the busy timeout for another writer), commits, or
    rolls back on error."""
    retry_busy(lambda: conn.execute("BEGIN IMMEDIATE"))
    try:
        out = fn()
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
    return out


def new_claims(conn: sqlite3.Connection) -> None:
    """Replace a ``claims`` table keyed without the results version (claims are only hints)."""
    conn.execute("DROP TABLE IF EXISTS claims")
    conn.execute(CLAIMS)


def migrate(path: str | Path) -> int:
    """Add the ``results_version`` column to a store written before results versions, in one
    ``BEGIN IMMEDIATE`` transaction (safe beside other processes using the store): its rows keep
    their numbers under the version ``"unversioned"`` (stale for every learner, so the
    leaderboard never ranks them with new rows). Returns the rows kept (0 if the store already
    has the column). The path is checked like a writer's (docs/reliability.md, "Store files")."""
    file = Path(path)
    if not check_store_path(file, writable=True):
        raise StoreError(f"store: {file} does not exist; there is nothing to migrate")
    try:
        conn = sqlite3.connect(file, timeout=BUSY_TIMEOUT, isolation_level=None)
        conn.execute("PRAGMA trusted_schema=OFF")
    except sqlite3.Error as err:
        raise StoreError(f"store: {file} is not a readable SQLite database ({err})") from None
    try:
        old = [c for c in COLUMNS if c != "results_version" and c not in ADDED]

        def columns() -> set[str]:
            return {r[1] for r in conn.execute("PRAGMA table_info(runs)").fetchall()}

        have = columns()
        if "results_version" in have:
            return 0
        missing = [c for c in old if c not in have]
        if not have:
            raise StoreError(f"store: {file} has no 'runs' table, not a fedbandit results store")
        if missing:
            raise StoreError(
                f"store: {file} has a 'runs' table without the columns {missing}, not a "
                "fedbandit results store"
            )

        def copy() -> int:
            if "results_version" in columns():  # another process migrated it meanwhile
                return 0
            names = ", ".join(old)
            conn.execute("DROP TABLE IF EXISTS runs_versioned")
            conn.execute(SCHEMA.format(table="runs_versioned"))
            conn.execute(
                f"INSERT INTO runs_versioned ({names}, results_version) "
                f"SELECT {names}, ? FROM runs",
                (UNVERSIONED,),
            )
            kept = int(conn.execute("SELECT COUNT(*) FROM runs_versioned").fetchone()[0])
            conn.execute("DROP TABLE runs")
            conn.execute("ALTER TABLE runs_versioned RENAME TO runs")
            new_claims(conn)
            return kept

        return int(immediate(conn, copy))
    except sqlite3.Error as err:
        raise StoreError(f"store: {file}: cannot migrate it ({err})") from None
    finally:
        conn.close()
