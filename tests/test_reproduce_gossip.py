"""The gossip reproduction runs end to end at a tiny scale and writes its claims file: every
required figure row present, verdicts computed and in the allowed set, ``source`` set."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fedbandit_env.bench import claims as C
from fedbandit_env.datasets.files import DIABETES
from fedbandit_env.reproductions import gossip
from tests.helpers import data_file_or_skip

SHARED, _ = data_file_or_skip(DIABETES)
TINY = [
    "--rounds", "300", "--runs", "3", "--ablation-runs", "2", "--init-runs", "3",
    "--init-rounds", "300", "--executor", "serial",
]  # fmt: skip


def _rows(path: Path) -> tuple[dict, list[C.Claim]]:
    meta, rows = C.read_claims(path)
    for r in rows:
        assert r.verdict in C.VERDICTS and r.source in C.SOURCES and r.tolerance
        assert r.verdict == "reproduced" or r.reason
    return meta, rows


@pytest.mark.slow
def test_tiny_scale_claims_file(tmp_path, capsys):
    claims = tmp_path / "gossip.json"
    gossip.main([*TINY, "--out", str(tmp_path), "--claims", str(claims)])
    meta, rows = _rows(claims)
    assert meta["title"] == "Gossip paper (Zhu et al.)" and meta["scale_name"] == "CI"
    assert meta["wall_time_s"] > 0 and meta["command"].startswith("fedbandit reproduce gossip")
    figures = [r.figure for r in rows]
    for fig, count in [("Fig. 2(a)", 3), ("Fig. 2(b)", 4), ("Fig. 2(c)", 2), ("Sec. 5.2", 3),
                       ("Theorem 1 (panel a)", 1), ("Initial sample", 4)]:  # fmt: skip
        assert figures.count(fig) == count, (fig, figures)
    ratio = [r for r in rows if "1 : 1/2 : 1/5" in r.claim]
    assert [r.figure for r in ratio] == ["Fig. 2(a)", "Fig. 2(b)"]
    assert all(r.source == "paper" and r.paper_value == "1 : 0.5 : 0.2" for r in ratio)
    assert all("0.25 (relative)" in r.tolerance for r in ratio)
    sub = [r for r in rows if "sublinear" in r.claim]
    assert sub and all(r.source == "spec" for r in sub)
    assert all(r.source == "project" for r in rows if r.figure == "Initial sample")
    if SHARED is not None:  # the Fig. 2(c) and Sec. 5.2 rows are computed on the UCI file
        assert all(
            r.verdict != "not testable" for r in rows if r.figure in ("Fig. 2(c)", "Sec. 5.2")
        )
    printed = capsys.readouterr().out
    assert C.to_markdown(rows) in printed  # the printed table is rendered from the same rows


def test_missing_data_makes_fig_2c_not_testable(tmp_path):
    claims = tmp_path / "gossip.json"
    gossip.main([*TINY, "--panels", "c", "--data", str(tmp_path / "no-data"),
                    "--init-rounds", "50", "--out", str(tmp_path), "--claims", str(claims)])  # fmt: skip
    _, rows = _rows(claims)
    c_rows = [r for r in rows if r.figure in ("Fig. 2(c)", "Sec. 5.2")]
    assert len(c_rows) == 5
    assert all(r.verdict == "not testable" and "not available" in r.reason for r in c_rows)
    assert json.loads(claims.read_text())["meta"]["scale_name"] == "CI"
