"""The JAX environment (fedbandit_env.jax): make, reset/step under jit and vmap, the same
distributions as the numpy engine, communication-only steps, errors and the dtype policy."""

from __future__ import annotations

import contextlib
import math

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402

import fedbandit_env  # noqa: E402
import fedbandit_env.jax as fj  # noqa: E402
from fedbandit_env.errors import (  # noqa: E402
    ActionError,
    CommunicationError,
    ConfigError,
    UnknownIdError,
)
from fedbandit_env.jax.accumulate import (  # noqa: E402
    count_add,
    count_value,
    count_zeros,
    total_add,
    total_value,
    total_zeros,
)
from fedbandit_env.jax.make import NUMPY_ONLY, REFUSED_KWARGS  # noqa: E402
from fedbandit_env.jax.types import Action  # noqa: E402


class Fixed:
    """Every agent pulls ``arm`` every step; sends ``payload`` on ``channel`` when given."""

    def __init__(self, arm=1, channel=None, payload=1.0, pull_every=1):
        self.arm, self.channel, self.payload, self.pull_every = arm, channel, payload, pull_every

    def make_params(self, facts):
        return facts.num_agents, {k: v["dim"] for k, v in facts.channels.items()}

    def init(self, key, params):
        return jnp.zeros((), jnp.int32)

    def act(self, key, state, obs, params):
        n, dims = params
        messages = {}
        if self.channel is not None:
            dim = dims[self.channel]
            messages[self.channel] = (jnp.ones(n, bool),
                                      jnp.full((n, dim), self.payload, jnp.float32))  # fmt: skip
        pull = (state % self.pull_every) == 0
        arms = jnp.full(n, self.arm, jnp.int32)
        return Action(arms, messages, pull), state + 1


class Uniform:
    def make_params(self, facts):
        return facts.num_agents, facts.num_arms

    def init(self, key, params):
        return ()

    def act(self, key, state, obs, params):
        n, m = params
        return Action(jax.random.randint(key, (n,), 0, m, jnp.int32), {}), state


# ------------------------------------------------------------------------ make
@pytest.mark.parametrize("env_id", fedbandit_env.list_envs())
def test_make_accepts_every_generated_id_and_refuses_the_data_sets_by_name(env_id):
    spec = fedbandit_env.spec(env_id)
    refused = [k for k in REFUSED_KWARGS if spec.kwargs.get(k) is not None]
    custom = spec.vector_entry_point != "fedbandit_env.vector_env:FedBanditVectorEnv"
    if env_id in NUMPY_ONLY or refused or custom:  # data sets; presets with Byzantine agents
        with pytest.raises(ConfigError, match="not on the JAX backend"):
            fj.make(env_id)
        return
    kwargs = {"horizon": 20}
    env = fj.make(env_id, **kwargs)
    numpy_env = fedbandit_env.make_vec(env_id, **kwargs)
    assert (env.num_agents, env.num_arms, env.horizon) == (
        numpy_env.num_agents, numpy_env.num_arms, numpy_env.horizon)  # fmt: skip
    assert sorted(env.channels) == sorted(numpy_env.channels)
    obs, state = jax.jit(env.reset)(jax.random.PRNGKey(0))
    assert obs.last_arm.shape == (env.num_agents,)


def test_make_refuses_what_it_cannot_honour_by_name():
    with pytest.raises(ConfigError, match="unknown keyword argument"):
        fj.make("FedBandit/Heterogeneous-v0", num_agent=3)
    with pytest.raises(ConfigError, match="random_streams"):
        fj.make("FedBandit/Heterogeneous-v0", random_streams="block")
    with pytest.raises(UnknownIdError):
        fj.make("FedBandit/Nope-v0")
    with pytest.raises(ConfigError, match="num_agents"):
        fj.make("FedBandit/Heterogeneous-v0", num_agents=0)


def test_max_cycles_is_the_alias_of_horizon():
    assert fj.make("FedBandit/Homogeneous-v0", max_cycles=33).horizon == 33


# ------------------------------------------------------------ jit and vmap
def test_reset_and_step_are_pure_under_jit_and_vmap():
    env = fj.make("FedBandit/Heterogeneous-v0", num_agents=4, num_arms=3, horizon=5,
                  channels={"neighbors": {"kind": "neighbors", "dim": 2}})  # fmt: skip
    keys = jax.random.split(jax.random.PRNGKey(1), 6)
    obs, state = jax.jit(jax.vmap(env.reset))(keys)
    assert obs.last_arm.shape == (6, 4) and state.pulls.shape == (6,)
    arms = jnp.zeros((6, 4), jnp.int32)
    send = jnp.ones((6, 4), bool)
    payload = jnp.ones((6, 4, 2), jnp.float32)
    action = Action(arms, {"neighbors": (send, payload)}, jnp.ones(6, bool))
    step = jax.jit(jax.vmap(env.step))
    obs2, state2, rewards, done, info = step(keys, state, action)
    again = step(keys, state, action)
    np.testing.assert_array_equal(rewards, again[2])  # same key, same bits
    assert rewards.shape == (6, 4) and done.shape == (6,)
    assert obs2.deliveries["neighbors"].mask.shape == (6, 4, 3)  # complete graph: 3 slots
    np.testing.assert_array_equal(state.pulls, 0)  # the input state is untouched
    assert int(state2.ledger.step.messages[0, 0]) == 4 * 3  # complete graph, every agent sends


# ----------------------------------------------------- same distributions
def _uniform_regret(env_id, runs=400, **kwargs):
    """Mean and standard error of the final network regret of a uniform random policy, numpy
    engine and JAX environment."""
    from fedbandit_env.bench.evaluate import evaluate

    ref = evaluate(env_id, "uniform", runs=runs, env_kwargs=kwargs)
    out = fj.rollout(fj.make(env_id, **ref.env_kwargs), Uniform(), list(range(runs)))
    a, b = ref.final_regret_network, out.regret_by_agent[:, -1].sum(axis=1)
    se = math.sqrt(a.var(ddof=1) / runs + b.var(ddof=1) / runs)
    return a.mean(), b.mean(), se


@pytest.mark.parametrize(
    "kwargs",
    [
        {"instance_seed": None},  # a gossip instance per run (rejection sampling in JAX)
        {"instance": "commeff", "instance_seed": None},
        {"family": "homogeneous", "instance": "uniform", "instance_seed": None},
        {"reward": {"kind": "clipped_gaussian", "sigma": 0.5}, "instance_seed": 3},
    ],
)
def test_instances_and_rewards_have_the_numpy_distributions(kwargs):
    a, b, se = _uniform_regret("FedBandit/Heterogeneous-v0", num_agents=4, num_arms=5,
                               horizon=50, channels=(), **kwargs)  # fmt: skip
    assert abs(a - b) <= 3 * se, (a, b, se)


def test_linear_family_has_the_numpy_regret_distribution():
    a, b, se = _uniform_regret("FedBandit/LinearContextual-v0", num_agents=3, num_arms=4,
                               dim=3, horizon=40)  # fmt: skip
    assert abs(a - b) <= 3 * se, (a, b, se)


def test_fixed_instance_is_the_numpy_instance():
    env = fj.make("FedBandit/GossipTriangle-v0", horizon=10)
    _, state = env.reset(jax.random.PRNGKey(0))
    shared = fedbandit_env.make_vec("FedBandit/GossipTriangle-v0", horizon=10).config
    np.testing.assert_allclose(state.means, shared.shared_instance().means, rtol=1e-7)


# ------------------------------------------------- communication-only steps
def test_communication_steps_move_messages_but_not_the_clock():
    env = fj.make("FedBandit/Heterogeneous-v0", num_agents=3, num_arms=2, horizon=10,
                  means=[0.9, 0.1], channels={"neighbors": {"kind": "neighbors", "dim": 1}})  # fmt: skip
    out = fj.rollout(env, Fixed(arm=1, channel="neighbors", pull_every=3), [0, 1])
    np.testing.assert_array_equal(out.engine_steps, 28)  # 10 pulls, 2 communication steps each
    np.testing.assert_allclose(out.regret_by_agent[:, -1], 0.8 * 10, rtol=1e-6)
    np.testing.assert_allclose(
        out.regret_by_agent[:, :, 0], 0.8 * out.steps[None].repeat(2, 0), rtol=1e-6
    )
    np.testing.assert_array_equal(out.messages[:, 0], 28 * 6)  # every step charges


# ---------------------------------------------------------------- errors
def test_a_bad_arm_inside_jit_is_raised_after_the_rollout_by_name():
    env = fj.make("FedBandit/Heterogeneous-v0", num_agents=3, num_arms=2, horizon=10, channels=())
    with pytest.raises(ActionError, match=r"run seed 5, agent_0.*arm.*\[0, 1\]"):
        fj.rollout(env, Fixed(arm=2), [5, 6])


def test_a_long_communication_streak_is_raised():
    env = fj.make("FedBandit/Heterogeneous-v0", num_agents=2, num_arms=2, horizon=10,
                  channels=(), max_communication_steps=2)  # fmt: skip
    with pytest.raises(CommunicationError, match="max_communication_steps=2"):
        fj.rollout(env, Fixed(pull_every=5), [0])


def test_a_nan_payload_is_raised_and_a_bad_shape_before_tracing():
    env = fj.make("FedBandit/Heterogeneous-v0", num_agents=2, num_arms=2, horizon=10,
                  channels={"neighbors": {"kind": "neighbors", "dim": 1}})  # fmt: skip
    with pytest.raises(ActionError, match="messages.payload.*finite"):
        fj.rollout(env, Fixed(channel="neighbors", payload=float("nan")), [0])
    _, state = env.reset(jax.random.PRNGKey(0))
    bad = Action(jnp.zeros(2, jnp.int32), {"neighbors": jnp.zeros((2, 3))})
    with pytest.raises(ActionError, match=r"messages.neighbors.payload.*\(2, 1\)"):
        env.step(jax.random.PRNGKey(0), state, bad)
    with pytest.raises(ActionError, match="unknown channel"):
        env.step(jax.random.PRNGKey(0), state, Action(jnp.zeros(2, jnp.int32), {"x": None}))


def test_rollout_checks_its_arguments():
    env = fj.make("FedBandit/Heterogeneous-v0", horizon=10, channels=())
    with pytest.raises(ConfigError, match="checkpoints"):
        fj.rollout(env, Uniform(), [0], checkpoints=np.array([0, 5]))
    with pytest.raises(ConfigError, match="seeds"):
        fj.rollout(env, Uniform(), [-1])


# ------------------------------------------------------------- numerics
def test_exact_counts_and_compensated_sums_over_ten_million_terms():
    """The accumulators' dtype policy (docs/jax.md, "Numbers"): 10^7 increments, summed in a
    scan, against numpy's float64/int64 sums of the same increments; a plain float32 sum of
    the same terms is far off (the check can fail)."""
    terms = 10**7
    x = jax.random.uniform(jax.random.PRNGKey(0), (terms,), jnp.float32, 0.0, 0.3)
    k = jax.random.randint(jax.random.PRNGKey(1), (terms,), 0, 1000, jnp.int32)

    def body(carry, xk):
        total, count, plain = carry
        return (total_add(total, xk[0]), count_add(count, xk[1]), plain + xk[0]), None

    start = (total_zeros(), count_zeros(), jnp.zeros((), jnp.float32))
    (total, count, plain), _ = jax.jit(lambda: jax.lax.scan(body, start, (x, k)))()
    exact = np.asarray(x, np.float64).sum()
    assert abs(total_value(total) - exact) / exact < 1e-6
    assert abs(float(plain) - exact) / exact > 1e-5  # what the compensation prevents
    assert int(count_value(count)) == int(np.asarray(k, np.int64).sum())


@pytest.mark.slow
def test_regret_at_ten_million_pulls_is_exact_from_integer_counts():
    """Compiled at JAX's default level (as users run it), not the session's: running its 10^7
    steps is nearly all of this test, and a program compiled with most optimizations off runs
    them about 1.5 times slower (tests/conftest.py). What it checks, regret from integer
    counts, does not depend on the level."""
    env = fj.make("FedBandit/Heterogeneous-v0", num_agents=2, num_arms=2, horizon=10**7,
                  channels=(), means=[[0.9, 0.1], [0.8, 0.3]])  # fmt: skip
    with default_level():
        out = fj.rollout(env, Fixed(arm=1), [0, 1], checkpoints=np.array([10**7]))
    np.testing.assert_allclose(out.regret_by_agent[:, -1], 0.65 * 10**7, rtol=1e-6)


@contextlib.contextmanager
def default_level():
    """Compile at JAX's default optimization level inside the block; the session's level
    after it. The level is part of the persistent cache's key, so a program compiled here is
    never loaded by a test that runs at the session's level."""
    flag = "jax_disable_most_optimizations"
    before = jax.config.read(flag)
    jax.config.update(flag, False)
    try:
        yield
    finally:
        jax.config.update(flag, before)
