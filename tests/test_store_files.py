"""Paths that are not a results store (docs/reliability.md, "Store files"): one error line
naming the path and what it is, exit status 1 or 2, no traceback, the file and its folder left
exactly as they were, no sidecar file; read-only commands open the store read-only and work in a
read-only folder, creating nothing."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from fedbandit_env.bench import suites as suites_module
from fedbandit_env.bench.cli import main
from fedbandit_env.bench.executors import run_suite
from fedbandit_env.bench.store import ResultsStore
from fedbandit_env.bench.suites import Cell, Suite
from fedbandit_env.errors import StoreError

ROOT = Path(__file__).resolve().parents[1]
ENV = "FedBandit/Heterogeneous-v0"
KW = {"num_agents": 3, "num_arms": 3, "topology": "ring"}
TINY = Suite("tiny", (Cell(ENV, "ucb1", 30, 2, KW), Cell(ENV, "ucb1_shared", 30, 2, KW)))


@pytest.fixture
def tiny(monkeypatch):
    monkeypatch.setitem(suites_module.SUITES, "tiny", TINY)
    return "tiny"


@pytest.fixture(scope="module")
def store_bytes(tmp_path_factory) -> bytes:
    """The bytes of a valid store holding the tiny suite (closed, in WAL format, no -wal)."""
    path = tmp_path_factory.mktemp("valid") / "r.sqlite"
    store = ResultsStore(path)
    run_suite(TINY, store, quiet=True)
    store.close()
    assert sorted(p.name for p in path.parent.iterdir()) == ["r.sqlite"]
    return path.read_bytes()


def snapshot(folder: Path) -> dict[str, bytes | None]:
    """Every entry under ``folder`` with its bytes (None for a directory)."""
    out = {}
    for p in sorted(folder.rglob("*")):
        out[str(p.relative_to(folder))] = None if p.is_dir() else p.read_bytes()
    return out


def _other_sqlite(path: Path) -> None:
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE notes (text TEXT)")
    conn.execute("INSERT INTO notes VALUES ('mine')")
    conn.commit()
    conn.close()


BAD = {
    "empty file": (lambda p: p.write_bytes(b""), "is an empty file"),
    "text file": (lambda p: p.write_text("id,regret\n1,2.5\n"), "is a text file"),
    "random bytes": (lambda p: p.write_bytes(os.urandom(3000)), "is a binary file"),
    "directory": (lambda p: p.mkdir(), "is a directory"),
    "other sqlite": (_other_sqlite, "without a 'runs' table"),
    "corrupt sqlite": (
        lambda p: p.write_bytes(b"SQLite format 3\x00" + os.urandom(5000)),
        "not a readable SQLite database",
    ),
}


@pytest.mark.parametrize("kind", sorted(BAD))
@pytest.mark.parametrize("command", ["leaderboard", "suite"])
def test_a_path_that_is_not_a_store_is_one_error_line_and_stays_unchanged(
    kind, command, tmp_path, tiny, capsys
):
    make, what = BAD[kind]
    path = tmp_path / "store.sqlite"
    make(path)
    before = snapshot(tmp_path)
    argv = ["leaderboard", "--store", str(path)]
    if command == "suite":
        argv = ["suite", tiny, "--store", str(path), "--quiet"]
    with pytest.raises(SystemExit) as err:
        main(argv)
    out, errors = capsys.readouterr()
    assert err.value.code in (1, 2) and out == ""
    assert errors.count("\n") == 1 and "Traceback" not in errors
    assert str(path) in errors and what in errors, errors
    assert snapshot(tmp_path) == before


def test_the_store_class_refuses_before_writing(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("my notes")
    with pytest.raises(StoreError, match="notes.txt is a text file"):
        ResultsStore(path)
    assert path.read_text() == "my notes" and os.listdir(tmp_path) == ["notes.txt"]
    with pytest.raises(StoreError, match="the folder .*nowhere does not exist"):
        ResultsStore(tmp_path / "nowhere" / "r.sqlite")


def test_a_read_only_command_creates_nothing_beside_a_valid_store(tmp_path, store_bytes, capsys):
    path = tmp_path / "r.sqlite"
    path.write_bytes(store_bytes)
    before = snapshot(tmp_path)
    main(["leaderboard", "--store", str(path)])
    assert "ucb1_shared" in capsys.readouterr().out
    store = ResultsStore(path, create=False)
    assert store.count() == 4
    store.close()
    assert snapshot(tmp_path) == before


# ------------------------------------------------------------ permissions (a second user)
def _as_user() -> list[str] | None:
    """The prefix that runs a command without root's power to read anything: nothing for a
    normal user, ``setpriv`` to nobody for root; None if root cannot drop privileges."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    return (
        None if setpriv is None else [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"]
    )


@pytest.fixture
def shared(tmp_path):
    """A folder that the user of :func:`_as_user` can read but not write (a root-owned 755
    folder for nobody; a 555 folder for a normal user)."""
    prefix = _as_user()
    if prefix is None:
        pytest.skip("running as root without setpriv: cannot take away read permission")
    folder = Path(tempfile.mkdtemp(prefix="fedbandit-ro-", dir="/tmp"))
    folder.chmod(0o755)
    yield folder, prefix
    folder.chmod(0o755)
    shutil.rmtree(folder)


def _cli(prefix: list[str], *argv: str, script: str | None = None) -> subprocess.CompletedProcess:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "PYTHONPATH": str(ROOT),
        "PYTHONDONTWRITEBYTECODE": "1",
        "HOME": "/tmp",
    }
    code = script or "import sys; from fedbandit_env.bench.cli import main; main(sys.argv[1:])"
    return subprocess.run(
        [*prefix, sys.executable, "-c", code, *argv],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        cwd="/",
    )


def _lock(folder: Path, file: Path | None = None, file_mode: int | None = None) -> None:
    if file is not None:
        file.chmod(file_mode)
    if os.geteuid() != 0:
        folder.chmod(0o555)


def test_a_read_only_folder_serves_read_only_commands_and_refuses_writes(shared, store_bytes):
    folder, prefix = shared
    path = folder / "r.sqlite"
    path.write_bytes(store_bytes)
    writable = folder / "w.sqlite"  # a store the user may write, in a folder it may not
    writable.write_bytes(store_bytes)
    if os.geteuid() == 0:
        os.chown(writable, 65534, 65534)
    _lock(folder, path, 0o444)
    before = snapshot(folder)
    board = _cli(prefix, "leaderboard", "--store", str(path))
    assert board.returncode == 0 and "ucb1_shared" in board.stdout, board.stderr
    tiny = (
        "import sys; from fedbandit_env.bench import suites; from tests.test_store_files import "
        "TINY; suites.SUITES['tiny'] = TINY; from fedbandit_env.bench.cli import main; "
        "main(sys.argv[1:])"
    )
    for store in (path, writable, folder / "new.sqlite"):
        run = _cli(prefix, "suite", "tiny", "--store", str(store), "--quiet", script=tiny)
        assert run.returncode in (1, 2) and run.stdout == "", run.stderr
        assert run.stderr.count("\n") == 1 and "Traceback" not in run.stderr
        assert str(store) in run.stderr and "read-only" in run.stderr
    assert snapshot(folder) == before


def test_an_unreadable_file_is_one_error_line(shared, store_bytes):
    folder, prefix = shared
    path = folder / "r.sqlite"
    path.write_bytes(store_bytes)
    _lock(folder, path, 0o600 if os.geteuid() == 0 else 0o000)
    for argv in (["leaderboard", "--store", str(path)],):
        run = _cli(prefix, *argv)
        assert run.returncode in (1, 2) and run.stdout == "", run.stderr
        assert run.stderr.count("\n") == 1 and "Traceback" not in run.stderr
        assert str(path) in run.stderr and "not readable" in run.stderr
    path.chmod(0o644)
    assert path.read_bytes() == store_bytes
    assert sorted(os.listdir(folder)) == ["r.sqlite"]
