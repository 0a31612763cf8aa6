"""``python -m fedbandit_env.bench``: the quick comparison of every registered learner.

Runs each registered agent on a small heterogeneous cell and prints a Markdown table ranked by
mean final per-agent regret, with a 95% normal-approximation interval and the messages sent.
"""

from __future__ import annotations

import argparse

import numpy as np

from fedbandit_env.agent_registry import list_agents
from fedbandit_env.bench.evaluate import evaluate

QUICK_ENV = "FedBandit/Heterogeneous-v0"
QUICK_KWARGS = {"num_agents": 5, "num_arms": 5, "horizon": 2000, "topology": "ring"}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--horizon", type=int, default=QUICK_KWARGS["horizon"])
    args = parser.parse_args(argv)
    kwargs = {**QUICK_KWARGS, "horizon": args.horizon}
    rows = []
    for agent_id in list_agents():
        res = evaluate(QUICK_ENV, agent_id, runs=args.runs, seed=args.seed, env_kwargs=kwargs)
        final = res.final_regret_per_agent
        half = 1.96 * final.std(ddof=1) / np.sqrt(len(final)) if len(final) > 1 else 0.0
        rows.append((final.mean(), half, agent_id, res.messages.sum(axis=1).mean(), res.wall_time))
    print(f"{QUICK_ENV} {kwargs}, {args.runs} runs\n")
    print("| rank | agent | final regret / agent | 95% CI | messages | wall s |")
    print("|---|---|---|---|---|---|")
    for rank, (mean, half, agent_id, msgs, wall) in enumerate(sorted(rows), start=1):
        print(f"| {rank} | {agent_id} | {mean:.1f} | ±{half:.1f} | {msgs:.0f} | {wall:.2f} |")


if __name__ == "__main__":
    main()
