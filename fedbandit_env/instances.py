"""Bandit instances: local means per agent and arm, the global means, best arm and gaps.

Heterogeneous family (gossip paper, Zhu et al.; commeff paper, Li & Song; docs/environments.md): agent i sees arm k with local mean
mu[i, k]; the arm's global mean is the plain average over agents, and regret is measured against
the global best arm. Homogeneous family (DP recommender paper, Li, Song & Fragouli; commeff paper): one mean vector shared
by every agent. Arms are never reordered; the best arm is ``argmax`` of the global means.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from fedbandit_env.errors import ConfigError

MAX_REJECTION_TRIES = 10_000


@dataclass(frozen=True)
class Instance:
    """Local means ``means`` (N, M) of one run; homogeneous instances have identical rows.

    ``generating`` (M,), when given, are the means the local ones were drawn around
    (:func:`gaussian_clients`); they are then the global means that regret is judged against,
    instead of the average of the rows."""

    means: np.ndarray
    generating: np.ndarray | None = None
    global_means: np.ndarray = field(init=False)
    best_arm: int = field(init=False)
    gaps: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        means = np.array(self.means, dtype=np.float64)
        if means.ndim != 2 or means.shape[0] < 1 or means.shape[1] < 2:
            raise ConfigError(f"means: expected an (N, M) array with M >= 2, got {means.shape}")
        if not np.all(np.isfinite(means)):
            raise ConfigError("means: expected finite numbers")
        means.setflags(write=False)
        if self.generating is None:
            global_means = means.mean(axis=0)
        else:
            global_means = np.array(self.generating, dtype=np.float64)
            if global_means.shape != (means.shape[1],) or not np.all(np.isfinite(global_means)):
                raise ConfigError(
                    f"generating: expected {means.shape[1]} finite means, got {global_means!r}"
                )
            object.__setattr__(self, "generating", global_means)
        global_means.setflags(write=False)
        gaps = global_means.max() - global_means
        gaps.setflags(write=False)
        object.__setattr__(self, "means", means)
        object.__setattr__(self, "global_means", global_means)
        object.__setattr__(self, "best_arm", int(np.argmax(global_means)))
        object.__setattr__(self, "gaps", gaps)

    @property
    def num_agents(self) -> int:
        return int(self.means.shape[0])

    @property
    def num_arms(self) -> int:
        return int(self.means.shape[1])

    @property
    def local_best_arms(self) -> np.ndarray:
        return np.argmax(self.means, axis=1)

    @property
    def is_homogeneous(self) -> bool:
        return bool(np.all(self.means == self.means[0]))


def fixed_instance(means: np.ndarray | list, num_agents: int) -> Instance:
    """A user-given instance: a vector (homogeneous) or an (N, M) matrix (heterogeneous)."""
    arr = np.asarray(means, dtype=np.float64)
    if arr.ndim == 1:
        return Instance(np.broadcast_to(arr, (num_agents, arr.shape[0])))
    if arr.ndim != 2 or arr.shape[0] != num_agents:
        raise ConfigError(
            f"means: expected a length-M vector or a ({num_agents}, M) matrix, got shape {arr.shape}"
        )
    return Instance(arr)


def uniform_homogeneous(num_agents: int, num_arms: int, rng: np.random.Generator) -> Instance:
    """mu_k ~ U[0, 1] iid, the same for every agent (the commeff paper's Sec. VII; the DP recommender paper's Sec. IV)."""
    return Instance(np.broadcast_to(rng.random(num_arms), (num_agents, num_arms)))


def _distinct_rankings(means: np.ndarray) -> bool:
    ranks = np.argsort(-means, axis=1)
    return len({tuple(r) for r in ranks}) == means.shape[0]


def gossip_heterogeneous(num_agents: int, num_arms: int, rng: np.random.Generator) -> Instance:
    """The gossip instances (docs/gossip.md): mu[i, k] ~ U[0, 1] iid, rejected until (i) no two agents share
    the same ranking of arms and (ii) some agent's local best arm is not the global best arm.
    Condition (i) is dropped when N > M! (there are not enough rankings)."""
    need_distinct = num_agents <= math.factorial(min(num_arms, 12))
    for _ in range(MAX_REJECTION_TRIES):
        inst = Instance(rng.random((num_agents, num_arms)))
        distinct = _distinct_rankings(inst.means) or not need_distinct
        if distinct and np.any(inst.local_best_arms != inst.best_arm):
            return inst
    raise ConfigError(
        f"instance: no heterogeneous instance with N={num_agents}, M={num_arms} met the gossip "
        f"instance conditions (docs/gossip.md) in {MAX_REJECTION_TRIES} draws; expected N >= 2"
    )


def commeff_heterogeneous(num_agents: int, num_arms: int, rng: np.random.Generator) -> Instance:
    """The commeff paper's heterogeneous setting (docs/commeff.md): global mu_k ~ U[0,1]; local mu[i,k] = mu_k + w_k (u[i,k] - mean_i u),
    u ~ U[-1, 1], w_k = min(0.3, min(mu_k, 1 - mu_k) / max_i |u[i,k] - mean_i u|), which keeps
    every local mean in [0, 1] and the average exact; resampled until some agent's local best arm
    differs from the global best."""
    for _ in range(MAX_REJECTION_TRIES):
        mu = rng.random(num_arms)
        u = rng.uniform(-1.0, 1.0, (num_agents, num_arms))
        dev = u - u.mean(axis=0)
        spread = np.abs(dev).max(axis=0)
        room = np.minimum(mu, 1.0 - mu)
        w = np.minimum(0.3, np.divide(room, spread, out=np.zeros_like(room), where=spread > 0))
        local = np.clip(mu + w * dev, 0.0, 1.0)
        inst = Instance(local)
        if np.any(inst.local_best_arms != inst.best_arm):
            return inst
    raise ConfigError(
        f"instance: no commeff heterogeneous instance with N={num_agents}, M={num_arms} found; "
        "expected N >= 2"
    )


def gaussian_clients(
    mu: np.ndarray, num_agents: int, spread: float, generating: bool, rng: np.random.Generator
) -> Instance:
    """Client local means ``mu[i, k] ~ N(mu_k, spread^2)``, iid, around the generating means
    ``mu`` (M,): the setting of Demirel, Yildirim & Tekin, "Federated Multi-Armed Bandits Under
    Byzantine Attacks" (arXiv 2205.04134; the authors' code, Fed-MoM-UCB_sce1.py, draws
    ``np.random.normal(mu_global[k], sigma_c)`` per client and arm). With ``generating`` the
    global means are ``mu`` itself (the code's regret); otherwise the average of the rows."""
    mu = np.asarray(mu, dtype=np.float64)
    local = mu[None, :] + spread * rng.standard_normal((num_agents, mu.shape[0]))
    return Instance(local, generating=mu if generating else None)


GENERATORS = {
    "uniform": uniform_homogeneous,
    "gossip": gossip_heterogeneous,
    "commeff": commeff_heterogeneous,
}
