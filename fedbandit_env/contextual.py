"""The contextual process protocol: what the engine needs from a source of decision sets.

The engine (docs/architecture.md) steps the linear contextual family (docs/linear.md) through a
:class:`ContextualProcess`: batched decision sets, rewards, expected rewards and instant regret.
It never names a concrete process. A :class:`ProcessSource` (the generator's
:class:`fedbandit_env.linear.LinearSpec`, or a data set's spec such as
:class:`fedbandit_env.datasets.classification.DatasetSpec`) builds the process of a batch, so a
new source of contexts needs no change to the engine. This module sits below the engine and
imports nothing of the package.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class ContextualProcess(Protocol):
    """Decision sets, rewards and regret of B runs of N agents (batched over runs, agents and
    actions; docs/architecture.md).

    ``context`` is the (B, N, K, d) batch of decision sets the agents see for their next pull.
    """

    context: np.ndarray

    @property
    def dim(self) -> int:
        """The feature dimension d."""
        ...

    def reset(
        self, seeds: list[int], theta_seed: int | None, streams: str = "per_run"
    ) -> np.ndarray:
        """Start the runs of ``seeds`` (one per run) and return the first decision sets.
        ``theta_seed``: an int fixes the instance for every run, None draws one per run seed
        (a process without a drawn instance ignores it). ``streams``: how the runs' streams are
        derived (``"per_run"`` or ``"block"``, :data:`fedbandit_env.block_streams.RandomStreams`)."""
        ...

    def expected(self) -> np.ndarray:
        """Expected reward (B, N, K) of every action of the current decision sets."""
        ...

    def pull(
        self, arms: np.ndarray, runs: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Rewards, expected rewards and instant regret (each (B, N)) of pulling ``arms``
        (B, N); then the next decision sets. ``runs`` (B,) bool: only these runs pull (the
        others' streams do not advance, their decision sets stay, their outputs are unused)."""
        ...


@runtime_checkable
class ProcessSource(Protocol):
    """A validated, immutable description of a contextual process that builds it for a batch."""

    def build_process(self, num_runs: int, num_agents: int, num_actions: int) -> ContextualProcess:
        """The process of ``num_runs`` runs of ``num_agents`` agents with ``num_actions``
        actions per decision set."""
        ...
