"""The DP recommender reproduction script runs top to bottom at a tiny scale."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "reproduce_dp_recsys.py"


def test_reproduce_dp_recsys_tiny(tmp_path):
    cmd = [
        sys.executable,
        str(SCRIPT),
        *("--agents", "4", "--arms", "3", "--horizon", "120", "--seeds", "2"),
        *("--delta-horizon", "0", "--out", str(tmp_path)),
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=True)
    table = (tmp_path / "dp_recsys.md").read_text()
    assert table in done.stdout
    assert (tmp_path / "dp_recsys.png").stat().st_size > 10_000
    rows = [
        line for line in table.splitlines() if line.startswith(("| 1 ", "| 2 ", "| 3 ", "| 4 "))
    ]
    assert len(rows) == 4
    assert all(row.split(" | ")[3] in ("yes", "NO") for row in rows)
    assert "c0 = " in table and "decision rounds" in table
    timing = [
        line for line in table.splitlines() if line.startswith(("| dp_dec_ucb", "| dp_mw_ucb"))
    ]
    assert len(timing) == 6 + 4  # every configuration under both timings
