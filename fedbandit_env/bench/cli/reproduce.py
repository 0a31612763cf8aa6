"""``fedbandit reproduce PAPER [script args...]``: a paper's reproduction, run as
``python -m fedbandit_env.reproductions.MODULE`` with the remaining arguments (docs/reproductions.md).
"""

from __future__ import annotations

import argparse
import subprocess
import sys

from fedbandit_env.bench.cli.args import arg_type, command

# NAME -> (module of fedbandit_env.reproductions, what it reproduces); the CLI names the modules
# and never imports them (the reproductions import the bench, not the other way round)
REPRODUCTIONS = "fedbandit_env.reproductions"
FIGURES = {
    "gossip": ("gossip", "gossip paper, Fig. 2 and Sec. 5.2"),
    "gossip-fig2": ("gossip", "alias of gossip"),
    "dp-recsys": ("dp_recsys", "DP recommender paper, Section IV experiment"),
    "commeff": ("commeff", "commeff paper, Figs. 4-12"),
    "linear": ("linear", "DP federated linear bandits, Fig. 1A-C"),
    "field": ("field", "field agents' sanity experiments (docs/field.md)"),
    "byzres": ("byzres", "Byzantine-resilient decentralized UCB (Zhu et al., TMLR)"),
    "fed-mom": ("fed_mom", "Fed-MoM-UCB under Byzantine clients (Demirel et al.)"),
    "vial": ("vial", "robust gossip recommendations with blocking (Vial et al. 2021)"),
    "async": ("async_linear", "event time: Async-LinUCB, FedLinUCB, switching and delayed rewards"),
}


def reproduce_help() -> str:
    """``fedbandit reproduce --help``: the papers it reproduces and how to get a script's own
    options."""
    width = max(len(name) for name in FIGURES)
    lines = [
        "usage: fedbandit reproduce PAPER [the script's arguments]",
        "",
        "Run a paper's reproduction (python -m fedbandit_env.reproductions.MODULE); every "
        "later argument, --help included, goes to its script: `fedbandit reproduce PAPER "
        "--help` lists its options (--full, --claims FILE, ...; docs/reproductions.md).",
        "",
        "papers:",
        *(f"  {name:<{width}}  {what}" for name, (_module, what) in FIGURES.items()),
    ]
    return "\n".join(lines)


def cmd_reproduce(args, extra: list[str]) -> None:
    """Run reproduction ``args.figure`` (``python -m fedbandit_env.reproductions.NAME``) with
    the remaining arguments; its exit status is the command's."""
    module = f"{REPRODUCTIONS}.{FIGURES[args.figure][0]}"
    raise SystemExit(subprocess.call([sys.executable, "-m", module, *extra]))


def _figure(text: str) -> str:
    if text not in FIGURES:
        known = ", ".join(f"{k} ({v[1]})" for k, v in FIGURES.items())
        raise ValueError(f"unknown figure {text!r}; known: {known}")
    return text


def add(sub) -> None:
    """The parser of ``reproduce`` (its ``--help`` is :func:`reproduce_help`, printed by ``main``)."""
    rep = command(
        sub,
        "reproduce",
        f"reproduce a paper ({', '.join(FIGURES)}); later arguments, --help included, go to "
        "the script (docs/reproductions.md)",
        add_help=False,
    )
    rep.add_argument("figure", type=arg_type("figure", _figure), help="the figure's name")
    rep.add_argument("script_args", nargs=argparse.REMAINDER, help="the script's arguments")
