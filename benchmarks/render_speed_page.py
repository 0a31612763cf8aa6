"""Render docs/speed.md from the benchmark records committed in benchmarks/results/ (docs/bench.md,
"Speed").

    python benchmarks/render_speed_page.py                    # every committed record
    python benchmarks/render_speed_page.py --out docs/speed.md RECORD.json ...  # committed ones

The page is generated, like docs/reproductions.md from the claims files: a header naming the
records and this command, the floors the project keeps with the measured value where a record
holds it, then one section per record with its command, its machine stamp and its tables as the
script printed them. A record is one run on one machine; the page never mixes two runs in a table.
"""

from __future__ import annotations

import argparse
import fnmatch
import operator
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import record  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "speed.md"
COMMAND = "python benchmarks/render_speed_page.py"

# (floor, script, figure name, comparison, bound, command that measures it)
FLOORS: tuple[tuple[str, str, str, str, float, str], ...] = (
    (
        "ucb1 at least 0.5x a tight numpy loop of itself",
        "bench_learners.py",
        "ucb1 / numpy loop",
        ">=",
        0.5,
        "OMP_NUM_THREADS=1 python benchmarks/bench_learners.py --only ucb1",
    ),
    (
        "complete-graph flooding at N = 1000 at most 10x the ring, per step",
        "bench_scale.py",
        "complete / ring per step (aggregating max)",
        "<=",
        10.0,
        "OMP_NUM_THREADS=1 python benchmarks/bench_scale.py --skip-eval",
    ),
    (
        "a ring of 5000 agents builds and resets in under 3 s",
        "bench_scale.py",
        "ring N=5000 build + reset s",
        "<",
        3.0,
        "OMP_NUM_THREADS=1 python benchmarks/bench_scale.py --skip-eval --sizes 5000",
    ),
    (
        "the vector view at least 20x the ParallelEnv dict loop",
        "bench_engine.py",
        "vector / dict",
        ">=",
        20.0,
        "OMP_NUM_THREADS=1 python benchmarks/bench_engine.py",
    ),
)
# the JAX backend's goals (docs/jax.md, "Speed"); a GPU figure exists only in a record made on a GPU
FLOORS += (
    (
        "JAX ucb1 at least 0.8x the numpy engine on CPU at B = 1000",
        "bench_jax.py",
        "ucb1 JAX / numpy B=1000 (cpu)",
        ">=",
        0.8,
        "python benchmarks/bench_jax.py --runs 1000",
    ),
    (
        "every JAX port at least 0.8x the numpy engine on CPU at B = 1000 (the lowest ratio)",
        "bench_jax.py",
        "min: * JAX / numpy B=1000 (cpu)",
        ">=",
        0.8,
        "python benchmarks/bench_jax.py --runs 1000",
    ),
    (
        "JAX ucb1 at least 2e9 agent-steps/s on a GPU at B = 10^4 (N = M = 10)",
        "bench_jax.py",
        "ucb1 JAX agent-steps/s B=10000 (gpu)",
        ">=",
        2e9,
        "python benchmarks/bench_jax.py --ports ucb1 --runs 10000 --horizon 10000",
    ),
    (
        "JAX gossip_fed_ucb at least 1e8 agent-steps/s on a GPU at B = 10^4",
        "bench_jax.py",
        "gossip_fed_ucb JAX agent-steps/s B=10000 (gpu)",
        ">=",
        1e8,
        "python benchmarks/bench_jax.py --ports gossip_fed_ucb --runs 10000 --horizon 10000",
    ),
    (
        "JAX fed_lin_ucb at least 5e7 agent-steps/s on a GPU at B = 100 (100 agents, d = 10)",
        "bench_jax.py",
        "fed_lin_ucb JAX agent-steps/s B=100 (gpu)",
        ">=",
        5e7,
        "python benchmarks/bench_jax.py --ports fed_lin_ucb --runs 100 --horizon 10000",
    ),
)
 # the JAX core against its tight anchors (docs/jax.md, "Speed"), on CPU
ANCHOR = "python benchmarks/bench_jax_anchor.py"
FLOORS += tuple(
    (f"JAX {port} at least {bound}x its anchor ({anchor}) on CPU", "bench_jax_anchor.py",
     f"{port} vs anchor (cpu)", ">=", bound, ANCHOR)
    for port, anchor, bound in (("ucb1", "UCB1", 0.9), ("gossip_fed_ucb", "ring-shared UCB1", 0.5),
                                ("linucb", "LinUCB", 0.8), ("fed_lin_ucb", "LinUCB", 0.4))
) + tuple(
    (f"JAX {port} at most {bound}x its anchor's bytes per agent-step", "bench_jax_anchor.py",
     f"{port} bytes vs anchor", "<=", bound, ANCHOR)
    for port, bound in (("ucb1", 1.3), ("gossip_fed_ucb", 4.0), ("fed_lin_ucb", 4.0))
) + (
    ("a second JAX evaluate of a cell at least 0.8x numpy on CPU at B = 1000",
     "bench_jax_anchor.py", "second evaluate JAX / numpy B=1000 (cpu)", ">=", 0.8, ANCHOR),
) + tuple(
    (f"JAX {port}: a sweep over 4 values of {setting} compiles one program",
     "bench_jax_anchor.py", f"{port} sweep: programs compiled", "<=", 1, ANCHOR)
    for port, setting in (("ldp_ucb", "epsilon"), ("gossip_fed_ucb", "epsilon"),
                          ("ucb1", "alpha"), ("linucb", "alpha"), ("byzres_ucb", "f"))
)  # fmt: skip
_OPS = {">=": operator.ge, "<=": operator.le, "<": operator.lt, ">": operator.gt}


def _cell(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if value == int(value) and abs(value) >= 1e4:
            return f"{int(value):,}"
        return f"{value:,.4g}" if abs(value) < 1e4 else f"{value:,.0f}"
    return str(value).replace("|", "\\|").replace("\n", " ")


def _where(path: Path) -> str:
    """A record's path as the page names it: relative to the repository when inside it."""
    path = path.resolve()
    try:
        return str(path.relative_to(ROOT))
    except ValueError:
        return str(path)


def stamp(data: dict[str, Any]) -> str:
    """One line saying where, when and on which code a record was measured."""
    m, c = data.get("machine", {}), data.get("code", {})
    load = data.get("load_average_start")
    cpus = m.get("cpu_count")
    avail = m.get("cpus_available")
    parts = [
        str(data.get("started_utc", "?")).replace("T", " ").replace("Z", " UTC"),
        f"host `{m.get('hostname', '?')}`",
        f"{m.get('cpu_model', '?')}, {cpus} CPUs"
        + (f" ({avail} available)" if avail != cpus else ""),
    ]
    if load:
        parts.append(f"load average {load[0]:.2f} at start")
    if m.get("threads"):
        parts.append(", ".join(f"{k}={v}" for k, v in sorted(m["threads"].items())))
    parts.append(f"Python {m.get('python', '?')}, numpy {m.get('numpy', '?')}")
    version = f"fedbandit {c.get('package_version', '?')}"
    commit = c.get("git_commit")
    if commit:
        version += f", commit {commit[:12]}"
        if c.get("git_dirty"):
            version += " with uncommitted changes"
    parts.append(version)
    if data.get("wall_s") is not None:
        parts.append(f"{float(data['wall_s']):.1f} s in all")
    return "; ".join(parts)


def table_lines(table: dict[str, Any]) -> list[str]:
    """A record's table in Markdown: its cells as the script printed them where the record has
    them, otherwise its values."""
    columns = list(table.get("columns") or [])
    if table.get("cells") is None:
        for row in table.get("rows", []):
            columns += [c for c in row if c not in columns]
    if not columns:
        return []
    lines = ["| " + " | ".join(_cell(c) for c in columns) + " |", "|" + "---|" * len(columns)]
    if table.get("cells") is not None:
        for cells in table["cells"]:
            cells = [*cells, *[""] * (len(columns) - len(cells))][: len(columns)]
            lines.append("| " + " | ".join(_cell(str(c)) for c in cells) + " |")
    else:
        for row in table.get("rows", []):
            lines.append("| " + " | ".join(_cell(row.get(c)) for c in columns) + " |")
    return lines


def body_lines(data: dict[str, Any]) -> list[str]:
    """What a record's script printed, in order (text lines in a text block, tables as tables),
    then the tables and figures it recorded without printing them as tables."""
    tables = data.get("tables") or []
    out: list[str] = []
    text: list[str] = []
    shown: set[int] = set()

    def flush() -> None:
        if text:
            out.extend(["```text", *text, "```", ""])
            text.clear()

    for item in data.get("output") or []:
        index = item.get("table")
        if isinstance(index, int) and 0 <= index < len(tables):
            flush()
            out.extend([*table_lines(tables[index]), ""])
            shown.add(index)
        elif "text" in item:
            text.append(str(item["text"]).replace("`" * 3, "'" * 3))
    flush()
    for i, table in enumerate(tables):
        if i in shown or not table_lines(table):
            continue
        out += [f"Recorded, not printed as a table: {_cell(table.get('title') or '')}", ""]
        out += [*table_lines(table), ""]
    figures = data.get("figures") or {}
    if figures:
        out += ["| recorded figure | value |", "|---|---|"]
        out += [f"| {_cell(k)} | {_cell(v)} |" for k, v in figures.items()]
        out += [""]
    return out


def figure_value(figures: dict[str, Any], name: str) -> Any:
    """The recorded figure ``name``, or for ``"min: PATTERN"`` the smallest of the recorded
    figures whose names match the shell-style PATTERN (None if none does)."""
    if not name.startswith("min: "):
        return figures.get(name)
    pattern = name[len("min: ") :]
    values = [
        v
        for k, v in figures.items()
        if fnmatch.fnmatchcase(k, pattern) and isinstance(v, (int, float))
        and not isinstance(v, bool)
    ]  # fmt: skip
    return min(values) if values else None


def floors_lines(records: Sequence[tuple[Path, dict[str, Any]]]) -> list[str]:
    """The floors table: each floor with the figure of the record that measures it, if any."""
    by_script = {data.get("script"): (path, data) for path, data in records}
    lines = [
        "| floor | measured | met | measured by (record, UTC) | command that measures it |",
        "|---|---|---|---|---|",
    ]
    for text, script, figure, op, bound, command in FLOORS:
        path, data = by_script.get(script, (None, {}))
        value = figure_value(data.get("figures") or {}, figure)
        if path is not None and isinstance(value, (int, float)) and not isinstance(value, bool):
            met = "yes" if _OPS[op](value, bound) else "**no**"
            where = f"`{data.get('command', '?')}` ({path.name}, {data.get('started_utc', '?')})"
        else:
            value, met, where = None, "not measured", "—"
        lines.append(f"| {text} | {_cell(value)} | {met} | {_cell(where)} | `{command}` |")
    return lines


def render(files: Sequence[str | Path], command: str = COMMAND) -> str:
    """docs/speed.md from benchmark records (one section per record, in the given order)."""
    records = [(Path(f), record.load(f)) for f in files]
    out = [
        "# Speed measurements",
        "",
        "This page is generated: do not edit it by hand. It is rendered by",
        "",
        "```bash",
        command,
        "```",
        "",
    ]
    if records:
        names = ", ".join(f"`{_where(path)}`" for path, _ in records)
        out += [
            f"from the benchmark records {names}. Each record is one run of one script, stamped "
            "with the machine, its load, the time and the commit it ran on; figures of different "
            "sections come from different runs (maybe on other machines or under other loads), "
            "so compare the ratios a script measured side by side, not numbers across sections.",
            "",
        ]
    else:
        out += [
            "from the benchmark records in `benchmarks/results/`, of which there were none: "
            "no figure on this page. Every benchmark script writes its record there when it "
            "runs (`--json PATH` for another file): run the commands of the floors table below "
            "(or any benchmark of [bench.md, Speed](bench.md#speed)), then the command above.",
            "",
        ]
    out += [
        "What each benchmark measures and why the floors are what they are: "
        "[bench.md, Speed](bench.md#speed).",
        "",
        "## Floors",
        "",
        *floors_lines(records),
        "",
    ]
    for path, data in records:
        out += [f"## {data.get('script', path.name)}", ""]
        out += [f"Command: `{data.get('command', '?')}`", ""]
        out += [f"Measured: {stamp(data)}.", ""]
        out += [f"Record: `{_where(path)}`", ""]
        out += body_lines(data)
    return "\n".join(out).rstrip() + "\n"


def committed_records(folder: Path) -> list[Path]:
    """The records of ``folder`` that the repository holds (``git ls-files``): the page renders
    only what anyone can read back, never a record left on one machine."""
    import subprocess

    done = subprocess.run(["git", "ls-files", "--", "*.json"], cwd=folder, capture_output=True,
                          text=True, check=False)  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"render_speed_page: {folder} is not in a git checkout ({done.stderr})")
    return sorted(folder / line for line in done.stdout.splitlines() if "/" not in line)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "records", nargs="*", type=Path, help="record files (default: every committed one)"
    )
    parser.add_argument(
        "--results",
        type=Path,
        default=record.RESULTS_DIR,
        help="folder of records (default: benchmarks/results)",
    )
    parser.add_argument(
        "--out", type=Path, default=PAGE, help="page to write (default: docs/speed.md)"
    )
    parser.add_argument(
        "--uncommitted",
        action="store_true",
        help="also render records git does not hold (a preview; never for the shipped page)",
    )
    args = parser.parse_args(argv)
    tracked = committed_records(args.results)
    files = list(args.records) or (sorted(args.results.glob("*.json")) if args.uncommitted
                                   else tracked)  # fmt: skip
    loose = [f for f in files if f.resolve() not in {t.resolve() for t in tracked}]
    if loose and not args.uncommitted:
        names = ", ".join(str(f) for f in loose)
        raise SystemExit(f"render_speed_page: {names}: not committed; the page renders only "
                         "records the repository holds (git add them, or --uncommitted)")  # fmt: skip
    args.out.write_text(render(files))
    print(f"speed page: {args.out} from {len(files)} record(s)")


if __name__ == "__main__":
    main()
