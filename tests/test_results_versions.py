"""Results versions (fedbandit_env.bench.versions, docs/bench.md): rows of different package /
environment / learner versions are never pooled, the leaderboard says when rows are stale, and a
store older than results versions is refused until it is migrated."""

from __future__ import annotations

import dataclasses
import sqlite3

import pytest

from baselines.ucb import UCB1
from fedbandit_env import ConfigError, __version__, register
from fedbandit_env.agent_registry import _AGENTS
from fedbandit_env.bench.cli import main
from fedbandit_env.bench.evaluate import evaluate
from fedbandit_env.bench.executors import run_suite
from fedbandit_env.bench.leaderboard import build, current_rows, to_markdown
from fedbandit_env.bench.store import UNVERSIONED, ResultsStore, migrate
from fedbandit_env.bench.suites import SUITES, Cell, Suite
from fedbandit_env.errors import StoreError
from fedbandit_env.registration import _REGISTRY

ENV = "FedBandit/Homogeneous-v0"
SMALL = {"num_agents": 2, "num_arms": 3, "topology": "complete"}


class Versioned(UCB1):
    agent_id = "test_versioned"


@pytest.fixture
def versioned(monkeypatch):
    monkeypatch.setitem(_AGENTS, "test_versioned", Versioned)
    monkeypatch.setattr(Versioned, "version", 1)
    suite = Suite("versioned", (Cell(ENV, "test_versioned", 50, 3, SMALL, {}),))
    monkeypatch.setitem(SUITES, "versioned", suite)
    return suite


def test_the_results_version_names_package_environment_and_learner(monkeypatch):
    result = evaluate(ENV, "ucb1", runs=1, env_kwargs={**SMALL, "horizon": 10})
    assert result.results_version == (f"fedbandit {__version__} / env {ENV} v1 / learner ucb1 v3")
    assert result.summary()["results_version"] == result.results_version
    monkeypatch.setattr(UCB1, "version", 4)
    monkeypatch.setitem(_REGISTRY, ENV, dataclasses.replace(_REGISTRY[ENV], version=2))
    bumped = evaluate(ENV, "ucb1", runs=1, env_kwargs={**SMALL, "horizon": 10})
    assert bumped.results_version.endswith(f"env {ENV} v2 / learner ucb1 v4")


def test_a_learner_version_bump_reruns_and_never_pools(versioned, monkeypatch, tmp_path):
    store = ResultsStore(tmp_path / "r.sqlite")
    assert run_suite(versioned, store, quiet=True) == 3
    assert run_suite(versioned, store, quiet=True) == 0
    monkeypatch.setattr(Versioned, "version", 2)
    assert run_suite(versioned, store, quiet=True) == 3  # the old rows do not count as done
    rows = store.rows()
    assert len(rows) == 6 and {r.results_version[-2:] for r in rows} == {"v1", "v2"}
    entries = build(rows)
    assert sorted((e.runs, e.results_version[-2:]) for e in entries) == [(3, "v1"), (3, "v2")]
    table = to_markdown(entries)
    for e in entries:
        assert f"| test_versioned [{e.results_version}] | 3 |" in table
    notes: list[str] = []
    kept = current_rows(rows, notes.append)
    assert len(kept) == 3 and {r.results_version[-2:] for r in kept} == {"v2"}
    assert len(notes) == 1 and "3 stale row(s) of test_versioned" in notes[0]


def test_an_environment_version_bump_makes_rows_stale(versioned, monkeypatch, tmp_path, capsys):
    path = tmp_path / "r.sqlite"
    run_suite(versioned, ResultsStore(path), quiet=True)
    monkeypatch.setitem(_REGISTRY, ENV, dataclasses.replace(_REGISTRY[ENV], version=2))
    with pytest.raises(SystemExit):  # nothing current is left to rank
        main(["leaderboard", "--store", str(path), "--suite", "versioned"])
    err = capsys.readouterr().err
    assert "3 stale row(s) of test_versioned left out" in err and f"env {ENV} v1" in err
    run_suite(versioned, ResultsStore(path), quiet=True)
    main(["leaderboard", "--store", str(path), "--suite", "versioned"])
    captured = capsys.readouterr()
    assert "| test_versioned | 3 |" in captured.out and "stale" in captured.err


OLD_SCHEMA = """
CREATE TABLE runs (
    cell_hash TEXT NOT NULL, seed INTEGER NOT NULL, suite TEXT NOT NULL, env_id TEXT NOT NULL,
    agent_id TEXT NOT NULL, label TEXT NOT NULL, env_key TEXT NOT NULL, config TEXT NOT NULL,
    horizon INTEGER NOT NULL, final_regret_per_agent REAL NOT NULL,
    final_regret_network REAL NOT NULL, messages INTEGER NOT NULL, floats INTEGER NOT NULL,
    cost REAL NOT NULL, epsilon REAL, wall_time REAL NOT NULL, steps TEXT NOT NULL,
    curve TEXT NOT NULL, created REAL NOT NULL, PRIMARY KEY (cell_hash, seed)
)
"""


def old_store(path, versioned: Suite) -> None:
    """A store as written before results versions: the same rows without the column."""
    new = ResultsStore(":memory:")
    run_suite(versioned, new, quiet=True)
    conn = sqlite3.connect(path)
    conn.execute(OLD_SCHEMA)
    for row in new.rows():
        values = dataclasses.astuple(row)[:-3]  # without results_version, flags, compile_time
        conn.execute(f"INSERT INTO runs VALUES ({', '.join('?' for _ in values)})", values)
    conn.commit()
    conn.close()


def test_an_old_store_is_refused_until_migrated(versioned, tmp_path, capsys):
    path = tmp_path / "old.sqlite"
    old_store(path, versioned)
    with pytest.raises(StoreError, match="written before results versions.*migrate"):
        ResultsStore(path)
    with pytest.raises(SystemExit):
        main(["leaderboard", "--store", str(path)])
    assert "written before results versions" in capsys.readouterr().err
    assert migrate(path) == 3
    assert migrate(path) == 0  # already migrated
    store = ResultsStore(path)
    assert {r.results_version for r in store.rows()} == {UNVERSIONED}
    assert run_suite(versioned, store, quiet=True) == 3  # unversioned rows are never current
    notes: list[str] = []
    assert len(current_rows(store.rows(), notes.append)) == 3
    assert "3 stale row(s)" in notes[0] and UNVERSIONED in notes[0]


def _listing(folder):
    return {p.name: p.read_bytes() for p in folder.iterdir()}


def test_a_read_only_open_of_an_old_store_never_migrates(versioned, tmp_path, capsys):
    path = tmp_path / "old.sqlite"
    old_store(path, versioned)
    before = _listing(tmp_path)
    with pytest.raises(StoreError, match=r"written before results versions.*migrate\("):
        ResultsStore(path, create=False)
    with pytest.raises(SystemExit) as exit_:
        main(["leaderboard", "--store", str(path)])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and err.count("\n") == 1 and "migrate(" in err
    assert "not a fedbandit results store" not in err
    with pytest.raises(SystemExit) as exit_:  # a writer refuses it too, before writing anything
        main(["suite", "versioned", "--store", str(path), "--quiet"])
    assert exit_.value.code == 2 and "written before results versions" in capsys.readouterr().err
    assert _listing(tmp_path) == before


def test_migrate_rebuilds_claims_keyed_by_results_version(versioned, tmp_path):
    path = tmp_path / "old.sqlite"
    old_store(path, versioned)
    conn = sqlite3.connect(path)  # the claims table of a store written before results versions
    conn.execute(
        "CREATE TABLE claims (cell_hash TEXT NOT NULL, first_seed INTEGER NOT NULL, "
        "owner TEXT NOT NULL, claimed REAL NOT NULL, PRIMARY KEY (cell_hash, first_seed))"
    )
    conn.execute("INSERT INTO claims VALUES ('abc', 0, 'gone', 0.0)")
    conn.commit()
    conn.close()
    assert migrate(path) == 3
    store = ResultsStore(path)
    assert store.claim("abc", 0, "me", "v2") and not store.claim("abc", 0, "other", "v2")
    assert store.claim("abc", 0, "other", "v3")


def test_migrate_refuses_what_is_not_a_store(tmp_path):
    with pytest.raises(StoreError, match="does not exist"):
        migrate(tmp_path / "missing.sqlite")
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(StoreError, match="notes.txt is a text file"):
        migrate(tmp_path / "notes.txt")


def test_register_validates_the_environment_version():
    with pytest.raises(ConfigError, match="version: expected a positive int, got 0"):
        register("Test/Versioned-v0", "fedbandit_env.parallel_env:FedBanditParallelEnv", version=0)
