"""The linear contextual family (Dubey & Pentland 2020, the setting of its experiments; docs/linear.md): decision
sets, rewards, regret.

Each step every agent gets a decision set of K feature vectors in R^d; pulling action k pays
``y = <x_k, theta*> + noise`` (Bernoulli with mean <x, theta*> by default, or Gaussian), and the
instant pseudo-regret is ``max_x <x, theta*> - <x_chosen, theta*>`` over the agent's own set.

Generator (the paper's experiments): theta* uniform on the unit sphere (or in the unit ball with norm >= 0.8, docs/linear.md),
per run; each set has K - 1 actions with mean in [0.5, 0.6] and one with mean in [0.7, 0.8]:
``x = c theta_hat + sqrt(1 - c^2) w`` with w a random unit vector orthogonal to theta_hat
(``c`` divided by ``|theta*|`` for the ball), shuffled. Sets are fresh per agent and step
(``shared_decision_sets=True``: one set per step for every agent). Draws come from the run's
``rewards`` stream (sets) and ``instance`` stream (theta*), fixed shapes per step.

The asynchronous federated linear bandits' experiments (docs/async-linear.md) use other
generators, chosen with ``arms`` and ``theta``:

* ``arms={"kind": "pool", "size": P}`` (Li & Wang, AISTATS 2022, Sec. 6): a fixed pool of P unit
  vectors per run (coordinate k ~ N(0, (d - k)/d), then scaled to unit length, drawn from the
  ``instance`` stream); each decision set is K distinct pool vectors drawn uniformly without
  replacement;
* ``arms="cube"`` (He, Wang, Min & Gu, NeurIPS 2022, Sec. 6): K fresh vectors with coordinates
  uniform on [-1, 1] / sqrt(d) (norm at most 1);
* ``theta="half_sphere"`` (Li & Wang): v ~ N(0, I), theta* = sign(sum v) v / |v|;
  ``theta="ones"`` (He et al.): theta* = (1, ..., 1) / sqrt(d), the same in every run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from fedbandit_env.block_streams import RandomStreams, streams_for
from fedbandit_env.contextual import ContextualProcess, ProcessSource
from fedbandit_env.drift import Changes, Drift, orthogonal_unit, rotated_theta
from fedbandit_env.errors import ConfigError
from fedbandit_env.seeding import BatchedRNG
from fedbandit_env.validation import check_int, check_real

#: Largest feature dimension d (learners keep d x d matrices per agent; docs/limits.md).
MAX_DIM = 4096

THETA_DISTRIBUTIONS = ("sphere", "ball", "half_sphere", "ones")
ARM_KINDS = ("paper", "cube", "pool")
BALL_MIN_NORM = 0.8


@dataclass(frozen=True)
class LinearSpec:
    """The linear part of an environment configuration."""

    dim: int = 10
    theta: str = "sphere"
    shared_decision_sets: bool = False
    reward: str = "bernoulli"
    sigma: float = 0.5
    dataset: Any = None  # a ProcessSource (a data set's spec): its decision sets, not the generator
    arms: Any = "paper"  # the decision sets' generator: "paper", "cube" or ("pool", P)

    def __post_init__(self) -> None:
        object.__setattr__(self, "dim", check_int("dim", self.dim, minimum=2, maximum=MAX_DIM))
        if not isinstance(self.theta, str) or self.theta not in THETA_DISTRIBUTIONS:
            raise ConfigError(f"theta: expected one of {THETA_DISTRIBUTIONS}, got {self.theta!r}")
        if self.reward not in ("bernoulli", "gaussian"):
            raise ConfigError(f"reward: expected 'bernoulli' or 'gaussian', got {self.reward!r}")
        sigma = check_real("reward.sigma", self.sigma, low=0.0, low_open=True)
        if self.dataset is not None:
            if not isinstance(self.dataset, ProcessSource):
                raise ConfigError(
                    "dataset: expected None (generated decision sets); real data sets are "
                    f"the FedBandit/ClassificationContextual-v0 environment, got {self.dataset!r}"
                )
        object.__setattr__(self, "sigma", sigma)
        if self.dataset is not None and self.arms != "paper":
            raise ConfigError(f"arms: a data set brings its own decision sets, got {self.arms!r}")

    def build_process(self, num_runs: int, num_agents: int, num_actions: int) -> ContextualProcess:
        """The batch's process (:class:`fedbandit_env.contextual.ProcessSource`): the data set's
        when ``dataset`` is given, else the generator of the paper's experiments."""
        if self.dataset is not None:
            return self.dataset.build_process(num_runs, num_agents, num_actions)
        return LinearProcess(self, num_runs, num_agents, num_actions)


def arms_option(value: Any) -> Any:
    """The validated ``arms`` keyword: ``"paper"`` (the default), ``"cube"``, or
    ``{"kind": "pool", "size": P}`` with P an int (returned as ``("pool", P)``)."""
    kind = value if isinstance(value, str) else (value or {}).get("kind") if isinstance(
        value, dict) else None  # fmt: skip
    if kind not in ARM_KINDS:
        raise ConfigError(f"arms: expected one of {ARM_KINDS} (a str, or a dict with 'kind'), "
                          f"got {value!r}")  # fmt: skip
    if kind != "pool":
        if isinstance(value, dict) and set(value) != {"kind"}:
            raise ConfigError(f"arms: kind {kind!r} takes no other key, got {sorted(value)}")
        return kind
    if not isinstance(value, dict) or set(value) - {"kind", "size"}:
        raise ConfigError(f"arms: expected {{'kind': 'pool', 'size': P}}, got {value!r}")
    return ("pool", check_int("arms.size", value.get("size", 1000), minimum=1))


def async_theta(kind: str, v: Any, xp: Any = np) -> Any:
    """The asynchronous papers' theta* from a standard normal vector ``v`` (d,): on the half
    sphere of positive coordinate sum (Li & Wang), or (1, ..., 1) / sqrt(d) whatever ``v`` (He
    et al.); written once for both engines."""
    if kind == "ones":
        return xp.ones_like(v) / np.sqrt(v.shape[-1])
    return xp.where(v.sum() < 0, -1.0, 1.0) * v / xp.linalg.norm(v)


def unit_pool(z: Any, xp: Any = np) -> Any:
    """Li & Wang's pool from standard normals ``z`` (P, d): coordinate k scaled to sd
    sqrt((d - k)/d), then each row to unit length; written once for both engines."""
    d = z.shape[-1]
    z = z * np.sqrt((d - np.arange(d)) / d).astype(z.dtype)
    return z / xp.linalg.norm(z, axis=-1, keepdims=True)


def draw_theta(spec: LinearSpec, gen: np.random.Generator) -> np.ndarray:
    """theta* of one run: uniform on the sphere, or in the ball with norm >= 0.8; on the half
    sphere of positive coordinate sum; or (1, ..., 1) / sqrt(d) (module docstring)."""
    if spec.theta in ("ones", "half_sphere"):
        return async_theta(spec.theta, gen.standard_normal(spec.dim))
    while True:
        v = gen.standard_normal(spec.dim)
        v /= np.linalg.norm(v)
        if spec.theta == "sphere":
            return v
        r = gen.random() ** (1.0 / spec.dim)
        if r >= BALL_MIN_NORM:
            return r * v


def draw_pool(spec: LinearSpec, gen: np.random.Generator) -> np.ndarray:
    """Li & Wang's pool (P, d) of one run: coordinate k ~ N(0, (d - k)/d), each row scaled to
    unit length."""
    return unit_pool(gen.standard_normal((spec.arms[1], spec.dim)))


class LinearProcess:
    """Decision sets, rewards and regret of B runs (batched over runs, agents and actions)."""

    def __init__(self, spec: LinearSpec, num_runs: int, num_agents: int, num_actions: int):
        self.spec = spec
        self.num_runs, self.num_agents, self.num_actions = num_runs, num_agents, num_actions
        self._sets_per_step = 1 if spec.shared_decision_sets else num_agents

    def reset(
        self, seeds: list[int], theta_seed: int | None, streams: RandomStreams = "per_run"
    ) -> np.ndarray:
        """Draw theta* (per run, or one shared when ``theta_seed`` is an int) and D_1."""
        gens = (streams_for(streams, seeds, "instance").generators if theta_seed is None
                else [np.random.default_rng(theta_seed)])  # fmt: skip
        theta = [draw_theta(self.spec, g) for g in gens]
        self.theta = np.broadcast_to(np.stack(theta), (self.num_runs, self.spec.dim)).copy()
        if isinstance(self.spec.arms, tuple):  # a pool per run, after theta* (module docstring)
            pool = np.stack([draw_pool(self.spec, g) for g in gens])
            self._pool = np.broadcast_to(pool, (self.num_runs, *pool.shape[1:]))
        norm = np.linalg.norm(self.theta, axis=1, keepdims=True)
        self._theta_hat = self.theta / norm
        self._inv_norm = 1.0 / norm[:, 0]
        rng = streams_for(streams, seeds, "rewards")
        s, k, d = self._sets_per_step, self.num_actions, self.spec.dim
        if self.spec.arms == "cube":
            self._w = rng.child("cube").buffered("uniform", (s, k, d))
        elif self.spec.arms != "paper":
            self._w = rng.child("pool").buffered("uniform", (s, self.spec.arms[1]))
        else:
            self._w = rng.child("directions").buffered("normal", (s, k, d))
            self._c = rng.child("means").buffered("uniform", (s, k, 2))
        self._noise = rng.child("noise").buffered(
            "uniform" if self.spec.reward == "bernoulli" else "normal", (self.num_agents,)
        )
        self.context = self._draw_sets()
        return self.context

    def _draw_sets(self, advance: np.ndarray | None = None) -> np.ndarray:
        """A (B, N, K, d) batch of decision sets per the paper's experiments (``advance``: the runs
        that draw; see :meth:`pull`), or of the ``arms`` generator (module docstring)."""
        if self.spec.arms != "paper":
            return self._shared(self._other_sets(advance))
        w = self._w.next(advance)
        u = self._c.next(advance)
        c = 0.5 + 0.1 * u[..., 0]
        c[..., 0] += 0.2  # slot 0 is the optimal action before shuffling
        c = c * self._inv_norm[:, None, None]
        th = self._theta_hat[:, None, None, :]
        w = w - (w * th).sum(-1, keepdims=True) * th
        w /= np.linalg.norm(w, axis=-1, keepdims=True)
        x = c[..., None] * th + np.sqrt(1.0 - c**2)[..., None] * w
        order = np.argsort(u[..., 1], axis=-1)
        return self._shared(np.take_along_axis(x, order[..., None], axis=-2))

    def _shared(self, x: np.ndarray) -> np.ndarray:
        """Shared decision sets: the run's one set (B, 1, K, d) as every agent's, a read-only
        broadcast view (no copy per agent)."""
        if self.spec.shared_decision_sets:
            x = np.broadcast_to(x, (self.num_runs, self.num_agents, *x.shape[2:]))
        return x

    def _own(self, x: np.ndarray) -> np.ndarray:
        """The sets without the agents' broadcast: (B, 1, K, d) if shared, else x."""
        return x[:, :1] if self.spec.shared_decision_sets else x

    def _other_sets(self, advance: np.ndarray | None) -> np.ndarray:
        """He et al.'s cube: coordinates (2u - 1) / sqrt(d); Li & Wang's pool: the K pool
        vectors of the smallest of P uniforms, in the order of their uniforms."""
        u = self._w.next(advance)
        if self.spec.arms == "cube":
            return (2.0 * u - 1.0) / np.sqrt(self.spec.dim)
        k = self.num_actions
        picked = np.argpartition(u, k - 1, axis=-1)[..., :k]
        order = np.argsort(np.take_along_axis(u, picked, axis=-1), axis=-1)
        picked = np.take_along_axis(picked, order, axis=-1)  # (B, s, K)
        return self._pool[np.arange(self.num_runs)[:, None, None], picked]

    def start_drift(self, drift: Drift, stream: BatchedRNG) -> LinearProcess:
        """Begin a ``drift`` of theta* (:mod:`fedbandit_env.drift`) from the runs' ``drift``
        stream: the changes' draws, the redrawn theta*, and a smooth drift's plane vector u. The
        process is then its own drift (:meth:`advance`)."""
        self._drift, self._theta0 = drift, self.theta.copy()
        self._changes, self._redraws = Changes(drift, stream), stream.child("instances")
        if drift.kind == "smooth":
            w = stream.child("plane").per_run(lambda g: g.standard_normal(self.spec.dim))
            self._u = orthogonal_unit(self._theta0, w)
        return self

    def advance(self, t: np.ndarray, pulling: np.ndarray) -> bool:
        """theta* in force at pull ``t`` (B,) of the pulling runs, before the pull is drawn
        (dynamic regret); the next decision sets are drawn around it. False: the engine's
        means do not change (the linear regret is the process's)."""
        drift = self._drift
        if drift.kind == "smooth":
            turned = rotated_theta(t, self._theta0, self._u, drift.period)
            self.theta = np.where(pulling[:, None], turned, self.theta)
        else:
            changed = self._changes(t, pulling)
            if not changed.any():
                return False
            self.theta = self.theta.copy()
            for b in np.flatnonzero(changed):  # rare: a loop over the changed runs
                self.theta[b] = draw_theta(self.spec, self._redraws.generators[b])
        norm = np.linalg.norm(self.theta, axis=1, keepdims=True)
        self._theta_hat = self.theta / norm
        self._inv_norm = 1.0 / norm[:, 0]
        return False

    def expected(self) -> np.ndarray:
        """Expected reward <x, theta*> of every action of the current sets (B, N, K)."""
        means = np.einsum("bnkd,bd->bnk", self._own(self.context), self.theta)
        return np.broadcast_to(means, self.context.shape[:3])

    def pull(
        self, arms: np.ndarray, runs: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Rewards, expected rewards and instant regret of the pulls; then the next sets.
        ``runs`` (B,) bool: only these runs pull (communication-only steps elsewhere: their
        streams do not advance, their decision sets stay, and their outputs are unused)."""
        means = self.expected()
        chosen = np.take_along_axis(means, arms[..., None], axis=2)[..., 0]
        best = np.broadcast_to(self._own(means).max(axis=2), chosen.shape)
        regret = best - chosen
        noise = self._noise.next(runs)
        if self.spec.reward == "bernoulli":
            rewards = (noise < chosen).astype(np.float64)
        else:
            rewards = chosen + self.spec.sigma * noise
        if runs is None:
            self.context = self._draw_sets()
        else:
            fresh = self._own(self._draw_sets(runs))
            kept = np.where(runs[:, None, None, None], fresh, self._own(self.context))
            self.context = self._shared(kept)
        return rewards, chosen, regret
