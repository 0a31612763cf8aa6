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
