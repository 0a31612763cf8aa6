"""The JAX ports of the baseline zoo (docs/jax.md): ``baselines/jax/index.py`` (ucb1, kl_ucb,
epsilon_greedy, thompson_beta, thompson_gaussian, each with ``_shared``) and
``baselines/jax/trivial.py`` (uniform, flooding, centralized_ucb1) against their numpy twins.

Agreement is in distribution (mean final regret within 3 standard errors over 200 runs) with
exact message and float counts; the same key gives the same bits; the shared variants respect
the light cone and the independent ones send nothing that could carry information."""

from __future__ import annotations

import functools

import numpy as np
import pytest

from tests.jax_tools import agreement, assert_light_cone, same_bits, trajectory

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402

import fedbandit_env.jax as fj  # noqa: E402
from fedbandit_env.agent_registry import make_agent  # noqa: E402
from fedbandit_env.bench.evaluate import env_kwargs_for  # noqa: E402
from fedbandit_env.errors import ConfigError  # noqa: E402

ENV = "FedBandit/Heterogeneous-v0"
SMALL = {"num_agents": 5, "num_arms": 5, "horizon": 200, "topology": "ring"}
INDEPENDENT = ["ucb1", "kl_ucb", "epsilon_greedy", "thompson_beta", "thompson_gaussian"]
SHARED = [f"{a}_shared" for a in INDEPENDENT]
TRIVIAL = ["uniform", "flooding", "centralized_ucb1"]
PORTS = INDEPENDENT + SHARED + TRIVIAL
TALKERS = {*SHARED, "flooding"}  # the ports that send


def env_kwargs(agent_id: str, **kwargs) -> dict:
    """SMALL plus the twin's channels; a learner that sends nothing gets no channel."""
    kwargs = {**SMALL, **kwargs}
    if agent_id not in TALKERS:
        return {**kwargs, "channels": {}}
    return env_kwargs_for(make_agent(agent_id), ENV, kwargs)


def jax_env(agent_id: str, **kwargs):
    return fj.make(ENV, **env_kwargs(agent_id, **kwargs))


# ------------------------------------------------------------ agreement
@pytest.mark.parametrize("agent_id", PORTS)
def test_agrees_with_the_numpy_twin(agent_id):
    """Mean final regret within 3 se over 200 runs; message and float counts equal per run."""
    ref, out = agreement(ENV, agent_id, env_kwargs(agent_id))
    if agent_id in TALKERS:  # every agent sends to both ring neighbours every step
        dim = SMALL["num_arms"] * (1 if agent_id == "flooding" else 2)
        sent = 2 * SMALL["num_agents"] * SMALL["horizon"]
        assert (out.messages.sum(axis=1) == sent).all()
        assert (out.floats.sum(axis=1) == sent * dim).all()
    else:
        assert (out.messages == 0).all() and (ref.messages == 0).all()


def test_thompson_gaussian_agrees_on_gaussian_rewards():
    """Unbounded rewards: the posterior scale is 1 (sigma = 1) in both backends."""
    agreement(ENV, "thompson_gaussian_shared",
              env_kwargs("thompson_gaussian_shared", reward={"kind": "gaussian", "sigma": 1.0}))  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("agent_id", ["thompson_beta", "kl_ucb_shared"])
def test_bounded_non_binary_rewards_agree(agent_id):
    """Clipped Gaussian rewards: the rewards mapped to [0, 1] (KL-UCB) and the Bernoulli trick
    (Beta Thompson sampling), which are the identity on Bernoulli rewards."""
    reward = {"kind": "clipped_gaussian", "sigma": 0.5}
    agreement(ENV, agent_id, env_kwargs(agent_id, reward=reward))


# ------------------------------------------------------------ same bits
SAME_BITS_FAST = {"thompson_beta_shared"}  # the most random streams; the others: slow


@pytest.mark.parametrize(
    "agent_id",
    [a if a in SAME_BITS_FAST else pytest.param(a, marks=pytest.mark.slow) for a in PORTS],
)
def test_same_key_same_bits(agent_id):
    env = jax_env(agent_id, num_agents=3, num_arms=3, horizon=40)
    same_bits(env, fj.make_jax_agent(agent_id), [0, 1, 2])


# ----------------------------------------------------------- light cone
LIGHT_CONE_FAST = {"ucb1_shared"}  # one protocol (IndexPolicy.act) for all: the rest slow


@pytest.mark.parametrize(
    "agent_id",
    [a if a in LIGHT_CONE_FAST else pytest.param(a, marks=pytest.mark.slow) for a in SHARED],
)
def test_shared_variants_respect_the_light_cone(agent_id):
    """A change of agent 0's rewards reaches agent i no earlier than d(0, i) steps later, and
    does reach another agent (ring of 5: at most 2 hops)."""
    env, learner = jax_env(agent_id), fj.make_jax_agent(agent_id)
    assert_light_cone(env, learner, j=0, steps=32, at=10, expect_spread=True)


def test_independent_learner_keeps_changes_to_itself():
    env, learner = jax_env("kl_ucb"), fj.make_jax_agent("kl_ucb")
    assert_light_cone(env, learner, j=2, steps=32, at=10, expect_spread=False)


def test_flooding_is_max_consensus_one_hop_per_step():
    """Flooding's arms ignore rewards (a reward probe would be vacuous), so its light cone is
    checked exactly: the view agent i sends at step s is max_j counts_j(s - 1 - d(i, j))
    (Zhu, Zhu, Liu & Liu 2021, Lemma 1; tests/test_light_cone.py for the numpy twin)."""
    kwargs = {"num_agents": 6, "num_arms": 3, "horizon": 30, "topology": "path"}
    env_id = "FedBandit/Homogeneous-v0"
    env = fj.make(env_id, **env_kwargs_for(make_agent("flooding"), env_id, kwargs))
    steps = 15
    rec = trajectory(env, fj.make_jax_agent("flooding"), [0, 1], steps)
    arms, known = rec["arms"], rec["payloads"]["neighbors"]  # (T, B, N), (T, B, N, M)
    pulls = np.cumsum(arms[..., None] == np.arange(3), axis=0)  # pulls[k]: after k + 1 steps
    history = np.concatenate([np.zeros((1, *pulls.shape[1:])), pulls])  # history[k]: k steps
    dist = env.config.topology.hop_distances
    for s in range(1, steps + 1):
        for i in range(6):
            lagged = [history[max(s - 1 - dist[i, j], 0)][:, j] for j in range(6)]
            np.testing.assert_array_equal(known[s - 1][:, i], np.max(lagged, axis=0))
    assert known[-1].max() > 0 and (known[-1] > pulls[-2]).any()  # others' counts did arrive


# ------------------------------------------------------------- jit/vmap
BATCH = 4


@functools.cache
def batched_env(channels: str):
    """A batch of BATCH runs of the SMALL environment with the channels of ``channels`` (an
    agent id): (env, first observations, states, jitted vmapped step), built once per kind."""
    env = jax_env(channels)
    keys = jax.random.split(jax.random.PRNGKey(7), BATCH)
    obs, state = jax.vmap(env.reset)(keys)
    return env, obs, state, jax.jit(jax.vmap(env.step))


@pytest.mark.parametrize("agent_id", PORTS)
def test_act_runs_under_jit_and_vmap(agent_id):
    """``jax.jit(jax.vmap(act))`` over a batch of runs: arms (B, N) int32 in range, the twin's
    messages by shape and dtype, and the same bits for the same keys and state."""
    kind = "flooding" if agent_id == "flooding" else "ucb1_shared" if agent_id in SHARED else "ucb1"
    env, obs, env_state, step = batched_env(kind)
    learner = fj.make_jax_agent(agent_id)
    facts = fj.facts_of(env)
    keys = jax.random.split(jax.random.PRNGKey(11), BATCH)
    init, act_one = fj.bind(learner, facts)
    state = jax.vmap(init)(keys)
    act = jax.jit(jax.vmap(act_one))
    for _ in range(3):
        action, next_state = act(keys, state, obs)
        again, _ = act(keys, state, obs)
        np.testing.assert_array_equal(action.arms, again.arms)
        assert action.arms.shape == (BATCH, 5) and action.arms.dtype == jnp.int32
        assert ((action.arms >= 0) & (action.arms < 5)).all()
        obs, env_state, *_ = step(keys, env_state, action)
        keys, state = jax.vmap(lambda k: jax.random.split(k)[0])(keys), next_state
    assert sorted(action.messages) == (["neighbors"] if agent_id in TALKERS else [])
    for send, payload in action.messages.values():
        assert send.shape == (BATCH, 5) and payload.dtype == jnp.float32
        assert payload.shape == (BATCH, 5, env.channels["neighbors"].dim)
    assert int(env_state.error[:, 0].max()) == 0


# ----------------------------------------------------------- the twin's
@pytest.mark.parametrize("agent_id", PORTS)
def test_id_version_and_channels_are_the_twins(agent_id):
    twin, port = make_agent(agent_id), fj.make_jax_agent(agent_id)
    assert (port.agent_id, port.version, port.privacy_epsilon) == (
        twin.agent_id, twin.version, twin.privacy_epsilon,
    )  # fmt: skip
    config = jax_env(agent_id).config
    assert port.channel_spec(config) == twin.channel_spec(config)


@pytest.mark.parametrize(
    ("agent_id", "kwargs", "field"),
    [
        ("ucb1", {"alpha": -1.0}, "alpha"),
        ("ucb1_shared", {"scale": float("nan")}, "scale"),
        ("kl_ucb", {"precision": 0.9}, "precision"),
        ("kl_ucb_shared", {"c": -1.0}, "c"),
        ("kl_ucb", {"bounds": (1.0, 0.0)}, "bounds"),
        ("epsilon_greedy", {"epsilon": 1.5}, "epsilon"),
        ("epsilon_greedy_shared", {"epsilon": -0.1}, "epsilon"),
        ("thompson_beta", {"bounds": (0.0, 0.0)}, "bounds"),
        ("thompson_gaussian_shared", {"scale": -2.0}, "scale"),
        ("centralized_ucb1", {"scale": -1.0}, "scale"),
    ],
)
def test_bad_hyperparameters_raise_the_config_error(agent_id, kwargs, field):
    with pytest.raises(ConfigError, match=rf"^{agent_id}: {field}: expected"):
        fj.make_jax_agent(agent_id, **kwargs)
    with pytest.raises(ConfigError, match=rf"^{agent_id}: {field}: expected"):
        make_agent(agent_id, **kwargs)  # the same message as the twin's


def start(learner, facts):
    """The learner's state at reset on a federation (its params made and checked first)."""
    init, _ = fj.bind(learner, facts)
    return init(jax.random.PRNGKey(0))


@pytest.mark.parametrize("agent_id", INDEPENDENT + SHARED + ["centralized_ucb1"])
def test_multi_armed_ports_refuse_the_linear_family(agent_id):
    env = fj.make("FedBandit/LinearContextual-v0", channels={})
    with pytest.raises(ConfigError, match=rf"^{agent_id}: family: expected .*'linear'"):
        start(fj.make_jax_agent(agent_id), fj.facts_of(env))


@pytest.mark.parametrize("agent_id", ["kl_ucb", "thompson_beta_shared"])
def test_unbounded_rewards_need_bounds(agent_id):
    env = jax_env(agent_id, reward={"kind": "gaussian", "sigma": 1.0})
    facts = fj.facts_of(env)
    with pytest.raises(ConfigError, match=rf"^{agent_id}: reward: expected bounded rewards"):
        start(fj.make_jax_agent(agent_id), facts)
    init, _ = fj.bind(fj.make_jax_agent(agent_id, bounds=(-3.0, 4.0)), facts)
    init(jax.random.PRNGKey(0))


@pytest.mark.parametrize("agent_id", ["ucb1_shared", "flooding"])
def test_missing_channel_is_named(agent_id):
    env = fj.make(ENV, **SMALL, channels={})
    with pytest.raises(ConfigError, match=rf"^{agent_id}: channels.neighbors: expected"):
        start(fj.make_jax_agent(agent_id), fj.facts_of(env))


# ------------------------------------------------------- shared protocol
def test_shared_statistics_keep_the_latest_per_slot_under_drops():
    """With drops, a slot whose message was lost keeps the previous statistics: the table
    always holds, per neighbour, exactly what that neighbour sent at its last arrival, and the
    payload is the sender's own [counts, sums] (nothing relayed)."""
    drops = {"neighbors": {"kind": "neighbors", "dim": 6, "drop_prob": 0.5}}
    env = fj.make(ENV, num_agents=4, num_arms=3, horizon=50, topology="ring", channels=drops)
    learner = fj.make_jax_agent("ucb1_shared")
    facts = fj.facts_of(env)
    obs, env_state = env.reset(jax.random.PRNGKey(0))
    init, act_one = fj.bind(learner, facts)
    state = init(jax.random.PRNGKey(1))
    act, step = jax.jit(act_one), jax.jit(env.step)
    senders = np.asarray(facts.topology.neighbors)
    expected = np.zeros((4, senders.shape[1], 6), np.float32)
    dropped = 0
    for t in range(30):
        action, state = act(jax.random.PRNGKey(100 + t), state, obs)
        payload = np.asarray(action.messages["neighbors"][1])
        own = np.concatenate([state.counts, state.sums], axis=1)
        np.testing.assert_array_equal(payload, own)
        obs, env_state, *_ = step(jax.random.PRNGKey(200 + t), env_state, action)
        mask = np.asarray(obs.deliveries["neighbors"].mask)
        dropped += int((~mask & (senders >= 0)).sum())
        expected = np.where(mask[..., None], payload[np.where(senders >= 0, senders, 0)],
                            expected)  # fmt: skip
    action, state = act(jax.random.PRNGKey(999), state, obs)
    np.testing.assert_array_equal(state.latest, expected)
    assert dropped > 0 and np.asarray(state.counts).sum() == 4 * 30


def test_noisy_received_statistics_stay_well_defined():
    """Negative aggregated neighbour counts are read as 0 and Beta successes are clipped to
    [0, n] (a privatized channel may deliver both): the Beta samples stay well defined, so the
    arms of fresh agents stay uniform (a NaN index would pin every agent to arm 0)."""
    env = jax_env("thompson_beta_shared")
    learner = fj.make_jax_agent("thompson_beta_shared")
    obs, _ = env.reset(jax.random.PRNGKey(0))
    init, act_one = fj.bind(learner, fj.facts_of(env))
    state = init(jax.random.PRNGKey(0))
    heard = obs.deliveries["neighbors"]
    keys = jax.random.split(jax.random.PRNGKey(3), 200)
    act = jax.jit(jax.vmap(act_one, in_axes=(0, None, None)))
    for counts, sums in ((-5.0, -3.0), (1.0, 50.0)):  # n < 0; s > n
        sent = jnp.concatenate([jnp.full((heard.sent.shape[0], 5), counts, jnp.float32),
                                jnp.full((heard.sent.shape[0], 5), sums, jnp.float32)], -1)  # fmt: skip
        hostile = heard._replace(mask=jnp.ones_like(heard.mask), sent=sent)
        action, _ = act(keys, state, obs._replace(deliveries={"neighbors": hostile}))
        picks = np.bincount(np.asarray(action.arms).ravel(), minlength=5)
        assert (picks > 100).all(), (counts, sums, picks)
