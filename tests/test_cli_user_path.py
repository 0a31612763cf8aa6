"""The user's path through the command line (docs/bench.md, "Command line"): the leaderboard of
rows that `rank` and `run --store` wrote, `reproduce --help`, one line for a learner that fits
no shape or does not import, a damaged cell hash, a failing learner named with its environment,
`--quiet`, the robust suite's matrices, and `rank --html` naming itself."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from fedbandit_env.agent_registry import _AGENTS, register_agent
from fedbandit_env.bench.cli import FIGURES, main
from fedbandit_env.bench.suites import SUITES, AttackSweep, Cell, Suite
from fedbandit_env.policy import TeamPolicy

ENV = "FedBandit/Heterogeneous-v0"
MINE = '''
import numpy as np
from fedbandit_env.policy import TeamAction, TeamPolicy


class Mine(TeamPolicy):
    agent_id = "mine"

    def reset(self, facts, rng):
        self.shape = (facts.num_runs, facts.num_agents)

    def act(self, obs):
        return TeamAction(np.zeros(self.shape, dtype=np.int64))


class Shapeless:
    def reset(self, facts, rng):
        pass

    def act(self, obs):
        pass
'''


def _exit(argv, capsys):
    with pytest.raises(SystemExit) as info:
        main(argv)
    out = capsys.readouterr()
    return info.value.code, out.out, out.err


@pytest.fixture
def folder(tmp_path, monkeypatch):
    """A user's folder with a learner module, as the current directory."""
    (tmp_path / "mymod_user_path.py").write_text(MINE)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    for name in list(sys.modules):
        if name.startswith("mymod_user_path"):
            del sys.modules[name]


def test_the_leaderboard_of_run_store_rows_of_a_module_learner(folder, capsys):
    store = str(folder / "s.sqlite")
    main(["run", ENV, "mymod_user_path:Mine", "--runs", "2", "--horizon", "20", "--store", store])
    capsys.readouterr()
    # in a new process the id read from the store is never imported: the rows are listed by
    # their id with the option to use, never "no results"
    from fedbandit_env.agent_registry import _RESOLVED

    _RESOLVED.pop("mymod_user_path:Mine", None)
    _AGENTS.pop("mymod_user_path:Mine", None)
    code, out, err = _exit(["leaderboard", "--store", store], capsys)
    assert code == 2 and out == "" and "no results" not in err
    assert "none of the 2 rows" in err and "mymod_user_path:Mine (2 rows)" in err
    assert "--resolve mymod_user_path:Mine" in err
    # named on the command line, it is imported from the current folder as `rank` does
    main(["leaderboard", "--store", store, "--resolve", "mymod_user_path:Mine"])
    assert "| 1 | mymod\\_user\\_path:Mine |" in capsys.readouterr().out.replace(
        "mymod_user_path", "mymod\\_user\\_path")  # fmt: skip
    _AGENTS.pop("mymod_user_path:Mine", None)


def test_reproduce_help_exits_0_and_lists_the_papers(capsys):
    code, out, _err = _exit(["reproduce", "--help"], capsys)
    assert code == 0
    for name in FIGURES:
        assert f"  {name} " in out
    assert "fedbandit reproduce PAPER --help" in out


def test_a_class_of_no_learner_shape_is_told_the_three_shapes(folder, capsys):
    code, _out, err = _exit(["run", ENV, "mymod_user_path:Shapeless", "--runs", "1",
                             "--horizon", "5"], capsys)  # fmt: skip
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "Shapeless has reset and act but no learner base class" in err
    assert "TeamPolicy" in err and "PerAgentLearner" in err and "policy callable" in err


@pytest.mark.parametrize("source, what", [('raise RuntimeError("boom at import")\n',
                                           "RuntimeError: boom at import"),
                                          ("def f(:\n", "SyntaxError: invalid syntax")])  # fmt: skip
def test_a_learner_module_that_does_not_import_is_one_line(folder, capsys, source, what):
    (folder / "broken_user_path.py").write_text(source)
    code, _out, err = _exit(["run", ENV, "broken_user_path:X"], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert what in err and "broken_user_path.py, line 1" in err and "--debug" in err
    _code, _out, err = _exit(["--debug", "run", ENV, "broken_user_path:X"], capsys)
    assert "Traceback" in err
    sys.modules.pop("broken_user_path", None)


def test_a_damaged_cell_hash_is_one_line_naming_the_store_and_the_row(tmp_path, capsys):
    store = tmp_path / "d.sqlite"
    main(["run", ENV, "ucb1", "--runs", "1", "--horizon", "10", "--store", str(store)])
    capsys.readouterr()
    conn = sqlite3.connect(store)
    (good,) = conn.execute("SELECT cell_hash FROM runs").fetchone()
    bad = ("g" if good[0] != "g" else "h") + good[1:]  # one flipped byte, no longer hex
    conn.execute("UPDATE runs SET cell_hash = ?", (bad,))
    conn.commit()
    conn.close()
    code, out, err = _exit(["leaderboard", "--store", str(store)], capsys)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert f"store: {store}: row (cell '{bad}', seed 0): cell_hash: expected 16 lowercase hex " \
           "digits" in err  # fmt: skip
    assert "unexpected" not in err


class Failing(TeamPolicy):
    agent_id = "failing_user_path"

    def reset(self, facts, rng):
        pass

    def act(self, obs):
        raise ZeroDivisionError("learner bug")


def test_a_learner_failure_names_the_environment(tmp_path, capsys, monkeypatch):
    register_agent("failing_user_path", Failing)
    cell = Cell(ENV, "failing_user_path", 5, 1, {"num_agents": 2, "num_arms": 2})
    monkeypatch.setitem(SUITES, "failtest", Suite("failtest", (cell,)))
    try:
        code, _out, err = _exit(["suite", "failtest", "--store", str(tmp_path / "f.sqlite"),
                                 "--quiet"], capsys)  # fmt: skip
    finally:
        _AGENTS.pop("failing_user_path", None)
    assert code == 1
    assert "ZeroDivisionError: learner bug" in err
    assert "[on FedBandit/Heterogeneous-v0 (horizon=5, num_agents=2, num_arms=2)]" in err


def test_quiet_prints_only_the_final_line(tmp_path, capsys, monkeypatch):
    cell = Cell(ENV, "ucb1", 10, 2, {"num_agents": 2, "num_arms": 2})
    monkeypatch.setitem(SUITES, "tiny", Suite("tiny", (cell,)))
    main(["suite", "tiny", "--store", str(tmp_path / "q.sqlite"), "--quiet"])
    out, err = capsys.readouterr()
    assert out.strip().splitlines() == [f"2 new rows in {tmp_path / 'q.sqlite'} (2 in total)"]
    assert err == ""


def test_the_robust_suite_prints_one_matrix_per_graph_and_tables_with_verbose(
    tmp_path, capsys, monkeypatch
):
    small = {"num_agents": 6, "num_arms": 4}
    sweeps = tuple(AttackSweep("FedBandit/Homogeneous-v0", 40, 2, {**small, "topology": t},
                               byzantine=(1,)) for t in ("complete", "ring"))  # fmt: skip
    monkeypatch.setitem(SUITES, "robust", Suite("robust", (), None, "tiny", sweeps))
    store = str(tmp_path / "r.sqlite")
    main(["suite", "robust", "--store", store, "--agents", "ucb1,byzres_ucb"])
    out = capsys.readouterr().out
    assert out.count("### Regret under attack / clean:") == 2  # one matrix per graph
    assert "### FedBandit/Homogeneous-v0 (" not in out  # no per-attack table
    assert "(one table per environment and attack: --verbose)" in out
    main(["leaderboard", "--store", store, "--suite", "robust", "--verbose"])
    out = capsys.readouterr().out
    assert "### FedBandit/Homogeneous-v0 (" in out and out.count("### Regret under attack") == 2


def test_rank_html_errors_name_rank(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib raises ImportError
    code, _out, err = _exit(["rank", "ucb1", "--suite", "quick", "--store",
                             str(tmp_path / "h.sqlite"), "--html", str(tmp_path / "page")],
                            capsys)  # fmt: skip
    assert code == 2 and "rank --html: the plots need matplotlib" in err
    assert "leaderboard" not in err and not (tmp_path / "h.sqlite").exists()


def test_a_learner_import_error_does_not_hide_behind_argparse_in_a_real_process(tmp_path):
    (tmp_path / "bad_real_path.py").write_text("import no_such_dependency_here\n")
    proc = subprocess.run([sys.executable, "-m", "fedbandit_env.bench", "run", ENV,
                           "bad_real_path:X"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
    assert "bad_real_path" in proc.stderr and "no_such_dependency_here" in proc.stderr
    assert json.dumps  # the module's imports are used
    assert Path(tmp_path / "bad_real_path.py").exists()
