"""Paired comparisons with the baseline and Pareto fronts (fedbandit_env.bench.leaderboard,
fedbandit_env.bench.figures, fedbandit_env.bench.html; docs/bench.md "Paired comparisons")."""

from __future__ import annotations

import json

import numpy as np
import pytest

from fedbandit_env.bench.executors import run_suite
from fedbandit_env.bench.leaderboard import build, format_paired, to_latex, to_markdown
from fedbandit_env.bench.store import ResultsStore, Row
from fedbandit_env.bench.suites import Cell, Suite

ENV = "FedBandit/Homogeneous-v0"
SMALL = {"num_agents": 3, "num_arms": 4, "topology": "ring"}
ENV_KEY = json.dumps({"env_id": ENV, "env_kwargs": {"horizon": 100}}, sort_keys=True)


def _rows(label: str, finals, cell_hash: str, seeds=None, messages=0, epsilon=None):
    seeds = range(len(finals)) if seeds is None else seeds
    config = json.dumps({"agent_id": label, "agent_kwargs": {}, "env_id": ENV})
    return [
        Row(
            cell_hash,
            s,
            "t",
            ENV,
            label,
            label,
            ENV_KEY,
            config,
            100,
            float(f),
            float(f) * 3,
            messages,
            0,
            0.0,
            epsilon,
            0.0,
            "[100]",
            json.dumps([float(f)]),
            0.0,
            "v",
        )
        for s, f in zip(seeds, finals, strict=True)
    ]


def _by_label(entries):
    return {e.label: e for e in entries}


def test_a_known_better_learner_is_flagged_and_an_identical_one_is_not():
    noise = np.random.default_rng(1).normal(0, 10, size=20)
    base = 100 + noise
    rows = (
        _rows("ucb1", base, "a" * 16)
        + _rows("better", base - 3 + np.random.default_rng(2).normal(0, 1, 20), "b" * 16)
        + _rows("twin", base, "c" * 16)  # identical to the baseline on every seed
        + _rows("worse", base + 2, "d" * 16)
        + _rows("noisy", base + np.random.default_rng(3).normal(0, 5, 20), "e" * 16)
    )
    entries = _by_label(build(rows, baseline="ucb1"))
    assert entries["better"].paired.verdict == "better"
    assert entries["better"].paired.ci_high < 0 and entries["better"].paired.pairs == 20
    assert entries["worse"].paired.verdict == "worse"
    assert entries["twin"].paired.verdict == ""
    assert (entries["twin"].paired.ci_low, entries["twin"].paired.ci_high) == (0.0, 0.0)
    assert entries["noisy"].paired.verdict == ""  # no systematic difference
    assert entries["ucb1"].paired.verdict == "baseline"
    # the unpaired CIs of "better" and the baseline overlap: only pairing sees the difference
    assert entries["better"].ci_high > entries["ucb1"].ci_low
    again = _by_label(build(rows, baseline="ucb1"))
    assert again["noisy"].paired == entries["noisy"].paired  # seeded: same rows, same CI
    table = to_markdown(list(entries.values()))
    assert " better |" in table and " worse |" in table and "| baseline |" in table
    assert "paired Δ vs ucb1 (95% CI)" in table
    latex = to_latex(list(entries.values()))
    assert r"paired $\Delta$ vs ucb1 (95\% CI)" in latex and "$-$" in latex


def test_only_common_seeds_are_paired():
    rows = _rows("ucb1", [10, 11, 12, 13], "a" * 16) + _rows(
        "other", [5, 6, 7], "b" * 16, seeds=[2, 3, 9]
    )
    entries = _by_label(build(rows, baseline="ucb1"))
    paired = entries["other"].paired
    assert paired.pairs == 2 and paired.diff == pytest.approx(((5 - 12) + (6 - 13)) / 2)
    lonely = _rows("ucb1", [10, 11], "a" * 16) + _rows("x", [5, 6], "b" * 16, seeds=[1, 5])
    assert format_paired(_by_label(build(lonely, baseline="ucb1"))["x"]) == "—"
    assert _by_label(build(rows, baseline="nobody"))["other"].paired is None


def test_real_learners_on_the_same_seeds(tmp_path):
    """ucb1 beats uniform on the same seeds; a copy of ucb1 under another label is not
    flagged."""
    suite = Suite(
        "paired",
        (
            Cell(ENV, "ucb1", 300, 8, SMALL, {}),
            Cell(ENV, "uniform", 300, 8, SMALL, {}),
            Cell(ENV, "ucb1_shared", 300, 8, SMALL, {}),
        ),
    )
    store = ResultsStore(tmp_path / "r.sqlite")
    run_suite(suite, store, quiet=True)
    entries = _by_label(build(store.rows_for(suite.cells), baseline="ucb1"))
    assert entries["uniform"].paired.verdict == "worse"
    assert entries["ucb1_shared"].paired.verdict == "better"
    copy = _by_label(
        build(
            store.rows_for(suite.cells[:1])
            + [
                r.__class__(
                    **{**r.__dict__, "cell_hash": "f" * 16, "label": "copy", "agent_id": "copy"}
                )
                for r in store.rows_for(suite.cells[:1])
            ],
            baseline="ucb1",
        )
    )
    assert copy["copy"].paired.verdict == "" and copy["copy"].paired.diff == 0.0


def test_pareto_front_of_a_hand_made_set():
    from fedbandit_env.bench.figures import pareto_front

    x = [1, 2, 3, 4, 2, 5, 1, np.inf, 3]
    y = [9, 5, 5, 1, 6, 1, 9, 0.5, 4]
    # (1,9) twice: equal points are both kept; (3,5) is dominated by (2,5); (2,6) by (2,5);
    # (5,1) by (4,1); (inf, 0.5) has the lowest regret; (3,4) is not dominated
    assert pareto_front(x, y).tolist() == [True, True, False, True, False, False, True, True, True]
    assert pareto_front([1.0], [1.0]).tolist() == [True]


def _front_points(ax) -> list[tuple[float, float]]:
    """The points ringed as the Pareto front in a panel of :mod:`fedbandit_env.bench.figures`."""
    (ring,) = [c for c in ax.collections if c.get_label() == "Pareto front"]
    return sorted(map(tuple, np.asarray(ring.get_offsets()).tolist()))


def test_the_html_page_has_both_pareto_fronts_with_escaped_labels(tmp_path):
    pytest.importorskip("matplotlib")
    from fedbandit_env.bench.figures import epsilon_figure, pyplot, tradeoff_figure
    from fedbandit_env.bench.html import write_html
    from fedbandit_env.bench.plotting import mpl_text

    rows = (
        _rows("ucb1", [10, 11, 12], "a" * 16, messages=0)
        + _rows("$a$ private", [8, 9, 10], "b" * 16, messages=50, epsilon=1.0)
        + _rows("chatty", [5, 6, 7], "c" * 16, messages=1000, epsilon=float("inf"))
        + _rows("worse", [20, 21, 22], "d" * 16, messages=100, epsilon=2.0)
    )
    entries = build(rows, baseline="ucb1")
    mean = {e.label: e.mean for e in entries}
    page = write_html(entries, tmp_path / "html", "board")
    text = page.read_text()
    for png in ("scatter.png", "epsilon.png"):  # regret vs messages, regret vs declared epsilon
        assert f"src='{png}'" in text and (tmp_path / "html" / png).stat().st_size > 0
    assert "better" in text or "worse" in text
    fig = epsilon_figure(entries)
    ax = fig.axes[0]
    # private learners only; "$a$ private" has both the smaller epsilon and the lower regret
    assert _front_points(ax) == [(1.0, mean["$a$ private"])]
    shown = sorted(t.get_text() for t in ax.texts)
    assert shown == sorted([mpl_text("$a$ private"), "worse"])
    assert mpl_text("$a$ private") == r"\$a\$ private"  # shown literally, not as mathtext
    pyplot().close(fig)
    fig = tradeoff_figure(entries, "messages")
    ax = fig.axes[0]
    front = [(1.0, mean["ucb1"]), (51.0, mean["$a$ private"]), (1001.0, mean["chatty"])]
    assert _front_points(ax) == front  # messages + 1 on the log axis; "worse" is dominated
    shown = sorted(t.get_text() for t in ax.texts)
    assert shown == sorted(["ucb1", mpl_text("$a$ private"), "chatty", "worse"])
    pyplot().close(fig)
