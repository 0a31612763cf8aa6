"""The environment constructors of the data-set environments (the registry's entry points).

They sit above the views: each turns its data set's keyword arguments into engine keyword
arguments (:mod:`fedbandit_env.datasets.classification`, :mod:`fedbandit_env.datasets.diabetes`,
which import no view) and builds the PettingZoo or the vector view.
"""

from __future__ import annotations

from fedbandit_env.datasets import classification, diabetes
from fedbandit_env.parallel_env import FedBanditParallelEnv
from fedbandit_env.vector_env import FedBanditVectorEnv


def classification_parallel_env(
    dataset="wine",
    features=5,
    split="iid",
    dirichlet_alpha=0.5,
    split_seed=0,
    render_mode=None,
    **kwargs,
):
    return FedBanditParallelEnv(
        render_mode=render_mode,
        **classification.env_kwargs(dataset, features, split, dirichlet_alpha, split_seed, kwargs),
    )


def classification_vector_env(
    num_runs=1,
    dataset="wine",
    features=5,
    split="iid",
    dirichlet_alpha=0.5,
    split_seed=0,
    random_streams="per_run",
    **kwargs,
):
    return FedBanditVectorEnv(
        num_runs,
        random_streams,
        **classification.env_kwargs(dataset, features, split, dirichlet_alpha, split_seed, kwargs),
    )


def diabetes_parallel_env(
    data_path=None, split="contiguous", exclusive_arms=False, seed=0, render_mode=None, **kwargs
):
    return FedBanditParallelEnv(
        render_mode=render_mode,
        **diabetes.env_kwargs(data_path, split, exclusive_arms, seed, kwargs),
    )


def diabetes_vector_env(
    num_runs=1,
    data_path=None,
    split="contiguous",
    exclusive_arms=False,
    seed=0,
    random_streams="per_run",
    **kwargs,
):
    return FedBanditVectorEnv(
        num_runs,
        random_streams,
        **diabetes.env_kwargs(data_path, split, exclusive_arms, seed, kwargs),
    )
