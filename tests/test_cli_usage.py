"""CLI usage errors (docs/reliability.md, "Errors"): every option is validated where it is
parsed; a bad value exits with status 2 and one line on stderr naming the option, nothing on
stdout, no traceback; errors while running are one line too, and --debug shows the traceback."""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

import pytest

from fedbandit_env import ConfigError
from fedbandit_env.bench import cli
from fedbandit_env.bench.cli import main, parser

ROOT = Path(__file__).resolve().parents[1]
ENV = "FedBandit/Heterogeneous-v0"
RUN = ["run", ENV, "ucb1"]


@pytest.mark.parametrize(
    ("argv", "names"),
    [
        ([*RUN, "--horizon", "0"], "argument --horizon: expected a positive integer, got '0'"),
        ([*RUN, "--horizon", "-5"], "argument --horizon"),
        ([*RUN, "--runs", "0"], "argument --runs: expected a positive integer"),
        ([*RUN, "--runs", "two"], "argument --runs"),
        ([*RUN, "--seed", "-1"], "argument --seed: expected an integer >= 0, got '-1'"),
        ([*RUN, "--seed", "1.5"], "argument --seed"),
        ([*RUN, "--agent-kwargs", "{bad"], "argument --agent-kwargs: expected a JSON object"),
        ([*RUN, "--agent-kwargs", "[1]"], "argument --agent-kwargs: expected a JSON object"),
        ([*RUN, "--env-kwargs", "3"], "argument --env-kwargs: expected a JSON object"),
        (["run", "FedBandit/Nope-v0", "ucb1"], "argument env: .*'FedBandit/Nope-v0'"),
        (["run", ENV, "ucb2"], "argument agent: agent id 'ucb2' is not registered"),
        (["suite", "quick", "--executor", "dask"], "argument --executor: invalid choice"),
        (["suite", "quick", "--jobs", "0"], "argument --jobs"),
        (["suite", "quick", "--chunk", "0"], "argument --chunk"),
        (["suite", "nope"], "argument name: suite 'nope' is not defined"),
        (["leaderboard", "--format", "html"], "argument --format: invalid choice"),
        (["leaderboard", "--suite", "nope"], "argument --suite: suite 'nope'"),
        (["leaderboard", "--html", str(ROOT / "README.md")], "argument --html: expected a folder"),
        (["audit", "laplace", "--epsilon", "0"], "argument --epsilon: expected a positive"),
        (["audit", "laplace", "--epsilon", "nan"], "argument --epsilon"),
        (["audit", "laplace", "--epsilon", "inf"], "argument --epsilon"),
        (["audit", "laplace", "--trials", "0"], "argument --trials"),
        (["audit", "laplace", "--kwargs", "null"], "argument --kwargs"),
        (["audit", "no_such_learner"], "argument target: agent id 'no_such_learner'"),
        (["reproduce", "fig99"], "argument figure: unknown figure 'fig99'"),
        (["leaderboard", "--reference", "/no/such.json"], "argument --reference: expected a"),
        (["reference"], "required: ACTION"),
        (["reference", "build", "--executor", "dask"], "argument --executor: invalid choice"),
        (["reference", "build", "--jobs", "0"], "argument --jobs"),
        (["reference", "check", "--sample", "0"], "argument --sample: expected a positive"),
        (["reference", "check", "--seeds", "x"], "argument --seeds"),
        (["reference", "check", "--suite", "nope"], "argument --suite: suite 'nope'"),
        (["reference", "check", "--reference", str(ROOT)], "argument --reference: expected a"),
        ([], "required: COMMAND"),
        (["frobnicate"], "invalid choice: 'frobnicate'"),
    ],
)
def test_a_bad_option_is_one_line_naming_it_and_exit_2(argv, names, capsys):
    with pytest.raises(SystemExit) as err:
        main(argv)
    out, errors = capsys.readouterr()
    assert err.value.code == 2 and out == ""
    assert errors.count("\n") == 1 and "Traceback" not in errors, errors
    assert re.search(names, errors), errors


def test_an_input_error_while_running_is_one_line_and_debug_shows_the_traceback(capsys):
    main([*RUN, "--horizon", "7", "--runs", "1", "--env-kwargs", '{"num_agents": 3}'])
    assert '"horizon": 7' in capsys.readouterr().out  # a valid value is used as given
    argv = [*RUN, "--runs", "1", "--env-kwargs", '{"num_agents": -3}']
    with pytest.raises(SystemExit) as err:
        main(argv)
    out, errors = capsys.readouterr()
    assert err.value.code == 2 and out == "" and errors.count("\n") == 1
    assert errors.startswith("fedbandit: error: ") and "num_agents" in errors
    with pytest.raises(ConfigError, match="num_agents"):
        main(["--debug", *argv])
    with pytest.raises(ConfigError, match="num_agents"):
        main([*argv, "--debug"])


def test_an_unexpected_error_is_one_line_with_status_1(monkeypatch, capsys):
    def broken(args):
        raise RuntimeError("boom\nsecond line")

    monkeypatch.setattr(cli, "cmd_envs", broken)
    with pytest.raises(SystemExit) as err:
        main(["envs"])
    errors = capsys.readouterr().err
    assert err.value.code == 1 and errors.count("\n") == 1
    assert "unexpected RuntimeError" in errors and "--debug" in errors and "boom second" in errors
    with pytest.raises(RuntimeError):
        main(["--debug", "envs"])


@pytest.mark.parametrize("option", [["--runs", "0"], ["--env-kwargs", '{"num_arms": 0}']])
def test_no_traceback_reaches_the_terminal_of_a_real_process(option):
    done = subprocess.run(
        [sys.executable, "-m", "fedbandit_env.bench", *RUN, *option],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert option[0] in done.stderr or "num_arms" in done.stderr


def test_version_and_help_text_on_every_argument(capsys):
    with pytest.raises(SystemExit) as err:
        main(["--version"])
    assert err.value.code == 0 and capsys.readouterr().out.startswith("fedbandit ")

    def actions(p: argparse.ArgumentParser):
        for action in p._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    yield from ((f"{name} {a.dest}", a) for _, a in actions(sub))
            else:
                yield action.dest, action

    missing = [name for name, a in actions(parser()) if not a.help]
    assert missing == []
    with pytest.raises(SystemExit):
        main(["suite", "--help"])
    text = capsys.readouterr().out
    assert "(default: serial)" in text and "(default: 10)" in text
