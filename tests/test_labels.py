"""Learner labels are text, whatever they contain (docs/reliability.md, "Labels"): escaped in
the Markdown and LaTeX tables, the HTML page and matplotlib text, so that ``$``, ``|``, ``<``,
``&`` and friends neither break the output nor are interpreted."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest

from fedbandit_env.bench.executors import run_suite
from fedbandit_env.bench.leaderboard import (
    build,
    escape_latex,
    escape_markdown,
    to_latex,
    to_markdown,
)
from fedbandit_env.bench.store import ResultsStore
from fedbandit_env.bench.suites import Cell, Suite

ENV = "FedBandit/Heterogeneous-v0"
KW = {"num_agents": 3, "num_arms": 3, "topology": "ring"}
LABELS = (
    "cost $5^$ | <b>bold</b> &amp; * [x](y) `code` \\ % # {z} ~ ^",
    "_leading underscore_",
    "ucb1",
)


@pytest.fixture(scope="module")
def entries(tmp_path_factory):
    cells = tuple(
        Cell(ENV, agent, 30, 2, KW, label=label)
        for agent, label in zip(("ucb1_shared", "epsilon_greedy", "ucb1"), LABELS, strict=True)
    )
    store = ResultsStore(tmp_path_factory.mktemp("labels") / "r.sqlite")
    run_suite(Suite("labels", cells), store, quiet=True)
    return build(store.rows(), "ucb1")


def _unescape_markdown(text: str) -> str:
    return re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", text)


def test_markdown_cells_hold_the_label_and_rows_keep_their_columns(entries):
    table = [line for line in to_markdown(entries).splitlines() if line.startswith("|")]
    for line in table:
        assert len(re.findall(r"(?<!\\)\|", line)) == 11, line  # 10 columns
    cells = [re.split(r"(?<!\\)\|", line)[2].strip() for line in table[2:]]
    assert sorted(_unescape_markdown(c) for c in cells) == sorted(LABELS)
    assert escape_markdown("dp_dec_ucb eps=1.5 (star)") == "dp_dec_ucb eps=1.5 (star)"


_LATEX_UNESCAPE = {
    r"\textbackslash{}": "\\",
    r"\textasciitilde{}": "~",
    r"\textasciicircum{}": "^",
    r"\textless{}": "<",
    r"\textgreater{}": ">",
    r"\textbar{}": "|",
}


def _unescape_latex(text: str) -> str:
    pattern = "|".join(re.escape(k) for k in _LATEX_UNESCAPE) + r"|\\([&%$#_{}])"
    return re.sub(pattern, lambda m: m.group(1) or _LATEX_UNESCAPE[m.group()], text)


def test_latex_rows_keep_their_columns_and_hold_the_label_as_text(entries):
    rows = [line for line in to_latex(entries).splitlines() if line[:1].isdigit()]
    labels = []
    for line in rows:
        assert line.endswith(r"\\")
        cols = re.split(r"(?<!\\)&", line)
        assert len(cols) == 10, line
        label = cols[1].strip()
        assert not re.search(r"(?<!\\)[$#%_{}]", label.replace("{}", "")), label
        labels.append(_unescape_latex(label))
    assert sorted(labels) == sorted(LABELS)
    assert escape_latex("50% of a_b") == r"50\% of a\_b"


class _Cells(HTMLParser):
    def __init__(self):
        super().__init__()
        self.names: list[str] = []
        self._in = False

    def handle_starttag(self, tag, attrs):
        self._in = tag == "td" and ("class", "name") in attrs
        if self._in:
            self.names.append("")

    def handle_endtag(self, tag):
        self._in = False

    def handle_data(self, data):
        if self._in:
            self.names[-1] += data


def test_html_page_and_plots_show_every_label_literally(entries, tmp_path):
    pytest.importorskip("matplotlib")
    from fedbandit_env.bench.html import scatter_figure, write_html
    from fedbandit_env.bench.plotting import mpl_text, pyplot

    page = write_html(entries, tmp_path / "html", "board <&> $x$")
    parser = _Cells()
    parser.feed(page.read_text())
    assert sorted(parser.names) == sorted(LABELS)
    assert (tmp_path / "html" / "regret_0.png").stat().st_size > 0
    fig = scatter_figure(entries)
    fig.canvas.draw()
    shown = [t for t in fig.axes[0].texts]
    assert sorted(t._preprocess_math(t.get_text())[0] for t in shown) == sorted(
        mpl_text(label).replace("\\$", "$") for label in LABELS
    )
    assert all(t._preprocess_math(t.get_text())[1] is False for t in shown)  # no mathtext
    pyplot().close(fig)
    assert mpl_text("_leading underscore_") == " _leading underscore_"  # not hidden by legend
