"""Wall time of ranking a new learner against the shipped reference (`fedbandit rank`) beside
re-running the suite it is ranked on, side by side in one run.

    python benchmarks/bench_rank.py                    # the standard suite (several minutes)
    python benchmarks/bench_rank.py --suite quick --jobs 2

Three commands run in a fresh temporary folder, each into its own new store:

* `fedbandit rank batched_mod:BatchedUCB1 --suite S` (the batched UCB1 of
  docs/writing-agents.md, written to a file there);
* `fedbandit rank peragent_mod:MyUCB --suite S` (a per-agent UCB1 of the same shape as
  tests/test_rank.py's);
* `fedbandit suite S --executor joblib --jobs J` with the batched learner registered in the
  process, which is what ranking it took before `rank` existed: every learner of the suite run
  again.

It prints one line per command with its wall time, and the ratios to the suite's.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import record

ROOT = Path(__file__).resolve().parents[1]

PER_AGENT = textwrap.dedent(
    """
    import math

    import numpy as np

    from fedbandit_env import PerAgentLearner
    from fedbandit_env.per_agent import last_pull
    from fedbandit_env.policy import MULTI_ARMED, require_family


    class MyUCB(PerAgentLearner):
        agent_id = "my_ucb"

        def reset(self, agent, facts, rng):
            require_family(self.agent_id, facts, MULTI_ARMED)
            self.n = np.zeros(facts.num_arms)
            self.s = np.zeros(facts.num_arms)

        def act(self, observation):
            pull = last_pull(observation)
            if pull is not None:
                self.n[pull[0]] += 1
                self.s[pull[0]] += pull[1]
            if (self.n == 0).any():
                return int(np.argmin(self.n))
            t = self.n.sum()
            return int(np.argmax(self.s / self.n + np.sqrt(2 * math.log(t) / self.n)))
    """
)

SUITE_WITH_LEARNER = textwrap.dedent(
    """
    import sys

    from fedbandit_env import register_agent
    from fedbandit_env.bench.cli import main

    register_agent("batched_mod:BatchedUCB1", "batched_mod:BatchedUCB1")
    main(sys.argv[1:])
    """
)


def batched_source() -> str:
    """The batched UCB1 example of docs/writing-agents.md."""
    text = (ROOT / "docs" / "writing-agents.md").read_text()
    match = re.search(r"<!-- batched-example -->\n```python\n(.*?)```", text, flags=re.S)
    if match is None:
        raise SystemExit("docs/writing-agents.md: the batched example is missing")
    return match.group(1)


def timed(folder: Path, argv: list[str]) -> float:
    env = {**os.environ, "PYTHONPATH": str(folder)}
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=folder, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed:\n{done.stderr[-2000:]}")
    return wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--suite", default="standard", help="the suite (default: %(default)s)")
    parser.add_argument("--jobs", type=int, default=2, help="joblib workers of the suite re-run")
    record.add_json_option(parser)
    args = parser.parse_args()
    record.start(__file__, args)
    cli = [sys.executable, "-m", "fedbandit_env.bench"]
    with tempfile.TemporaryDirectory(prefix="fedbandit-rank-") as tmp:
        folder = Path(tmp)
        (folder / "batched_mod.py").write_text(batched_source())
        (folder / "peragent_mod.py").write_text(PER_AGENT)
        (folder / "suite_with_learner.py").write_text(SUITE_WITH_LEARNER)
        runs = {
            "rank, batched learner": cli + ["rank", "batched_mod:BatchedUCB1", "--suite",
                                            args.suite, "--store", "a.sqlite", "--quiet"],
            "rank, per-agent learner": cli + ["rank", "peragent_mod:MyUCB", "--suite",
                                              args.suite, "--store", "b.sqlite", "--quiet"],
            f"suite {args.suite} re-run (joblib {args.jobs})": [
                sys.executable, "suite_with_learner.py", "suite", args.suite, "--store",
                "c.sqlite", "--executor", "joblib", "--jobs", str(args.jobs), "--quiet"],
        }  # fmt: skip
        walls = {name: timed(folder, argv) for name, argv in runs.items()}
    suite_wall = list(walls.values())[-1]
    print(f"| command ({args.suite}) | wall time (s) | vs re-running the suite |")
    print("|---|---|---|")
    for name, wall in walls.items():
        print(f"| {name} | {wall:.1f} | {wall / suite_wall:.3f} |")


if __name__ == "__main__":
    main()
