"""Rare work behind a batch-level ``cond`` (docs/jax.md, "Rare work"): ``any_run`` is the
batch's "some run needs it" inside the rollout's ``vmap`` and the run's own predicate outside;
``when_any`` is a real branch there, masked per run inside, and gives what the masked work gives
everywhere."""

from __future__ import annotations

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402

import fedbandit_env.jax as fj  # noqa: E402
from fedbandit_env.jax.batch import RUNS_AXIS, any_run, traced_path, when_any  # noqa: E402
from fedbandit_env.jax.rollout import compiled_program, run_keys  # noqa: E402


def test_any_run_is_the_batch_inside_the_runs_axis_and_the_run_outside():
    pred = jnp.array([False, True, False])
    inside = jax.vmap(any_run, axis_name=RUNS_AXIS)(pred)
    np.testing.assert_array_equal(inside, [True, True, True])
    outside = jax.vmap(any_run)(pred)  # a vmap of the caller's own: per run
    np.testing.assert_array_equal(outside, [False, True, False])
    assert not bool(jax.jit(any_run)(jnp.zeros(4, bool)))


def _masked(x, need):
    return when_any(need, lambda v: jnp.where(need, v * 10.0, v), x)


def test_when_any_equals_the_masked_work_and_is_a_branch_inside_the_runs_axis():
    x, need = jnp.arange(4.0), jnp.array([False, True, False, False])
    expected = jnp.where(need, x * 10.0, x)
    for f in (jax.vmap(_masked, axis_name=RUNS_AXIS), jax.vmap(_masked)):
        np.testing.assert_array_equal(jax.jit(f)(x, need), expected)
    none = jnp.zeros(4, bool)
    np.testing.assert_array_equal(jax.vmap(_masked, axis_name=RUNS_AXIS)(x, none), x)
    jaxpr = str(jax.make_jaxpr(jax.vmap(_masked, axis_name=RUNS_AXIS))(x, need))
    assert "cond[" in jaxpr and "select_n" not in jaxpr.split("cond[")[0]


def test_traced_path_takes_one_path_without_a_branch():
    x, need = jnp.arange(3.0), jnp.array([True, False, True])
    with traced_path(rare=False):
        jaxpr = str(jax.make_jaxpr(_masked)(x, need))
        np.testing.assert_array_equal(_masked(x, need), x)
    assert "cond[" not in jaxpr
    with traced_path(rare=True):
        np.testing.assert_array_equal(_masked(x, need), jnp.where(need, x * 10.0, x))


@pytest.mark.slow
def test_fed_lin_ucb_syncs_and_gossip_fed_ucb_initializes_behind_a_branch():
    """The rollout programs hold a conditional for the rare work (a sync's floor, factor and
    releases; the gossip paper's initialization), not a select of both paths."""
    from fedbandit_env.bench.evaluate import env_kwargs_for

    cases = [("fed_lin_ucb", "FedBandit/LinearContextual-v0",
              {"num_agents": 3, "num_arms": 4, "dim": 2, "horizon": 30}),
             ("gossip_fed_ucb", "FedBandit/Homogeneous-v0",
              {"num_agents": 3, "num_arms": 3, "horizon": 30, "topology": "ring"})]  # fmt: skip
    for agent, env_id, kwargs in cases:
        learner = fj.make_jax_agent(agent)
        env = fj.make(env_id, **env_kwargs_for(learner, env_id, kwargs))
        compiled, *_ = compiled_program(env, learner, np.array([30]), None, (run_keys([0, 1]),))
        assert "conditional(" in compiled.as_text(), agent
