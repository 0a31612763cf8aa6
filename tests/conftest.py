"""The test session's JAX persistent compilation cache (docs/jax.md, "Compiling once").

Many tests compile the same program: the same rollout in both xdist workers, or a subprocess
compiling what its parent compiled. The session's controller makes one empty folder and exports
it as ``FEDBANDIT_JAX_CACHE`` before the workers start, so a program compiled once in the
session is loaded from disk afterwards (a loaded executable is the compiled one: same bits).
A folder the caller already set is used as it is; the session's own folder is removed at the
end, so no run starts warm from an earlier one.

The session also compiles with ``JAX_DISABLE_MOST_OPTIMIZATIONS=1`` unless the caller set it:
XLA's HLO passes run as always, its LLVM back end at -O0 without the expensive passes. A program
then compiles faster on CPU and runs somewhat slower, and some float32
results round differently in the last bits; the tests check behaviour (against numpy, plain
loops and hand-computed cases, and one program against itself), never the bits of a
default-level compile. ``tests/test_compile_flags.py`` checks that both levels run the same
arithmetic up to that rounding.
"""

from __future__ import annotations

import os
import shutil
import tempfile

import pytest

CACHE_VAR = "FEDBANDIT_JAX_CACHE"
OPT_VAR = "JAX_DISABLE_MOST_OPTIMIZATIONS"


def pytest_configure(config: pytest.Config) -> None:
    if not hasattr(config, "workerinput"):  # before any worker or subprocess imports JAX
        os.environ.setdefault(OPT_VAR, "1")
    if hasattr(config, "workerinput") or os.environ.get(CACHE_VAR):
        return  # an xdist worker inherits the controller's folder; a caller's folder is kept
    folder = tempfile.mkdtemp(prefix="fedbandit-jax-cache-")
    os.environ[CACHE_VAR] = folder
    config.stash[_FOLDER] = folder


def pytest_unconfigure(config: pytest.Config) -> None:
    folder = config.stash.get(_FOLDER, None)
    if folder is not None:
        os.environ.pop(CACHE_VAR, None)
        shutil.rmtree(folder, ignore_errors=True)


_FOLDER = pytest.StashKey[str]()
