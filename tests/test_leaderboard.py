"""Bench and leaderboard: resumable store, identical executors, ranked tables, HTML in Chromium,
the CLI."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from fedbandit_env import FedBanditError
from fedbandit_env.bench.executors import run_suite
from fedbandit_env.bench.leaderboard import bootstrap_ci, build, to_markdown
from fedbandit_env.bench.store import ResultsStore
from fedbandit_env.bench.suites import Cell, Suite, get_suite

ROOT = Path(__file__).resolve().parents[1]
ENV = "FedBandit/Heterogeneous-v0"
SMALL = {"num_agents": 3, "num_arms": 3, "topology": "complete"}


def small_suite(horizon: int = 300, runs: int = 4) -> Suite:
    cells = tuple(
        Cell(ENV, agent, horizon, runs, SMALL, kwargs, label=label)
        for agent, kwargs, label in (
            ("uniform", {}, "uniform"),
            ("ucb1", {}, "ucb1"),
            ("ucb1_shared", {}, "ucb1_shared"),
            ("gossip_fed_ucb", {"epsilon": 2.0}, "fed eps=2"),
        )
    )
    return Suite("small", cells, baseline="ucb1")


def numbers(store: ResultsStore) -> list[tuple]:
    return sorted(r.numbers for r in store.rows())


def test_rerun_skips_finished_rows_and_rows_are_complete(tmp_path):
    store = ResultsStore(tmp_path / "r.sqlite")
    suite = small_suite()
    assert run_suite(suite, store, chunk=3, quiet=True) == 16
    assert run_suite(suite, store, chunk=3, quiet=True) == 0  # nothing left to do
    rows = store.rows()
    assert len(rows) == 16 and len({(r.cell_hash, r.seed) for r in rows}) == 16
    curve = json.loads(rows[0].curve)
    assert (
        len(curve) == len(json.loads(rows[0].steps)) and curve[-1] == rows[0].final_regret_per_agent
    )


@pytest.mark.slow
def test_sigkill_mid_sweep_then_rerun_equals_an_uninterrupted_sweep(tmp_path):
    script = textwrap.dedent(
        f"""
        import sys
        sys.path.insert(0, {str(ROOT)!r})
        from tests.test_leaderboard import small_suite
        from fedbandit_env.bench.executors import run_suite
        from fedbandit_env.bench.store import ResultsStore
        run_suite(small_suite(horizon=3000, runs=6), ResultsStore(sys.argv[1]), chunk=1, quiet=True)
        """
    )
    (tmp_path / "sweep.py").write_text(script)
    killed = tmp_path / "killed.sqlite"
    proc = subprocess.Popen([sys.executable, str(tmp_path / "sweep.py"), str(killed)])
    deadline = time.time() + 120
    while time.time() < deadline:  # wait until some, not all, rows are in
        time.sleep(0.2)
        if killed.exists():
            try:
                n = ResultsStore(killed).count()
            except Exception:
                continue
            if n >= 3:
                break
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    partial = ResultsStore(killed).count()
    assert 3 <= partial < 24, partial  # killed mid-way
    proc = subprocess.run([sys.executable, str(tmp_path / "sweep.py"), str(killed)], check=True)
    clean = tmp_path / "clean.sqlite"
    subprocess.run([sys.executable, str(tmp_path / "sweep.py"), str(clean)], check=True)
    assert numbers(ResultsStore(killed)) == numbers(ResultsStore(clean))
    assert ResultsStore(killed).count() == 24


def test_serial_and_joblib_give_identical_numbers(tmp_path):
    serial, joblib = ResultsStore(tmp_path / "s.sqlite"), ResultsStore(tmp_path / "j.sqlite")
    run_suite(small_suite(), serial, "serial", chunk=4, quiet=True)
    run_suite(small_suite(), joblib, "joblib", n_jobs=2, chunk=1, quiet=True)
    assert numbers(serial) == numbers(joblib) and len(numbers(serial)) == 16


@pytest.mark.slow
def test_ray_local_gives_identical_numbers(tmp_path):
    ray = pytest.importorskip("ray")
    serial, on_ray = ResultsStore(tmp_path / "s.sqlite"), ResultsStore(tmp_path / "r.sqlite")
    run_suite(small_suite(), serial, "serial", chunk=4, quiet=True)
    try:
        run_suite(small_suite(), on_ray, "ray", n_jobs=2, chunk=2, quiet=True)
    finally:
        ray.shutdown()
    assert numbers(serial) == numbers(on_ray) and len(numbers(on_ray)) == 16


def test_leaderboard_ranks_normalizes_and_bootstraps(tmp_path):
    store = ResultsStore(tmp_path / "r.sqlite")
    run_suite(small_suite(horizon=800, runs=6), store, quiet=True)
    entries = build(store.rows(), baseline="ucb1")
    by_label = {e.label: e for e in entries}
    assert [e.rank for e in sorted(entries, key=lambda e: e.mean)] == [1, 2, 3, 4]
    assert by_label["ucb1"].normalized == pytest.approx(1.0)
    ratio = by_label["uniform"].mean / by_label["ucb1"].mean
    assert by_label["uniform"].normalized == pytest.approx(ratio) and ratio != pytest.approx(1.0)
    for e in entries:
        assert e.ci_low <= e.mean <= e.ci_high
    assert by_label["ucb1_shared"].messages == 3 * 2 * 800 and by_label["uniform"].messages == 0
    table = to_markdown(entries)
    assert table.index("| 1 |") < table.index("| 4 |") and "fed eps=2" in table


def test_bootstrap_ci_covers_the_mean_at_the_nominal_rate():
    rng = np.random.default_rng(0)
    covered = 0
    for _ in range(200):
        sample = rng.normal(1.0, 1.0, size=30)
        lo, hi = bootstrap_ci(sample, rng)
        covered += lo <= 1.0 <= hi
    assert 0.88 <= covered / 200 <= 0.99


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def test_html_page_renders_in_headless_chromium(tmp_path):
    from fedbandit_env.bench.html import write_html

    browser = _chromium()
    if browser is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is not installed (.ci/run installs it)")
        pytest.skip("chromium is not installed")
    store = ResultsStore(tmp_path / "r.sqlite")
    run_suite(small_suite(), store, quiet=True)
    page = write_html(build(store.rows()), tmp_path / "html", "test leaderboard")
    flags = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={tmp_path / 'profile'}",
    ]
    shot = tmp_path / "shot.png"
    subprocess.run(
        [browser, *flags, f"--screenshot={shot}", "--window-size=1000,1400", page.as_uri()],
        check=True,
        capture_output=True,
        timeout=120,
    )
    dom = subprocess.run(
        [browser, *flags, "--dump-dom", page.as_uri()],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout
    assert dom.count('<tr class="entry">') == 4 and "ucb1_shared" in dom
    for src in ("regret_0.png", "scatter.png"):
        assert f'src="{src}"' in dom and (page.parent / src).stat().st_size > 5_000
    import matplotlib.image as mpimg

    pixels = mpimg.imread(shot)
    assert pixels.shape[0] > 500 and pixels[..., :3].std() > 0.05  # not a blank page


def test_quick_suite_cli_prints_a_ranked_table(tmp_path):
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "fedbandit_env.bench",
            "suite",
            "quick",
            "--store",
            str(tmp_path / "q.sqlite"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    ).stdout
    assert "| rank | learner |" in out and "| 1 |" in out and "ucb1" in out
    board = subprocess.run(
        [
            sys.executable,
            "-m",
            "fedbandit_env.bench",
            "leaderboard",
            "--store",
            str(tmp_path / "q.sqlite"),
            "--html",
            str(tmp_path / "html"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    ).stdout
    assert "HTML:" in board and (tmp_path / "html" / "index.html").exists()


@pytest.mark.parametrize(
    ("argv", "match"),
    [
        (["suite", "nope"], "suite 'nope' is not defined"),
        (["reproduce", "fig99"], "unknown figure 'fig99'"),
        (["run", ENV, "ucb1", "--env-kwargs", "{bad"], "--env-kwargs: expected a JSON object"),
        (["run", ENV, "no_agent"], "agent id 'no_agent' is not registered"),
        (["leaderboard", "--store", "/nonexistent/dir/x.sqlite"], "unable to open|no results"),
    ],
)
def test_cli_errors_are_clear(argv, match, capsys):
    from fedbandit_env.bench.cli import main

    with pytest.raises((SystemExit, FedBanditError, Exception)) as err:
        main(argv)
    text = capsys.readouterr().err + str(err.value)
    import re

    assert re.search(match, text), text


def test_cli_audit_of_a_mechanism(capsys):
    from fedbandit_env.bench.cli import main

    main(["audit", "laplace", "--epsilon", "1", "--trials", "20000"])
    out = capsys.readouterr().out
    assert "consistent with the claim" in out


def test_suites_are_well_formed():
    quick = get_suite("quick")
    assert len({c.config_hash for c in quick.cells}) == len(quick.cells)
    for name in ("standard", "gossip", "dp_recsys", "commeff", "linear"):
        assert get_suite(name).cells
