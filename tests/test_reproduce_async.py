"""The event-time reproduction (``fedbandit reproduce async``) runs end to end at a tiny scale
and writes its claims file: every claim of the four papers and of the options present, the
verdicts computed, and the structural claims (which hold at any scale) reproduced; with
``--backend jax`` the statistical runs use the JAX ports."""

from __future__ import annotations

import pytest

from fedbandit_env.bench import claims as C
from fedbandit_env.reproductions import async_linear

TINY = ["--horizon", "300", "--runs", "4"]


def test_tiny_scale_claims_file(tmp_path, capsys):
    claims = tmp_path / "async.json"
    async_linear.main([*TINY, "--out", str(tmp_path), "--claims", str(claims)])
    meta, rows = C.read_claims(claims)
    assert meta["scale_name"] == "CI" and meta["command"].startswith("fedbandit reproduce async")
    figures = [r.figure for r in rows]
    counts = {"A1": 2, "A2": 2, "A3": 2, "A4": 1, "A5": 5, "F1": 2, "F2": 3, "F3": 2, "F4": 1,
              "F5": 1, "F6": 1, "N1": 2, "N2": 2, "N3": 2, "N4": 1, "D1": 5, "D2": 1, "O1": 2,
              "O2": 1, "O3": 4}  # fmt: skip
    assert {f: figures.count(f) for f in counts} == counts and len(rows) == sum(counts.values())
    for r in rows:
        assert r.verdict in C.VERDICTS and r.tolerance and (r.verdict == "reproduced" or r.reason)
    structural = ("A1", "A3", "F5", "F6", "N4", "D2", "O1", "O2")
    assert all(r.verdict == "reproduced" for r in rows if r.figure in structural), [
        (r.figure, r.verdict, r.ours) for r in rows if r.figure in structural
    ]
    assert C.to_markdown(rows) in capsys.readouterr().out


def test_only_runs_the_named_parts(tmp_path):
    claims = tmp_path / "async.json"
    async_linear.main(["--horizon", "100", "--runs", "3", "--only", "options", "--claims",
                       str(claims), "--out", str(tmp_path)])  # fmt: skip
    meta, rows = C.read_claims(claims)
    assert meta["parts"] == ["options"]
    ran = [r for r in rows if "not run" not in r.reason]
    assert {r.figure[0] for r in ran} == {"O"}
    skipped = {r.figure for r in rows if "not run (--only options)" in r.reason}
    assert skipped == {"A1", "A2", "A3", "A4", "A5", "F1", "F2", "F3", "F4", "F5", "F6", "N1",
                       "N2", "N3", "N4", "D1", "D2"}  # every claim is reported


def test_li_wang_runs_the_named_gammas_and_seeds(tmp_path):
    claims = tmp_path / "async.json"
    async_linear.main(["--horizon", "120", "--only", "li-wang", "--li-gammas", "2,inf",
                       "--li-seeds", "2", "--claims", str(claims), "--out", str(tmp_path)])  # fmt: skip
    _, rows = C.read_claims(claims)
    by = {}
    for r in rows:
        by.setdefault(r.figure, []).append(r)
    assert all(len(r.ours) == 2 for r in by["A2"])  # gamma 2 and inf, in that order
    assert by["A2"][1].ours[0] > 0 == by["A2"][1].ours[1] and "2 seeds" in by["A2"][0].claim
    assert all("gamma 1 not run (--li-gammas)" in r.reason for r in by["A3"])
    assert [r.verdict for r in by["A1"]] == ["reproduced"] * 2  # A1 runs its own record


@pytest.mark.parametrize("flag, value, expected", [
    ("--li-gammas", "3", "subset of 1,2,5,8,inf"), ("--li-gammas", "x", "subset of 1,2,5,8,inf"),
    ("--li-seeds", "0", "an int >= 1"),
])  # fmt: skip
def test_li_wang_flags_are_checked(capsys, flag, value, expected):
    with pytest.raises(SystemExit):
        async_linear.parse([flag, value])
    err = capsys.readouterr().err
    assert flag in err and expected in err and value in err


@pytest.mark.slow
def test_li_wang_s_part_runs_on_jax_and_names_what_stays_on_numpy(tmp_path):
    """``--backend jax``: Async-LinUCB's gammas and Sync-LinUCB's two thresholds run on their JAX
    ports (A2, A4); the recorded structural checks (A1, A3) stay on numpy and still hold, and
    the claims file's meta says which ran where."""
    pytest.importorskip("jax")
    claims = tmp_path / "async.json"
    async_linear.main(["--backend", "jax", "--only", "li-wang", "--horizon", "150", "--claims",
                       str(claims), "--out", str(tmp_path)])  # fmt: skip
    meta, rows = C.read_claims(claims)
    assert meta["backend"] == "jax" and meta["device"].startswith("cpu")
    assert "A1, A3, F5 and F6's recorded runs" in meta["backend_note"]
    got = {(r.figure, r.verdict) for r in rows if r.figure in ("A1", "A3")}
    assert got == {("A1", "reproduced"), ("A3", "reproduced")}
    a2 = [r for r in rows if r.figure == "A2"]
    assert len(a2) == 2 and all(r.verdict in C.VERDICTS for r in a2)
    a4 = next(r for r in rows if r.figure == "A4")
    regret, messages = a4.ours["sync D2 / D3 (R, messages)"][0]
    assert regret > 0 and messages > 0  # Sync-LinUCB ran (on its JAX port)
