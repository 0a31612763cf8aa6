"""JAX ports of the linear family (docs/linear.md, docs/jax.md): the Gram-tree Gaussian mechanism
(fedbandit_env.jax.gram_tree), linucb and centralized_linucb (baselines/jax/linucb.py) and
centralized FedUCB (agents/jax/fed_lin_ucb.py), against their numpy twins; and the linear
environment's regret distribution under uniform play."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.jax_tools import agreement, assert_light_cone, same_bits, trajectory

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402

import fedbandit_env.jax as fj  # noqa: E402
from agents.fed_lin_ucb import FedLinUCB as NumpyFedLinUCB  # noqa: E402
from fedbandit_env.errors import ConfigError  # noqa: E402
from fedbandit_env.jax.gram_tree import GramTree  # noqa: E402
from fedbandit_env.jax.types import Action  # noqa: E402
from fedbandit_env.linear_kernels import linear_privacy_constants  # noqa: E402
from fedbandit_env.network.ledger import AGENT_SERVER  # noqa: E402
from fedbandit_env.privacy import GramTreePrivatizer  # noqa: E402
from fedbandit_env.privacy.errors import PrivacyBudgetWarning, PrivacyError  # noqa: E402
from fedbandit_env.seeding import BatchedRNG  # noqa: E402

LINEAR = "FedBandit/LinearContextual-v0"
SMALL = {"num_agents": 4, "num_arms": 5, "dim": 4, "horizon": 200}
FED_CHANNELS = {
    "sync": {"kind": "server", "dim": 1, "aggregate": "sum"},
    "stats": {"kind": "server", "dim": 4 * 4 + 4, "aggregate": "sum"},
}


def linear_env(**kwargs):
    return fj.make(LINEAR, **{**SMALL, **kwargs})


def fed_env(**kwargs):
    return linear_env(channels=FED_CHANNELS, **kwargs)


# ------------------------------------------------------------- the Gram tree
_release = {}


def _jitted(tree: GramTree):
    key = (tree.shape, tree.d, tree.levels, tree.shift)
    if key not in _release:
        _release[key] = jax.jit(tree.release)
    return _release[key]


@pytest.mark.slow
@settings(max_examples=25, deadline=None)
@given(
    agents=st.integers(1, 3),
    d=st.integers(1, 3),
    levels=st.integers(1, 3),
    shift=st.sampled_from([0.0, 1.0, 2.5]),
    steps=st.lists(st.tuples(st.integers(0, 7), st.integers(0, 2**31 - 1)), max_size=9),
)
def test_noiseless_release_is_the_exact_prefix_sum_of_the_released_leaves(agents, d, levels,
                                                                          shift, steps):  # fmt: skip
    """sigma = 0: release k of each tree is the sum of its first k leaves (+ shift I), a full
    tree repeats its last release, and every value equals the numpy privatizer's."""
    tree = GramTree((agents,), d, sigma=0.0, shift=shift, levels=levels)
    twin = GramTreePrivatizer((agents,), d, sigma=0.0, shift=shift, levels=levels)
    release, state = _jitted(tree), tree.init()
    side = d + 1
    prefix = np.zeros((agents, side, side))
    count = np.zeros(agents, np.int64)
    last_U, last_u = np.zeros((agents, d, d)), np.zeros((agents, d))
    for bits, seed in steps:
        mask = np.array([(bits >> i) & 1 for i in range(agents)], bool)
        # small integers: every float32 sum is exact
        Q = np.random.default_rng(seed).integers(-4, 5, (agents, side, side)).astype(np.float32)
        out, state = release(jax.random.PRNGKey(seed), state, Q, mask)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PrivacyBudgetWarning)
            ref = twin.release(Q[None].astype(np.float64), mask[None])
        accepted = mask & (count < tree.capacity)
        prefix[accepted] += Q[accepted]
        count += accepted
        last_U[accepted] = prefix[accepted, :d, :d] + shift * np.eye(d)
        last_u[accepted] = prefix[accepted, :d, d]
        np.testing.assert_array_equal(np.asarray(out.released), accepted)
        np.testing.assert_array_equal(np.asarray(out.index), count)
        np.testing.assert_array_equal(np.asarray(out.U_hat), last_U)
        np.testing.assert_array_equal(np.asarray(out.u_hat), last_u)
        np.testing.assert_array_equal(np.asarray(out.U_hat), ref.U_hat[0])
        np.testing.assert_array_equal(np.asarray(out.u_hat), ref.u_hat[0])
        np.testing.assert_array_equal(np.asarray(GramTree.exact_sum(state)), prefix)


def test_the_tree_has_the_numpy_calibration_and_its_noise_scale():
    """sigma_N, shift 2 Lambda and depth m are the numpy calibration's; release k carries
    popcount(k) node matrices: off-diagonal variance popcount(k) sigma_N^2, diagonal twice
    that, symmetric."""
    c = linear_privacy_constants(1.0, 0.1, 3, 4, 200, alpha=0.1, L=1.0, B=1.0)
    tree = GramTree.from_constants(c, (4,))
    twin = GramTreePrivatizer.from_constants(c, (4,), rng=BatchedRNG([np.random.SeedSequence(0)]))
    assert (tree.sigma, tree.shift, tree.levels) == (c.sigma_N, 2.0 * c.Lambda, c.m)
    assert (tree.sigma, tree.shift, tree.levels, tree.capacity) == (
        twin.sigma, twin.shift, twin.levels, twin.capacity)  # fmt: skip
    assert tree.capacity == 1 << (c.m - 1) == 256

    def noise(key):
        state, out, released = tree.init(), [], []
        for _ in range(4):
            key, sub = jax.random.split(key)
            rel, state = tree.release(sub, state, jnp.zeros((4, 4, 4)), jnp.ones(4, bool))
            out.append(GramTree.noise_sum(state))
            released.append(rel.U_hat)
        return jnp.stack(out), jnp.stack(released)

    z, released = jax.jit(jax.vmap(noise))(jax.random.split(jax.random.PRNGKey(0), 1500))
    z = np.asarray(z)
    # the released matrices are the (here noise-only) prefix sums plus the shift
    shifted = z[..., :3, :3] + tree.shift * np.eye(3)
    np.testing.assert_allclose(np.asarray(released), shifted, rtol=1e-6, atol=0.0)
    np.testing.assert_array_equal(z, np.swapaxes(z, -1, -2))
    upper = np.triu_indices(4, 1)
    for k, terms in zip(range(4), (1, 1, 2, 1), strict=True):
        off = z[:, k][..., upper[0], upper[1]].ravel() / c.sigma_N
        diag = np.diagonal(z[:, k], axis1=-2, axis2=-1).ravel() / c.sigma_N
        # 36,000 and 24,000 draws: relative se of a variance about 0.75 % and 0.9 %
        assert abs(off.var() / terms - 1.0) < 0.05, (k, off.var())
        assert abs(diag.var() / (2 * terms) - 1.0) < 0.05, (k, diag.var())
        assert abs(off.mean()) < 0.05 * math.sqrt(terms)


def test_the_tree_refuses_bad_parameters_like_the_numpy_privatizer():
    for kwargs in ({"sigma": -1.0}, {"shift": float("nan")}, {"levels": 0}):
        args = {"sigma": 1.0, "shift": 0.0, "levels": 2, **kwargs}
        with pytest.raises(PrivacyError):
            GramTree((2,), 2, **args)
    with pytest.raises(PrivacyError):
        GramTree((0,), 2, sigma=1.0, shift=0.0, levels=2)


# -------------------------------------------------------------- environment
@pytest.mark.slow
def test_linear_environment_has_the_numpy_instant_regret_under_uniform_play():
    """Mean instant regret of a uniform random policy, numpy engine against the JAX
    environment, within 3 standard errors (per-run means over 400 runs)."""
    from fedbandit_env.bench.evaluate import evaluate

    class Uniform:
        def make_params(self, facts):
            return (facts.num_agents, facts.num_arms)

        def init(self, key, params):
            return ()

        def act(self, key, state, obs, params):
            n, k = params
            return Action(jax.random.randint(key, (n,), 0, k, jnp.int32), {}), state

    runs, scale = 400, SMALL["num_agents"] * SMALL["horizon"]
    ref = evaluate(LINEAR, "uniform", runs=runs, env_kwargs=SMALL)
    out = fj.rollout(fj.make(LINEAR, **ref.env_kwargs), Uniform(), list(range(runs)))
    a = ref.final_regret_network / scale
    b = out.regret_by_agent[:, -1].sum(axis=1) / scale
    se = math.sqrt(a.var(ddof=1) / runs + b.var(ddof=1) / runs)
    assert abs(a.mean() - b.mean()) <= 3 * se, (a.mean(), b.mean(), se)
    assert 0.1 < b.mean() < 0.25  # K - 1 actions 0.1-0.3 below the best one


# ------------------------------------------------------------- agreement
@pytest.mark.slow
@pytest.mark.parametrize("agent_id", ["linucb", "centralized_linucb"])
def test_linucb_ports_agree_with_numpy(agent_id):
    ref, out = agreement(LINEAR, agent_id, SMALL)
    assert out.messages.sum() == 0 and ref.messages.sum() == 0


@pytest.mark.slow
@pytest.mark.parametrize(
    "agent_kwargs, exact",
    [
        ({}, False),  # private, Theorem 1's D, paper timing: data-dependent syncs
        ({"schedule": "fixed", "num_syncs": 5, "beta_scale": 0.1}, True),
        pytest.param(
            {"private": False, "sync_threshold": 0.0},
            True,  # a sync every trial
            marks=pytest.mark.slow,
        ),
    ],
    ids=["private-adaptive", "private-fixed", "nonprivate-D0"],
)
def test_fed_lin_ucb_agrees_with_numpy(agent_kwargs, exact):
    ref, out = agreement(LINEAR, "fed_lin_ucb", SMALL, agent_kwargs, exact_messages=exact)
    n, d, t = SMALL["num_agents"], SMALL["dim"], SMALL["horizon"]
    if agent_kwargs.get("schedule") == "fixed":
        syncs = agent_kwargs["num_syncs"]
    elif agent_kwargs.get("sync_threshold") == 0.0:
        syncs = t - 1  # no sync after the last trial
    else:
        syncs = None
    if syncs is not None:  # uploads and the broadcast of every agent, on stats only
        np.testing.assert_array_equal(out.messages[:, AGENT_SERVER], 2 * n * syncs)
        np.testing.assert_array_equal(out.floats[:, AGENT_SERVER], 2 * n * syncs * (d * d + d))
        np.testing.assert_array_equal(out.engine_steps, t + syncs)
        np.testing.assert_array_equal(out.learner_state.n_sync, syncs)
    assert (out.learner_state.capacity_refusals == 0).all()


@pytest.mark.slow
def test_fed_lin_ucb_latency_timing_agrees_with_numpy():
    agreement(LINEAR, "fed_lin_ucb", SMALL, {"timing": "latency", "private": False,
              "sync_threshold": 20.0}, runs=100, exact_messages=False)  # fmt: skip


# ------------------------------------------------------------- same bits, vmap
@pytest.mark.slow
def test_same_key_same_bits():
    same_bits(fed_env(horizon=30), fj.make_jax_agent("fed_lin_ucb", sync_threshold=0.0), [0, 1])


@pytest.mark.slow
def test_act_is_pure_under_jit_and_vmap():
    """init and act traced once under jit(vmap) choose the arms that one run at a time does
    (decision sets rescaled at random so that no two arms are near a tie); float32, int32 and
    bool state only."""
    env = fed_env(horizon=30)
    facts = fj.facts_of(env)
    keys = jax.random.split(jax.random.PRNGKey(3), 3)
    obs, _ = jax.jit(jax.vmap(env.reset))(keys)
    scale = jax.random.uniform(jax.random.PRNGKey(4), obs.context.shape[:-1], minval=0.2)
    obs = obs._replace(context=obs.context * scale[..., None])
    for agent_id in ("linucb", "centralized_linucb", "fed_lin_ucb"):
        init, act_one = fj.bind(fj.make_jax_agent(agent_id), facts)
        states = jax.jit(jax.vmap(init))(keys)
        action, after = jax.jit(jax.vmap(act_one))(keys, states, obs)
        assert action.arms.dtype == jnp.int32 and action.arms.shape == (3, 4)
        act = jax.jit(act_one)
        for b in range(3):
            one = jax.tree_util.tree_map(lambda x, b=b: x[b], (states, obs))
            single, _ = act(keys[b], *one)
            np.testing.assert_array_equal(action.arms[b], single.arms)
        for leaf in jax.tree_util.tree_leaves(after):
            assert leaf.dtype in (jnp.float32, jnp.int32, jnp.bool_), (agent_id, leaf.dtype)


# ------------------------------------------------------------- light cone
@pytest.mark.slow
def test_linucb_agents_are_independent():
    """Changing agent 1's decision sets changes agent 1's play and nobody else's."""
    env = linear_env(horizon=30)
    learner = fj.make_jax_agent("linucb")
    base = trajectory(env, learner, [0, 1, 2, 3], 30)
    moved = trajectory(env, learner, [0, 1, 2, 3], 30, perturb_agent=1, at=10)
    changed = (base["arms"] != moved["arms"]).any(axis=(0, 1))
    assert changed.tolist() == [False, True, False, False]
    assert (base["arms"][:10] == moved["arms"][:10]).all()


@pytest.mark.slow
def test_fed_lin_ucb_light_cone():
    """Agent j's change reaches the others only through the server, one step later (a sync
    after every trial, non-private so that one changed reward moves the others' choices)."""
    learner = fj.make_jax_agent("fed_lin_ucb", private=False, sync_threshold=0.0)
    assert_light_cone(fed_env(horizon=40), learner, 2, steps=40, at=10, max_hops=1)


# ------------------------------------------------------------- errors
@pytest.mark.parametrize(
    "agent_id, kwargs, field",
    [
        ("linucb", {"lam": 0.0}, "lam"),
        ("centralized_linucb", {"alpha": 1.5}, "alpha"),
        ("fed_lin_ucb", {"epsilon": -1.0}, "epsilon"),
        ("fed_lin_ucb", {"timing": "later"}, "timing"),
        ("fed_lin_ucb", {"schedule": "fixed"}, "num_syncs"),
        ("fed_lin_ucb", {"beta_scale": -1.0}, "beta_scale"),
    ],
)
def test_bad_hyperparameters_raise_naming_the_agent_and_field(agent_id, kwargs, field):
    with pytest.raises(ConfigError, match=rf"{agent_id}.*{field}"):
        fj.make_jax_agent(agent_id, **kwargs)


@pytest.mark.parametrize("agent_id", ["linucb", "centralized_linucb", "fed_lin_ucb"])
def test_a_linear_learner_on_a_multi_armed_family_raises_at_init(agent_id):
    env = fj.make("FedBandit/Heterogeneous-v0", num_agents=3, num_arms=4, horizon=10,
                  channels=())  # fmt: skip
    with pytest.raises(ConfigError, match=rf"{agent_id}: family: expected 'linear'"):
        init, _ = fj.bind(fj.make_jax_agent(agent_id), fj.facts_of(env))
        init(jax.random.PRNGKey(0))


def test_fed_lin_ucb_checks_its_channels_and_schedule_in_its_params():
    learner = fj.make_jax_agent("fed_lin_ucb")
    with pytest.raises(ConfigError, match=r"fed_lin_ucb: channels\.sync"):
        fj.bind(learner, fj.facts_of(linear_env(channels=())))
    learner = fj.make_jax_agent("fed_lin_ucb", schedule="fixed", num_syncs=200)
    with pytest.raises(ConfigError, match="fed_lin_ucb: num_syncs: expected at most"):
        fj.bind(learner, fj.facts_of(fed_env()))


def test_the_jax_learner_declares_what_the_numpy_learner_declares():
    for kwargs in ({}, {"private": False}, {"epsilon": 0.5}):
        port, ref = fj.make_jax_agent("fed_lin_ucb", **kwargs), NumpyFedLinUCB(**kwargs)
        assert (port.agent_id, port.version, port.privacy_epsilon) == (
            ref.agent_id, ref.version, ref.privacy_epsilon)  # fmt: skip
        config = fed_env().config
        assert port.channel_spec(config) == ref.channel_spec(config)


@pytest.mark.parametrize(
    "kwargs",
    [{}, {"private": False}, {"schedule": "fixed", "num_syncs": 7, "timing": "latency"},
     {"sync_threshold": 3.0, "eig_floor": 2.0}],
)  # fmt: skip
def test_the_jax_params_are_what_the_numpy_reset_computes(kwargs):
    """make_params and the numpy reset call one function (agents.fed_lin_ucb.fedlin_params):
    the same constants, threshold, floor and fixed schedule; the numpy learner reads them."""
    env = fed_env()
    facts = fj.facts_of(env)
    params = fj.make_jax_agent("fed_lin_ucb", **kwargs).make_params(facts)
    ref = NumpyFedLinUCB(**kwargs)
    ref.reset(facts, BatchedRNG([np.random.SeedSequence(0)]))
    assert params == ref.params
    assert (ref.threshold, ref.rho_min, ref.rho_max, ref.kappa, ref.eig_floor) == (
        params.threshold, params.rho_min, params.rho_max, params.kappa, params.eig_floor)  # fmt: skip
    assert (ref.constants is None) == (not ref.config.private)
    if kwargs.get("schedule") == "fixed":
        span = SMALL["horizon"] - 2  # latency: the last sync completes within the horizon
        assert params.fixed_trials == tuple(math.ceil(k * span / 7) for k in range(1, 8))


def test_fed_lin_ucb_params_refuse_a_short_horizon_naming_the_field():
    learner = fj.make_jax_agent("fed_lin_ucb")
    with pytest.raises(ConfigError, match="^fed_lin_ucb: horizon: expected at least 3 trials"):
        learner.make_params(fj.facts_of(fed_env(horizon=2)))
