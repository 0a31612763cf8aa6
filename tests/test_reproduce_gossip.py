"""The Fig. 2 reproduction script runs end to end at a tiny scale and writes its outputs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_reproduce_gossip_tiny(tmp_path):
    out = subprocess.run(
        [
            sys.executable,
            "benchmarks/reproduce_gossip.py",
            "--rounds",
            "600",
            "--runs",
            "2",
            "--workers",
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
    assert "ordering eps=1 > 2 > 5 > inf" in table and "Theorem 1 bound" in table
    assert "(worst agent, mean over runs)" in table
    assert (tmp_path / "fig2.png").stat().st_size > 10_000
    assert "| a |" in out.stdout and "| b |" in out.stdout
