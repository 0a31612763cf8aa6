"""Shared set-up of the field agents' tests (docs/field.md): a runner of the batched
agent on a fixed homogeneous instance, the 3-standard-error agreement check against a plain-loop
implementation, and the light-cone check."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

import fedbandit_env
from fedbandit_env.bench import evaluate
from tests.dp_recsys_helpers import rollout

ENV = "FedBandit/Homogeneous-v0"


def batched(policy, runs: int, seed: int = 0, **env_kwargs: Any) -> tuple[np.ndarray, np.ndarray]:
    """Final network pseudo-regret (runs,) and total messages (runs,) of the batched agent."""
    res = evaluate(ENV, policy, runs=runs, seed=seed, env_kwargs={"family": "homogeneous",
                                                                 **env_kwargs})
    return np.asarray(res.final_regret_network, dtype=float), res.messages.sum(axis=1)


def plain(loop: Callable[[np.random.Generator], tuple[float, int]], runs: int, seed: int
          ) -> tuple[np.ndarray, np.ndarray]:
    """Run a plain-loop implementation ``loop(rng) -> (regret, messages)`` on ``runs`` seeds."""
    out = [loop(np.random.default_rng([seed, r])) for r in range(runs)]
    return np.array([o[0] for o in out], dtype=float), np.array([o[1] for o in out], dtype=float)


def assert_agree(a: np.ndarray, b: np.ndarray, what: str, z: float = 3.0) -> None:
    """Means of two independent samples within ``z`` standard errors of their difference (exact
    equality when both samples are constant)."""
    se = math.sqrt(a.var(ddof=1) / a.size + b.var(ddof=1) / b.size)
    diff = abs(a.mean() - b.mean())
    assert diff <= z * se + 1e-9 * max(1.0, abs(a.mean())), (
        f"{what}: batched {a.mean():.3f} vs plain loop {b.mean():.3f}, |diff| {diff:.3f} > "
        f"{z} se = {z * se:.3f}"
    )


def graph(topology: str, n: int) -> tuple[np.ndarray, list[list[int]]]:
    """Consensus matrix ``I - (kappa/d_max) L`` inputs: adjacency (N, N) and neighbour lists,
    built from the environment's own topology (the test re-derives P itself)."""
    venv = fedbandit_env.make_vec(ENV, num_runs=1, num_agents=n, num_arms=2, horizon=5,
                                  topology=topology, family="homogeneous")
    edges = venv.config.topology.edges
    A = np.zeros((n, n))
    A[edges[:, 0], edges[:, 1]] = 1.0
    A[edges[:, 1], edges[:, 0]] = 1.0
    return A, [sorted(np.flatnonzero(A[i]).tolist()) for i in range(n)]


def light_cone(make_policy: Callable[[], Any], channel: str, *, topology: str, n: int,
               j: int, horizon: int, t_change: int, server: bool = False,
               reach: int | None = None, **env_kwargs: Any) -> None:
    """Agent j's rewards from engine step ``t_change`` on cannot change agent i's arms or
    messages at engine steps <= t_change + d(i, j) (d = 1 for every other agent through a
    server), and the change must reach every agent within ``reach`` hops of j (all agents by
    default) and at least one other agent (the test is not vacuous)."""

    def perturb(t, venv):
        if t == t_change:
            venv.engine.means[:, j, :] = 1.0 - venv.engine.means[:, j, :]

    def run(change: bool):
        out = rollout(make_policy(), runs=3, seed=3, before_step=perturb if change else None,
                      topology=topology, num_agents=n, horizon=horizon, **env_kwargs)
        return out["arms"], out["payloads"][channel], out["venv"].config.topology.hop_distances

    base_arms, base_msgs, dist = run(False)
    arms, msgs, _ = run(True)
    assert arms.shape == base_arms.shape
    others = 0
    for i in range(n):
        changed = np.nonzero(
            (arms[:, :, i] != base_arms[:, :, i]).any(axis=1)
            | (msgs[:, :, i] != base_msgs[:, :, i]).any(axis=(1, 2))
        )[0]
        d = (0 if i == j else 1) if server else dist[i, j]
        if changed.size == 0:
            assert reach is not None and d > reach, (
                f"agent {i} never saw agent {j}'s change (vacuous test)"
            )
            continue
        others += i != j
        first_step = changed[0] + 1  # arms[k] is the action of engine step k + 1
        assert first_step > t_change + d, (i, j, first_step)
    assert others > 0, f"no other agent saw agent {j}'s change (vacuous test)"
