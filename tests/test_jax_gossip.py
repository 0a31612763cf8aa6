"""The JAX ports of the gossip paper's learners (docs/jax.md; Zhu, Zhu, Liu & Liu): the
binary-tree counter ``fedbandit_env/jax/tree_counter.py`` and ``gossip_ucb`` /
``gossip_fed_ucb`` in ``agents/jax/gossip_ucb.py``, against their numpy twins.

The counter: its noiseless release is the exact prefix sum (property test over random insert
sequences), its blocks and noise terms are the twin's, its Laplace scale per block is the
twin's (computed, and the empirical spread over many draws). The learners: they follow the
twin step by step on the same observations (no noise), agree with it in distribution over 200
runs on two topologies with exact message counts, give the same bits for the same key, respect
the light cone, jit and vmap, and refuse what the twin refuses."""

from __future__ import annotations

import math
from functools import cache

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.jax_tools import agreement, assert_light_cone, same_bits

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402

import fedbandit_env.jax as fj  # noqa: E402
from agents.gossip_index import exploration_bonus  # noqa: E402
from agents.gossip_ucb import GossipFedUCB as NumpyGossipFedUCB  # noqa: E402
from agents.gossip_ucb import GossipUCB as NumpyGossipUCB  # noqa: E402
from agents.gossip_ucb import bonus_parameters  # noqa: E402
from agents.jax.gossip_ucb import GossipFedUCB, GossipUCB  # noqa: E402
from fedbandit_env.agent_registry import make_agent  # noqa: E402
from fedbandit_env.bench.evaluate import env_kwargs_for  # noqa: E402
from fedbandit_env.errors import ConfigError  # noqa: E402
from fedbandit_env.jax.channels.gossip import GossipDelivery  # noqa: E402
from fedbandit_env.jax.channels.neighbors import NeighborsAggregate  # noqa: E402
from fedbandit_env.jax.tree_counter import TreeCounter  # noqa: E402
from fedbandit_env.privacy import TreeCounter as NumpyTreeCounter  # noqa: E402
from fedbandit_env.registration import make_vec  # noqa: E402
from fedbandit_env.seeding import BatchedRNG  # noqa: E402
from fedbandit_env.ties import argmax_one_uniform  # noqa: E402

TRIANGLE = "FedBandit/GossipTriangle-v0"  # N=3, M=5, K3, Gaussian(1) rewards
RING = "FedBandit/Heterogeneous-v0"
RING_KWARGS = {"num_agents": 5, "num_arms": 4, "horizon": 300, "topology": "ring"}  # Bernoulli
PORTS = ["gossip_ucb", "gossip_fed_ucb"]
ROUNDS = 40  # insertions per property example
SHAPE = (2, 3)


def numpy_counter(shape, horizon, epsilon, runs=1, seed=0, **kwargs) -> NumpyTreeCounter:
    rng = None if math.isinf(epsilon) else BatchedRNG.for_runs(list(range(seed, seed + runs)),
                                                                 "agents")  # fmt: skip
    return NumpyTreeCounter(shape, horizon, epsilon, rng=rng, num_runs=None if rng else runs,
                            **kwargs)  # fmt: skip


# ------------------------------------------------------------ the tree counter
@cache
def scanned(tree_index: str, init_round: bool, empty: bool, epsilon: float):
    """A jitted run of ROUNDS insertions: every release, exact part and noise-term count."""
    counter = TreeCounter(SHAPE, ROUNDS, epsilon, tree_index=tree_index, init_round=init_round,
                          noise_on_empty_blocks=empty, levels=None)  # fmt: skip

    def run(key, values, pulled):
        def one(state, x):
            k, v, p = x
            state = counter.insert(k, state, v, p)
            out = (counter.release(state), counter.exact(state), counter.num_noise_terms(state),
                   counter.blocks(state)[1])  # fmt: skip
            return state, out

        keys = jax.random.split(key, values.shape[0])
        return jax.lax.scan(one, counter.init(), (keys, values, pulled))[1]

    return jax.jit(run)


@pytest.mark.slow
@settings(max_examples=20, deadline=None)
@given(
    data=st.data(),
    tree_index=st.sampled_from(["round", "pull"]),
    init_round=st.booleans(),
    empty=st.booleans(),
)
def test_noiseless_release_is_the_exact_prefix_sum(data, tree_index, init_round, empty):
    """epsilon = inf: every release is the prefix sum of the inserted values, at every round
    (integer-valued floats: the dyadic blocks add them exactly); with noise the exact part is
    the same prefix sum, and the blocks and noise terms are the numpy twin's."""
    rounds = ROUNDS + (1 if init_round else 0)  # round 0 is the initialization leaf
    ints = st.integers(-1000, 1000)
    values = np.array(data.draw(st.lists(ints, min_size=rounds * 6, max_size=rounds * 6)),
                      np.float32).reshape(rounds, *SHAPE)  # fmt: skip
    pulled = np.array(data.draw(st.lists(st.booleans(), min_size=rounds * 6,
                                         max_size=rounds * 6))).reshape(rounds, *SHAPE)  # fmt: skip
    prefix = np.cumsum(np.where(pulled, values, 0.0), axis=0)
    release, exact, _, _ = scanned(tree_index, init_round, False, math.inf)(
        jax.random.PRNGKey(0), values, pulled
    )
    np.testing.assert_array_equal(np.asarray(release), prefix)
    np.testing.assert_array_equal(np.asarray(exact), prefix)

    release, exact, terms, noised = scanned(tree_index, init_round, empty, 1.0)(
        jax.random.PRNGKey(1), values, pulled
    )
    np.testing.assert_array_equal(np.asarray(exact), prefix)
    noisy = np.asarray(release) != prefix  # the noise is there, on the noised counters only
    np.testing.assert_array_equal(noisy, np.asarray(terms) > 0)
    twin = numpy_counter(SHAPE, ROUNDS, 1.0, tree_index=tree_index, init_round=init_round,
                         noise_on_empty_blocks=empty)  # fmt: skip
    for r in range(rounds):
        twin.insert(r if init_round else r + 1, values[r][None], pulled[r][None])
        np.testing.assert_array_equal(np.asarray(terms[r]), twin.num_noise_terms()[0])
        np.testing.assert_array_equal(np.asarray(noised[r]), twin.block_noised[0])


CONFIGS = [
    {"horizon": 1000, "epsilon": 1.0},
    {"horizon": 1024, "epsilon": 2.0, "levels": "paper"},
    {"horizon": 20_000, "epsilon": 0.5, "bounds": (0.0, 1.0)},
    {"horizon": 77, "epsilon": 1.0, "bounds": (-1.0, 2.0), "tree_index": "pull",
     "init_round": True},
    {"horizon": 300, "epsilon": 5.0, "sensitivity": 3.0, "levels": 4},
]  # fmt: skip


@pytest.mark.parametrize("config", CONFIGS)
def test_noise_scale_per_block_is_the_twins(config):
    """Computed: the Laplace scale per block, the levels and epsilon' equal the twin's."""
    config = dict(config)
    horizon, epsilon = config.pop("horizon"), config.pop("epsilon")
    ours = TreeCounter((3, 5), horizon, epsilon, **config)
    twin = numpy_counter((3, 5), horizon, epsilon, **config)
    assert ours.scale == twin.scale > 0
    assert ours.storage_levels == twin.storage_levels
    assert ours.budget_levels == twin.budget_levels
    assert ours.epsilon_per_block == twin.epsilon_per_block
    assert ours.effective_epsilon == twin.effective_epsilon


def test_empirical_noise_per_block_matches_the_twin():
    """Empirical: the noise of each closed block (rounds 1, 2 and 4 close levels 0, 1 and 2)
    has the spread of Lap(scale), sd sqrt(2) scale and mean |x| = scale, over 20,000 JAX draws;
    the noise of the release after round 3 (two blocks) has the twin's spread over 3,000 numpy
    runs, within 5 standard errors."""
    counter = TreeCounter((1,), 16, 2.0, bounds=(0.0, 1.0))
    scale = numpy_counter((1,), 16, 2.0, bounds=(0.0, 1.0)).scale
    assert counter.scale == scale == 2.5  # 5 levels, epsilon' = 0.4, sensitivity 1

    def rounds(key):
        state, blocks, releases = counter.init(), [], []
        for k in jax.random.split(key, 4):
            state = counter.insert(k, state, jnp.ones(1, jnp.float32))
            blocks.append(counter.blocks(state)[0][0])  # (levels,): numpy's layout
            releases.append(counter.noise(state)[0])
        return jnp.stack(blocks), jnp.stack(releases)

    draws = 20_000
    blocks, releases = jax.jit(jax.vmap(rounds))(jax.random.split(jax.random.PRNGKey(7), draws))
    blocks, releases = np.asarray(blocks, np.float64), np.asarray(releases, np.float64)
    kurtosis_se = math.sqrt(5 / (4 * draws))  # relative se of a Laplace sample sd
    for r, level in ((0, 0), (1, 1), (3, 2)):  # the block just closed by rounds 1, 2, 4
        x = blocks[:, r, level]
        assert abs(x.std() / (math.sqrt(2) * scale) - 1) < 5 * kurtosis_se, (r, x.std())
        assert abs(np.abs(x).mean() / scale - 1) < 5 / math.sqrt(draws), (r, np.abs(x).mean())
    assert (blocks[:, 0, 1:] == 0).all() and (blocks[:, 3, :2] == 0).all()  # absorbed levels

    runs = 3000
    twin = numpy_counter((1,), 16, 2.0, runs=runs, bounds=(0.0, 1.0))
    for t in range(1, 4):
        twin.insert(t, np.ones((runs, 1)))
    theirs, ours = twin.noise()[:, 0], releases[:, 2]  # round 3: blocks (2, 3] and (0, 2]
    assert abs(ours.std() / (2 * scale) - 1) < 5 * kurtosis_se  # sd of two Lap(scale)
    se = math.sqrt(5 / (4 * runs) + 5 / (4 * draws))
    assert abs(theirs.std() / ours.std() - 1) < 5 * se, (theirs.std(), ours.std())


# ---------------------------------------------------------------- the learners
def test_bonus_and_choice_are_the_twins():
    """Eq. (11) and Eq. (12), one function (agents/gossip_index.py), on int32 JAX counts and a
    traced round against float64 numpy counts and a Python round (float32 tolerance), and the same
    ``floor(u k)``-th tied arm for the same uniforms."""
    n = np.array([[1, 2, 3, 10], [100, 1000, 5, 7]], np.float64)
    for t in (1, 2, 17, 5000):
        for extra in ({}, {"epsilon": 1.0, "horizon": 10_000, "dp_log_floor": 2.0},
                      {"epsilon": 0.3, "horizon": 77, "dp_bonus_scale": 0.5}):  # fmt: skip
            kw = {"num_agents": 3, "alpha1": 64 / 3**17, "bonus_scale": 1.5, **extra}
            ours = exploration_bonus(jnp.asarray(n, jnp.int32), jnp.int32(t), **kw)
            np.testing.assert_allclose(np.asarray(ours), exploration_bonus(n, t, **kw),
                                       rtol=2e-6)  # fmt: skip
    rng = np.random.default_rng(0)
    q = rng.integers(0, 3, size=(500, 6)).astype(np.float32)
    q[::7, 2] = np.inf
    u = rng.random(500).astype(np.float32)
    # the shared rule (fedbandit_env/ties.py): JAX's cumulative-count path against numpy's
    np.testing.assert_array_equal(np.asarray(argmax_one_uniform(jnp.asarray(q), jnp.asarray(u))),
                                  argmax_one_uniform(q, u))  # fmt: skip


def env_kwargs(env_id: str, agent_id: str, **kwargs) -> dict:
    """``kwargs`` plus the twin's channels."""
    return env_kwargs_for(make_agent(agent_id), env_id, kwargs)


def to_jax_obs(obs) -> fj.Observation:
    """Run 0 of a numpy VecObservation as the JAX environment's observation."""
    deliveries = {}
    for name, d in obs.deliveries.items():
        if name == "neighbors":
            deliveries[name] = NeighborsAggregate(jnp.asarray(d.value[0], jnp.float32),
                                                  jnp.asarray(d.count[0], jnp.int32))  # fmt: skip
        else:
            deliveries[name] = GossipDelivery(jnp.asarray(d.partner[0], jnp.int32),
                                              jnp.asarray(d.received[0]),
                                              jnp.asarray(d.payload[0], jnp.float32))  # fmt: skip
    return fj.Observation(
        step=jnp.int32(obs.step), last_arm=jnp.asarray(obs.last_arm[0], jnp.int32),
        last_reward=jnp.asarray(obs.last_reward[0], jnp.float32), deliveries=deliveries,
        context=None, phase=jnp.int32(obs.phase[0]), pulls=jnp.int32(obs.pulls[0]),
    )  # fmt: skip


@pytest.mark.parametrize(
    ("ours", "theirs"),
    [
        (GossipUCB(), NumpyGossipUCB()),
        (GossipUCB(literal_line_order=True), NumpyGossipUCB(literal_line_order=True)),
        (GossipFedUCB(epsilon=1e9, reward_clip=(-1.0, 2.0)),
         NumpyGossipFedUCB(epsilon=1e9, reward_clip=(-1.0, 2.0))),
        (GossipFedUCB(epsilon=1e9, tree_index="pull", noisy_init=False),
         NumpyGossipFedUCB(epsilon=1e9, tree_index="pull", noisy_init=False)),
    ],
)  # fmt: skip
def test_follows_the_twin_step_by_step(ours, theirs):
    """On the numpy environment's observations (the twin playing), the port keeps the twin's
    n, S, X̄, ϑ and ñ at every step (the initialization pulls, Eq. (2), lines 17-22, Eq. (1))
    and picks the twin's arm whenever the pick is not random (one candidate arm). Fed_UCB at
    epsilon = 1e9: the counter runs (Eq. (12), Algorithm 3) with negligible noise."""
    kwargs = env_kwargs(TRIANGLE, theirs.agent_id, horizon=120)
    venv = make_vec(TRIANGLE, num_runs=1, **kwargs)
    obs, _ = venv.reset(seed=3)
    theirs.reset(venv.facts, BatchedRNG.for_runs([3], "agents"))
    facts = fj.facts_of(fj.make(TRIANGLE, **kwargs))
    init, act_one = fj.bind(ours, facts)
    counter = ours.make_params(facts).counter  # the JAX counter of the params' options
    state = init(jax.random.PRNGKey(0))
    act = jax.jit(act_one)
    key = jax.random.PRNGKey(1)
    decided = 0
    for _ in range(120):
        action = theirs.act(obs)
        key, k = jax.random.split(key)
        mine, state = act(k, state, to_jax_obs(obs))
        s = theirs.state
        for name in ("n", "xbar", "theta", "ntil"):
            np.testing.assert_allclose(np.asarray(getattr(state, name), np.float64),
                                       getattr(s, name)[0], rtol=1e-5, atol=1e-5,
                                       err_msg=f"{name} at step {obs.step}")  # fmt: skip
        np.testing.assert_allclose(np.asarray(state.S.total - state.S.carry, np.float64),
                                   s.S[0], rtol=1e-5, atol=1e-5)  # fmt: skip
        if getattr(theirs, "counter", None) is not None:  # the same blocks carry noise
            np.testing.assert_array_equal(
                np.asarray(counter.num_noise_terms(state.counter)),
                theirs.counter.num_noise_terms()[0],
            )
        if obs.step < theirs.M:
            np.testing.assert_array_equal(np.asarray(mine.arms), action.arms[0])
            assert not np.asarray(mine.messages["gossip"][0]).any()
        else:
            lagging = s.n[0] < s.ntil[0] - theirs.N
            q = theirs.bonus(s.t)[0] + s.theta[0]
            ties = q >= q.max(axis=1, keepdims=True)
            single = np.where(lagging.any(1), lagging.sum(1), ties.sum(1)) == 1
            np.testing.assert_array_equal(np.asarray(mine.arms)[single], action.arms[0][single])
            decided += int(single.sum())
            for name in ("neighbors", "gossip"):
                send, payload = mine.messages[name]
                assert np.asarray(send).all()
                np.testing.assert_allclose(np.asarray(payload), action.messages[name][1][0],
                                           rtol=1e-5, atol=1e-5)  # fmt: skip
        obs, *_ = venv.step(action.arms, action.messages)
    assert decided > 300  # most rounds have one candidate: the comparison is not vacuous


@pytest.mark.parametrize("agent_id", PORTS)
def test_agrees_with_the_numpy_twin_on_the_triangle(agent_id):
    """Fig. 2(a)'s instance (Gaussian rewards: Fed_UCB's sensitivity-1 reproduction setting),
    T = 295 rounds: mean final regret within 3 se over 200 runs; every agent sends ñ to both
    neighbours and the edge's endpoints exchange ϑ every round: exact counts."""
    ref, out = agreement(TRIANGLE, agent_id, {"horizon": 300})
    rounds, m = 300 - 5, 5
    assert (out.messages.sum(axis=1) == rounds * (6 + 2)).all()
    assert (out.floats.sum(axis=1) == rounds * (6 + 2) * m).all()
    report(agent_id, TRIANGLE, ref, out)


@pytest.mark.slow
def test_fed_ucb_agrees_where_the_noise_decides():
    """Fed_UCB at epsilon = 5 without the bonus's privacy term (``dp_bonus_scale=0``), the
    tree indexed by pull count: the agents follow the Laplace-noised means, so the regret
    depends on the noise scale; within 3 se over 200 runs on the ring."""
    kwargs = {"epsilon": 5.0, "dp_bonus_scale": 0.0, "tree_index": "pull"}
    ref, out = agreement(RING, "gossip_fed_ucb", RING_KWARGS, kwargs)
    report("gossip_fed_ucb (epsilon 5, no privacy term, pull tree)", RING, ref, out)


@pytest.mark.slow
@pytest.mark.parametrize("agent_id", PORTS)
def test_agrees_with_the_numpy_twin_on_a_ring(agent_id):
    """A ring of 5 agents, 4 Bernoulli arms (Fed_UCB: bounded rewards, sensitivity 1 from the
    environment's bounds), horizon 300: within 3 se over 200 runs, exact counts."""
    ref, out = agreement(RING, agent_id, RING_KWARGS)
    rounds = 300 - 4
    assert (out.messages.sum(axis=1) == rounds * (10 + 2)).all()
    report(agent_id, RING, ref, out)


def report(agent_id, env_id, ref, out) -> None:
    a, b = ref.final_regret_network, out.regret_by_agent[:, -1].sum(axis=1)
    se = math.sqrt(a.var(ddof=1) / len(a) + b.var(ddof=1) / len(b))
    print(f"{agent_id} on {env_id}: numpy {a.mean():.3f} vs JAX {b.mean():.3f}, 3 se {3 * se:.3f}")


# gossip_fed_ucb runs every line of gossip_ucb (and the counter): gossip_ucb's run is slow
BOTH = ["gossip_fed_ucb", pytest.param("gossip_ucb", marks=pytest.mark.slow)]


@pytest.mark.slow
@pytest.mark.parametrize("agent_id", PORTS)
def test_same_key_same_bits(agent_id):
    env = fj.make(TRIANGLE, **env_kwargs(TRIANGLE, agent_id, horizon=40))
    same_bits(env, fj.make_jax_agent(agent_id), [0, 1, 2])


@pytest.mark.slow
@pytest.mark.parametrize("agent_id", BOTH)
def test_respects_the_light_cone(agent_id):
    """On the path P10 (Fig. 2(b)), a change of agent 0's rewards after the initialization
    reaches agent i no earlier than i steps later (ñ and ϑ travel one hop per step), and does
    reach another agent."""
    env = fj.make("FedBandit/GossipPath10-v0",
                  **env_kwargs("FedBandit/GossipPath10-v0", agent_id, horizon=100))  # fmt: skip
    assert_light_cone(env, fj.make_jax_agent(agent_id), j=0, steps=32, at=15)


def test_act_jits_and_vmaps():
    """``act`` under jit(vmap) over 4 runs: int32 arms, the initialization's arm k at env step
    k + 1 with nothing sent, then both channels from every agent; the private means move."""
    learner = GossipFedUCB(epsilon=2.0)
    env = fj.make(TRIANGLE, **env_kwargs(TRIANGLE, "gossip_fed_ucb", horizon=50))
    facts = fj.facts_of(env)
    init, act_one = fj.bind(learner, facts)
    params = learner.make_params(facts)
    keys = jax.random.split(jax.random.PRNGKey(0), 4)
    states = jax.vmap(init)(keys)
    obs, env_states = jax.vmap(env.reset)(keys)
    act, step = jax.jit(jax.vmap(act_one)), jax.jit(jax.vmap(env.step))
    for s in range(8):
        keys = jax.vmap(lambda k: jax.random.split(k)[0])(keys)
        action, states = act(keys, states, obs)
        assert action.arms.dtype == jnp.int32 and action.arms.shape == (4, 3)
        send = np.asarray(action.messages["gossip"][0])
        if s < 5:
            assert (np.asarray(action.arms) == s).all() and not send.any()
        else:
            assert send.all() and np.asarray(action.messages["neighbors"][0]).all()
        obs, env_states, *_ = step(keys, env_states, action)
    assert states.counter.noise.shape == (4, params.counter.storage_levels, 3, 5)  # prefix
    assert (np.asarray(states.n).sum(axis=2) == 5 + 2).all()  # M init pulls + 2 rounds
    assert learner.privacy_epsilon == 2.0 and params.dp_guarantee_holds is False  # unbounded


@pytest.mark.slow
def test_a_padded_neighbors_channel_gives_the_same_run():
    """With the padded ``neighbors`` delivery (no ``reduce``) instead of the twin's "max"
    aggregate, Eq. (1)'s max over the neighbours is taken by the learner: same keys, same run."""
    kwargs = env_kwargs(RING, "gossip_fed_ucb", **RING_KWARGS)
    padded = {**kwargs["channels"], "neighbors": {"kind": "neighbors", "dim": 4}}
    runs = [fj.rollout(fj.make(RING, **{**kwargs, "channels": channels}),
                       GossipFedUCB(epsilon=5.0), [0, 1, 2])
            for channels in (kwargs["channels"], padded)]  # fmt: skip
    np.testing.assert_array_equal(runs[0].regret_by_agent, runs[1].regret_by_agent)
    for a, b in zip(jax.tree_util.tree_leaves(runs[0].learner_state),
                    jax.tree_util.tree_leaves(runs[1].learner_state), strict=True):  # fmt: skip
        np.testing.assert_array_equal(a, b)


def test_declarations_are_the_twins():
    for ours, theirs in ((GossipUCB(), NumpyGossipUCB()),
                         (GossipFedUCB(epsilon=3.0), NumpyGossipFedUCB(epsilon=3.0))):  # fmt: skip
        assert (ours.agent_id, ours.version) == (theirs.agent_id, theirs.version)
        assert ours.privacy_epsilon == theirs.privacy_epsilon
        config = make_vec(TRIANGLE, horizon=30).config
        assert ours.channel_spec(config) == theirs.channel_spec(config)
    assert GossipUCB().privacy_epsilon == math.inf
    assert fj.make_jax_agent("gossip_fed_ucb", epsilon=2.0).privacy_epsilon == 2.0


def test_refuses_what_the_twin_refuses():
    with pytest.raises(ConfigError, match="gossip_fed_ucb: tree_index"):
        GossipFedUCB(tree_index="level")
    with pytest.raises(ConfigError, match="gossip_ucb: bonus_scale"):
        GossipUCB(bonus_scale=-1.0)
    two = fj.make(RING, **env_kwargs(RING, "gossip_ucb", **{**RING_KWARGS, "num_agents": 2,
                                                            "topology": "path"}))  # fmt: skip
    with pytest.raises(ConfigError, match="gossip_ucb: num_agents"):
        fj.bind(GossipUCB(), fj.facts_of(two))
    bare = fj.make(RING, **{**RING_KWARGS, "channels": {}})
    with pytest.raises(ConfigError, match="gossip_fed_ucb: channels.neighbors"):
        fj.bind(GossipFedUCB(), fj.facts_of(bare))


PARAMS_CASES = [
    (RING, "gossip_ucb", {}),
    (RING, "gossip_ucb", {"alpha1": 0.01}),
    (RING, "gossip_fed_ucb", {}),  # Bernoulli: bounds (0, 1), the guarantee holds
    (TRIANGLE, "gossip_fed_ucb", {}),  # Gaussian, unclipped: sensitivity 1, no guarantee
    (TRIANGLE, "gossip_fed_ucb", {"reward_clip": (-1.0, 2.0), "tree_index": "pull"}),
    (RING, "gossip_fed_ucb", {"privacy_levels": "paper", "noisy_init": False}),
    (RING, "gossip_fed_ucb", {"epsilon": math.inf}),
]


@pytest.mark.parametrize(("env_id", "agent_id", "agent_kwargs"), PARAMS_CASES)
def test_params_are_what_the_numpy_reset_computes(env_id, agent_id, agent_kwargs):
    """The JAX learner's params (:func:`agents.gossip_ucb.gossip_params`, made without a numpy
    learner) hold what the numpy ``reset`` computes on the same facts: N, M, T, alpha1, the
    bonus's parameters, the reward range, the sensitivity and the guarantee; Fed_UCB's JAX
    counter has the numpy counter's levels and Laplace scale per block."""
    sizes = {**RING_KWARGS, "horizon": 64} if env_id == RING else {"horizon": 64}
    kwargs = env_kwargs(env_id, agent_id, **sizes)
    ours = fj.make_jax_agent(agent_id, **agent_kwargs)
    params = ours.make_params(fj.facts_of(fj.make(env_id, **kwargs)))
    theirs = make_agent(agent_id, **agent_kwargs)
    theirs.reset(make_vec(env_id, num_runs=1, **kwargs).facts, BatchedRNG.for_runs([0], "agents"))
    assert (params.num_agents, params.num_arms, params.rounds) == (theirs.N, theirs.M, theirs.T)
    assert params.alpha1 == theirs.alpha1 == agent_kwargs.get("alpha1", 64 / theirs.N**17)
    assert bonus_parameters(params) == theirs.bonus_parameters()
    assert params.config == theirs.config
    assert params.dp_guarantee_holds is theirs.dp_guarantee_holds
    assert params.dp_caveats == theirs.dp_caveats
    assert ours.privacy_epsilon == theirs.privacy_epsilon
    if agent_id == "gossip_ucb":
        assert params.counter is None and params.dp_guarantee_holds is False
        return
    assert (params.reward_bounds, params.sensitivity) == (theirs.reward_bounds,
                                                          theirs.sensitivity)  # fmt: skip
    if theirs.counter is None:
        assert params.counter is None and not params.private
        return
    for name in ("scale", "storage_levels", "budget_levels", "effective_epsilon", "capacity"):
        assert getattr(params.counter, name) == getattr(theirs.counter, name), name
    assert params.effective_epsilon == theirs.counter.effective_epsilon
    bounded = env_id == RING or "reward_clip" in agent_kwargs  # Bernoulli, or clipped
    expect_holds = bounded and agent_kwargs.get("noisy_init", True)
    assert params.dp_guarantee_holds is expect_holds


def test_params_refuse_bad_facts_by_name():
    """Facts the numpy reset refuses raise the same ConfigError from ``make_params``, naming
    the learner and the field: N = 2, a disconnected graph, a missing channel, a linear family,
    a horizon without a round after the initialization."""
    cases = [
        ("gossip_ucb", {"num_agents": 2, "topology": "path"}, "num_agents"),
        ("gossip_fed_ucb", {"topology": "hybrid", "topology_kwargs": {"sizes": [3, 2]}},
         "topology"),
        ("gossip_fed_ucb", {"channels": {}}, "channels.neighbors"),
        ("gossip_ucb", {"horizon": 4}, "horizon"),
    ]  # fmt: skip
    for agent_id, change, field in cases:
        kwargs = {**env_kwargs(RING, agent_id, **RING_KWARGS), **change}
        with pytest.raises(ConfigError) as ours:
            fj.make_jax_agent(agent_id).make_params(fj.facts_of(fj.make(RING, **kwargs)))
        with pytest.raises(ConfigError) as theirs:
            make_agent(agent_id).reset(make_vec(RING, num_runs=1, **kwargs).facts,
                                       BatchedRNG.for_runs([0], "agents"))  # fmt: skip
        assert str(ours.value) == str(theirs.value)
        assert str(ours.value).startswith(f"{agent_id}: {field}"), str(ours.value)
    linear_id = "FedBandit/LinearContextual-v0"
    linear = env_kwargs(linear_id, "gossip_fed_ucb", num_agents=4, num_arms=5, horizon=50, dim=3)
    with pytest.raises(ConfigError, match="gossip_fed_ucb: family"):
        GossipFedUCB().make_params(fj.facts_of(fj.make(linear_id, **linear)))
