"""The ``fedbandit`` command line (docs/bench.md, "Command line"): :func:`parser` and
:func:`main`; each command is one module of this package, with its function and its parser
(``add(sub)``), and ``args`` holds what they share (the argument types and parser classes).

=========================  ==================================================================
module                     commands
=========================  ==================================================================
``cli.catalog``            ``fedbandit envs | agents | suites``
``cli.run``                ``fedbandit run``, ``fedbandit suite``
``cli.board``              ``fedbandit rank``, ``fedbandit leaderboard`` (and their HTML page)
``cli.reference``          ``fedbandit reference build | check``
``cli.reproduce``          ``fedbandit reproduce PAPER [script args...]``
``cli.audit``              ``fedbandit audit (laplace|gaussian|AGENT)``
``cli.args``               argument types, parser classes, shared options
=========================  ==================================================================

fedbandit --version | [--debug] COMMAND ...

Every option is checked where it is parsed: a bad value exits with status 2 and one line naming
the option, before anything runs or is printed on stdout. Errors while running are one line on
stderr (status 2 for the project's input errors, 1 for store conflicts and I/O errors); --debug
shows the traceback instead (docs/reliability.md, "Errors"). The exit statuses are listed in
``fedbandit --help`` (:data:`EXIT_STATUSES`) and docs/bench.md, "Command line".

The command modules never import this package's ``__init__`` (no import circle); ``main``
dispatches through the ``cmd_*`` names imported here.
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
import warnings

from fedbandit_env.bench.cli import audit, board, catalog, reference, reproduce, run
from fedbandit_env.bench.cli.args import DEBUG, DEFAULT_STORE, HelpFormatter, Parser, Refuted
from fedbandit_env.bench.cli.audit import cmd_audit
from fedbandit_env.bench.cli.board import (
    board_markdown,
    cmd_leaderboard,
    cmd_rank,
    mark_entries,
    unranked_message,
)
from fedbandit_env.bench.cli.catalog import cmd_agents, cmd_envs, cmd_suites
from fedbandit_env.bench.cli.reference import cmd_reference
from fedbandit_env.bench.cli.reproduce import FIGURES, REPRODUCTIONS, cmd_reproduce, reproduce_help
from fedbandit_env.bench.cli.run import cmd_run, cmd_suite
from fedbandit_env.errors import FedBanditError, LearnerError, StoreConflictError, StoreWriteError

__all__ = [
    "DEFAULT_STORE",
    "EXIT_STATUSES",
    "FIGURES",
    "REPRODUCTIONS",
    "Refuted",
    "board_markdown",
    "cmd_agents",
    "cmd_audit",
    "cmd_envs",
    "cmd_leaderboard",
    "cmd_rank",
    "cmd_reference",
    "cmd_reproduce",
    "cmd_run",
    "cmd_suite",
    "cmd_suites",
    "main",
    "mark_entries",
    "parser",
    "reproduce_help",
    "unranked_message",
]

EXIT_STATUSES = (
    "exit status: 0 success; 2 bad input (a usage error, an invalid option value, an unknown id, "
    "a configuration the project rejects, or a file that is not what fedbandit writes: one line "
    "on stderr naming it); 1 failure (a learner that raised, an audit that refutes a privacy "
    "claim, failed units of --keep-going, a store conflict, a store that cannot be written, an "
    "I/O error, an unexpected error, or differences found by `reference check`); 130 "
    "interrupted. --debug shows the traceback instead of the one line."
)


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("fedbandit")
    except Exception:  # not installed as a distribution (a bare checkout on the path)
        from fedbandit_env import __version__

        return __version__


def parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="fedbandit",
        description="Federated bandit benchmark.",
        epilog=EXIT_STATUSES,
        formatter_class=HelpFormatter,
    )
    p.add_argument("--version", action="version", version=f"fedbandit {_version()}")
    p.add_argument("--debug", action="store_true", help="show the full traceback of an error")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in (catalog, run, board, reference, reproduce, audit):  # the order of --help
        module.add(sub)
    return p


def _one_line_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """A warning as one line on stderr (``fedbandit: warning: ...``), without the source line."""
    print(f"fedbandit: warning: {_one_line(Exception(str(message)))}", file=sys.stderr)


def _one_line(err: BaseException) -> str:
    return " ".join(str(err).split()) or type(err).__name__


def main(argv: list[str] | None = None) -> None:
    """Run a command. A usage error exits with status 2 and one line on stderr; an input error
    of the project (:class:`FedBanditError`) with status 2, a store conflict or an I/O error
    with status 1, each as one line; ``--debug`` shows the traceback instead
    (docs/reliability.md, "Errors")."""
    from fedbandit_env.bench.rank import current_folder_on_path

    current_folder_on_path()  # module:Class ids resolve from the current folder, as `-m` does
    words = sys.argv[1:] if argv is None else list(argv)
    DEBUG["on"] = "--debug" in words
    if words[:1] == ["reproduce"] and words[1:] in ([], ["-h"], ["--help"]):
        print(reproduce_help())  # the script's own --help follows its name
        raise SystemExit(0 if words[1:] else 2)
    args = parser().parse_args(argv)
    commands = {
        "rank": cmd_rank,
        "envs": cmd_envs,
        "agents": cmd_agents,
        "run": cmd_run,
        "suite": cmd_suite,
        "suites": cmd_suites,
        "leaderboard": cmd_leaderboard,
        "audit": cmd_audit,
        "reference": cmd_reference,
    }
    try:
        with warnings.catch_warnings():  # a warning is one line, as an error is
            warnings.showwarning = _one_line_warning
            if args.command == "reproduce":
                cmd_reproduce(args, args.script_args)
            else:
                commands[args.command](args)
    except KeyboardInterrupt:
        if args.debug:
            raise
        print("fedbandit: interrupted", file=sys.stderr)
        raise SystemExit(130) from None
    except Exception as err:
        if args.debug:
            raise
        what = "error"
        if isinstance(err, StoreConflictError | StoreWriteError | LearnerError | Refuted):
            status = 1
        elif isinstance(err, FedBanditError):
            status = 2
        elif isinstance(err, OSError | sqlite3.Error):
            status = 1
        else:  # not an input error: a bug, or a library's error the project does not wrap
            status, what = 1, f"unexpected {type(err).__name__} (--debug shows the traceback)"
        print(f"fedbandit: {what}: {_one_line(err)}", file=sys.stderr)
        raise SystemExit(status) from None
