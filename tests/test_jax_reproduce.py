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


def test_linear_paper_scale_is_the_papers_grid_on_jax():
    from fedbandit_env.reproductions import linear

    args = linear.parse(["--paper-scale", "--backend", "jax"])
    assert linear.horizon_and_runs(args) == (10_000_000, 100)
    assert args.executor == "serial" and args.figures == ["1A", "1B", "1C"]
    g = linear.grid(args.full, args.paper_scale)
    assert g["agents"] == (10, 25, 50, 100) and g["m_comm"] == 100
    assert len(g["eps"]) == 8 and g["dims"] == (2, 4, 6, 8, 10, 15, 20)
    cfgs = linear.configs(10**7, 100, g, 0, 0.01, False, ("1C",), "jax")
    assert {c["exp"] for c in cfgs} == {"3"} and len(cfgs) == 14
    assert all(c["backend"] == "jax" and c["M"] == 100 for c in cfgs)


@pytest.mark.parametrize(
    "argv, field",
    [(["--paper-scale"], "--backend jax"), (["--paper-scale", "--backend", "jax", "--full"],
     "--full"), (["--ablation", "--figures", "1C"], "every figure")],
)  # fmt: skip
def test_linear_refuses_a_scale_it_cannot_run(argv, field, capsys):
    from fedbandit_env.reproductions import linear

    with pytest.raises(SystemExit):
        linear.parse(argv)
    assert field in capsys.readouterr().err


@pytest.mark.slow
def test_linear_reproduction_runs_on_jax_one_figure(tmp_path):
    from fedbandit_env.bench import claims as C
    from fedbandit_env.reproductions import linear

    path = tmp_path / "claims.json"
    linear.main(["--backend", "jax", "--figures", "1C", "--horizon", "40", "--runs", "2",
                 "--out", str(tmp_path), "--claims", str(path)])  # fmt: skip
    meta, rows = C.read_claims(path)
    assert meta["backend"] == "jax" and meta["device"].startswith("cpu")
    assert meta["figures"] == ["1C"] and meta["scale_name"] == "CI"
    figures = [r.figure for r in rows]
    for fig, n in (("Fig. 1A", 2), ("Fig. 1B", 3), ("Fig. 1C", 1), ("Prop. 1", 2)):
        assert figures.count(fig) == n, (fig, figures)
    for r in rows:
        if r.figure in ("Fig. 1A", "Fig. 1B"):
            assert r.verdict == "not testable" and "--figures left out" in r.tolerance + r.reason
    slope = next(r for r in rows if r.figure == "Fig. 1C")
    assert isinstance(slope.ours, float) and slope.scale["backend"] == "jax"
    assert slope.verdict == ("reproduced" if abs(slope.ours - 2.0) <= 0.5 else "not reproduced")
    table = (tmp_path / "claims.md").read_text()
    assert "Backend: JAX on cpu" in table and "wall s of cpu" in table
    # Fig. 1C's six configurations (d = 2, 4, 8; private and not) and nothing else
    configs = [line for line in table.splitlines() if line.startswith(("| 1 |", "| 2 |", "| 3 |"))]
    assert len(configs) == 6 and all(line.startswith("| 3 |") for line in configs)
