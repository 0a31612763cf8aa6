"""Leaderboard: rank the cells of each environment by final regret (DESIGN.md §5).

Per cell: mean final per-agent regret with a 95% percentile-bootstrap CI (seeded Generator),
regret normalized to a named baseline learner on the same environment, mean messages and floats
sent, and epsilon (the learner's ``epsilon`` kwarg, "—" when it has none). Cells are ranked
within their environment configuration.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from fedbandit_env.bench.store import Row

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
    steps: np.ndarray
    curves: np.ndarray  # (runs, checkpoints)


def build(rows: list[Row], baseline: str = "ucb1", seed: int = 0) -> list[Entry]:
    """Entries of every cell in ``rows``, ranked per environment."""
    rng = np.random.default_rng(seed)
    cells: dict[str, list[Row]] = defaultdict(list)
    for row in rows:
        cells[row.cell_hash].append(row)
    entries = []
    for cell_rows in cells.values():
        first = cell_rows[0]
        finals = np.array([r.final_regret_per_agent for r in cell_rows])
        lo, hi = bootstrap_ci(finals, rng)
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
                steps=np.array(json.loads(first.steps)),
                curves=np.array([json.loads(r.curve) for r in cell_rows]),
            )
        )
    by_env: dict[str, list[Entry]] = defaultdict(list)
    for e in entries:
        by_env[e.env_key].append(e)
    ranked = []
    for env_entries in by_env.values():
        env_entries.sort(key=lambda e: e.mean)
        base = [e for e in env_entries if e.agent_id == baseline and e.label == baseline]
        for rank, e in enumerate(env_entries, start=1):
            e.rank = rank
            if base and base[0].mean > 0:
                e.normalized = e.mean / base[0].mean
        ranked.extend(env_entries)
    return ranked


def env_title(env_key: str) -> str:
    env = json.loads(env_key)
    kwargs = ", ".join(f"{k}={v}" for k, v in env["env_kwargs"].items() if k != "channels")
    return f"{env['env_id']} ({kwargs})"


def to_markdown(entries: list[Entry], baseline: str = "ucb1") -> str:
    """Markdown tables, one per environment configuration, ranked by mean final regret."""
    out = []
    by_env: dict[str, list[Entry]] = defaultdict(list)
    for e in entries:
        by_env[e.env_key].append(e)
    for env_key, env_entries in by_env.items():
        out.append(f"### {env_title(env_key)}\n")
        out.append(
            f"| rank | learner | runs | final regret / agent | 95% CI | vs {baseline} | "
            "messages | floats | epsilon |"
        )
        out.append("|---|---|---|---|---|---|---|---|---|")
        for e in sorted(env_entries, key=lambda x: x.rank):
            norm = "—" if e.normalized is None else f"{e.normalized:.2f}"
            eps = "—" if e.epsilon is None else f"{e.epsilon:g}"
            out.append(
                f"| {e.rank} | {e.label} | {e.runs} | {e.mean:.1f} | "
                f"[{e.ci_low:.1f}, {e.ci_high:.1f}] | {norm} | {e.messages:,.0f} | "
                f"{e.floats:,.0f} | {eps} |"
            )
        out.append("")
    return "\n".join(out)
