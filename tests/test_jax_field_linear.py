"""JAX ports of two linear contextual agents (docs/jax.md, "Tests"): DisLinUCB
(``agents/jax/dislinucb.py``, docs/dislinucb.md) and decentralized FedUCB
(``agents/jax/fed_lin_ucb_decentralized.py``, docs/linear.md, "Decentralized FedUCB"), against
their numpy learners.

Both have data-dependent synchronization (DisLinUCB: the determinant-ratio trigger and a
communication step per sync; decentralized FedUCB: log-det triggers, requests and answers over
the flood channels): the regret, the messages and the schedule's statistics (syncs per run;
requests and releases per run) agree with the twin within 3 standard errors over 200 runs, and
exactly where the schedule is deterministic. Also: same key same bits, the light cone, ``act``
under ``jit`` and ``vmap``, the declarations, the refusals and the privacy noise scales."""

from __future__ import annotations

import math
from dataclasses import fields

import numpy as np
import pytest

from tests.jax_tools import AGREEMENT_RUNS, agreement, assert_light_cone

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402

import fedbandit_env.jax as fj  # noqa: E402
from agents.dislinucb import DisLinUCB as NumpyDisLinUCB  # noqa: E402
from agents.fed_lin_ucb_decentralized import DecParams  # noqa: E402
from agents.fed_lin_ucb_decentralized import (  # noqa: E402
    FedLinUCBDecentralized as NumpyDecentralized,
)
from agents.jax.dislinucb import DisLinUCB  # noqa: E402
from agents.jax.fed_lin_ucb import gram_tree  # noqa: E402
from agents.jax.fed_lin_ucb_decentralized import FedLinUCBDecentralized  # noqa: E402
from fedbandit_env.agent_registry import make_agent  # noqa: E402
from fedbandit_env.bench.evaluate import env_kwargs_for, evaluate  # noqa: E402
from fedbandit_env.errors import ConfigError  # noqa: E402
from fedbandit_env.network.ledger import AGENT_SERVER  # noqa: E402
from fedbandit_env.privacy import GramTreePrivatizer  # noqa: E402
from fedbandit_env.seeding import BatchedRNG  # noqa: E402

LINEAR = "FedBandit/LinearContextual-v0"
DIS = {"num_agents": 4, "num_arms": 5, "dim": 4, "horizon": 150}
DEC = {"num_agents": 5, "num_arms": 4, "dim": 3, "horizon": 150, "topology": "ring"}
RUNS = AGREEMENT_RUNS


def env_for(agent_id: str, base: dict, agent_kwargs: dict | None = None, **kwargs):
    """The JAX environment of ``base`` plus ``kwargs``, with the channels of the twin built with
    ``agent_kwargs``."""
    twin = make_agent(agent_id, **(agent_kwargs or {}))
    return fj.make(LINEAR, **env_kwargs_for(twin, LINEAR, {**base, **kwargs}))


def within_3se(a: np.ndarray, b: np.ndarray, what: str) -> None:
    a, b = np.asarray(a, float), np.asarray(b, float)
    se = math.sqrt(a.var(ddof=1) / len(a) + b.var(ddof=1) / len(b))
    assert abs(a.mean() - b.mean()) <= 3 * se + 1e-9, (what, a.mean(), b.mean(), se)


def numpy_twin_run(twin, env_kwargs: dict):
    """The numpy twin (an instance) over the agreement's seeds; its state stays readable."""
    evaluate(LINEAR, twin, runs=RUNS, seed=0, env_kwargs=env_kwargs)
    return twin


def jit_vmap_matches_single(env, learner, steps: int = 8) -> None:
    """init and act traced once under jit(vmap) over 3 runs give each run's action that
    jit(act) on that run alone gives (the contexts rescaled at random, so no two arms are near
    a tie); float32, int32 and bool state only. Then the same compiled programs run again from
    the same keys: same key, same bits (every action and every leaf of the final states;
    one compilation serves both checks)."""
    init_one, act_one = fj.bind(learner, fj.facts_of(env))
    start = jax.random.split(jax.random.PRNGKey(3), 3)
    reset = jax.jit(jax.vmap(env.reset))
    init = jax.jit(jax.vmap(init_one))
    act, step = jax.jit(jax.vmap(act_one)), jax.jit(jax.vmap(env.step))
    single = jax.jit(act_one)

    def play(compare: bool):
        keys = start
        (obs, env_states), states = reset(keys), init(keys)
        record = []
        for t in range(steps):
            scale = jax.random.uniform(jax.random.PRNGKey(10 + t), obs.context.shape[:-1],
                                       minval=0.2)  # fmt: skip
            obs = obs._replace(context=obs.context * scale[..., None])
            action, after = act(keys, states, obs)
            assert action.arms.dtype == jnp.int32 and action.arms.shape == (3, env.num_agents)
            if compare:
                for b in range(3):
                    one = jax.tree_util.tree_map(lambda x, b=b: x[b], (states, obs))
                    mine, _ = single(keys[b], *one)
                    np.testing.assert_array_equal(np.asarray(action.arms[b]),
                                                  np.asarray(mine.arms))  # fmt: skip
            record.append(action)
            states = after
            obs, env_states, *_ = step(keys, env_states, action)
            keys = jax.vmap(lambda k: jax.random.split(k)[0])(keys)
        return jax.tree_util.tree_leaves((record, states, env_states))

    first = play(compare=True)
    for leaf in jax.tree_util.tree_leaves(first):
        assert leaf.dtype in (jnp.float32, jnp.int32, jnp.bool_, jnp.uint32), leaf.dtype
    for a, b in zip(first, play(compare=False), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


# ================================================================ DisLinUCB
@pytest.mark.slow
def test_dislinucb_agrees_and_syncs_as_often_as_numpy():
    """D = 0.5 (data-dependent syncs, 28 to 31 per run): mean final regret, messages and floats within 3 se over 200
    runs, and the number of sync rounds per run within 3 se of the twin's ``n_sync``; every sync
    is one communication step (engine steps = T + syncs, exactly, per run)."""
    kwargs = {"sync_threshold": 0.5}
    ref, out = agreement(LINEAR, "dislinucb", DIS, kwargs, exact_messages=False)
    twin = numpy_twin_run(NumpyDisLinUCB(**kwargs), ref.env_kwargs)
    syncs = out.learner_state.n_sync
    within_3se(twin.n_sync, syncs, "sync rounds per run")
    assert 5 < syncs.mean() < DIS["horizon"] - 1 and syncs.std() > 0  # data-dependent
    np.testing.assert_array_equal(out.engine_steps, DIS["horizon"] + syncs)
    n, d = DIS["num_agents"], DIS["dim"]
    requests = out.learner_state.n_requests
    # per sync N uploads and N downloads of the buffer (d^2 + d + 1 floats); each request one
    # upload of one float, and each step with requests one broadcast to the N clients: one per
    # sync, and one more where a request went out with the last trial (no sync follows it)
    stats = 2 * n * syncs
    rest = out.messages[:, AGENT_SERVER] - stats - requests - n * syncs
    assert set(np.unique(rest)) <= {0, n}, np.unique(rest)
    np.testing.assert_array_equal(
        out.floats[:, AGENT_SERVER], stats * (d * d + d + 1) + requests + n * syncs + rest
    )


@pytest.mark.slow
def test_dislinucb_with_d0_syncs_after_every_trial_exactly_as_numpy():
    """D = 0: a sync after every trial but the last, no requests: exact message and float
    counts equal to the twin's, and T - 1 syncs in every run."""
    ref, out = agreement(LINEAR, "dislinucb", DIS, {"sync_threshold": 0.0})
    t, n, d = DIS["horizon"], DIS["num_agents"], DIS["dim"]
    np.testing.assert_array_equal(out.learner_state.n_sync, t - 1)
    np.testing.assert_array_equal(out.messages[:, AGENT_SERVER], 2 * n * (t - 1))
    np.testing.assert_array_equal(out.floats[:, AGENT_SERVER], 2 * n * (t - 1) * (d * d + d + 1))
    np.testing.assert_array_equal(out.engine_steps, 2 * t - 1)


@pytest.mark.slow
def test_dislinucb_act_under_jit_and_vmap_same_key_same_bits():
    jit_vmap_matches_single(env_for("dislinucb", DIS, horizon=30), DisLinUCB(sync_threshold=0.5))


@pytest.mark.slow
def test_dislinucb_light_cone():
    """Agent j's change reaches the others only through the server, one step later (a sync
    after every trial)."""
    env = env_for("dislinucb", DIS, horizon=40)
    assert_light_cone(env, DisLinUCB(sync_threshold=0.0), 2, steps=40, at=10, max_hops=1)


def test_dislinucb_declares_what_numpy_declares():
    config = env_for("dislinucb", DIS).config
    for kwargs in ({}, {"sync_threshold": 3.0, "alpha": 0.5}):
        port, twin = fj.make_jax_agent("dislinucb", **kwargs), NumpyDisLinUCB(**kwargs)
        assert isinstance(port, DisLinUCB)
        assert (port.agent_id, port.version, port.privacy_epsilon) == (
            twin.agent_id, twin.version, twin.privacy_epsilon)  # fmt: skip
        assert port.privacy_epsilon == math.inf
        assert port.channel_spec(config) == twin.channel_spec(config)


@pytest.mark.parametrize(
    "kwargs, field",
    [({"sync_threshold": -1.0}, "sync_threshold"), ({"lam": 0.0}, "lam"),
     ({"delta": 1.0}, "delta"), ({"R": -0.5}, "R"), ({"alpha": float("nan")}, "alpha")],
)  # fmt: skip
def test_dislinucb_refuses_what_numpy_refuses(kwargs, field):
    with pytest.raises(ConfigError) as theirs:
        NumpyDisLinUCB(**kwargs)
    with pytest.raises(ConfigError, match=rf"dislinucb: {field}") as ours:
        fj.make_jax_agent("dislinucb", **kwargs)
    assert str(ours.value) == str(theirs.value)


def test_dislinucb_checks_the_facts_in_its_params_like_numpy():
    mab = fj.make("FedBandit/Heterogeneous-v0", num_agents=3, num_arms=4, horizon=10,
                  channels=())  # fmt: skip
    with pytest.raises(ConfigError, match=r"dislinucb: family: expected 'linear'"):
        fj.bind(DisLinUCB(), fj.facts_of(mab))
    spec = DisLinUCB().channel_spec(env_for("dislinucb", DIS).config)
    dropping = {**spec, "stats": {**spec["stats"], "drop_prob": 0.1}}
    env = fj.make(LINEAR, **{**DIS, "channels": dropping})
    with pytest.raises(ConfigError, match=r"dislinucb: channels\.stats: expected participation"):
        fj.bind(DisLinUCB(), fj.facts_of(env))


@pytest.mark.parametrize("kwargs", [{}, {"sync_threshold": 0.5, "alpha": 0.3}])
def test_dislinucb_params_are_what_the_numpy_reset_computes(kwargs):
    """make_params and the numpy reset call one function (agents.dislinucb.dislin_params)."""
    facts = fj.facts_of(env_for("dislinucb", DIS))
    params = DisLinUCB(**kwargs).make_params(facts)
    ref = NumpyDisLinUCB(**kwargs)
    ref.reset(facts, BatchedRNG([np.random.SeedSequence(0)]))
    assert params == ref.params and params.threshold == ref.threshold
    assert (params.num_agents, params.dim) == (DIS["num_agents"], DIS["dim"])


# ====================================================== decentralized FedUCB
@pytest.mark.slow
def test_decentralized_agrees_and_requests_as_often_as_numpy():
    """Non-private, D_dec = 3, gamma = 2 on a ring of 5 (one clique of G^2), paper timing: mean
    final regret and messages within 3 se over 200 runs; requests and releases per run within
    3 se of the twin's (``n_requests``, ``releases``)."""
    kwargs = {"private": False, "sync_threshold": 3.0, "gamma": 2}
    ref, out = agreement(LINEAR, "fed_lin_ucb_decentralized", DEC, kwargs, exact_messages=False)
    twin = numpy_twin_run(NumpyDecentralized(**kwargs), ref.env_kwargs)
    state = out.learner_state
    within_3se(twin.n_requests, state.n_requests, "requests per run")
    within_3se(twin.releases.sum(axis=(1, 2)), state.releases.sum(axis=(1, 2)), "releases")
    assert state.n_requests.std() > 0 and state.n_requests.mean() > 10  # data-dependent
    # a communication step follows every trial after which some agent triggered
    assert (out.engine_steps > DEC["horizon"]).all()


@pytest.mark.slow
def test_decentralized_private_default_agrees_with_numpy():
    """The default (private, epsilon 1, Theorem 1's D_dec, gamma = 1: pairs on the ring):
    regret and messages within 3 se; no tree refuses a release."""
    ref, out = agreement(LINEAR, "fed_lin_ucb_decentralized", DEC, {}, exact_messages=False)
    twin = numpy_twin_run(NumpyDecentralized(), ref.env_kwargs)
    state = out.learner_state
    within_3se(twin.n_requests, state.n_requests, "requests per run")
    assert (state.capacity_refusals == 0).all()
    assert (state.clipped_rewards == 0).all() == (twin.clipped_rewards == 0).all()


@pytest.mark.slow
def test_decentralized_latency_timing_agrees_with_numpy():
    """``timing="latency"`` (messages with the pulls, no communication steps), gamma = 1:
    within 3 se, and exactly T engine steps."""
    kwargs = {"private": False, "sync_threshold": 2.0, "timing": "latency"}
    ref, out = agreement(LINEAR, "fed_lin_ucb_decentralized", DEC, kwargs, exact_messages=False)
    twin = numpy_twin_run(NumpyDecentralized(**kwargs), ref.env_kwargs)
    within_3se(twin.n_requests, out.learner_state.n_requests, "requests per run")
    np.testing.assert_array_equal(out.engine_steps, DEC["horizon"])


@pytest.mark.slow
def test_decentralized_act_under_jit_and_vmap_same_key_same_bits():
    """Private (the tree's noise from the key), with releases in the first steps."""
    env = env_for("fed_lin_ucb_decentralized", DEC, horizon=30)
    jit_vmap_matches_single(env, FedLinUCBDecentralized(sync_threshold=0.5))


@pytest.mark.slow
def test_decentralized_light_cone():
    """On the path of 6 with gamma = 2 (flood TTL 2, cliques within 2 hops), agent 0's change
    reaches agent i no earlier than d(0, i) steps later, and does reach another agent."""
    env = env_for("fed_lin_ucb_decentralized", DEC, {"gamma": 2}, num_agents=6, topology="path",
                  horizon=40)  # fmt: skip
    learner = FedLinUCBDecentralized(gamma=2, private=False, sync_threshold=0.0)
    assert_light_cone(env, learner, 0, steps=40, at=10)


def test_decentralized_declares_what_numpy_declares():
    for kwargs in ({}, {"private": False}, {"epsilon": 0.5, "gamma": 2}):
        port = fj.make_jax_agent("fed_lin_ucb_decentralized", **kwargs)
        twin = NumpyDecentralized(**kwargs)
        assert isinstance(port, FedLinUCBDecentralized)
        assert (port.agent_id, port.version, port.privacy_epsilon) == (
            twin.agent_id, twin.version, twin.privacy_epsilon)  # fmt: skip
        config = env_for("fed_lin_ucb_decentralized", DEC).config
        assert port.channel_spec(config) == twin.channel_spec(config)
    assert NumpyDecentralized(private=False).privacy_epsilon == math.inf


@pytest.mark.parametrize(
    "kwargs, field",
    [({"gamma": 0}, "gamma"), ({"epsilon": -1.0}, "epsilon"), ({"timing": "later"}, "timing"),
     ({"beta_scale": -1.0}, "beta_scale"), ({"private": "yes"}, "private")],
)  # fmt: skip
def test_decentralized_refuses_what_numpy_refuses(kwargs, field):
    with pytest.raises(ConfigError) as theirs:
        NumpyDecentralized(**kwargs)
    with pytest.raises(ConfigError, match=rf"fed_lin_ucb_decentralized: {field}") as ours:
        fj.make_jax_agent("fed_lin_ucb_decentralized", **kwargs)
    assert str(ours.value) == str(theirs.value)


def test_decentralized_checks_the_facts_in_its_params_like_numpy():
    learner = FedLinUCBDecentralized(gamma=3)
    env = env_for("fed_lin_ucb_decentralized", DEC, {"gamma": 3}, horizon=6)
    with pytest.raises(ConfigError, match="fed_lin_ucb_decentralized: horizon: expected at least"):
        fj.bind(learner, fj.facts_of(env))
    with pytest.raises(ConfigError, match=r"fed_lin_ucb_decentralized: channels\.flood"):
        fj.bind(FedLinUCBDecentralized(), fj.facts_of(fj.make(LINEAR, **DEC, channels=())))


def test_decentralized_noise_scales_are_the_numpy_learners():
    """The params are what the numpy reset computes (one function, dec_params); the (N, gamma)
    trees have its sigma_N, shift 2 Lambda, depth m (with the extra log gamma: T -> T / gamma)
    and capacity; the noise of a first release of zeros has off-diagonal variance sigma_N^2 and
    diagonal variance 2 sigma_N^2 (empirical, 4000 trees)."""
    env = env_for("fed_lin_ucb_decentralized", DEC, {"gamma": 2})
    facts = fj.facts_of(env)
    params = FedLinUCBDecentralized(gamma=2, epsilon=0.5).make_params(facts)
    ref = NumpyDecentralized(gamma=2, epsilon=0.5)
    ref.reset(facts, BatchedRNG([np.random.SeedSequence(0)]))
    assert DecParams(**{f.name: getattr(params, f.name) for f in fields(DecParams)}) == ref.params
    assert len(params.member_slot) == 2 and len(params.member_slot[0]) == DEC["num_agents"]
    c = ref.constants
    tree = gram_tree(params.constants, (DEC["num_agents"], 2))
    assert (tree.sigma, tree.shift, tree.levels) == (c.sigma_N, c.shift, c.m)
    assert isinstance(ref.tree, GramTreePrivatizer)
    assert (ref.tree.sigma, ref.tree.shift, ref.tree.levels, ref.tree.capacity) == (
        tree.sigma, tree.shift, tree.levels, tree.capacity)  # fmt: skip
    assert c.m == 1 + math.ceil(math.log2(math.ceil(DEC["horizon"] / 2)))
    assert (params.rho_min, params.rho_max, params.kappa) == (ref.rho_min, ref.rho_max, ref.kappa)
    assert params.threshold == ref.threshold == c.sync_threshold
    d, side = DEC["dim"], DEC["dim"] + 1
    zeros = jnp.zeros((*tree.shape, side, side))
    mask = jnp.ones(tree.shape, bool)

    def first(key):
        rel, _ = tree.release(key, tree.init(), zeros, mask)
        return rel.U_hat - tree.shift * jnp.eye(d), rel.u_hat

    U, u = jax.jit(jax.vmap(first))(jax.random.split(jax.random.PRNGKey(1), 400))
    U, u = np.asarray(U, np.float64) / c.sigma_N, np.asarray(u, np.float64) / c.sigma_N
    upper = np.triu_indices(d, 1)
    off = np.concatenate([U[..., upper[0], upper[1]].ravel(), u.ravel()])
    diag = np.diagonal(U, axis1=-2, axis2=-1).ravel()
    assert abs(off.var() - 1.0) < 0.05 and abs(diag.var() / 2.0 - 1.0) < 0.06
