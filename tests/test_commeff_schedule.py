"""The elimination schedule's identities (property tests) and the agents' config validation."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agents.commeff import schedule
from agents.commeff.config import EliminationConfig
from fedbandit_env.errors import ConfigError

eps_values = st.one_of(st.floats(0.01, 100.0), st.just(math.inf))


@settings(max_examples=300, deadline=None)
@given(
    r=st.integers(1, 12),
    num_arms=st.integers(2, 300),
    frac=st.floats(0.0, 1.0),
    horizon=st.integers(10, 10**7),
    n_eff=st.integers(1, 200),
    epsilon=eps_values,
    budget=st.one_of(st.none(), st.tuples(st.integers(1, 10), st.floats(1e-4, 0.99))),
    s_prev=st.integers(0, 10**6),
)
def test_width_at_most_half_resolution(r, num_arms, frac, horizon, n_eff, epsilon, budget, s_prev):
    """C(r) = c(r) + h(r) <= tilde_r / 2 with the integerised S_int."""
    active = max(1, round(frac * num_arms))
    rounds, delta = budget if budget is not None else (None, None)
    if rounds is not None:
        r = min(r, rounds)  # the budget schedule only runs epochs 1..R
    tilde = schedule.resolution(np.array([r]), rounds, delta)
    kw = dict(num_arms=num_arms, horizon=horizon, n_eff=n_eff, eps_msg=epsilon)
    s_int = schedule.integer_target(schedule.sample_target(r, active, tilde, **kw), s_prev)
    c, h = schedule.widths(r, active, s_int, **kw)
    assert s_int[0] >= s_prev + 1
    if s_int[0] >= schedule.S_INT_CAP:
        return  # capped: the epoch is longer than any horizon
    assert c[0] <= tilde[0] / 4 * (1 + 1e-12)
    assert h[0] <= tilde[0] / 4 * (1 + 1e-12)
    assert c[0] + h[0] <= tilde[0] / 2 * (1 + 1e-12)
    if math.isinf(epsilon):
        assert h[0] == 0.0


def test_spec_reference_schedule_numbers():
    """M = 50, K = 100, T = 10^4, eps = 1: S(1) = 10.17 -> 11, C(1) = 0.1202 + 0.0029."""
    kw = dict(num_arms=100, horizon=10_000, n_eff=50, eps_msg=50.0)
    s = schedule.sample_target(1, 100, 0.5, **kw)
    assert s == pytest.approx(10.17, abs=0.01)
    s_int = schedule.integer_target(s, 0)
    c, h = schedule.widths(1, 100, s_int, **kw)
    assert int(s_int) == 11
    assert float(c) == pytest.approx(0.1202, abs=1e-4)
    assert float(h) == pytest.approx(0.0029, abs=1e-4)


def test_budget_schedule_ends_at_delta_and_round_bound():
    tilde = schedule.resolution(np.arange(1, 5), 4, 0.01)
    assert tilde[-1] == pytest.approx(0.01)
    assert np.all(np.diff(tilde) < 0)
    assert schedule.max_rounds(0.25) == 3
    assert schedule.max_rounds(0.01) == 8


def test_privacy_modes_give_the_same_formulas_at_n_eff_epsilon():
    """per_message with eps_msg = N eps reproduces the paper mode exactly."""
    paper = EliminationConfig("x", epsilon=0.5, privacy="paper")
    per_msg = EliminationConfig("x", epsilon=25.0, privacy="per_message")
    assert paper.eps_msg(50) == per_msg.eps_msg(50) == 25.0


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"epsilon": 0.0}, "epsilon"),
        ({"epsilon": -1.0}, "epsilon"),
        ({"epsilon": math.nan}, "epsilon"),
        ({"epsilon": "1"}, "epsilon"),
        ({"privacy": "renyi"}, "privacy"),
        ({"rounds": 0, "delta": 0.1}, "rounds"),
        ({"rounds": 3}, "delta"),
        ({"rounds": 3, "delta": 1.5}, "delta"),
        ({"delta": 0.1}, "delta"),
    ],
)
def test_config_errors_name_agent_and_field(kwargs, field):
    with pytest.raises(ConfigError, match=rf"^cdp_mab: {field}:"):
        EliminationConfig("cdp_mab", **kwargs)
