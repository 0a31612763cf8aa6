"""``benchmarks/gpu_check.sh`` (docs/jax.md, "A GPU machine") runs end to end at small sizes on
CPU and writes every record it promises: the anchor benchmark, the linear Fig. 1B slice's
claims file and the estimates."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

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
    assert claims["meta"]["scale_name"] == "CI"
    estimates = json.loads((tmp_path / "estimates.json").read_text())
    assert set(estimates["agent-steps/s"]) == set(pairs)
    assert "cpu" in (tmp_path / "device.txt").read_text().lower()
