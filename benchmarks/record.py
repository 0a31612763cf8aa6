"""Machine-stamped JSON records of the benchmark scripts (docs/bench.md, "Speed").

Every ``benchmarks/bench_*.py`` script (and ``fuzz_constructors.py``, ``probe_files.py``,
``train_ppo.py``) prints its figures and also writes them, as structured rows, to
``benchmarks/results/<script>.json`` (``--json PATH`` for another file).
``benchmarks/render_speed_page.py`` renders those files into docs/speed.md.

A script uses it in two lines::

    record.add_json_option(parser)
    args = parser.parse_args()
    record.start(__file__, args)   # from here on, stdout is also kept
    ...                            # print; record.figure(...) / record.row(...)

and the record is written when the script ends (``finish()`` of the returned recording writes it
earlier), including by ``SystemExit``; a script that dies of an uncaught exception or Ctrl-C writes none, and so
does a script a test runs (``PYTEST_CURRENT_TEST`` set) without ``--json``, so that test runs at
tiny sizes never replace a measurement in ``benchmarks/results/``.

What was printed is kept: every Markdown table (a header line, a ``|---|`` line and rows) becomes
a table of the record, with the line printed just before it as its title, cells as printed and as
values (numbers where a cell is one: ``6,553,773``, ``0.79``); the other printed lines are kept
too, in order. ``record.figure(name, value)`` and ``record.row(table, {column: value})`` add figures a script
prints as prose. The record's stamp says what ran and where: script, command line, arguments,
UTC start and end, hostname, CPU model and count, load average, Python, numpy, the package
version and the git commit when there is one.
"""

from __future__ import annotations

import argparse
import atexit
import io
import json
import math
import os
import platform
import re
import shlex
import socket
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

FORMAT = "fedbandit-bench-record/1"
RESULTS_DIR = Path(__file__).resolve().parent / "results"
ROOT = Path(__file__).resolve().parents[1]
THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
MAX_OUTPUT = 400


def add_json_option(parser: argparse.ArgumentParser) -> None:
    """``--json PATH``: where the record goes (default ``benchmarks/results/<script>.json``)."""
    parser.add_argument(
        "--json",
        type=Path,
        default=None,
        metavar="PATH",
        help="machine-stamped JSON record of the figures "
        "(default: benchmarks/results/<script>.json)",
    )


def default_path(script: str | Path) -> Path:
    return RESULTS_DIR / f"{Path(script).stem}.json"


def _script_arg() -> str:
    """The script as the command line named it, relative to the repository when inside it."""
    script = Path(sys.argv[0]) if sys.argv and sys.argv[0] else Path("?")
    try:
        return str(script.resolve().relative_to(ROOT))
    except (ValueError, OSError):
        return str(script)


def _utc() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith(("model name", "hardware", "cpu model")):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _load() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except (OSError, AttributeError):
        return None


def _git(*argv: str) -> str | None:
    try:
        done = subprocess.run(
            ["git", *argv], cwd=ROOT, capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def machine() -> dict[str, Any]:
    """Where the figures were measured."""
    import numpy

    try:
        available = len(os.sched_getaffinity(0))
    except AttributeError:
        available = os.cpu_count()
    return {
        "hostname": socket.gethostname(),
        "cpu_model": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "cpus_available": available,
        "platform": platform.platform(),
        "python": platform.python_version(),
        "numpy": numpy.__version__,
        "threads": {k: os.environ[k] for k in THREAD_VARS if k in os.environ},
    }


def code() -> dict[str, Any]:
    """Which code was measured: package version and git commit (None outside a checkout)."""
    try:
        from fedbandit_env import __version__ as version
    except ImportError:  # pragma: no cover - the package is installed in every checkout
        version = None
    commit = _git("rev-parse", "HEAD")
    status = _git("status", "--porcelain", "--untracked-files=no") if commit else None
    return {
        "package_version": version,
        "git_commit": commit,
        "git_dirty": bool(status) if status is not None else None,
    }


def _jsonable(value: Any) -> Any:
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if hasattr(value, "item") and callable(value.item):  # numpy scalars
        try:
            value = value.item()
        except (TypeError, ValueError):
            return str(value)
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


_NUMBER = re.compile(r"^[+\-−]?(\d{1,3}(,\d{3})+|\d+)(\.\d+)?([eE][+\-]?\d+)?$")


def cell_value(text: str) -> Any:
    """A printed table cell as a number when the whole cell is one (``6,553,773``, ``-0.5``),
    otherwise the text as printed."""
    s = text.strip()
    if _NUMBER.match(s):
        s = s.replace(",", "").replace("−", "-")
        number = float(s)
        return int(number) if re.fullmatch(r"[+\-]?\d+", s) else number
    return s


def _cells(line: str) -> list[str]:
    inner = line.strip()
    inner = inner[1:] if inner.startswith("|") else inner
    inner = inner[:-1] if inner.endswith("|") else inner
    return [c.strip() for c in inner.split("|")]


def parse_output(text: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The Markdown tables of a script's printed output, and the output in order: each
    non-empty line that is not part of a table as ``{"text": line}``, each table as
    ``{"table": index}``. A table keeps its cells as printed (``cells``) and as values
    (``rows``: numbers where a cell is one); its ``title`` is the line printed before it."""
    lines = text.splitlines()
    tables: list[dict[str, Any]] = []
    output: list[dict[str, Any]] = []
    last_text = ""
    i = 0
    while i < len(lines):
        line = lines[i]
        if (
            line.lstrip().startswith("|")
            and i + 1 < len(lines)
            and re.fullmatch(r"\s*\|?(\s*:?-{3,}:?\s*\|)+\s*:?-*:?\s*", lines[i + 1])
        ):
            columns = _cells(line)
            cells = []
            i += 2
            while i < len(lines) and lines[i].lstrip().startswith("|"):
                cells.append(_cells(lines[i]))
                i += 1
            rows = [{c: cell_value(v) for c, v in zip(columns, r, strict=False)} for r in cells]
            output.append({"table": len(tables)})
            tables.append({"title": last_text, "columns": columns, "rows": rows, "cells": cells})
            last_text = ""
            continue
        if line.strip():
            last_text = line.strip().lstrip("#").strip()
            output.append({"text": line.rstrip()})
        i += 1
    return tables, output


class _Tee(io.TextIOBase):
    """Writes go to the real stdout and are kept."""

    def __init__(self, stream):
        self._stream = stream
        self.kept = io.StringIO()

    def write(self, s: str) -> int:
        self.kept.write(s)
        return self._stream.write(s)

    def flush(self) -> None:
        self._stream.flush()

    def isatty(self) -> bool:
        return self._stream.isatty()

    def fileno(self) -> int:
        return self._stream.fileno()

    @property
    def encoding(self):  # type: ignore[override]
        return self._stream.encoding

    def __getattr__(self, name):
        return getattr(self._stream, name)


class Recording:
    """One run of a script: its stamp, what it printed and the figures it added."""

    def __init__(self, script: str | Path, args: Any = None, path: Path | None = None):
        self.script = Path(script).name
        if args is not None and not isinstance(args, dict):
            args = vars(args)
        args = dict(args or {})
        given = args.pop("json", None)
        chosen = path or given
        if chosen is None and not os.environ.get("PYTEST_CURRENT_TEST"):
            chosen = default_path(script)  # under a test: no record unless given --json
        self.path: Path | None = Path(chosen) if chosen is not None else None
        self.arguments = _jsonable(args)
        self.command = shlex.join([Path(sys.executable).name, _script_arg(), *sys.argv[1:]])
        self.started = _utc()
        self.load_start = _load()
        self._t0 = time.perf_counter()
        self.figures: dict[str, Any] = {}
        self.extra_tables: dict[str, dict[str, Any]] = {}
        self._tee: _Tee | None = None
        self.failed = False
        self.written: Path | None = None

    def capture(self) -> Recording:
        if self._tee is None:
            self._tee = _Tee(sys.stdout)
            sys.stdout = self._tee
        return self

    def figure(self, name: str, value: Any) -> None:
        """A single figure the script prints in prose (a ratio, a wall time)."""
        self.figures[name] = _jsonable(value)

    def row(self, table: str, values: dict[str, Any]) -> None:
        """A row of a table the script does not print as Markdown."""
        t = self.extra_tables.setdefault(table, {"title": table, "columns": [], "rows": []})
        for column in values:
            if column not in t["columns"]:
                t["columns"].append(column)
        t["rows"].append(_jsonable(values))

    def data(self) -> dict[str, Any]:
        printed = self._tee.kept.getvalue() if self._tee is not None else ""
        tables, output = parse_output(printed)
        if len(output) > MAX_OUTPUT:
            output = output[:MAX_OUTPUT] + [{"text": f"... ({len(output) - MAX_OUTPUT} more)"}]
        return {
            "format": FORMAT,
            "script": self.script,
            "command": self.command,
            "arguments": self.arguments,
            "started_utc": self.started,
            "finished_utc": _utc(),
            "wall_s": round(time.perf_counter() - self._t0, 3),
            "load_average_start": self.load_start,
            "load_average_end": _load(),
            "machine": machine(),
            "code": code(),
            "tables": tables + list(self.extra_tables.values()),
            "figures": self.figures,
            "output": output,
        }

    def finish(self) -> Path | None:
        """Stop keeping stdout, write the record (atomically) and say where on stderr."""
        if self.written is not None:
            return self.written
        data = self.data()
        if self._tee is not None and sys.stdout is self._tee:
            sys.stdout = self._tee._stream
        self._tee = None
        if self.path is None:
            return None
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n")
        tmp.replace(self.path)
        print(f"record: {self.path}", file=sys.stderr)
        self.written = self.path
        return self.path

    def _at_exit(self) -> None:
        if self.failed or self.written is not None:
            if self._tee is not None and sys.stdout is self._tee:
                sys.stdout = self._tee._stream
            return
        self.finish()


def start(script: str | Path, args: Any = None, path: Path | None = None) -> Recording:
    """Start recording ``script`` run with ``args`` (an argparse namespace or a dict); the record
    is written at exit unless an uncaught exception ends the script."""
    global _CURRENT
    rec = Recording(script, args, path).capture()
    _CURRENT = rec
    hook = sys.excepthook

    def failed(kind, value, tb):
        rec.failed = True
        hook(kind, value, tb)

    sys.excepthook = failed
    atexit.register(rec._at_exit)
    return rec


_CURRENT: Recording | None = None


def figure(name: str, value: Any) -> None:
    """:meth:`Recording.figure` of the running script's recording (nothing without one)."""
    if _CURRENT is not None:
        _CURRENT.figure(name, value)


def row(table: str, values: dict[str, Any]) -> None:
    """:meth:`Recording.row` of the running script's recording (nothing without one)."""
    if _CURRENT is not None:
        _CURRENT.row(table, values)


def load(path: str | Path) -> dict[str, Any]:
    """A record written by :meth:`Recording.finish`; a file of another format is an error."""
    data = json.loads(Path(path).read_text())
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ValueError(f"{path}: not a benchmark record ({FORMAT})")
    return data
