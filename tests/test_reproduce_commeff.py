"""The commeff reproduction script runs end to end at a tiny scale and writes its outputs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_reproduce_commeff_tiny(tmp_path):
    cmd = [
        sys.executable,
        str(ROOT / "benchmarks" / "reproduce_commeff.py"),
        "--arms", "6", "--horizon", "1500", "--seeds", "2",
        "--figs", "4,6,10,11", "--out", str(tmp_path),
    ]  # fmt: skip
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=True).stdout
    table = (tmp_path / "predictions.md").read_text()
    for item in ("1 (Fig. 4)", "3 (Fig. 6)", "6 (Fig. 10)", "7 (Fig. 11)", "6b (", "7b ("):
        assert item in table and item in out
    assert "Complete == CDP: True" in table
    assert "1,2,3,5,6 identical: True" in table
    assert "identical: True; case 4" in table
    for fig in ("fig4.png", "fig6.png", "fig10.png", "fig11.png"):
        assert (tmp_path / fig).stat().st_size > 1000
