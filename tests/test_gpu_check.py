"""``benchmarks/gpu_check.sh`` (docs/jax.md, "A GPU machine") runs end to end at small sizes on
CPU and writes every record it promises: the anchor benchmark, the linear Fig. 1B slice's
claims file and the estimates. The slice is also the CI's run of the linear reproduction on the
JAX backend with ``--figures`` (docs/reproductions.md): the other figures' claims are reported as
left out, and the tables name the backend and its units."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fedbandit_env.bench import claims as C

pytest.importorskip("jax")

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_the_gpu_check_runs_at_small_sizes_and_writes_its_records(tmp_path):
    env = {**os.environ, "OUT": str(tmp_path), "GPU_CHECK_SCALE": "small", "PYTHON": sys.executable,
           "JAX_PLATFORMS": "cpu", "JAX_DISABLE_MOST_OPTIMIZATIONS": "1"}  # fmt: skip
    subprocess.run(["bash", str(ROOT / "benchmarks" / "gpu_check.sh")], env=env, check=True,
                   capture_output=True, text=True, timeout=900)  # fmt: skip
    anchor = json.loads((tmp_path / "bench_jax_anchor.json").read_text())
    pairs = {row["port"]: row for row in anchor["tables"][0]["rows"]}
    assert set(pairs) == {"ucb1"}  # the small scale's one pair
    assert all(row["vs anchor"] > 0 for row in pairs.values())
    claims = json.loads((tmp_path / "linear-1B-slice.json").read_text())
    assert claims["meta"]["backend"] == "jax" and claims["meta"]["paper_scale_estimate_s"] > 0
    assert claims["meta"]["scale_name"] == "CI" and claims["meta"]["figures"] == ["1B"]
    assert claims["meta"]["device"].startswith("cpu")
    meta, rows = C.read_claims(tmp_path / "linear-1B-slice.json")
    figures = [r.figure for r in rows]
    for fig, n in (("Fig. 1A", 2), ("Fig. 1B", 3), ("Fig. 1C", 1), ("Prop. 1", 2)):
        assert figures.count(fig) == n, (fig, figures)
    for r in rows:
        if r.figure in ("Fig. 1A", "Fig. 1C"):  # left out: reported, not dropped
            assert r.verdict == "not testable" and "--figures left out" in r.tolerance + r.reason
        elif r.figure == "Fig. 1B":
            assert r.verdict in C.VERDICTS and r.scale["backend"] == "jax"
    table = (tmp_path / "linear" / "claims.md").read_text()
    assert "Backend: JAX on cpu" in table and "wall s of cpu" in table
    # Fig. 1B's configurations (M = 10 at the CI grid, three sync rules, private and not) only
    configs = [line for line in table.splitlines() if line.startswith(("| 1 |", "| 2 |", "| 3 |"))]
    assert configs and all(line.startswith("| 2 |") for line in configs)
    estimates = json.loads((tmp_path / "estimates.json").read_text())
    assert set(estimates["agent-steps/s"]) == set(pairs)
    assert "cpu" in (tmp_path / "device.txt").read_text().lower()
