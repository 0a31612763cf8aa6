"""JAX inputs are refused by name, as numpy refuses them: arms of a float, NaN or bool dtype,
checkpoints and seeds before any conversion, a horizon beyond the counters, a bad learner
keyword, and the robust suite keeps its layout cells on JAX (docs/jax.md, "Errors")."""

from __future__ import annotations

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402

import fedbandit_env.jax as fj  # noqa: E402
from fedbandit_env.bench import evaluate  # noqa: E402
from fedbandit_env.bench.store import ResultsStore  # noqa: E402
from fedbandit_env.bench.suites import get_suite  # noqa: E402
from fedbandit_env.errors import ActionError, ConfigError  # noqa: E402
from fedbandit_env.jax.types import Action  # noqa: E402

ENV = "FedBandit/Heterogeneous-v0"


class ConstantArms:
    """A JAX learner that plays ``arms`` (a fixed array) every step."""

    agent_id = "constant_arms_test"
    version = 1

    def __init__(self, arms):
        self.arms = arms

    def make_params(self, facts):
        return None

    def init(self, key, params):
        return ()

    def act(self, key, state, obs, params):
        return Action(jnp.asarray(self.arms), {}), state


@pytest.mark.parametrize(
    "arms, dtype",
    [(np.full(3, 1.0, np.float32), "float32"), (np.full(3, np.nan, np.float32), "float32"),
     (np.ones(3, bool), "bool")],  # fmt: skip
)
def test_float_nan_and_bool_arms_are_refused_by_name_after_the_rollout(arms, dtype):
    env = fj.make(ENV, num_agents=3, num_arms=4, horizon=10)
    with pytest.raises(ActionError, match=rf"run seed 0, agent_0: arm: expected integer arms in "
                                          rf"\[0, 3\], got dtype {dtype} \(step 1"):  # fmt: skip
        fj.rollout(env, ConstantArms(arms), [0, 1])


def test_out_of_range_and_misshaped_arms_are_refused():
    env = fj.make(ENV, num_agents=3, num_arms=4, horizon=10)
    with pytest.raises(ActionError, match=r"agent_2: arm: expected an int in \[0, 3\]"):
        fj.rollout(env, ConstantArms(np.array([0, 1, 4], np.int32)), [0])
    with pytest.raises(ActionError, match=r"all agents: arm: expected an array of shape \(3,\)"):
        fj.rollout(env, ConstantArms(np.zeros(2, np.int32)), [0])


def test_a_bad_arm_is_never_stored():
    """evaluate raises before any row exists: the store stays empty."""
    from fedbandit_env.jax.learner import _USER, register_jax_agent

    register_jax_agent("constant_arms_test", lambda: ConstantArms(np.full(3, 1.5, np.float32)))
    try:
        store = ResultsStore(":memory:")
        with pytest.raises(ActionError):
            evaluate(ENV, "constant_arms_test", runs=2, backend="jax",
                     env_kwargs={"num_agents": 3, "num_arms": 4, "horizon": 10})  # fmt: skip
        assert store.count() == 0
    finally:
        _USER.pop("constant_arms_test", None)


@pytest.mark.parametrize("seeds", [[1.5], [True], ["5"], [-1], [2**32], [], 3, "01"])
def test_seeds_are_checked_before_any_conversion(seeds):
    env = fj.make(ENV, num_agents=2, num_arms=3, horizon=5)
    with pytest.raises(ConfigError, match="seeds: expected"):
        fj.rollout(env, fj.make_jax_agent("ucb1"), seeds)


@pytest.mark.parametrize("checkpoints", [[np.nan], [1.5], [[1, 2]], [0], [3, 2], [6], []])
def test_checkpoints_are_checked_before_any_conversion(checkpoints):
    env = fj.make(ENV, num_agents=2, num_arms=3, horizon=5)
    with pytest.raises(ConfigError, match=r"checkpoints: expected a 1-d increasing sequence of "
                                          r"ints in \[1, 5\]"):  # fmt: skip
        fj.rollout(env, fj.make_jax_agent("ucb1"), [0], checkpoints)


def test_a_horizon_beyond_the_int32_counters_is_refused_at_make():
    with pytest.raises(ConfigError, match=r"horizon: the JAX backend counts engine steps in "
                                          r"int32"):  # fmt: skip
        fj.make(ENV, horizon=2**31)
    with pytest.raises(ConfigError, match="max_communication_steps"):
        fj.make(ENV, horizon=10**8)  # x 65 steps
    fj.make(ENV, horizon=10**7)  # the linear paper's T fits
    fj.make(ENV, horizon=10**8, max_communication_steps=1)


def test_make_jax_agent_refuses_a_bad_id_or_keyword_by_name():
    with pytest.raises(ConfigError, match="agent: expected a JAX learner id"):
        fj.make_jax_agent(5)
    with pytest.raises(ConfigError, match=r"ucb1: bad keyword arguments \['alpah'\].*accepted: "
                                          r"\['alpha', 'scale'\]"):  # fmt: skip
        fj.make_jax_agent("ucb1", alpah=1.0)


def test_the_robust_suite_on_jax_keeps_byzres_under_the_layout_attacks():
    suite = get_suite("robust").with_backend("jax")
    cells, skipped = suite.split("byzres_ucb")
    attacks = {c.env_kwargs["adversary"]["attack"] for c in cells
               if "adversary" in c.env_kwargs}  # fmt: skip
    assert {"demote_best", "flipped_means", "reverse", "zhu_code", "zhu_intended"} <= attacks
    assert not any("expected payload dim" in reason for (_env, reason) in skipped)


class NaNOnFirstSteps:
    """A JAX learner whose index is NaN at agent 0 for its first two steps of every run."""

    agent_id = "nan_jax_test"
    version = 1

    def make_params(self, facts):
        return (facts.num_agents, facts.num_arms)

    def init(self, key, params):
        return jnp.zeros((), jnp.int32)

    def act(self, key, t, obs, params):
        from fedbandit_env.ties import argmax_one_uniform

        n, m = params
        index = jnp.zeros((n, m)).at[0, 0].set(jnp.where(t < 2, jnp.nan, 0.0))
        arms = argmax_one_uniform(index, jax.random.uniform(key, (n,)))
        return Action(arms, {}), t + 1


@pytest.mark.slow
def test_nan_indices_are_counted_inside_the_compiled_rollout():
    env = fj.make(ENV, num_agents=3, num_arms=4, horizon=10)
    out = fj.rollout(env, NaNOnFirstSteps(), [0, 1, 2])
    assert out.nan_index_steps.tolist() == [2, 2, 2]
    assert fj.rollout(env, ConstantArms(np.zeros(3, np.int32)), [0]).nan_index_steps is None
    clean = fj.rollout(env, fj.make_jax_agent("ucb1"), [0, 1])
    assert clean.nan_index_steps.tolist() == [0, 0]
