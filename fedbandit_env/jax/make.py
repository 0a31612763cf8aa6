"""``fedbandit_env.jax.make``: the registered ids and keyword arguments, on the JAX backend."""

from __future__ import annotations

from typing import Any

from fedbandit_env.config import make_config
from fedbandit_env.errors import ConfigError
from fedbandit_env.jax.env import FedBanditJaxEnv
from fedbandit_env.registration import _check_kwargs, _max_cycles_alias, spec

NUMPY_ONLY = {
    "FedBandit/ClassificationContextual-v0": "its decision sets are rows of a data set",
    "FedBandit/DiabetesHospitals-v0": "its rewards are pools of a user-supplied data file",
    "FedBandit/Malicious-Vial22-v0": "its entry point samples the G(n + m, p) graph itself",
}
"""The ids the JAX backend refuses, and why (docs/jax.md, "What runs on JAX")."""

# ``adversary`` runs on JAX (fedbandit_env.jax.adversary); what it cannot honour (per-receiver
# attacks, attacks registered at run time) is refused by name when the environment is built.

REFUSED_KWARGS = {
    "dataset": "a data set's decision sets are numpy-only",
    "random_streams": "the JAX backend draws from JAX keys (numpy streams are numpy-only)",
    "client_spread": "the Gaussian client-means instance is numpy-only for now",
}


def make(id: str, **kwargs: Any) -> FedBanditJaxEnv:
    """The JAX environment of a registered id: the same defaults and keyword arguments as
    :func:`fedbandit_env.make`, validated by the same code; what the JAX backend cannot
    honour is refused by name."""
    spec_ = spec(id)
    if id in NUMPY_ONLY:
        raise ConfigError(
            f"{id}: not on the JAX backend ({NUMPY_ONLY[id]}); use fedbandit_env.make_vec"
        )
    merged = {**spec_.kwargs, **kwargs}  # a preset's own defaults count (the Byzantine presets)
    for name, why in REFUSED_KWARGS.items():
        if merged.get(name) is not None:
            raise ConfigError(f"{id}: {name}: not on the JAX backend ({why})")
    _check_kwargs(spec_, kwargs, ("max_cycles",))
    kwargs = _max_cycles_alias(kwargs)
    if spec_.vector_entry_point != "fedbandit_env.vector_env:FedBanditVectorEnv":
        raise ConfigError(f"{id}: not on the JAX backend (a custom entry point)")
    config = make_config(**{**spec_.kwargs, **kwargs})
    check_counter_range(id, config.horizon, config.max_communication_steps)
    return FedBanditJaxEnv(config, env_id=id)


INT32_MAX = 2**31 - 1


def check_counter_range(id: str, horizon: int, max_communication_steps: int) -> None:
    """The JAX backend counts pulls and engine steps in int32 (no 64-bit integers without
    JAX's x64 mode): a run's steps, at most ``horizon * (max_communication_steps + 1)``, must
    fit. The numpy engine's int64 counters take horizons up to 2^53."""
    steps = horizon * (max_communication_steps + 1)
    if steps > INT32_MAX:
        raise ConfigError(
            f"{id}: horizon: the JAX backend counts engine steps in int32, so horizon x "
            f"(max_communication_steps + 1) must be at most 2^31 - 1 = {INT32_MAX:,}; got "
            f"{horizon:,} x {max_communication_steps + 1} = {steps:,} (lower the horizon or "
            "max_communication_steps, or run it on the numpy backend)"
        )
