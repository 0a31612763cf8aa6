"""Leaderboard figures and page (docs/bench.md, "Figures"): stable styles, layout checks from
matplotlib's renderer, deterministic exports, booktabs LaTeX, the page's header, contents, alt
text and sorting script in headless Chromium."""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
import subprocess
from html.parser import HTMLParser

import numpy as np
import pytest

from fedbandit_env import list_agents
from fedbandit_env.bench.leaderboard import Entry, to_latex, to_markdown

pytest.importorskip("matplotlib")

from fedbandit_env.bench import figures  # noqa: E402
from fedbandit_env.bench.html import RunInfo, write_html  # noqa: E402
from fedbandit_env.bench.plotting import pyplot  # noqa: E402

ENV_KEY = json.dumps(
    {
        "env_id": "FedBandit/Heterogeneous-v0",
        "env_kwargs": {
            "horizon": 2000,
            "instance": "gossip",
            "num_agents": 5,
            "num_arms": 5,
            "topology": "ring",
            "a_long_keyword_argument": "with a long value that makes the title wrap",
        },
    }
)
LIN_KEY = json.dumps({"env_id": "FedBandit/LinearContextual-v0", "env_kwargs": {"dim": 5}})

# (label, agent id, mean regret, messages, floats, epsilon): clusters like the quick suite's
# (cdp/ddp/hdp at nearly the same point; the *_shared learners at one message count).
LEARNERS = [
    ("centralized_ucb1", "centralized_ucb1", 44.5, 0, 0, None),
    ("thompson_beta_shared", "thompson_beta_shared", 45.4, 2e4, 2e5, None),
    ("kl_ucb_shared", "kl_ucb_shared", 46.9, 2e4, 2e5, None),
    ("epsilon_greedy_shared", "epsilon_greedy_shared", 89.2, 2e4, 2e5, None),
    ("ucb1_shared", "ucb1_shared", 89.4, 2e4, 2e5, None),
    ("thompson_gaussian_shared", "thompson_gaussian_shared", 90.0, 2e4, 2e5, None),
    ("ddp_mab", "ddp_mab", 185.5, 40, 200, 5.0),
    ("hdp_mab", "hdp_mab", 185.5, 24, 120, 5.0),
    ("cdp_mab", "cdp_mab", 191.6, 20, 100, 5.0),
    ("gossip_ucb", "gossip_ucb", 246.9, 23940, 119700, float("inf")),
    ("dp_dec_ucb", "dp_dec_ucb", 278.2, 2e4, 2e5, 2.0),
    ("thompson_beta", "thompson_beta", 279.4, 0, 0, None),
    ("kl_ucb", "kl_ucb", 289.2, 0, 0, None),
    ("thompson_gaussian", "thompson_gaussian", 303.9, 0, 0, None),
    ("ucb1", "ucb1", 315.8, 0, 0, None),
    ("epsilon_greedy", "epsilon_greedy", 317.3, 0, 0, None),
    ("dp_mw_ucb", "dp_mw_ucb", 341.4, 5166, 25830, 2.0),
    ("gossip_fed_ucb eps=5", "gossip_fed_ucb", 407.8, 23940, 119700, 5.0),
    ("flooding", "flooding", 420.9, 2e4, 1e5, None),
    ("uniform", "uniform", 420.9, 0, 0, None),
]


def _entries() -> list[Entry]:
    rng = np.random.default_rng(0)
    steps = np.unique(np.geomspace(1, 2000, 30).astype(int))
    out = []
    rows = LEARNERS + [
        (a, a, m, msg, msg * 5, eps)
        for a, m, msg, eps in (
            ("linucb", 15.0, 0, None),
            ("fed_lin_ucb", 95.0, 20, 1.0),
            ("fed_lin_ucb_decentralized", 94.0, 40, 1.0),
        )
    ]
    for i, (label, agent, mean, messages, floats, eps) in enumerate(rows):
        key = LIN_KEY if i >= len(LEARNERS) else ENV_KEY
        finals = mean * (1 + 0.05 * rng.standard_normal(4))
        curves = finals[:, None] * np.sqrt(steps / steps[-1])[None, :]
        out.append(
            Entry(
                env_key=key, env_id=json.loads(key)["env_id"], label=label, agent_id=agent,
                runs=4, mean=float(finals.mean()), ci_low=float(finals.min()),
                ci_high=float(finals.max()), normalized=None, messages=float(messages),
                floats=float(floats), epsilon=eps, rank=0,
                baseline="linucb" if key == LIN_KEY else "ucb1", steps=steps, curves=curves,
                results_version=f"fedbandit 0.1.0 / learner {agent} v1",
            )
        )  # fmt: skip
    for key in (ENV_KEY, LIN_KEY):
        table = sorted((e for e in out if e.env_key == key), key=lambda e: e.mean)
        base = next(e for e in table if e.label == table[0].baseline)
        for rank, e in enumerate(table, start=1):
            e.rank, e.normalized = rank, e.mean / base.mean
    return out


@pytest.fixture
def entries() -> list[Entry]:
    return _entries()


def test_every_registered_learner_has_its_own_style_whatever_the_page():
    agents = list_agents()
    styles = {a: figures.style_of(a) for a in agents}
    assert len({s.colour for s in styles.values()}) == len(agents)  # 36 colours
    assert figures.BASELINE_COLOUR not in {s.colour for s in styles.values()}
    # the same learner, the same style, whichever other learners are around
    assert figures.style_of("ucb1", registry=agents) == figures.style_of("ucb1")
    assert figures.style_of("my label", "ucb1") == figures.style_of("my label", "ucb1")
    kinds = {a: s.kind for a, s in styles.items()}
    assert kinds["centralized_ucb1"] == "oracle" and kinds["gossip_ucb"] == "reference"
    assert kinds["ucb1_shared"] == "baseline"
    assert styles["gossip_ucb"].linestyle != styles["ucb1_shared"].linestyle
    assert styles["centralized_ucb1"].linestyle not in {
        styles["gossip_ucb"].linestyle,
        styles["ucb1_shared"].linestyle,
    }


def test_regret_panel_is_linear_in_time_with_its_legend_outside_and_baseline_black(entries):
    plt = pyplot()
    table = [e for e in entries if e.env_key == ENV_KEY]
    fig = figures.regret_figure(table)
    ax = fig.axes[0]
    assert ax.get_xscale() == "linear"
    assert figures.layout_problems(fig) == []
    fig.canvas.draw()
    legend = ax.get_legend().get_window_extent()
    assert legend.x0 >= ax.get_window_extent().x1  # outside the axes, beside them
    title = ax.get_title()
    assert "\n" in title and "makes the title wrap" in title  # wrapped, not cut
    lines = {line.get_label(): line for line in ax.get_lines()}
    assert lines["ucb1 (baseline)"].get_color() == "black"
    styles = [(line.get_color(), line.get_linestyle()) for line in lines.values()]
    assert len(set(styles)) == len(styles) == len(table)
    plt.close(fig)
    fig = figures.regret_figure(table, log_time=True)
    assert fig.axes[0].get_xscale() == "log"
    plt.close(fig)


def test_tradeoff_and_epsilon_figures_have_no_overlap_and_nothing_outside(entries):
    plt = pyplot()
    for fig in (
        figures.tradeoff_figure(entries, "messages"),
        figures.tradeoff_figure(entries, "floats"),
        figures.epsilon_figure(entries),
    ):
        assert figures.layout_problems(fig) == []
        panels = [ax for ax in fig.axes if ax.get_label() != "colorbar"]
        assert len(panels) == 2
        plt.close(fig)
    fig = figures.tradeoff_figure(entries)
    assert any(ax.get_label() == "colorbar" for ax in fig.axes)  # privacy shown as colour
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert sorted(texts) == sorted(  # oracles are marked: they are left out of the front
        label + (" (oracle)" if label.startswith("centralized_") else "") for label, *_ in LEARNERS
    )
    plt.close(fig)


def test_layout_check_sees_overlapping_labels_and_text_outside_the_figure(entries):
    """The check can fail: naive labels at their points (no placement) overprint each other, and
    a title pushed off the figure is reported."""
    plt = pyplot()
    table = [e for e in entries if e.env_key == ENV_KEY]
    fig, ax = plt.subplots()
    ax.set_xscale("log")
    ax.scatter([e.messages + 1 for e in table], [e.mean for e in table])
    for e in table:
        ax.annotate(e.label, (e.messages + 1, e.mean), fontsize=6)
    assert any("labels overlap" in p for p in figures.layout_problems(fig))
    ax.set_title("a title", y=1.5)
    assert any("title 'a title' outside" in p for p in figures.layout_problems(fig))
    plt.close(fig)


def test_pareto_front_keeps_the_non_dominated_points():
    points = [(1, 300), (1, 45), (20, 190), (40, 185), (2e4, 45), (2e4, 40), (5, 50)]
    x, y = zip(*points, strict=True)
    assert np.flatnonzero(figures.pareto_front(x, y)).tolist() == [1, 5]
    x, y = np.array([3, 1, 2, 2.0]), np.array([1, 3, 2, 5.0])
    assert figures._front_order(x, y).tolist() == [1, 2, 0]  # ordered by x for the step line


def test_exports_are_byte_identical_for_the_same_entries(tmp_path):
    for out in ("a", "b"):
        (tmp_path / out).mkdir()
        figures.save(figures.tradeoff_figure(_entries()), tmp_path / out, "scatter")
        figures.save(figures.regret_figure(_entries()[:20]), tmp_path / out, "regret")
    for name in ("scatter", "regret"):
        for fmt in ("svg", "pdf", "png"):
            a = (tmp_path / "a" / f"{name}.{fmt}").read_bytes()
            assert a == (tmp_path / "b" / f"{name}.{fmt}").read_bytes(), (name, fmt)
    svg = (tmp_path / "a" / "scatter.svg").read_text()
    assert "<dc:date>" not in svg


def _cells(line: str) -> list[str]:
    return [c.strip() for c in re.split(r"(?<!\\)[&|]", line.rstrip("\\ |").strip("| "))]


def test_latex_table_is_booktabs_with_markdown_numbers_and_best_in_bold(entries):
    tex = to_latex(entries)
    assert tex.count(r"\toprule") == 2 and r"\hline" not in tex
    md_rows = [
        _cells(line) for line in to_markdown(entries).splitlines() if re.match(r"\| \d+ \|", line)
    ]
    tex_rows = [_cells(line) for line in tex.splitlines() if line[:1].isdigit()]
    assert len(md_rows) == len(tex_rows) == len(entries)
    unbold = re.compile(r"\\textbf\{(.*)\}")
    for md, tx in zip(md_rows, tex_rows, strict=True):
        tx = [unbold.sub(r"\1", c) for c in tx]
        assert tx[0] == md[0] and tx[2:8] == md[2:8], (md, tx)  # rank, runs .. floats
        assert {"$\\infty$": "∞", "--": "—"}.get(tx[8], tx[8]) == md[8]
    first = next(line for line in tex.splitlines() if line.startswith("1 & centralized"))
    best_mean = min(e.mean for e in entries if e.env_key == ENV_KEY)
    assert f"\\textbf{{{best_mean:.1f}}}" in first
    assert r"\textbf{2}" in tex and r"\textbf{5}" not in tex  # smallest declared epsilon
    assert tex.count(r"\textbf{0}") >= 2  # fewest messages (ties all bold)


@pytest.mark.skipif(shutil.which("pdflatex") is None, reason="no TeX engine (pdflatex)")
def test_latex_table_compiles(entries, tmp_path):
    doc = (
        "\\documentclass{article}\\usepackage{booktabs}\\usepackage[margin=1cm,landscape]"
        "{geometry}\\begin{document}\\tiny\n" + to_latex(entries) + "\n\\end{document}\n"
    )
    (tmp_path / "t.tex").write_text(doc)
    subprocess.run(
        ["pdflatex", "-interaction=nonstopmode", "-halt-on-error", "t.tex"],
        cwd=tmp_path, check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    assert (tmp_path / "t.pdf").stat().st_size > 0


class _Page(HTMLParser):
    def __init__(self):
        super().__init__()
        self.imgs, self.links, self.ids, self.srcs = [], [], set(), []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "id" in a:
            self.ids.add(a["id"])
        if tag == "img":
            self.imgs.append(a)
        if tag == "a":
            self.links.append(a["href"])
        if "src" in a:
            self.srcs.append(a["src"])


@pytest.mark.slow
def test_page_has_header_contents_alt_text_and_needs_no_network(entries, tmp_path):
    info = RunInfo(suite="quick", seeds=tuple(range(10)), date="2026-11-25 04:00 UTC")
    page = write_html(entries, tmp_path / "html", "board", info=info)
    text = page.read_text()
    for fact in ("quick", "0–9 (10)", "fedbandit 0.2.0", "2026-11-25 04:00 UTC", "92 runs"):
        assert fact in text, fact
    assert "learner ucb1 v1" in text  # results versions listed
    parser = _Page()
    parser.feed(text)
    assert len(parser.imgs) == 5 and all(len(img.get("alt", "")) > 20 for img in parser.imgs)
    anchors = [link[1:] for link in parser.links if link.startswith("#")]
    assert len(anchors) == 3 and set(anchors) <= parser.ids  # one per environment + trade-offs
    for link in parser.links + parser.srcs:  # every reference is a local file or an anchor
        assert "://" not in link and not link.startswith("//"), link
        if not link.startswith("#"):
            assert (page.parent / link).exists(), link


SORT_PROBE = """<script>
window.addEventListener("load", () => {
  const table = document.querySelector("table.board");
  const heads = [...table.tHead.rows[0].cells];
  const col = (name) => heads.findIndex((h) => h.textContent.startsWith(name));
  const column = (i) => [...table.tBodies[0].rows].map((r) => r.cells[i].textContent);
  const out = {};
  heads[col("learner")].click();
  out.learner_asc = column(col("learner"));
  heads[col("messages")].click();
  out.messages_asc = column(col("messages"));
  heads[col("messages")].click();
  out.messages_desc = column(col("messages"));
  heads[col("privacy")].click();
  out.eps_asc = column(col("privacy"));
  const pre = document.createElement("pre");
  pre.id = "sorted";
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
</script>"""


@pytest.mark.slow
def test_sorting_script_sorts_the_table_in_headless_chromium(entries, tmp_path):
    from tests.test_leaderboard import _chromium, _chromium_run

    browser = _chromium()
    if browser is None:
        pytest.skip("chromium is not installed")
    page = write_html(entries, tmp_path / "html", "board")
    probe = page.with_name("sort.html")
    probe.write_text(page.read_text().replace("</body>", SORT_PROBE + "</body>"))
    dom = _chromium_run(browser, tmp_path / "profile", "--dump-dom", probe.as_uri(), text=True)
    raw = dom.stdout.split('<pre id="sorted">')[1].split("</pre>")[0]
    out = json.loads(raw.replace("&quot;", '"').replace("&amp;", "&"))
    assert out["learner_asc"] == sorted(out["learner_asc"], key=str.lower)
    numbers = [float(v.replace(",", "")) for v in out["messages_asc"]]
    assert numbers == sorted(numbers) and numbers[0] < numbers[-1]
    desc = [float(v.replace(",", "")) for v in out["messages_desc"]]
    assert desc == sorted(numbers, reverse=True)
    eps = out["eps_asc"]  # numbers ascending, then ∞ and — last
    finite = [float(v) for v in eps if v not in ("∞", "—")]
    assert finite == sorted(finite) and eps[: len(finite)] == [f"{v:g}" for v in finite]
    assert set(eps[len(finite) :]) == {"∞", "—"}


def test_cli_latex_flag_and_html_exports(tmp_path, capsys):
    from fedbandit_env.bench.cli import main
    from fedbandit_env.bench.executors import run_suite
    from fedbandit_env.bench.store import ResultsStore
    from tests.test_leaderboard import small_suite

    store_path = tmp_path / "r.sqlite"
    run_suite(small_suite(horizon=100, runs=2), ResultsStore(store_path), quiet=True)
    main(["leaderboard", "--store", str(store_path), "--format", "latex"])
    by_format = capsys.readouterr().out
    main(["leaderboard", "--store", str(store_path), "--latex"])
    assert capsys.readouterr().out == by_format and r"\toprule" in by_format
    out = tmp_path / "html"
    main(["leaderboard", "--store", str(store_path), "--html", str(out), "--log-time"])
    assert "HTML:" in capsys.readouterr().out
    for stem in ("regret_0", "scatter", "scatter_floats", "epsilon"):
        for fmt in ("png", "pdf", "svg"):
            assert (out / f"{stem}.{fmt}").stat().st_size > 0, (stem, fmt)
    assert (out / "leaderboard.tex").read_text() + "\n" == by_format  # print adds the newline
    page = (out / "index.html").read_text()
    assert "log time axis" in page and "0–1 (2)" in page  # seeds 0 and 1


def test_every_registered_learner_and_every_label_of_a_figure_gets_its_own_colour():
    """Registered ids have distinct colours everywhere; within one figure every label (suite
    labels such as 'gossip_fed_ucb eps=2' included) has a colour no other label has; the
    line-style key names every kind."""
    from fedbandit_env.agent_registry import list_agents
    from fedbandit_env.bench.figures import (
        KIND_LINESTYLE,
        PALETTE,
        STYLE_KEY,
        figure_styles,
        style_of,
    )

    ids = list_agents()
    assert len(ids) <= len(PALETTE)
    colours = [style_of(a, a, ids).colour for a in ids]
    assert len(set(colours)) == len(ids)
    labels = [*ids, "gossip_fed_ucb eps=2", "gossip_fed_ucb eps=5", "fed_lin_ucb non-private",
              "dp_dec_ucb eps=1.5", "mymod:MyUCB"]  # fmt: skip
    template = _entries()[0]
    entries = [dataclasses.replace(template, label=label, agent_id=label.split(" ")[0])
               for label in labels]  # fmt: skip
    styles = figure_styles(entries, ids)
    assert len({s.colour for s in styles.values()}) == len(labels)
    assert styles["fed1_ucb"].colour != styles["gossip_fed_ucb eps=2"].colour
    assert styles["mymod:MyUCB"].linestyle == KIND_LINESTYLE["other"] == "-."
    assert all(mark in STYLE_KEY for mark in ("reference", "baseline", "oracle", "other", "-·"))
