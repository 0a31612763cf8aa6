"""Leaderboard: rank the cells of each environment by final regret (docs/bench.md).

Per cell: mean final per-agent regret with a 95% percentile-bootstrap CI, regret normalized to a
baseline learner on the same environment, mean messages and floats sent, and the privacy epsilon
the learner declares (``TeamPolicy.privacy_epsilon``: a number, "∞" for explicitly non-private,
"—" for no declaration). Cells are ranked within their environment configuration.

The bootstrap of a cell draws from a generator seeded by (``seed``, the cell's hash), so a cell's
CI does not depend on which other cells are in the store. The baseline is one agent id for every
table, or per table: :func:`fedbandit_env.bench.suites.default_baseline` (``linucb`` on the linear
family, ``ucb1`` otherwise) unless the caller names one.

Rows of different results versions (:mod:`fedbandit_env.bench.versions`) are never pooled: an
entry is one (cell, results version), and :func:`current_rows` keeps only the rows of each
learner's current version, noting how many stale rows it left out and why.

Rows of the two backends (docs/bench.md, "Backends") are never pooled either: the backend is
part of a cell's hash and of its results version, so a numpy and a JAX entry of the same
learner are two entries of one table, and a table that holds a non-numpy entry gets a
``backend`` column (numpy-only tables look as they always did). Each entry is compared with the
baseline of its own backend: the paired comparison only ever pairs seeds of one backend (the
same seed is another draw on the other backend); the ratio falls back to the numpy baseline
when the entry's backend has no baseline cell in the table (the backends agree in
distribution).
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from fedbandit_env.bench.datafiles import BACKENDS
from fedbandit_env.bench.flags import EntryFlags, entry_flags, format_flags
from fedbandit_env.bench.robust_metrics import (
    RobustMarks,
    attach_robust,
    format_gain,
    format_ratio,
    robust_markdown,
)
from fedbandit_env.bench.store import Row
from fedbandit_env.bench.suites import default_baseline
from fedbandit_env.bench.text import env_title, escape_latex, escape_markdown

BOOTSTRAP_SAMPLES = 2000


def bootstrap_ci(values: np.ndarray, rng: np.random.Generator, level: float = 0.95):
    """Percentile bootstrap CI of the mean."""
    values = np.asarray(values, dtype=np.float64)
    if len(values) == 1:
        return float(values[0]), float(values[0])
    idx = rng.integers(len(values), size=(BOOTSTRAP_SAMPLES, len(values)))
    means = values[idx].mean(axis=1)
    tail = (1 - level) / 2 * 100
    lo, hi = np.percentile(means, [tail, 100 - tail])
    return float(lo), float(hi)


@dataclass(frozen=True)
class Paired:
    """A learner's final regret minus the baseline's on the same seeds (docs/bench.md,
    "Paired comparisons"): the mean of the per-seed differences, its 95% percentile-bootstrap
    CI, the number of common seeds, and the verdict: ``"better"`` (the CI is below 0: lower
    regret than the baseline), ``"worse"`` (above 0), ``""`` (not significant), or
    ``"baseline"`` for the baseline itself."""

    diff: float
    ci_low: float
    ci_high: float
    pairs: int
    verdict: str


@dataclass
class Entry:
    env_key: str
    env_id: str
    label: str
    agent_id: str
    runs: int
    mean: float
    ci_low: float
    ci_high: float
    normalized: float | None
    messages: float
    floats: float
    epsilon: float | None
    rank: int
    baseline: str
    steps: np.ndarray
    curves: np.ndarray  # (runs, checkpoints)
    results_version: str = ""
    cell_hash: str = ""
    seeds: tuple[int, ...] = ()
    finals: np.ndarray | None = None  # final regret per agent, one per seed (in ``seeds`` order)
    paired: Paired | None = None  # vs the table's baseline (:func:`attach_paired`)
    audit: AuditMark | None = None
    source: str = ""  # "store" (your rows) or "reference" when ranked beside a reference
    highlight: bool = False  # marked and highlighted on the page (``--highlight``)
    backend: str = "numpy"  # the backend its rows ran on (docs/bench.md, "Backends")
    robust: RobustMarks | None = None  # set on entries of attacked environments (attach_robust)
    flags: EntryFlags | None = None  # what went wrong in its runs (docs/bench.md, "Flags")


@dataclass(frozen=True)
class AuditMark:
    """A learner's privacy audit as the leaderboard shows it: the audited lower bound (95 %)
    and the claim it was checked against (docs/privacy.md, "Auditing learners")."""

    lower: float
    claim: float | None

    @property
    def exceeds(self) -> bool:
        """True when the audit refutes the claim: the learner is flagged."""
        return self.claim is not None and not math.isinf(self.claim) and self.lower > self.claim


def attach_audits(entries: list[Entry], audits: dict[str, AuditMark]) -> list[Entry]:
    """Set each entry's ``audit`` from ``audits`` keyed by the entry's label (learner id or
    suite label); the Markdown and HTML tables then show an "audited ε" column. The audits
    run numpy learners: entries of another backend are not marked."""
    for e in entries:
        if e.backend != BACKENDS[0]:
            e.audit = None
            continue
        e.audit = audits.get(e.label, audits.get(e.agent_id))
    return entries


def format_audit(audit: AuditMark | None, markdown: bool = True) -> str:
    """The audited column: "≥ 0.169 (claim 0.25)", with a marker when the claim is refuted
    ("⚠ EXCEEDS"), or "—" when not audited."""
    if audit is None:
        return "—"
    claim = "" if audit.claim is None else f" (claim {audit.claim:.3g})"
    text = f"≥ {audit.lower:.3g}{claim}"
    if audit.exceeds:
        return f"**⚠ {text} EXCEEDS**" if markdown else f"⚠ {text} EXCEEDS"
    return text


Baseline = str | Callable[[str, dict], str] | None


def cell_rng(cell_hash: str, seed: int = 0) -> np.random.Generator:
    """The bootstrap generator of one cell: seeded by ``seed`` and the cell's hash."""
    return np.random.default_rng([seed, int(cell_hash, 16)])


def _baseline_of(baseline: Baseline, env_key: str) -> str:
    if isinstance(baseline, str):
        return baseline
    env = json.loads(env_key)
    return (baseline or default_baseline)(env["env_id"], env["env_kwargs"])


def build(rows: list[Row], baseline: Baseline = None, seed: int = 0) -> list[Entry]:
    """Entries of every cell in ``rows``, ranked per environment.

    ``baseline``: an agent id for every table, or ``f(env_id, env_kwargs) -> agent id`` (e.g. a
    suite's ``baseline_for``); None picks :func:`default_baseline` per table.
    """
    cells: dict[tuple[str, str], list[Row]] = defaultdict(list)
    for row in rows:  # one entry per (cell, results version): versions are never pooled
        cells[(row.cell_hash, row.results_version)].append(row)
    entries = []
    for cell_rows in cells.values():
        first = cell_rows[0]
        finals = np.array([r.final_regret_per_agent for r in cell_rows])
        lo, hi = bootstrap_ci(finals, cell_rng(first.cell_hash, seed))
        entries.append(
            Entry(
                env_key=first.env_key,
                env_id=first.env_id,
                label=first.label,
                agent_id=first.agent_id,
                runs=len(cell_rows),
                mean=float(finals.mean()),
                ci_low=lo,
                ci_high=hi,
                normalized=None,
                messages=float(np.mean([r.messages for r in cell_rows])),
                floats=float(np.mean([r.floats for r in cell_rows])),
                epsilon=first.epsilon,
                rank=0,
                baseline="",
                steps=np.array(json.loads(first.steps)),
                curves=np.array([json.loads(r.curve) for r in cell_rows]),
                results_version=first.results_version,
                cell_hash=first.cell_hash,
                seeds=tuple(r.seed for r in cell_rows),
                finals=finals,
                backend=first.backend,
                flags=entry_flags([json.loads(r.flags) for r in cell_rows]),
            )
        )
    by_env: dict[str, list[Entry]] = defaultdict(list)
    for e in entries:
        by_env[e.env_key].append(e)
    ranked = []
    for env_key, env_entries in by_env.items():
        name = _baseline_of(baseline, env_key)
        env_entries.sort(key=lambda e: e.mean)
        bases = _baselines(env_entries, name)
        for rank, e in enumerate(env_entries, start=1):
            e.rank = rank
            e.baseline = name
            base = bases.get(e.backend, bases.get(BACKENDS[0]))
            if base is not None and base.mean > 0:
                e.normalized = e.mean / base.mean
        ranked.extend(env_entries)
    attach_paired(ranked, seed)
    attach_robust(ranked)
    return ranked


ROBUST_HEADERS = ("under attack / clean", "attack gain vs silent (± se)", "ucb1 / this")
"""The columns of a table of an attacked environment (docs/bench.md, "The robust suite"):
honest-mean regret over the same learner's regret with no adversary, the paired gain over
``silent`` on the same seeds, and the cooperation ratio R_UCB1 / R_H."""


STALENESS_HEADER = "staleness (events)"
STALENESS_LEGEND = (
    "staleness (events): mean over the run's decisions of the events (pulls) since the acting "
    "client last received a download from the server (the asynchronous learners; —: the "
    "learner reports none)"
)


def shows_staleness(table: list[Entry]) -> bool:
    """Whether a table gets the staleness column: some entry's learner reports its staleness
    (the asynchronous learners; docs/bench.md, "Flags")."""
    return any(e.flags is not None and e.flags.staleness is not None for e in table)


def staleness_cell(entry: Entry) -> str:
    """The mean events since the acting client's last download, or ``—``."""
    value = None if entry.flags is None else entry.flags.staleness
    return "—" if value is None else f"{value:.1f}"


def shows_flags(table: list[Entry]) -> bool:
    """Whether a table gets the ``flags`` column: some entry has something flagged (NaN
    indices, a learner's note, heavy clipping)."""
    return any(e.flags is not None and e.flags.any for e in table)


LEGEND = (
    "final regret / agent: mean over runs of the cumulative pseudo-regret per agent at the "
    "horizon (honest agents only under an adversary), with its 95% bootstrap CI; "
    "vs {baseline}: the ratio of this mean to {baseline}'s; messages and floats: per run, "
    "summed over agents; privacy ε: the learner's declared guarantee per agent over the run "
    "(∞: explicitly not private, unbounded privacy loss; —: no privacy claim); paired Δ: the "
    "mean per-seed difference of final regret with {baseline} on common seeds; flags: what "
    "went wrong in the runs (docs/bench.md, \"Flags\")."
)
"""The legend printed under every table (Markdown, LaTeX, HTML) with the table's baseline."""


def legend(baseline: str) -> str:
    return LEGEND.format(baseline=baseline)


def shows_robust(table: list[Entry]) -> bool:
    """Whether a table gets the robustness columns: it is a table of an attacked environment
    (every other table keeps its columns)."""
    return any(e.robust is not None for e in table)


def robust_cells(entry: Entry, minus: str = "−") -> tuple[str, str, str]:
    """The three robustness cells of an entry (``—`` where a reference entry is missing)."""
    marks = entry.robust
    if marks is None:
        return ("—", "—", "—")
    return (format_ratio(marks.clean), format_gain(marks, minus), format_ratio(marks.cooperation))


def _baselines(entries: list[Entry], name: str) -> dict[str, Entry]:
    """The baseline entry of each backend in one table: the first (in the table's order) whose
    id and label are the baseline's."""
    out: dict[str, Entry] = {}
    for e in entries:
        if e.agent_id == name and e.label == name:
            out.setdefault(e.backend, e)
    return out


def paired_comparison(
    entry: Entry, base: Entry, seed: int = 0, level: float = 0.95
) -> Paired | None:
    """``entry`` vs ``base`` on their common seeds: the paired differences of final regret
    (entry minus baseline) with a percentile-bootstrap CI of their mean, from a generator seeded
    by (``seed``, both cells' hashes), so the same rows always give the same CI. None when they
    share fewer than two seeds. Significant when the CI excludes 0."""
    if entry.finals is None or base.finals is None:
        return None
    mine = dict(zip(entry.seeds, entry.finals, strict=True))
    theirs = dict(zip(base.seeds, base.finals, strict=True))
    common = sorted(set(mine) & set(theirs))
    if len(common) < 2:
        return None
    diffs = np.array([mine[s] - theirs[s] for s in common], dtype=np.float64)
    rng = np.random.default_rng(
        [seed, int(entry.cell_hash or "0", 16), int(base.cell_hash or "0", 16), 1]
    )
    lo, hi = bootstrap_ci(diffs, rng, level)
    verdict = "better" if hi < 0 else "worse" if lo > 0 else ""
    return Paired(float(diffs.mean()), lo, hi, len(common), verdict)


def attach_paired(entries: list[Entry], seed: int = 0) -> None:
    """Set each entry's :attr:`Entry.paired`: its paired comparison with its table's baseline
    entry of the same backend (the baseline's current-version cell labelled with the baseline's
    id); none when its backend has no baseline cell there (seeds are never paired across
    backends)."""
    by_env: dict[str, list[Entry]] = defaultdict(list)
    for e in entries:
        by_env[e.env_key].append(e)
    for env_entries in by_env.values():
        bases = _baselines(env_entries, env_entries[0].baseline)
        for e in env_entries:
            base = bases.get(e.backend)
            if base is None:
                e.paired = None
            elif e is base:
                e.paired = Paired(0.0, 0.0, 0.0, len(e.seeds), "baseline")
            else:
                e.paired = paired_comparison(e, base, seed)


def format_paired(entry: Entry, minus: str = "−", none: str = "—") -> str:
    """The paired column: ``mean difference [CI low, CI high]`` and ``better`` / ``worse``
    when significant; ``baseline`` for the baseline; ``—`` with no common seeds."""
    p = entry.paired
    if p is None:
        return none
    if p.verdict == "baseline":
        return "baseline"

    def num(x: float) -> str:
        return f"{x:+.1f}".replace("-", minus)

    text = f"{num(p.diff)} [{num(p.ci_low)}, {num(p.ci_high)}]"
    return f"{text} {p.verdict}" if p.verdict else text


def current_rows(
    rows: list[Row], note: Callable[[str], None] = print, include_unregistered: bool = False
) -> list[Row]:
    """The rows whose results version is their learner's current one. Every row left out is
    counted by ``note`` with its reason: stale rows (another results version), and rows whose
    learner or environment is not registered in this process (their version cannot be judged
    here), which ``include_unregistered`` keeps, ranked by their stored id and label. Ids are
    looked up, never imported, and no learner is built (files are data:
    :func:`~fedbandit_env.bench.versions.registered_results_version`)."""
    from fedbandit_env.bench.versions import registered_results_version, row_version_key

    current: dict[tuple[str, str, bool, str, bool | None], str | None] = {}
    kept, stale, unknown = [], [], set()
    for row in rows:
        key = row_version_key(row)
        if key not in current:
            current[key] = registered_results_version(*key)
        want = current[key]
        if want is None:
            unknown.add(row.label)
            if include_unregistered:
                kept.append(row)
            continue
        (kept if row.results_version == want else stale).append(row)
    if stale:
        labels = sorted({r.label for r in stale})
        versions = sorted({r.results_version for r in stale})
        note(
            f"leaderboard: {len(stale)} stale row(s) of {', '.join(labels)} left out: their "
            f"results version ({'; '.join(versions)}) is not the current one; re-run the "
            "suite to replace them (docs/bench.md, results versions)"
        )
    if unknown:
        n = sum(1 for r in rows if r.label in unknown)
        what = ("ranked by the stored id, results version not checked" if include_unregistered
                else "left out (--resolve MODULE:CLASS imports a learner of the current folder, "
                "as rank does; --include-unregistered ranks them by their stored id)")  # fmt: skip
        note(
            f"leaderboard: {n} row(s) of {', '.join(sorted(unknown))}: learner or environment "
            f"not registered here (or its version is known only to an instance); {what}"
        )
    return kept


def format_epsilon(epsilon: float | None) -> str:
    """The privacy column: the declared epsilon, "∞" (not private) or "—" (no declaration)."""
    if epsilon is None:
        return "—"
    return "∞" if math.isinf(epsilon) else f"{epsilon:g}"


def display_label(
    entry: Entry, table: list[Entry], escape: Callable[[str], str] = lambda text: text
) -> str:
    """The entry's label, followed by ``[its backend]`` when the table holds the same label on
    another backend (a non-numpy entry only: ``ucb1`` and ``ucb1 [jax]``), or by ``[its results
    version]`` when it holds the same label at two versions of one backend (so that each row
    and each curve says which it is); ``escape`` is applied to the label and the version (the
    brackets are the table's own, so they stay literal)."""
    same = [e for e in table if e.label == entry.label]
    if len(same) == 1:
        return escape(entry.label)
    if sum(e.backend == entry.backend for e in same) == 1:  # they differ by backend only
        if entry.backend == BACKENDS[0]:
            return escape(entry.label)
        return f"{escape(entry.label)} [{escape(entry.backend)}]"
    return f"{escape(entry.label)} [{escape(entry.results_version)}]"


def shows_backend(table: list[Entry]) -> bool:
    """Whether a table gets a ``backend`` column: it holds an entry of another backend than
    numpy (numpy-only tables keep their columns)."""
    return any(e.backend != BACKENDS[0] for e in table)


def paired_header(baseline: str, latex: bool = False) -> str:
    """The paired column's heading (``baseline`` already escaped for the output)."""
    if latex:
        return f"paired $\\Delta$ vs {baseline} (95\\% CI)"
    return f"paired Δ vs {baseline} (95% CI)"


def mark(entry: Entry, label: str) -> str:
    """A label with its marks: ``★`` for a highlighted learner, ``(yours)`` for your rows
    ranked beside a reference, ``(reference)`` for the reference's, ``(oracle)`` for an oracle
    (a learner that sees what others cannot: ``centralized_*``)."""
    marks = []
    if entry.highlight:
        label = f"★ {label}"
    if entry.source == "store":
        marks.append("yours")
    elif entry.source == "reference":
        marks.append("reference")
    if is_oracle(entry.agent_id):
        marks.append("oracle")
    return label + (f" ({', '.join(marks)})" if marks else "")


def is_oracle(agent_id: str) -> bool:
    """An oracle learner: centralized, it sees every agent's rewards at no communication cost
    (ranked, but never on a Pareto front)."""
    return agent_id.startswith("centralized_")


def to_markdown(entries: list[Entry]) -> str:
    """Markdown tables, one per environment configuration, ranked by mean final regret."""
    out = []
    by_env: dict[str, list[Entry]] = defaultdict(list)
    for e in entries:
        by_env[e.env_key].append(e)
    for env_key, env_entries in by_env.items():
        out.append(f"### {escape_markdown(env_title(env_key))}\n")
        audited = any(e.audit is not None for e in env_entries)
        backend = shows_backend(env_entries)
        robust = shows_robust(env_entries)
        flagged = shows_flags(env_entries)
        stale = shows_staleness(env_entries)
        out.append(
            "| rank | learner |" + (" backend |" if backend else "")
            + f" runs | final regret / agent | 95% CI | "
            f"vs {escape_markdown(env_entries[0].baseline)} | messages | floats | privacy ε |"
            + f" {paired_header(escape_markdown(env_entries[0].baseline))} |"
            + (" audited ε (95%) |" if audited else "")
            + ("".join(f" {h} |" for h in ROBUST_HEADERS) if robust else "")
            + (f" {STALENESS_HEADER} |" if stale else "")
            + (" flags |" if flagged else "")
        )  # fmt: skip
        out.append("|---|---|---|---|---|---|---|---|---|---|" + ("---|" if backend else "")
                   + ("---|" if audited else "")
                   + ("---|" * len(ROBUST_HEADERS) if robust else "")
                   + ("---|" if stale else "")
                   + ("---|" if flagged else ""))  # fmt: skip
        for e in sorted(env_entries, key=lambda x: x.rank):
            norm = "—" if e.normalized is None else f"{e.normalized:.2f}"
            eps = format_epsilon(e.epsilon)
            label = mark(e, display_label(e, env_entries, escape_markdown))
            if backend:
                label += f" | {escape_markdown(e.backend)}"
            out.append(
                f"| {e.rank} | {label} | {e.runs} | {e.mean:.1f} | "
                f"[{e.ci_low:.1f}, {e.ci_high:.1f}] | {norm} | {e.messages:,.0f} | "
                f"{e.floats:,.0f} | {eps} |"
                + f" {format_paired(e)} |"
                + (f" {format_audit(e.audit)} |" if audited else "")
                + ("".join(f" {c} |" for c in robust_cells(e)) if robust else "")
                + (f" {staleness_cell(e)} |" if stale else "")
                + (f" {flag_cell(e)} |" if flagged else "")
            )
        out.append("")
        out.append(f"*{escape_markdown(legend(env_entries[0].baseline))}*")
        if stale:
            out.append(f"\n*{escape_markdown(STALENESS_LEGEND)}*")
        out.append("")
    summary = robust_markdown(entries)
    if summary:
        out.append(summary)
    return "\n".join(out)


def flag_cell(entry: Entry, markdown: bool = True) -> str:
    """The flags cell: ``⚠ NaN index in 40 steps (3/5 runs); f = 1 < 2 Byzantine``, or ``—``."""
    text = format_flags(entry.flags)
    if text == "—":
        return text
    return f"**⚠ {escape_markdown(text)}**" if markdown else f"⚠ {text}"


def _bold_best(values: list[float | None]) -> list[bool]:
    """Which cells of a column hold its best (smallest) value; ties are all bold, missing and
    infinite values never are."""
    finite = [v for v in values if v is not None and math.isfinite(v)]
    best = min(finite) if finite else None
    return [best is not None and v is not None and v == best for v in values]


def to_latex(entries: list[Entry]) -> str:
    """LaTeX ``tabular`` blocks in booktabs style (``\\usepackage{booktabs}``), one per
    environment configuration, with the columns and numbers of :func:`to_markdown`; the best
    value of each numeric column (lowest mean regret, ratio to the baseline, messages, floats
    and smallest declared epsilon) is set in bold. Labels and titles are escaped, so any label
    compiles as plain text."""
    out = []
    by_env: dict[str, list[Entry]] = defaultdict(list)
    for e in entries:
        by_env[e.env_key].append(e)
    for env_key, env_entries in by_env.items():
        base = escape_latex(env_entries[0].baseline)
        backend = shows_backend(env_entries)
        flagged = shows_flags(env_entries)
        stale = shows_staleness(env_entries)
        out += [
            f"% {escape_latex(env_title(env_key))}",
            r"\begin{tabular}{rl" + ("l" if backend else "") + "rrlrrrll"
            + ("r" if stale else "") + ("l" if flagged else "") + "}",
            r"\toprule",
            "rank & learner & "
            + ("backend & " if backend else "")
            + f"runs & final regret / agent & 95\\% CI & vs {base} & messages & "
            r"floats & privacy $\varepsilon$" + f" & {paired_header(base, latex=True)} "
            + (f"& {STALENESS_HEADER} " if stale else "")
            + ("& flags " if flagged else "") + r"\\",
            r"\midrule",
        ]  # fmt: skip
        rows = sorted(env_entries, key=lambda x: x.rank)
        bold = {
            "mean": _bold_best([round(e.mean, 1) for e in rows]),  # as shown
            "norm": _bold_best(
                [None if e.normalized is None else round(e.normalized, 2) for e in rows]
            ),  # fmt: skip
            "messages": _bold_best([round(e.messages) for e in rows]),
            "floats": _bold_best([round(e.floats) for e in rows]),
            "eps": _bold_best([e.epsilon for e in rows]),
        }

        def cell(text: str, column: str, i: int, bold: dict = bold) -> str:
            return f"\\textbf{{{text}}}" if bold[column][i] else text

        for i, e in enumerate(rows):
            norm = "--" if e.normalized is None else f"{e.normalized:.2f}"
            eps = {"∞": r"$\infty$", "—": "--"}.get(format_epsilon(e.epsilon))
            label = display_label(e, env_entries, escape_latex)
            if backend:
                label += f" & {escape_latex(e.backend)}"
            out.append(
                f"{e.rank} & {label} & {e.runs} & {cell(f'{e.mean:.1f}', 'mean', i)} & "
                f"[{e.ci_low:.1f}, {e.ci_high:.1f}] & {cell(norm, 'norm', i)} & "
                f"{cell(f'{e.messages:,.0f}', 'messages', i)} & "
                f"{cell(f'{e.floats:,.0f}', 'floats', i)} & "
                f"{cell(eps or format_epsilon(e.epsilon), 'eps', i)}"
                + f" & {format_paired(e, minus='$-$', none='--')}"
                + (f" & {staleness_cell(e).replace('—', '--')}" if stale else "")
                + (f" & {escape_latex(format_flags(e.flags)).replace('—', '--')}" if flagged else "")
                + " \\\\"
            )
        out += [r"\bottomrule", r"\end{tabular}",
                r"\par\smallskip{\footnotesize "
                + escape_latex(legend(env_entries[0].baseline)).replace("ε", r"$\varepsilon$")
                .replace("∞", r"$\infty$").replace("—", "--").replace("Δ", r"$\Delta$") + "}",
                ""]  # fmt: skip
    return "\n".join(out)
