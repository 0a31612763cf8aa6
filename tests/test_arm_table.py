"""fedbandit_env.kernels.ArmTable: the per-(run, agent, arm) index arithmetic agrees with a plain
loop over runs and agents (property test), and refuses tables of another shape."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fedbandit_env.kernels import ArmTable


@st.composite
def cases(draw):
    B, N, M = (draw(st.integers(1, 4)) for _ in range(3))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    table = rng.normal(size=(B, N, M))
    arm = rng.integers(0, M, size=(B, N))
    values = rng.normal(size=(B, N))
    where = rng.random((B, N)) < 0.5
    return ArmTable.of(B, N, M), table, arm, values, where


def loop_pairs(shape):
    B, N, _ = shape
    return [(b, i) for b in range(B) for i in range(N)]


@settings(max_examples=60, deadline=None)
@given(cases())
def test_gather_add_put_and_rows_agree_with_a_plain_loop(case):
    helper, table, arm, values, where = case
    expected = np.array([[table[b, i, arm[b, i]] for i in range(helper.agents)]
                         for b in range(helper.runs)]).reshape(helper.runs, helper.agents)  # fmt: skip
    assert np.array_equal(helper.gather(table, arm), expected)

    for use_where in (False, True):
        added, put, plain_add, plain_put = (table.copy() for _ in range(4))
        mask = where if use_where else None
        helper.add(added, arm, values, where=mask)
        helper.put(put, arm, values, where=mask)
        for b, i in loop_pairs(table.shape):
            if mask is None or mask[b, i]:
                plain_add[b, i, arm[b, i]] += values[b, i]
                plain_put[b, i, arm[b, i]] = values[b, i]
        assert np.array_equal(added, plain_add)
        assert np.array_equal(put, plain_put)

    scalar = table.copy()
    helper.add(scalar, arm, 1.0, where=where)
    for b, i in loop_pairs(table.shape):
        if where[b, i]:
            table[b, i, arm[b, i]] += 1.0
    assert np.array_equal(scalar, table)

    rows = helper.rows(table)
    assert rows.shape == (helper.runs * helper.agents, helper.arms)
    for b, i in loop_pairs(table.shape):
        assert np.array_equal(rows[b * helper.agents + i], table[b, i])
    rows[0, 0] = 123.0  # a view: writes go through
    assert table[0, 0, 0] == 123.0


def test_a_table_of_another_shape_or_layout_is_refused():
    helper = ArmTable.of(2, 3, 4)
    assert helper.shape == (2, 3, 4) and helper.zeros().shape == (2, 3, 4)
    arm = np.zeros((2, 3), dtype=np.int64)
    with pytest.raises(ValueError, match="shape \\(2, 3, 4\\)"):
        helper.gather(np.zeros((2, 3, 5)), arm)
    with pytest.raises(ValueError, match="C-contiguous"):
        helper.add(np.zeros((4, 3, 2)).transpose(2, 1, 0), arm, 1.0)
    with pytest.raises(ValueError, match="positive sizes"):
        ArmTable.of(0, 3, 4)
    assert ArmTable.of(2, 3, 4) == helper  # a value: equal shapes are equal helpers
