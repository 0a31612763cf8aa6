"""Leaderboard figures (docs/bench.md, "Figures"): regret curves, regret-vs-communication and
regret-vs-epsilon trade-offs with the Pareto front, paper exports and layout checks.

Every function takes a plain list of :class:`~fedbandit_env.bench.leaderboard.Entry` and returns
a matplotlib figure; :func:`save` writes it as PNG, PDF and SVG with reproducible bytes (no dates,
a fixed SVG hash salt). A learner's colour, line style and marker come from :func:`style_of`: a
deterministic function of its label (its position in the sorted agent registry, or a hash of the
label for suite labels), so a learner looks the same in every panel and on every page. The line
style tells the kind of learner: reference agents (package ``agents``) solid, baselines (package
``baselines``) dashed, oracles (``centralized_*``) dotted, anything else (library and plug-in
learners) dash-dot; the baseline of a table is drawn in black.
"""

from __future__ import annotations

import hashlib
import math
import textwrap
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from fedbandit_env.bench.leaderboard import Entry, display_label, env_title, is_oracle
from fedbandit_env.bench.plotting import mpl_text as _mpl
from fedbandit_env.bench.plotting import pyplot

# 60 colours: tab20 without its greys (grey means "not private"), then Dark2, then Set1 without
# its yellow and grey and three darker ones; black is the baseline's.
_TAB20 = [
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#bcbd22",
    "#17becf", "#aec7e8", "#ffbb78", "#98df8a", "#ff9896", "#c5b0d5", "#c49c94", "#f7b6d2",
    "#dbdb8d", "#9edae5",
]  # fmt: skip
_DARK2 = ["#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e", "#e6ab02", "#a6761d", "#666666"]
_SET1 = [
    "#e41a1c", "#377eb8", "#4daf4a", "#984ea3", "#ff7f00", "#a65628", "#f781bf", "#6a3d9a",
    "#b15928", "#01665e",
]  # fmt: skip
# 24 more for pages with many labels (suite labels beside every registered id): tab20b and
# tab20c without their greys and lightest shades
_MORE = [
    "#393b79", "#5254a3", "#6b6ecf", "#637939", "#8ca252", "#b5cf6b", "#8c6d31", "#bd9e39",
    "#e7ba52", "#843c39", "#ad494a", "#d6616b", "#7b4173", "#a55194", "#ce6dbd", "#3182bd",
    "#6baed6", "#e6550d", "#fd8d3c", "#31a354", "#74c476", "#756bb1", "#9e9ac8", "#de9ed6",
]  # fmt: skip
PALETTE = _TAB20 + _DARK2 + _SET1 + _MORE
BASELINE_COLOUR = "black"
NON_PRIVATE_COLOUR = "#9a9a9a"
KIND_LINESTYLE = {"reference": "-", "baseline": "--", "oracle": ":", "other": "-."}
KIND_MARKER = {"reference": "o", "baseline": "s", "oracle": "D", "other": "^"}
SVG_HASHSALT = "fedbandit"


@dataclass(frozen=True)
class Style:
    colour: str
    linestyle: str
    marker: str
    kind: str


def learner_kind(agent_id: str) -> str:
    """The kind of learner: "oracle" (``centralized_*``), "reference" (a class of package
    ``agents``), "baseline" (package ``baselines``) or "other" (library, plug-in, unknown)."""
    if agent_id.startswith("centralized_"):
        return "oracle"
    from fedbandit_env.agent_registry import lookup_agent

    found = lookup_agent(agent_id)  # a file's id is looked up, never imported
    if found is None:  # not registered here: its kind is unknown
        return "other"
    module = getattr(found, "__module__", "") or ""
    root = module.split(".")[0]
    return {"agents": "reference", "baselines": "baseline"}.get(root, "other")


def _registry() -> list[str]:
    from fedbandit_env.agent_registry import list_agents

    return list_agents()


def style_of(label: str, agent_id: str | None = None, registry: list[str] | None = None) -> Style:
    """The learner's style: colour from its position in the sorted registry (a label that is
    not an agent id is hashed into the palette), line style and marker from its kind."""
    registry = _registry() if registry is None else registry
    kind = learner_kind(agent_id or label)
    return Style(PALETTE[_colour_index(label, registry)], KIND_LINESTYLE[kind],
                 KIND_MARKER[kind], kind)  # fmt: skip


def _colour_index(label: str, registry: list[str]) -> int:
    if label in registry:
        return registry.index(label) % len(PALETTE)
    return int(hashlib.sha256(label.encode()).hexdigest()[:8], 16) % len(PALETTE)


def figure_styles(entries: list[Entry], registry: list[str] | None = None) -> dict[str, Style]:
    """The style of every label of one figure, with distinct colours: registered ids keep their
    registry colour; a label that is not an id (a suite label such as ``gossip_fed_ucb eps=2``)
    takes its hashed colour, or the next colour no other learner of the figure has."""
    registry = _registry() if registry is None else registry
    labels = sorted({e.label for e in entries}, key=lambda x: (x not in registry, x))
    agent_of = {e.label: e.agent_id for e in entries}
    used: set[int] = set()
    out = {}
    for label in labels:
        index = _colour_index(label, registry)
        while index in used and len(used) < len(PALETTE):
            index = (index + 1) % len(PALETTE)
        used.add(index)
        kind = learner_kind(agent_of[label] or label)
        out[label] = Style(PALETTE[index], KIND_LINESTYLE[kind], KIND_MARKER[kind], kind)
    return out


STYLE_KEY = "— reference agent   -- baseline   ·· oracle   -· other (library, plug-in, yours)"
"""The legend title that explains the line styles (every kind of :data:`KIND_LINESTYLE`)."""


@dataclass(frozen=True)
class CurveChoice:
    """Which learners of a table get a regret curve: ``agents`` (ids or labels) if given, else
    the ``top`` best by rank if given, else all; the baseline and highlighted learners always."""

    agents: tuple[str, ...] = ()
    top: int | None = None

    def pick(self, entries: list[Entry]) -> list[Entry]:
        def always(e: Entry) -> bool:
            return e.label == e.baseline or e.highlight

        if self.agents:
            return [e for e in entries if always(e) or e.label in self.agents
                    or e.agent_id in self.agents]  # fmt: skip
        if self.top is not None:
            best = {id(e) for e in sorted(entries, key=lambda x: x.rank)[: self.top]}
            return [e for e in entries if always(e) or id(e) in best]
        return list(entries)


def wrapped_title(text: str, width: int = 70) -> str:
    """The full title, wrapped at commas and spaces (never cut)."""
    return "\n".join(textwrap.wrap(_mpl(text), width=width, break_long_words=False)) or " "


def by_environment(entries: list[Entry]) -> dict[str, list[Entry]]:
    out: dict[str, list[Entry]] = defaultdict(list)
    for e in entries:
        out[e.env_key].append(e)
    return dict(out)


# --------------------------------------------------------------------------- regret curves
def regret_figure(
    entries: list[Entry],
    title: str | None = None,
    log_time: bool = False,
    curves: CurveChoice | None = None,
):
    """Regret vs t of one environment's entries: mean curve and a light 2.5–97.5 % band per
    learner (``curves`` chooses which learners), the legend outside the axes (right) with the
    line-style key, the full title wrapped; time axis linear unless ``log_time``. Highlighted
    learners are drawn thick, on top, marked ★ in the legend."""
    plt = pyplot()
    styles = figure_styles(entries)
    shown = (curves or CurveChoice()).pick(entries)
    n = len(shown)
    ncol = 1 if n <= 16 else 2
    fig, ax = plt.subplots(figsize=(6.8 + 2.2 * ncol, 4.8), layout="constrained")
    for e in sorted(shown, key=lambda x: x.rank):
        st = styles[e.label]
        is_base = e.label == e.baseline
        colour = BASELINE_COLOUR if is_base else st.colour
        mean = e.curves.mean(axis=0)
        label = display_label(e, entries, _mpl) + (" (baseline)" if is_base else "")
        label = ("★ " if e.highlight else "") + label
        width = 2.8 if e.highlight else 2.0 if is_base else 1.4
        ax.plot(
            e.steps, mean, color=colour, linestyle=st.linestyle, lw=width,
            label=label, zorder=4 if e.highlight else 3 if is_base else 2,
        )  # fmt: skip
        if e.curves.shape[0] > 1:
            lo, hi = np.percentile(e.curves, [2.5, 97.5], axis=0)
            ax.fill_between(e.steps, lo, hi, color=colour, alpha=0.1, lw=0)
    ax.set_xscale("log" if log_time else "linear")
    ax.set(xlabel="step t" + (" (log scale)" if log_time else ""), ylabel="regret per agent")
    ax.grid(alpha=0.3)
    title = env_title(entries[0].env_key) if title is None else title
    ax.set_title(wrapped_title(title), fontsize=9)
    ax.legend(
        loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7, ncol=ncol, frameon=False,
        title=STYLE_KEY + (f"\n{len(entries) - n} more learners in the table"
                           if n < len(entries) else ""), title_fontsize=6,
    )  # fmt: skip
    return fig


# --------------------------------------------------------------------------- trade-offs
def pareto_front(x, y) -> np.ndarray:
    """Which points are on the Pareto front when both coordinates are to be minimized: a point
    is left out when another is no larger in both and smaller in one (equal points are all
    kept). ``x`` may hold ``inf`` (e.g. a non-private learner's epsilon)."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    le = (x[None, :] <= x[:, None]) & (y[None, :] <= y[:, None])
    lt = (x[None, :] < x[:, None]) | (y[None, :] < y[:, None])
    return ~(le & lt).any(axis=1)


def _front_order(xs: np.ndarray, ys: np.ndarray) -> np.ndarray:
    """Indices of the Pareto-front points ordered by x (then y), for the step line."""
    front = np.flatnonzero(pareto_front(xs, ys))
    return front[np.lexsort((ys[front], xs[front]))]


def _point_label(e: Entry, entries: list[Entry]) -> str:
    """A scatter point's label: ★ when highlighted, ``(oracle)`` for an oracle."""
    text = display_label(e, entries, _mpl) + (" (oracle)" if is_oracle(e.agent_id) else "")
    return ("★ " if e.highlight else "") + text


def _front_of(entries: list[Entry], xs: np.ndarray, ys: np.ndarray) -> np.ndarray:
    """The Pareto front of a panel, oracles left out: a centralized learner is charged no
    messages for what it sees, so it would dominate every honest trade-off."""
    honest = np.array([not is_oracle(e.agent_id) for e in entries], dtype=bool)
    if not honest.any():
        return np.array([], dtype=np.int64)
    index = np.flatnonzero(honest)
    return index[_front_order(xs[honest], ys[honest])]


def _plain(minor: bool = False):
    """Tick labels of a log axis as plain numbers (2, 5, 0.5); minor ticks labelled only at
    2 and 5 times a power of ten, so that they cannot crowd."""
    from matplotlib.ticker import FuncFormatter

    def fmt(v, _pos):
        if minor and round(v / 10 ** math.floor(math.log10(v)), 6) not in (2.0, 5.0):
            return ""
        return f"{v:g}"

    return FuncFormatter(fmt)


def _freeze_layout(fig) -> None:
    """Lay the figure out once (constrained layout), then keep it: labels are placed in pixels
    afterwards, and a later re-layout would move the points under them."""
    fig.canvas.draw()
    fig.set_layout_engine("none")


def _draw_front(ax, fx, fy) -> None:
    """The Pareto front: a red step line through the non-dominated points, each ringed."""
    ax.step(fx, fy, where="post", color="#d62728", lw=1.0, alpha=0.7, zorder=3)
    ax.scatter(fx, fy, s=110, facecolors="none", edgecolors="#d62728", lw=1.0, zorder=3,
               label="Pareto front")  # fmt: skip


def _text_box(text, renderer):
    """The extent of a text or annotation's text alone (an annotation's own extent includes
    its leader line)."""
    from matplotlib.text import Text

    if hasattr(text, "update_positions"):  # an annotation: its text transform follows xyann
        text.update_positions(renderer)
    return Text.get_window_extent(text, renderer)


def _overlap(a, b, pad: float = 1.0) -> bool:
    return not (
        a.x1 + pad <= b.x0 or b.x1 + pad <= a.x0 or a.y1 + pad <= b.y0 or b.y1 + pad <= a.y0
    )


# Label offsets from the point (points), nearest first, right of the point preferred; columns
# beside the point allow labels of points at one x to stack.
_CANDIDATES = sorted(
    ((dx, dy) for dx in (5, -5, 0, 18, -18, 40, -40) for dy in range(-100, 101, 4)),
    key=lambda o: (math.hypot(o[0], o[1]) + (0 if o[0] > 0 else 3), o),
)


def place_labels(ax, xs, ys, labels, fontsize: float = 6.5) -> list:
    """Annotate each point with its label, placed so that labels overlap neither each other
    nor the markers and stay inside the axes: for each point in a fixed order, the first
    candidate offset (nearest first, on columns beside and above the point) whose rendered extent (from
    matplotlib's renderer) is free; a label moved away from its point gets a leader line."""
    from matplotlib.transforms import Bbox

    fig = ax.figure
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    axbox = ax.get_window_extent(renderer)
    pts = ax.transData.transform(np.column_stack([xs, ys]))
    r = 3.5 * fig.dpi / 72  # marker radius in pixels
    taken = [Bbox.from_extents(px - r, py - r, px + r, py + r) for px, py in pts]
    texts = []
    order = sorted(range(len(labels)), key=lambda i: (pts[i][1], pts[i][0], labels[i]))
    for i in order:
        text = ax.annotate(
            labels[i], (xs[i], ys[i]), xytext=(4, 2), textcoords="offset points",
            fontsize=fontsize, zorder=5,
            arrowprops={"arrowstyle": "-", "lw": 0.4, "color": "#777", "shrinkA": 0,
                        "shrinkB": 3},
        )  # fmt: skip
        best, best_cost = None, math.inf
        for off in _CANDIDATES:
            text.set_position(off)
            text.set_ha("left" if off[0] > 0 else "right" if off[0] < 0 else "center")
            box = _text_box(text, renderer)
            inside = (
                box.x0 >= axbox.x0 and box.x1 <= axbox.x1
                and box.y0 >= axbox.y0 and box.y1 <= axbox.y1
            )  # fmt: skip
            cost = sum(_overlap(box, t) for t in taken) + (0 if inside else 100)
            if cost < best_cost:
                best, best_cost = (off, text.get_ha(), box), cost
            if cost == 0:
                break
        off, ha, box = best
        text.set_position(off)
        text.set_ha(ha)
        text.arrow_patch.set_visible(math.hypot(*off) > 12)  # a leader line when moved away
        taken.append(box)
        texts.append(text)
    return texts


def _epsilon_norm(entries: list[Entry]):
    from matplotlib.colors import LogNorm

    finite = [e.epsilon for e in entries if _private(e)]
    lo, hi = (min(finite), max(finite)) if finite else (0.1, 10.0)
    if lo == hi:
        lo, hi = lo / 2, hi * 2
    return LogNorm(vmin=lo, vmax=hi)


def _private(e: Entry) -> bool:
    return e.epsilon is not None and math.isfinite(e.epsilon) and e.epsilon > 0


def _grid(plt, n: int, width: float = 6.2, height: float = 4.6):
    cols = min(2, max(n, 1))
    rows = -(-max(n, 1) // cols)
    fig, axes = plt.subplots(
        rows, cols, figsize=(width * cols + 1.0, height * rows), squeeze=False,
        layout="constrained",
    )  # fmt: skip
    return fig, axes


AXIS_LABELS = {
    "messages": "messages sent per run (+1, log scale)",
    "floats": "floats sent per run (+1, log scale)",
}


def tradeoff_figure(entries: list[Entry], x: str = "messages"):
    """Final regret vs communication (``x``: "messages" or "floats"), one panel per
    environment: markers coloured by declared privacy epsilon (a colour bar; non-private and
    undeclared in grey), shaped by learner kind, the Pareto front (fewest messages for the
    regret) as a step line, non-overlapping labels."""
    plt = pyplot()
    registry = _registry()
    envs = by_environment(entries)
    fig, axes = _grid(plt, len(envs))
    norm = _epsilon_norm(entries)
    cmap = plt.get_cmap("viridis")
    for ax, (env_key, env_entries) in zip(axes.flat, envs.items(), strict=False):
        xs = np.array([getattr(e, x) + 1.0 for e in env_entries])
        ys = np.array([e.mean for e in env_entries])
        colours = [
            cmap(norm(e.epsilon)) if _private(e) else NON_PRIVATE_COLOUR for e in env_entries
        ]
        markers = [style_of(e.label, e.agent_id, registry).marker for e in env_entries]
        ax.scatter(xs, ys, c=colours, s=0, label="_points")  # offsets for tests and limits
        for xi, yi, c, m, e in zip(xs, ys, colours, markers, env_entries, strict=True):
            edge = BASELINE_COLOUR if e.label == e.baseline else "white"
            ax.plot(xi, yi, marker=m, color=c, mec=edge, mew=1.0, ms=7, ls="none", zorder=4)
        front = _front_of(env_entries, xs, ys)
        if front.size:
            fx, fy = xs[front], ys[front]
            _draw_front(ax, fx, fy)
        ax.set_xscale("log")
        ax.margins(x=0.25, y=0.15)
        ax.set(xlabel=AXIS_LABELS[x], ylabel="final regret / agent")
        ax.set_title(wrapped_title(env_title(env_key), width=60), fontsize=8)
        ax.grid(alpha=0.3)
        ax.legend(loc="upper right", fontsize=6, frameon=False)
    for ax in axes.flat[len(envs) :]:
        ax.remove()
    sm = plt.cm.ScalarMappable(norm=norm, cmap=cmap)
    shrink = 0.8 if len(axes) == 1 else 0.45  # one row, or a bar beside several
    bar = fig.colorbar(sm, ax=list(axes.flat[: len(envs)]), shrink=shrink)
    bar.set_label("declared privacy ε (grey: not private / undeclared)", fontsize=7)
    bar.ax.set_label("colorbar")
    bar.ax.yaxis.set_major_formatter(_plain())
    bar.ax.yaxis.set_minor_formatter(_plain(minor=True))
    bar.ax.tick_params(labelsize=7, which="both")
    fig.suptitle(f"Regret vs communication ({x})")
    _freeze_layout(fig)
    for ax, env_entries in zip(axes.flat, envs.values(), strict=False):
        place_labels(
            ax, [getattr(e, x) + 1.0 for e in env_entries], [e.mean for e in env_entries],
            [_point_label(e, env_entries) for e in env_entries],
        )  # fmt: skip
    return fig


def epsilon_figure(entries: list[Entry]):
    """Final regret (with its 95 % CI) vs declared epsilon of the private learners, one panel
    per environment; the Pareto front (smallest epsilon for the regret) as a step line."""
    plt = pyplot()
    styles = figure_styles(entries)
    envs = by_environment(entries)
    fig, axes = _grid(plt, len(envs))
    placements = []
    for ax, (env_key, env_entries) in zip(axes.flat, envs.items(), strict=False):
        ax.set_title(wrapped_title(env_title(env_key), width=60), fontsize=8)
        private = [e for e in env_entries if _private(e)]
        if not private:
            ax.text(0.5, 0.5, "no private learners", ha="center", va="center",
                    transform=ax.transAxes, color="#777")  # fmt: skip
            ax.set_xticks([])
            ax.set_yticks([])
            continue
        xs = np.array([e.epsilon for e in private])
        ys = np.array([e.mean for e in private])
        for e, xi, yi in zip(private, xs, ys, strict=True):
            st = styles[e.label]
            ax.errorbar(
                xi, yi, yerr=[[yi - e.ci_low], [e.ci_high - yi]], fmt=st.marker,
                color=st.colour, ms=6, capsize=2, lw=0.8, zorder=4,
            )  # fmt: skip
        front = _front_of(private, xs, ys)
        if front.size:
            _draw_front(ax, xs[front], ys[front])
        ax.set_xscale("log")
        ax.margins(x=0.3, y=0.15)
        ax.set(xlabel="declared privacy ε (log scale)", ylabel="final regret / agent")
        ax.xaxis.set_major_formatter(_plain())
        ax.xaxis.set_minor_formatter(_plain(minor=True))
        ax.grid(alpha=0.3)
        ax.legend(loc="upper right", fontsize=6, frameon=False)
        placements.append((ax, xs, ys, [_point_label(e, private) for e in private]))
    for ax in axes.flat[len(envs) :]:
        ax.remove()
    fig.suptitle("Regret vs privacy (private learners)")
    _freeze_layout(fig)
    for ax, xs, ys, labels in placements:
        place_labels(ax, xs, ys, labels)
    return fig


# --------------------------------------------------------------------------- export, checks
def save(fig, out_dir: Path, stem: str, formats=("png", "pdf", "svg"), dpi: int = 100) -> list:
    """Write ``fig`` as ``stem.<fmt>`` for each format, with no dates or tool versions in the
    files and a fixed SVG hash salt, so a fixed store gives the same bytes; closes the figure."""
    import matplotlib

    out_dir = Path(out_dir)
    paths = []
    metadata = {
        "png": {"Software": None},
        "pdf": {"CreationDate": None, "ModDate": None, "Producer": None, "Creator": None},
        "svg": {"Date": None, "Creator": None},
    }
    with matplotlib.rc_context({"svg.hashsalt": SVG_HASHSALT}):
        for fmt in formats:
            path = out_dir / f"{stem}.{fmt}"
            fig.savefig(path, dpi=dpi, metadata=metadata.get(fmt))
            paths.append(path)
    pyplot().close(fig)
    return paths


def layout_problems(fig, scatter_labels: bool = True) -> list[str]:
    """What is wrong with the figure's layout, from matplotlib's own renderer: any title, axis
    label, tick label, suptitle or legend that falls outside the figure, and (with
    ``scatter_labels``) any two point labels (annotations) that overlap. Empty when all is
    well."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    figbox = fig.bbox
    problems = []

    def outside(artist, what: str) -> None:
        if artist is None or not artist.get_visible():
            return
        if hasattr(artist, "get_text") and not artist.get_text():
            return
        box = artist.get_window_extent(renderer)
        if box.width == 0 and box.height == 0:
            return
        tol = 1.0
        if (
            box.x0 < figbox.x0 - tol or box.y0 < figbox.y0 - tol
            or box.x1 > figbox.x1 + tol or box.y1 > figbox.y1 + tol
        ):  # fmt: skip
            problems.append(f"{what} outside the figure: {box.bounds} not in {figbox.bounds}")

    outside(fig._suptitle, "suptitle")
    for ax in fig.axes:
        for t in (ax.title, ax._left_title, ax._right_title):
            outside(t, f"title {t.get_text()!r}")
        outside(ax.xaxis.label, f"x label {ax.xaxis.label.get_text()!r}")
        outside(ax.yaxis.label, f"y label {ax.yaxis.label.get_text()!r}")
        for axis in (ax.xaxis, ax.yaxis):
            for tick in axis._update_ticks():  # the ticks that are drawn (inside the view)
                outside(tick.label1, f"tick label {tick.label1.get_text()!r}")
                outside(tick.label2, f"tick label {tick.label2.get_text()!r}")
        outside(ax.get_legend(), "legend")
        notes = [t for t in ax.texts if t.get_text()]
        for t in notes:
            box = _text_box(t, renderer)
            if not figbox.contains(box.x0, box.y0) or not figbox.contains(box.x1, box.y1):
                problems.append(f"label {t.get_text()!r} outside the figure: {box.bounds}")
        if scatter_labels:
            boxes = [(t.get_text(), _text_box(t, renderer)) for t in notes]
            for i in range(len(boxes)):
                for j in range(i + 1, len(boxes)):
                    if _overlap(boxes[i][1], boxes[j][1], pad=0.0):
                        problems.append(f"labels overlap: {boxes[i][0]!r} and {boxes[j][0]!r}")
    return problems
