"""Validated parameters of the elimination agents (docs/commeff.md, "Parameters")."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from fedbandit_env.errors import ConfigError
from fedbandit_env.policy import check_timing
from fedbandit_env.validation import MAX_HORIZON, check_int, check_real, is_real

PRIVACY_MODES = ("paper", "per_message")


def _number(agent_id: str, name: str, value: object) -> float:
    return check_real(name, value, allow_inf=True, where=agent_id)


@dataclass(frozen=True)
class EliminationConfig:
    """``epsilon`` (> 0, ``inf`` = no noise); ``privacy`` ``"paper"`` (input epsilon, each message
    is ``N_eff * epsilon``-DP) or ``"per_message"`` (epsilon is the per-message level);
    ``rounds`` R (None = doubling schedule) and ``delta`` (the minimum gap of the Delta^(r/R)
    schedule, required with R): one number, or one per run of the batch (so a sweep over
    random instances can pass each run's oracle gap; the length is checked at reset);
    ``timing`` ``"paper"`` (rounds as communication steps) or ``"latency"``
    (:mod:`agents.commeff.base`)."""

    agent_id: str
    epsilon: float = 1.0
    privacy: str = "paper"
    rounds: int | None = None
    delta: float | tuple[float, ...] | None = None
    timing: str = "paper"

    def __post_init__(self) -> None:
        aid = self.agent_id
        check_timing(aid, self.timing)
        if not is_real(self.epsilon):
            _number(aid, "epsilon", self.epsilon)  # the type error
        eps = float(self.epsilon)
        if math.isnan(eps) or eps <= 0:
            raise ConfigError(
                f"{aid}: epsilon: expected a number > 0 (inf = no noise), got {eps!r}"
            )
        object.__setattr__(self, "epsilon", eps)
        if not isinstance(self.privacy, str) or self.privacy not in PRIVACY_MODES:
            raise ConfigError(
                f"{aid}: privacy: expected one of {PRIVACY_MODES}, got {self.privacy!r}"
            )
        if self.rounds is not None:
            r = check_int("rounds", self.rounds, minimum=1, maximum=MAX_HORIZON, where=aid)
            object.__setattr__(self, "rounds", r)
            if self.delta is None:
                raise ConfigError(
                    f"{aid}: delta: the round budget rounds={r} needs the minimum gap delta "
                    "in (0, 1) (pass the instance's oracle gap)"
                )
        if self.delta is not None:
            many = isinstance(self.delta, list | tuple | np.ndarray)
            values = [_number(aid, "delta", d) for d in (self.delta if many else [self.delta])]
            if not values or not all(0.0 < d < 1.0 for d in values):
                raise ConfigError(f"{aid}: delta: expected numbers in (0, 1), got {self.delta!r}")
            if self.rounds is None:
                raise ConfigError(f"{aid}: delta: only used with a round budget; set rounds")
            object.__setattr__(self, "delta", tuple(values) if many else values[0])

    def delta_per_run(self, num_runs: int) -> np.ndarray | None:
        """``delta`` as a (num_runs,) array (None without a round budget)."""
        if self.delta is None:
            return None
        if isinstance(self.delta, tuple):
            if len(self.delta) != num_runs:
                raise ConfigError(
                    f"{self.agent_id}: delta: expected one number or {num_runs} (one per run), "
                    f"got {len(self.delta)}"
                )
            return np.array(self.delta)
        return np.full(num_runs, self.delta)

    @property
    def declared_epsilon(self) -> float | None:
        """The guarantee known before the federation: ``epsilon`` in ``"per_message"`` mode or
        without noise (``inf``), None in ``"paper"`` mode (``N_eff * epsilon`` needs N_eff)."""
        if self.privacy == "per_message" or math.isinf(self.epsilon):
            return self.epsilon
        return None

    def eps_msg(self, n_eff: int) -> float:
        """Per-message DP level: ``N_eff * epsilon`` (paper) or ``epsilon`` (per_message)."""
        return self.epsilon * n_eff if self.privacy == "paper" else self.epsilon
