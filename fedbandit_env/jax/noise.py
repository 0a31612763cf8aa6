"""The privacy noise's standard draws in JAX (the tree, hybrid and Gram-tree mechanisms).

Drawn with threefry's original bit layout (``jax.threefry_partitionable(False)``: one hash of the
key per two 32-bit words), not the partitionable layout that JAX uses by default (one hash per
word, from a counter over the array's indices). The partitionable layout is there to split one
array's draws across devices without communication, which one run's noise never needs; under
the rollout's ``vmap`` on CPU it made the learners' Laplace draws about 5 times slower (3·10^7
float32 draws of 10^3 runs: 0.79 s against 0.16 s). Both layouts draw i.i.d. values from the
key alone, so a run's noise is the same in any batch; the bits differ between the two.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def laplace(key: jax.Array, shape: tuple[int, ...]) -> jnp.ndarray:
    """Standard Laplace draws (float32) of ``shape`` from ``key``."""
    with jax.threefry_partitionable(False):
        return jax.random.laplace(key, shape, jnp.float32)


def normal(key: jax.Array, shape: tuple[int, ...]) -> jnp.ndarray:
    """Standard normal draws (float32) of ``shape`` from ``key``."""
    with jax.threefry_partitionable(False):
        return jax.random.normal(key, shape, jnp.float32)
