"""Targeted privacy audits of every private learner at epsilon = 1 (docs/privacy.md "Auditing
learners"): declared epsilon, the epsilon of the audited release, the audited lower bound at 95 %
confidence, the broken variant's bound (noise scale halved; linear learners: divided by 50),
trials per input and wall seconds (correct + broken audit). Run on one core:

    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 python benchmarks/bench_privacy_audit.py [--trials N]
"""

from __future__ import annotations

import argparse
import time

from fedbandit_env.bench.audit_agent import audit_learner

parser = argparse.ArgumentParser()
parser.add_argument("--trials", type=int, default=20_000)
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--only", nargs="*", default=None, help="learner ids to audit")
args = parser.parse_args()

# learner, kwargs at epsilon = 1, privacy-wrapper epsilon
LEARNERS = [
    ("gossip_fed_ucb", {"epsilon": 1.0}, None),
    ("dp_mw_ucb", {"epsilon": 1.0}, None),
    ("dp_dec_ucb", {"epsilon": 1.0}, None),
    ("cdp_mab", {"epsilon": 1.0}, None),
    ("ddp_mab", {"epsilon": 1.0}, None),
    ("hdp_mab", {"epsilon": 1.0}, None),
    ("cdp_mab", {"epsilon": 1.0, "privacy": "per_message"}, None),
    ("ucb1_shared", {}, 1.0),
    ("fed_lin_ucb", {"epsilon": 1.0}, None),
    ("fed_lin_ucb_decentralized", {"epsilon": 1.0}, None),
]

print(
    "| learner | declared ε | per-release ε | audited lower bound (95 %) | broken variant's bound "
    "| trials | seconds |"
)
print("|---|---|---|---|---|---|---|")
for agent_id, kwargs, wrapper in LEARNERS:
    if args.only and agent_id not in args.only:
        continue
    start = time.perf_counter()
    ok = audit_learner(agent_id, kwargs, trials=args.trials, seed=args.seed,
                       wrapper_epsilon=wrapper)
    bad = audit_learner(agent_id, kwargs, trials=args.trials, seed=args.seed,
                        wrapper_epsilon=wrapper, broken=True)
    seconds = time.perf_counter() - start
    name = agent_id
    if wrapper is not None:
        name += " + privacy wrapper"
    if kwargs.get("privacy") == "per_message":
        name += " (per_message)"
    flag = " (EXCEEDS)" if ok.exceeds_claim() else ""
    caught = "caught" if bad.exceeds_claim() else "NOT caught"
    print(
        f"| {name} | {ok.declared:g} | {ok.claim:.4g} | {ok.epsilon_lower:.3f}{flag} | "
        f"{bad.epsilon_lower:.3f} ({caught}) | {args.trials} | {seconds:.1f} |",
        flush=True,
    )
