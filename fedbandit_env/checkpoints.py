"""The regret curves' checkpoints (docs/bench.md, "Evaluate"): the default grid and the check of
a user's, shared by both engines' rollouts and the bench (a low module: the JAX rollout and the
bench's evaluate both import it, and neither imports the other for it).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from fedbandit_env.errors import ConfigError

CHECKPOINTS = 200
"""Log-spaced (and as many linear-spaced) checkpoints of the default curve grid."""


def default_checkpoints(horizon: int, points: int = CHECKPOINTS) -> np.ndarray:
    """The steps at which :func:`~fedbandit_env.bench.evaluate.evaluate` records regret curves (docs/bench.md "Evaluate").

    Every step up to ``2 * points`` steps; otherwise the union of ``points`` log-spaced and
    ``points`` linear-spaced steps, always including the horizon. At most ``2 * points``
    checkpoints whatever the horizon, so a curve's memory does not grow with T.
    """
    if horizon <= 2 * points:
        return np.arange(1, horizon + 1)
    log = np.geomspace(1, horizon, points)
    lin = np.linspace(horizon / points, horizon, points)
    return np.unique(np.concatenate([log, lin, [horizon]]).round().astype(np.int64))


def check_checkpoints(checkpoints: Any, horizon: int) -> np.ndarray:
    """The checkpoints as int64 pull counts, checked before any conversion: a 1-d sequence of
    integers (no float, NaN or bool), increasing, in [1, horizon]."""
    arr = np.asarray(checkpoints)
    expected = f"checkpoints: expected a 1-d increasing sequence of ints in [1, {horizon}]"
    if arr.ndim != 1 or arr.size == 0 or arr.dtype.kind not in "iu":
        raise ConfigError(f"{expected}, got {checkpoints!r:.80} (dtype {arr.dtype})")
    if arr.min() < 1 or arr.max() > horizon or (np.diff(arr) <= 0).any():
        raise ConfigError(f"{expected}, got {arr.tolist()!r:.80}")
    return arr.astype(np.int64)
