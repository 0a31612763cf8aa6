"""Reference results shipped with the package (fedbandit_env.bench.reference, docs/bench.md
"Reference results"): the shipped file reproduces bit for bit, a build is deterministic, every
differing cell is reported, and rows of another results version are never ranked."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import fedbandit_env.bench.reference as reference
from baselines.ucb import UCB1
from fedbandit_env.bench.cli import main
from fedbandit_env.bench.executors import run_suite
from fedbandit_env.bench.reference import (
    HEADLINES,
    REFERENCE_PATH,
    ReferenceError,
    build_reference,
    check_reference,
    current_reference_rows,
    load_reference,
    reference_cells,
)
from fedbandit_env.bench.store import ResultsStore
from fedbandit_env.bench.suites import SUITES, Cell, Suite, get_suite

ROOT = Path(__file__).resolve().parents[1]
ENV = "FedBandit/Homogeneous-v0"
SMALL = {"num_agents": 3, "num_arms": 3, "topology": "ring"}


@pytest.mark.slow
def test_the_shipped_reference_is_valid_and_names_existing_headline_cells():
    ref = load_reference()  # validates the schema and the package version
    assert ref.path == REFERENCE_PATH and ref.cells
    assert {c["suite"] for c in ref.cells} <= {"standard", "quick", "robust", *HEADLINES}
    assert any(c["suite"] == "robust" for c in ref.cells)  # the robust suite is ranked against
    reference_cells(lambda _msg: None)  # raises if a headline label left its suite
    for name, (_, labels) in HEADLINES.items():
        assert set(labels) <= {c.name for c in get_suite(name).cells}


@pytest.mark.slow
def test_a_sample_of_the_shipped_reference_reproduces_bit_for_bit():
    """CI's guard: a change that moves a reference number fails here until the file is
    rebuilt (`fedbandit reference build`) and, if results moved, versions are bumped. The
    sample is drawn among the cells whose learner is installed, so it holds whichever cells
    the file has.

    The check runs in a subprocess that compiles at JAX's default level: the file's JAX rows
    were built that way, and the session's tests compile with most optimizations off
    (tests/conftest.py), which rounds some float32 sums differently."""
    code = (
        "import json\n"
        "from fedbandit_env.bench.reference import check_reference, load_reference\n"
        "r = check_reference(load_reference(), sample=3, seeds=2, seed=0, max_horizon=10_000,\n"
        "                    note=lambda _m: None)\n"
        "print(json.dumps({'checked': r.checked, 'differences': r.differences}))\n"
    )
    env = {**os.environ, "JAX_DISABLE_MOST_OPTIMIZATIONS": "0"}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          timeout=900, cwd=ROOT)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.splitlines()[-1])
    assert report["checked"]
    assert not report["differences"], "\n".join(report["differences"])


@pytest.fixture
def tiny(monkeypatch):
    """A tiny `standard` suite, empty `quick` and `robust` ones and one tiny paper suite with
    one headline cell."""
    standard = Suite(
        "standard",
        tuple(Cell(ENV, a, 60, 3, SMALL, {}, label=a) for a in ("ucb1", "uniform", "kl_ucb")),
    )
    paper = Suite("tinypaper", (Cell(ENV, "ucb1", 40, 4, SMALL, {}, label="ucb1"),))
    monkeypatch.setitem(SUITES, "standard", standard)
    monkeypatch.setitem(SUITES, "quick", Suite("quick", ()))
    monkeypatch.setitem(SUITES, "robust", Suite("robust", ()))
    monkeypatch.setitem(SUITES, "tinypaper", paper)
    monkeypatch.setattr(reference, "HEADLINES", {"tinypaper": (2, ("ucb1",))})
    return standard


def _build(path):
    return build_reference(path, executor="serial", note=lambda _m: None)


def test_a_build_is_deterministic_and_reproduces(tiny, tmp_path):
    first = _build(tmp_path / "a.json")
    second = _build(tmp_path / "b.json")
    text = first.path.read_bytes()
    assert text == second.path.read_bytes()  # no timings or dates: same code, same bytes
    assert first.cells == 4 and first.rows == 3 * 3 + 2 and first.size == len(text)
    ref = load_reference(first.path)
    assert {(c["suite"], c["label"], len(c["seeds"])) for c in ref.cells} == {
        ("standard", "ucb1", 3),
        ("standard", "uniform", 3),
        ("standard", "kl_ucb", 3),
        ("tinypaper", "ucb1", 2),
    }
    assert all(len(c["steps"]) <= reference.CURVE_POINTS for c in ref.cells)
    report = check_reference(ref, note=lambda _m: None)
    assert len(report.checked) == 4 and report.differences == []
    # the reference's rows equal a store's rows of the same cells, except the shorter curve
    store = ResultsStore(tmp_path / "s.sqlite")
    run_suite(tiny, store, quiet=True)
    mine = {(r.cell_hash, r.seed): r for r in store.rows()}
    for row in ref.rows():
        if row.suite == "standard":
            other = mine[(row.cell_hash, row.seed)]
            assert row.final_regret_per_agent == other.final_regret_per_agent
            assert (row.messages, row.results_version) == (other.messages, other.results_version)
            assert json.loads(row.curve)[-1] == json.loads(other.curve)[-1]


def _edit(path, fn):
    lines = path.read_text().splitlines()
    lines[1:-1] = [
        json.dumps(fn(json.loads(line.rstrip(","))), sort_keys=True, separators=(",", ":"))
        + ("," if line.endswith(",") else "")
        for line in lines[1:-1]
    ]
    path.write_text("\n".join(lines) + "\n")


def test_the_check_reports_every_differing_cell(tiny, tmp_path, capsys):
    path = _build(tmp_path / "ref.json").path

    def nudge(cell):
        if cell["label"] in ("uniform", "kl_ucb"):
            cell["final_regret_per_agent"][1] += 1e-12
            cell["curves"][2][3] = 12345.678
        return cell

    _edit(path, nudge)
    report = check_reference(load_reference(path), note=lambda _m: None)
    assert len(report.checked) == 4
    assert len(report.differences) == 4, report.differences
    text = "\n".join(report.differences)
    for label in ("uniform", "kl_ucb"):
        assert f"{label} (standard, cell" in text
    assert "seed 1: final_regret_per_agent, final_regret_network differ" not in text
    assert "seed 1: final_regret_per_agent differ" in text and "seed 2: curves differ" in text
    with pytest.raises(SystemExit) as exit_:
        main(["reference", "check", "--reference", str(path), "--quiet"])
    assert "4 difference(s) in 4 re-run cell(s)" in str(exit_.value.code)
    assert capsys.readouterr().out.count("differ") == 4


def test_the_cli_ranks_user_rows_against_the_reference(tiny, tmp_path, capsys, monkeypatch):
    path = _build(tmp_path / "ref.json").path
    mine = Suite("mine", (Cell(ENV, "thompson_beta", 60, 3, SMALL, {}),))
    store = ResultsStore(tmp_path / "mine.sqlite")
    run_suite(mine, store, quiet=True)
    main(["leaderboard", "--store", str(tmp_path / "mine.sqlite"), "--reference", str(path)])
    out = capsys.readouterr().out
    assert "| ★ thompson_beta (yours) | 3 |" in out  # your rows, marked and highlighted
    for label in ("ucb1", "uniform", "kl_ucb"):
        assert f"| {label} (reference) | 3 |" in out
    assert "baseline" in out  # the paired column
    assert "| ucb1 (reference) | 2 |" in out  # the paper suite's headline cell: its own table


def test_reference_rows_of_another_learner_version_are_left_out(tiny, tmp_path, monkeypatch):
    path = _build(tmp_path / "ref.json").path
    old = UCB1.version
    monkeypatch.setattr(UCB1, "version", old + 1)  # ucb1 changed after the reference was built
    notes = []
    rows = current_reference_rows(load_reference(path).rows(), notes.append)
    assert {r.label for r in rows} == {"uniform", "kl_ucb"}  # kl_ucb has its own version
    assert len(notes) == 1 and "5 row(s) of ucb1 left out" in notes[0]
    assert f"learner ucb1 v{old}" in notes[0] and "fedbandit reference build" in notes[0]
    report = check_reference(load_reference(path), note=lambda _m: None)
    assert sum("results version" in d for d in report.differences) == 2
    assert all("ucb1 (" in d for d in report.differences)


def test_a_reference_of_another_package_version_is_refused(tiny, tmp_path, capsys):
    path = _build(tmp_path / "ref.json").path
    path.write_text(path.read_text().replace('"package_version": "', '"package_version": "0.0.'))
    with pytest.raises(ReferenceError, match="was built by fedbandit 0.0.0.2.0 and this is"):
        load_reference(path)
    store = ResultsStore(tmp_path / "mine.sqlite")
    run_suite(Suite("m", (Cell(ENV, "ucb1", 60, 3, SMALL, {}),)), store, quiet=True)
    with pytest.raises(SystemExit) as exit_:
        main(["leaderboard", "--store", str(tmp_path / "mine.sqlite"), "--reference", str(path)])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "never ranked with this version's rows" in err


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda c: {k: v for k, v in c.items() if k != "seeds"}, "missing field 'seeds'"),
        (lambda c: {**c, "messages": "many"}, "field 'messages': expected a JSON list"),
        (lambda c: {**c, "cost": c["cost"][:1]}, "cost: expected one value per seed"),
        (lambda c: {**c, "epsilon": "big"}, "epsilon: expected a number"),
        (
            lambda c: {**c, "config": {**c["config"], "agent_kwargs": {"c": 9}}},
            "cell_hash does not match its config",
        ),
        (lambda c: {**c, "curves": [x[:-1] for x in c["curves"]]}, r"curves\[0\]: expected"),
    ],
)
def test_a_malformed_reference_is_a_clear_error(tiny, tmp_path, edit, message):
    path = _build(tmp_path / "ref.json").path
    _edit(path, edit)
    with pytest.raises(ReferenceError, match="cell 0 .*" + message.replace("(", r"\(")):
        load_reference(path)


def test_a_file_that_is_not_a_reference_is_refused(tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text("not json")
    with pytest.raises(ReferenceError, match="is not JSON"):
        load_reference(bad)
    bad.write_text('{"format": "something"}')
    with pytest.raises(ReferenceError, match="not a fedbandit reference file"):
        load_reference(bad)
    bad.write_text('{"format": "fedbandit-reference", "format_version": 99}')
    with pytest.raises(ReferenceError, match="format version 99"):
        load_reference(bad)
    with pytest.raises(ReferenceError, match="does not exist"):
        load_reference(tmp_path / "missing.json")


def test_the_reference_file_is_package_data():
    """The wheel ships the file (pyproject's package-data covers it)."""
    tomllib = pytest.importorskip("tomllib")
    root = REFERENCE_PATH.parents[3]
    config = tomllib.loads((root / "pyproject.toml").read_text())
    globs = config["tool"]["setuptools"]["package-data"]["fedbandit_env.bench"]
    package = REFERENCE_PATH.parents[1]
    assert any(REFERENCE_PATH in package.glob(g) for g in globs)
