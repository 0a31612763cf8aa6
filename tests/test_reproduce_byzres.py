"""The ByzRes-UCB reproduction (fedbandit_env/reproductions/byzres.py) runs end to end at a tiny
scale: every claim row present with a computed verdict, the prototype rows not testable below
T = 9,996, Z1 bit-identical, the figure and the printed table; and the cache re-renders the
same rows."""

from __future__ import annotations

from fedbandit_env.bench import claims as C
from fedbandit_env.reproductions import byzres

TINY = ["--rounds", "300", "--runs", "3", "--executor", "serial"]


def test_tiny_scale_claims_file(tmp_path, capsys):
    path = tmp_path / "byzres.json"
    byzres.main([*TINY, "--out", str(tmp_path), "--claims", str(path)])
    meta, rows = C.read_claims(path)
    assert meta["scale_name"] == "CI" and meta["wall_time_s"] > 0
    assert meta["command"].startswith("fedbandit reproduce byzres")
    for r in rows:
        assert r.verdict in C.VERDICTS and r.source in C.SOURCES and r.tolerance
        assert r.verdict == "reproduced" or r.reason
    figures = [r.figure for r in rows]
    for fig, count in [("Theorem (each agent)", 1), ("Theorem (collective)", 1), ("Z1", 2),
                       ("Z2", 3), ("Z3", 1), ("Z4", 4), ("Z5", 3), ("Z6", 4), ("Defaults", 1)]:  # fmt: skip
        assert figures.count(fig) == count, fig
    by = {(r.figure, r.claim): r for r in rows}
    z1 = next(r for r in rows if r.figure == "Z1" and "bit-identical" in r.claim)
    assert z1.verdict == "reproduced" and z1.ours["identical"] is True
    proto = [r for r in rows if r.note and "prototype" in r.note]
    assert proto and all(r.verdict == "not testable" for r in proto)  # T = 300 < 1000
    assert all(r.source == "spec" for r in proto)
    assert by and all(r.scale["T"] == 300 and r.scale["runs"] == 3 for r in rows)
    out = capsys.readouterr().out
    assert "| figure | claim | source | paper | ours | verdict |" in out
    assert (tmp_path / "byzres.png").is_file()
    # from the cache: the same rows
    again = tmp_path / "again.json"
    byzres.main([*TINY, "--out", str(tmp_path), "--claims", str(again)])
    assert [r.ours for r in C.read_claims(again)[1]] == [r.ours for r in rows]
