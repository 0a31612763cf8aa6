"""Reference results shipped with the package (docs/bench.md, "Reference results").

The file ``fedbandit_env/bench/reference/reference.json`` holds the rows of the ``standard``,
``quick`` and ``robust`` suites and of each per-paper suite's headline cells (:data:`HEADLINES`), on fixed seeds, so that
``fedbandit leaderboard --reference`` ranks a user's own rows against the published learners
without re-running them. It is plain JSON (read with :mod:`json` only, nothing executable or
pickled), validated on load (:func:`load_reference`), one cell per line, with no timings or
dates, so that a rebuild of unchanged code gives the same bytes. Per cell it keeps what the store
keeps per run (final regrets, messages, floats, cost, declared epsilon, results version) and the
regret curve at every one of the store's log-spaced checkpoints.

``fedbandit reference build`` writes it; ``fedbandit reference check`` re-runs a sample of its
cells and requires bit-identical rows (:func:`check_reference`), which CI does too, so a change
that moves a reference number is caught and the file is rebuilt deliberately. Rows of a results
version that is not the current code's are never ranked with current rows
(:func:`current_reference_rows`).

The file may also carry JAX rows (docs/bench.md, "Backends"): cells whose config names
``"backend": "jax"``, on their own seeds (from :data:`JAX_SEED_OFFSET`; a file whose JAX cell
shares a seed with a numpy cell of its table is refused, so that no comparison ever pairs the
two backends' runs of one seed), checked and compared like the others and never pooled with
numpy rows (their cell hash and results version name the backend). ``fedbandit reference build
--jax`` adds them: the ``standard`` cells and the headline cells on the JAX
backend, those that have a JAX learner (not ``quick``'s: a JAX learner is ranked on
``standard``); the shipped file is built with it.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from fedbandit_env.agent_registry import without_trust_flags
from fedbandit_env.bench import datafiles
from fedbandit_env.bench.backends import JAX, NUMPY, jax_installed, lookup_learner
from fedbandit_env.bench.datafiles import FileFormatError
from fedbandit_env.bench.flags import check_flags
from fedbandit_env.bench.flags import dumps as dump_flags
from fedbandit_env.bench.store import ResultsStore, Row
from fedbandit_env.bench.suites import Cell, get_suite
from fedbandit_env.bench.versions import (
    cell_results_version,
    package_version,
    registered_results_version,
    row_version_key,
)
from fedbandit_env.registration import list_envs

FORMAT = "fedbandit-reference"
FORMAT_VERSION = 1
REFERENCE_PATH = Path(__file__).resolve().parent / "reference" / "reference.json"
MAX_FILE_BYTES = 1 << 28
"""Largest reference file read (256 MiB; the shipped one, numpy and JAX rows, is about 6 MiB)."""
CURVE_POINTS = 100
"""Checkpoints kept per regret curve: evenly spaced indices into the store's log-spaced
checkpoints (which always end at the horizon); at least as many as the store keeps, so every
checkpoint is kept and a reference curve is as smooth as a store's."""

STANDARD = "standard"
QUICK = "quick"
ROBUST = "robust"
"""The robust suite's cells are in the file (numpy only), so a new learner is ranked against
every learner's regret under attack (docs/bench.md, "The robust suite")."""
HEADLINES: dict[str, tuple[int, tuple[str, ...]]] = {
    "gossip": (4, ("ucb1", "gossip_ucb", "gossip_fed_ucb eps=2")),
    "dp_recsys": (10, ("ucb1", "dp_dec_ucb eps=2", "dp_mw_ucb eps=2")),
    "linear": (10, ("linucb", "fed_lin_ucb eps=1 beta_scale=0.01")),
    "commeff": (5, ("ucb1", "cdp_mab eps=1", "ddp_mab eps=1 (star)")),
}
"""Per-paper suite: (seeds kept, labels of its headline cells). A cell's identity does not
include its seeds, so these rows are the first seeds of the suite's own cells."""

JAX_SEED_OFFSET = 1_000_000
"""First seed of the reference's JAX cells (``reference build --jax``): their seeds never meet
the numpy cells' (which start at 0), so the two backends' runs are never paired by seed."""

_PER_RUN = (
    "final_regret_per_agent",
    "final_regret_network",
    "messages",
    "floats",
    "cost",
    "curves",
)
_CELL_KEYS = {
    "suite": str,
    "label": str,
    "cell_hash": str,
    "config": dict,
    "results_version": str,
    "steps": list,
    "seeds": list,
    **{k: list for k in _PER_RUN},
}


class ReferenceError(FileFormatError):
    """A reference file is missing, malformed, of another format or of another package
    version (docs/bench.md, "Reference results")."""


@dataclass(frozen=True)
class Reference:
    """A loaded, validated reference file."""

    path: Path
    package_version: str
    cells: tuple[dict[str, Any], ...]

    def rows(self) -> list[Row]:
        """One store :class:`Row` per (cell, seed); timings are 0 (the file keeps none)."""
        out = []
        for cell in self.cells:
            config = cell["config"]
            env = {"env_id": config["env_id"], "env_kwargs": config["env_kwargs"]}
            steps = json.dumps(cell["steps"])
            for r, seed in enumerate(cell["seeds"]):
                out.append(
                    Row(
                        cell_hash=cell["cell_hash"],
                        seed=int(seed),
                        suite=cell["suite"],
                        env_id=config["env_id"],
                        agent_id=config["agent_id"],
                        label=cell["label"],
                        env_key=json.dumps(env, sort_keys=True),
                        config=json.dumps(config, sort_keys=True),
                        horizon=int(config["env_kwargs"]["horizon"]),
                        final_regret_per_agent=cell["final_regret_per_agent"][r],
                        final_regret_network=cell["final_regret_network"][r],
                        messages=cell["messages"][r],
                        floats=cell["floats"][r],
                        cost=cell["cost"][r],
                        epsilon=_epsilon_in(cell.get("epsilon")),
                        wall_time=0.0,
                        steps=steps,
                        curve=json.dumps(cell["curves"][r]),
                        created=0.0,
                        results_version=cell["results_version"],
                        flags=dump_flags(cell["flags"][r]) if "flags" in cell else "{}",
                    )
                )
        return out


# --- cells -----------------------------------------------------------------------------------


def reference_cells(
    note: Callable[[str], None] = print, jax: bool = False
) -> list[tuple[str, Cell]]:
    """(suite name, cell) of every reference cell: the ``standard``, ``quick`` and ``robust``
    suites' available cells and each per-paper suite's :data:`HEADLINES` (a headline label missing from its suite is an
    error, so a renamed cell is noticed); with ``jax``, the ``standard`` and headline cells on
    the JAX backend too (those with a JAX learner), from seed :data:`JAX_SEED_OFFSET`."""
    out = _backend_cells(NUMPY, (STANDARD, QUICK, ROBUST), note)
    if jax:
        out += [(name, replace(cell, seed=cell.seed + JAX_SEED_OFFSET))
                for name, cell in _backend_cells(JAX, (STANDARD,), note)]  # fmt: skip
    return out


def _backend_cells(
    backend: str, suites: tuple[str, ...], note: Callable[[str], None]
) -> list[tuple[str, Cell]]:
    """(suite name, cell) of the available cells of ``suites`` and the per-paper
    :data:`HEADLINES` on ``backend`` (on JAX: those with a JAX learner, the others noted as
    skipped)."""
    out: list[tuple[str, Cell]] = []
    for name in suites:  # a cell of two suites is kept once, under the first
        seen = {c.config_hash for _, c in out}
        suite = get_suite(name).with_backend(backend)
        out += [(name, c) for c in suite.available(note) if c.config_hash not in seen]
    for name, (runs, labels) in HEADLINES.items():
        suite = get_suite(name).with_backend(backend)
        by_label = {cell.name: cell for cell in suite.cells}
        missing = [label for label in labels if label not in by_label]
        if missing:
            raise ReferenceError(
                f"reference: the headline cells {missing} are not in suite {name!r} (its "
                f"labels: {sorted(by_label)}); update HEADLINES in "
                "fedbandit_env/bench/reference.py"
            )
        available = {c.config_hash for c in suite.available(note)}
        seen = {c.config_hash for _, c in out}
        for label in labels:
            cell = by_label[label]
            if cell.config_hash in available and cell.config_hash not in seen:
                out.append((name, replace(cell, runs=min(runs, cell.runs))))
    return out


def _curve_index(n: int) -> np.ndarray:
    return np.unique(np.round(np.linspace(0, n - 1, min(CURVE_POINTS, n))).astype(np.int64))


def _epsilon_out(epsilon: float | None) -> float | str | None:
    if epsilon is None:
        return None
    return "inf" if math.isinf(epsilon) else float(epsilon)


def _epsilon_in(value: Any) -> float | None:
    if value is None:
        return None
    return math.inf if value == "inf" else float(value)


def cell_record(suite: str, rows: list[Row] | list[dict[str, Any]]) -> dict[str, Any]:
    """The reference record of one cell's rows (store rows or rows as dicts, one results
    version, sorted by seed)."""
    rows = [r if isinstance(r, dict) else r.__dict__ for r in rows]
    rows = sorted(rows, key=lambda r: r["seed"])
    first = rows[0]
    steps = json.loads(first["steps"])
    index = _curve_index(len(steps))
    return {
        "suite": suite,
        "label": first["label"],
        "cell_hash": first["cell_hash"],
        "config": json.loads(first["config"]),
        "results_version": first["results_version"],
        "epsilon": _epsilon_out(first["epsilon"]),
        "steps": [steps[i] for i in index],
        "seeds": [int(r["seed"]) for r in rows],
        "final_regret_per_agent": [float(r["final_regret_per_agent"]) for r in rows],
        "final_regret_network": [float(r["final_regret_network"]) for r in rows],
        "messages": [int(r["messages"]) for r in rows],
        "floats": [int(r["floats"]) for r in rows],
        "cost": [float(r["cost"]) for r in rows],
        "curves": [[float(json.loads(r["curve"])[i]) for i in index] for r in rows],
        **_flags_out(rows),
    }


def _flags_out(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """``{"flags": [one dict per seed]}`` when some row has flags (docs/bench.md, "Flags"),
    else nothing (a cell without flags keeps the bytes of a file written before them)."""
    flags = [json.loads(r.get("flags") or "{}") for r in rows]
    return {"flags": flags} if any(flags) else {}


def dumps(cells: Iterable[dict[str, Any]], version: str | None = None) -> str:
    """The file's text: a header, then one cell per line, sorted (same cells, same bytes)."""
    cells = sorted(
        cells,
        key=lambda c: (
            c["suite"],
            c["config"]["env_id"],
            c["label"],
            c["cell_hash"],
            c["results_version"],
        ),
    )
    header = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "package_version": version or package_version(),
        "curve_points": CURVE_POINTS,
        "headlines": {name: list(labels) for name, (_, labels) in HEADLINES.items()},
    }
    head = json.dumps(header, sort_keys=True, allow_nan=False)[:-1]
    lines = [json.dumps(c, sort_keys=True, separators=(",", ":"), allow_nan=False) for c in cells]
    return head + ', "cells": [\n' + ",\n".join(lines) + "\n]}\n"


# --- build -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class BuildReport:
    path: Path
    cells: int
    rows: int
    size: int
    wall_time: float


def build_reference(
    out: str | Path = REFERENCE_PATH,
    executor: str = "joblib",
    n_jobs: int = 2,
    store: str | Path | None = None,
    chunk: int = 10,
    note: Callable[[str], None] = print,
    progress: bool = False,
    jax: bool = False,
) -> BuildReport:
    """Run every reference cell (into ``store``, a temporary one by default, so nothing stale
    can leak in) and write the reference file ``out`` atomically; with ``jax``, the JAX cells
    of :func:`reference_cells` too (needs the ``jax`` extra)."""
    from fedbandit_env.bench.backends import jax_backend
    from fedbandit_env.bench.executors import WorkUnit, execute, learner_entry, require_executor

    require_executor(executor)
    if jax:
        jax_backend()  # a missing extra is an error before anything runs
    start = time.perf_counter()
    cells = reference_cells(note, jax=jax)
    with tempfile.TemporaryDirectory(prefix="fedbandit-reference-") as tmp:
        results = ResultsStore(store if store is not None else Path(tmp) / "reference.sqlite")
        units = []
        for suite, cell in cells:
            version = cell_results_version(cell)
            missing = sorted(set(cell.seeds) - results.done_seeds(cell.config_hash, version))
            entry = learner_entry(cell)
            step = chunk if cell.backend == NUMPY else max(len(missing), 1)  # one compile a cell
            for i in range(0, len(missing), step):
                seeds = tuple(missing[i : i + step])
                units.append(WorkUnit(suite, cell, seeds, entry, version))
        bar = None
        if progress:
            from tqdm import tqdm

            bar = tqdm(total=len(units), desc="reference", unit="unit")
        for rows in execute(units, executor, n_jobs):
            results.append(rows)
            if bar is not None:
                bar.update(1)
        if bar is not None:
            bar.close()
        records = []
        n_rows = 0
        for suite, cell in cells:
            version = cell_results_version(cell)
            rows = [r for r in results.rows_for([cell]) if r.results_version == version]
            n_rows += len(rows)
            records.append(cell_record(suite, rows))
        results.close()
    text = dumps(records)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp_out = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    tmp_out.write_text(text)
    os.replace(tmp_out, out)
    return BuildReport(out, len(records), n_rows, len(text.encode()), time.perf_counter() - start)


# --- load ------------------------------------------------------------------------------------


def _bad(path: Path, where: str, what: str) -> ReferenceError:
    return ReferenceError(
        f"reference: {path}: {where}: {what}; rebuild it with `fedbandit reference build`"
    )


def _error(message: str) -> ReferenceError:
    return ReferenceError(f"reference: {message}")


def _config_hash(config: dict[str, Any]) -> str:
    text = json.dumps(config, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _validate_cell(path: Path, i: int, cell: Any) -> dict[str, Any]:
    """One cell record, field by field (:mod:`fedbandit_env.bench.datafiles`): every error
    names the file, the cell and the field."""
    where = f"{path}: cell {i}"
    datafiles.expect_object(cell, where, _error)
    label = cell.get("label")
    where = f"{path}: cell {i} ({str(label)[:80] if isinstance(label, str) else '?'})"
    for key, kind in _CELL_KEYS.items():
        if key not in cell:
            raise _bad(path, where.removeprefix(f"{path}: "), f"missing field {key!r}")
        if not isinstance(cell[key], kind):
            raise _error(f"{where}: field {key!r}: expected a JSON {kind.__name__}")
    for key in ("suite", "label", "cell_hash", "results_version"):
        datafiles.expect_str(cell[key], f"{where}: {key}", _error)
    config = datafiles.check_config(cell["config"], f"{where}: config", _error)
    horizon = datafiles.expect_int(
        config["env_kwargs"].get("horizon"), f"{where}: config.env_kwargs.horizon", _error, low=1
    )
    if _config_hash(config) != cell["cell_hash"]:
        raise _bad(path, where.removeprefix(f"{path}: "),
                   "cell_hash does not match its config (the file was edited)")  # fmt: skip
    epsilon = cell.get("epsilon")
    if not (epsilon is None or epsilon == "inf"):
        if not datafiles.is_number(epsilon):
            raise _error(f'{where}: epsilon: expected a number, "inf" or null, got {epsilon!r:.40}')
        datafiles.expect_float(epsilon, f"{where}: epsilon", _error)
    seeds = datafiles.expect_numbers(cell["seeds"], f"{where}: seeds", _error, integer=True)
    if not seeds or len(set(seeds)) != len(seeds) or min(seeds) < 0:
        raise _error(f"{where}: seeds: expected distinct integers >= 0")
    steps = datafiles.check_steps(cell["steps"], f"{where}: steps", horizon, _error)
    for key in _PER_RUN:
        if len(cell[key]) != len(seeds):
            raise _error(f"{where}: {key}: expected one value per seed ({len(seeds)})")
    for key in ("messages", "floats"):
        datafiles.expect_numbers(cell[key], f"{where}: {key}", _error, integer=True)
        if min(cell[key]) < 0:
            raise _error(f"{where}: {key}: expected integers >= 0")
    for key in ("final_regret_per_agent", "final_regret_network", "cost"):
        datafiles.expect_numbers(cell[key], f"{where}: {key}", _error)
    for r, curve in enumerate(cell["curves"]):
        datafiles.expect_numbers(curve, f"{where}: curves[{r}]", _error, length=len(steps))
    if "flags" in cell:
        flags = cell["flags"]
        if not isinstance(flags, list) or len(flags) != len(seeds):
            raise _error(f"{where}: flags: expected a list of one object per seed ({len(seeds)})")
        for r, one in enumerate(flags):
            check_flags(one, f"{where}: flags[{r}]", _error)
    return cell


def load_reference(path: str | Path | None = None, check_version: bool = True) -> Reference:
    """Read and validate a reference file as data (:mod:`fedbandit_env.bench.datafiles`:
    UTF-8, bounded lines, depth and numbers; every field checked). A missing or malformed file,
    another format or format version, and (with ``check_version``) a file built by another
    package version are a :class:`ReferenceError` naming the file, the cell and the field."""
    path = Path(REFERENCE_PATH if path is None else path)
    if not path.exists():
        raise ReferenceError(
            f"reference: {path} does not exist; build it with `fedbandit reference build`"
        )
    text = datafiles.read_text(path, "reference", _error, limit=MAX_FILE_BYTES)
    data = datafiles.parse_json(text, str(path), error=_error)
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ReferenceError(
            f'reference: {path} is not a fedbandit reference file (expected "format": "{FORMAT}")'
        )
    if data.get("format_version") != FORMAT_VERSION:
        raise ReferenceError(
            f"reference: {path} has format version {datafiles.got(data.get('format_version'))}, "
            f"this fedbandit reads version {FORMAT_VERSION}; rebuild it with `fedbandit "
            "reference build` or use the fedbandit that wrote it"
        )
    version = data.get("package_version")
    if not isinstance(version, str):
        raise _bad(path, "header", "package_version: expected a string")
    if check_version and version != package_version():
        raise ReferenceError(
            f"reference: {path} was built by fedbandit {version[:40]} and this is fedbandit "
            f"{package_version()}: its rows are of another results version and are never "
            "ranked with this version's rows; rebuild it with `fedbandit reference build "
            "--out PATH` (docs/bench.md, reference results)"
        )
    cells = data.get("cells")
    if not isinstance(cells, list):
        raise _bad(path, "header", "cells: expected a JSON array")
    checked = tuple(_validate_cell(path, i, c) for i, c in enumerate(cells))
    keys = [(c["cell_hash"], c["results_version"]) for c in checked]
    if len(set(keys)) != len(keys):
        raise _bad(path, "cells", "a cell appears twice at the same results version")
    _check_backend_seeds(path, checked)
    return Reference(path, version, checked)


def _table_of(cell: dict[str, Any]) -> str:
    config = cell["config"]
    return json.dumps({"env_id": config["env_id"], "env_kwargs": config["env_kwargs"]},
                      sort_keys=True)  # fmt: skip


def _check_backend_seeds(path: Path, cells: tuple[dict[str, Any], ...]) -> None:
    """A non-numpy cell's seeds are disjoint from the numpy cells' seeds of its table (the
    same seed on two backends is two different draws: they must never be paired)."""
    numpy_seeds: dict[str, set[int]] = defaultdict(set)
    for cell in cells:
        if datafiles.config_backend(cell["config"]) == NUMPY:
            numpy_seeds[_table_of(cell)].update(cell["seeds"])
    for i, cell in enumerate(cells):
        backend = datafiles.config_backend(cell["config"])
        if backend == NUMPY:
            continue
        shared = sorted(numpy_seeds[_table_of(cell)].intersection(cell["seeds"]))
        if shared:
            raise _error(
                f"{path}: cell {i} ({str(cell['label'])[:80]}): seeds: a {backend} cell's seeds "
                f"must be disjoint from the numpy cells' seeds of its table, got {shared[:5]} in "
                f"both (the reference's {backend} cells start at seed {JAX_SEED_OFFSET})"
            )


# --- ranking against the reference ------------------------------------------------------------


def current_reference_rows(rows: list[Row], note: Callable[[str], None] = print) -> list[Row]:
    """The reference rows whose results version is the current code's; the others are left
    out (never pooled) and ``note`` names them. Rows whose learner or environment is not
    registered here are left out too (their version cannot be judged). Ids are looked up in
    this process's registries, never imported, and no learner is built
    (:func:`~fedbandit_env.bench.versions.registered_results_version`)."""
    kept, stale, unknown = [], defaultdict(list), set()
    versions: dict[tuple[str, str, bool, str, bool | None], str | None] = {}
    for row in rows:
        key = row_version_key(row)
        if key not in versions:
            versions[key] = registered_results_version(*key)
        want = versions[key]
        if want is None and not _runnable(row.env_id, row.agent_id, row.backend):
            unknown.add(row.label)
        elif want is None or want == row.results_version:
            kept.append(row)
        else:
            stale[row.label].append(row)
    if stale:
        n = sum(len(v) for v in stale.values())
        detail = "; ".join(
            f"{label}: reference {rows_[0].results_version!r}" for label, rows_ in stale.items()
        )
        note(
            f"reference: {n} row(s) of {', '.join(sorted(stale))} left out: the reference was "
            f"built with other versions of these learners or environments than this code "
            f"({detail}); rebuild it with `fedbandit reference build` (docs/bench.md)"
        )
    if unknown:
        note(
            f"reference: rows of {', '.join(sorted(unknown))} left out: their learner or "
            "environment is not registered here"
        )
    return kept


def _runnable(env_id: str, agent_id: str, backend: str = NUMPY) -> bool:
    """Whether both ids are registered in this process, the learner in the registry of
    ``backend`` (looked up, never imported)."""
    return env_id in set(list_envs()) and lookup_learner(agent_id, backend) is not None


def merge_rows(store_rows: list[Row], reference_rows: list[Row]) -> list[Row]:
    """The store's rows plus the reference rows of the (cell, results version, seed) keys the
    store does not hold (a user who ran a reference cell keeps their own rows)."""
    have = {(r.cell_hash, r.results_version, r.seed) for r in store_rows}
    extra = [r for r in reference_rows if (r.cell_hash, r.results_version, r.seed) not in have]
    return [*store_rows, *extra]


def rows_of_cells(rows: list[Row], cells: Iterable[Cell]) -> list[Row]:
    """The rows of ``cells`` (by hash and seed range), labelled with the cells' labels."""
    wanted = {cell.config_hash: cell for cell in cells}
    out = []
    for row in rows:
        cell = wanted.get(row.cell_hash)
        if cell is not None and cell.seed <= row.seed < cell.seed + cell.runs:
            out.append(replace(row, label=cell.name))
    return out


# --- check -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class CheckReport:
    checked: list[str]  # "label (suite, cell hash)" of each re-run cell
    skipped: list[str]  # "name: reason" of cells not re-run (an id not registered here, ...)
    differences: list[str]  # one line per differing (cell, seed, field)


def _compare(ref: dict[str, Any], new: dict[str, Any], name: str) -> list[str]:
    out = []
    if ref["results_version"] != new["results_version"]:
        return [
            f"{name}: results version: reference {ref['results_version']!r}, this code "
            f"{new['results_version']!r} (a learner or environment changed its version)"
        ]
    for key in ("steps", "epsilon"):
        if ref.get(key) != new.get(key):
            out.append(f"{name}: {key}: reference {ref.get(key)!r}, re-run {new.get(key)!r}")
    index = {s: i for i, s in enumerate(new["seeds"])}
    for r, seed in enumerate(ref["seeds"]):
        n = index[seed]
        fields = [k for k in _PER_RUN if ref[k][r] != new[k][n]]
        if fields:
            first = fields[0]
            was, now = ref[first][r], new[first][n]
            if first == "curves":
                i = next(i for i, (a, b) in enumerate(zip(was, now, strict=True)) if a != b)
                was, now = f"{was[i]!r} at step {ref['steps'][i]}", repr(now[i])
            out.append(
                f"{name}, seed {seed}: {', '.join(fields)} differ (e.g. {first}: "
                f"reference {was}, re-run {now})"
            )
    return out


def check_reference(
    reference: Reference,
    sample: int | None = None,
    seeds: int | None = None,
    seed: int = 0,
    suites: Iterable[str] | None = None,
    max_horizon: int | None = None,
    note: Callable[[str], None] = print,
) -> CheckReport:
    """Re-run ``sample`` cells of the reference (all by default), chosen by a generator seeded
    with ``seed`` among the cells whose learner and environment are installed (restricted to
    ``suites`` and to horizons up to ``max_horizon`` when given), on their first ``seeds``
    seeds (all by default), and compare every number with the reference, bit for bit. A JAX
    cell re-runs all its seeds whatever ``seeds`` (one rollout of the batch it was built
    with)."""
    from fedbandit_env.bench.executors import WorkUnit, learner_entry, run_unit

    candidates, skipped = [], []
    for cell in reference.cells:
        config = cell["config"]
        name = f"{cell['label']} ({cell['suite']}, cell {cell['cell_hash']})"
        if suites is not None and cell["suite"] not in set(suites):
            continue
        if max_horizon is not None and config["env_kwargs"]["horizon"] > max_horizon:
            continue
        backend = datafiles.config_backend(config)
        if backend == JAX and not jax_installed():
            skipped.append(f"{name}: a JAX cell, and JAX is not installed here "
                           "(pip install 'fedbandit[jax]')")  # fmt: skip
            continue
        if not _runnable(config["env_id"], config["agent_id"], backend):  # never imported or run
            skipped.append(f"{name}: its learner or environment is not registered here")
            continue
        if without_trust_flags(config["agent_kwargs"]) != config["agent_kwargs"]:
            skipped.append(f"{name}: its agent_kwargs carry a trust flag, which a file cannot set")
            continue
        candidates.append((name, cell))
    if sample is not None and sample < len(candidates):
        order = np.random.default_rng(seed).permutation(len(candidates))[:sample]
        candidates = [candidates[i] for i in sorted(order)]
    checked, differences = [], []
    for name, cell in candidates:
        config = cell["config"]
        env_kwargs = dict(config["env_kwargs"])
        horizon = env_kwargs.pop("horizon")
        # a JAX cell re-runs all its seeds in one rollout, as it was built: XLA may round a
        # batch of another size differently, and a run's trajectory can follow the rounding
        # (docs/jax.md, "Numbers"); the same program gives the same bits
        jax_cell = datafiles.config_backend(config) == JAX
        run_seeds = cell["seeds"] if jax_cell else cell["seeds"][: seeds or None]
        cells = Cell(
            config["env_id"],
            config["agent_id"],
            horizon,
            len(run_seeds),
            env_kwargs,
            dict(config["agent_kwargs"]),
            run_seeds[0],
            cell["label"],
            dict(config.get("privacy") or {}),
            datafiles.config_backend(config),
        )
        if cells.config_hash != cell["cell_hash"]:
            differences.append(f"{name}: the cell's hash is {cells.config_hash} in this code")
            continue
        note(f"reference check: {name}, seeds {run_seeds[0]}..{run_seeds[-1]}")
        unit = WorkUnit(cell["suite"], cells, tuple(run_seeds), learner_entry(cells))
        new = cell_record(cell["suite"], run_unit(unit))
        ref = {**cell, **{k: cell[k][: len(run_seeds)] for k in ("seeds", *_PER_RUN)}}
        differences.extend(_compare(ref, new, name))
        checked.append(name)
    return CheckReport(checked, skipped, differences)
