"""The linear reproduction script runs end to end at a tiny scale and writes its outputs."""

from __future__ import annotations

import re
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
    # the communication ordering compares D = 0 with both other regimes, in both groups
    for group in ("private eps=1", "non-private"):
        assert f"({group}: D=0 <= DisLinUCB D and <= Theorem-1 D)" in table
    for row in table.splitlines():
        if "D=0 <= DisLinUCB D and <= Theorem-1 D" in row:
            measured, values = (c.strip() for c in row.strip("|").split("|")[2:4])
            regret = [float(v) for v in re.findall(r": (\d+) \(", values)]
            assert len(regret) == 3  # D = 0, DisLinUCB D, Theorem-1 D
            if min(abs(regret[0] - regret[1]), abs(regret[0] - regret[2])) >= 1:
                lowest = regret[0] < min(regret[1:])
                assert measured == ("yes" if lowest else "no"), row
    assert "| Prop. 1: realized sync rounds" in table and "non-private: 5 of 5" in table
    # one configuration row per run: 2 M x 4 epsilons, 3 regimes x 2, 3 dimensions
    configs = [line for line in table.splitlines() if line.startswith(("| 1 |", "| 2 |", "| 3 |"))]
    assert len(configs) == 8 + 6 + 3
    cells = [[c.strip() for c in row.strip("|").split("|")] for row in configs]
    # D = 0 syncs after every trial but the last: 119 completed syncs in 120 trials, no bound
    every_trial = [c for c in cells if c[0] == "2" and c[4] == "0"]
    assert len(every_trial) == 2 and all(c[5:7] == ["119.0", "–"] for c in every_trial)
    # private rows carry the §2.3 constants (m = 1 + ceil(log2 120) = 8), non-private rows lambda
    eps1 = [c for c in cells if c[3] == "1"]
    assert len(eps1) == 2 + 3 + 3 and all(c[8:10] == ["8", "67.79"] for c in eps1)
    assert sum("λ = 1" in row for row in configs) == 2 + 3
    timing = [
        row
        for row in table.splitlines()
        if row.startswith(("| D = 0", "| DisLinUCB", "| Theorem-1"))
    ]
    assert len(timing) == 6  # three regimes x private / non-private, paper next to latency
    d0 = [row for row in timing if row.startswith("| D = 0")]
    assert all("119.0 / 118.0" in row for row in d0)  # a sync after every trial, one step later
    assert (tmp_path / "fig1.png").stat().st_size > 10_000
    assert "| Exp. 2" in out.stdout
