"""Claims tables: verdicts computed from numbers on both sides of each tolerance (docs/reproductions.md)."""

import json

import pytest

from fedbandit_env.bench import claims as C


@pytest.mark.parametrize(
    "check, expected",
    [
        (C.relative_close(1.09, 1.0, 0.1), "reproduced"),
        (C.relative_close(1.11, 1.0, 0.1), "not reproduced"),
        (C.absolute_close(2.2, 2.0, 0.25), "reproduced"),
        (C.absolute_close(2.3, 2.0, 0.25), "not reproduced"),
        (C.ratios_close([0.52, 0.21], [0.5, 0.2], 0.1), "reproduced"),
        (C.ratios_close([0.64, 0.29], [0.5, 0.2], 0.1), "not reproduced"),
        (C.within(3.0, 2.0, 4.0), "reproduced"),
        (C.within(4.5, 2.0, 4.0), "not reproduced"),
        (C.at_least(2.0, 2.0), "reproduced"),
        (C.at_least(1.9, 2.0), "not reproduced"),
        (C.at_most(2.0, 2.0), "reproduced"),
        (C.at_most(2.1, 2.0), "not reproduced"),
        (C.monotone([1, 2, 3], increasing=True), "reproduced"),
        (C.monotone([1, 3, 2], increasing=True), "not reproduced"),
        (C.monotone([3, 2, 1], increasing=False), "reproduced"),
        (C.monotone([1.0, 1.05], increasing=True, min_step=0.1), "not reproduced"),
        (C.lower_than(1.0, 2.0, se=0.1, z=3), "reproduced"),
        (C.lower_than(1.0, 1.2, se=0.1, z=3), "not reproduced"),
        (C.ordered([(1.0, 2.0, 0.1), (2.0, 3.0, 0.1)]), "reproduced"),
        (C.ordered([(1.0, 2.0, 0.1), (3.5, 3.0, 0.2)], z=2), "not reproduced"),  # 2.5 se
        (C.ordered([(1.0, 2.0, 0.1), (3.3, 3.0, 0.2)], z=2), "not testable"),  # 1.5 se
        (C.ordered([(1.0, 1.0, 0.0)]), "not reproduced"),  # a tie without noise
        (C.ordered([(1.0, 2.0, float("nan"))]), "not testable"),
        (C.relative_close(float("nan"), 1.0, 0.1), "not testable"),
        (C.not_testable("no data"), "not testable"),
    ],
)
def test_check_verdicts(check, expected):
    assert check.verdict == expected
    assert check.tolerance


def test_claim_rows_roundtrip_and_render(tmp_path):
    rows = [
        C.claim(
            paper="gossip",
            figure="Fig. 2(a)",
            text="ratio",
            check=C.ratios_close([0.6], [0.5], 0.1),
            ours=[0.6],
            paper_value=[0.5],
            scale={"T": 10},
        ),
        C.claim(
            paper="gossip",
            figure="Sec. 5.2",
            text="bias",
            check=C.at_least(2, 1),
            ours=2,
            scale={"T": 10},
            source="spec",
            provenance="mem",
        ),
    ]
    assert rows[0].verdict == "not reproduced" and rows[0].reason
    path = tmp_path / "gossip-ci.json"
    C.write_claims(path, rows, meta={"title": "Gossip paper", "scale_name": "CI"})
    meta, back = C.read_claims(path)
    assert back == rows and meta["title"] == "Gossip paper" and "version" in meta
    table = C.to_markdown(back)
    assert "not reproduced" in table and "(unverified)" in table
    page = C.render_page([path])
    assert "| Gossip paper | CI |" in page and "1 reproduced, 1 not reproduced" in page
    json.loads(path.read_text())


def test_page_and_summary_name_the_backend_of_a_jax_claims_file(tmp_path):
    row = C.claim(paper="P", figure="Fig. 1", text="c", check=C.at_least(2, 1), ours=2, scale={})
    rows = [row]
    numpy_file, jax_file = tmp_path / "p-ci.json", tmp_path / "p-ci_jax.json"
    C.write_claims(numpy_file, rows, meta={"title": "P", "scale_name": "CI"})
    C.write_claims(jax_file, rows, meta={"title": "P", "scale_name": "CI", "backend": "jax"})
    assert C.summary_lines([numpy_file, jax_file]) == [
        "- P (CI scale): 1 reproduced, 0 not reproduced, 0 not testable",
        "- P (CI scale, JAX backend): 1 reproduced, 0 not reproduced, 0 not testable",
    ]
    page = C.render_page([numpy_file, jax_file])
    assert "| P | CI |" in page and "| P | CI, JAX backend |" in page
    assert "## P (CI)\n" in page and "## P (CI, JAX backend)\n" in page


def test_the_page_states_the_scale_checked_against_the_papers(tmp_path):
    def row(T, runs):
        return C.claim(paper="P", figure="Fig. 1", text=f"c{T}", check=C.at_least(2, 1), ours=2,
                       scale={"T": T, "runs": runs})  # fmt: skip

    ci, paper = tmp_path / "p-ci.json", tmp_path / "p-paper_jax.json"
    C.write_claims(ci, [row(100, 3), row(2000, 2)], meta={"title": "P", "scale_name": "CI"})
    C.write_claims(paper, [row(10**5, 100)], meta={"title": "P", "scale_name": "paper",
                   "backend": "jax", "device": "gpu: NVIDIA H200"})  # fmt: skip
    page = C.render_page([ci, paper], paper_scales={"p": "T = 10^5, 100 runs"})
    assert "## Scale: checked at, against the paper's" in page
    assert "| P | CI | T up to 2,000, up to 3 runs, numpy | T = 10^5, 100 runs |" in page
    assert ("| P | paper, JAX backend | T up to 10^5, up to 100 runs, jax on gpu: NVIDIA H200 | "
            "T = 10^5, 100 runs |") in page  # fmt: skip
    assert "Scale: checked" not in C.render_page([ci])  # without the papers' scales: no table


def test_claim_validation():
    with pytest.raises(ValueError, match="source"):
        C.Claim("p", "f", "c", "hearsay", None, 1, {}, "reproduced", "t")
    with pytest.raises(ValueError, match="needs a reason"):
        C.Claim("p", "f", "c", "paper", None, 1, {}, "not testable", "t")


def _page_script():
    """benchmarks/make_claims_page.py (a development script, not in the package)."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "make_claims_page.py"
    spec = importlib.util.spec_from_file_location("make_claims_page", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_readme_summary_matches_the_shipped_claims_files():
    """README's reproductions summary is what benchmarks/make_claims_page.py writes from
    docs/claims/."""
    from pathlib import Path

    script = _page_script()
    CLAIMS_DIR, README = script.CLAIMS_DIR, script.README
    files = script.claims_files(CLAIMS_DIR)
    assert files, "docs/claims/ has no claims file"
    text = README.read_text()
    assert C.replace_summary(text, C.summary_lines(files)) == text
    page = Path(CLAIMS_DIR.parent / "reproductions.md").read_text()
    intro = CLAIMS_DIR / "intro.md"
    scales = script.paper_scales(CLAIMS_DIR)
    assert scales, "docs/claims/paper-scales.tsv states the papers' scales"
    assert page == C.render_page(
        files, intro=intro.read_text() if intro.exists() else "", paper_scales=scales
    )


def test_replace_summary_needs_the_markers():
    with pytest.raises(ValueError, match="summary block"):
        C.replace_summary("no markers", ["- x"])
    text = f"a\n{C.SUMMARY_START}\nold\n{C.SUMMARY_END}\nb"
    assert C.replace_summary(text, ["- new"]) == f"a\n{C.SUMMARY_START}\n- new\n{C.SUMMARY_END}\nb"


@pytest.mark.parametrize(
    "check, expected",
    [
        (C.ordered_steps([1.0, 2.0, 3.0], [0.3, 0.3], increasing=True, z=3), "reproduced"),
        (C.ordered_steps([1.0, 2.0, 2.5], [0.3, 0.3], increasing=True, z=3), "not reproduced"),
        (C.ordered_steps([3.0, 2.0, 1.0], [0.3, 0.3], increasing=False, z=3), "reproduced"),
        (C.ordered_steps([3.0, 2.0, 1.0], [0.3, 0.3], increasing=True, z=3), "not reproduced"),
        (C.ordered_steps([1.0, 2.0], [0.3, 0.3], increasing=True, z=3), "not testable"),
        (C.z_close(10.5, 10.0, se=0.2, z=3), "reproduced"),
        (C.z_close(10.7, 10.0, se=0.2, z=3), "not reproduced"),
        (C.z_close(9.3, 10.0, se=0.2, z=3), "not reproduced"),
        (C.z_close(float("nan"), 10.0, se=0.2, z=3), "not testable"),
    ],
)
def test_step_and_z_checks(check, expected):
    assert check.verdict == expected
    assert "se" in check.tolerance


@pytest.mark.parametrize(
    "check, expected",
    [
        (C.all_z_close([10.0, 20.5], [10.2, 20.0], [0.1, 0.2], z=3), "reproduced"),
        (C.all_z_close([10.0, 20.7], [10.2, 20.0], [0.1, 0.2], z=3), "not reproduced"),
        (C.all_z_close([10.0], [10.2, 20.0], [0.1, 0.2], z=3), "not testable"),
        (C.all_z_close([], [], [], z=3), "not testable"),
    ],
)
def test_all_z_close(check, expected):
    assert check.verdict == expected


def test_mean_se():
    mean, se = C.mean_se([1.0, 2.0, 3.0, 4.0])
    assert mean == 2.5 and se == pytest.approx(1.2909944487 / 2)
    assert C.mean_se([5.0])[0] == 5.0 and C.mean_se([5.0])[1] != C.mean_se([5.0])[1]  # NaN


def test_make_claims_page_writes_only_where_asked(tmp_path):
    """`make_claims_page.py --claims-dir mine --out page.md` writes page.md and nothing else (the
    checkout's README is untouched); `--readme PATH` also refreshes that README's summary."""
    import shutil

    script = _page_script()
    CLAIMS_DIR, README, main = script.CLAIMS_DIR, script.README, script.main

    mine = tmp_path / "mine"
    shutil.copytree(CLAIMS_DIR, mine)
    (mine / "gossip-ci.json").unlink()
    readme_before = README.read_bytes()
    before = sorted(p.name for p in tmp_path.rglob("*"))
    main(["--claims-dir", str(mine), "--out", str(tmp_path / "page.md")])
    assert README.read_bytes() == readme_before
    assert sorted(p.name for p in tmp_path.rglob("*")) == sorted([*before, "page.md"])
    readme = tmp_path / "README.md"
    readme.write_text(f"intro\n{C.SUMMARY_START}\nold\n{C.SUMMARY_END}\n")
    main(["--claims-dir", str(mine), "--out", str(tmp_path / "page.md"), "--readme", str(readme)])
    summary = readme.read_text().split(C.SUMMARY_START)[1].split(C.SUMMARY_END)[0]
    assert summary.strip().count("\n") + 1 == len(list(mine.glob("*.json")))
    assert "old" not in readme.read_text() and README.read_bytes() == readme_before


def test_the_user_cli_has_no_page_command(capsys):
    """The page generator is a development script: `fedbandit reproduce page` is unknown."""
    from fedbandit_env.bench.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["reproduce", "page"])
    assert exc.value.code == 2 and "unknown figure 'page'" in capsys.readouterr().err
