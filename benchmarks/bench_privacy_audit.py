"""Targeted privacy audits of every private learner at epsilon = 1 (docs/privacy.md "Auditing
learners"): declared epsilon, the epsilon of the audited release, the audited lower bound at 95 %
confidence, the broken variant's bound (noise scale halved; linear learners: divided by 50),
trials per input, seconds (CPU seconds of this process for the correct and the broken audit,
pilots included: the machine is shared, and with one BLAS thread they equal wall seconds on an
idle core) and trials/s (runs simulated per second: 2 inputs x 2 audits x trials / seconds). The last row audits the Laplace
mechanism alone (``fedbandit audit laplace``; broken: half its scale).

``--compare`` also runs every learner's two audits with one seeded Generator per run and stream
(``block=False``, the streams of normal runs) and prints those seconds and the speed-up of the
block streams beside them, in the same run. After the table, the linear learners' privacy
figures that bound every audit of them (the power goal cannot be met, docs/privacy.md). Run on
one core:

    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 python benchmarks/bench_privacy_audit.py \
        [--trials N] [--only ID ...] [--compare]
"""

from __future__ import annotations

import argparse
import math
import time

import record

from fedbandit_env.bench.audit_agent import audit_learner, linear_audit_limits
from fedbandit_env.bench.privacy_audit import audit_output_mechanism
from fedbandit_env.privacy import LaplaceMechanism

parser = argparse.ArgumentParser()
parser.add_argument("--trials", type=int, default=20_000)
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--only", nargs="*", default=None, help="learner ids (or laplace) to audit")
parser.add_argument(
    "--compare", action="store_true", help="also time the audits with per-run Generators"
)
record.add_json_option(parser)
args = parser.parse_args()
record.start(__file__, args)

# learner, kwargs at epsilon = 1, privacy-wrapper epsilon
LEARNERS = [
    ("gossip_fed_ucb", {"epsilon": 1.0}, None),
    ("dp_mw_ucb", {"epsilon": 1.0}, None),
    ("dp_dec_ucb", {"epsilon": 1.0}, None),
    ("cdp_mab", {"epsilon": 1.0}, None),
    ("ddp_mab", {"epsilon": 1.0}, None),
    ("hdp_mab", {"epsilon": 1.0}, None),
    ("cdp_mab", {"epsilon": 1.0, "privacy": "per_message"}, None),
    ("ldp_ucb", {"epsilon": 1.0}, None),
    ("ucb1_shared", {}, 1.0),
    ("fed_lin_ucb", {"epsilon": 1.0}, None),
    ("fed_lin_ucb_decentralized", {"epsilon": 1.0}, None),
]


def both(agent_id: str, kwargs: dict, wrapper: float | None, block: bool):
    start = time.process_time()
    common = dict(trials=args.trials, seed=args.seed, wrapper_epsilon=wrapper, block=block)
    ok = audit_learner(agent_id, kwargs, **common)
    bad = audit_learner(agent_id, kwargs, broken=True, **common)
    return ok, bad, time.process_time() - start


head = (
    "| learner | declared ε | per-release ε | audited lower bound (95 %) | broken variant's bound "
    "| trials | seconds | trials/s |"
)
rule = "|---|---|---|---|---|---|---|---|"
if args.compare:
    head += " seconds, per-run Generators | speed-up |"
    rule += "---|---|"
print(head)
print(rule)
for agent_id, kwargs, wrapper in LEARNERS:
    if args.only and agent_id not in args.only:
        continue
    ok, bad, seconds = both(agent_id, kwargs, wrapper, block=True)
    name = agent_id
    if wrapper is not None:
        name += " + privacy wrapper"
    if kwargs.get("privacy") == "per_message":
        name += " (per_message)"
    flag = " (EXCEEDS)" if ok.exceeds_claim() else ""
    caught = "caught" if bad.exceeds_claim() else "NOT caught"
    line = (
        f"| {name} | {ok.declared:g} | {ok.claim:.4g} | {ok.epsilon_lower:.3f}{flag} | "
        f"{bad.epsilon_lower:.3f} ({caught}) | {args.trials} | {seconds:.1f} | "
        f"{4 * args.trials / seconds:,.0f} |"
    )
    if args.compare:
        _, _, slow = both(agent_id, kwargs, wrapper, block=False)
        line += f" {slow:.1f} | {slow / seconds:.1f}x |"
    print(line, flush=True)

if not args.only or "laplace" in args.only:
    start = time.process_time()
    ok = audit_output_mechanism(LaplaceMechanism(1.0), trials=args.trials, seed=args.seed)
    bad = audit_output_mechanism(
        LaplaceMechanism(2.0, sensitivity=1.0), trials=args.trials, seed=args.seed
    )
    seconds = time.process_time() - start
    caught = "caught" if bad.exceeds(1.0) else "NOT caught"
    line = (
        f"| laplace mechanism | 1 | 1 | {ok.epsilon_lower:.3f} | {bad.epsilon_lower:.3f} "
        f"({caught}) | {args.trials} | {seconds:.2f} | {4 * args.trials / seconds:,.0f} |"
    )
    print(line + (" — | — |" if args.compare else ""), flush=True)

linear = [a for a, _, _ in LEARNERS if a.startswith("fed_lin")]
if not args.only or any(a in args.only for a in linear):
    print()
    print(
        "| linear learner (epsilon 1) | delta | m | sigma_N | node mu, worst case | node mu, "
        "audit pair | transcript mu | transcript TV | TV, noise halved | exact transcript ε at "
        "delta | zCDP rho | ε from rho at delta |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for agent_id in linear:
        if args.only and agent_id not in args.only:
            continue
        lim = linear_audit_limits(agent_id, {"epsilon": 1.0})
        print(
            f"| {agent_id} | {lim.delta:g} | {lim.m} | {lim.sigma_N:.1f} | "
            f"{lim.node_mu:.4f} | {lim.pair_node_mu:.4f} | {lim.transcript_mu:.4f} | "
            f"{lim.transcript_tv:.4f} | {math.erf(lim.transcript_mu / math.sqrt(2)):.4f} | "
            f"{lim.transcript_epsilon:.3f} | {lim.rho:.5f} | "
            f"{lim.rho_epsilon:.3f} |"
        )
