"""Claims tables of the paper reproductions (docs/reproductions.md).

A reproduction script compares our numbers with what a paper states, one :class:`Claim` per
figure panel, table or quantitative statement. The verdict of a claim is never typed by hand: a
*check* function below takes the numbers and returns a :class:`Check` with the verdict and the
tolerance it applied, and :func:`claim` builds the row from it. The rows are written as a JSON
list (``--claims FILE`` of every ``fedbandit reproduce PAPER`` script, fedbandit_env.reproductions)
and rendered as the Markdown table the scripts print and as docs/reproductions.md (written by the
development script benchmarks/make_claims_page.py).

Verdicts: ``"reproduced"``, ``"not reproduced"`` and ``"not testable"`` (with a ``reason``).
``source`` says whose statement a row checks: ``"paper"`` (the paper says it), ``"spec"`` (a
prediction of ours that the paper does not state, explained in the paper's docs/*.md page) or ``"project"`` (a property we expect of our own
implementation). ``provenance`` marks where a paper statement was read: ``"paper"`` when read in
the paper text, ``"code"`` when read in the authors' code, ``"mem"`` when it is an unverified
recollection (rendered as *unverified*).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import MISSING, asdict, dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np

from fedbandit_env.bench import datafiles
from fedbandit_env.bench.datafiles import FileFormatError

VERDICTS = ("reproduced", "not reproduced", "not testable")
SOURCES = ("paper", "spec", "project")
PROVENANCES = ("paper", "code", "mem")


@dataclass(frozen=True)
class Check:
    """Outcome of one check function: the verdict and the tolerance it applied, in words."""

    verdict: str
    tolerance: str
    reason: str = ""

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS:
            raise ValueError(f"Check.verdict must be one of {VERDICTS}, got {self.verdict!r}")


@dataclass(frozen=True)
class Claim:
    """One row of a paper's claims table (see the module docstring for the fields)."""

    paper: str
    figure: str
    claim: str
    source: str
    paper_value: Any
    ours: Any
    scale: dict[str, Any]
    verdict: str
    tolerance: str
    reason: str = ""
    provenance: str = "paper"
    note: str = ""

    def __post_init__(self) -> None:
        if self.source not in SOURCES:
            raise ValueError(f"Claim.source must be one of {SOURCES}, got {self.source!r}")
        if self.verdict not in VERDICTS:
            raise ValueError(f"Claim.verdict must be one of {VERDICTS}, got {self.verdict!r}")
        if self.provenance not in PROVENANCES:
            raise ValueError(
                f"Claim.provenance must be one of {PROVENANCES}, got {self.provenance!r}"
            )
        if self.verdict != "reproduced" and not self.reason:
            raise ValueError(
                f"Claim {self.figure!r} ({self.claim!r}): a {self.verdict!r} verdict needs a reason"
            )

    def to_dict(self) -> dict[str, Any]:
        return _jsonable(asdict(self))


def claim(
    *,
    paper: str,
    figure: str,
    text: str,
    check: Check,
    ours: Any,
    scale: dict[str, Any],
    paper_value: Any = None,
    source: str = "paper",
    provenance: str = "paper",
    reason: str = "",
    note: str = "",
) -> Claim:
    """Build a row whose verdict is the check's; ``reason`` explains a failure (docs/reproductions.md)."""
    why = reason or check.reason
    if check.verdict != "reproduced" and not why:
        why = f"outside the tolerance ({check.tolerance})"
    return Claim(
        paper=paper,
        figure=figure,
        claim=text,
        source=source,
        paper_value=paper_value,
        ours=ours,
        scale=dict(scale),
        verdict=check.verdict,
        tolerance=check.tolerance,
        reason=why,
        provenance=provenance,
        note=note,
    )


# ----------------------------------------------------------------------------- check functions


def mean_se(values: Sequence[float]) -> tuple[float, float]:
    """Mean and standard error (sample sd / sqrt(n)) of per-run values; the se of a single value
    is NaN (a check fed it answers "not testable")."""
    a = np.asarray(values, dtype=float).reshape(-1)
    se = float(a.std(ddof=1) / math.sqrt(a.size)) if a.size > 1 else math.nan
    return float(a.mean()), se


def _finite(*values: float) -> bool:
    return all(isinstance(v, (int, float)) and math.isfinite(v) for v in values)


def _untestable_numbers(tolerance: str) -> Check:
    return Check("not testable", tolerance, "a measured value is missing or not finite")


def relative_close(ours: float, target: float, rel_tol: float) -> Check:
    """``ours`` within ``rel_tol`` (relative) of ``target``: |ours/target - 1| <= rel_tol."""
    tol = f"|ours / {target:g} - 1| <= {rel_tol:g}"
    if not _finite(ours, target) or target == 0:
        return _untestable_numbers(tol)
    ok = abs(ours / target - 1.0) <= rel_tol
    return Check("reproduced" if ok else "not reproduced", tol)


def absolute_close(ours: float, target: float, abs_tol: float) -> Check:
    """``ours`` within ``abs_tol`` of ``target``."""
    tol = f"|ours - {target:g}| <= {abs_tol:g}"
    if not _finite(ours, target):
        return _untestable_numbers(tol)
    ok = abs(ours - target) <= abs_tol
    return Check("reproduced" if ok else "not reproduced", tol)


def ratios_close(ours: Sequence[float], targets: Sequence[float], rel_tol: float) -> Check:
    """Every ratio within ``rel_tol`` (relative) of its target (e.g. 1 : 1/2 : 1/5)."""
    shown = " / ".join(f"{t:g}" for t in targets)
    tol = f"each ratio within {rel_tol:g} (relative) of {shown}"
    if len(ours) != len(targets) or not _finite(*ours, *targets) or 0 in targets:
        return _untestable_numbers(tol)
    ok = all(abs(o / t - 1.0) <= rel_tol for o, t in zip(ours, targets, strict=True))
    return Check("reproduced" if ok else "not reproduced", tol)


def within(ours: float, low: float, high: float) -> Check:
    """``low <= ours <= high``."""
    tol = f"{low:g} <= ours <= {high:g}"
    if not _finite(ours, low, high):
        return _untestable_numbers(tol)
    return Check("reproduced" if low <= ours <= high else "not reproduced", tol)


def at_least(ours: float, bound: float) -> Check:
    tol = f"ours >= {bound:g}"
    if not _finite(ours, bound):
        return _untestable_numbers(tol)
    return Check("reproduced" if ours >= bound else "not reproduced", tol)


def at_most(ours: float, bound: float) -> Check:
    tol = f"ours <= {bound:g}"
    if not _finite(ours, bound):
        return _untestable_numbers(tol)
    return Check("reproduced" if ours <= bound else "not reproduced", tol)


def monotone(values: Sequence[float], increasing: bool, min_step: float = 0.0) -> Check:
    """Strictly ordered values; each step at least ``min_step`` (relative to the smaller value)."""
    word = "increasing" if increasing else "decreasing"
    tol = f"strictly {word}" + (f", each step >= {min_step:g} relative" if min_step else "")
    if len(values) < 2 or not _finite(*values):
        return _untestable_numbers(tol)
    seq = list(values) if increasing else list(values)[::-1]
    ok = all(
        b > a and (b - a) >= min_step * max(abs(min(a, b)), 1e-300)
        for a, b in zip(seq, seq[1:], strict=False)
    )
    return Check("reproduced" if ok else "not reproduced", tol)


def lower_than(better: float, worse: float, se: float = 0.0, z: float = 0.0) -> Check:
    """``better < worse``, by at least ``z`` standard errors ``se`` of the difference."""
    tol = "ours_a < ours_b" + (f" by >= {z:g} se (se = {se:.4g})" if z else "")
    if not _finite(better, worse, se):
        return _untestable_numbers(tol)
    return Check("reproduced" if worse - better > z * se else "not reproduced", tol)


def ordered_steps(
    values: Sequence[float], step_se: Sequence[float], increasing: bool, z: float
) -> Check:
    """Each consecutive step in the stated direction by more than ``z`` standard errors of that
    step (``step_se[i]``: the se of ``values[i+1] - values[i]``, e.g. of paired differences)."""
    word = "increasing" if increasing else "decreasing"
    tol = f"{word}, each step > {z:g} se of the step"
    if len(values) < 2 or len(step_se) != len(values) - 1 or not _finite(*values, *step_se):
        return _untestable_numbers(tol)
    sign = 1.0 if increasing else -1.0
    ok = all(
        sign * (b - a) > z * se for a, b, se in zip(values[:-1], values[1:], step_se, strict=True)
    )
    return Check("reproduced" if ok else "not reproduced", tol)


def z_close(ours: float, target: float, se: float, z: float) -> Check:
    """``|ours - target| <= z * se`` (``se``: the standard error of the difference)."""
    tol = f"|ours - {target:.6g}| <= {z:g} se (se = {se:.4g})"
    if not _finite(ours, target, se):
        return _untestable_numbers(tol)
    return Check("reproduced" if abs(ours - target) <= z * se else "not reproduced", tol)


def all_z_close(
    ours: Sequence[float], targets: Sequence[float], se: Sequence[float], z: float
) -> Check:
    """Every ``|ours[i] - targets[i]| <= z * se[i]`` (e.g. a regression against reference
    numbers, ``se[i]`` the standard error of the i-th difference)."""
    tol = f"every |ours - reference| <= {z:g} se of the difference"
    if not ours or len(ours) != len(targets) or len(se) != len(ours):
        return _untestable_numbers(tol)
    if not _finite(*ours, *targets, *se):
        return _untestable_numbers(tol)
    ok = all(abs(o - t) <= z * e for o, t, e in zip(ours, targets, se, strict=True))
    return Check("reproduced" if ok else "not reproduced", tol)


def ordered(pairs: Sequence[tuple[float, float, float]], z: float = 2.0) -> Check:
    """A claimed order ``lower < higher`` for every ``(lower, higher, se)`` pair (``se``: the
    standard error of the difference). Reproduced when every pair is in the claimed order; not
    reproduced when some pair is reversed by more than ``z`` se; not testable when the reversed
    pairs all lie within ``z`` se (the runs are too few to tell)."""
    tol = f"every pair in the claimed order; a reversal counts beyond {z:g} se"
    flat = [v for p in pairs for v in p]
    if not pairs or not _finite(*flat):
        return _untestable_numbers(tol)
    reversed_by = [(lo - hi) / se if se > 0 else math.inf for lo, hi, se in pairs if lo >= hi]
    if not reversed_by:
        return Check("reproduced", tol)
    worst = max(reversed_by)
    if worst > z:
        return Check(
            "not reproduced",
            tol,
            f"{len(reversed_by)} of {len(pairs)} pairs reversed, the largest by {worst:.1f} se",
        )
    return Check(
        "not testable",
        tol,
        f"{len(reversed_by)} of {len(pairs)} pairs reversed, all "
        f"within {z:g} se (largest {worst:.1f} se): too few runs to order them",
    )


def not_testable(reason: str, tolerance: str = "none") -> Check:
    """A claim this reproduction cannot check; the reason says why."""
    return Check("not testable", tolerance, reason)


# ----------------------------------------------------------------------------- files and tables


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if hasattr(value, "item") and callable(value.item):  # numpy scalars
        return _jsonable(value.item())
    if isinstance(value, float) and not math.isfinite(value):
        return None if math.isnan(value) else ("inf" if value > 0 else "-inf")
    return value


def write_claims(
    path: str | Path, claims: Iterable[Claim], meta: dict[str, Any] | None = None
) -> None:
    """Write the rows as JSON: ``{"meta": {...}, "claims": [...]}`` (atomic replace)."""
    import datetime

    import fedbandit_env

    rows = [c.to_dict() for c in claims]
    info = {
        "date": datetime.date.today().isoformat(),
        "version": fedbandit_env.__version__,
        **(meta or {}),
    }
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps({"meta": _jsonable(info), "claims": rows}, indent=1) + "\n")
    tmp.replace(path)


class ClaimsFileError(FileFormatError):
    """A claims file is not what a reproduction writes (the message names the file, the row
    and the field)."""


_CLAIM_FIELDS = {f.name for f in fields(Claim)}
_CLAIM_REQUIRED = {f.name for f in fields(Claim) if f.default is MISSING}


def read_claims(path: str | Path) -> tuple[dict[str, Any], list[Claim]]:
    """A claims file, read as data (:mod:`fedbandit_env.bench.datafiles`): UTF-8, bounded depth
    and numbers, every row checked; an error names the file, the row and the field."""
    text = datafiles.read_text(path, "claims", ClaimsFileError, limit=1 << 26)
    data = datafiles.parse_json(text, f"claims: {path}", error=ClaimsFileError)
    if not isinstance(data, dict) or not isinstance(data.get("claims"), list):
        raise ClaimsFileError(
            f"claims: {path}: not a claims file (expected an object with a 'claims' list)"
        )
    meta = data.get("meta", {})
    datafiles.expect_object(meta, f"claims: {path}: meta", ClaimsFileError)
    rows = []
    for i, row in enumerate(data["claims"]):
        where = f"claims: {path}: claim {i}"
        datafiles.expect_object(row, where, ClaimsFileError)
        unknown = sorted(set(row) - _CLAIM_FIELDS)
        missing = sorted(_CLAIM_REQUIRED - set(row))
        if unknown or missing:
            raise ClaimsFileError(
                f"{where}: expected the fields {sorted(_CLAIM_FIELDS)}; "
                + (f"unknown {unknown}" if unknown else f"missing {missing}")
            )
        for name in ("paper", "figure", "claim", "source", "verdict", "tolerance", "reason",
                     "provenance", "note"):  # fmt: skip
            if name in row:
                datafiles.expect_str(row[name], f"{where}: {name}", ClaimsFileError, 1 << 16)
        datafiles.expect_object(row["scale"], f"{where}: scale", ClaimsFileError)
        try:
            rows.append(Claim(**row))
        except ValueError as err:
            raise ClaimsFileError(f"{where}: {err}") from None
    return meta, rows


def _fmt(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.4g}"
    if isinstance(value, (list, tuple)):
        return " / ".join(_fmt(v) for v in value)
    if isinstance(value, dict):
        return ", ".join(f"{k}: {_fmt(v)}" for k, v in value.items())
    return str(value)


def _cell(value: Any) -> str:
    return _fmt(value).replace("|", "\\|").replace("\n", " ")


def counts(claims: Iterable[Claim]) -> dict[str, int]:
    out = dict.fromkeys(VERDICTS, 0)
    for c in claims:
        out[c.verdict] += 1
    return out


def to_markdown(claims: Sequence[Claim]) -> str:
    """The claims table: figure | claim | source | paper | ours | verdict | tolerance / reason."""
    lines = [
        "| figure | claim | source | paper | ours | verdict | tolerance; reason |",
        "|---|---|---|---|---|---|---|",
    ]
    for c in claims:
        source = c.source + (" (unverified)" if c.provenance == "mem" else "")
        why = c.tolerance + (f"; {c.reason}" if c.reason else "")
        lines.append(
            "| "
            + " | ".join(
                _cell(x) for x in (c.figure, c.claim, source, c.paper_value, c.ours, c.verdict, why)
            )
            + " |"
        )
    n = counts(claims)
    lines.append("")
    lines.append(
        f"{n['reproduced']} reproduced, {n['not reproduced']} not reproduced, "
        f"{n['not testable']} not testable."
    )
    return "\n".join(lines)


def backend_suffix(meta: dict[str, Any]) -> str:
    """``", JAX backend"`` for a claims file the JAX backend computed, ``""`` for numpy (the
    page and the README summary tell the two runs of one scale apart by it)."""
    backend = meta.get("backend")
    if not backend or backend == "numpy":
        return ""
    return f", {'JAX' if backend == 'jax' else backend} backend"


def _power(x: float) -> str:
    """10^k for an exact power of ten, else the number with thousands separators."""
    k = round(math.log10(x)) if x > 0 else 0
    return f"10^{k}" if x >= 1000 and 10**k == x else f"{x:,.0f}"


def checked_scale(meta: dict[str, Any], rows: Sequence[Claim]) -> str:
    """The scale one claims file checked its claims at, read from its rows' ``scale``: the
    longest horizon, the most runs of one configuration, and the backend and device."""

    def largest(key: str) -> float | None:
        values = [r.scale.get(key) for r in rows if isinstance(r.scale, dict)]
        numbers = [v for v in values if isinstance(v, int | float) and not isinstance(v, bool)]
        return max(numbers) if numbers else None

    parts = []
    if (t := largest("T")) is not None:
        parts.append(f"T up to {_power(t)}")
    if (runs := largest("runs")) is not None:
        parts.append(f"up to {runs:,.0f} runs")
    backend = meta.get("backend") or "numpy"
    where = "numpy" if backend == "numpy" else f"{backend} on {meta.get('device', '?')}"
    return ", ".join(parts + [where])


def scale_table(files: Sequence[str | Path], paper_scales: dict[str, str]) -> list[str]:
    """The page's table of the scale each paper's claims were checked at (every claims file,
    :func:`checked_scale`) against the paper's own (``paper_scales``: paper slug -> text)."""
    lines = [
        "| paper | claims file | checked at | the paper's scale |",
        "|---|---|---|---|",
    ]
    for f in files:
        meta, rows = read_claims(f)
        slug = Path(f).stem.rpartition("-")[0]
        title = meta.get("title") or (rows[0].paper if rows else Path(f).stem)
        scale = (meta.get("scale_name", "") + backend_suffix(meta)).lstrip(", ")
        lines.append(
            f"| {_cell(title)} | {_cell(scale)} | {_cell(checked_scale(meta, rows))} | "
            f"{_cell(paper_scales.get(slug, 'not stated here'))} |"
        )
    return lines


def render_page(
    files: Sequence[str | Path], intro: str = "", paper_scales: dict[str, str] | None = None
) -> str:
    """docs/reproductions.md from claims files (one section per file, in the given order);
    with ``paper_scales`` (paper slug -> the paper's own scale), also the table of the scale
    the claims were checked at against the paper's (:func:`scale_table`)."""
    parts = ["# Reproductions", ""]
    if intro:
        parts += [intro.strip(), ""]
    summary = [
        "| paper | scale | date | version | reproduced | not reproduced | not testable |",
        "|---|---|---|---|---|---|---|",
    ]
    sections = []
    for f in files:
        meta, rows = read_claims(f)
        n = counts(rows)
        title = meta.get("title") or (rows[0].paper if rows else Path(f).stem)
        scale = (meta.get("scale_name", "") + backend_suffix(meta)).lstrip(", ")
        summary.append(
            f"| {_cell(title)} | {_cell(scale)} | {_cell(meta.get('date'))} | "
            f"{_cell(meta.get('version'))} | {n['reproduced']} | {n['not reproduced']} | "
            f"{n['not testable']} |"
        )
        head = f"## {title}" + (f" ({scale})" if scale else "")
        body = [head, ""]
        if (age := age_note(meta)) is not None:
            body += [f"**{age}**", ""]
        if meta.get("command"):
            body += [f"Command: `{meta['command']}`", ""]
        if meta.get("wall_time_s") is not None:
            body += [f"Wall time: {float(meta['wall_time_s']):.0f} s", ""]
        body += [to_markdown(rows), ""]
        sections.append("\n".join(body))
    scales = []
    if paper_scales is not None:
        scales = ["## Scale: checked at, against the paper's", "",
                  *scale_table(files, paper_scales), ""]  # fmt: skip
    return "\n".join(parts + summary + [""] + scales + sections)


SUMMARY_START = "<!-- reproductions-summary: written by benchmarks/make_claims_page.py -->"
SUMMARY_END = "<!-- /reproductions-summary -->"


def age_note(meta: dict[str, Any]) -> str | None:
    """For a claims file written by another package version than this one: when and by which
    version, and that its numbers predate this one's changes; None for a current file."""
    from fedbandit_env import __version__

    version = meta.get("version")
    if version == __version__:
        return None
    return (
        f"Written by fedbandit {version} on {meta.get('date', 'an unknown date')}; this is "
        f"fedbandit {__version__}: its numbers predate the results versions since "
        "(docs/bench.md, \"Results versions\"); rerun its command to refresh it."
    )


def summary_lines(files: Sequence[str | Path]) -> list[str]:
    """One line per claims file: title, scale and the three verdict counts (README summary);
    a file of another package version says its version and date."""
    from fedbandit_env import __version__

    lines = []
    for f in files:
        meta, rows = read_claims(f)
        n = counts(rows)
        title = meta.get("title") or (rows[0].paper if rows else Path(f).stem)
        scale = meta.get("scale_name", "")
        label = (f"{scale} scale" if scale else "") + backend_suffix(meta)
        if meta.get("version") != __version__:
            label += f", written by fedbandit {meta.get('version')} on {meta.get('date')}"
        lines.append(
            f"- {title}" + (f" ({label.lstrip(', ')})" if label else "") + f": {n['reproduced']} "
            f"reproduced, {n['not reproduced']} not reproduced, {n['not testable']} not testable"
        )
    return lines


def replace_summary(text: str, lines: Sequence[str]) -> str:
    """``text`` with the block between the summary markers replaced by ``lines``."""
    try:
        start = text.index(SUMMARY_START) + len(SUMMARY_START)
        end = text.index(SUMMARY_END, start)
    except ValueError as err:
        raise ValueError(
            f"no reproductions summary block ({SUMMARY_START} ... {SUMMARY_END})"
        ) from err
    return text[:start] + "\n" + "\n".join(lines) + "\n" + text[end:]
