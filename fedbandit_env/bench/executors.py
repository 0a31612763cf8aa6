"""Sweeps: split suites into work units and run them serially, in local processes or on Ray.

docs/bench.md, "Executors". A work unit is (cell, contiguous seeds); its result is a
list of store rows. Every run of a batch is bit-identical to the same seed run alone, so any
split of the seeds and any executor give identical numbers. The parent process writes each
finished unit to the store in one transaction as soon as it arrives; the serial executor claims
each unit just before running it, so several processes running one suite on one store split it.

A unit also carries its learner's registry entry, which the worker re-registers before running
(:func:`fedbandit_env.agent_registry.ensure_agent`), so learners registered at runtime in the
parent are known in joblib and Ray workers too; a JAX cell's unit carries the JAX learner
registry's entry (:func:`fedbandit_env.bench.backends.ensure_jax_agent`) and runs on the cell's
backend (docs/bench.md, "Backends"). joblib and Ray are optional dependencies (extras
``bench`` and ``ray``); a missing one raises a :class:`ConfigError` naming the extra.
"""

from __future__ import annotations

import copy
import importlib
import os
import re
import socket
import uuid
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fedbandit_env.agent_registry import Entry, agent_entry, ensure_agent
from fedbandit_env.bench.backends import NUMPY, check_backend, ensure_jax_agent, jax_entry
from fedbandit_env.bench.evaluate import EvalResult, evaluate
from fedbandit_env.bench.store import ResultsStore, log_checkpoints, rows_from_result
from fedbandit_env.bench.suites import Cell, Suite
from fedbandit_env.bench.versions import cell_results_version
from fedbandit_env.errors import ConfigError, LearnerError

EXECUTORS = ("serial", "joblib", "ray")


@dataclass(frozen=True)
class WorkUnit:
    suite: str
    cell: Cell
    seeds: tuple[int, ...]  # contiguous
    agent_entry: Entry  # the planner's registry entry of cell.agent_id (of the cell's backend)
    results_version: str = ""  # the current one when planned (fedbandit_env.bench.versions)


def learner_entry(cell: Cell) -> Entry:
    """The registry entry of a cell's learner, in the registry of the cell's backend."""
    return agent_entry(cell.agent_id) if cell.backend == NUMPY else jax_entry(cell.agent_id)


def run_unit(unit: WorkUnit) -> list[dict[str, Any]]:
    """Evaluate one unit (a batch of contiguous seeds of one cell) on the cell's backend and
    return its rows."""
    cell = unit.cell
    if cell.backend == NUMPY:
        ensure_agent(cell.agent_id, unit.agent_entry)
    else:
        ensure_jax_agent(cell.agent_id, unit.agent_entry)
    try:
        result = evaluate(
            cell.env_id,
            cell.agent_id,
            runs=len(unit.seeds),
            seed=unit.seeds[0],
            env_kwargs={**cell.env_kwargs, "horizon": cell.horizon},
            agent_kwargs=dict(cell.agent_kwargs),
            checkpoints=log_checkpoints(cell.horizon),
            privacy=dict(cell.privacy) or None,
            backend=cell.backend,
        )
    except LearnerError as err:  # name the environment, not only the cell hash
        from fedbandit_env.bench.text import env_title

        raise LearnerError(f"{err} [on {env_title(cell.env_key)}]", err.agent, err.run) from err
    return rows_from_result(cell, unit.suite, result)


def _contiguous(seeds: list[int], chunk: int) -> Iterator[tuple[int, ...]]:
    run: list[int] = []
    for s in sorted(seeds):
        if run and (s != run[-1] + 1 or len(run) == chunk):
            yield tuple(run)
            run = []
        run.append(s)
    if run:
        yield tuple(run)


def plan(suite: Suite, cells: Iterable[Cell], store: ResultsStore, chunk: int) -> list[WorkUnit]:
    """The units still to run: the seeds of each cell not yet in the store at the current
    results version (:mod:`fedbandit_env.bench.versions`), in chunks."""
    units = []
    for cell in cells:
        version = cell_results_version(cell)
        missing = sorted(set(cell.seeds) - store.done_seeds(cell.config_hash, version))
        entry = learner_entry(cell)
        units.extend(
            WorkUnit(suite.name, cell, seeds, entry, version)
            for seeds in _contiguous(missing, chunk)
        )
    return units


EXTRAS = {"joblib": ("joblib", "bench"), "ray": ("ray", "ray")}
JOBLIB_MIN = (1, 4)  # Parallel(return_as="generator_unordered")


def require_executor(executor: str) -> None:
    """Raise a clear error if ``executor`` is unknown or its optional dependency is missing."""
    if executor not in EXECUTORS:
        raise ConfigError(f"executor: expected one of {EXECUTORS}, got {executor!r}")
    if executor not in EXTRAS:
        return
    module, extra = EXTRAS[executor]
    hint = f"pip install 'fedbandit[{extra}]' (in a checkout: pip install -e '.[{extra}]')"
    try:
        loaded = importlib.import_module(module)
    except ImportError:
        raise ConfigError(
            f"executor: {executor!r} needs the {module} package, which is not installed; {hint}"
        ) from None
    if module == "joblib":
        version = tuple(int(p) for p in re.findall(r"\d+", loaded.__version__)[:2])
        if version < JOBLIB_MIN:
            raise ConfigError(
                f"executor: 'joblib' needs joblib >= 1.4, found {loaded.__version__}; {hint}"
            )


LOOPBACK = "127.0.0.1"
_RAY_CLUSTER_SWITCH = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"


def start_local_ray(n_jobs: int) -> None:
    """Start a Ray instance on this machine only: bound to the loopback address, with no
    dashboard, so that no other machine can reach it (a Ray head on an outside interface
    accepts jobs from the network). Joining a real cluster goes through ``--ray-address``
    (docs/bench.md, "Executors")."""
    import ray
    from ray._private import ray_constants

    # Ray turns a loopback node address into the host's outside address unless it runs as a
    # single-machine instance (its RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER switch, read once at import,
    # off by default on Windows and macOS only): set it off for this start and its processes.
    saved = ray_constants.ENABLE_RAY_CLUSTER, os.environ.get(_RAY_CLUSTER_SWITCH)
    ray_constants.ENABLE_RAY_CLUSTER = False
    os.environ[_RAY_CLUSTER_SWITCH] = "0"
    try:
        ray.init(
            num_cpus=n_jobs,
            include_dashboard=False,
            log_to_driver=False,
            _node_ip_address=LOOPBACK,
        )
    finally:
        ray_constants.ENABLE_RAY_CLUSTER = saved[0]
        if saved[1] is None:
            os.environ.pop(_RAY_CLUSTER_SWITCH, None)
        else:
            os.environ[_RAY_CLUSTER_SWITCH] = saved[1]


@dataclass(frozen=True)
class UnitFailure:
    """A work unit whose learner raised (``run_suite(..., failures=[])`` goes on)."""

    label: str
    cell_hash: str
    seeds: tuple[int, ...]
    error: str

    def __str__(self) -> str:
        return (f"{self.label} (cell {self.cell_hash}, seeds {self.seeds[0]}..{self.seeds[-1]}): "
                f"{self.error}")  # fmt: skip


def run_unit_or_failure(unit: WorkUnit) -> list[dict[str, Any]] | UnitFailure:
    """:func:`run_unit`, with a learner's error returned as a :class:`UnitFailure`."""
    try:
        return run_unit(unit)
    except LearnerError as err:
        return UnitFailure(unit.cell.name, unit.cell.config_hash, unit.seeds, str(err))


def execute(
    units: Iterable[WorkUnit],
    executor: str = "serial",
    n_jobs: int = 2,
    ray_address: str | None = None,
    fn: Callable[[WorkUnit], Any] = run_unit,
) -> Iterator[Any]:
    """Yield ``fn(unit)`` (by default each unit's rows) as each unit finishes (in completion
    order for parallel executors)."""
    require_executor(executor)
    if executor == "serial":
        for unit in units:
            yield fn(unit)
    elif executor == "joblib":
        from joblib import Parallel, delayed

        parallel = Parallel(n_jobs=n_jobs, return_as="generator_unordered")
        yield from parallel(delayed(fn)(u) for u in units)
    elif executor == "ray":
        import ray

        if not ray.is_initialized():
            if ray_address:
                ray.init(address=ray_address, log_to_driver=False)
            else:
                start_local_ray(n_jobs)
        remote = ray.remote(fn)
        pending = [remote.remote(u) for u in units]
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            yield ray.get(done[0])


@dataclass(frozen=True)
class EvalTask:
    """One :func:`evaluate` call of a script's sweep (the paper reproductions' cells).

    ``attrs`` names attributes of the learner read after the run (e.g. ``"rounds_done"``):
    under a parallel executor the learner runs in a worker, so the caller gets them back in
    the result instead of reading its own copy."""

    env_id: str
    agent: Any
    runs: int
    seed: int = 0
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    checkpoints: Any = None
    attrs: tuple[str, ...] = ()
    backend: str = NUMPY  # "numpy" or "jax" (evaluate's backend)

    def __post_init__(self) -> None:
        check_backend(self.backend)


def run_task(task: EvalTask) -> tuple[EvalResult, dict[str, Any]]:
    """Evaluate one task on a private copy of its learner; the result and the ``attrs``."""
    agent = task.agent if isinstance(task.agent, str) else copy.deepcopy(task.agent)
    result = evaluate(
        task.env_id,
        agent,
        runs=task.runs,
        seed=task.seed,
        env_kwargs=dict(task.env_kwargs),
        checkpoints=task.checkpoints,
        backend=task.backend,
    )
    if task.backend == NUMPY or not task.attrs:
        return result, {name: copy.deepcopy(getattr(agent, name)) for name in task.attrs}
    return result, jax_attrs(agent, task.attrs, result.learner_state)


def jax_attrs(learner: Any, names: tuple[str, ...], state: Any) -> dict[str, Any]:
    """A JAX learner's after-run attributes (the numpy twin's ``rounds_done`` and the like,
    per run) read from its final state, batched over runs, by its ``run_attrs(state)``; a
    learner without them, or without one of ``names``, is a ConfigError naming it."""
    read = getattr(learner, "run_attrs", None)
    found = read(state) if callable(read) else {}
    missing = [name for name in names if name not in found]
    if missing:
        raise ConfigError(
            f"attrs: the JAX learner {getattr(learner, 'agent_id', learner)!r} does not report "
            f"{missing} (expected among {sorted(found)} from its run_attrs(state))"
        )
    return {name: np.asarray(found[name]) for name in names}


def _keyed_task(item: tuple[Hashable, EvalTask]) -> tuple[Hashable, Any]:
    key, task = item
    return key, run_task(task)


def evaluate_many(
    tasks: Mapping[Hashable, EvalTask], executor: str = "serial", n_jobs: int = 2
) -> dict[Hashable, tuple[EvalResult, dict[str, Any]]]:
    """Run independent :class:`EvalTask` s through :func:`execute` (serial, joblib or Ray with
    ``n_jobs`` workers); the results keyed and ordered as the tasks. Any executor gives
    identical numbers (each task is seeded)."""
    require_executor(executor)
    if n_jobs == 1 or len(tasks) <= 1:
        executor = "serial"
    done = dict(execute(list(tasks.items()), executor, n_jobs, fn=_keyed_task))
    return {key: done[key] for key in tasks}


def _missing(unit: WorkUnit, store: ResultsStore) -> bool:
    done = store.done_seeds(unit.cell.config_hash, unit.results_version or None)
    return bool(set(unit.seeds) - done)


def claimed(units: list[WorkUnit], store: ResultsStore) -> Iterator[WorkUnit]:
    """The units in order, each claimed in the store just before it runs; a unit finished or
    claimed by another writer meanwhile is skipped, the claimed ones are re-checked at the end
    and run if their rows are still missing (that writer may have been killed). Concurrent
    serial writers thus split a suite between them (docs/reliability.md, "Concurrent
    writers")."""
    owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
    deferred = []
    for unit in units:
        if not _missing(unit, store):
            continue
        if store.claim(unit.cell.config_hash, unit.seeds[0], owner, unit.results_version):
            yield unit
        else:
            deferred.append(unit)
    for unit in deferred:
        if _missing(unit, store):
            yield unit


def run_suite(
    suite: Suite,
    store: ResultsStore,
    executor: str = "serial",
    n_jobs: int = 2,
    chunk: int = 10,
    ray_address: str | None = None,
    quiet: bool = False,
    verbose: bool = False,
    failures: list[str] | None = None,
) -> int:
    """Run every missing (cell, seed) of ``suite`` into ``store``; returns rows written.
    Skipped cells are one summary line (:meth:`Suite.skip_summary`), or with ``verbose`` one
    line per environment and reason; ``quiet`` prints nothing. With a ``failures`` list, a
    unit whose learner raises is appended to it (:class:`UnitFailure`) and the suite goes on;
    without, the first such error stops the suite (the finished units' rows are kept)."""
    require_executor(executor)
    cells, skipped = suite.split()
    if verbose and not quiet:
        suite.note_skipped(skipped, print)
    elif not quiet and (summary := suite.skip_summary(skipped, cells)):
        print(summary)
    if not quiet and (gaps := suite.backend_summary(cells, skipped)):
        print(gaps)  # the cells another backend cannot run are always named
    units = plan(suite, cells, store, chunk)
    bar = None
    if not quiet:
        from tqdm import tqdm

        bar = tqdm(total=len(units), desc=f"suite {suite.name}", unit="unit")
    written = 0
    todo = claimed(units, store) if executor == "serial" else units
    fn = run_unit if failures is None else run_unit_or_failure
    for rows in execute(todo, executor, n_jobs, ray_address, fn):
        if isinstance(rows, UnitFailure):
            failures.append(str(rows))
            continue
        written += store.append(rows)
        if bar is not None:
            bar.update(1)
    if bar is not None:
        bar.close()
    return written
