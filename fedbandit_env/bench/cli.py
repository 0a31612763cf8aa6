"""The ``fedbandit`` command line (DESIGN.md §5).

fedbandit envs | agents
fedbandit run ENV AGENT [--runs 10] [--seed 0] [--horizon T] [--env-kwargs JSON] [--agent-kwargs JSON]
fedbandit suite NAME [--store PATH] [--executor serial|joblib|ray] [--jobs 2] [--quiet]
fedbandit leaderboard [--store PATH] [--suite NAME] [--baseline AGENT] [--html DIR]
fedbandit reproduce FIGURE [script args...]
fedbandit audit (laplace|gaussian|AGENT) [--epsilon 1] [--kwargs JSON] [--trials N]
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
from pathlib import Path

from fedbandit_env.agent_registry import list_agents
from fedbandit_env.bench.evaluate import evaluate
from fedbandit_env.bench.executors import EXECUTORS, require_executor, run_suite
from fedbandit_env.bench.leaderboard import build, current_rows, to_markdown
from fedbandit_env.bench.store import ResultsStore
from fedbandit_env.bench.suites import SUITES, get_suite
from fedbandit_env.errors import ConfigError, FedBanditError
from fedbandit_env.registration import list_envs, spec

DEFAULT_STORE = "fedbandit_results.sqlite"
BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
FIGURES = {
    "gossip-fig2": ("reproduce_gossip.py", "gossip paper, Fig. 2(a) and 2(b)"),
    "dp-recsys": ("reproduce_dp_recsys.py", "DP recommender paper, Section IV experiment"),
    "commeff": ("reproduce_commeff.py", "commeff paper, Figs. 4-12"),
    "linear": ("reproduce_linear.py", "DP federated linear bandits, Fig. 1A-C"),
}


def _json(text: str, name: str) -> dict:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as err:
        raise FedBanditError(f"{name}: expected a JSON object, got {text!r} ({err})") from None
    if not isinstance(value, dict):
        raise FedBanditError(f"{name}: expected a JSON object, got {text!r}")
    return value


def _note(message: str) -> None:
    print(message, file=sys.stderr)


def cmd_envs(args) -> None:
    for env_id in list_envs():
        print(f"{env_id:32s} {spec(env_id).description}")


def cmd_agents(args) -> None:
    print("\n".join(list_agents()))


def cmd_run(args) -> None:
    env_kwargs = _json(args.env_kwargs, "--env-kwargs")
    if args.horizon:
        env_kwargs["horizon"] = args.horizon
    res = evaluate(
        args.env,
        args.agent,
        runs=args.runs,
        seed=args.seed,
        env_kwargs=env_kwargs,
        agent_kwargs=_json(args.agent_kwargs, "--agent-kwargs"),
    )
    print(json.dumps(res.summary(), indent=2))


def cmd_suite(args) -> None:
    suite = get_suite(args.name)
    require_executor(args.executor)  # a missing extra is an error before the store is created
    store = ResultsStore(args.store)
    written = run_suite(
        suite, store, args.executor, args.jobs, args.chunk, args.ray_address, args.quiet
    )
    if not args.quiet:
        print(f"\n{written} new rows in {args.store} ({store.count()} in total)\n")
        cells = suite.available(lambda _msg: None)
        print(to_markdown(build(current_rows(store.rows_for(cells), _note), suite.baseline_for)))


def cmd_leaderboard(args) -> None:
    if args.html:
        from fedbandit_env.bench.html import pyplot

        pyplot()  # a missing matplotlib is an error before any output
    store = ResultsStore(args.store, create=False)
    if args.suite:
        suite = get_suite(args.suite)
        rows = store.rows_for(suite.available(lambda _msg: None))
        baseline = args.baseline or suite.baseline_for
    else:
        rows, baseline = store.rows(), args.baseline
    rows = current_rows(rows, _note)
    if not rows:
        which = f" of suite {args.suite!r}" if args.suite else ""
        raise FedBanditError(
            f"leaderboard: no results{which} in {args.store}; run `fedbandit suite` first"
        )
    entries = build(rows, baseline)
    if args.audit:
        from fedbandit_env.bench.audit_agent import leaderboard_audits
        from fedbandit_env.bench.leaderboard import attach_audits

        attach_audits(entries, leaderboard_audits(rows, trials=args.audit_trials, note=_note))
    print(to_markdown(entries))
    if args.html:
        from fedbandit_env.bench.html import write_html

        page = write_html(entries, Path(args.html), f"fedbandit leaderboard ({args.store})")
        print(f"HTML: {page}")


def cmd_reproduce(args, extra: list[str]) -> None:
    if args.figure not in FIGURES:
        known = ", ".join(f"{k} ({v[1]})" for k, v in FIGURES.items())
        raise FedBanditError(f"reproduce: unknown figure {args.figure!r}; known: {known}")
    script = BENCHMARKS / FIGURES[args.figure][0]
    if not script.exists():
        raise FedBanditError(
            f"reproduce: {script} is not in this installation (a source "
            "checkout of fedbandit has benchmarks/)"
        )
    raise SystemExit(subprocess.call([sys.executable, str(script), *extra]))


def cmd_audit(args) -> None:
    from fedbandit_env.privacy import GaussianMechanism, LaplaceMechanism, audit_output_mechanism

    kwargs = _json(args.kwargs, "--kwargs")
    if args.trials < 100:
        raise ConfigError(
            f"{args.target}: audit: trials: expected an int >= 100, got {args.trials}"
        )
    if args.target in ("laplace", "gaussian"):
        epsilon = 1.0 if args.epsilon is None else args.epsilon
        if args.target == "laplace":
            mech = LaplaceMechanism(epsilon=epsilon, **kwargs)
        else:
            mech = GaussianMechanism(epsilon=epsilon, **{"delta": 1e-5, **kwargs})
        result = audit_output_mechanism(mech, trials=args.trials, seed=args.seed)
        claim: float | None = epsilon
    else:
        _audit_learner(args, kwargs)
        return
    bound = f"empirical lower bound {result.epsilon_lower:.3f} (95% confidence)"
    verdict = "EXCEEDS the claim" if result.epsilon_lower > claim else "consistent with the claim"
    print(f"{args.target} {kwargs}: claimed epsilon {claim:g}, {bound}: {verdict}")


def _audit_learner(args, kwargs: dict) -> None:
    """``fedbandit audit AGENT``: the targeted audit of docs/privacy.md "Auditing learners"."""
    from fedbandit_env.bench.audit_agent import TARGETS, audit_learner

    wrapper_epsilon = args.wrapper_epsilon
    tgt = TARGETS.get(args.target)
    if args.epsilon is not None:
        if tgt is not None and tgt.wrapper is not None and wrapper_epsilon is None:
            wrapper_epsilon = args.epsilon  # a *_shared learner: the wrapper's epsilon
        else:  # shorthand for the learner's own epsilon kwarg
            kwargs.setdefault("epsilon", args.epsilon)
    audit = audit_learner(
        args.target,
        kwargs,
        trials=args.trials,
        seed=args.seed,
        broken=args.broken,
        wrapper_epsilon=wrapper_epsilon,
        scope=args.scope,
        require_claim=args.epsilon is not None,
    )
    result = audit.result
    name = args.target + (" (broken: noise scale reduced)" if args.broken else "")
    if wrapper_epsilon is not None:
        name += f" under the privacy wrapper (epsilon {wrapper_epsilon:g} per message)"
    bound = f"empirical lower bound {result.epsilon_lower:.3f} (95% confidence)"
    detail = f"{result.trials} trials per input, {audit.seconds:.1f} s; event {result.event}"
    if audit.declared is None or math.isinf(audit.declared):
        print(f"{name} {kwargs}: claims no privacy (not private); {bound}; {detail}")
        return
    claim = audit.claim
    verdict = "EXCEEDS the claim" if audit.exceeds_claim() else "consistent with the claim"
    what = "per-release epsilon" if args.scope == "release" else "transcript epsilon"
    print(
        f"{name} {kwargs}: declared epsilon {audit.declared:g}, {what} {claim:.4g}, {bound}: "
        f"{verdict}; {detail}"
    )


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="fedbandit", description="Federated bandit benchmark.")
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("envs", help="list registered environments")
    sub.add_parser("agents", help="list registered learners")
    run = sub.add_parser("run", help="evaluate one cell and print its summary")
    run.add_argument("env")
    run.add_argument("agent")
    run.add_argument("--runs", type=int, default=10)
    run.add_argument("--seed", type=int, default=0)
    run.add_argument("--horizon", type=int, default=None)
    run.add_argument("--env-kwargs", default="{}")
    run.add_argument("--agent-kwargs", default="{}")
    suite = sub.add_parser("suite", help=f"run a suite into the store ({', '.join(SUITES)})")
    suite.add_argument("name")
    suite.add_argument("--store", default=DEFAULT_STORE)
    suite.add_argument("--executor", choices=EXECUTORS, default="serial")
    suite.add_argument("--jobs", type=int, default=2, help="workers for joblib / ray")
    suite.add_argument("--chunk", type=int, default=10, help="seeds per work unit")
    suite.add_argument("--ray-address", default=None, help="a Ray cluster (default: local)")
    suite.add_argument("--quiet", action="store_true")
    board = sub.add_parser("leaderboard", help="render the leaderboard from the store")
    board.add_argument("--store", default=DEFAULT_STORE)
    board.add_argument("--suite", default=None)
    board.add_argument(
        "--baseline",
        default=None,
        help="normalize every table to this learner (default: the suite's baseline; without "
        "--suite, linucb on linear environments and ucb1 otherwise)",
    )
    board.add_argument("--html", default=None, help="also write a static HTML page here")
    board.add_argument(
        "--audit",
        action="store_true",
        help="audit every private learner on the board and show the bound beside its claim "
        "(flagged when the audit exceeds it)",
    )
    board.add_argument("--audit-trials", type=int, default=3000)
    rep = sub.add_parser(
        "reproduce",
        help=f"reproduce a paper figure ({', '.join(FIGURES)}); later arguments, --help "
        "included, go to the script",
        add_help=False,
    )
    rep.add_argument("figure")
    rep.add_argument("script_args", nargs=argparse.REMAINDER)
    audit = sub.add_parser("audit", help="empirical privacy audit of a mechanism or a learner")
    audit.add_argument("target", help="laplace, gaussian or a learner id")
    audit.add_argument(
        "--epsilon",
        type=float,
        default=None,
        help="a mechanism's epsilon (default 1); for a learner, shorthand for its epsilon kwarg "
        "(for a *_shared learner: --wrapper-epsilon). "
        "A learner's claim is its declared privacy_epsilon, read after reset",
    )
    audit.add_argument("--kwargs", default="{}")
    audit.add_argument(
        "--wrapper-epsilon",
        type=float,
        default=None,
        help="audit a *_shared learner under the privacy wrapper at this per-message epsilon",
    )
    audit.add_argument(
        "--scope",
        choices=("release", "transcript"),
        default="release",
        help="the first release carrying the changed reward (default) or the whole transcript",
    )
    audit.add_argument(
        "--broken", action="store_true", help="audit the broken variant (noise scale reduced)"
    )
    audit.add_argument("--trials", type=int, default=20000)
    audit.add_argument("--seed", type=int, default=0)
    return p


def main(argv: list[str] | None = None) -> None:
    args = parser().parse_args(argv)
    commands = {
        "envs": cmd_envs,
        "agents": cmd_agents,
        "run": cmd_run,
        "suite": cmd_suite,
        "leaderboard": cmd_leaderboard,
        "audit": cmd_audit,
    }
    try:
        if args.command == "reproduce":
            cmd_reproduce(args, args.script_args)
        else:
            commands[args.command](args)
    except FedBanditError as err:
        print(f"fedbandit: error: {err}", file=sys.stderr)
        raise SystemExit(2) from None


if __name__ == "__main__":
    main()
