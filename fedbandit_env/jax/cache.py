"""JAX's persistent compilation cache (docs/jax.md, "Compiling once").

The rollout keeps its compiled programs for the life of the process
(:func:`fedbandit_env.jax.rollout.compiled_program`). Across processes, JAX can keep XLA's
compiled executables on disk: :func:`enable_compilation_cache` turns that on for a folder, and
setting ``FEDBANDIT_JAX_CACHE=DIR`` does it when :mod:`fedbandit_env.jax` is imported. A later
process compiling the same program on the same device and JAX release then loads it instead.
"""

from __future__ import annotations

import os
from pathlib import Path

import jax

from fedbandit_env.errors import ConfigError

ENV_VAR = "FEDBANDIT_JAX_CACHE"


def enable_compilation_cache(path: str | os.PathLike) -> Path:
    """Keep every compiled program in the folder ``path`` (made if missing), however fast it
    compiled, and return the folder. Call it before the first rollout of the process."""
    if not isinstance(path, str | os.PathLike) or not str(path):
        raise ConfigError(f"{ENV_VAR}: expected a folder path, got {path!r}")
    folder = Path(path).expanduser()
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ConfigError(f"{ENV_VAR}: cannot make the folder {folder} ({err})") from None
    jax.config.update("jax_compilation_cache_dir", str(folder))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    return folder


def cache_from_environment() -> Path | None:
    """:func:`enable_compilation_cache` on ``$FEDBANDIT_JAX_CACHE`` when it is set."""
    value = os.environ.get(ENV_VAR)
    return enable_compilation_cache(value) if value else None
