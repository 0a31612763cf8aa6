"""Docs that hold: every table's legend, no machine paths in the claims, docs/speed.md only from
committed records, the per-agent example refuses what it cannot run on, the stranded-arm
explanation, the claims files' age, and a README that claims only what a record shows."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from fedbandit_env import __version__
from fedbandit_env.agent_registry import _AGENTS
from fedbandit_env.bench.claims import render_page, summary_lines
from fedbandit_env.bench.executors import run_suite
from fedbandit_env.bench.leaderboard import build, legend, to_latex, to_markdown
from fedbandit_env.bench.store import ResultsStore
from fedbandit_env.bench.suites import Cell, Suite
from fedbandit_env.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "tests"))

import render_speed_page  # noqa: E402
from test_docs_examples import example  # noqa: E402


@pytest.fixture(scope="module")
def entries():
    cells = (Cell("FedBandit/Homogeneous-v0", a, 30, 2, {"num_agents": 3, "num_arms": 3})
             for a in ("ucb1", "ucb1_shared"))  # fmt: skip
    store = ResultsStore(":memory:")
    run_suite(Suite("t", tuple(cells)), store, quiet=True)
    return build(store.rows())


def test_every_table_has_its_legend(entries, tmp_path):
    text = legend("ucb1")
    for words in ("per run, summed over agents", "vs ucb1: the ratio", "∞: explicitly not "
                  "private, unbounded privacy loss", "—: no privacy claim"):  # fmt: skip
        assert words in text
    assert to_markdown(entries).count("messages and floats: per run, summed over agents") == 1
    latex = to_latex(entries)
    assert r"\footnotesize final regret / agent" in latex and r"$\infty$" in latex
    pytest.importorskip("matplotlib")
    from fedbandit_env.bench.html import write_html

    page = write_html(entries, tmp_path / "p", "t").read_text()
    assert "<p class='legend'>" in page and "summed over agents" in page


def test_no_machine_temp_paths_in_the_claims_or_their_page():
    from fedbandit_env.reproductions.harness import command

    assert command("linear", ["--claims", "c.json", "--out", "/tmp/x", "--out=/tmp/y"]) == (
        "fedbandit reproduce linear --claims c.json")  # fmt: skip
    for path in [DOCS / "reproductions.md", *sorted((DOCS / "claims").glob("*.json"))]:
        assert not re.search(r"/tmp/|/var/folders/", path.read_text()), path


def test_the_speed_page_renders_only_committed_records(tmp_path):
    tracked = subprocess.run(["git", "ls-files", "benchmarks/results"], cwd=ROOT,
                             capture_output=True, text=True, check=True).stdout.split()  # fmt: skip
    page = (DOCS / "speed.md").read_text()
    named = re.findall(r"`(benchmarks/results/[\w.]+\.json)`", page)
    assert named, "docs/speed.md names no record"
    assert set(named) <= set(tracked), set(named) - set(tracked)
    loose = ROOT / "benchmarks" / "results" / "zz_uncommitted_test_record.json"
    loose.write_text(json.dumps({"script": "x"}))
    try:
        with pytest.raises(SystemExit, match="not committed"):
            render_speed_page.main([str(loose), "--out", str(tmp_path / "speed.md")])
    finally:
        loose.unlink()


def test_the_per_agent_example_refuses_the_linear_family(monkeypatch):
    monkeypatch.setitem(_AGENTS, "plain_ucb1", None)
    namespace: dict = {}
    exec(compile(example("writing-agents.md", "per-agent-example"), "doc", "exec"), namespace)  # noqa: S102
    from fedbandit_env.bench.evaluate import evaluate, incompatibility

    reason = incompatibility("FedBandit/LinearContextual-v0", "plain_ucb1")
    assert reason is not None and "plain_ucb1: agent_0: family: expected" in reason
    with pytest.raises(ConfigError, match="plain_ucb1: agent_0: family"):
        evaluate("FedBandit/LinearContextual-v0", "plain_ucb1", runs=1,
                 env_kwargs={"horizon": 5})  # fmt: skip


def test_the_stranded_arms_are_explained_by_the_vanishing_privacy_term():
    text = (DOCS / "gossip.md").read_text()
    section = text[text.index("## Initial sample") : text.index("## Reproduction")]
    assert "whatever the initial estimate" in section
    assert "far below zero" not in section  # the old, wrong explanation


def test_claims_files_of_another_version_show_their_age():
    files = sorted((DOCS / "claims").glob("*.json"))
    page = render_page(files)
    old = [f for f in files if json.loads(f.read_text())["meta"].get("version") != __version__]
    for f in old:
        version = json.loads(f.read_text())["meta"]["version"]
        assert f"Written by fedbandit {version} on" in page
    lines = summary_lines(files)
    assert sum("written by fedbandit" in line for line in lines) == len(old)
    assert (DOCS / "reproductions.md").read_text().count("Written by fedbandit") == len(old)


def test_the_readme_claims_no_gpu_or_paper_scale_run_without_a_record():
    text = (ROOT / "README.md").read_text()
    claims = [json.loads(f.read_text())["meta"] for f in (DOCS / "claims").glob("*.json")]
    gpu = any("gpu" in str(m.get("device", "")).lower() for m in claims)
    if not gpu:
        assert "at their own scale on one GPU" not in text.replace("\n", " ")
        assert "no gpu record" in text.replace("\n", " ").lower()


def test_the_suite_estimates_are_within_2x_of_the_recorded_runs():
    """`fedbandit suites` estimates quick and robust from the constants of suites.py; the
    committed record of benchmarks/bench_suite_estimates.py measured both suites serially with
    those constants: each estimate within 2x of its run, and the code still gives the
    record's estimate (same constants, same cells)."""
    import record

    from fedbandit_env.bench.suites import estimated_seconds, get_suite

    data = record.load(ROOT / "benchmarks" / "results" / "bench_suite_estimates.json")
    figures = data["figures"]
    for name in ("quick", "robust"):
        measured, estimate = figures[f"{name} measured s"], figures[f"{name} estimate s"]
        assert 0.5 <= estimate / measured <= 2.0, (name, estimate, measured)
        suite = get_suite(name)
        now = estimated_seconds(suite.available(lambda _m: None), len(suite.candidates()))
        assert now == pytest.approx(estimate, rel=0.05), (name, now, estimate)
