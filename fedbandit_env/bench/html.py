"""Static HTML leaderboard (docs/bench.md, "Figures and the page"): a header saying what was
run, a table of contents, the ranked tables (sortable by a header click, inline script), the
regret-vs-t figure of each environment and the trade-off figures of
:mod:`fedbandit_env.bench.figures` (PNG shown, PDF and SVG linked); no network needed. Every label
is escaped for its output: HTML text and attributes, matplotlib text (:func:`fedbandit_env.bench.plotting.mpl_text`).
matplotlib is optional (extra ``plots``); without it :func:`write_html` raises a
:class:`ConfigError` naming the extra."""

from __future__ import annotations

import html
from dataclasses import dataclass
from pathlib import Path

from fedbandit_env.bench.figures import CurveChoice, by_environment
from fedbandit_env.bench.leaderboard import (
    ROBUST_HEADERS,
    STALENESS_HEADER,
    Entry,
    display_label,
    env_title,
    flag_cell,
    format_audit,
    format_epsilon,
    format_paired,
    is_oracle,
    legend,
    paired_header,
    robust_cells,
    shows_backend,
    shows_flags,
    shows_robust,
    shows_staleness,
    staleness_cell,
)
from fedbandit_env.bench.plotting import pyplot

STYLE = """
body { font-family: sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; margin: 1em 0; }
th, td { border: 1px solid #bbb; padding: 4px 10px; text-align: right; }
th { background: #e8eef7; } td.name { text-align: left; }
img { max-width: 100%; display: block; margin: 1em 0; }
th { cursor: pointer; user-select: none; }
th[data-dir=asc]::after { content: " ▲"; } th[data-dir=desc]::after { content: " ▼"; }
dl.info { display: grid; grid-template-columns: max-content auto; gap: 2px 1em; }
dl.info dt { font-weight: bold; } dl.info dd { margin: 0; }
figure { margin: 1em 0; } figcaption { font-size: 90%; color: #555; }
td.audit-exceeds { color: #fff; background: #c0392b; font-weight: bold; }
td.flagged { color: #fff; background: #c0392b; font-weight: bold; }
p.legend { font-size: 85%; color: #555; max-width: 60em; }
tr.highlight td { background: #fff3c4; font-weight: bold; }
span.tag { font-size: 80%; font-weight: normal; color: #555; border: 1px solid #bbb;
  border-radius: 3px; padding: 0 3px; margin-left: 4px; }
span.tag.yours { color: #7a4d00; border-color: #e0a800; background: #fff8dc; }
"""


def scatter_figure(entries: list[Entry]):
    """Regret vs messages, one panel per environment (:func:`figures.tradeoff_figure`)."""
    from fedbandit_env.bench.figures import tradeoff_figure

    return tradeoff_figure(entries, "messages")


def _audit_cell(e: Entry) -> str:
    """The audited-epsilon cell; red (class ``audit-exceeds``) when the audit refutes the
    learner's claim."""
    text = html.escape(format_audit(e.audit, markdown=False))
    if e.audit is not None and e.audit.exceeds:
        return f"<td class='audit-exceeds'>{text}</td>"
    return f"<td>{text}</td>"


def _table(entries: list[Entry]) -> str:
    backend = shows_backend(entries)
    cols = ["rank", "learner", *(["backend"] if backend else []), "runs",
            "final regret / agent", "95% CI", f"vs {entries[0].baseline}", "messages", "floats",
            "privacy ε", paired_header(entries[0].baseline)]  # fmt: skip
    audited = any(e.audit is not None for e in entries)
    if audited:
        cols.append("audited ε (95%)")
    robust = shows_robust(entries)
    if robust:
        cols.extend(ROBUST_HEADERS)
    stale = shows_staleness(entries)
    if stale:
        cols.append(STALENESS_HEADER)
    flagged = shows_flags(entries)
    if flagged:
        cols.append("flags")
    head = "".join(
        f"<th onclick='sortTable(this)' title='sort by {html.escape(c, quote=True)}'>"
        f"{html.escape(c)}</th>"
        for c in cols
    )
    body = []
    for e in sorted(entries, key=lambda x: x.rank):
        norm = "—" if e.normalized is None else f"{e.normalized:.2f}"
        eps = format_epsilon(e.epsilon)
        name = ("★ " if e.highlight else "") + display_label(e, entries, html.escape) + _tags(e)
        row_class = "entry highlight" if e.highlight else "entry"
        body.append(
            f"<tr class='{row_class}' data-source='{e.source or 'store'}'><td>{e.rank}</td>"
            f"<td class='name'>{name}</td>"
            + (f"<td class='name'>{html.escape(e.backend)}</td>" if backend else "")
            + f"<td>{e.runs}</td><td>{e.mean:.1f}</td><td>[{e.ci_low:.1f}, {e.ci_high:.1f}]</td>"
            f"<td>{norm}</td><td>{e.messages:,.0f}</td><td>{e.floats:,.0f}</td><td>{eps}</td>"
            f"<td>{html.escape(format_paired(e))}</td>"
            + (_audit_cell(e) if audited else "")
            + ("".join(f"<td>{html.escape(c)}</td>" for c in robust_cells(e)) if robust else "")
            + (f"<td>{staleness_cell(e)}</td>" if stale else "")
            + (_flag_cell(e) if flagged else "")
            + "</tr>"
        )
    return (
        f"<table class='board'><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"
        f"<p class='legend'>{html.escape(legend(entries[0].baseline))}</p>"
    )


def _flag_cell(e: Entry) -> str:
    """The flags cell; red (class ``flagged``) when something went wrong in the runs."""
    text = flag_cell(e, markdown=False)
    if text == "—":
        return "<td>—</td>"
    return f"<td class='name flagged'>{html.escape(text)}</td>"


def _tags(e: Entry) -> str:
    """The row's tags: where it came from (yours / reference) and whether it is an oracle."""
    tags = []
    if e.source == "store":
        tags.append("<span class='tag yours'>yours</span>")
    elif e.source == "reference":
        tags.append("<span class='tag'>reference</span>")
    if is_oracle(e.agent_id):
        tags.append("<span class='tag' title='sees every agent at no communication cost; "
                    "left out of the Pareto fronts'>oracle</span>")  # fmt: skip
    return "".join(tags)


# Sorting by a header click: numbers (first number of the cell, "∞" and "—" last) or text;
# a second click on the same header reverses. No network, no library.
SORT_SCRIPT = """
function sortKey(text) {
  const t = text.trim().replace(/\u2212/g, "-");
  if (t === "∞" || t === "—" || t === "") return [1, Infinity, t];
  const m = t.replace(/,/g, "").match(/[-+]?\\d+(\\.\\d+)?(e[-+]?\\d+)?/i);
  return m && /^[\\[≥⚠\\s\\d.,+-]/.test(t) ? [0, parseFloat(m[0]), t] : [0, NaN, t];
}
function sortTable(th) {
  const table = th.closest("table"), body = table.tBodies[0];
  const col = [...th.parentNode.children].indexOf(th);
  const dir = th.dataset.dir === "asc" ? "desc" : "asc";
  [...th.parentNode.children].forEach((h) => delete h.dataset.dir);
  th.dataset.dir = dir;
  const rows = [...body.rows].map((r, i) => [sortKey(r.cells[col].textContent), i, r]);
  rows.sort((a, b) => {
    let c = a[0][0] - b[0][0];
    if (!c) c = (isNaN(a[0][1]) || isNaN(b[0][1])) ? a[0][2].localeCompare(b[0][2])
                                                  : a[0][1] - b[0][1];
    return (dir === "asc" ? c : -c) || a[1] - b[1];
  });
  rows.forEach((r) => body.appendChild(r[2]));
}
"""


@dataclass(frozen=True)
class RunInfo:
    """What the page says was run: the suite (None: every row of the store), the seeds of the
    rows and the date the page was made (UTC, ISO)."""

    suite: str | None = None
    seeds: tuple[int, ...] = ()
    date: str = ""
    sources: tuple[tuple[str, str, int], ...] = ()
    """(kind, what, rows) of each source of rows: ("store", path, n), ("reference", "path
    (fedbandit version)", n)."""


def _seed_text(seeds: tuple[int, ...]) -> str:
    if not seeds:
        return "—"
    s = sorted(set(seeds))
    if s == list(range(s[0], s[-1] + 1)):
        return f"{s[0]}–{s[-1]} ({len(s)})" if len(s) > 1 else str(s[0])
    return ", ".join(map(str, s))


def _header(entries: list[Entry], info: RunInfo) -> str:
    from fedbandit_env import __version__

    versions = sorted({e.results_version for e in entries if e.results_version})
    runs = sum(e.runs for e in entries)
    mine = [e for e in entries if e.source != "reference"]
    ref = [e for e in entries if e.source == "reference"]
    split = ""
    if ref:
        split = (
            f": {sum(e.runs for e in mine):,} runs of {len(mine)} cells yours, "
            f"{sum(e.runs for e in ref):,} runs of {len(ref)} cells from the reference"
        )
    items = [
        ("suite", info.suite or "every row of the store"),
        ("runs", f"{runs:,} runs of {len(entries)} cells on {len(by_environment(entries))} "
                 f"environments{split}"),
        *((f"rows from the {kind}", f"{what}: {n:,} rows") for kind, what, n in info.sources),
        ("seeds", _seed_text(info.seeds)),
        *((("backends", ", ".join(sorted({e.backend for e in entries}))),)
          if shows_backend(entries) else ()),
        ("package", f"fedbandit {__version__}"),
        ("date", info.date or "—"),
    ]  # fmt: skip
    rows = "".join(f"<dt>{html.escape(k)}</dt><dd>{html.escape(v)}</dd>" for k, v in items)
    listed = "".join(f"<li>{html.escape(v)}</li>" for v in versions)
    return (
        f"<dl class='info'>{rows}<dt>results versions</dt><dd><details><summary>"
        f"{len(versions)} versions</summary><ul>{listed}</ul></details></dd></dl>"
    )


def robust_panel(entries: list[Entry]) -> str:
    """The robustness panel (docs/bench.md, "The robust suite"): per clean setting, one table
    per group of learners exposed to the same attacks (ranked within it), each cell the honest
    agents' regret under the attack over the learner's clean regret at each f named in the
    column, and the no-communication reference; empty when no entry is of an attacked
    environment."""
    from fedbandit_env.bench.robust_metrics import f_text, group_caption, robust_matrices

    blocks = []
    for m in robust_matrices(entries):
        tables = []
        for group in m.groups:
            cols = ["rank", "learner", *(f"{a} ({f_text(m.fs)})" for a in group.attacks)]
            head = "".join(
                f"<th onclick='sortTable(this)' title='sort by {html.escape(c, quote=True)}'>"
                f"{html.escape(c)}</th>"
                for c in cols
            )
            body = "".join(
                f"<tr><td>{html.escape(row[0])}</td><td class='name'>{html.escape(row[1])}</td>"
                + "".join(f"<td>{html.escape(c)}</td>" for c in row[2:]) + "</tr>"
                for row in group.rows
            )  # fmt: skip
            tables.append(
                f"<p>{html.escape(group_caption(group, len(m.attacks)))}</p>"
                f"<table class='board robust'><thead><tr>{head}</tr></thead><tbody>{body}"
                "</tbody></table>"
            )
        blocks.append(
            f"<h3>{html.escape(env_title(m.key))}</h3><p>Regret under attack / clean at "
            f"{html.escape(f_text(m.fs))} in each cell (honest agents' mean regret over the same "
            "learner's regret with no adversary, a ratio); learners are ranked only against "
            "learners exposed to the same attacks, most robust first.</p>" + "".join(tables)
        )
    if not blocks:
        return ""
    return (
        "<section id='robustness'><h2>Robustness: regret under attack / clean</h2>"
        + "".join(blocks)
        + "</section>"
    )


def _figure_block(stem: str, alt: str, caption: str) -> str:
    links = " · ".join(f"<a href='{stem}.{fmt}'>{fmt.upper()}</a>" for fmt in ("pdf", "svg"))
    return (
        f"<figure><img src='{stem}.png' alt='{html.escape(alt, quote=True)}'>"
        f"<figcaption>{html.escape(caption)} ({links})</figcaption></figure>"
    )


def write_html(
    entries: list[Entry],
    out_dir: Path,
    title: str,
    info: RunInfo | None = None,
    log_time: bool = False,
    curves: CurveChoice | None = None,
) -> Path:
    """Write ``index.html`` and its figures (PNG shown, PDF and SVG linked) into ``out_dir``;
    returns the page's path. The page needs no network (inline style and script). ``curves``
    chooses which learners get a regret curve (default: all)."""
    from fedbandit_env.bench import figures

    pyplot()  # fail before writing anything if matplotlib is missing
    info = info or RunInfo()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    envs = by_environment(entries)
    sections, toc = [], []
    for k, (env_key, env_entries) in enumerate(envs.items()):
        name = env_title(env_key)
        stem = f"regret_{k}"
        figures.save(
            figures.regret_figure(env_entries, name, log_time=log_time, curves=curves),
            out_dir,
            stem,
        )
        toc.append(f"<li><a href='#env-{k}'>{html.escape(name)}</a></li>")
        scale = "log" if log_time else "linear"
        alt = (
            f"Regret per agent vs step t ({scale} time axis) on {name}: mean curve and 95% "
            f"band of {len(env_entries)} learners; baseline {env_entries[0].baseline} in black"
        )
        sections.append(
            f"<section id='env-{k}'><h2>{html.escape(name)}</h2>{_table(env_entries)}"
            + _figure_block(stem, alt, "Regret vs t")
            + "</section>"
        )
    figures.save(figures.tradeoff_figure(entries, "messages"), out_dir, "scatter")
    figures.save(figures.tradeoff_figure(entries, "floats"), out_dir, "scatter_floats")
    figures.save(figures.epsilon_figure(entries), out_dir, "epsilon")
    robust = robust_panel(entries)
    if robust:
        toc.append("<li><a href='#robustness'>Robustness: regret under attack / clean</a></li>")
    toc.append("<li><a href='#tradeoffs'>Trade-offs: regret vs communication and privacy</a></li>")
    tradeoffs = (
        "<section id='tradeoffs'><h2>Trade-offs</h2>"
        + _figure_block(
            "scatter",
            "Final regret vs messages sent, one panel per environment; marker colour is the "
            "declared privacy epsilon (grey: not private), the red step line is the Pareto front "
            "(oracles, which see every agent for free, are left out of it)",
            "Regret vs messages",
        )
        + _figure_block(
            "scatter_floats",
            "Final regret vs floats sent, one panel per environment, coloured by declared "
            "privacy epsilon, with the Pareto front",
            "Regret vs floats",
        )
        + _figure_block(
            "epsilon",
            "Final regret with 95% CI vs declared privacy epsilon of the private learners, one "
            "panel per environment, with the Pareto front",
            "Regret vs privacy ε",
        )
        + "</section>"
    )
    page = (
        f"<!doctype html><html lang='en'><head><meta charset='utf-8'><title>"
        f"{html.escape(title)}</title><style>{STYLE}</style><script>{SORT_SCRIPT}</script>"
        f"</head><body><h1>{html.escape(title)}</h1>{_header(entries, info)}"
        f"<nav><h2>Contents</h2><ul>{''.join(toc)}</ul></nav>"
        + "".join(sections)
        + robust
        + tradeoffs
        + "</body></html>"
    )
    path = out_dir / "index.html"
    path.write_text(page)
    return path
