"""Benchmark records and the generated speed page (docs/bench.md, "Speed"): every benchmark script
writes a machine-stamped JSON record (benchmarks/record.py), benchmarks/render_speed_page.py renders
records into docs/speed.md, and the version-history table of docs/bench.md is the data of
fedbandit_env.bench.versions.HISTORY."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks"
sys.path.insert(0, str(BENCH))

import record  # noqa: E402
import render_speed_page  # noqa: E402

from fedbandit_env.bench.versions import HISTORY, history_markdown  # noqa: E402

PRINTED = """\
FedBandit/Homogeneous-v0, ring, B=100, N=10, M=10, 1000 steps, best of 3

| learner | agent-steps/s | ratio | act share |
|---|---|---|---|
| ucb1 | 6,553,773 | 0.79 | 81% |
| kl_ucb | 279,210 | 0.93 | 98% |

vector / dict = 36.1x
"""


def test_printed_tables_become_rows_with_numbers_and_the_output_keeps_its_order():
    tables, output = record.parse_output(PRINTED)
    assert len(tables) == 1
    table = tables[0]
    assert table["columns"] == ["learner", "agent-steps/s", "ratio", "act share"]
    assert table["rows"][0] == {
        "learner": "ucb1",
        "agent-steps/s": 6553773,
        "ratio": 0.79,
        "act share": "81%",
    }
    assert table["cells"][1] == ["kl_ucb", "279,210", "0.93", "98%"]
    assert table["title"].startswith("FedBandit/Homogeneous-v0")
    assert output == [
        {"text": "FedBandit/Homogeneous-v0, ring, B=100, N=10, M=10, 1000 steps, best of 3"},
        {"table": 0},
        {"text": "vector / dict = 36.1x"},
    ]


@pytest.mark.parametrize(
    ("cell", "value"),
    [("12", 12), ("1,234,567", 1234567), ("0.5", 0.5), ("-3.25", -3.25), ("1e-05", 1e-05)],
)
def test_number_cells(cell, value):
    assert record.cell_value(cell) == value


@pytest.mark.parametrize("cell", ["81%", "14.9 s", "IDENTICAL", "0 of 10", "1.2.3", ""])
def test_other_cells_stay_text(cell):
    assert record.cell_value(cell) == cell


SCRIPT = """\
import argparse, sys
sys.path.insert(0, {bench!r})
import record

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=10)
parser.add_argument("--fail", action="store_true")
record.add_json_option(parser)
args = parser.parse_args()
record.start(__file__, args)
print("| n | ms per step |")
print("|---|---|")
print(f"| {{args.steps}} | 1.50 |")
record.figure("ratio", 0.75)
record.row("extra", {{"what": "a", "s": 2}})
if args.fail:
    raise RuntimeError("boom")
"""


def run_script(tmp_path: Path, *argv: str) -> subprocess.CompletedProcess:
    script = tmp_path / "bench_tiny.py"
    script.write_text(SCRIPT.format(bench=str(BENCH)))
    return subprocess.run(
        [sys.executable, str(script), *argv], capture_output=True, text=True, timeout=60
    )


def test_a_script_prints_as_before_and_writes_a_stamped_record(tmp_path):
    out = tmp_path / "rec.json"
    done = run_script(tmp_path, "--steps", "7", "--json", str(out))
    assert done.returncode == 0, done.stderr
    assert done.stdout == "| n | ms per step |\n|---|---|\n| 7 | 1.50 |\n"
    data = record.load(out)
    assert data["script"] == "bench_tiny.py"
    assert data["arguments"] == {"steps": 7, "fail": False}
    assert "--steps 7" in data["command"]
    for key in ("started_utc", "finished_utc", "wall_s", "load_average_start"):
        assert key in data
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", data["started_utc"])
    machine = data["machine"]
    for key in ("hostname", "cpu_model", "cpu_count", "python", "numpy"):
        assert machine[key]
    assert data["code"]["package_version"]
    assert data["tables"][0]["rows"] == [{"n": 7, "ms per step": 1.5}]
    assert data["tables"][1] == {
        "title": "extra",
        "columns": ["what", "s"],
        "rows": [{"what": "a", "s": 2}],
    }
    assert data["figures"] == {"ratio": 0.75}


def test_a_script_that_fails_writes_no_record(tmp_path):
    out = tmp_path / "rec.json"
    done = run_script(tmp_path, "--fail", "--json", str(out))
    assert done.returncode == 1 and "boom" in done.stderr
    assert not out.exists()


def test_every_benchmark_script_records_its_figures():
    scripts = sorted(BENCH.glob("bench_*.py")) + [
        BENCH / name for name in ("fuzz_constructors.py", "probe_files.py", "train_ppo.py")
    ]
    missing = [
        p.name
        for p in scripts
        if "record.add_json_option(" not in p.read_text() or "record.start(" not in p.read_text()
    ]
    assert missing == []


def synthetic(script: str, figures: dict, started: str = "2026-01-02T03:04:05Z") -> dict:
    return {
        "format": record.FORMAT,
        "script": script,
        "command": f"python benchmarks/{script} --steps 50",
        "arguments": {"steps": 50},
        "started_utc": started,
        "finished_utc": started,
        "wall_s": 12.5,
        "load_average_start": [0.5, 0.4, 0.3],
        "load_average_end": [0.6, 0.4, 0.3],
        "machine": {
            "hostname": "box",
            "cpu_model": "Example CPU 3000",
            "cpu_count": 8,
            "cpus_available": 2,
            "platform": "Linux",
            "python": "3.11.7",
            "numpy": "2.4.6",
            "threads": {"OMP_NUM_THREADS": "1"},
        },
        "code": {"package_version": "9.9.9", "git_commit": "abcdef1234567890", "git_dirty": False},
        "tables": [
            {
                "title": "setting line",
                "columns": ["learner", "ratio"],
                "rows": [{"learner": "ucb1", "ratio": 0.8}],
                "cells": [["ucb1", "0.80"]],
            },
            {"title": "extra", "columns": ["what", "s"], "rows": [{"what": "a", "s": 2}]},
        ],
        "figures": figures,
        "output": [{"text": "setting line"}, {"table": 0}, {"text": "done"}],
    }


def test_the_page_says_it_is_generated_from_which_files_and_stamps_each_record(tmp_path):
    learners = tmp_path / "bench_learners.json"
    learners.write_text(json.dumps(synthetic("bench_learners.py", {"ucb1 / numpy loop": 0.8})))
    scale = tmp_path / "bench_scale.json"
    figures = {
        "complete / ring per step (aggregating max)": 12.0,
        "ring N=5000 build + reset s": 0.06,
    }
    scale.write_text(json.dumps(synthetic("bench_scale.py", figures, "2026-01-03T00:00:00Z")))
    page = render_speed_page.render([learners, scale])
    assert page.startswith("# Speed measurements\n")
    assert "This page is generated: do not edit it by hand" in page
    assert "python benchmarks/render_speed_page.py" in page
    assert str(learners) in page and str(scale) in page
    assert "## bench_learners.py" in page and "## bench_scale.py" in page
    assert "Command: `python benchmarks/bench_learners.py --steps 50`" in page
    stamp = (
        "Measured: 2026-01-02 03:04:05 UTC; host `box`; Example CPU 3000, 8 CPUs (2 available); "
        "load average 0.50 at start; OMP_NUM_THREADS=1; Python 3.11.7, numpy 2.4.6; "
        "fedbandit 9.9.9, commit abcdef123456; 12.5 s in all."
    )
    assert stamp in page
    # the printed table as printed, the text around it, the table and figures only recorded
    assert "| learner | ratio |\n|---|---|\n| ucb1 | 0.80 |" in page
    assert "```text\nsetting line\n```" in page and "```text\ndone\n```" in page
    assert "| what | s |\n|---|---|\n| a | 2 |" in page
    assert "| ucb1 / numpy loop | 0.8 |" in page
    floors = {line.split(" | ")[0][2:]: line for line in page.splitlines() if " | " in line}
    assert "| 0.8 | yes |" in floors["ucb1 at least 0.5x a tight numpy loop of itself"]
    complete = floors["complete-graph flooding at N = 1000 at most 10x the ring, per step"]
    assert "| 12 | **no** |" in complete
    assert "| 0.06 | yes |" in floors["a ring of 5000 agents builds and resets in under 3 s"]
    vector = floors["the vector view at least 20x the ParallelEnv dict loop"]
    assert "| — | not measured |" in vector


def test_the_page_without_records_has_no_figure_and_says_which_command_fills_it():
    page = render_speed_page.render([])
    assert "of which there were none: no figure on this page" in page
    assert page.count("not measured") == len(render_speed_page.FLOORS)


def test_the_renderer_refuses_a_file_that_is_not_a_record(tmp_path):
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"format": "something else"}))
    with pytest.raises(ValueError, match="not a benchmark record"):
        render_speed_page.render([other])


def test_the_committed_speed_page_is_generated():
    text = (ROOT / "docs" / "speed.md").read_text()
    assert text.startswith("# Speed measurements\n\nThis page is generated: do not edit it by hand")


def test_the_version_history_table_of_bench_md_is_the_history_data():
    text = (ROOT / "docs" / "bench.md").read_text()
    match = re.search(
        r"<!-- version-history:[^>]*-->\n(.*?)\n<!-- /version-history -->", text, re.S
    )
    assert match, "docs/bench.md: no version-history block"
    assert match.group(1) == history_markdown()
    assert all(len(row) == 3 and all(isinstance(x, str) and x for x in row) for row in HISTORY)


def test_a_script_run_by_a_test_without_json_writes_no_record(tmp_path):
    done = run_script(tmp_path)  # PYTEST_CURRENT_TEST is set for the child too
    assert done.returncode == 0, done.stderr
    assert "record:" not in done.stderr
    assert not (BENCH / "results" / "bench_tiny.json").exists()


def test_every_learner_and_environment_is_at_the_version_its_history_names():
    """A bump without its history row (or a row without its bump) fails here."""
    import fedbandit_env
    from fedbandit_env.agent_registry import class_version
    from fedbandit_env.registration import list_envs, spec

    latest: dict[str, int] = {}
    for what, version, _why in HISTORY:
        for ident in re.findall(r"`([^`]+)`", what):
            if version.isdigit():
                latest.setdefault(ident, int(version))
    stale = []
    for agent_id in fedbandit_env.list_agents():
        found = class_version(agent_id)
        if found is not None and found[0] != latest.get(agent_id, 1):
            stale.append(f"{agent_id}: class v{found[0]}, history v{latest.get(agent_id, 1)}")
    for env_id in list_envs():
        if spec(env_id).version != latest.get(env_id, 1):
            stale.append(f"{env_id}: registered v{spec(env_id).version}")
    assert stale == [], "add a row to HISTORY (fedbandit_env/bench/versions.py): " + "; ".join(
        stale
    )


def test_a_min_floor_is_the_lowest_matching_figure(tmp_path):
    figures = {"ucb1 JAX / numpy B=1000 (cpu)": 1.1, "linucb JAX / numpy B=1000 (cpu)": 0.7,
               "ucb1 JAX / numpy B=100 (cpu)": 0.2, "device": "cpu: cpu"}  # fmt: skip
    assert render_speed_page.figure_value(figures, "min: * JAX / numpy B=1000 (cpu)") == 0.7
    assert render_speed_page.figure_value(figures, "min: * (gpu)") is None
    assert render_speed_page.figure_value(figures, "ucb1 JAX / numpy B=100 (cpu)") == 0.2
    path = tmp_path / "bench_jax.json"
    path.write_text(json.dumps(synthetic("bench_jax.py", figures)))
    page = render_speed_page.render([path])
    row = next(line for line in page.splitlines() if line.startswith("| every JAX port"))
    assert "| 0.7 | **no** |" in row
