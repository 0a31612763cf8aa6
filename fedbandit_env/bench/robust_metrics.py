"""Byzantine-robustness metrics (docs/adversary.md, "Metrics and the robust suite").

Over one :class:`~fedbandit_env.bench.evaluate.EvalResult`:

* :func:`regret_vs_byzantine_neighbours`: each honest agent's final regret against d_Z(i), the
  number of its neighbours that are Byzantine in its run (the environment's topology): the mean
  per d_Z value and the OLS slope of regret on d_Z with its standard error.

Over two cells on the same seeds (results, or leaderboard entries: both give one honest-mean
final regret per seed, see :func:`honest_finals`):

* :func:`attack_gain`: R_H(attack) - R_H(``silent``), the mean of the per-seed differences of the
  honest agents' mean regret and its standard error over the seeds;
* :func:`cooperation_ratio`: R_UCB1 / R_H, the no-communication reference's honest-mean regret
  over the learner's (above 1: cooperation still pays under the attack);
* :func:`clean_ratio`: R_H(attack) / R(f = 0), the leaderboard's "regret under attack / clean".

The leaderboard (:func:`attach_robust`) finds, for an entry of an attacked environment, the same
learner's entry on the clean environment (the same kwargs without ``adversary``), under
``silent`` (the same adversary with the attack replaced by ``silent``: same roles, same seeds)
and the ``ucb1`` entry, and :func:`robust_markdown` summarizes every attacked table as one matrix
per clean setting (learners x attacks).
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from fedbandit_env.bench.text import env_title, escape_markdown
from fedbandit_env.errors import ConfigError

UCB1 = "ucb1"
"""The no-communication reference of the cooperation ratio."""
SILENT = "silent"
"""The attack whose Byzantine agents send nothing: the reference of the attack gain."""
_ROLE_KEYS = ("num_byzantine", "num_crashed", "placement", "byzantine_ids", "crashed_ids",
              "local_f", "crash_at")  # fmt: skip
"""The adversary fields that decide the roles: kept when the attack is replaced by ``silent``."""


# --- regret vs the number of Byzantine neighbours -----------------------------------------------


@dataclass(frozen=True)
class NeighbourRegression:
    """Final regret of the honest agents against their number of Byzantine neighbours d_Z.

    One point per (run, honest agent). ``values`` are the d_Z values present, ``counts`` the
    points of each, ``means`` their mean final regret; ``slope`` and ``intercept`` the OLS fit of
    regret on d_Z, ``slope_se`` the slope's standard error (sqrt(RSS / (n - 2) / Sxx)). The
    slope is NaN when fewer than two d_Z values occur (nothing to regress on), its standard
    error NaN also when there are fewer than three points."""

    values: tuple[int, ...]
    counts: tuple[int, ...]
    means: tuple[float, ...]
    slope: float
    slope_se: float
    intercept: float
    points: int


def byzantine_neighbour_counts(roles: np.ndarray, topology: Any) -> np.ndarray:
    """(runs, N) int: d_Z of every agent, the Byzantine agents among its topology neighbours."""
    from fedbandit_env.adversary import byzantine_neighbours

    roles = np.asarray(roles)
    neighbors = np.asarray(topology.neighbors)
    if roles.ndim != 2 or roles.shape[1] != neighbors.shape[0]:
        raise ConfigError(
            f"roles: expected shape (runs, {neighbors.shape[0]}) (one role per agent of the "
            f"topology), got {roles.shape}"
        )
    return np.asarray(byzantine_neighbours(roles, neighbors), dtype=np.int64)


def _topology_of(result: Any) -> Any:
    """The topology ``result`` ran on: the environment rebuilt from its id and kwargs (one run;
    the graph does not depend on the seeds)."""
    from fedbandit_env.registration import make_vec

    return make_vec(result.env_id, num_runs=1, **dict(result.env_kwargs)).config.topology


def ols(x: np.ndarray, y: np.ndarray) -> tuple[float, float, float]:
    """(slope, its standard error, intercept) of the least-squares line of ``y`` on ``x``."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    n = len(x)
    if n == 0:
        return math.nan, math.nan, math.nan
    xm, ym = x.mean(), y.mean()
    sxx = float(((x - xm) ** 2).sum())
    if sxx == 0.0:
        return math.nan, math.nan, float(ym)
    slope = float(((x - xm) * (y - ym)).sum() / sxx)
    intercept = float(ym - slope * xm)
    if n < 3:
        return slope, math.nan, intercept
    rss = float(((y - intercept - slope * x) ** 2).sum())
    return slope, math.sqrt(rss / (n - 2) / sxx), intercept


def regret_vs_byzantine_neighbours(result: Any, topology: Any = None) -> NeighbourRegression:
    """Per-agent final regret of ``result``'s honest agents against d_Z (see
    :class:`NeighbourRegression`); ``topology`` defaults to the environment's, rebuilt from the
    result's id and kwargs. Needs a result run with an adversary (``roles``)."""
    if result.roles is None:
        raise ConfigError(
            "result.roles: expected the roles of a run with an adversary (env_kwargs "
            "adversary={...}), got None"
        )
    topology = _topology_of(result) if topology is None else topology
    dz = byzantine_neighbour_counts(result.roles, topology)
    final = np.asarray(result.regret_by_agent)[:, -1, :]
    honest = np.asarray(result.roles) == 0
    x, y = dz[honest], final[honest]
    values = tuple(int(v) for v in np.unique(x))
    counts = tuple(int((x == v).sum()) for v in values)
    means = tuple(float(y[x == v].mean()) for v in values)
    slope, se, intercept = ols(x, y)
    return NeighbourRegression(values, counts, means, slope, se, intercept, int(len(x)))


# --- paired metrics over seeds ------------------------------------------------------------------


def honest_finals(item: Any) -> dict[int, float]:
    """Seed -> the honest agents' mean final regret: of an ``EvalResult``
    (:attr:`~fedbandit_env.bench.evaluate.EvalResult.honest_regret_mean`) or of a leaderboard
    entry (its ``finals``: a row of an adversary cell stores the honest mean)."""
    if hasattr(item, "honest_regret_mean"):
        values = np.asarray(item.honest_regret_mean, dtype=np.float64)
    elif getattr(item, "finals", None) is not None:
        values = np.asarray(item.finals, dtype=np.float64)
    else:
        raise ConfigError(
            "item: expected an EvalResult or a leaderboard Entry with per-seed finals, got "
            f"{type(item).__name__}"
        )
    seeds = list(item.seeds)
    if len(seeds) != len(values):
        raise ConfigError(f"item.seeds: expected {len(values)} seeds, got {len(seeds)}")
    return {int(s): float(v) for s, v in zip(seeds, values, strict=True)}


@dataclass(frozen=True)
class Gain:
    """A paired difference over common seeds: its mean, standard error (sample sd / sqrt(n);
    NaN for one pair) and the number of pairs."""

    mean: float
    se: float
    pairs: int


def paired_difference(a: dict[int, float], b: dict[int, float]) -> Gain | None:
    """``a - b`` on the seeds both hold (None when they share none)."""
    common = sorted(set(a) & set(b))
    if not common:
        return None
    d = np.array([a[s] - b[s] for s in common], dtype=np.float64)
    se = float(d.std(ddof=1) / math.sqrt(len(d))) if len(d) > 1 else math.nan
    return Gain(float(d.mean()), se, len(d))


def attack_gain(attacked: Any, silent: Any) -> Gain | None:
    """R_H(attack) - R_H(``silent``) on the common seeds (results or entries of the same learner
    and setting, the second under ``silent``): positive when the attack costs the honest
    agents regret."""
    return paired_difference(honest_finals(attacked), honest_finals(silent))


def _mean(values: dict[int, float]) -> float:
    return float(np.mean(list(values.values())))


def cooperation_ratio(reference: Any, learner: Any) -> float | None:
    """R_UCB1 / R_H: the no-communication reference's honest-mean regret over the learner's, on
    their common seeds (None without common seeds or when the learner's regret is 0)."""
    ref, mine = honest_finals(reference), honest_finals(learner)
    common = sorted(set(ref) & set(mine))
    if not common:
        return None
    denom = float(np.mean([mine[s] for s in common]))
    if denom <= 0:
        return None
    return float(np.mean([ref[s] for s in common])) / denom


def clean_ratio(attacked: Any, clean: Any) -> float | None:
    """R_H(attack) / R(f = 0): mean honest regret under attack over the same learner's mean
    regret on the clean setting (every seed of each; None when the clean regret is 0)."""
    denom = _mean(honest_finals(clean))
    if denom <= 0:
        return None
    return _mean(honest_finals(attacked)) / denom


# --- environment keys ---------------------------------------------------------------------------


def adversary_of(env_key: str) -> dict[str, Any] | None:
    """The adversary of an environment key when it makes some agent Byzantine or crashed (a
    dict; None for a clean environment, including ``adversary`` with f = 0 and no crash)."""
    adv = json.loads(env_key)["env_kwargs"].get("adversary")
    if not isinstance(adv, dict):
        return None
    f = adv.get("num_byzantine") or len(adv.get("byzantine_ids") or ())
    crashed = adv.get("num_crashed") or len(adv.get("crashed_ids") or ())
    return adv if (f or crashed) else None


def _with_adversary(env_key: str, adversary: dict[str, Any] | None) -> str:
    env = json.loads(env_key)
    kwargs = {k: v for k, v in env["env_kwargs"].items() if k != "adversary"}
    if adversary is not None:
        kwargs["adversary"] = adversary
    return json.dumps({"env_id": env["env_id"], "env_kwargs": kwargs}, sort_keys=True)


def clean_key(env_key: str) -> str:
    """The environment key without its adversary."""
    return _with_adversary(env_key, None)


def silent_key(env_key: str) -> str:
    """The environment key with the same roles (placement, f, crashes) under ``silent``."""
    adv = json.loads(env_key)["env_kwargs"].get("adversary") or {}
    roles = {k: adv[k] for k in _ROLE_KEYS if k in adv}
    return _with_adversary(env_key, {**roles, "attack": SILENT})


def attack_name(adversary: dict[str, Any]) -> str:
    """``attack`` or ``attack(kwargs)`` of an adversary dict."""
    name = str(adversary.get("attack", SILENT))
    kwargs = adversary.get("attack_kwargs") or {}
    if kwargs:
        name += "(" + ", ".join(f"{k}={v}" for k, v in sorted(kwargs.items())) + ")"
    return name


def byzantine_count(adversary: dict[str, Any]) -> int:
    return int(adversary.get("num_byzantine") or len(adversary.get("byzantine_ids") or ()))


# --- leaderboard entries ------------------------------------------------------------------------


@dataclass(frozen=True)
class RobustMarks:
    """What an entry of an attacked table shows beside its regret: regret under attack / clean
    (``clean``), the paired attack gain over ``silent`` (``gain``; None for ``silent`` itself or
    without a silent entry) and R_UCB1 / R_H (``cooperation``)."""

    clean: float | None
    gain: Gain | None
    cooperation: float | None
    is_silent: bool = False


def attach_robust(entries: Sequence[Any]) -> None:
    """Set ``entry.robust`` (:class:`RobustMarks`) on every entry of an attacked environment
    (:func:`adversary_of`); entries of clean environments keep ``robust = None``. Entries are
    matched by label and backend; the ``ucb1`` reference is the table's own ``ucb1`` entry, else
    the one under ``silent`` with the same roles."""
    index: dict[tuple[str, str, str], Any] = {}
    for e in entries:
        index.setdefault((e.env_key, e.label, e.backend), e)
    for e in entries:
        adv = adversary_of(e.env_key)
        if adv is None:
            e.robust = None
            continue
        clean = index.get((clean_key(e.env_key), e.label, e.backend))
        silent_env = silent_key(e.env_key)
        is_silent = adv.get("attack", SILENT) == SILENT and not adv.get("attack_kwargs")
        silent = None if is_silent else index.get((silent_env, e.label, e.backend))
        ucb1 = index.get((e.env_key, UCB1, e.backend)) or index.get((silent_env, UCB1, e.backend))
        e.robust = RobustMarks(
            clean=None if clean is None else clean_ratio(e, clean),
            gain=None if silent is None else attack_gain(e, silent),
            cooperation=None if ucb1 is None or ucb1 is e else cooperation_ratio(ucb1, e),
            is_silent=is_silent,
        )


def format_ratio(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}"


def format_gain(marks: Any, minus: str = "−") -> str:
    """``+12.3 ± 4.5`` (mean ± se over seeds), ``silent`` for the reference itself, ``—``."""
    if marks is None:
        return "—"
    if marks.is_silent:
        return "silent"
    g = marks.gain
    if g is None:
        return "—"
    se = "" if math.isnan(g.se) else f" ± {g.se:.1f}"
    return f"{g.mean:+.1f}".replace("-", minus) + se


@dataclass(frozen=True)
class MatrixGroup:
    """The learners of one matrix exposed to the same attacks at the same f (a ranking of like
    with like): ``attacks`` the attacks they all ran under, ``rows`` ``[rank, learner, cell per
    attack]`` (a cell holds regret under attack / clean at each f of the matrix, ``—`` where
    missing), most robust first (the smallest worst ratio). ``reference``: the learners that
    send nothing, so only ``silent`` reaches them: the no-communication reference, not ranked
    (rank ``ref``)."""

    attacks: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    reference: bool = False


@dataclass(frozen=True)
class RobustMatrix:
    """One matrix per clean setting: its environment key, the values of f of every cell, every
    attack any learner ran under, and the groups of :class:`MatrixGroup`."""

    key: str
    fs: tuple[int, ...]
    attacks: tuple[str, ...]
    groups: tuple[MatrixGroup, ...]


def robust_matrices(entries: Sequence[Any]) -> list[RobustMatrix]:
    """One :class:`RobustMatrix` per clean setting that has attacked entries. A learner's
    coverage is the set of (attack, f) it ran under; learners are ranked only within a group
    of the same coverage (a learner that met fewer attacks is never "more robust" for it), the
    largest coverage first, and the learners that met only ``silent`` form the
    no-communication reference, shown last and not ranked."""
    ratios: dict[str, dict[tuple[str, str], dict[tuple[str, int], float | None]]] = defaultdict(
        lambda: defaultdict(dict)
    )
    for e in entries:
        adv = adversary_of(e.env_key)
        marks = getattr(e, "robust", None)
        if adv is None or marks is None:
            continue
        key = clean_key(e.env_key)
        ratios[key][(e.label, e.backend)][(attack_name(adv), byzantine_count(adv))] = marks.clean
    out = []
    for key, rows in ratios.items():
        fs = tuple(sorted({f for r in rows.values() for _, f in r}))
        attacks = tuple(sorted({a for r in rows.values() for a, _ in r}))
        by_coverage: dict[frozenset, list[tuple[str, str]]] = defaultdict(list)
        for who, cells in rows.items():
            by_coverage[frozenset(cells)].append(who)
        groups = []
        for coverage, members in by_coverage.items():
            seen = tuple(a for a in attacks if any(a == c[0] for c in coverage))
            reference = seen == (SILENT,)
            members.sort(key=lambda who, rows=rows: (_worst(rows[who]), who))
            table = []
            for rank, who in enumerate(members, start=1):
                label = who[0] if who[1] == "numpy" else f"{who[0]} [{who[1]}]"
                cells = []
                for a in seen:
                    got = [rows[who][(a, f)] if (a, f) in rows[who] else "x" for f in fs]
                    cells.append(" / ".join("—" if g == "x" else format_ratio(g) for g in got))
                table.append(("ref" if reference else str(rank), label, *cells))
            groups.append(MatrixGroup(seen, tuple(table), reference))
        groups.sort(key=lambda g: (g.reference, -len(g.attacks), g.attacks))
        out.append(RobustMatrix(key, fs, attacks, tuple(groups)))
    return out


def _worst(cells: dict[tuple[str, int], float | None]) -> float:
    """A learner's largest ratio (inf when none is known)."""
    vals = [v for v in cells.values() if v is not None]
    return max(vals) if vals else math.inf


def f_text(fs: Sequence[int]) -> str:
    """``f=1 / f=2``: the values of f of a matrix cell, in its order."""
    return " / ".join(f"f={f}" for f in fs)


def group_caption(group: MatrixGroup, total: int) -> str:
    """What a group is: the no-communication reference, or the attacks its learners share."""
    if group.reference:
        return ("No-communication reference: these learners send nothing, so only 'silent' "
                "reaches them (not ranked).")  # fmt: skip
    return (f"Ranked among learners exposed to the same {len(group.attacks)} of {total} "
            f"attacks: {', '.join(group.attacks)}.")  # fmt: skip


def robust_markdown(entries: Sequence[Any]) -> str:
    """The matrices of :func:`robust_matrices` as Markdown (empty without attacked entries): per
    clean setting a heading, then one table per coverage group, each cell regret under attack /
    clean at the f named in its column."""
    out = []
    for m in robust_matrices(entries):
        out.append(f"### Regret under attack / clean: {escape_markdown(env_title(m.key))}\n")
        out.append(f"Honest agents' mean regret under each attack over the learner's regret with "
                   f"no adversary, at {f_text(m.fs)} in each cell; a ratio (1.00: the attack "
                   "costs nothing); most robust first within a group.\n")  # fmt: skip
        for group in m.groups:
            out.append(escape_markdown(group_caption(group, len(m.attacks))) + "\n")
            heads = [f"{escape_markdown(a)} ({f_text(m.fs)})" for a in group.attacks]
            out.append("| rank | learner | " + " | ".join(heads) + " |")
            out.append("|---|---|" + "---|" * len(heads))
            for row in group.rows:
                out.append("| " + " | ".join([row[0], escape_markdown(row[1]), *row[2:]]) + " |")
            out.append("")
    return "\n".join(out)
