"""Files are data (docs/reliability.md, "Files are data"): a results store or a reference file
someone sends never runs code. Learner ids read from a file are looked up in this process's
registry, never imported; reading a row never builds a learner; a stored trust flag is ignored;
``reference check`` re-runs only registered ids. Each crafted file goes through every command
that reads it, and no marker file appears."""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path

import pytest

from fedbandit_env.agent_registry import class_version, lookup_agent, without_trust_flags
from fedbandit_env.bench import suites as suites_module
from fedbandit_env.bench.cli import main
from fedbandit_env.bench.executors import run_suite
from fedbandit_env.bench.reference import _config_hash, cell_record, dumps
from fedbandit_env.bench.store import COLUMNS, ResultsStore
from fedbandit_env.bench.suites import Cell, Suite
from fedbandit_env.bench.versions import registered_results_version

ENV = "FedBandit/Heterogeneous-v0"
KW = {"num_agents": 3, "num_arms": 3, "topology": "ring"}
TINY = Suite("tiny", (Cell(ENV, "ucb1", 30, 2, KW), Cell(ENV, "ucb1_shared", 30, 2, KW)))


@pytest.fixture
def tiny(monkeypatch):
    monkeypatch.setitem(suites_module.SUITES, "tiny", TINY)
    return "tiny"


@pytest.fixture
def payloads(tmp_path, monkeypatch):
    """The crafted learner ids and kwargs, and the markers that running any of them creates.

    * ``subprocess:Popen`` whose kwargs run ``touch MARKER`` when it is instantiated;
    * ``evil_mod:policy``, a module on ``sys.path`` (as a file in the user's folder would be)
      that writes a marker when it is merely imported;
    * ``sb3_policy`` with a model file whose unpickling writes a marker, and a stored
      ``"trust_model": true``."""
    markers = {name: tmp_path / f"marker-{name}" for name in ("popen", "import", "model")}
    module = tmp_path / "evil_mod.py"
    module.write_text(
        f"open({str(markers['import'])!r}, 'w').close()\n"
        "def policy(observations, infos):\n    return {}\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("evil_mod", None)
    model = tmp_path / "evil.zip"
    _crafted_model(model, markers["model"])
    ids = {
        "subprocess:Popen": {"args": ["touch", str(markers["popen"])]},
        "evil_mod:policy": {},
        "sb3_policy": {"model_path": str(model), "trust_model": True},
    }
    return ids, markers


def _crafted_model(path: Path, marker: Path) -> None:
    """A zip laid out like an SB3 save whose pickled payload creates ``marker``."""
    import base64
    import builtins
    import pickle
    import zipfile

    class WritesMarker:
        def __reduce__(self):
            return (builtins.open, (str(marker), "w"))

    payload = base64.b64encode(pickle.dumps(WritesMarker())).decode()
    data = {"policy_class": {":type:": "<class 'abc.ABCMeta'>", ":serialized:": payload}}
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("data", json.dumps(data))


def _crafted_store(path: Path, ids: dict) -> None:
    """The tiny suite's store plus one row per crafted id (a copy of a real row whose config
    names the id; a declared epsilon, so that ``--audit`` considers it)."""
    store = ResultsStore(path)
    run_suite(TINY, store, quiet=True)
    store.close()
    conn = sqlite3.connect(path)
    row = dict(zip(COLUMNS, conn.execute(f"SELECT {', '.join(COLUMNS)} FROM runs LIMIT 1")
                   .fetchone(), strict=True))  # fmt: skip
    for i, (agent_id, kwargs) in enumerate(ids.items()):
        config = {"env_id": ENV, "agent_id": agent_id, "env_kwargs": {**KW, "horizon": 30},
                  "agent_kwargs": kwargs}  # fmt: skip
        crafted = {**row, "cell_hash": f"{i:016x}", "agent_id": agent_id, "label": agent_id,
                   "config": json.dumps(config), "epsilon": 1.0,
                   "results_version": f"fedbandit 0.1.0 / learner {agent_id} v1"}  # fmt: skip
        conn.execute(
            f"INSERT INTO runs ({', '.join(COLUMNS)}) VALUES ({', '.join('?' * len(COLUMNS))})",
            [crafted[c] for c in COLUMNS],
        )
    conn.commit()
    conn.close()


def _crafted_reference(path: Path, store_path: Path, ids: dict) -> None:
    """A reference file of the tiny suite's real cells plus one cell per crafted id, each with
    its hash recomputed (so it passes validation)."""
    store = ResultsStore(store_path, create=False)
    rows = [r for r in store.rows() if r.agent_id in ("ucb1", "ucb1_shared")]
    store.close()
    cells = []
    for label in ("ucb1", "ucb1_shared"):
        cells.append(cell_record("tiny", [r for r in rows if r.label == label]))
    for agent_id, kwargs in ids.items():
        record = json.loads(json.dumps(cells[0]))
        record["config"]["agent_id"] = agent_id
        record["config"]["agent_kwargs"] = kwargs
        record["label"] = agent_id
        record["cell_hash"] = _config_hash(record["config"])
        cells.append(record)
    path.write_text(dumps(cells))


def _no_markers(markers: dict) -> None:
    assert [name for name, m in markers.items() if m.exists()] == []


def test_the_payloads_are_live(payloads):
    """Each payload does run code when resolved the way the old reader did (import, build),
    so their absence below is what the lookup rules buy."""
    import importlib

    ids, markers = payloads
    importlib.import_module("evil_mod")
    assert markers["import"].exists()
    import subprocess

    subprocess.Popen(**ids["subprocess:Popen"]).wait()
    assert markers["popen"].exists()


def test_lookup_never_imports_and_versions_come_from_class_attributes(payloads):
    ids, markers = payloads
    for agent_id in ids:
        if agent_id != "sb3_policy":
            assert lookup_agent(agent_id) is None
            assert registered_results_version(ENV, agent_id) is None
    assert class_version("ucb1") == (3, "")
    assert registered_results_version(ENV, "sb3_policy") is not None  # registered: no build
    _no_markers(markers)
    assert without_trust_flags({"model_path": "m", "trust_model": True, "trust_x": 1}) == {
        "model_path": "m"
    }


def _commands(store: Path, reference: Path, html: Path) -> list[list[str]]:
    board = ["leaderboard", "--store", str(store)]
    return [
        board,
        [*board, "--format", "latex"],
        [*board, "--suite", "tiny"],
        [*board, "--html", str(html)],
        [*board, "--audit", "--audit-trials", "100"],
        [*board, "--reference", str(reference)],
        [*board, "--reference", str(reference), "--suite", "tiny"],
        [*board, "--include-unregistered"],
        [*board, "--include-unregistered", "--html", str(html) + "2"],
        ["reference", "check", "--reference", str(reference), "--quiet"],
        ["suite", "tiny", "--store", str(store), "--quiet"],
    ]


def test_no_command_runs_code_from_a_crafted_store_or_reference(payloads, tmp_path, tiny, capsys):
    pytest.importorskip("matplotlib")
    ids, markers = payloads
    store, reference = tmp_path / "theirs.sqlite", tmp_path / "theirs.json"
    _crafted_store(store, ids)
    _crafted_reference(reference, store, ids)
    for argv in _commands(store, reference, tmp_path / "page"):
        try:
            main(argv)
        except SystemExit as err:  # a refusal is fine; running code is not
            assert err.code in (0, 1, 2), argv
        out, err_text = capsys.readouterr()
        _no_markers(markers)
        assert "Traceback" not in err_text, argv
        if argv[0] == "leaderboard" and "--suite" not in argv:
            # unknown ids are counted on stderr and left out, or shown by their stored label
            # with --include-unregistered; never imported
            assert "not registered here" in err_text, argv
            assert ("subprocess:Popen" in out) == ("--include-unregistered" in argv), argv
        if argv[:2] == ["reference", "check"]:
            assert "skipped" in err_text or "skipped" in out
    assert "evil_mod" not in sys.modules


def test_reference_check_skips_unregistered_ids_and_stored_trust_flags(payloads, tmp_path):
    from fedbandit_env.bench.reference import check_reference, load_reference

    ids, markers = payloads
    store, reference = tmp_path / "theirs.sqlite", tmp_path / "theirs.json"
    _crafted_store(store, ids)
    _crafted_reference(reference, store, ids)
    report = check_reference(load_reference(reference), note=lambda _m: None)
    assert len(report.checked) == 2 and report.differences == []
    skipped = "\n".join(report.skipped)
    assert "subprocess:Popen" in skipped and "evil_mod:policy" in skipped
    assert "sb3_policy" in skipped and "trust flag" in skipped
    _no_markers(markers)
