"""Rank one new learner against the shipped reference vs re-running the suite (docs/bench.md,
"Reference results"), side by side in one process.

A new learner (UCB1 with alpha = 1.5, registered at runtime) is run on the
suite's environments into a fresh store. Then:

* reference: ``fedbandit leaderboard --reference --store NEW`` ranks its rows against the shipped
  reference rows, re-running nothing;
* re-run: ``fedbandit suite SUITE`` into a fresh store (every learner, the new one included,
  with the chosen executor), then ``fedbandit leaderboard --suite SUITE``.

    python benchmarks/bench_reference.py [--suite standard] [--executor joblib] [--jobs 2]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import tempfile
import time
from pathlib import Path

import record

os.environ.setdefault("OMP_NUM_THREADS", "1")

from baselines.ucb import UCB1  # noqa: E402
from fedbandit_env import register_agent  # noqa: E402
from fedbandit_env.bench.cli import main  # noqa: E402
from fedbandit_env.bench.executors import run_suite  # noqa: E402
from fedbandit_env.bench.reference import REFERENCE_PATH, STANDARD  # noqa: E402
from fedbandit_env.bench.store import ResultsStore  # noqa: E402
from fedbandit_env.bench.suites import Suite, get_suite  # noqa: E402


class NewUCB(UCB1):
    """The "new learner" of this benchmark."""

    agent_id = "bench_new_ucb"

    def __init__(self, alpha: float = 1.5, **kwargs):
        super().__init__(alpha=alpha, **kwargs)


def _quiet_cli(argv: list[str]) -> float:
    start = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        main(argv)
    return time.perf_counter() - start


def run(suite_name: str, executor: str, jobs: int) -> None:
    register_agent(NewUCB.agent_id, NewUCB)
    suite = get_suite(suite_name)
    mine = [c for c in suite.available(lambda _m: None) if c.agent_id == NewUCB.agent_id]
    with tempfile.TemporaryDirectory() as tmp:
        new_store = Path(tmp) / "new.sqlite"
        start = time.perf_counter()
        run_suite(Suite("new", tuple(mine)), ResultsStore(new_store), executor, jobs, quiet=True)
        t_new = time.perf_counter() - start
        t_ref = _quiet_cli(["leaderboard", "--reference", "--store", str(new_store)])

        full_store = Path(tmp) / "full.sqlite"
        start = time.perf_counter()
        run_suite(suite, ResultsStore(full_store), executor, jobs, quiet=True)
        t_suite = time.perf_counter() - start
        t_board = _quiet_cli(["leaderboard", "--suite", suite_name, "--store", str(full_store)])

    size = REFERENCE_PATH.stat().st_size
    record.figure("reference file bytes", size)
    record.figure("new learner cells", len(mine))
    record.figure("new learner runs s", t_new)
    record.figure("ranking with leaderboard --reference s", t_ref)
    record.figure("re-run the suite + leaderboard s", t_suite + t_board)
    record.figure("speed-up", (t_suite + t_board) / (t_new + t_ref))
    print(
        f"suite {suite_name}: {len(suite.available(lambda _m: None))} cells; executor "
        f"{executor} ({jobs}); reference file {size:,} bytes"
    )
    print(f"{'':38s} {'new learner runs':>17s} {'ranking':>10s} {'total':>10s}")
    print(f"{'leaderboard --reference':38s} {t_new:16.1f}s {t_ref:9.2f}s {t_new + t_ref:9.1f}s")
    print(
        f"{'re-run the suite + leaderboard':38s} {'(in suite)':>17s} {t_suite + t_board:9.1f}s "
        f"{t_suite + t_board:9.1f}s"
    )
    print(
        f"speed-up: {(t_suite + t_board) / (t_new + t_ref):.0f}x "
        f"({len(mine)} cells of the new learner)"
    )


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--suite", default=STANDARD, help="the suite to re-run (default standard)")
    p.add_argument("--executor", default="joblib", help="serial, joblib or ray")
    p.add_argument("--jobs", type=int, default=2, help="workers")
    record.add_json_option(p)
    a = p.parse_args()
    record.start(__file__, a)
    run(a.suite, a.executor, a.jobs)
