"""A researcher's path from a .py file to a ranked table (docs/bench.md, "Ranking a new
learner"): `fedbandit rank mymod:MyUCB --suite quick` from a temporary folder, with no
PYTHONPATH, ranks the learner against the shipped reference in the tables where it ran; the same
under --privacy; --keep-going records a crashing learner and goes on; a crash names the learner,
the agent, the run seed and the step, and exits 1."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from fedbandit_env.bench import suites as suites_module
from fedbandit_env.bench.cli import main
from fedbandit_env.bench.suites import Cell, Suite

LEARNER = textwrap.dedent(
    '''
    """A per-agent UCB1 that tells its neighbours its empirical means."""
    import math

    import numpy as np

    from fedbandit_env import PerAgentLearner
    from fedbandit_env.per_agent import last_pull
    from fedbandit_env.policy import MULTI_ARMED, require_family


    class MyUCB(PerAgentLearner):
        agent_id = "my_ucb"

        def channel_spec(self, config):
            return {"neighbors": {"kind": "neighbors", "dim": config.num_arms}}

        def reset(self, agent, facts, rng):
            require_family(self.agent_id, facts, MULTI_ARMED)
            self.n = np.zeros(facts.num_arms)
            self.s = np.zeros(facts.num_arms)

        def act(self, observation):
            pull = last_pull(observation)
            if pull is not None:
                self.n[pull[0]] += 1
                self.s[pull[0]] += pull[1]
            if (self.n == 0).any():
                arm = int(np.argmin(self.n))
            else:
                t = self.n.sum()
                arm = int(np.argmax(self.s / self.n + np.sqrt(2 * math.log(t) / self.n)))
            means = self.s / np.maximum(self.n, 1)
            return {"arm": arm, "messages": {"neighbors": {"send": 1, "payload": means}}}


    class Crashes(MyUCB):
        def act(self, observation):
            if observation["step"] == 7:
                raise ZeroDivisionError("my bug")
            return super().act(observation)
    '''
)


def fedbandit(folder: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run(
        [sys.executable, "-m", "fedbandit_env.bench", *args],
        cwd=folder, env=env, capture_output=True, text=True, timeout=900,
    )  # fmt: skip


@pytest.mark.slow
def test_a_learner_file_is_ranked_against_the_reference_with_one_command(tmp_path):
    (tmp_path / "mymod.py").write_text(LEARNER)
    run = fedbandit(tmp_path, "rank", "mymod:MyUCB", "--suite", "quick", "--quiet")
    assert run.returncode == 0, run.stderr
    table = run.stdout
    assert "★ mymod:MyUCB (yours)" in table
    assert "ucb1 (reference)" in table and "gossip_ucb (reference)" in table
    assert "LinearContextual" not in table  # it refuses the linear family: no table there
    assert table.count("### ") == 2
    assert "reference row(s) from" in run.stderr and "mymod:MyUCB" in run.stderr
    # the same learner under the privacy wrapper: its own rows, keyed by the wrapper
    wrapped = fedbandit(tmp_path, "rank", "mymod:MyUCB", "--suite", "quick", "--quiet",
                        "--privacy", '{"epsilon": 0.5, "center": 0.5}')  # fmt: skip
    assert wrapped.returncode == 0, wrapped.stderr
    line = next(x for x in wrapped.stdout.splitlines() if r"mymod:MyUCB \+privacy eps=0.5" in x)
    assert "(yours)" in line and "| 1000 |" in line  # 2000 messages of 0.5 each per agent
    assert "ucb1 (reference)" in wrapped.stdout


def test_keep_going_records_a_crashing_learner_and_goes_on(tmp_path, monkeypatch, capsys):
    (tmp_path / "mymod.py").write_text(LEARNER)
    monkeypatch.chdir(tmp_path)
    kw = {"num_agents": 3, "num_arms": 3, "topology": "ring"}
    tiny = Suite("tiny", (Cell("FedBandit/Homogeneous-v0", "ucb1", 30, 2, kw),))
    monkeypatch.setitem(suites_module.SUITES, "tiny", tiny)
    store = str(tmp_path / "s.sqlite")
    with pytest.raises(SystemExit) as status:
        main(["suite", "tiny", "--agents", "ucb1,mymod:Crashes", "--store", store, "--quiet",
              "--keep-going"])  # fmt: skip
    assert status.value.code == 1
    err = capsys.readouterr().err
    assert "failed: mymod:Crashes" in err and "ZeroDivisionError: my bug" in err
    assert "1 work unit(s) failed" in err
    main(["leaderboard", "--store", store])
    assert "ucb1" in capsys.readouterr().out  # the other cell's rows were kept
    with pytest.raises(SystemExit) as status:  # without --keep-going: the first crash stops it
        main(["run", "FedBandit/Homogeneous-v0", "mymod:Crashes", "--runs", "2", "--seed", "4",
              "--horizon", "20"])  # fmt: skip
    assert status.value.code == 1
    line = capsys.readouterr().err
    assert line.count("\n") == 1
    for part in ("mymod:Crashes", "agent_0", "act raised ZeroDivisionError: my bug",
                 "run seed 4", "step 8"):  # fmt: skip
        assert part in line, line


def test_run_keeps_its_rows_in_a_store_and_suite_agents_filters(tmp_path, capsys):
    store = str(tmp_path / "s.sqlite")
    main(["run", "FedBandit/Homogeneous-v0", "ucb1", "--runs", "3", "--horizon", "50",
          "--store", store])  # fmt: skip
    assert '"rows_written": 3' in capsys.readouterr().out
    main(["leaderboard", "--store", store])
    assert "| ucb1 |" in capsys.readouterr().out.replace("| 1 | ucb1", "| ucb1")


def test_a_bad_learner_kwarg_lists_the_accepted_ones(capsys):
    with pytest.raises(SystemExit) as status:
        main(["run", "FedBandit/Homogeneous-v0", "ucb1", "--agent-kwargs", '{"alpah": 2}'])
    assert status.value.code == 2
    err = capsys.readouterr().err
    assert "accepted: ['alpha', 'scale']" in err and "did you mean 'alpah' -> 'alpha'" in err


def test_rows_of_a_learner_not_registered_here_are_counted_never_dropped_in_silence(
    tmp_path, monkeypatch, capsys
):
    """A learner registered at run time in the process that ran the suite: a later
    `leaderboard --suite` counts its rows on stderr and leaves them out, or ranks them by their
    stored id with --include-unregistered."""
    from baselines.ucb import UCB1
    from fedbandit_env.agent_registry import _AGENTS
    from fedbandit_env.bench.executors import run_suite
    from fedbandit_env.bench.store import ResultsStore
    from fedbandit_env.bench.suites import LearnerSweep

    kw = {"num_agents": 3, "num_arms": 3, "topology": "ring"}
    sweep = LearnerSweep("FedBandit/Homogeneous-v0", 40, 2, kw,
                         exclude=tuple(a for a in _AGENTS if a not in ("ucb1", "my_runtime")))  # fmt: skip
    monkeypatch.setitem(suites_module.SUITES, "tiny", Suite("tiny", (), None, "", (sweep,)))
    monkeypatch.setitem(_AGENTS, "my_runtime", UCB1)
    store_path = tmp_path / "s.sqlite"
    store = ResultsStore(store_path)
    run_suite(suites_module.SUITES["tiny"], store, quiet=True)
    store.close()
    del _AGENTS["my_runtime"]  # a new process: the learner is not registered there
    main(["leaderboard", "--store", str(store_path), "--suite", "tiny"])
    out, err = capsys.readouterr()
    assert "my_runtime" not in out
    assert "2 row(s) of my_runtime on suite tiny's environments" in err and "left out" in err
    main(["leaderboard", "--store", str(store_path), "--suite", "tiny", "--include-unregistered"])
    out, err = capsys.readouterr()
    assert "my_runtime" in out and "ranked by their stored id" in err
