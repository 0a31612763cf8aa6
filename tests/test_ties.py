"""The tie-breaking rules of fedbandit_env/ties.py, one function per rule for both engines:
hand-computed cases and a plain per-row loop, on numpy (float64) and JAX (float32)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from fedbandit_env.ties import (
    argmax_near_ties,
    argmax_one_uniform,
    argmax_uniform_ties,
)
from fedbandit_env.xp import rounding_tolerance

jnp = pytest.importorskip("jax.numpy")
ENGINES = {"numpy": np.asarray, "jax": jnp.asarray}


def one_uniform_loop(index: np.ndarray, u: np.ndarray) -> list[int]:
    """The rule in words, row by row: the floor(u k)-th of the k arms of maximal index; a row
    whose maximum is NaN keeps its first NaN (numpy's arg-max)."""
    picks = []
    for row, ur in zip(index, u, strict=True):
        if np.isnan(row).any():
            picks.append(int(np.flatnonzero(np.isnan(row))[0]))
            continue
        tied = [k for k, v in enumerate(row) if v == row.max()]
        picks.append(tied[min(math.floor(ur * len(tied)), len(tied) - 1)])
    return picks


@pytest.mark.parametrize("engine", ENGINES)
def test_one_uniform_hand_computed(engine):
    put = ENGINES[engine]
    index = np.array([[1.0, 3.0, 3.0, 3.0], [5.0, 0.0, 5.0, 1.0], [0.0, 2.0, 1.0, 0.0]])
    # row 0: ties {1, 2, 3}, u = 0.5 -> floor(1.5) = 1 -> arm 2; row 1: ties {0, 2}, u = 0.99 ->
    # arm 2; row 2: no tie -> arm 1 whatever u
    got = argmax_one_uniform(put(index), put(np.array([0.5, 0.99, 0.0])))
    assert np.asarray(got).tolist() == [2, 2, 1]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("seed", range(4))
def test_one_uniform_equals_a_plain_loop(engine, seed):
    rng = np.random.default_rng(seed)
    index = rng.integers(0, 3, size=(200, 7)).astype(np.float32)
    index[::5, 3] = np.inf
    if engine == "numpy":
        index[::17, 1] = np.nan  # numpy keeps arg-max's NaN pick (JAX: the NaN count flags it)
    u = rng.random(200).astype(np.float32)
    put = ENGINES[engine]
    got = np.asarray(argmax_one_uniform(put(index), put(u))).tolist()
    assert got == one_uniform_loop(index, u)


@pytest.mark.parametrize("engine", ENGINES)
def test_uniform_ties_takes_the_largest_uniform_among_exact_maxima(engine):
    put = ENGINES[engine]
    index = np.array([[2.0, 2.0, 1.0], [0.0, 1.0, 1.0]])
    u = np.array([[0.1, 0.7, 0.99], [0.9, 0.2, 0.3]])
    assert np.asarray(argmax_uniform_ties(put(index), put(u))).tolist() == [1, 2]


@pytest.mark.parametrize("engine", ["numpy", "jax", "jit"])
def test_uniform_ties_hand_computed_signed_zeros_infinities_equal_uniforms_and_nan(engine):
    """Row 0: -0 and 0 tie (u 0.2 > 0.1: arm 0); row 1: two infinite indices (u 0.6: arm 2);
    row 2: three ties, two equal largest uniforms (the lower arm, 1); row 3: a NaN (arm 0, as
    numpy picks; JAX compiled takes one reduction over the arms)."""
    index = np.array([[-0.0, 0.0, -1.0], [np.inf, 1.0, np.inf], [2.0, 2.0, 2.0],
                      [1.0, np.nan, 3.0]], np.float32)  # fmt: skip
    u = np.array([[0.2, 0.1, 0.9], [0.3, 0.9, 0.6], [0.5, 0.7, 0.7], [0.1, 0.2, 0.3]], np.float32)
    rule = argmax_uniform_ties
    if engine == "jit":
        import jax

        rule = jax.jit(argmax_uniform_ties)
    put = ENGINES["numpy" if engine == "numpy" else "jax"]
    assert np.asarray(rule(put(index), put(u))).tolist() == [0, 2, 1, 0]


@pytest.mark.parametrize("engine", ENGINES)
def test_near_ties_uses_the_dtypes_tolerance(engine):
    put = ENGINES[engine]
    dtype = np.float64 if engine == "numpy" else np.float32
    tol = rounding_tolerance(dtype)
    assert tol == (1e-12 if engine == "numpy" else 1e-5)
    # the threshold is top - 2 tol (top = 2): arm 0 (top - tol) ties, arm 2 (top - 4 tol) does not
    index = np.array([[2.0 - tol, 2.0, 2.0 - 4 * tol]], dtype=dtype)
    u = np.array([[0.9, 0.1, 0.95]], dtype=dtype)
    assert np.asarray(argmax_near_ties(put(index), put(u))).tolist() == [0]


def test_one_uniform_numpy_shortcut_is_not_fooled_by_a_nan_row_beside_a_tie():
    """One NaN row (no tied arm) and one row with two tied arms make as many tied entries as
    rows: the no-tie shortcut must not take them for a batch without ties."""
    index = np.array([[2.0, -np.inf, 2.0], [np.nan, 1.0, 0.0]])
    assert argmax_one_uniform(index, np.array([0.99, 0.5])).tolist() == [2, 0]
