"""Concurrent writers on one results store (docs/reliability.md, "Concurrent writers"): any
number of `fedbandit suite` processes may share a store; all exit 0 and the store then holds
exactly the rows of one clean run; a reader never breaks; a run stored with other numbers is an
error, never a silent change."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from fedbandit_env.bench.cli import main
from fedbandit_env.bench.executors import claimed, plan, run_suite, run_unit
from fedbandit_env.bench.store import ResultsStore
from fedbandit_env.bench.suites import Cell, Suite
from fedbandit_env.errors import StoreConflictError, StoreError

ROOT = Path(__file__).resolve().parents[1]
ENV = "FedBandit/Heterogeneous-v0"
KW = {"num_agents": 4, "num_arms": 4, "topology": "ring"}
RACE = Suite(
    "race",
    tuple(Cell(ENV, agent, 150, 6, KW) for agent in ("ucb1", "ucb1_shared", "epsilon_greedy")),
)
SCRIPT = (
    "import sys; from fedbandit_env.bench import suites; "
    "from tests.test_store_concurrency import RACE; suites.SUITES['race'] = RACE; "
    "from fedbandit_env.bench.cli import main; main(sys.argv[1:])"
)


def _table(store: ResultsStore) -> dict[tuple, tuple]:
    rows = store.rows()
    assert len({(r.cell_hash, r.seed) for r in rows}) == len(rows)
    return {(r.cell_hash, r.seed): r.numbers for r in rows}


def test_two_suite_processes_on_one_store_equal_a_clean_run(tmp_path):
    clean = ResultsStore(tmp_path / "clean.sqlite")
    run_suite(RACE, clean, quiet=True, chunk=2)
    clean.close()
    clean = ResultsStore(tmp_path / "clean.sqlite", create=False)
    path = tmp_path / "shared.sqlite"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    argv = ["suite", "race", "--store", str(path), "--chunk", "2", "--quiet"]
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", SCRIPT, *argv],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    reads, failures = [0], []

    def reader():  # a leaderboard-like reader polling while the writers run
        while any(p.poll() is None for p in procs):
            if path.exists():
                try:
                    store = ResultsStore(path, create=False)
                    store.rows()
                    store.close()
                    reads[0] += 1
                except Exception as err:  # any failure of a reader is a bug
                    failures.append(repr(err))
            time.sleep(0.01)

    thread = threading.Thread(target=reader)
    thread.start()
    outputs = [p.communicate(timeout=300) for p in procs]
    thread.join()
    for p, (_out, err) in zip(procs, outputs, strict=True):
        assert p.returncode == 0 and "Traceback" not in err, err
    assert failures == [] and reads[0] > 0
    shared = ResultsStore(path, create=False)
    assert _table(shared) == _table(clean)
    assert shared.count() == 3 * 6
    shared.close()
    clean.close()
    # no temporary file of the atomic creation is left; SQLite's own -wal/-shm may outlive the
    # writers if a reader overlapped their end, and the next writer removes them
    assert {n.removesuffix("-wal").removesuffix("-shm") for n in os.listdir(tmp_path)} == {
        "clean.sqlite",
        "shared.sqlite",
    }
    ResultsStore(path).close()
    assert sorted(os.listdir(tmp_path)) == ["clean.sqlite", "shared.sqlite"]


def test_an_identical_run_is_skipped_and_a_different_one_is_refused(tmp_path):
    store = ResultsStore(tmp_path / "r.sqlite")
    cell = RACE.cells[0]
    assert run_suite(Suite("one", (cell,)), store, quiet=True) == 6
    rows = [dataclasses.asdict(r) for r in store.rows()]
    assert store.append(rows) == 0 and store.count() == 6  # a second writer's identical runs
    before = _table(store)
    changed = [dict(r) for r in rows[:2]]
    changed[1]["final_regret_per_agent"] += 1e-9
    fresh = {**rows[0], "seed": 99}
    with pytest.raises(StoreConflictError, match=r"seed 1\) is already stored with different "):
        store.append([fresh, *changed])
    assert _table(store) == before  # nothing of the batch was written, not even the new seed
    timings = [
        {**r, "wall_time": 0.0, "created": 0.0, "suite": "other", "label": "x"} for r in rows
    ]
    assert store.append(timings) == 0


def claim_key(unit):
    return unit.cell.config_hash, unit.seeds[0]


def test_a_unit_claimed_by_another_writer_is_deferred_then_run_if_still_missing(tmp_path):
    other, mine = ResultsStore(tmp_path / "a.sqlite"), ResultsStore(tmp_path / "a.sqlite")
    units = plan(RACE, RACE.cells, mine, chunk=3)
    key = (units[0].cell.agent_id, units[0].seeds)
    assert other.claim(*claim_key(units[0]), "other writer", units[0].results_version)
    order = [(u.cell.agent_id, u.seeds) for u in claimed(units, mine)]
    assert order[-1] == key and len(order) == len(units)  # deferred, then run: still missing
    # a unit the other writer claimed and finished meanwhile is not run again
    other, mine = ResultsStore(tmp_path / "b.sqlite"), ResultsStore(tmp_path / "b.sqlite")
    assert other.claim(*claim_key(units[0]), "other writer", units[0].results_version)
    order = []
    for unit in claimed(units, mine):
        if not order:  # the other writer finishes its unit while this one runs its first
            assert other.append(run_unit(units[0])) == 3
        order.append((unit.cell.agent_id, unit.seeds))
    assert key not in order and len(order) == len(units) - 1
    assert other.claim(*claim_key(units[0]), "a third writer", units[0].results_version)


def test_a_claim_holds_one_results_version_only(tmp_path):
    """A unit is (cell, results version, first seed): a claim at an old version (a writer of the
    code before a version bump) does not defer the unit at the new one, and rows of another
    version are a new run, not a conflict."""
    other, mine = ResultsStore(tmp_path / "v.sqlite"), ResultsStore(tmp_path / "v.sqlite")
    units = plan(RACE, RACE.cells, mine, chunk=3)
    unit = units[0]
    assert unit.results_version.startswith("fedbandit ")
    assert other.claim(*claim_key(unit), "old writer", "an older version")
    assert not other.claim(*claim_key(unit), "another", "an older version")
    order = [(u.cell.agent_id, u.seeds) for u in claimed(units, mine)]
    assert order[0] == (unit.cell.agent_id, unit.seeds)  # not deferred
    rows = run_unit(unit)
    assert mine.append(rows) == 3
    older = [{**r, "results_version": "an older version", "curve": "[]"} for r in rows]
    assert other.append(older) == 3 and mine.count() == 6
    assert mine.done_seeds(unit.cell.config_hash, unit.results_version) == set(unit.seeds)


def test_a_reader_of_an_idle_store_sees_a_writer_that_starts_later(tmp_path):
    """A reader opens an idle store without creating -wal/-shm (immutable); a writer that
    starts afterwards changes the file, and the reader's next query sees the new rows."""
    path = tmp_path / "r.sqlite"
    first, second = (Suite(f"s{k}", (cell,)) for k, cell in enumerate(RACE.cells[:2]))
    writer = ResultsStore(path)
    run_suite(first, writer, quiet=True)
    writer.close()
    reader = ResultsStore(path, create=False)
    assert reader.count() == 6 and os.listdir(tmp_path) == ["r.sqlite"]
    writer = ResultsStore(path)
    run_suite(second, writer, quiet=True)
    writer.close()  # the last connection of the writer: checkpoints into the main file
    assert reader.count() == 12 and len(reader.rows()) == 12
    reader.close()


def test_a_read_only_store_refuses_writes(tmp_path, capsys):
    path = tmp_path / "r.sqlite"
    ResultsStore(path).close()
    store = ResultsStore(path, create=False)
    with pytest.raises(StoreError, match="opened read-only"):
        store.append([dataclasses.asdict(r) for r in store.rows()] or [{"cell_hash": "x"}])
    with pytest.raises(SystemExit) as err:  # an empty store: a clear error, not a traceback
        main(["leaderboard", "--store", str(path)])
    assert err.value.code == 2 and "no results" in capsys.readouterr().err
