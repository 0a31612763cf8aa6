"""The ``fedbandit`` command line's shared parts: its parser classes, the argument types (each
option is checked where it is parsed: a bad value exits with status 2 and one line naming the
option, before anything runs or is printed on stdout), the options several commands share,
and the helpers their commands call (the one-line note on stderr, :class:`Refuted`)."""

from __future__ import annotations

import argparse
import difflib
import json
import math
import re
import sys
import traceback
from pathlib import Path

from fedbandit_env.agent_registry import agent_class, list_agents
from fedbandit_env.bench.backends import (
    BACKENDS,
    JAX,
    NUMPY,
    jax_backend,
    jax_installed,
    list_jax_learners,
)
from fedbandit_env.bench.suites import get_suite
from fedbandit_env.errors import ConfigError, LearnerError
from fedbandit_env.registration import spec

DEFAULT_STORE = "fedbandit_results.sqlite"


def note(message: str) -> None:
    print(message, file=sys.stderr)


class Refuted(Exception):
    """An audit refuted a privacy claim: exit status 1 (docs/bench.md, "Command line")."""


class Parser(argparse.ArgumentParser):
    """Usage errors are one line on stderr and exit status 2 (argparse's convention)."""

    def error(self, message: str):
        match = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)", message)
        if match:
            choices = re.findall(r"'([^']*)'", match.group(2))
            close = difflib.get_close_matches(match.group(1), choices, n=1)
            if close:
                message += f"; did you mean {close[0]!r}?"
        self.exit(2, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows each option's default, unless the help already says it or there is none."""

    def _get_help_string(self, action):
        text = action.help or ""
        if action.default is None or action.default is False or "default" in text:
            return text
        return super()._get_help_string(action)


DEBUG = {"on": False}
"""Whether ``--debug`` was given (set by :func:`main` before parsing, so that an option's
check can show the traceback of what failed underneath)."""


def arg_type(name: str, check):
    """An argparse ``type`` from ``check(text) -> value`` that raises ValueError / KeyError
    with the message the user sees (``argument --opt: <message>``)."""

    def convert(text: str):
        try:
            return check(text)
        except (ValueError, KeyError) as err:
            if DEBUG["on"] and err.__cause__ is not None:  # what failed underneath (an import)
                traceback.print_exception(err.__cause__, file=sys.stderr)
            msg = err.args[0] if isinstance(err, KeyError) and err.args else str(err)
            raise argparse.ArgumentTypeError(str(msg)) from None

    convert.__name__ = name  # argparse names the type in some messages
    return convert


def _integer(text: str, low: int, what: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"expected {what}, got {text!r}") from None
    if value < low:
        raise ValueError(f"expected {what}, got {text!r}")
    return value


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"expected a positive finite number, got {text!r}")
    return value


def _json_object(text: str) -> dict:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as err:
        raise ValueError(f"expected a JSON object, got {text!r} ({err})") from None
    if not isinstance(value, dict):
        raise ValueError(f"expected a JSON object such as '{{\"epsilon\": 1}}', got {text!r}")
    return value


def _env_id(text: str) -> str:
    spec(text)  # raises UnknownIdError with suggestions
    return text


def check_agent_id(text: str) -> str:
    """A learner id of either backend (registered, or a ``module:attr`` that imports); which
    backend runs it is checked when it runs."""
    if text in list_agents() or (jax_installed() and text in list_jax_learners()):
        return text
    agent_class(text)  # raises UnknownIdError with suggestions
    return text


def _agent_list(text: str) -> list[str]:
    ids = [t.strip() for t in text.split(",") if t.strip()]
    if not ids:
        raise ValueError(f"expected learner ids separated by commas, got {text!r}")
    for agent_id in ids:
        check_agent_id(agent_id)
    return ids


def _suite_name(text: str) -> str:
    get_suite(text)
    return text


def _reference_file(text: str) -> str:
    if not Path(text).is_file():
        raise ValueError(f"expected a reference file, {text!r} is not a file")
    return text


POSITIVE = arg_type("positive int", lambda t: _integer(t, 1, "a positive integer"))
NON_NEGATIVE = arg_type("non-negative int", lambda t: _integer(t, 0, "an integer >= 0"))
TRIALS = arg_type("trials", lambda t: _integer(t, 100, "an integer >= 100"))
EPSILON = arg_type("epsilon", _positive_float)
JSON_OBJECT = arg_type("JSON object", _json_object)
ENV_ID = arg_type("environment id", _env_id)
AGENT_ID = arg_type("learner id", check_agent_id)
ID_LIST = arg_type("learner ids", lambda t: [x.strip() for x in t.split(",") if x.strip()])
SUITE = arg_type("suite", _suite_name)
REFERENCE_FILE = arg_type("reference file", _reference_file)
AGENT_LIST = arg_type("learner ids", _agent_list)
AGENT_HELP = (
    "a learner id: registered (`fedbandit agents`), or module:Class of a file in the current "
    "folder or an installed module, or mabwiser:POLICY / smpybandits:POLICY; with --backend "
    "jax: a JAX learner id (`fedbandit agents --backend jax`) or module:Class of a JaxLearner"
)
PRIVACY_HELP = (
    "wrap the learner's channels with the privacy wrapper, a JSON object: the options of every "
    'channel (\'{"epsilon": 1}\'), or {"channels": {NAME: options}} with "budget", '
    '"composition", "delta_prime", "delta_budget" (docs/privacy.md, "Privacy wrappers"); {}: '
    "no wrapper"
)


def command(sub, name: str, help: str, **kwargs) -> argparse.ArgumentParser:
    """A subcommand ``name`` of the subparsers ``sub``, its help as its description, with
    ``--debug`` (unless it takes no options of its own: ``add_help=False``)."""
    cmd = sub.add_parser(name, help=help, description=help, formatter_class=HelpFormatter, **kwargs)
    if kwargs.get("add_help", True):
        debug_option(cmd)
    return cmd


def debug_option(cmd: argparse.ArgumentParser) -> None:
    """``--debug`` after the command's name (also accepted before it)."""
    cmd.add_argument(
        "--debug",
        action="store_true",
        default=argparse.SUPPRESS,
        help="show the full traceback of an error",
    )


def backend_option(cmd: argparse.ArgumentParser) -> None:
    """``--backend numpy|jax`` (agents, run, suite, rank)."""
    cmd.add_argument(
        "--backend",
        choices=BACKENDS,
        default=NUMPY,
        help="where the cells run: numpy (every learner), or jax, the compiled JAX backend for "
        "JAX learners (the ports, or your own JaxLearner; needs the jax extra; docs/bench.md, "
        "Backends)",
    )


def check_backend_options(args) -> None:
    """``--backend jax``: JAX is installed and no numpy-only option is given (before anything
    runs or is created)."""
    if args.backend != JAX:
        return
    jax_backend()  # a ConfigError naming the extra without JAX
    if args.privacy:
        raise ConfigError(
            "--privacy: the privacy wrappers are numpy-only; drop --privacy or use --backend numpy"
        )


def report_failures(failures: list[str]) -> None:
    """The failed work units of ``--keep-going``, one line each on stderr, then exit status 1."""
    if failures:
        for line in failures:
            note(f"failed: {line}")
        raise LearnerError(
            f"{len(failures)} work unit(s) failed (listed above); the other cells' rows are "
            "stored, and re-running the command retries only the missing seeds"
        )
