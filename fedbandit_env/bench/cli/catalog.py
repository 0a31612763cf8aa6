"""``fedbandit envs | agents | suites``: what this installation holds (docs/bench.md, "Command
line").

fedbandit envs | agents [--backend numpy|jax] | suites [--verbose]
"""

from __future__ import annotations

from fedbandit_env.agent_registry import list_agents
from fedbandit_env.bench.backends import NUMPY, jax_backend
from fedbandit_env.bench.cli.args import backend_option, command
from fedbandit_env.bench.suites import SUITES, cell_agent_steps, estimated_seconds
from fedbandit_env.registration import list_envs, spec


def cmd_envs(args) -> None:
    for env_id in list_envs():
        print(f"{env_id:32s} {spec(env_id).description}")


def cmd_agents(args) -> None:
    print("\n".join(list_agents() if args.backend == NUMPY else jax_backend().list_jax_agents()))


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def cmd_suites(args) -> None:
    """One row per suite: its cells and learners in this installation and a serial time estimate
    (agent-steps over the measured per-family rates, docs/bench.md "Command line")."""
    print("| suite | cells | learners | agent-steps | estimated serial time | description |")
    print("|---|---|---|---|---|---|")
    listing = []
    for name, suite in SUITES.items():
        cells = suite.available(lambda _msg: None)
        learners = sorted({c.agent_id for c in cells})
        steps = sum(cell_agent_steps(c) for c in cells)
        seconds = estimated_seconds(cells, len(suite.candidates()))
        print(
            f"| {name} | {len(cells)} | {len(learners)} | {steps:.2e} | "
            f"~{_duration(seconds)} | {suite.description} |"
        )
        listing.append(f"{name}: {', '.join(learners)}")
    print(
        "\nestimated serial time = each cell's agent-steps (horizon x runs x agents) at its "
        "learner's measured cost per agent-step (x the adversary factor under attack), plus a "
        "per-cell and a per-candidate overhead, as benchmarks/bench_suite_estimates.py measured "
        "them on a shared 2-core machine (within 2x of its runs of quick and robust; a "
        "learner without a measured cost takes its family's rate); an idle or faster machine "
        "is faster"
    )
    if args.verbose:
        print("\nlearners:\n" + "\n".join(listing))


def add(sub) -> None:
    """The parsers of ``envs``, ``agents`` and ``suites``."""
    command(sub, "envs", "list registered environments")
    backend_option(command(sub, "agents", "list registered learners (of a backend)"))
    suites = command(
        sub,
        "suites",
        "list the suites: cells and learners in this installation, agent-steps and an estimated "
        "serial time",
    )
    suites.add_argument("--verbose", action="store_true", help="also list each suite's learners")
