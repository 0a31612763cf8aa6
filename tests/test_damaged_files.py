"""Damaged stores and malformed reference files (docs/reliability.md, "Files are data"): every
case is either read as it is or refused with one line that names the file, as an input error
(never "unexpected ..."), and a read-only command leaves the file and its folder exactly as they
were (no ``-wal``/``-shm`` appears beside a damaged store)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fedbandit_env.bench import suites as suites_module
from fedbandit_env.bench.cli import main
from fedbandit_env.bench.executors import run_suite
from fedbandit_env.bench.reference import REFERENCE_PATH, ReferenceError, load_reference
from fedbandit_env.bench.store import ResultsStore
from fedbandit_env.bench.suites import Cell, Suite
from tests.file_probes import reference_damage, store_damage

ENV = "FedBandit/Heterogeneous-v0"
KW = {"num_agents": 3, "num_arms": 3, "topology": "ring"}
TINY = Suite("tiny", (Cell(ENV, "ucb1", 200, 3, KW), Cell(ENV, "ucb1_shared", 200, 3, KW)))


@pytest.fixture(scope="module")
def store_bytes(tmp_path_factory) -> bytes:
    path = tmp_path_factory.mktemp("valid") / "r.sqlite"
    store = ResultsStore(path)
    run_suite(TINY, store, quiet=True)
    store.close()
    return path.read_bytes()


def snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def _one_line_naming(path: Path, err_text: str) -> None:
    """One error line naming the file; the only other lines allowed are the leaderboard's
    notes (rows it left out, and why)."""
    *notes, last = err_text.rstrip("\n").split("\n")
    assert all(n.startswith("leaderboard: ") for n in notes), err_text
    assert last.startswith("fedbandit: error: ") and str(path) in last, err_text
    assert "unexpected" not in err_text and "Traceback" not in err_text, err_text


DAMAGE = store_damage(8 * 4096)  # the names (the tiny store has 8 pages or more)


@pytest.mark.parametrize("case", sorted(DAMAGE))
def test_a_damaged_store_is_read_or_refused_in_one_line_and_left_as_it_was(
    case, store_bytes, tmp_path, capsys, monkeypatch
):
    monkeypatch.setitem(suites_module.SUITES, "tiny", TINY)
    path = tmp_path / "r.sqlite"
    path.write_bytes(store_bytes)
    cases = store_damage(len(store_bytes))
    if case not in cases:
        pytest.skip(f"the store has fewer pages than {case!r} needs")
    cases[case](path)
    before = snapshot(tmp_path)
    for argv in (["leaderboard", "--store", str(path)],
                 ["leaderboard", "--store", str(path), "--suite", "tiny"]):  # fmt: skip
        try:
            main(argv)
            status = 0
        except SystemExit as err:
            status = err.code
        out, err_text = capsys.readouterr()
        if status != 0:
            assert status in (1, 2) and out == "", (case, status, err_text)
            _one_line_naming(path, err_text)
        assert snapshot(tmp_path) == before, case


REFERENCE_CASES = reference_damage(REFERENCE_PATH.read_text())


@pytest.mark.parametrize("case", sorted(REFERENCE_CASES))
def test_a_malformed_reference_file_is_one_input_error_naming_it(
    case, store_bytes, tmp_path, capsys
):
    ref = tmp_path / "theirs.json"
    content = REFERENCE_CASES[case]
    (ref.write_bytes if isinstance(content, bytes) else ref.write_text)(content)
    with pytest.raises(ReferenceError) as err:
        load_reference(ref)
    assert str(ref) in str(err.value)
    store = tmp_path / "mine.sqlite"
    store.write_bytes(store_bytes)
    with pytest.raises(SystemExit) as status:
        main(["leaderboard", "--store", str(store), "--reference", str(ref)])
    out, err_text = capsys.readouterr()
    assert status.value.code == 2 and out == "", (case, err_text)
    _one_line_naming(ref, err_text)


def test_the_shipped_reference_still_loads():
    assert len(load_reference().cells) > 50
