"""``fedbandit reproduce vial`` (fedbandit_env/reproductions/vial.py) at a tiny scale: it runs end
to end, writes its claims file and figure, and every row has a computed verdict from the allowed
set; the prototype targets are "not testable" off their scale and the 2022 rule's rows say why."""

from __future__ import annotations

from fedbandit_env.bench import claims as C
from fedbandit_env.reproductions import vial

TINY = ["--rounds", "400", "--runs", "2", "--rounds22", "400", "--runs22", "2"]


def test_tiny_scale_claims_file(tmp_path, capsys):
    path = tmp_path / "vial.json"
    vial.main([*TINY, "--out", str(tmp_path), "--claims", str(path)])
    meta, rows = C.read_claims(path)
    assert meta["title"] == "Robust GosInE (Vial, Shakkottai & Srikant)"
    assert meta["scale_name"] == "CI" and meta["wall_time_s"] > 0
    assert meta["command"].startswith("fedbandit reproduce vial")
    for r in rows:
        assert r.verdict in C.VERDICTS and r.source in C.SOURCES and r.tolerance
        assert r.verdict == "reproduced" or r.reason
    figures = [r.figure for r in rows]
    for fig, count in [("GosInE instance (V2)", 10), ("2022 setting, p = 1 (V3)", 3),
                       ("2022 setting, G(35, p) (V4)", 12), ("2022 rule", 3), ("V1", 1)]:  # fmt: skip
        assert figures.count(fig) == count, fig
    proto = [r for r in rows if r.note.startswith("prototype re-implementation")]
    assert len(proto) == 15 and all(r.verdict == "not testable" for r in proto)
    assert all("not implemented" in r.reason for r in rows if r.figure == "2022 rule")
    v1 = next(r for r in rows if r.figure == "V1")
    assert v1.verdict == "reproduced"  # rule "none" is GosInE bit for bit
    out = capsys.readouterr().out
    assert "| figure | claim |" in out and "honest regret" in out
    assert (tmp_path / "vial.png").is_file()
    cached = tmp_path / "cache"
    assert len(list(cached.glob("*.npz"))) == 14
