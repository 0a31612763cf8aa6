"""The CLI explains itself (docs/bench.md, "Command line"): defaults in the help of every option
of every subcommand, exit statuses in the epilog, ``fedbandit suites``, the one-line skip summary
of ``fedbandit suite`` and ``--verbose``; and the quick suite separates the elimination agents."""

from __future__ import annotations

import argparse
import re

import numpy as np
import pytest

from fedbandit_env.bench.cli import EXIT_STATUSES, main, parser
from fedbandit_env.bench.executors import run_suite
from fedbandit_env.bench.leaderboard import build
from fedbandit_env.bench.store import ResultsStore
from fedbandit_env.bench.suites import (
    SUITES,
    Cell,
    Suite,
    cell_agent_steps,
    estimated_seconds,
    get_suite,
)


def subparsers(p: argparse.ArgumentParser, name: str = "fedbandit"):
    yield name, p
    for action in p._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub_name, sub in action.choices.items():
                yield from subparsers(sub, f"{name} {sub_name}")


def option_help(p: argparse.ArgumentParser, action: argparse.Action) -> str:
    """The help text of ``action`` as ``p --help`` renders it (defaults expanded)."""
    formatter = p._get_formatter()
    text = formatter._get_help_string(action) % {**vars(action), "prog": p.prog}
    return " ".join(text.split())


ALL = list(subparsers(parser()))


def test_every_subcommand_is_walked():
    names = {name for name, _ in ALL}
    expected = {"suite", "suites", "run", "leaderboard", "audit", "reference", "envs", "agents"}
    assert {f"fedbandit {n}" for n in expected} <= names
    assert {"fedbandit reference build", "fedbandit reference check"} <= names


@pytest.mark.parametrize("name, p", ALL, ids=[name for name, _ in ALL])
def test_help_of_every_option_states_its_default(name, p):
    rendered = "".join(p.format_help().split())  # long paths wrap inside a word
    for action in p._actions:
        if isinstance(action, argparse._HelpAction | argparse._VersionAction):
            continue
        if isinstance(action, argparse._SubParsersAction) or not action.option_strings:
            continue  # subcommands and positionals have no default
        assert action.help, f"{name} {action.option_strings[0]}: no help text"
        if action.nargs == 0:  # a flag: off unless given
            continue
        text = option_help(p, action)
        assert "default" in text, f"{name} {action.option_strings[0]}: help names no default"
        assert "".join(text.split()) in rendered
        if action.default not in (None, argparse.SUPPRESS) and "(default: " not in text:
            pytest.fail(f"{name} {action.option_strings[0]}: default {action.default!r} not shown")


def test_suite_help_says_serial_chunk_and_the_suites(capsys):
    with pytest.raises(SystemExit) as done:
        main(["suite", "--help"])
    assert done.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "(default: serial)" in text and "seeds per work unit" in text
    assert all(name in text for name in SUITES)


def test_exit_statuses_in_the_epilog(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert " ".join(EXIT_STATUSES.split()) in text
    assert "0 success" in text and "2 bad input" in text and "1 failure" in text


@pytest.mark.slow
def test_suites_lists_every_suite_with_cells_learners_and_time(capsys):
    main(["suites", "--verbose"])
    out = capsys.readouterr().out
    rows = re.findall(
        r"^\| (\w+) \| (\d+) \| (\d+) \| ([\d.e+]+) \| ~([\d.]+) (s|min|h) \|", out, re.M
    )
    assert [r[0] for r in rows] == list(SUITES)
    for name, cells, learners, steps, _time, _unit in rows:
        available = get_suite(name).available(lambda _m: None)
        assert int(cells) == len(available)
        assert int(learners) == len({c.agent_id for c in available})
        assert float(steps) == pytest.approx(sum(cell_agent_steps(c) for c in available), rel=0.01)
    assert "each cell's agent-steps (horizon x runs x agents) at its learner's measured cost" in out
    assert re.search(r"^quick: .*cdp_mab.*ucb1", out, re.M)


def test_time_estimate_grows_with_the_cells():
    one = Cell("FedBandit/Homogeneous-v0", "ucb1", 1000, 10, {"num_agents": 5})
    assert cell_agent_steps(one) == 1000 * 10 * 5
    assert estimated_seconds([one, one]) == pytest.approx(2 * estimated_seconds([one]))
    assert cell_agent_steps(Cell("FedBandit/Homogeneous-v0", "ucb1", 10, 2)) == 10 * 2 * 3


SKIPPY = Suite(
    "skippy",
    (
        Cell("FedBandit/Homogeneous-v0", "ucb1", 30, 2, {"num_agents": 3, "num_arms": 3}),
        Cell("FedBandit/Homogeneous-v0", "linucb", 30, 2, {"num_agents": 3, "num_arms": 3}),
        Cell("FedBandit/Homogeneous-v0", "centralized_linucb", 30, 2, {"num_agents": 3}),
        Cell("FedBandit/Homogeneous-v0", "sb3_policy", 30, 2, {"num_agents": 3}),
    ),
)


def skip_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if "skipping" in line]


def test_skipped_cells_are_one_summary_line_by_default(tmp_path, capsys):
    assert run_suite(SKIPPY, ResultsStore(tmp_path / "s.sqlite")) == 2
    lines = skip_lines(capsys.readouterr().out)
    assert len(lines) == 1
    assert lines[0].startswith(
        "suite skippy: skipping on FedBandit/Homogeneous-v0: centralized_linucb, linucb, sb3_policy"
    )
    assert "(3 cells" in lines[0] and "--verbose" in lines[0] and "family" not in lines[0]


def test_verbose_lists_each_reason(tmp_path, capsys):
    run_suite(SKIPPY, ResultsStore(tmp_path / "s.sqlite"), verbose=True)
    lines = skip_lines(capsys.readouterr().out)
    assert len(lines) == 2  # the linear learners (family) and sb3_policy (model_path)
    assert any("linucb, centralized_linucb: family: expected 'linear'" in x for x in lines)
    assert any("sb3_policy: model_path" in x for x in lines)


def test_quiet_prints_no_skip_line(tmp_path, capsys):
    run_suite(SKIPPY, ResultsStore(tmp_path / "s.sqlite"), quiet=True)
    assert skip_lines(capsys.readouterr().out) == []


ELIMINATION = ("cdp_mab", "ddp_mab", "hdp_mab")


@pytest.mark.slow
def test_quick_suite_elimination_agents_eliminate_and_vary_across_seeds(tmp_path):
    """In the quick suite (its own cells, unchanged) the elimination agents commit on some seeds
    and not at the same step on all: the final regret differs across seeds and each CI has
    width (a fixed wide-gap instance made every seed give the same number)."""
    cells = tuple(
        c
        for c in get_suite("quick").available(lambda _m: None)
        if c.agent_id in ELIMINATION and c.env_id == "FedBandit/Homogeneous-v0"
    )
    assert sorted(c.agent_id for c in cells) == sorted(ELIMINATION)
    store = ResultsStore(tmp_path / "q.sqlite")
    run_suite(Suite("elimination", cells, baseline="cdp_mab"), store, quiet=True)
    entries = {e.agent_id: e for e in build(store.rows(), "cdp_mab")}
    for agent in ELIMINATION:
        entry = entries[agent]
        assert entry.runs == 10
        assert np.std(entry.finals) > 1.0, agent
        assert entry.ci_high - entry.ci_low > 1.0, agent
        # the regret stops growing once the agent committed (the curve bends)
        mean = entry.curves.mean(axis=0)
        half = np.interp(entry.steps[-1] / 2, entry.steps, mean)
        assert mean[-1] - half < 0.5 * half, agent
