"""Bench and leaderboard: resumable store, identical executors, ranked tables, HTML in Chromium,
the CLI."""

from __future__ import annotations

import json
import math
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from baselines.trivial import UniformRandom
from fedbandit_env import ConfigError, FedBanditError, list_agents
from fedbandit_env.agent_registry import _AGENTS
from fedbandit_env.bench.executors import run_suite
from fedbandit_env.bench.leaderboard import bootstrap_ci, build, to_markdown
from fedbandit_env.bench.store import ResultsStore
from fedbandit_env.bench.suites import SUITES, Cell, Suite, env_family, get_suite

ROOT = Path(__file__).resolve().parents[1]
ENV = "FedBandit/Heterogeneous-v0"
SMALL = {"num_agents": 3, "num_arms": 3, "topology": "complete"}


def small_suite(horizon: int = 300, runs: int = 4) -> Suite:
    cells = tuple(
        Cell(ENV, agent, horizon, runs, SMALL, kwargs, label=label)
        for agent, kwargs, label in (
            ("uniform", {}, "uniform"),
            ("ucb1", {}, "ucb1"),
            ("ucb1_shared", {}, "ucb1_shared"),
            ("gossip_fed_ucb", {"epsilon": 2.0}, "fed eps=2"),
        )
    )
    return Suite("small", cells, baseline="ucb1")


def numbers(store: ResultsStore) -> list[tuple]:
    return sorted(r.numbers for r in store.rows())


def test_rerun_skips_finished_rows_and_rows_are_complete(tmp_path):
    store = ResultsStore(tmp_path / "r.sqlite")
    suite = small_suite()
    assert run_suite(suite, store, chunk=3, quiet=True) == 16
    assert run_suite(suite, store, chunk=3, quiet=True) == 0  # nothing left to do
    rows = store.rows()
    assert len(rows) == 16 and len({(r.cell_hash, r.seed) for r in rows}) == 16
    curve = json.loads(rows[0].curve)
    assert (
        len(curve) == len(json.loads(rows[0].steps)) and curve[-1] == rows[0].final_regret_per_agent
    )


@pytest.mark.slow
def test_sigkill_mid_sweep_then_rerun_equals_an_uninterrupted_sweep(tmp_path):
    script = textwrap.dedent(
        f"""
        import sys
        sys.path.insert(0, {str(ROOT)!r})
        from tests.test_leaderboard import small_suite
        from fedbandit_env.bench.executors import run_suite
        from fedbandit_env.bench.store import ResultsStore
        run_suite(small_suite(horizon=1500, runs=6), ResultsStore(sys.argv[1]), chunk=1, quiet=True)
        """
    )
    (tmp_path / "sweep.py").write_text(script)
    killed = tmp_path / "killed.sqlite"
    proc = subprocess.Popen([sys.executable, str(tmp_path / "sweep.py"), str(killed)])
    deadline = time.time() + 120
    while time.time() < deadline:  # wait until some, not all, rows are in
        time.sleep(0.2)
        if killed.exists():
            try:
                n = ResultsStore(killed).count()
            except Exception:
                continue
            if n >= 3:
                break
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    partial = ResultsStore(killed).count()
    assert 3 <= partial < 24, partial  # killed mid-way
    proc = subprocess.run([sys.executable, str(tmp_path / "sweep.py"), str(killed)], check=True)
    clean = tmp_path / "clean.sqlite"
    subprocess.run([sys.executable, str(tmp_path / "sweep.py"), str(clean)], check=True)
    assert numbers(ResultsStore(killed)) == numbers(ResultsStore(clean))
    assert ResultsStore(killed).count() == 24


def test_serial_and_joblib_give_identical_numbers(tmp_path):
    serial, joblib = ResultsStore(tmp_path / "s.sqlite"), ResultsStore(tmp_path / "j.sqlite")
    run_suite(small_suite(), serial, "serial", chunk=4, quiet=True)
    run_suite(small_suite(), joblib, "joblib", n_jobs=2, chunk=1, quiet=True)
    assert numbers(serial) == numbers(joblib) and len(numbers(serial)) == 16


@pytest.mark.slow
def test_ray_local_gives_identical_numbers(tmp_path):
    ray = pytest.importorskip("ray")
    serial, on_ray = ResultsStore(tmp_path / "s.sqlite"), ResultsStore(tmp_path / "r.sqlite")
    run_suite(small_suite(), serial, "serial", chunk=4, quiet=True)
    try:
        run_suite(small_suite(), on_ray, "ray", n_jobs=2, chunk=2, quiet=True)
    finally:
        ray.shutdown()
    assert numbers(serial) == numbers(on_ray) and len(numbers(on_ray)) == 16


def test_leaderboard_ranks_normalizes_and_bootstraps(tmp_path):
    store = ResultsStore(tmp_path / "r.sqlite")
    run_suite(small_suite(horizon=800, runs=6), store, quiet=True)
    entries = build(store.rows(), baseline="ucb1")
    by_label = {e.label: e for e in entries}
    assert [e.rank for e in sorted(entries, key=lambda e: e.mean)] == [1, 2, 3, 4]
    assert by_label["ucb1"].normalized == pytest.approx(1.0)
    ratio = by_label["uniform"].mean / by_label["ucb1"].mean
    assert by_label["uniform"].normalized == pytest.approx(ratio) and ratio != pytest.approx(1.0)
    for e in entries:
        assert e.ci_low <= e.mean <= e.ci_high
    assert by_label["ucb1_shared"].messages == 3 * 2 * 800 and by_label["uniform"].messages == 0
    assert by_label["fed eps=2"].epsilon == 2.0 and by_label["ucb1"].epsilon is None
    table = to_markdown(entries)
    assert table.index("| 1 |") < table.index("| 4 |") and "vs ucb1 |" in table
    fed_line = next(line for line in table.splitlines() if "| fed eps=2 |" in line)
    ucb_line = next(line for line in table.splitlines() if "| ucb1 |" in line)
    privacy = {line: line.rsplit("|", 3)[1].strip() for line in (fed_line, ucb_line)}
    assert privacy == {fed_line: "2", ucb_line: "—"}


def test_the_epsilon_column_is_the_declared_privacy_guarantee():
    homo = {"num_agents": 3, "num_arms": 3, "topology": "ring"}
    cells = tuple(
        Cell("FedBandit/Homogeneous-v0", agent, 200, 2, homo, kwargs, label=label)
        for agent, kwargs, label in (
            ("epsilon_greedy", {"epsilon": 0.3}, "eg 0.3"),  # an exploration rate
            ("dp_mw_ucb", {}, "dp_mw_ucb default"),  # private at its default epsilon 2
            ("gossip_ucb", {}, "gossip_ucb"),  # declares it is not private
        )
    )
    store = ResultsStore(":memory:")
    run_suite(Suite("eps", cells), store, quiet=True)
    assert {r.label: r.epsilon for r in store.rows()} == {
        "eg 0.3": None,
        "dp_mw_ucb default": 2.0,
        "gossip_ucb": math.inf,
    }
    lines = to_markdown(build(store.rows())).splitlines()
    last = {label: next(x for x in lines if f"| {label} |" in x).rsplit("|", 3)[1].strip()
            for label in ("eg 0.3", "dp_mw_ucb default", "gossip_ucb")}
    assert last == {"eg 0.3": "—", "dp_mw_ucb default": "2", "gossip_ucb": "∞"}


def test_bootstrap_ci_covers_the_mean_at_the_nominal_rate():
    rng = np.random.default_rng(0)
    covered = 0
    for _ in range(200):
        sample = rng.normal(1.0, 1.0, size=30)
        lo, hi = bootstrap_ci(sample, rng)
        covered += lo <= 1.0 <= hi
    assert 0.88 <= covered / 200 <= 0.99


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


# Appended to a copy of the page: after load, records what the browser laid out and decoded.
PROBE = """<script>
window.addEventListener("load", () => {
  const box = (el) => { const r = el.getBoundingClientRect();
    return {x: r.left + scrollX, y: r.top + scrollY, width: r.width, height: r.height}; };
  const probe = document.createElement("pre");
  probe.id = "probe";
  probe.textContent = JSON.stringify({
    dpr: devicePixelRatio,
    tables: [...document.querySelectorAll("table")].map(box),
    images: [...document.images].map((img) => ({src: img.getAttribute("src"),
      complete: img.complete, naturalWidth: img.naturalWidth, ...box(img)})),
  });
  document.body.appendChild(probe);
});
</script>"""


def _chromium_run(browser: str, profile: Path, *args: str, text: bool = False):
    flags = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--hide-scrollbars",
        "--force-device-scale-factor=1",
        "--window-size=1000,1400",
        "--virtual-time-budget=5000",
        f"--user-data-dir={profile}",
    ]
    return subprocess.run(
        [browser, *flags, *args], check=True, capture_output=True, text=text, timeout=120
    )


def test_html_page_renders_in_headless_chromium(tmp_path):
    import matplotlib.image as mpimg

    from fedbandit_env.bench.html import write_html

    browser = _chromium()
    if browser is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is not installed (.ci/run installs it)")
        pytest.skip("chromium is not installed")
    store = ResultsStore(tmp_path / "r.sqlite")
    run_suite(small_suite(), store, quiet=True)
    page = write_html(build(store.rows()), tmp_path / "html", "test leaderboard")
    probe_page = page.with_name("probe.html")
    probe_page.write_text(page.read_text().replace("</body>", PROBE + "</body>"))
    shot = tmp_path / "shot.png"
    _chromium_run(browser, tmp_path / "profile", f"--screenshot={shot}", page.as_uri())
    dom = _chromium_run(
        browser, tmp_path / "profile", "--dump-dom", probe_page.as_uri(), text=True
    ).stdout
    assert dom.count('<tr class="entry"') == 4 and "ucb1_shared" in dom
    probe = json.loads(dom.split('<pre id="probe">')[1].split("</pre>")[0].replace("&quot;", '"'))
    assert probe["dpr"] == 1
    images = {img["src"]: img for img in probe["images"]}
    assert set(images) == {"regret_0.png", "scatter.png", "scatter_floats.png", "epsilon.png"}
    for img in images.values():  # decoded by the browser, not just referenced
        assert img["complete"] and img["naturalWidth"] > 0 and img["height"] > 100, img
    pixels = mpimg.imread(shot)[..., :3]
    assert pixels.shape[:2] == (1400, 1000)

    def region(box):
        y, x = round(box["y"]), round(box["x"])
        assert y + box["height"] <= pixels.shape[0], "region below the screenshot"
        return pixels[y : y + round(box["height"]), x : x + round(box["width"])]

    table = region(probe["tables"][0])
    assert (table.mean(axis=-1) < 0.5).mean() > 0.01  # text and borders drawn
    plot = region(images["regret_0.png"])
    png = mpimg.imread(page.parent / "regret_0.png")[..., :3]
    assert plot.shape == png.shape  # shown at its natural size
    assert plot.std() > 0.05 and (plot.mean(axis=-1) < 0.9).mean() > 0.02  # not blank
    assert np.abs(plot - png).mean() < 0.02  # and it is the plot that was written
    spread = plot.max(axis=-1) - plot.min(axis=-1)
    assert (spread > 0.3).mean() > 0.002, (spread > 0.3).mean()  # coloured curves
    # and their light bands: a band is its curve's colour at a low alpha over white, so a band
    # of a dark colour (a learner's colour is its place in the registry, which grows) differs
    # from grey by a few hundredths only; the curves and their edges alone stay under 1 %
    assert (spread > 0.02).mean() > 0.015, (spread > 0.02).mean()


def test_the_scatter_has_one_panel_per_environment(tmp_path):
    from fedbandit_env.bench.html import scatter_figure

    lin = {"num_agents": 3, "num_arms": 3, "dim": 3}
    cells = small_suite(horizon=100, runs=2).cells + tuple(
        Cell("FedBandit/LinearContextual-v0", a, 100, 2, lin, {}, label=a)
        for a in ("linucb", "flooding", "uniform")
    )
    store = ResultsStore(":memory:")
    run_suite(Suite("mixed", cells), store, quiet=True)
    fig = scatter_figure(build(store.rows()))
    panels = {
        ax.get_title().replace("\n", " "): len(ax.collections[0].get_offsets())
        for ax in fig.axes
        if ax.get_label() != "colorbar"
    }
    assert sorted(panels.values()) == [3, 4] and len(panels) == 2
    assert any(t.startswith("FedBandit/LinearContextual-v0") for t in panels)


@pytest.mark.slow
def test_quick_suite_cli_prints_a_ranked_table(tmp_path):
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "fedbandit_env.bench",
            "suite",
            "quick",
            "--store",
            str(tmp_path / "q.sqlite"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    ).stdout
    assert "| rank | learner |" in out and "| 1 |" in out and "ucb1" in out
    assert out.count("### FedBandit/") == 3 and out.count("| vs linucb |") == 1
    assert "hdp_mab" in out
    skip = next(
        line for line in out.splitlines()
        if line.startswith("suite quick: skipping on FedBandit/Heterogeneous-v0: ")
    )
    skipped = skip.split(": ")[2].split(", ")
    assert {"centralized_linucb", "fed_lin_ucb", "linucb"} <= set(skipped), skipped
    board = subprocess.run(
        [
            sys.executable,
            "-m",
            "fedbandit_env.bench",
            "leaderboard",
            "--store",
            str(tmp_path / "q.sqlite"),
            "--html",
            str(tmp_path / "html"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    ).stdout
    assert "HTML:" in board and (tmp_path / "html" / "index.html").exists()


@pytest.mark.parametrize(
    ("argv", "match"),
    [
        (["suite", "nope"], "suite 'nope' is not defined"),
        (["reproduce", "fig99"], "unknown figure 'fig99'"),
        (["run", ENV, "ucb1", "--env-kwargs", "{bad"], "--env-kwargs: expected a JSON object"),
        (["run", ENV, "no_agent"], "agent id 'no_agent' is not registered"),
        (["leaderboard", "--store", "/nonexistent/dir/x.sqlite"], "x.sqlite does not exist"),
    ],
)
def test_cli_errors_are_clear(argv, match, capsys):
    from fedbandit_env.bench.cli import main

    with pytest.raises((SystemExit, FedBanditError, Exception)) as err:
        main(argv)
    text = capsys.readouterr().err + str(err.value)
    import re

    assert re.search(match, text), text


def test_cli_audit_of_a_mechanism(capsys):
    from fedbandit_env.bench.cli import main

    main(["audit", "laplace", "--epsilon", "1", "--trials", "20000"])
    out = capsys.readouterr().out
    assert "consistent with the claim" in out


def test_leaderboard_on_a_missing_store_errors_and_creates_nothing(tmp_path, capsys):
    from fedbandit_env.bench.cli import main

    path = tmp_path / "missing.sqlite"
    with pytest.raises(SystemExit) as err:
        main(["leaderboard", "--store", str(path)])
    assert err.value.code == 2 and "missing.sqlite does not exist" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


# ------------------------------------------------------------------ suites and the registry
ENTRY_POINTS_NEEDING_A_MODEL = {"baselines.sb3_policy:SB3Policy"}  # a saved model is a kwarg


class OnlyMultiArmed(UniformRandom):
    """A learner registered at runtime: uniform arms; refuses the linear family at reset."""

    agent_id = "test_only_multi_armed"

    def reset(self, facts, rng):
        if facts.family == "linear":
            raise ConfigError(f"{self.agent_id}: family: expected a multi-armed family")
        super().reset(facts, rng)


@pytest.fixture
def runtime_learner(monkeypatch):
    monkeypatch.setitem(_AGENTS, OnlyMultiArmed.agent_id, OnlyMultiArmed)
    return OnlyMultiArmed.agent_id


def _families(cells) -> set[str]:
    return {env_family(c.env_id, c.env_kwargs) for c in cells}


def test_suites_are_well_formed():
    from importlib.metadata import entry_points

    standard = get_suite("standard").available(lambda _m: None)
    assert _families(standard) == {"heterogeneous", "homogeneous", "linear"}
    in_standard = {c.agent_id for c in standard}
    shipped = {
        ep.name
        for ep in entry_points(group="fedbandit.agents")
        if ep.value.split(".")[0] in ("agents", "baselines")
        and ep.value not in ENTRY_POINTS_NEEDING_A_MODEL
    }
    assert len(shipped) >= 24 and "hdp_mab" in shipped
    # the learners that need an event clock (docs/async-linear.md) are in the async suite
    clocked = {"async_lin_ucb", "fed_lin_ucb_async", "sync_lin_ucb"}
    in_async = {c.agent_id for c in get_suite("async").available(lambda _m: None)}
    assert clocked <= shipped and clocked <= in_async, sorted(clocked - in_async)
    assert shipped - clocked <= in_standard, sorted(shipped - clocked - in_standard)
    for family in ("heterogeneous", "homogeneous"):  # every multi-armed learner on each
        ids = {c.agent_id for c in standard if _families([c]) == {family}}
        assert {"ucb1", "gossip_fed_ucb", "dp_dec_ucb", "cdp_mab", "ddp_mab", "hdp_mab"} <= ids
    linear_ids = {c.agent_id for c in standard if _families([c]) == {"linear"}}
    assert {"linucb", "centralized_linucb", "fed_lin_ucb", "fed_lin_ucb_decentralized"} <= (
        linear_ids
    )
    quick = get_suite("quick").available(lambda _m: None)
    assert len({c.config_hash for c in quick}) == len(quick)
    assert _families(quick) == {"heterogeneous", "homogeneous", "linear"}
    assert shipped - clocked <= {c.agent_id for c in quick}
    # one suite per paper, each running that paper's reference agents, none skipped
    for name, reference in {
        "gossip": {"gossip_ucb", "gossip_fed_ucb"},
        "dp_recsys": {"dp_mw_ucb", "dp_dec_ucb"},
        "commeff": {"cdp_mab", "ddp_mab"},
        "linear": {"fed_lin_ucb"},
    }.items():
        suite = get_suite(name)
        notes: list[str] = []
        cells = suite.available(notes.append)
        assert notes == [] and len(cells) == len(suite.cells)
        assert reference <= {c.agent_id for c in cells}, name


def test_a_learner_registered_at_runtime_joins_standard(runtime_learner):
    notes: list[str] = []
    cells = get_suite("standard").available(notes.append)
    mine = [c for c in cells if c.agent_id == runtime_learner]
    assert _families(mine) == {"heterogeneous", "homogeneous"}
    assert all(c.agent_kwargs == {} and c.runs == 20 for c in mine)
    skipped = [n for n in notes if runtime_learner in n]
    assert len(skipped) == 1 and "LinearContextual" in skipped[0]
    assert "family: expected a multi-armed family" in skipped[0]
    assert runtime_learner in {c.agent_id for c in get_suite("quick").available(lambda _m: None)}


def test_runtime_learners_run_in_joblib_workers(runtime_learner, monkeypatch):
    # by class (pickled to the worker) and by import path (imported in the worker)
    monkeypatch.setitem(_AGENTS, "test_by_path", "baselines.trivial:Flooding")
    cells = tuple(
        Cell(ENV, agent, 60, 4, SMALL, {}, label=agent)
        for agent in (runtime_learner, "test_by_path")
    )
    suite = Suite("runtime", cells)
    serial, joblib = ResultsStore(":memory:"), ResultsStore(":memory:")
    run_suite(suite, serial, "serial", chunk=4, quiet=True)
    run_suite(suite, joblib, "joblib", n_jobs=2, chunk=1, quiet=True)
    assert numbers(serial) == numbers(joblib) and len(numbers(joblib)) == 8
    assert {r.messages > 0 for r in joblib.rows()} == {True, False}  # flooding sends


def test_a_cell_shared_by_two_suites_is_on_both_leaderboards(tmp_path, monkeypatch, capsys):
    from fedbandit_env.bench.cli import main
    shared = Cell(ENV, "ucb1", 200, 3, SMALL, {}, label="ucb1")
    first = Suite("first", (shared, Cell(ENV, "uniform", 200, 3, SMALL, {}, label="uniform")))
    second = Suite(
        "second",
        (
            Cell(ENV, "ucb1", 200, 3, SMALL, {}, label="ucb1 (second)"),
            Cell(ENV, "ucb1_shared", 200, 3, SMALL, {}, label="ucb1_shared"),
        ),
    )
    store = ResultsStore(tmp_path / "r.sqlite")
    assert run_suite(first, store, quiet=True) == 6
    assert run_suite(second, store, quiet=True) == 3  # the shared cell is not re-run
    rows = store.rows_for(second.available(lambda _m: None))
    assert sorted({r.label for r in rows}) == ["ucb1 (second)", "ucb1_shared"]
    assert len(rows) == 6
    assert {r.label for r in store.rows_for(first.cells)} == {"ucb1", "uniform"}
    monkeypatch.setitem(SUITES, "second", second)
    main(["leaderboard", "--store", str(tmp_path / "r.sqlite"), "--suite", "second"])
    table = capsys.readouterr().out
    assert "| ucb1 (second) | 3 |" in table and "| ucb1_shared | 3 |" in table
    # a suite with fewer seeds of the same cell gets only its own seeds
    fewer = Suite("fewer", (Cell(ENV, "ucb1", 200, 2, SMALL, {}, label="ucb1"),))
    assert sorted(r.seed for r in store.rows_for(fewer.cells)) == [0, 1]


def test_bootstrap_ci_of_a_cell_does_not_depend_on_the_other_cells(tmp_path):
    store = ResultsStore(tmp_path / "r.sqlite")
    run_suite(small_suite(horizon=200, runs=5), store, quiet=True)
    rows = store.rows()
    alone = build([r for r in rows if r.label == "ucb1"])
    together = [e for e in build(rows) if e.label == "ucb1"]
    assert (alone[0].ci_low, alone[0].ci_high) == (together[0].ci_low, together[0].ci_high)
    assert alone[0].ci_low < alone[0].ci_high
    cis = {seed: [(e.ci_low, e.ci_high) for e in build(rows, seed=seed)] for seed in (0, 1)}
    assert cis[0] != cis[1]  # the seed still matters


def test_baselines_default_per_suite_and_per_family(tmp_path, monkeypatch, capsys):
    from fedbandit_env.bench.cli import main

    lin = {"num_agents": 3, "num_arms": 3, "dim": 3}
    cells = small_suite(horizon=200, runs=2).cells + tuple(
        Cell("FedBandit/LinearContextual-v0", a, 200, 2, lin, {}, label=a)
        for a in ("linucb", "ucb1")
    )
    store_path = tmp_path / "r.sqlite"
    run_suite(Suite("mixed", cells), ResultsStore(store_path), quiet=True)
    entries = build(ResultsStore(store_path).rows())
    by_env = {e.env_id: e.baseline for e in entries}
    assert by_env == {ENV: "ucb1", "FedBandit/LinearContextual-v0": "linucb"}
    linucb = next(e for e in entries if e.label == "linucb")
    assert linucb.normalized == pytest.approx(1.0)
    # the suite's own baseline is the CLI default; --baseline overrides it
    monkeypatch.setitem(SUITES, "mixed", Suite("mixed", cells, baseline="uniform"))
    main(["leaderboard", "--store", str(store_path), "--suite", "mixed"])
    out = capsys.readouterr().out
    assert out.count("| vs uniform |") == 2 and "vs ucb1" not in out
    main(["leaderboard", "--store", str(store_path)])
    out = capsys.readouterr().out
    assert "| vs ucb1 |" in out and "| vs linucb |" in out
    main(["leaderboard", "--store", str(store_path), "--baseline", "ucb1_shared"])
    assert capsys.readouterr().out.count("| vs ucb1_shared |") == 2


# ------------------------------------------------------------------ optional dependencies
@pytest.mark.parametrize(("module", "executor", "extra"), [("joblib", "joblib", "bench"),
                                                            ("ray", "ray", "ray")])
def test_a_missing_executor_dependency_names_the_extra(monkeypatch, module, executor, extra):
    monkeypatch.setitem(sys.modules, module, None)  # import fails as if not installed
    with pytest.raises(ConfigError, match=rf"pip install 'fedbandit\[{extra}\]'"):
        run_suite(small_suite(), ResultsStore(":memory:"), executor, quiet=True)


def test_joblib_older_than_1_4_is_refused(monkeypatch):
    import joblib

    monkeypatch.setattr(joblib, "__version__", "1.3.2")
    with pytest.raises(ConfigError, match=r"joblib >= 1.4, found 1.3.2"):
        run_suite(small_suite(), ResultsStore(":memory:"), "joblib", quiet=True)


def test_the_joblib_pin_allows_only_versions_with_generator_unordered():
    tomllib = pytest.importorskip("tomllib")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pins = [
        req
        for reqs in project["optional-dependencies"].values()
        for req in reqs
        if req.startswith("joblib")
    ]
    assert pins and all(req == "joblib>=1.4" for req in pins), pins


def test_html_without_matplotlib_names_the_extra(tmp_path, monkeypatch, capsys):
    from fedbandit_env.bench.cli import main

    store_path = tmp_path / "r.sqlite"
    run_suite(small_suite(horizon=50, runs=2), ResultsStore(store_path), quiet=True)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(SystemExit) as err:
        main(["leaderboard", "--store", str(store_path), "--html", str(tmp_path / "html")])
    captured = capsys.readouterr()
    assert err.value.code == 2 and "pip install 'fedbandit[plots]'" in captured.err
    assert captured.out == "" and not (tmp_path / "html").exists()


# ------------------------------------------------------------------ CLI success paths
def test_cli_envs_and_agents_list_the_registries(capsys):
    from fedbandit_env import list_envs
    from fedbandit_env.bench.cli import main

    main(["envs"])
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == list_envs()
    main(["agents"])
    assert capsys.readouterr().out.splitlines() == list_agents()


def test_cli_run_prints_the_evaluate_summary(capsys):
    from fedbandit_env.bench import evaluate
    from fedbandit_env.bench.cli import main

    main(["run", ENV, "gossip_fed_ucb", "--runs", "3", "--seed", "4", "--horizon", "120",
          "--env-kwargs", json.dumps(SMALL), "--agent-kwargs", '{"epsilon": 2}'])
    summary = json.loads(capsys.readouterr().out)
    expected = evaluate(ENV, "gossip_fed_ucb", runs=3, seed=4,
                        env_kwargs={**SMALL, "horizon": 120}, agent_kwargs={"epsilon": 2}).summary()
    assert set(summary) == set(expected) and summary["runs"] == 3 and summary["horizon"] == 120
    for key in set(expected) - {"wall_time", "compile_time", "run_time"}:  # timings
        assert summary[key] == expected[key], key
    assert summary["privacy_epsilon"] == 2.0 and summary["messages_mean"] > 0


def test_cli_reproduce_forwards_the_script_arguments(monkeypatch):
    from fedbandit_env.bench import cli
    from fedbandit_env.bench.cli import reproduce

    calls = []
    monkeypatch.setattr(reproduce.subprocess, "call", lambda argv: calls.append(argv) or 7)
    with pytest.raises(SystemExit) as err:
        cli.main(["reproduce", "gossip-fig2", "--rounds", "50", "--runs", "2", "--help"])
    assert err.value.code == 7
    assert calls == [[sys.executable, "-m", "fedbandit_env.reproductions.gossip",
                      "--rounds", "50", "--runs", "2", "--help"]]


def test_cli_suite_shows_a_progress_bar_unless_quiet(tmp_path, monkeypatch, capsys):
    from fedbandit_env.bench.cli import main

    monkeypatch.setitem(SUITES, "small", small_suite(horizon=50, runs=2))
    main(["suite", "small", "--store", str(tmp_path / "a.sqlite"), "--chunk", "1"])
    captured = capsys.readouterr()
    assert "suite small: 100%" in captured.err and "8/8" in captured.err
    assert "8 new rows" in captured.out and "| rank | learner |" in captured.out
    main(["suite", "small", "--store", str(tmp_path / "b.sqlite"), "--quiet"])
    captured = capsys.readouterr()  # --quiet: only the final line
    assert captured.err == "" and captured.out == f"8 new rows in {tmp_path / 'b.sqlite'} (8 in total)\n"
    assert ResultsStore(tmp_path / "b.sqlite").count() == 8


# ------------------------------------------------------------------ privacy audit of learners
def test_audit_of_a_private_learner_is_within_its_declared_claim(capsys):
    from fedbandit_env.bench.audit_agent import audit_agent, declared_claim
    from fedbandit_env.bench.cli import main

    assert declared_claim("dp_mw_ucb", {}) == 2.0
    assert declared_claim("dp_mw_ucb", {"epsilon": 0.5}) == 0.5
    result = audit_agent("dp_mw_ucb", {"epsilon": 0.5}, trials=2000)
    assert 0.0 <= result.epsilon_lower <= 0.5
    main(["audit", "dp_dec_ucb", "--trials", "2000"])
    out = capsys.readouterr().out
    assert "declared epsilon 2, per-release epsilon 1, " in out
    assert "consistent with the claim" in out


def test_audit_of_a_non_private_learner_claims_nothing_and_shows_the_leak(capsys):
    from fedbandit_env.bench.audit_agent import audit_agent, declared_claim
    from fedbandit_env.bench.cli import main

    assert declared_claim("ucb1_shared") is None
    assert declared_claim("epsilon_greedy_shared", {"epsilon": 0.1}) is None
    assert declared_claim("gossip_ucb") == math.inf
    assert audit_agent("ucb1_shared", trials=2000).epsilon_lower > 3.0
    main(["audit", "epsilon_greedy_shared", "--trials", "2000"])
    out = capsys.readouterr().out
    assert out.startswith("epsilon_greedy_shared {}: claims no privacy (not private)")
    assert "claimed epsilon" not in out
    main(["audit", "gossip_fed_ucb", "--kwargs", '{"epsilon": Infinity}', "--trials", "500"])
    out = capsys.readouterr().out
    assert out.startswith("gossip_fed_ucb {'epsilon': inf}: claims no privacy (not private)")
