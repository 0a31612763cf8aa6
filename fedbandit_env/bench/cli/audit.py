"""``fedbandit audit``: the empirical privacy audit of a mechanism or a learner (docs/privacy.md,
"Auditing learners").

fedbandit audit (laplace|gaussian|AGENT) [--epsilon 1] [--kwargs JSON] [--trials N]
"""

from __future__ import annotations

import math

from fedbandit_env.bench.cli.args import (
    EPSILON,
    JSON_OBJECT,
    NON_NEGATIVE,
    TRIALS,
    Refuted,
    arg_type,
    check_agent_id,
    command,
)


def cmd_audit(args) -> None:
    from fedbandit_env.bench.privacy_audit import audit_output_mechanism
    from fedbandit_env.privacy import GaussianMechanism, LaplaceMechanism

    kwargs = dict(args.kwargs)
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
    if result.epsilon_lower > claim:
        raise Refuted(f"audit: the audit refutes the claim of {args.target} (epsilon {claim:g})")


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
    if audit.exceeds_claim():
        raise Refuted(
            f"audit: the audit refutes the privacy claim of {name} (lower bound "
            f"{result.epsilon_lower:.3f} above {claim:.4g})"
        )


def _audit_target(text: str) -> str:
    return text if text in ("laplace", "gaussian") else check_agent_id(text)


def add(sub) -> None:
    """The parser of ``audit``."""
    audit = command(sub, "audit", "empirical privacy audit of a mechanism or a learner")
    audit.add_argument(
        "target",
        type=arg_type("audit target", _audit_target),
        help="laplace, gaussian or a learner id",
    )
    audit.add_argument(
        "--epsilon",
        type=EPSILON,
        default=None,
        help="a mechanism's epsilon (default 1); for a learner, shorthand for its epsilon kwarg "
        "(for a *_shared learner: --wrapper-epsilon). "
        "A learner's claim is its declared privacy_epsilon, read after reset",
    )
    audit.add_argument(
        "--kwargs", type=JSON_OBJECT, default={}, help="mechanism or learner kwargs (JSON object)"
    )
    audit.add_argument(
        "--trials", type=TRIALS, default=20000, help="audit trials per input (>= 100)"
    )
    audit.add_argument("--seed", type=NON_NEGATIVE, default=0, help="the audit's seed")
    audit.add_argument(
        "--wrapper-epsilon",
        type=EPSILON,
        default=None,
        help="audit a *_shared learner under the privacy wrapper at this per-message epsilon "
        "(default: no wrapper)",
    )
    audit.add_argument(
        "--scope",
        choices=("release", "transcript"),
        default="release",
        help="release: the first release carrying the changed reward; transcript: all of them",
    )
    audit.add_argument(
        "--broken", action="store_true", help="audit the broken variant (noise scale reduced)"
    )
