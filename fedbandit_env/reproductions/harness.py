"""What every paper reproduction shares: its options, data and output folders, the fan-out of
its work through :mod:`fedbandit_env.bench.executors`, the cache of finished units and the
claims file (docs/reproductions.md).

A script builds its options with :func:`parser` (``--full``, ``--executor``, ``--jobs``,
``--claims``, ``--out`` and, where asked, ``--data`` and ``--no-cache``), adds its own scale
flags, runs its work units with :func:`fan_out` (or :func:`run_tasks` for
:class:`~fedbandit_env.bench.executors.EvalTask` s, or :func:`cached` for units worth keeping
between invocations), and ends with :func:`write_claims`. It draws its figure, if any, with the
pyplot of :func:`pyplot`, which is ``None`` without matplotlib (the optional ``plots`` extra):
the script then writes its tables and claims file and says in one line that the figure was not
drawn.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shlex
import sys
import time
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from fedbandit_env.bench.executors import EXECUTORS, EvalTask, evaluate_many, execute
from fedbandit_env.datasets.files import DATA_VAR, data_file

OUT_ROOT = Path("benchmarks/out")  # relative to the current folder (git-ignored in a checkout)
# the one line a run without matplotlib (the optional plots extra) writes instead of its figure
PLOTS_NOTE = (
    'figure not drawn: matplotlib is not installed; pip install "fedbandit[plots]" draws it'
)


def parser(
    name: str,
    doc: str,
    *,
    executor: str | None = "serial",
    jobs: int = 2,
    data: bool = False,
    cache: bool = False,
    backend: bool = False,
) -> argparse.ArgumentParser:
    """The options every reproduction has. ``executor=None``: ``--executor`` defaults to
    serial at CI scale and joblib with ``--full`` (read it with :func:`executor_of`).
    ``backend``: the reproduction also runs on the JAX backend (``--backend jax``, docs/jax.md)."""
    p = argparse.ArgumentParser(
        prog=f"fedbandit reproduce {name}",
        description=doc,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--full", action="store_true", help="the large scale (see the description)")
    default = "serial at CI scale, joblib with --full" if executor is None else executor
    p.add_argument(
        "--executor",
        choices=EXECUTORS,
        default=executor,
        help=f"where the work units run (fedbandit_env.bench.executors; default: {default})",
    )
    p.add_argument("--jobs", type=int, default=jobs, help="workers of the executor (%(default)s)")
    p.add_argument("--claims", type=Path, default=None, help="write the claims file (JSON) here")
    p.add_argument(
        "--out",
        type=Path,
        default=OUT_ROOT / name.replace("-", "_"),
        help="output folder: tables, figures, cache (default: %(default)s)",
    )
    if data:
        p.add_argument(
            "--data",
            default=None,
            help=f"the data folder (default: ${DATA_VAR}; docs/reproductions.md, 'Data sets')",
        )
    if cache:
        p.add_argument("--no-cache", action="store_true", help="recompute every cached unit")
    if backend:
        p.add_argument(
            "--backend",
            choices=BACKENDS,
            default="numpy",
            help="the engine: numpy, or the compiled JAX backend (docs/jax.md; default numpy)",
        )
    return p


BACKENDS = ("numpy", "jax")


def backend_meta(args: argparse.Namespace) -> dict[str, str]:
    """The claims file's ``meta`` entries of the backend and the device it ran on."""
    backend = getattr(args, "backend", "numpy")
    if backend != "jax":
        return {"backend": "numpy", "device": "cpu (numpy)"}
    from fedbandit_env.jax.rollout import describe_device

    return {"backend": "jax", "device": describe_device()}


def add_paper_scale(p: argparse.ArgumentParser, what: str) -> None:
    """The ``--paper-scale`` option of a reproduction (``what``: the grid it runs); it needs
    ``--backend jax`` (:func:`check_paper_scale`)."""
    p.add_argument(
        "--paper-scale",
        action="store_true",
        help=f"the paper's own scale: {what} (needs --backend jax, and a GPU to finish in minutes)",
    )


def check_paper_scale(p: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """``--paper-scale`` is JAX-only and one scale at a time; ``--backend jax`` runs in this
    process (one process compiles and owns the device)."""
    if getattr(args, "paper_scale", False):
        if args.backend != "jax":
            p.error("--paper-scale: expected --backend jax (on the numpy engine it would take "
                    "days of CPU; docs/reproductions.md)")  # fmt: skip
        if args.full:
            p.error("--paper-scale: expected without --full (one scale at a time)")
    if getattr(args, "backend", "numpy") == "jax":
        args.executor, args.jobs = "serial", 1


def learner(
    args: argparse.Namespace, agent_id: str, numpy_only: bool = False, **kwargs: Any
) -> tuple[Any, str]:
    """(learner, backend) of one task: with ``--backend jax`` the JAX port of ``agent_id``
    built with ``kwargs`` (docs/jax.md), else the numpy learner; a learner without a JAX port,
    or a task the caller marks ``numpy_only``, runs on numpy whatever the backend (the claims
    file's ``meta`` names such tasks, :func:`numpy_fallbacks`)."""
    if getattr(args, "backend", "numpy") == "jax" and not numpy_only:
        import fedbandit_env.jax as fj

        if agent_id in fj.list_jax_agents():
            return fj.make_jax_agent(agent_id, **kwargs), "jax"
    from fedbandit_env.agent_registry import make_agent

    return make_agent(agent_id, **kwargs), "numpy"


def numpy_fallbacks(
    args: argparse.Namespace, tasks: Mapping[Hashable, Any], why: Mapping[str, str] | None = None
) -> dict[str, str]:
    """``meta`` entry naming the learners of a ``--backend jax`` run whose tasks ran on numpy,
    each with its reason (``why``: agent id -> reason; default "no JAX port"); empty on numpy
    or when every task ran on JAX."""
    if getattr(args, "backend", "numpy") != "jax":
        return {}
    on_numpy = sorted({str(getattr(t.agent, "agent_id", t.agent)) for t in tasks.values()
                       if t.backend == "numpy"})  # fmt: skip
    if not on_numpy:
        return {}
    why = dict(why or {})
    parts = [f"{a} ({why.get(a, 'no JAX port')})" for a in on_numpy]
    return {"backend_note": f"ran on numpy: {'; '.join(parts)}"}


def executor_of(args: argparse.Namespace) -> str:
    """The executor the run uses (see :func:`parser`'s ``executor=None``)."""
    return args.executor or ("joblib" if args.full else "serial")


def out_dir(args: argparse.Namespace) -> Path:
    """``--out``, created."""
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    return out


def data_path(args: argparse.Namespace, relative: str) -> tuple[Path | None, str]:
    """The data set file ``relative`` in the data folder (``--data`` or ``$FEDBANDIT_DATA``,
    :func:`fedbandit_env.datasets.files.data_file`), or ``None`` and why it is missing."""
    from fedbandit_env.errors import ConfigError

    try:
        return data_file(relative, getattr(args, "data", None)), ""
    except ConfigError as err:
        return None, str(err)


def command(name: str, argv: Sequence[str] | None = None) -> str:
    """The command line that reproduces this run, for the claims file, without ``--out PATH``
    (a folder of the machine that ran it, which a claims file and the page never show)."""
    words = list(sys.argv[1:] if argv is None else argv)
    kept = []
    skip = False
    for word in words:
        if skip:
            skip = False
        elif word == "--out":
            skip = True
        elif not word.startswith("--out="):
            kept.append(word)
    return f"fedbandit reproduce {name} {shlex.join(kept)}".strip()


def _tagged(item: tuple[Callable[[Any], Any], int, Any]) -> tuple[int, Any]:
    fn, i, unit = item
    return i, fn(unit)


def fan_out(
    fn: Callable[[Any], Any], units: Sequence[Any], executor: str, jobs: int
) -> Iterator[tuple[int, Any]]:
    """``(index, fn(unit))`` of every unit as it finishes, on the bench's executors (serial,
    joblib processes or Ray tasks: :func:`fedbandit_env.bench.executors.execute`)."""
    if executor != "serial" and len(units) <= 1:
        executor = "serial"
    items = [(fn, i, u) for i, u in enumerate(units)]
    yield from execute(items, executor, jobs, fn=_tagged)


def run_tasks(
    tasks: Mapping[Hashable, EvalTask], args: argparse.Namespace
) -> dict[Hashable, tuple[Any, dict[str, Any]]]:
    """Every task's (EvalResult, attrs), keyed as the tasks (any executor, same numbers)."""
    return evaluate_many(tasks, executor=executor_of(args), n_jobs=args.jobs)


def _key(unit: dict[str, Any], version: Any) -> str:
    from fedbandit_env.bench.versions import package_version

    text = json.dumps(
        {**unit, "learner_version": version, "package": package_version()},
        sort_keys=True,
        default=str,
    )
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def cached(
    fn: Callable[[dict[str, Any]], dict[str, Any]],
    units: list[dict[str, Any]],
    args: argparse.Namespace,
    version: Any,
    cost: Callable[[dict[str, Any]], float] = lambda u: 0.0,
) -> list[dict[str, Any]]:
    """``fn(unit)`` of every unit (a dict of arrays each), cached as ``--out/cache/KEY.npz``
    where KEY hashes the unit, ``version`` (the learner's) and the package version; the missing
    ones run through :func:`fan_out`, the costliest first. Sets ``args.compute_wall``: the wall
    time of the invocation that computed these units (a re-render from the cache reports that
    one, not its own)."""
    import numpy as np

    cache = out_dir(args) / "cache"
    cache.mkdir(parents=True, exist_ok=True)
    keys = [_key(u, version) for u in units]
    results: list[dict[str, Any] | None] = [None] * len(units)
    todo = []
    for i, key in enumerate(keys):
        f = cache / f"{key}.npz"
        if f.is_file() and not getattr(args, "no_cache", False):
            with np.load(f) as z:
                results[i] = {k: z[k] for k in z.files}
        else:
            todo.append(i)
    todo.sort(key=lambda i: -cost(units[i]))
    wall_file = cache / f"wall-{hashlib.sha256(''.join(keys).encode()).hexdigest()[:16]}.json"
    start = time.perf_counter()
    for j, res in fan_out(fn, [units[i] for i in todo], executor_of(args), args.jobs):
        i = todo[j]
        results[i] = res
        np.savez(cache / f"{keys[i]}.npz", **res)
        label = units[i].get("label", keys[i])
        print(f"  done: {label} ({float(res.get('wall', 0.0)):.0f} s)", file=sys.stderr, flush=True)
    if todo or not wall_file.is_file():
        wall_file.write_text(json.dumps({"wall_time_s": time.perf_counter() - start}))
    args.compute_wall = json.loads(wall_file.read_text())["wall_time_s"]
    return results  # type: ignore[return-value]


def silent_attack(env_id: str, env_kwargs: dict[str, Any]) -> dict[str, Any]:
    """``env_kwargs`` for a learner that sends nothing: the same adversary (its own, or the
    preset's) with the attack replaced by ``silent``. The roles, and so the honest agents and
    their reward draws, are the attacked run's (the roles come from the adversary's own stream,
    which the attack does not move); a learner that reads no message acts exactly as under the
    attack, which the bench refuses to run because none of its messages reaches it
    (docs/adversary.md, "Payload layouts")."""
    from fedbandit_env.registration import make_vec

    adversary = make_vec(env_id, num_runs=1, **env_kwargs).config.adversary  # a preset's too
    if adversary is None:
        return dict(env_kwargs)
    roles = {k: v for k, v in vars(adversary).items()
             if k not in ("attack", "attack_kwargs", "knowledge", "channels")}  # fmt: skip
    return {**env_kwargs, "adversary": {**roles, "attack": "silent"}}


def pyplot() -> Any | None:
    """matplotlib's pyplot on the Agg backend to draw a figure with
    (:func:`fedbandit_env.bench.plotting.pyplot`), or ``None`` when matplotlib, the optional
    ``plots`` extra, is not installed: the script then writes its tables and claims file without
    the figure, and this prints :data:`PLOTS_NOTE` on stderr. Call it where the figure is drawn,
    never at import (``--help`` and the runs work without the extra). Any other failure of
    matplotlib propagates."""
    from fedbandit_env.bench.plotting import pyplot as agg_pyplot
    from fedbandit_env.errors import ConfigError

    try:
        return agg_pyplot()
    except ConfigError:  # plotting.pyplot's only error: `import matplotlib` raised ImportError
        print(PLOTS_NOTE, file=sys.stderr)
        return None


def write_claims(args: argparse.Namespace, rows: list, meta: dict[str, Any]) -> None:
    """Write ``rows`` as the claims file ``--claims`` (nothing without it) with ``meta``
    (title, scale_name, command, wall_time_s, ...: fedbandit_env.bench.claims.write_claims)."""
    if args.claims is None:
        return
    from fedbandit_env.bench.claims import write_claims as write

    write(args.claims, rows, meta)
    print(f"claims: {args.claims}", file=sys.stderr)
