"""A real-data contextual bandit from a classification data set bundled with scikit-learn.

docs/linear.md, "Real-data environment" (decision sets as in Dubey & Pentland 2020; docs/linear.md). The data ship
inside the scikit-learn package (``load_wine``, ``load_iris``, ``load_digits``,
``load_breast_cancer``; never a ``fetch_*``), so nothing is downloaded. One arm per class; each
step every agent draws one sample (with replacement) from its own share of the data; the context
of arm k is the sample's standardized, PCA-reduced (``features`` components), unit-norm feature
vector placed in block k of a ``features * K`` vector (the disjoint encoding), so a linear model
per block can learn every class. Reward 1 iff the pulled arm is the sample's class; the instant
regret is 1 minus that.
The samples are split across agents IID or with Dirichlet label skew (``split="dirichlet"``,
concentration ``dirichlet_alpha``: per class, proportions over agents ~ Dirichlet(alpha)),
seeded by ``split_seed``. Requires the optional extra ``data`` (scikit-learn).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fedbandit_env.block_streams import RandomStreams, streams_for
from fedbandit_env.errors import ConfigError
from fedbandit_env.validation import check_int, check_real

DATASETS = ("wine", "iris", "digits", "breast_cancer")


@dataclass(frozen=True)
class DatasetSpec:
    name: str = "wine"
    features: int = 5
    split: str = "iid"
    dirichlet_alpha: float = 0.5
    split_seed: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or self.name not in DATASETS:
            raise ConfigError(f"dataset: expected one of {DATASETS}, got {self.name!r}")
        if not isinstance(self.split, str) or self.split not in ("iid", "dirichlet"):
            raise ConfigError(f"split: expected 'iid' or 'dirichlet', got {self.split!r}")
        alpha = check_real("dirichlet_alpha", self.dirichlet_alpha, low=0.0, low_open=True)
        object.__setattr__(self, "dirichlet_alpha", alpha)
        object.__setattr__(self, "features", check_int("features", self.features, minimum=1))
        object.__setattr__(self, "split_seed", check_int("split_seed", self.split_seed, minimum=0))

    def build_process(self, num_runs: int, num_agents: int, num_actions: int) -> DatasetProcess:
        """The batch's process (:class:`fedbandit_env.contextual.ProcessSource`)."""
        return DatasetProcess(self, num_runs, num_agents, num_actions)


def load_dataset(name: str) -> tuple[np.ndarray, np.ndarray]:
    try:
        from sklearn import datasets
    except ImportError:
        raise ConfigError(
            "dataset: the real-data contextual environment needs scikit-learn: "
            "pip install 'fedbandit[data]'"
        ) from None
    bunch = getattr(datasets, f"load_{name}")()
    return np.asarray(bunch.data, dtype=np.float64), np.asarray(bunch.target, dtype=np.int64)


def featurize(x: np.ndarray, features: int) -> np.ndarray:
    """Standardize, project on the top principal components, scale rows to unit norm."""
    z = (x - x.mean(axis=0)) / np.maximum(x.std(axis=0), 1e-12)
    _, _, vt = np.linalg.svd(z, full_matrices=False)
    p = z @ vt[: min(features, vt.shape[0])].T
    return p / np.maximum(np.linalg.norm(p, axis=1, keepdims=True), 1e-12)


def split_indices(labels: np.ndarray, num_agents: int, spec: DatasetSpec) -> list[np.ndarray]:
    """Each agent's sample indices: IID, or Dirichlet label skew per class."""
    if num_agents > len(labels):
        raise ConfigError(
            f"num_agents: expected at most {len(labels)} (the samples of {spec.name!r}; every "
            f"agent needs at least one sample of its own), got {num_agents}"
        )
    rng = np.random.default_rng(spec.split_seed)
    if spec.split == "iid":
        return [np.sort(p) for p in np.array_split(rng.permutation(len(labels)), num_agents)]
    shares: list[list[int]] = [[] for _ in range(num_agents)]
    for c in np.unique(labels):
        idx = rng.permutation(np.nonzero(labels == c)[0])
        cuts = (
            np.cumsum(rng.dirichlet(np.full(num_agents, spec.dirichlet_alpha)))[:-1] * len(idx)
        ).astype(int)
        for a, part in enumerate(np.split(idx, cuts)):
            shares[a].extend(part.tolist())
    out = [np.sort(np.array(s, dtype=np.int64)) for s in shares]
    empty = [a for a, s in enumerate(out) if len(s) == 0]
    if empty:
        raise ConfigError(
            f"num_agents: the Dirichlet split (dirichlet_alpha={spec.dirichlet_alpha}, "
            f"split_seed={spec.split_seed}) of the {len(labels)} samples of {spec.name!r} leaves "
            f"agents {empty[:10]}{' ...' if len(empty) > 10 else ''} of num_agents={num_agents} "
            "without a sample; use fewer agents, a larger dirichlet_alpha or another split_seed"
        )
    return out


class DatasetProcess:
    """Decision sets, rewards and regret from the data (a
    :class:`fedbandit_env.contextual.ContextualProcess`, as LinearProcess)."""

    def __init__(self, spec: DatasetSpec, num_runs: int, num_agents: int, num_actions: int):
        self.spec = spec
        x, y = load_dataset(spec.name)
        classes = int(y.max()) + 1
        if classes != num_actions:
            raise ConfigError(
                f"num_arms: expected {classes} (the classes of {spec.name!r}), got {num_actions}"
            )
        self.features = featurize(x, spec.features)
        self.labels = y
        self.num_runs, self.num_agents, self.num_actions = num_runs, num_agents, num_actions
        self.shares = split_indices(y, num_agents, spec)
        self._sizes = np.array([len(s) for s in self.shares])
        width = max(self._sizes)
        self._table = np.stack([np.pad(s, (0, width - len(s))) for s in self.shares])

    @property
    def dim(self) -> int:
        return self.features.shape[1] * self.num_actions

    def reset(
        self, seeds: list[int], theta_seed: int | None, streams: RandomStreams = "per_run"
    ) -> np.ndarray:
        self._pick = (
            streams_for(streams, seeds, "rewards")
            .child("samples")
            .buffered("uniform", (self.num_agents,))
        )
        self.context = self._draw_sets()
        return self.context

    def _draw_sets(self, advance: np.ndarray | None = None) -> np.ndarray:
        u = self._pick.next(advance)
        pos = np.minimum((u * self._sizes).astype(np.int64), self._sizes - 1)
        sample = self._table[np.arange(self.num_agents), pos]  # (B, N)
        label = self.labels[sample]
        self._label = label if advance is None else np.where(advance[:, None], label, self._label)
        f = self.features[sample]  # (B, N, p)
        p, k = f.shape[-1], self.num_actions
        sets = np.zeros((*f.shape[:2], k, k, p))  # (B, N, arm, block, p)
        arm = np.arange(k)
        sets[..., arm, arm, :] = f[..., None, :]  # arm k's features in block k
        return sets.reshape(*f.shape[:2], k, k * p)

    def expected(self) -> np.ndarray:
        return (np.arange(self.num_actions) == self._label[..., None]).astype(np.float64)

    def pull(
        self, arms: np.ndarray, runs: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``runs``: as :meth:`fedbandit_env.linear.LinearProcess.pull`."""
        rewards = (arms == self._label).astype(np.float64)
        fresh = self._draw_sets(runs)
        self.context = (
            fresh if runs is None else np.where(runs[:, None, None, None], fresh, self.context)
        )
        return rewards, rewards.copy(), 1.0 - rewards


def env_kwargs(dataset, features, split, dirichlet_alpha, split_seed, kwargs):
    """The engine keyword arguments of ``FedBandit/ClassificationContextual-v0``."""
    spec = DatasetSpec(dataset, features, split, dirichlet_alpha, split_seed)
    x, labels = load_dataset(dataset)
    classes = int(labels.max()) + 1
    p = min(features, x.shape[1])  # principal components kept
    defaults = {"num_agents": 10, "horizon": 2000, "channels": ()}
    return {
        **defaults,
        **kwargs,
        "family": "linear",
        "dataset": spec,
        "num_arms": classes,
        "dim": p * classes,
        "instance_seed": None,
    }
