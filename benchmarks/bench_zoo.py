"""Throughput of the baseline zoo through the bench (``evaluate``), in agent-steps per second.

Prints one Markdown row per learner: wall time of ``runs`` runs of ``horizon`` steps with
``num_agents`` agents on ``num_arms`` arms on a ring, and agent-steps/s (runs x agents x steps /
wall). ``--full`` uses 100 runs of 10^4 steps.

    python benchmarks/bench_zoo.py
"""

from __future__ import annotations

import argparse

import record

from fedbandit_env.bench import evaluate

ZOO = ["uniform", "ucb1", "kl_ucb", "epsilon_greedy", "thompson_beta", "thompson_gaussian"]

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--runs", type=int, default=20)
parser.add_argument("--horizon", type=int, default=2000)
parser.add_argument("--num-agents", type=int, default=10)
parser.add_argument("--num-arms", type=int, default=10)
parser.add_argument("--full", action="store_true")
record.add_json_option(parser)
args = parser.parse_args()
record.start(__file__, args)
if args.full:
    args.runs, args.horizon = 100, 10_000

env_kwargs = {
    "num_agents": args.num_agents,
    "num_arms": args.num_arms,
    "horizon": args.horizon,
    "topology": "ring",
}
print(f"FedBandit/Heterogeneous-v0 {env_kwargs}, {args.runs} runs\n")
print("| learner | wall s | agent-steps/s | final regret / agent |")
print("|---|---|---|---|")
for base in ZOO:
    for agent_id in (base, f"{base}_shared") if base != "uniform" else (base,):
        res = evaluate(
            "FedBandit/Heterogeneous-v0", agent_id, runs=args.runs, seed=0, env_kwargs=env_kwargs
        )
        rate = args.runs * args.num_agents * args.horizon / res.wall_time
        final = res.final_regret_per_agent.mean()
        print(f"| {agent_id} | {res.wall_time:.2f} | {rate:,.0f} | {final:.1f} |")
