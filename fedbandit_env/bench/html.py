"""Static HTML leaderboard: the ranked tables, regret-vs-t plots with bands, and a
regret-vs-communication scatter with one panel per environment (matplotlib PNGs next to
``index.html``). Every label is escaped for its output: HTML text and attributes, matplotlib text
(:func:`mpl_text`). matplotlib is optional (extra ``plots``); without it :func:`write_html` raises a
:class:`ConfigError` naming the extra."""

from __future__ import annotations

import html
from collections import defaultdict
from pathlib import Path

import numpy as np

from fedbandit_env.bench.leaderboard import (
    Entry,
    display_label,
    env_title,
    format_audit,
    format_epsilon,
    format_paired,
    paired_header,
)
from fedbandit_env.errors import ConfigError

STYLE = """
body { font-family: sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; margin: 1em 0; }
th, td { border: 1px solid #bbb; padding: 4px 10px; text-align: right; }
th { background: #e8eef7; } td.name { text-align: left; }
img { max-width: 900px; display: block; margin: 1em 0; }
td.audit-exceeds { color: #fff; background: #c0392b; font-weight: bold; }
"""


def pyplot():
    """matplotlib's pyplot on the Agg backend, or a clear error naming the extra."""
    try:
        import matplotlib
    except ImportError:
        raise ConfigError(
            "leaderboard --html: the plots need matplotlib, which is not installed; "
            "pip install 'fedbandit[plots]' (in a checkout: pip install -e '.[plots]')"
        ) from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def mpl_text(text: str) -> str:
    """``text`` shown literally by matplotlib: a ``$`` is escaped (two of them would start
    mathtext, which mangles the label or fails to parse), and a leading underscore, which hides
    a legend entry, is preceded by a space."""
    text = " ".join(str(text).split()).replace("$", r"\$")
    return " " + text if text.startswith("_") else text


def _plot_curves(entries: list[Entry], path: Path, title: str) -> None:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for e in sorted(entries, key=lambda x: x.rank):
        mean = e.curves.mean(axis=0)
        lo, hi = np.percentile(e.curves, [2.5, 97.5], axis=0)
        ax.plot(e.steps, mean, label=display_label(e, entries, mpl_text))
        ax.fill_between(e.steps, lo, hi, alpha=0.2)
    ax.set(xscale="log", xlabel="step t", ylabel="regret per agent", title=mpl_text(title))
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def scatter_figure(entries: list[Entry]):
    """Regret vs messages: one panel per environment configuration (regrets of different
    environments are not comparable), two panels per row."""
    plt = pyplot()
    by_env: dict[str, list[Entry]] = defaultdict(list)
    for e in entries:
        by_env[e.env_key].append(e)
    cols = min(2, len(by_env))
    rows = -(-len(by_env) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(6 * cols, 4.5 * rows), squeeze=False)
    for ax, (env_key, env_entries) in zip(axes.flat, by_env.items(), strict=False):
        x = np.array([e.messages + 1 for e in env_entries])
        y = np.array([e.mean for e in env_entries])
        ax.scatter(x, y)
        for e, xi, yi in zip(env_entries, x, y, strict=True):
            ax.annotate(display_label(e, env_entries, mpl_text), (xi, yi), fontsize=6)
        ax.set(xscale="log", xlabel="messages sent per run (+1)", ylabel="final regret / agent")
        ax.set_title(mpl_text(env_title(env_key)), fontsize=8)
    for ax in axes.flat[len(by_env) :]:
        ax.remove()
    fig.suptitle("Regret vs communication")
    fig.tight_layout()
    return fig


def _plot_scatter(entries: list[Entry], path: Path) -> None:
    fig = scatter_figure(entries)
    fig.savefig(path, dpi=100)
    pyplot().close(fig)


def _audit_cell(e: Entry) -> str:
    """The audited-epsilon cell; red (class ``audit-exceeds``) when the audit refutes the
    learner's claim."""
    text = html.escape(format_audit(e.audit, markdown=False))
    if e.audit is not None and e.audit.exceeds:
        return f"<td class='audit-exceeds'>{text}</td>"
    return f"<td>{text}</td>"


def _table(entries: list[Entry]) -> str:
    head = (
        "<tr><th>rank</th><th>learner</th><th>runs</th><th>final regret / agent</th>"
        f"<th>95% CI</th><th>vs {html.escape(entries[0].baseline)}</th><th>messages</th>"
        "<th>floats</th><th>privacy ε</th>"
        f"<th>{html.escape(paired_header(entries[0].baseline))}</th>"
    )
    audited = any(e.audit is not None for e in entries)
    head += "<th>audited ε (95%)</th></tr>" if audited else "</tr>"
    body = []
    for e in sorted(entries, key=lambda x: x.rank):
        norm = "—" if e.normalized is None else f"{e.normalized:.2f}"
        eps = format_epsilon(e.epsilon)
        name = display_label(e, entries, html.escape)
        body.append(
            f"<tr class='entry'><td>{e.rank}</td><td class='name'>{name}</td>"
            f"<td>{e.runs}</td><td>{e.mean:.1f}</td><td>[{e.ci_low:.1f}, {e.ci_high:.1f}]</td>"
            f"<td>{norm}</td><td>{e.messages:,.0f}</td><td>{e.floats:,.0f}</td><td>{eps}</td>"
            f"<td>{html.escape(format_paired(e))}</td>"
            + (_audit_cell(e) if audited else "")
            + "</tr>"
        )
    return f"<table>{head}{''.join(body)}</table>"


def write_html(entries: list[Entry], out_dir: Path, title: str) -> Path:
    """Write ``index.html`` and its PNGs into ``out_dir``; returns the page's path."""
    pyplot()  # fail before writing anything if matplotlib is missing
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    by_env: dict[str, list[Entry]] = defaultdict(list)
    for e in entries:
        by_env[e.env_key].append(e)
    sections = []
    for k, (env_key, env_entries) in enumerate(by_env.items()):
        name = env_title(env_key)
        png = f"regret_{k}.png"
        _plot_curves(env_entries, out_dir / png, name)
        sections.append(
            f"<h2>{html.escape(name)}</h2>{_table(env_entries)}"
            f"<img src='{png}' alt='regret vs t: {html.escape(name)}'>"
        )
    _plot_scatter(entries, out_dir / "scatter.png")
    pareto = pareto_section(entries, out_dir)
    page = (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}"
        f"</title><style>{STYLE}</style></head><body><h1>{html.escape(title)}</h1>"
        + "".join(sections)
        + "<h2>Regret vs communication</h2><img src='scatter.png' alt='scatter'>"
        + pareto
        + "</body></html>"
    )
    path = out_dir / "index.html"
    path.write_text(page)
    return path


# --- Pareto fronts (docs/bench.md, "Paired comparisons") ---------------------------------------


def pareto_front(x, y) -> np.ndarray:
    """Which points are on the Pareto front when both coordinates are to be minimized: a point
    is left out when another is no larger in both and smaller in one (equal points are all
    kept). ``x`` may hold ``inf`` (e.g. a non-private learner's epsilon)."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    le = (x[None, :] <= x[:, None]) & (y[None, :] <= y[:, None])
    lt = (x[None, :] < x[:, None]) | (y[None, :] < y[:, None])
    return ~(le & lt).any(axis=1)


PARETO_AXES = {
    "messages": ("messages sent per run (+1)", "Regret vs messages: Pareto front"),
    "epsilon": ("declared privacy ε (∞: not private)", "Regret vs declared ε: Pareto front"),
}


def pareto_points(entries: list[Entry], axis: str) -> tuple[list[Entry], np.ndarray]:
    """The entries that have an ``axis`` coordinate and that coordinate: messages + 1, or the
    declared epsilon (learners that declare nothing are left out; ``inf`` for not private)."""
    if axis == "messages":
        return entries, np.array([e.messages + 1 for e in entries], dtype=np.float64)
    kept = [e for e in entries if e.epsilon is not None]
    return kept, np.array([e.epsilon for e in kept], dtype=np.float64)


def pareto_figure(entries: list[Entry], axis: str):
    """Final regret vs ``axis`` (``"messages"`` or ``"epsilon"``), one panel per environment
    configuration, the Pareto front (lower regret and fewer messages / smaller epsilon) drawn
    as a step line and its learners labelled; every label is escaped for matplotlib."""
    plt = pyplot()
    xlabel, title = PARETO_AXES[axis]
    by_env: dict[str, list[Entry]] = defaultdict(list)
    for e in entries:
        by_env[e.env_key].append(e)
    cols = min(2, len(by_env))
    rows = -(-len(by_env) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(6 * cols, 4.5 * rows), squeeze=False)
    for ax, (env_key, env_entries) in zip(axes.flat, by_env.items(), strict=False):
        ax.set_title(mpl_text(env_title(env_key)), fontsize=8)
        points, x = pareto_points(env_entries, axis)
        if not points:
            ax.text(0.5, 0.5, "no learner declares ε", ha="center", transform=ax.transAxes)
            continue
        y = np.array([e.mean for e in points])
        finite = x[np.isfinite(x)]
        top = (finite.max() if finite.size else 1.0) * 10  # where "∞" is drawn
        shown = np.where(np.isfinite(x), x, top)
        front = pareto_front(x, y)
        ax.scatter(shown[~front], y[~front], color="#999999", label="dominated")
        ax.scatter(shown[front], y[front], color="#c0392b", label="Pareto front")
        order = np.argsort(shown[front], kind="stable")
        ax.step(shown[front][order], y[front][order], where="post", color="#c0392b", lw=1)
        for e, xi, yi, on in zip(points, shown, y, front, strict=True):
            if on:
                ax.annotate(display_label(e, env_entries, mpl_text), (xi, yi), fontsize=6)
        if not np.isfinite(x).all():
            ax.axvline(top, color="#cccccc", lw=0.5)
            ax.annotate("ε = ∞", (top, y.max()), fontsize=7, ha="right")
        ax.set(xscale="log", xlabel=xlabel, ylabel="final regret / agent")
        ax.legend(fontsize=6)
    for ax in axes.flat[len(by_env) :]:
        ax.remove()
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def pareto_section(entries: list[Entry], out_dir: Path) -> str:
    """Write ``pareto_messages.png`` and ``pareto_epsilon.png``; returns their HTML."""
    parts = []
    for axis in PARETO_AXES:
        png = f"pareto_{axis}.png"
        fig = pareto_figure(entries, axis)
        fig.savefig(out_dir / png, dpi=100)
        pyplot().close(fig)
        title = PARETO_AXES[axis][1]
        parts.append(f"<h2>{html.escape(title)}</h2><img src='{png}' alt='{html.escape(title)}'>")
    return "".join(parts)
