"""``fedbandit reproduce field`` (fedbandit_env/reproductions/field.py) at CI scale: every sanity
module in fedbandit_env/reproductions/field_sanity/ runs end to end (one test per module, found at collection time), and the
CLI writes the claims file with the table's rows."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from fedbandit_env.bench.claims import PROVENANCES, VERDICTS, read_claims

ROOT = Path(__file__).resolve().parents[1]
SANITY = ROOT / "fedbandit_env" / "reproductions" / "field_sanity"
MODULES = sorted(p.stem for p in SANITY.glob("sanity_*.py"))
SCRIPT = ["-m", "fedbandit_env.reproductions.field"]


def _reproduce(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, *SCRIPT, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )


def test_every_field_agent_has_a_sanity_module():
    agents = ("dducb", "coop_ucb2", "fed1_ucb", "fed2_ucb", "dislinucb", "gosine", "ldp_ucb")
    assert {f"sanity_{a}" for a in agents} <= set(MODULES)


@pytest.mark.slow
@pytest.mark.parametrize("module", MODULES)
def test_sanity_module_runs_at_ci_scale(module, tmp_path):
    out = _reproduce("--only", module, "--claims", str(tmp_path / "claims.json"))
    assert "# Field coverage sanity experiments (CI scale, 1 modules)" in out.stdout
    assert "| figure | claim | source | paper | ours | verdict |" in out.stdout
    meta, rows = read_claims(tmp_path / "claims.json")
    assert meta["title"] == "Field coverage sanity experiments" and meta["scale_name"] == "CI"
    assert meta["modules"] == [module] and rows
    for row in rows:
        assert row.verdict in VERDICTS and row.provenance in PROVENANCES
        assert row.ours is not None and row.scale
    unverified = [r for r in rows if r.provenance == "mem"]
    assert out.stdout.count("(unverified)") == len(unverified)


def test_the_cli_passes_options_and_writes_the_claims_file(tmp_path):
    path = tmp_path / "field.json"
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "fedbandit_env.bench",
            "reproduce",
            "field",
            "--only",
            "sanity_dislinucb",
            "--claims",
            str(path),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    data = json.loads(path.read_text())
    assert data["meta"]["command"] == "fedbandit reproduce field"
    assert len(data["claims"]) == out.stdout.count("| sanity: ")
    assert {c["paper"] for c in data["claims"]} == {
        "Wang, Hu, Chen & Wang, Distributed Bandit Learning (ICLR'20): DisLinUCB"
    }


def test_an_unknown_module_is_a_clear_error():
    err = subprocess.run(
        [sys.executable, *SCRIPT, "--only", "sanity_nope"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert err.returncode == 2 and "--only: unknown module(s) ['sanity_nope']" in err.stderr
