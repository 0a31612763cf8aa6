"""Real-data contextual environment from scikit-learn's bundled data sets (no download)."""

from __future__ import annotations

import numpy as np
import pytest

import fedbandit_env
from fedbandit_env import ConfigError
from fedbandit_env.datasets.classification import DatasetSpec, load_dataset, split_indices

ENV = "FedBandit/ClassificationContextual-v0"


def test_decision_sets_rewards_and_regret():
    v = fedbandit_env.make_vec(
        ENV, num_runs=3, num_agents=4, horizon=50, dataset="iris", features=3
    )
    obs, _ = v.reset(seed=0)
    assert obs.context.shape == (3, 4, 3, 9)  # 3 classes, 3 features in 3 disjoint blocks
    blocks = obs.context.reshape(3, 4, 3, 3, 3)
    for k in range(3):  # arm k is non-zero only in block k, with unit norm
        assert np.allclose(np.linalg.norm(blocks[:, :, k, k], axis=-1), 1.0)
        assert np.all(np.delete(blocks[:, :, k], k, axis=2) == 0)
    # every arm carries the same sample's feature row, a row of the data with that label
    diag = np.stack([blocks[:, :, k, k] for k in range(3)])
    assert np.array_equal(diag, np.broadcast_to(diag[0], diag.shape))
    data = v.engine.linear
    hit = (diag[0][..., None, :] == data.features).all(axis=-1)  # (B, N, samples)
    assert np.all(hit.any(axis=-1))
    assert np.all((hit & (data.labels == data._label[..., None])).any(axis=-1))
    label = v.engine.linear._label.copy()
    obs, rewards, _, _, info = v.step(label)
    assert np.all(rewards == 1.0) and np.all(info.instant_regret == 0.0)
    wrong = (v.engine.linear._label + 1) % 3
    obs, rewards, _, _, info = v.step(wrong)
    assert np.all(rewards == 0.0) and np.all(info.instant_regret == 1.0)


def test_dirichlet_split_skews_labels_and_iid_does_not():
    _, y = load_dataset("wine")

    def skew(spec):
        shares = split_indices(y, 5, spec)
        assert sorted(np.concatenate(shares).tolist()) == list(range(len(y)))  # a partition
        props = np.array([np.bincount(y[s], minlength=3) / len(s) for s in shares])
        return np.abs(props - np.bincount(y) / len(y)).max()

    assert skew(DatasetSpec(split="dirichlet", dirichlet_alpha=0.1)) > 2 * skew(
        DatasetSpec(split="iid")
    )


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"dataset": "mnist"}, r"dataset: expected one of"),
        ({"split": "skewed"}, r"split: expected 'iid' or 'dirichlet'"),
        ({"dirichlet_alpha": 0}, r"dirichlet_alpha: expected a finite number > 0"),
    ],
)
def test_bad_dataset_kwargs(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        fedbandit_env.make(ENV, **kwargs)
