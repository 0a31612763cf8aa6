"""The JAX backend (docs/jax.md): the environments as pure, jittable functions of one run, the
learners as pure functions, and a rollout compiled over the whole horizon.

Needs the ``jax`` extra (``pip install -e ".[jax]"``; a CUDA build for GPUs, docs/jax.md)."""

from __future__ import annotations

try:
    import jax  # noqa: F401
except ImportError as err:  # pragma: no cover - exercised without the extra
    raise ImportError(
        "fedbandit_env.jax needs JAX: pip install 'fedbandit[jax]' (docs/jax.md)"
    ) from err

from fedbandit_env.jax.cache import cache_from_environment, enable_compilation_cache
from fedbandit_env.jax.env import EnvParams, FedBanditJaxEnv, check_state
from fedbandit_env.jax.learner import (
    JaxLearner,
    bind,
    list_jax_agents,
    make_jax_agent,
    register_jax_agent,
)
from fedbandit_env.jax.make import make
from fedbandit_env.jax.rollout import (
    RolloutResult,
    clear_programs,
    facts_of,
    params_traced,
    rollout,
)
from fedbandit_env.jax.types import COMMUNICATION, PULL, Action, Charge, EnvState, Observation

__all__ = [
    "COMMUNICATION",
    "PULL",
    "Action",
    "Charge",
    "EnvParams",
    "EnvState",
    "FedBanditJaxEnv",
    "JaxLearner",
    "Observation",
    "RolloutResult",
    "bind",
    "check_state",
    "clear_programs",
    "enable_compilation_cache",
    "facts_of",
    "list_jax_agents",
    "make",
    "make_jax_agent",
    "params_traced",
    "register_jax_agent",
    "rollout",
]

cache_from_environment()  # FEDBANDIT_JAX_CACHE=DIR: the persistent compilation cache
