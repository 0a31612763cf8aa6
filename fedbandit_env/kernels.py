"""Shared learner kernels: the small array routines and checks that reference agents and
baselines both use (every statistic is an array over runs, agents and arms).

* :class:`ArmTable`: the index arithmetic of a per-(run, agent, arm) table of shape (B, N, M):
  read, add to or set the entry of each (run, agent)'s chosen arm, and the (B*N, M) row view.
  Flat positions ``(b N + i) M + arm`` are computed here and nowhere else;
* :func:`argmax_one_uniform` and :func:`argmax_uniform_ties`: arg-max over the last axis with a
  uniformly random tie-break, re-exported from :mod:`fedbandit_env.ties` (one function per
  rule, shared with the JAX learners);
* :func:`check_number`: a learner's float hyperparameter, checked with an error naming the
  learner and the field;
* :func:`ucb_choice` and :func:`check_linear`: the OFUL action of a batch of decision sets and
  the linear family's checks (docs/linear.md).

They live in the environment package so that a learner package (``agents``, ``baselines`` or a
third party's) imports them from one home; ``baselines.index`` and ``baselines.linucb``
re-export them under the same names.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fedbandit_env.policy import FederationFacts, require_family
from fedbandit_env.scores import note_scores
from fedbandit_env.ties import argmax_one_uniform, argmax_uniform_ties
from fedbandit_env.validation import check_memory, check_real

__all__ = [
    "ArmTable",
    "argmax_one_uniform",
    "argmax_uniform_ties",
    "check_linear",
    "check_number",
    "row_starts",
    "ucb_choice",
]


@dataclass(frozen=True)
class ArmTable:
    """The shape (B, N, M) of a per-(run, agent, arm) table and its index arithmetic.

    A learner keeps its statistics (counts, sums, estimates) as float arrays of this shape. Each
    step every (run b, agent i) touches one entry, its chosen arm ``arm[b, i]``; these methods
    read and write exactly those entries without a Python loop::

        table = ArmTable.of(facts.num_runs, facts.num_agents, facts.num_arms)
        n, s = table.zeros(), table.zeros()
        table.add(n, arm, 1.0)           # n[b, i, arm[b, i]] += 1 for every (b, i)
        table.add(s, arm, reward)        # s[b, i, arm[b, i]] += reward[b, i]
        mean = table.gather(s, arm) / table.gather(n, arm)   # (B, N)

    ``arm`` is an int array (B, N) of arms in [0, M) (the engine checks the arms it is given;
    these methods do not). ``where`` (B, N) bool, when given, limits a write to the (run, agent)
    pairs where it is True (e.g. the agents that pulled in this step). Tables must be
    C-contiguous arrays of shape (B, N, M): the writes go through a flat view.
    """

    runs: int
    agents: int
    arms: int
    starts: np.ndarray = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if min(self.runs, self.agents, self.arms) < 1:
            raise ValueError(f"ArmTable: expected a shape of positive sizes, got {self.shape}")
        starts = row_starts(self.runs * self.agents, self.arms).reshape(self.runs, self.agents)
        object.__setattr__(self, "starts", starts)  # flat position of (b, i, 0), read-only

    @classmethod
    def of(cls, runs: int, agents: int, arms: int) -> ArmTable:
        """The table helper for (runs, agents, arms)."""
        return cls(int(runs), int(agents), int(arms))

    @property
    def shape(self) -> tuple[int, int, int]:
        return (self.runs, self.agents, self.arms)

    def zeros(self) -> np.ndarray:
        """A new float64 table of zeros."""
        return np.zeros(self.shape)

    def positions(self, arm: np.ndarray) -> np.ndarray:
        """Flat positions (B, N) of the entries ``[b, i, arm[b, i]]``."""
        return self.starts + arm

    def gather(self, table: np.ndarray, arm: np.ndarray) -> np.ndarray:
        """``table[b, i, arm[b, i]]`` for every (b, i): a new (B, N) array."""
        self._check(table)
        return table.reshape(-1)[self.positions(arm)]

    def add(
        self, table: np.ndarray, arm: np.ndarray, values: Any, where: np.ndarray | None = None
    ) -> None:
        """``table[b, i, arm[b, i]] += values[b, i]`` in place (``values`` a scalar or (B, N)),
        for every (b, i), or only where ``where`` is True."""
        flat, values = self._selected(table, arm, values, where)
        scatter_add(table, flat, values)

    def put(
        self, table: np.ndarray, arm: np.ndarray, values: Any, where: np.ndarray | None = None
    ) -> None:
        """``table[b, i, arm[b, i]] = values[b, i]`` in place (``values`` a scalar or (B, N)),
        for every (b, i), or only where ``where`` is True."""
        flat, values = self._selected(table, arm, values, where)
        table.reshape(-1)[flat] = values

    def _selected(
        self, table: np.ndarray, arm: np.ndarray, values: Any, where: np.ndarray | None
    ) -> tuple[np.ndarray, Any]:
        """The flat positions of ``[b, i, arm[b, i]]`` and their values, kept where ``where``
        is True (all without it)."""
        self._check(table)
        flat = self.positions(arm)
        if where is None:
            return flat, values
        if np.ndim(values):
            values = np.broadcast_to(values, where.shape)[where]
        return flat[where], values

    def rows(self, table: np.ndarray) -> np.ndarray:
        """The (B*N, M) view of ``table``: row ``b N + i`` is agent i of run b (writes go
        through)."""
        self._check(table)
        return table.reshape(-1, self.arms)

    def _check(self, table: np.ndarray) -> None:
        if table.shape != self.shape or not table.flags.c_contiguous:
            raise ValueError(
                f"ArmTable: expected a C-contiguous table of shape {self.shape}, got "
                f"shape {table.shape}"
            )


_STARTS: dict[tuple[int, int], np.ndarray] = {}


def scatter_add(target: np.ndarray, flat: np.ndarray, values: Any) -> None:
    """``target.reshape(-1)[flat] += values`` for distinct flat positions, in place: the same
    additions through ``np.add.at`` on 1-D views, whose fast path is faster than fancy ``+=``
    (a 2-D index falls off it). ``target`` must be C-contiguous (its flat view writes through)."""
    if not target.flags.c_contiguous:
        raise ValueError("scatter_add: target must be C-contiguous (a flat view writes through)")
    # the values in the target's dtype (what ``+=`` adds): a mixed-dtype add.at is slow
    values = np.asarray(values, dtype=target.dtype)
    np.add.at(
        target.reshape(-1), np.reshape(flat, -1), values.reshape(-1) if values.ndim else values
    )


def row_starts(rows: int, m: int) -> np.ndarray:
    """``arange(rows) * m`` (the flat start of each row of width ``m``), cached per shape and
    read-only."""
    key = (rows, m)
    out = _STARTS.get(key)
    if out is None:
        if len(_STARTS) > 64:
            _STARTS.clear()
        out = np.arange(rows, dtype=np.int64) * m
        out.setflags(write=False)
        _STARTS[key] = out
    return out


def check_number(agent_id: str, name: str, value: Any, low: float, high: float = math.inf) -> float:
    """A finite float in [low, high] or a :class:`ConfigError` naming the agent and the field."""
    return check_real(name, value, low=low, high=None if math.isinf(high) else high, where=agent_id)


def ucb_choice(context: np.ndarray, V: np.ndarray, b: np.ndarray, beta: np.ndarray) -> np.ndarray:
    """argmax_k <x_k, V^-1 b> + beta ||x_k||_{V^-1} over a batch of decision sets (B, N, K, d)."""
    V_inv = np.linalg.inv(V)
    theta = np.einsum("bnij,bnj->bni", V_inv, b)
    mean = np.einsum("bnkd,bnd->bnk", context, theta)
    width = np.sqrt(np.maximum(np.einsum("bnkd,bnde,bnke->bnk", context, V_inv, context), 0.0))
    index = mean + beta[..., None] * width
    note_scores(index)
    return np.argmax(index, axis=-1).astype(np.int64)


def check_linear(agent_id: str, facts: FederationFacts) -> int:
    """The linear family's dimension d, after checking the family and the memory the Gram
    matrices take (docs/limits.md)."""
    require_family(agent_id, facts, ("linear",))
    d = int(facts.extra["dim"])
    # the linear learners keep a few d x d Gram matrices per agent and run (docs/limits.md)
    check_memory(
        f"{agent_id}: num_runs/num_agents/dim",
        8.0 * 6 * facts.num_runs * facts.num_agents * d * d,
        f"about 6 float64 d x d matrices per agent and run, B={facts.num_runs}, "
        f"N={facts.num_agents}, d={d}",
    )
    return d
