"""EnvParams (docs/jax.md, "Environment params"): the explicit pytree of the JAX environment's
shape-free parameters, a sweep over them as a vmap of one compiled program."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import fedbandit_env.jax as fj
from fedbandit_env.errors import CommunicationError, ConfigError
from fedbandit_env.jax.rollout import rollout_program, run_keys

HOMOGENEOUS = "FedBandit/Homogeneous-v0"
KW = {"num_agents": 3, "num_arms": 4, "horizon": 60, "topology": "ring"}
MEANS = [
    [0.9, 0.1, 0.2, 0.3],
    [0.2, 0.8, 0.1, 0.4],
    [0.5, 0.5, 0.6, 0.1],
]


def test_default_params_are_the_configuration():
    env = fj.make(HOMOGENEOUS, means=MEANS[0], reward={"kind": "gaussian", "sigma": 0.7}, **KW)
    p = env.default_params
    np.testing.assert_array_equal(p.means, np.tile(np.float32(MEANS[0]), (3, 1)))
    assert p.theta is None
    assert float(p.reward_sigma) == np.float32(0.7)
    assert int(p.max_communication_steps) == env.config.max_communication_steps
    # a configuration that draws its instance per run has no means in its params
    assert fj.make(HOMOGENEOUS, instance_seed=None, **KW).default_params.means is None


def test_reset_and_step_read_the_params():
    """The means of params are the state's; the reward noise is sigma times the same normal."""
    env = fj.make(HOMOGENEOUS, reward={"kind": "gaussian", "sigma": 1.0}, **KW)
    key = jax.random.PRNGKey(3)
    action = fj.Action(jnp.array([0, 1, 2], jnp.int32), {})
    noise = {}
    for sigma in (0.5, 2.0):
        params = env.make_params(means=MEANS[1], reward_sigma=sigma)
        _, state = env.reset(key, params)
        np.testing.assert_array_equal(state.means, np.tile(np.float32(MEANS[1]), (3, 1)))
        _, _, rewards, _, _ = env.step(key, state, action, params)
        noise[sigma] = (np.asarray(rewards) - np.float32(MEANS[1])[[0, 1, 2]]) / sigma
    np.testing.assert_allclose(noise[0.5], noise[2.0], rtol=1e-5)


def test_a_sweep_over_means_is_one_compiled_program():
    """Three means matrices stacked per run: one program, compiled once, gives each run the
    bits of that run alone with its means (the same traced path)."""
    env = fj.make(HOMOGENEOUS, means=MEANS[0], **KW)
    learner = fj.make_jax_agent("ucb1")
    steps = np.array([20, 60])
    axes = fj.EnvParams(0, None, None, None)
    program = rollout_program(env, learner, steps, axes=axes)
    stacked = jax.tree_util.tree_map(
        lambda *x: jnp.stack(x), *[env.make_params(means=m) for m in MEANS]
    )
    keys = run_keys([0, 1, 2])
    curves, *_ = program(keys, stacked)
    reversed_means = jax.tree_util.tree_map(lambda x: x[::-1], stacked)
    program(keys, reversed_means)  # other values of the same shapes
    assert program._cache_size() == 1  # one compile for both sweeps
    for b, m in enumerate(MEANS):
        alone = fj.rollout(env, learner, [b], steps, env_params=env.make_params(means=m))
        np.testing.assert_array_equal(np.asarray(curves[b], np.float64), alone.regret_by_agent[0])


def test_params_of_a_configuration_match_that_configuration():
    """make_params(means=m) on one environment is the environment made with means=m: the
    same decisions and messages, the regret within float32 rounding (a configuration's
    params are folded into its program as constants)."""
    learner = fj.make_jax_agent("ucb1")
    base = fj.make(HOMOGENEOUS, means=MEANS[0], **KW)
    other = fj.make(HOMOGENEOUS, means=MEANS[2], **KW)
    swept = fj.rollout(base, learner, [5, 6], env_params=base.make_params(means=MEANS[2]))
    direct = fj.rollout(other, learner, [5, 6])
    np.testing.assert_allclose(swept.regret_by_agent, direct.regret_by_agent, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(swept.messages, direct.messages)
    traced = fj.rollout(other, learner, [5, 6], env_params=other.default_params)
    np.testing.assert_array_equal(swept.regret_by_agent, traced.regret_by_agent)


def test_theta_is_a_param_of_the_linear_family():
    env = fj.make("FedBandit/LinearContextual-v0", num_agents=2, num_arms=3, horizon=5, dim=3)
    theta = np.array([0.6, 0.0, 0.8])
    _, state = env.reset(jax.random.PRNGKey(0), env.make_params(theta=theta))
    np.testing.assert_array_equal(state.theta, theta.astype(np.float32))


@pytest.mark.parametrize(
    "changes, field",
    [
        ({"means": [0.1, 0.2]}, "means: expected shape (4,) or (3, 4)"),
        ({"means": [0.1, 0.2, 1.5, 0.3]}, "means: expected values in [0, 1]"),
        ({"means": MEANS}, "means: the homogeneous family expects one mean vector"),
        ({"theta": [1.0, 0.0]}, "theta: only the linear family"),
        ({"reward_sigma": 0.0}, "reward_sigma"),
        ({"max_communication_steps": -1}, "max_communication_steps"),
    ],
)
def test_bad_params_are_refused_by_name(changes, field):
    env = fj.make(HOMOGENEOUS, **KW)
    with pytest.raises(ConfigError, match=field.replace("(", r"\(").replace(")", r"\)")
                       .replace("[", r"\[").replace("]", r"\]")):  # fmt: skip
        env.make_params(**changes)


def test_a_stack_of_the_wrong_size_is_refused():
    env = fj.make(HOMOGENEOUS, **KW)
    stacked = env.default_params._replace(means=jnp.stack([env.default_params.means] * 2))
    with pytest.raises(ConfigError, match=r"env_params.means: stacked for 2 runs"):
        fj.rollout(env, fj.make_jax_agent("ucb1"), [0, 1, 2], env_params=stacked)
    wrong = env.default_params._replace(means=jnp.zeros((3, 5)))
    with pytest.raises(ConfigError, match=r"env_params.means: expected shape \(3, 4\)"):
        fj.rollout(env, fj.make_jax_agent("ucb1"), [0], env_params=wrong)


def test_the_streak_limit_is_a_param():
    """A learner that never pulls: the run stops at the params' limit and the error names it."""

    class Silent:
        def make_params(self, facts):
            return None

        def init(self, key, params):
            return ()

        def act(self, key, state, obs, params):
            return fj.Action(jnp.zeros(3, jnp.int32), {}, False), state

    env = fj.make(HOMOGENEOUS, **KW)
    with pytest.raises(CommunicationError, match="max_communication_steps=2 "):
        fj.rollout(env, Silent(), [0], env_params=env.make_params(max_communication_steps=2))


def test_a_learner_in_the_older_form_is_refused_by_name():
    """init(key, facts) / act(key, state, obs) without make_params, or an act without params:
    a ConfigError naming the learner and what to add, before anything is traced."""

    class Older:
        agent_id = "older_form"

        def init(self, key, facts):
            return ()

        def act(self, key, state, obs):
            return fj.Action(jnp.zeros(3, jnp.int32), {}), state

    env = fj.make(HOMOGENEOUS, **KW)
    with pytest.raises(ConfigError, match=r"older_form: make_params: expected a method"):
        fj.rollout(env, Older(), [0])

    class NoParamsInAct(Older):
        def make_params(self, facts):
            return None

    with pytest.raises(ConfigError, match=r"older_form: act: expected act\(key, state, obs, "):
        fj.bind(NoParamsInAct(), fj.facts_of(env))
