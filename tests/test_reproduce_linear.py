"""The linear reproduction script runs end to end at a tiny scale and writes its outputs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_reproduce_linear_tiny(tmp_path):
    out = subprocess.run(
        [
            sys.executable,
            "benchmarks/reproduce_linear.py",
            "--horizon",
            "120",
            "--runs",
            "1",
            "--out",
            str(tmp_path),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    table = (tmp_path / "claims.md").read_text()
    assert "Exp. 1" in table and "Exp. 3: log-log slope" in table and "beta_scale = 0.01" in table
    assert (tmp_path / "fig1.png").stat().st_size > 10_000
    assert "| Exp. 2" in out.stdout
