"""The gossip reproduction on the JAX backend, at a tiny scale (docs/jax.md, "Paper scale")."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("jax")

from fedbandit_env.reproductions import gossip  # noqa: E402


@pytest.mark.slow
def test_gossip_reproduction_runs_on_jax_and_says_so_in_meta(tmp_path):
    claims = tmp_path / "claims.json"
    gossip.main(["--backend", "jax", "--rounds", "60", "--runs", "2", "--panels", "a",
                 "--init-runs", "2", "--init-rounds", "60", "--out", str(tmp_path),
                 "--claims", str(claims)])  # fmt: skip
    data = json.loads(claims.read_text())
    assert data["meta"]["backend"] == "jax"
    assert data["meta"]["device"].startswith("cpu")
    assert data["meta"]["executor"] == "serial x 1"
    verdicts = {row["verdict"] for row in data["claims"]}
    assert verdicts <= {"reproduced", "not reproduced", "not testable"} and data["claims"]


def test_full_scale_on_jax_has_the_papers_hundred_runs():
    args = gossip.parse(["--full", "--backend", "jax"])
    assert args.runs == 100 and args.executor == "serial"
    assert gossip.parse(["--full"]).runs == 30


def test_linear_paper_scale_is_the_papers_grid_on_jax():
    from fedbandit_env.reproductions import linear

    args = linear.parse(["--paper-scale", "--backend", "jax"])
    assert linear.horizon_and_runs(args) == (10_000_000, 100)
    assert args.executor == "serial" and args.figures == ["1A", "1B", "1C"]
    g = linear.grid(args.full, args.paper_scale)
    assert g["agents"] == (10, 25, 50, 100) and g["m_comm"] == 100
    assert len(g["eps"]) == 8 and g["dims"] == (2, 4, 6, 8, 10, 15, 20)
    cfgs = linear.configs(10**7, 100, g, 0, 0.01, False, ("1C",), "jax")
    assert {c["exp"] for c in cfgs} == {"3"} and len(cfgs) == 14
    assert all(c["backend"] == "jax" and c["M"] == 100 for c in cfgs)


@pytest.mark.parametrize(
    "argv, field",
    [(["--paper-scale"], "--backend jax"), (["--paper-scale", "--backend", "jax", "--full"],
     "--full"), (["--ablation", "--figures", "1C"], "every figure")],
)  # fmt: skip
def test_linear_refuses_a_scale_it_cannot_run(argv, field, capsys):
    from fedbandit_env.reproductions import linear

    with pytest.raises(SystemExit):
        linear.parse(argv)
    assert field in capsys.readouterr().err


def _script(module: str, *argv: str, check: bool = True):
    """Run a reproduction script. These tests check what the scripts run and write (backends,
    claim rows, notes), not numbers, and XLA's optimization passes were most of their time (the
    commeff script compiles about 50 programs): JAX_DISABLE_MOST_OPTIMIZATIONS turns them off in
    the child."""
    import os
    import subprocess
    import sys

    cmd = [sys.executable, "-m", f"fedbandit_env.reproductions.{module}", *argv]
    env = {**os.environ, "JAX_DISABLE_MOST_OPTIMIZATIONS": "1"}
    return subprocess.run(
        cmd, capture_output=True, text=True, timeout=1200, check=check, env=env
    )


@pytest.mark.slow
def test_dp_recsys_reproduction_runs_on_jax_and_says_so_in_meta(tmp_path):
    from fedbandit_env.bench import claims as C
    from tests.test_reproduce_dp_recsys import REQUIRED

    path = tmp_path / "claims.json"
    _script("dp_recsys", "--backend", "jax", "--agents", "4", "--arms", "3", "--horizon", "120",
            "--seeds", "3", "--delta-horizon", "0", "--out", str(tmp_path), "--claims",
            str(path))  # fmt: skip
    meta, rows = C.read_claims(path)
    assert meta["backend"] == "jax" and meta["device"].startswith("cpu")
    assert meta["scale_name"] == "CI" and "backend_note" not in meta  # every task on JAX
    found = {(r.figure, r.source) for r in rows}
    assert {(fig, src) for fig, src, _ in REQUIRED} <= found
    # the decision rounds of DP-MW-UCB come from the JAX learner's final state (run_attrs)
    assert "| dp_mw_ucb | non-private |" in (tmp_path / "dp_recsys.md").read_text()


@pytest.mark.parametrize("module", ["dp_recsys", "commeff"])
def test_paper_scale_needs_the_jax_backend(module):
    done = _script(module, "--paper-scale", check=False)
    assert done.returncode == 2 and "--paper-scale: expected --backend jax" in done.stderr
    done = _script(module, "--paper-scale", "--backend", "jax", "--full", check=False)
    assert done.returncode == 2 and "--paper-scale: expected without --full" in done.stderr


def test_paper_scale_learners_and_fallbacks():
    import argparse

    from fedbandit_env.reproductions import harness

    args = argparse.Namespace(backend="jax", paper_scale=True, full=False, executor=None, jobs=2)
    harness.check_paper_scale(argparse.ArgumentParser(), args)
    assert (args.executor, args.jobs) == ("serial", 1)  # one process owns the device
    port, backend = harness.learner(args, "cdp_mab", epsilon=1.0)
    assert backend == "jax" and type(port).__module__ == "agents.jax.commeff"
    twin, backend = harness.learner(args, "cdp_mab", numpy_only=True, epsilon=1.0)
    assert backend == "numpy" and type(twin).__module__ == "agents.commeff.cdp"
    from fedbandit_env.bench.executors import EvalTask

    tasks = {1: EvalTask("FedBandit/Homogeneous-v0", port, 2, backend="jax"),
             2: EvalTask("FedBandit/Homogeneous-v0", twin, 2)}  # fmt: skip
    note = harness.numpy_fallbacks(args, tasks, {"cdp_mab": "one delta per run"})
    assert note == {"backend_note": "ran on numpy: cdp_mab (one delta per run)"}
    assert harness.numpy_fallbacks(argparse.Namespace(backend="numpy"), tasks) == {}


@pytest.mark.slow
def test_commeff_reproduction_runs_on_jax_and_names_what_stays_on_numpy(tmp_path):
    """Figs. 6, 8 and 12 on JAX (``--figures``; 13 of the full run's 49 compiled programs): CDP,
    DDP and HDP-MAB cells on JAX, the oracle-delta and Single-MAB cells on numpy, and every
    other figure's claims reported as left out. The whole run on numpy is
    tests/test_reproduce_commeff.py's. T = 300 (Fig. 8's instance at 4100: its single agents
    need T >= 3971): what runs where does not depend on T, and every R-schedule still completes
    one to four rounds (Fig. 6's table), so the rounds' messages and eliminations run."""
    from collections import Counter

    from fedbandit_env.bench import claims as C
    from tests.test_reproduce_commeff import REQUIRED

    path = tmp_path / "claims.json"
    _script("commeff", "--backend", "jax", "--arms", "6", "--horizon", "300", "--seeds", "2",
            "--fig8-horizons", "4100", "--figures", "6,8,12", "--out", str(tmp_path),
            "--claims", str(path))  # fmt: skip
    meta, rows = C.read_claims(path)
    assert meta["backend"] == "jax" and meta["device"].startswith("cpu")
    assert meta["figures"] == ["Fig. 6", "Fig. 8", "Fig. 12"]
    ran = {"Fig. 6", "Fig. 8", "Fig. 12", "Fig. 9", "Table II"}  # the last two run nothing
    assert Counter((r.figure, r.source) for r in rows if r.figure in ran) == Counter(
        {k: n for k, n in REQUIRED.items() if k[0] in ran}
    )
    left = [r for r in rows if r.figure not in ran]
    assert Counter(r.figure for r in left) == Counter(
        {f: sum(n for (g, _), n in REQUIRED.items() if g == f) for f in ("Fig. 4", "Fig. 5",
                                                                        "Fig. 7", "Fig. 10",
                                                                        "Fig. 11")}
    )  # fmt: skip
    assert all(r.verdict == "not testable" and "--figures left out" in r.reason for r in left)
    assert all(r.verdict in C.VERDICTS for r in rows if r.figure in ran)
    assert {p.name for p in tmp_path.glob("fig*.png")} <= {"fig6.png", "fig8.png", "fig12.png"}
    note = meta["backend_note"]  # the Single-MAB and oracle-delta cells ran on numpy
    assert note.startswith("ran on numpy: cdp_mab (the oracle-delta cells") and "single_mab" in note
