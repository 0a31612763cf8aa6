"""The JAX ports of the DP recommender paper's learners (docs/jax.md, docs/dp-recsys.md; Li, Song
& Fragouli): the hybrid counter ``fedbandit_env/jax/hybrid_counter.py`` and ``dp_mw_ucb`` /
``dp_dec_ucb`` in ``agents/jax/dp_recsys.py``, against the numpy counter and learners.

The counter: its noiseless release is the exact prefix sum (property test over random insert
sequences), fed the twin's standard draws it releases the twin's numbers (same blocks, scales and
release rule), its Laplace scales per block are the twin's (computed) and its noise has the
closed-form variance and the twin's spread (empirical). The learners: their params are the
numpy learners' (the same pure functions), they follow the numpy learners step by step on the
same observations (no noise), agree with them in distribution over 200 runs (exact message
counts for DP-Dec-UCB, whose schedule is fixed; DP-MW-UCB's data-dependent decision rounds
within 3 se), give the same bits for the same key, respect the light cone, jit and vmap, and
declare and refuse what the numpy learners do."""

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
from agents.dp_decentralized_ucb import DPDecentralizedUCB as NumpyDec  # noqa: E402
from agents.dp_master_worker_ucb import DPMasterWorkerUCB as NumpyMW  # noqa: E402
from agents.jax.dp_recsys import DPDecentralizedUCB, DPMasterWorkerUCB, counter_of  # noqa: E402
from fedbandit_env.agent_registry import make_agent  # noqa: E402
from fedbandit_env.bench.evaluate import env_kwargs_for  # noqa: E402
from fedbandit_env.errors import ConfigError  # noqa: E402
from fedbandit_env.jax.channels.neighbors import NeighborsAggregate  # noqa: E402
from fedbandit_env.jax.channels.server import ServerDelivery  # noqa: E402
from fedbandit_env.jax.hybrid_counter import HybridCounter  # noqa: E402
from fedbandit_env.privacy import HybridCounter as NumpyHybridCounter  # noqa: E402
from fedbandit_env.privacy import hybrid_noise_variance  # noqa: E402
from fedbandit_env.privacy.dyadic import popcount  # noqa: E402
from fedbandit_env.privacy.errors import PrivacyError  # noqa: E402
from fedbandit_env.registration import make_vec  # noqa: E402
from fedbandit_env.seeding import BatchedRNG  # noqa: E402

ENV = "FedBandit/Homogeneous-v0"  # the paper's family (fedbandit_env/reproductions/dp_recsys.py)
GAUSSIAN = {"kind": "gaussian", "sigma": 0.1}  # Algorithm 2's rewards in the reproduction
MW_KWARGS = {"num_agents": 4, "num_arms": 4, "horizon": 300, "topology": "ring"}  # Bernoulli
DEC_KWARGS = {"num_agents": 5, "num_arms": 4, "horizon": 300, "topology": "ring",
              "reward": GAUSSIAN}  # fmt: skip
ITEMS = 40  # insertions per property example
SHAPE = (2, 3)


# ------------------------------------------------------------ the hybrid counter
class FixedDraws:
    """A stand-in for the twin's Laplace stream: returns the draws it is given."""

    def __init__(self):
        self.draws = None

    def next(self):
        return self.draws


def twin_counter(shape, horizon, epsilon, runs=1, seed=0, **kwargs) -> NumpyHybridCounter:
    noisy = not math.isinf(epsilon)
    rng = BatchedRNG.for_runs(list(range(seed, seed + runs)), "agents") if noisy else None
    return NumpyHybridCounter(shape, horizon, epsilon, rng=rng,
                              num_runs=None if noisy else runs, **kwargs)  # fmt: skip


@cache
def scanned(epsilon: float, bounds: tuple[float, float]):
    """A jitted run of ITEMS insertions with given standard draws: every release and exact
    part."""
    counter = HybridCounter(SHAPE, ITEMS, epsilon, bounds=bounds)

    def run(values, mask, lap):
        def one(state, x):
            v, m, z = x
            state = counter.insert_with(state, v, m, z)
            return state, (counter.release(state), counter.exact(state))

        return jax.lax.scan(one, counter.init(), (values, mask, lap))[1]

    return jax.jit(run)


@settings(max_examples=20, deadline=None)
@given(data=st.data(), epsilon=st.sampled_from([math.inf, 0.5, 2.0]))
def test_noiseless_release_is_the_exact_prefix_sum(data, epsilon):
    """epsilon = inf: every release is the prefix sum of the inserted (clipped) values, for any
    data and any insertion pattern (integer-valued floats: the sums are exact); with noise the
    exact part is the same prefix sum, and fed the twin's standard Laplace draws the counter
    releases the twin's numbers at every step (same blocks, scales and release rule)."""
    n = ITEMS * math.prod(SHAPE)
    ints = st.integers(-1000, 1000)
    values = np.array(data.draw(st.lists(ints, min_size=n, max_size=n)),
                      np.float32).reshape(ITEMS, *SHAPE)  # fmt: skip
    mask = np.array(data.draw(st.lists(st.booleans(), min_size=n, max_size=n))
                    ).reshape(ITEMS, *SHAPE)  # fmt: skip
    bounds = (-500.0, 800.0)  # some values are clipped
    prefix = np.cumsum(np.where(mask, np.clip(values, *bounds), 0.0), axis=0)
    lap = np.random.default_rng(data.draw(st.integers(0, 2**31))).laplace(
        size=(ITEMS, *SHAPE)).astype(np.float32)  # fmt: skip
    release, exact = scanned(epsilon, bounds)(values, mask, lap)
    np.testing.assert_array_equal(np.asarray(exact), prefix)
    if math.isinf(epsilon):
        np.testing.assert_array_equal(np.asarray(release), prefix)
        return
    twin = twin_counter(SHAPE, ITEMS, epsilon, bounds=bounds)
    twin._stream = FixedDraws()  # the twin draws what the JAX counter was given
    for r in range(ITEMS):
        twin._stream.draws = lap[r][None].astype(np.float64)
        theirs = twin.insert(values[r][None].astype(np.float64), mask[r][None])[0]
        np.testing.assert_allclose(np.asarray(release[r]), theirs, rtol=1e-5, atol=2e-3)
    assert (np.asarray(release) != prefix).any() or not mask.any()  # the noise is there


CONFIGS = [
    {"horizon": 1000, "epsilon": 1.0},
    {"horizon": 1024, "epsilon": 2.0},
    {"horizon": 20_000, "epsilon": 0.5, "bounds": (0.0, 1.0)},
    {"horizon": 77, "epsilon": 1.5, "bounds": (-1.0, 2.0)},
    {"horizon": 2, "epsilon": 5.0, "bounds": (-100.0, 100.0)},
]


@pytest.mark.parametrize("config", CONFIGS)
def test_noise_scale_per_block_is_the_twins(config):
    """Computed: the logarithmic half's scale 2D/eps, the binary half's 2Dk/eps in block k,
    the number of levels and the bounds are the twin's; the variance they give at every count
    is the twin's closed form (docs/privacy.md, "Hybrid counter")."""
    config = dict(config)
    horizon, epsilon = config.pop("horizon"), config.pop("epsilon")
    ours = HybridCounter((3, 5), horizon, epsilon, **config)
    twin = twin_counter((3, 5), horizon, epsilon, **config)
    assert ours.log_scale == twin.log_scale > 0
    assert ours.binary_levels == twin.binary_levels
    assert (ours.bounds, ours.sensitivity) == (twin.bounds, twin.sensitivity)
    n = np.arange(1, min(horizon, 5000) + 1)
    k = np.floor(np.log2(n)).astype(np.int64)
    blocks = np.array([ours.binary_scale(int(b)) for b in k])
    variance = 2 * ours.log_scale**2 * (k + 1) + 2 * blocks**2 * popcount(n - 2**k)
    np.testing.assert_allclose(variance, hybrid_noise_variance(n, epsilon, twin.sensitivity),
                               rtol=1e-12)  # fmt: skip


def test_empirical_noise_matches_the_twin():
    """Empirical: over 20,000 JAX runs of 8 insertions the noise after n items has the
    closed-form variance (k + 1 Laplace terms of 2D/eps and popcount(tau) of 2Dk/eps), within
    5 standard errors; the noise after 7 items has the twin's spread over 3,000 numpy runs; the
    per-row draws of ``insert_arms`` give the inserted counter the same spread."""
    epsilon, items = 2.0, 8
    counter = HybridCounter((1,), 16, epsilon)

    def run(key):
        state, noise = counter.init(), []
        for k in jax.random.split(key, items):
            state = counter.insert(k, state, jnp.ones(1, jnp.float32))
            noise.append(counter.noise(state)[0])
        return jnp.stack(noise)

    draws = 20_000
    noise = np.asarray(jax.jit(jax.vmap(run))(jax.random.split(jax.random.PRNGKey(7), draws)),
                       np.float64)  # fmt: skip
    rel_se = math.sqrt(5 / (4 * draws))  # relative se of a sample sd (kurtosis <= Laplace's)
    for n in range(1, items + 1):
        sd = math.sqrt(float(hybrid_noise_variance(n, epsilon)))
        assert abs(noise[:, n - 1].std() / sd - 1) < 5 * rel_se, (n, noise[:, n - 1].std(), sd)
    runs = 3000
    twin = twin_counter((1,), 16, epsilon, runs=runs)
    for _ in range(7):
        twin.insert(np.ones((runs, 1)))
    se = math.sqrt(5 / (4 * runs) + 5 / (4 * draws))
    assert abs(twin.noise()[:, 0].std() / noise[:, 6].std() - 1) < 5 * se

    rows = HybridCounter((3, 4), 16, epsilon)  # one draw per row, used at the pulled arm
    arms = jnp.array([0, 2, 3], jnp.int32)
    one = jax.jit(jax.vmap(lambda k: rows.noise(rows.insert_arms(k, rows.init(), arms,
                                                                jnp.ones(3)))))  # fmt: skip
    got = np.asarray(one(jax.random.split(jax.random.PRNGKey(3), draws)), np.float64)
    hit = np.asarray(arms)[:, None] == np.arange(4)
    assert (got[:, ~hit] == 0).all()  # the other counters received nothing
    sd = math.sqrt(float(hybrid_noise_variance(1, epsilon)))
    for i in range(3):
        assert abs(got[:, i, int(arms[i])].std() / sd - 1) < 5 * rel_se


def test_counter_refuses_what_the_twin_refuses():
    for bad in ({"epsilon": 0.0}, {"epsilon": -1.0}, {"bounds": (1.0, 0.0)}, {"horizon": 0}):
        kwargs = {"horizon": 10, "epsilon": 1.0, **bad}
        with pytest.raises(PrivacyError) as ours:
            HybridCounter((2,), kwargs.pop("horizon"), kwargs.pop("epsilon"), **kwargs)
        kwargs = {"horizon": 10, "epsilon": 1.0, **bad}
        with pytest.raises(PrivacyError) as theirs:
            twin_counter((2,), kwargs.pop("horizon"), kwargs.pop("epsilon"), **kwargs)
        assert str(ours.value) == str(theirs.value)


# ---------------------------------------------------------------- the learners
def env_kwargs(agent_id: str, **kwargs) -> dict:
    """``kwargs`` plus the numpy learner's channels."""
    return env_kwargs_for(make_agent(agent_id), ENV, kwargs)


def to_jax_obs(obs, run: int | None = 0) -> fj.Observation:
    """Run ``run`` of a numpy VecObservation as the JAX environment's observation (``None``:
    every run, batched along a leading axis, as ``vmap`` takes it)."""
    at = slice(None) if run is None else run
    f32 = lambda x: jnp.asarray(x[at], jnp.float32)  # noqa: E731
    i32 = lambda x: jnp.asarray(x[at], jnp.int32)  # noqa: E731
    deliveries = {}
    for name, d in obs.deliveries.items():
        if name == "neighbors":
            deliveries[name] = NeighborsAggregate(f32(d.value), i32(d.count))
        else:
            deliveries[name] = ServerDelivery(f32(d.aggregate), i32(d.count),
                                              jnp.asarray(d.participating[at]))  # fmt: skip
    step = np.full(len(obs.pulls), obs.step)
    return fj.Observation(
        step=i32(step), last_arm=i32(obs.last_arm), last_reward=f32(obs.last_reward),
        deliveries=deliveries, context=None, phase=i32(obs.phase), pulls=i32(obs.pulls),
    )  # fmt: skip


def numpy_pull(action) -> bool:
    return True if action.pull is None else bool(np.asarray(action.pull).reshape(-1)[0])


STEP_CASES = [
    pytest.param(DPMasterWorkerUCB, NumpyMW, {"epsilon": math.inf}, "bernoulli", id="mw-paper"),
    pytest.param(DPMasterWorkerUCB, NumpyMW, {"epsilon": math.inf, "timing": "latency"},
                 "bernoulli", id="mw-latency"),
    pytest.param(DPDecentralizedUCB, NumpyDec, {"epsilon": math.inf}, GAUSSIAN, id="dec-paper"),
    pytest.param(DPDecentralizedUCB, NumpyDec, {"epsilon": math.inf, "timing": "latency",
                                                "clip": (-1.0, 2.0)}, GAUSSIAN, id="dec-latency"),
]  # fmt: skip


@pytest.mark.parametrize(("ours_class", "theirs_class", "kwargs", "reward"), STEP_CASES)
def test_follows_the_numpy_learner_step_by_step(ours_class, theirs_class, kwargs, reward):
    """Non-private, on the numpy environment's observations (the numpy learner playing): the
    JAX learner keeps its statistics at every engine step (DP-MW-UCB: n_ij, the sums, a_prev,
    eta and the decision rounds; DP-Dec-UCB: n̂ and ŝ), sends what it sends on the same steps,
    takes the same communication steps and plays its arm whenever the choice is not a tie."""
    ours, theirs = ours_class(**kwargs), theirs_class(**kwargs)
    horizon = 150
    kw = env_kwargs(theirs.agent_id, **{**MW_KWARGS, "horizon": horizon, "reward": reward})
    venv = make_vec(ENV, num_runs=1, **kw)
    obs, _ = venv.reset(seed=3)
    theirs.reset(venv.facts, BatchedRNG.for_runs([3], "agents"))
    facts = fj.facts_of(fj.make(ENV, **kw))
    init, act = fj.bind(ours, facts)
    state, act = init(jax.random.PRNGKey(0)), jax.jit(act)
    counter = counter_of(ours.make_params(facts))
    key, compared, steps = jax.random.PRNGKey(1), 0, 0
    channel = next(iter(ours.channel_spec(venv.config)))
    while int(obs.pulls[0]) < horizon:
        action = theirs.act(obs)
        key, k = jax.random.split(key)
        mine, state = act(k, state, to_jax_obs(obs))
        steps += 1
        assert bool(mine.pull) == numpy_pull(action), f"communication step at {obs.step}"
        send, payload = mine.messages[channel]
        np.testing.assert_array_equal(np.asarray(send), action.messages[channel][0][0])
        sent = np.asarray(send)
        np.testing.assert_allclose(np.asarray(payload)[sent],
                                   action.messages[channel][1][0][sent],
                                   rtol=2e-5, atol=2e-5)  # fmt: skip
        if isinstance(ours, DPMasterWorkerUCB):
            np.testing.assert_array_equal(np.asarray(state.counts), theirs.counts[0])
            np.testing.assert_allclose(np.asarray(counter.release(state.sums)),
                                       theirs.sums.value[0], rtol=1e-6, atol=1e-5)  # fmt: skip
            np.testing.assert_array_equal(np.asarray(state.eta), theirs.eta[0])
            np.testing.assert_array_equal(np.asarray(state.held), theirs.held[0])
            assert int(state.decision_rounds) == int(theirs.decision_rounds[0])
            if bool(mine.pull):  # lock step: every agent plays the numpy learner's arm
                np.testing.assert_array_equal(np.asarray(mine.arms), action.arms[0])
                compared += len(action.arms[0])
        else:
            np.testing.assert_allclose(np.asarray(state.nhat), theirs.nhat[0], rtol=1e-5,
                                       atol=1e-5, err_msg=f"nhat at step {obs.step}")  # fmt: skip
            np.testing.assert_allclose(np.asarray(state.shat), theirs.shat[0], rtol=1e-4,
                                       atol=1e-4, err_msg=f"shat at step {obs.step}")  # fmt: skip
            if bool(mine.pull) and int(obs.pulls[0]) >= theirs.num_arms + 1:
                q = np.sort(theirs.index(int(obs.step) + 1 if not theirs.paper
                                         else int(obs.pulls[0]) + 1)[0], axis=1)  # fmt: skip
                clear = q[:, -1] - q[:, -2] > 1e-3  # no tie within float32 rounding
                np.testing.assert_array_equal(np.asarray(mine.arms)[clear],
                                              action.arms[0][clear])  # fmt: skip
                compared += int(clear.sum())
        obs, *_ = venv.step(action.arms, action.messages, action.pull)
    assert compared > 200  # the comparison is not vacuous
    assert steps == int(obs.step)


@pytest.mark.parametrize(
    ("kwargs", "env"),
    [
        ({"epsilon": 5.0}, {}),
        # the latency timing is checked step by step above; its agreement run is slow
        pytest.param({"epsilon": math.inf, "timing": "latency"},
                     {"num_agents": 3, "topology": "complete"}, marks=pytest.mark.slow),
    ],
)  # fmt: skip
def test_mw_agrees_with_the_numpy_learner(kwargs, env):
    """DP-MW-UCB over 200 runs: mean final regret within 3 se; the decision rounds (data
    dependent: a switch resets ``eta``) as often as numpy's, mean within 3 se; each one is
    N uploads and N broadcast deliveries (paper: one communication step per decision)."""
    env_kw = {**MW_KWARGS, **env}
    ref, out = agreement(ENV, "dp_mw_ucb", env_kw, kwargs, exact_messages=False)
    n = env_kw["num_agents"]
    rounds = np.asarray(out.learner_state.decision_rounds)
    np.testing.assert_array_equal(out.messages.sum(axis=1), 2 * n * rounds)
    np.testing.assert_array_equal(out.floats.sum(axis=1), 2 * n * env_kw["num_arms"] * rounds)
    assert rounds.min() > 5 and len(set(rounds.tolist())) > 3  # the schedule depends on data
    theirs = ref.messages.sum(axis=1) / (2 * n)
    se = math.sqrt(theirs.var(ddof=1) / len(theirs) + rounds.var(ddof=1) / len(rounds))
    assert abs(theirs.mean() - rounds.mean()) <= 3 * se, (theirs.mean(), rounds.mean(), se)
    if kwargs.get("timing", "paper") == "paper":  # T pulls plus one step per decision round
        np.testing.assert_array_equal(out.engine_steps, env_kw["horizon"] + rounds)


@pytest.mark.parametrize(
    "kwargs",
    [{"epsilon": 2.0}, pytest.param({"epsilon": 5.0, "timing": "latency"}, marks=pytest.mark.slow)],
)
def test_dec_agrees_with_the_numpy_learner(kwargs):
    """DP-Dec-UCB on a ring of 5, Gaussian rewards (the reproduction's setting, small): mean
    final regret within 3 se over 200 runs; every agent sends to both neighbours once per round:
    exact counts; ``"paper"`` takes 2T engine steps."""
    ref, out = agreement(ENV, "dp_dec_ucb", DEC_KWARGS, kwargs)
    T, k = DEC_KWARGS["horizon"], DEC_KWARGS["num_arms"]
    assert (out.messages.sum(axis=1) == T * 10).all()
    assert (out.floats.sum(axis=1) == T * 10 * 2 * k).all()
    paper = kwargs.get("timing", "paper") == "paper"
    assert (out.engine_steps == (2 * T if paper else T)).all()


# both ports draw their noise and ties from the step key alike: dp_mw_ucb's run is slow
@pytest.mark.parametrize(
    "agent_id", ["dp_dec_ucb", pytest.param("dp_mw_ucb", marks=pytest.mark.slow)]
)
def test_same_key_same_bits(agent_id):
    """Two rollouts with the same seeds give the same bits (the Laplace draws and ties come
    from the keys only)."""
    env = fj.make(ENV, **env_kwargs(agent_id, **{**DEC_KWARGS, "horizon": 40}))
    same_bits(env, fj.make_jax_agent(agent_id), [0, 1, 2])


# dp_dec_ucb's cone is the graph's; dp_mw_ucb's (one server round trip) is slow
@pytest.mark.parametrize(
    "agent_id", ["dp_dec_ucb", pytest.param("dp_mw_ucb", marks=pytest.mark.slow)]
)
def test_respects_the_light_cone(agent_id):
    """A change of agent 0's rewards after the initialization reaches agent i no earlier than
    its hop distance later on the path P6 (DP-Dec-UCB: n̂ and ŝ travel one hop per
    communication step) or one step later (DP-MW-UCB: the server's broadcast), and does reach
    another agent."""
    kw = env_kwargs(agent_id, num_agents=6, num_arms=3, horizon=100, topology="path",
                    reward=GAUSSIAN)  # fmt: skip
    learner = fj.make_jax_agent(agent_id, epsilon=20.0)
    hops = 1 if agent_id == "dp_mw_ucb" else None
    assert_light_cone(fj.make(ENV, **kw), learner, j=0, steps=40, at=10, max_hops=hops)


def test_act_jits_and_vmaps():
    """``act`` under jit(vmap) over 4 runs (on the numpy environment's observations): int32
    arms, the initialization's arm t - 1 in round t, then DP-MW-UCB's decision rounds
    (communication steps in which every agent uploads) and DP-Dec-UCB's alternation of
    communication and pull steps."""
    runs = 4
    keys = jax.random.split(jax.random.PRNGKey(0), runs)
    for learner in (DPMasterWorkerUCB(epsilon=2.0), DPDecentralizedUCB(epsilon=2.0)):
        mw = isinstance(learner, DPMasterWorkerUCB)
        kw = env_kwargs(learner.agent_id, **{**MW_KWARGS, "horizon": 50})
        venv = make_vec(ENV, num_runs=runs, **kw)
        obs, _ = venv.reset(seed=0)
        facts = fj.facts_of(fj.make(ENV, **kw))
        init, act = fj.bind(learner, facts)
        states, act = jax.vmap(init)(keys), jax.jit(jax.vmap(act))
        channel = "server" if mw else "neighbors"
        pulls, arms = [], []
        for _ in range(12):
            action, states = act(keys, states, to_jax_obs(obs, None))
            assert action.arms.dtype == jnp.int32 and action.arms.shape == (runs, 4)
            pull = np.asarray(action.pull)
            send, payload = (np.asarray(x) for x in action.messages[channel])
            assert pull.shape == (runs,) and (send == ~pull[:, None]).all()  # lock step
            pulls.append(pull)
            arms.append(np.asarray(action.arms))
            obs, *_ = venv.step(arms[-1], {channel: (send, payload.astype(np.float64))}, pull)
        pulls, arms = np.stack(pulls), np.stack(arms)
        for b in range(runs):
            played = arms[pulls[:, b], b]
            assert (played[:4] == np.arange(4)[:, None]).all()  # rounds 1..K: arm t - 1
        if mw:  # one communication step per decision round, none during the initialization
            rounds = np.asarray(states.decision_rounds)
            assert (rounds >= 1).all() and (pulls.sum(axis=0) == 12 - rounds).all()
            assert pulls[:4].all() and not pulls[4].any()  # round K + 1 decides
        else:  # communication, pull, communication, ...
            assert (pulls == (np.arange(12) % 2 == 1)[:, None]).all()
        levels = counter_of(learner.make_params(facts)).binary_levels
        assert states.sums.alpha_noise.shape == (runs, levels, 4, 4)  # prefix layout


def test_declarations_and_privacy_constants_are_the_numpy_learners():
    """agent_id, version, privacy_epsilon and channel_spec are the numpy learner's; the
    counters built from the params have the numpy learner's Laplace scales, levels, horizon
    and bounds."""
    config = make_vec(ENV, **MW_KWARGS).config
    for ours, theirs in ((DPMasterWorkerUCB(epsilon=3.0), NumpyMW(epsilon=3.0)),
                         (DPDecentralizedUCB(rho=1.5), NumpyDec(rho=1.5)),
                         (DPMasterWorkerUCB(epsilon=math.inf), NumpyMW(epsilon=math.inf))):  # fmt: skip
        assert (ours.agent_id, ours.version) == (theirs.agent_id, theirs.version)
        assert ours.privacy_epsilon == theirs.privacy_epsilon
        assert ours.channel_spec(config) == theirs.channel_spec(config)
        env = fj.make(ENV, **env_kwargs(ours.agent_id, **MW_KWARGS))
        params = ours.make_params(fj.facts_of(env))
        theirs.reset(fj.facts_of(env), BatchedRNG([np.random.SeedSequence(0)]))
        assert params.ln_inv_delta == theirs.ln_inv_delta
        counter = counter_of(params)
        if math.isinf(theirs.config.epsilon):
            assert counter.log_scale == 0.0 and not counter.noisy
            continue
        numpy_counter = theirs.sums.counter
        assert counter.log_scale == numpy_counter.log_scale == 2.0 * 1.0 / theirs.config.epsilon
        assert counter.binary_levels == numpy_counter.binary_levels
        assert (counter.horizon, counter.bounds) == (numpy_counter.horizon, numpy_counter.bounds)
    assert fj.make_jax_agent("dp_dec_ucb", epsilon=1.5).privacy_epsilon == 1.5


@pytest.mark.parametrize(
    ("ours_class", "theirs_class", "kwargs"),
    [
        (DPMasterWorkerUCB, NumpyMW, {"epsilon": 3.0, "timing": "latency", "delta_horizon": 50}),
        (DPDecentralizedUCB, NumpyDec, {"rho": 1.5, "ci_mode": "max", "kappa": 0.4}),
        (DPDecentralizedUCB, NumpyDec, {"epsilon": math.inf}),
    ],
)
def test_params_are_the_numpy_learners(ours_class, theirs_class, kwargs):
    """``make_params`` is the numpy learner's params function: the params the JAX learner gets
    equal those the numpy ``reset`` computed on the same facts (ln(1/delta), the consensus
    matrix, the Lemma 2 constants and the c_i of ``ci_mode``); a second call gives equal
    params (pure); the hand-computed ``ln(1/delta)``."""
    ours, theirs = ours_class(**kwargs), theirs_class(**kwargs)
    env = fj.make(ENV, **env_kwargs(ours.agent_id, **MW_KWARGS))
    facts = fj.facts_of(env)
    params = ours.make_params(facts)
    theirs.reset(facts, BatchedRNG([np.random.SeedSequence(0)]))
    again = ours.make_params(facts)
    assert type(params) is type(theirs.params)
    assert params.config == theirs.params.config == ours.config
    T = kwargs.get("delta_horizon", MW_KWARGS["horizon"])
    if ours_class is DPMasterWorkerUCB:
        assert params == theirs.params == again
        assert params.ln_inv_delta == 4.0 * math.log(T)
        return
    rho = kwargs.get("rho", 2.0)
    assert params.ln_inv_delta == theirs.params.ln_inv_delta == math.log(2) + rho * math.log(T)
    for p in (theirs.params, again):
        np.testing.assert_array_equal(params.consensus.P, p.consensus.P)
        np.testing.assert_array_equal(params.c, p.c)
        np.testing.assert_array_equal(params.constants.c, p.constants.c)
    if kwargs.get("ci_mode") == "max":
        assert (params.c == params.constants.c.max()).all()
    assert params.consensus.kappa == kwargs.get("kappa", params.consensus.kappa)


def test_refuses_what_the_numpy_learner_refuses():
    for cls, theirs, bad in ((DPMasterWorkerUCB, NumpyMW, {"epsilon": 0.0}),
                             (DPMasterWorkerUCB, NumpyMW, {"timing": "soon"}),
                             (DPDecentralizedUCB, NumpyDec, {"rho": 1.0}),
                             (DPDecentralizedUCB, NumpyDec, {"clip": (1.0, 0.0)}),
                             (DPDecentralizedUCB, NumpyDec, {"ci_mode": "min"})):  # fmt: skip
        with pytest.raises(ConfigError) as ours_err:
            cls(**bad)
        with pytest.raises(ConfigError) as their_err:
            theirs(**bad)
        assert str(ours_err.value) == str(their_err.value)
    short = fj.make(ENV, **env_kwargs("dp_mw_ucb", **{**MW_KWARGS, "horizon": 4}))
    with pytest.raises(ConfigError, match="dp_mw_ucb: horizon"):
        DPMasterWorkerUCB().make_params(fj.facts_of(short))
    bare = fj.make(ENV, **{**MW_KWARGS, "channels": {}})
    with pytest.raises(ConfigError, match="dp_dec_ucb: channels.neighbors"):
        DPDecentralizedUCB().make_params(fj.facts_of(bare))
    partial = {"server": {"kind": "server", "dim": 4, "aggregate": "mean", "participation": 0.5}}
    half = fj.make(ENV, **{**MW_KWARGS, "channels": partial})
    with pytest.raises(ConfigError, match="dp_mw_ucb: channels.server.*participation"):
        DPMasterWorkerUCB().make_params(fj.facts_of(half))
    with pytest.raises(ConfigError) as theirs:
        NumpyMW().reset(fj.facts_of(half), BatchedRNG([np.random.SeedSequence(0)]))
    assert "participation 0.5" in str(theirs.value)
