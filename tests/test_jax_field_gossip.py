"""The JAX ports of three gossip / consensus field agents (docs/jax.md; docs/dducb.md,
docs/coop-ucb2.md, docs/gosine.md): ``dducb``, ``coop_ucb2`` and ``gosine`` in
``agents/jax/``, against their numpy twins.

Each port follows its twin step by step on the numpy environment's observations (the twin
playing), agrees with it in distribution over 200 runs with exact message and float counts,
keeps the twin's schedule (DDUCB's stages: exact; GosInE's data-dependent swaps and insertions:
the same means within 3 se), gives the same bits for the same key, respects the light cone,
jits and vmaps, declares what the twin declares and refuses what the twin refuses."""

from __future__ import annotations

import math
from functools import partial

import numpy as np
import pytest

from tests.jax_tools import agreement, assert_light_cone, same_bits

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402

import fedbandit_env.jax as fj  # noqa: E402
from agents.coop_ucb2 import CoopUCB2 as NumpyCoopUCB2  # noqa: E402
from agents.dducb import DDUCB as NumpyDDUCB  # noqa: E402
from agents.gosine import GosInE as NumpyGosInE  # noqa: E402
from agents.jax.coop_ucb2 import CoopUCB2  # noqa: E402
from agents.jax.dducb import DDUCB  # noqa: E402
from agents.jax.gosine import GosInE, arm_ids  # noqa: E402
from fedbandit_env.agent_registry import make_agent  # noqa: E402
from fedbandit_env.bench.evaluate import env_kwargs_for, evaluate  # noqa: E402
from fedbandit_env.errors import ConfigError  # noqa: E402
from fedbandit_env.jax.channels.gossip import GossipDelivery  # noqa: E402
from fedbandit_env.jax.channels.neighbors import NeighborsAggregate  # noqa: E402
from fedbandit_env.jax.types import COMMUNICATION  # noqa: E402
from fedbandit_env.network import NeighborsAggregate as NumpyAggregate  # noqa: E402
from fedbandit_env.registration import make_vec  # noqa: E402
from fedbandit_env.seeding import BatchedRNG  # noqa: E402

HETERO = "FedBandit/Heterogeneous-v0"  # Bernoulli arms, one instance per agent
HOMO = "FedBandit/Homogeneous-v0"
RING = {"num_agents": 5, "num_arms": 4, "horizon": 200, "topology": "ring"}
GOSINE_RING = {"num_agents": 4, "num_arms": 8, "horizon": 200, "topology": "ring"}  # s = 2
PORTS = {"dducb": DDUCB, "coop_ucb2": CoopUCB2, "gosine": GosInE}
TWINS = {"dducb": NumpyDDUCB, "coop_ucb2": NumpyCoopUCB2, "gosine": NumpyGosInE}


def env_kwargs(env_id: str, agent_id: str, **kwargs) -> dict:
    """``kwargs`` plus the twin's channels."""
    return env_kwargs_for(make_agent(agent_id), env_id, kwargs)


def to_jax_obs(obs) -> fj.Observation:
    """Run 0 of a numpy VecObservation as the JAX environment's observation, batched over one
    run (numpy leaves with a leading axis of 1)."""
    f32, i32 = np.float32, np.int32
    deliveries = {}
    for name, d in obs.deliveries.items():
        if isinstance(d, NumpyAggregate):
            deliveries[name] = NeighborsAggregate(d.value[:1].astype(f32), d.count[:1].astype(i32))
        else:
            deliveries[name] = GossipDelivery(d.partner[:1].astype(i32), d.received[:1],
                                              d.payload[:1].astype(f32))  # fmt: skip
    return fj.Observation(
        step=np.full(1, obs.step, i32), last_arm=obs.last_arm[:1].astype(i32),
        last_reward=obs.last_reward[:1].astype(f32), deliveries=deliveries, context=None,
        phase=obs.phase[:1].astype(i32), pulls=obs.pulls[:1].astype(i32),
    )  # fmt: skip


def follow(ours, theirs, env_id: str, kwargs: dict, steps: int, check) -> int:
    """Step the numpy environment with the twin's actions (one run) and feed the same
    observations to the port's ``act`` under ``jit(vmap)`` (a batch of one run);
    ``check(ours_state, twin, mine, action, obs)`` compares them after every step (``obs`` the
    observation both acted on) and returns how many decisions it compared. Returns the
    total."""
    kwargs = env_kwargs(env_id, theirs.agent_id, **kwargs)
    venv = make_vec(env_id, num_runs=1, **kwargs)
    obs, _ = venv.reset(seed=3)
    theirs.reset(venv.facts, BatchedRNG.for_runs([3], "agents"))
    facts = fj.facts_of(fj.make(env_id, **kwargs))
    init, act_one = fj.bind(ours, facts)
    state = jax.vmap(init)(jax.random.split(jax.random.PRNGKey(0), 1))
    act = jax.jit(jax.vmap(act_one))
    unbatch = partial(jax.tree_util.tree_map, lambda x: np.asarray(x)[0])
    keys = np.asarray(jax.random.split(jax.random.PRNGKey(1), steps))[:, None]
    compared = 0
    for s in range(steps):
        action = theirs.act(obs)
        mine, state = act(keys[s], state, to_jax_obs(obs))
        assert mine.arms.dtype == jnp.int32 and mine.arms.shape == (1, theirs.N)
        mine, one = unbatch(mine), unbatch(state)
        pull = True if action.pull is None else bool(action.pull[0])
        assert bool(mine.pull) == pull, f"pull at step {obs.step}"
        compared += check(one, theirs, mine, action, obs)
        obs, *_ = venv.step(action.arms, action.messages, action.pull)
    return compared


def close(a, b, what):
    np.testing.assert_allclose(np.asarray(a, np.float64), b, rtol=2e-5, atol=2e-5, err_msg=what)


def single_max(q: np.ndarray) -> np.ndarray:
    """(N,) bool: the row's maximum is unique (the choice is not random)."""
    return (q >= q.max(axis=1, keepdims=True)).sum(axis=1) == 1


# ------------------------------------------------------------ step by step
@pytest.mark.parametrize(
    "kwargs", [{}, {"accelerated": False, "stage_length": "small"}, {"stage_length": 3}]
)
def test_dducb_follows_the_twin_step_by_step(kwargs):
    """DDUCB on the twin's observations: alpha, beta, gamma, delta, the iterates z and z_prev,
    r and s are the twin's at every step (initialization, fold-in, Chebyshev or plain mixing,
    end of stage), the arm is the twin's whenever it is not a tie, z is what is sent."""

    def check(st, twin, mine, action, obs):
        s = twin.state
        for name in ("alpha", "beta", "gamma", "z", "z_prev"):
            close(getattr(st, name), getattr(s, name)[0], f"{name} at pulls {s.pulls}")
        close(st.delta.total - st.delta.carry, s.delta[0], "delta")
        assert int(st.r) == s.r and int(st.s) == int(s.s) and int(st.pulls) == s.pulls
        send = np.asarray(mine.messages["neighbors"][0])
        np.testing.assert_array_equal(send, action.messages["neighbors"][0][0])
        if s.pulls < twin.K:
            np.testing.assert_array_equal(np.asarray(mine.arms), action.arms[0])
            return 0
        close(mine.messages["neighbors"][1], action.messages["neighbors"][1][0], "payload")
        one = single_max(twin.index()[0])
        np.testing.assert_array_equal(np.asarray(mine.arms)[one], action.arms[0][one])
        return int(one.sum())

    ours, theirs = DDUCB(**kwargs), NumpyDDUCB(**kwargs)
    assert follow(ours, theirs, HETERO, {**RING, "horizon": 80}, 80, check) > 200


@pytest.mark.parametrize("drop_prob", [0.0, 0.3])
def test_coop_ucb2_follows_the_twin_step_by_step(drop_prob):
    """coop-UCB2 on the twin's observations: nhat, shat and the outgoing message are the
    twin's at every engine step (pull steps and communication steps), the arm is the twin's
    whenever it is not a tie. With drops (not in the paper) a lost message's weight stays
    with the receiver, as in the twin."""

    lost = [0]

    def check(st, twin, mine, action, obs):
        if obs.phase[0] == COMMUNICATION:  # every agent sent to its 2 ring neighbours
            lost[0] += int((2 - obs.deliveries["neighbors"].count[0]).sum())
        close(st.state, twin.state[0], "state")
        close(st.outgoing, twin.outgoing[0], "outgoing")
        send = np.asarray(mine.messages["neighbors"][0])
        np.testing.assert_array_equal(send, action.messages["neighbors"][0][0])
        if not bool(mine.pull):
            return 0
        t = int(obs.pulls[0]) + 1  # the round whose arm is chosen
        if t <= twin.K:
            np.testing.assert_array_equal(np.asarray(mine.arms), action.arms[0])
            return 0
        one = single_max(twin.index(t)[0])
        np.testing.assert_array_equal(np.asarray(mine.arms)[one], action.arms[0][one])
        return int(one.sum())

    K = RING["num_arms"]
    channel = {"kind": "neighbors", "dim": 2 * K, "reduce": "sum", "drop_prob": drop_prob}
    kwargs = {**RING, "horizon": 60, "channels": {"neighbors": channel}}
    assert follow(CoopUCB2(), NumpyCoopUCB2(), HETERO, kwargs, 119, check) > 150
    assert (lost[0] > 0) == (drop_prob > 0)


def test_gosine_follows_the_twin_step_by_step():
    """GosInE on the twin's observations (through four phase ends): counts, sums, U, L, the
    phase clock and the phase-start counts are the twin's at every step; the recommendation
    offered and the pulled arm are the twin's whenever they are not ties."""
    last_start = [np.zeros((GOSINE_RING["num_agents"], GOSINE_RING["num_arms"]))]
    recommended = [0]

    def check(st, twin, mine, action, obs):
        np.testing.assert_array_equal(np.asarray(st.counts), twin.counts[0])
        close(st.sums.total - st.sums.carry, twin.sums[0], "sums")
        np.testing.assert_array_equal(np.asarray(st.phase_start), twin.phase_start[0])
        np.testing.assert_array_equal(np.asarray(st.U), twin.U[0])
        np.testing.assert_array_equal(np.asarray(st.L), twin.L[0])
        assert (int(st.phase), int(st.next_end)) == (twin.phase, twin.next_end)
        send = np.asarray(mine.messages["recommend"][0])
        np.testing.assert_array_equal(send, action.messages["recommend"][0][0])
        start, last_start[0] = last_start[0], twin.phase_start[0].copy()
        if not bool(mine.pull):  # a phase end: the recommendation where it is not a tie
            score = np.where(twin._active[0], twin.counts[0] - start, -1.0)
            one = single_max(score)
            np.testing.assert_array_equal(np.asarray(mine.messages["recommend"][1])[one, 0],
                                          action.messages["recommend"][1][0][one, 0])  # fmt: skip
            recommended[0] += int(one.sum())
            return 0
        one = single_max(twin.index(int(obs.pulls[0]))[0])
        np.testing.assert_array_equal(np.asarray(mine.arms)[one], action.arms[0][one])
        return int(one.sum())

    compared = follow(GosInE(), NumpyGosInE(), HETERO, {**GOSINE_RING, "horizon": 70}, 73, check)
    assert compared > 150 and recommended[0] > 4


# ------------------------------------------------------------ agreement
def dducb_schedule(out, horizon: int, K: int, C: int) -> None:
    """The stage clock after the rollout (the last act comes before the horizon's pull): T -
    1 - K mixing rounds, so (T - 1 - K) // C stages ended and r = (T - 1 - K) % C."""
    rounds = horizon - 1 - K
    state = out.learner_state
    assert (state.stages == rounds // C).all() and (state.r == rounds % C).all()


@pytest.mark.parametrize(
    ("env_id", "kwargs", "agent_kwargs"),
    [
        (HETERO, RING, {}),
        pytest.param(
            HOMO,
            {**RING, "num_agents": 6},
            {"accelerated": False, "stage_length": "small"},
            marks=pytest.mark.slow,
        ),  # followed step by step above; one more compile
    ],
)
def test_dducb_agrees_with_the_numpy_twin(env_id, kwargs, agent_kwargs):
    """Mean final regret within 3 se over 200 runs; every agent sends its iterate to both ring
    neighbours every step after the K initialization pulls: exact counts; the stage clock (C
    and the stages ended) is the twin's."""
    ref, out = agreement(env_id, "dducb", kwargs, agent_kwargs)
    N, K, T = kwargs["num_agents"], kwargs["num_arms"], kwargs["horizon"]
    assert (out.messages.sum(axis=1) == (T - K) * 2 * N).all()
    assert (out.floats.sum(axis=1) == (T - K) * 2 * N * 2 * K).all()
    params = DDUCB(**agent_kwargs).make_params(fj.facts_of(fj.make(env_id, **ref.env_kwargs)))
    assert params.stage_length > 1
    dducb_schedule(out, T, K, params.stage_length)
    report("dducb", agent_kwargs, ref, out)


def test_coop_ucb2_agrees_with_the_numpy_twin():
    """Mean final regret within 3 se over 200 runs; one communication step per round after
    the first, 2K floats per directed edge: exact counts and engine steps (2T - 1)."""
    ref, out = agreement(HETERO, "coop_ucb2", RING)
    N, K, T = RING["num_agents"], RING["num_arms"], RING["horizon"]
    assert (out.messages.sum(axis=1) == (T - 1) * 2 * N).all()
    assert (out.floats.sum(axis=1) == (T - 1) * 2 * N * 2 * K).all()
    assert (out.engine_steps == 2 * T - 1).all()
    report("coop_ucb2", {}, ref, out)


class CountingGosInE(NumpyGosInE):
    """The numpy twin, counting per run and agent the phase ends that swapped U and L and the
    insertions that replaced L (the port's ``swaps`` and ``inserts``)."""

    def reset(self, facts, rng):
        super().reset(facts, rng)
        self.swaps = np.zeros(self.U.shape, np.int64)
        self.inserts = np.zeros(self.U.shape, np.int64)

    def _phase_end(self):
        u = self.U.copy()
        action = super()._phase_end()
        self.swaps += self.U != u
        return action

    def _insert(self, obs):
        old = self.L.copy()
        super()._insert(obs)
        self.inserts += self.L != old


def test_gosine_agrees_with_the_numpy_twin_and_its_schedule():
    """K = 8 arms, 4 agents (sticky sets of 2, active sets of 4): the insertions decide which
    arms an agent plays. Mean final regret within 3 se over 200 runs; N recommendations per
    phase end before the horizon (pulls 1, 8, 27, 64, 125): exact counts; the data-dependent
    schedule (swaps and insertions per run) has the twin's means within 3 se."""
    ref, out = agreement(HETERO, "gosine", GOSINE_RING)
    N = GOSINE_RING["num_agents"]
    ends = sum(1 for j in range(1, 10) if j**3 < GOSINE_RING["horizon"])
    assert (out.messages.sum(axis=1) == ends * N).all() and ends == 5
    assert (out.engine_steps == GOSINE_RING["horizon"] + ends).all()
    twin = CountingGosInE()
    evaluate(HETERO, twin, runs=200, seed=0, env_kwargs=ref.env_kwargs)
    for name in ("swaps", "inserts"):
        x = getattr(twin, name).sum(axis=1).astype(float)
        y = np.asarray(getattr(out.learner_state, name)).sum(axis=1).astype(float)
        se = math.sqrt(x.var(ddof=1) / len(x) + y.var(ddof=1) / len(y))
        assert y.mean() > 0.5 and abs(x.mean() - y.mean()) <= 3 * se, (name, x.mean(), y.mean())
    report("gosine", {}, ref, out)


def report(agent_id, kwargs, ref, out) -> None:
    a, b = ref.final_regret_network, out.regret_by_agent[:, -1].sum(axis=1)
    se = math.sqrt(a.var(ddof=1) / len(a) + b.var(ddof=1) / len(b))
    print(f"{agent_id} {kwargs}: numpy {a.mean():.3f} vs JAX {b.mean():.3f}, 3 se {3 * se:.3f}")


# ------------------------------------------------------------ bits, light cone, jit
# gosine draws the most randomness (two tie-breaks, the channel's neighbour pick); the other two
# rollouts cost two compiles each
SAME_BITS = [pytest.param("dducb", marks=pytest.mark.slow),
             pytest.param("coop_ucb2", marks=pytest.mark.slow), "gosine"]  # fmt: skip


@pytest.mark.parametrize("agent_id", SAME_BITS)
def test_same_key_same_bits(agent_id):
    kwargs = GOSINE_RING if agent_id == "gosine" else RING
    env = fj.make(HETERO, **env_kwargs(HETERO, agent_id, **{**kwargs, "horizon": 40}))
    same_bits(env, fj.make_jax_agent(agent_id), [0, 1, 2])


@pytest.mark.parametrize(
    ("agent_id", "steps", "at"), [("dducb", 30, 10), ("coop_ucb2", 40, 14), ("gosine", 100, 12)]
)
def test_respects_the_light_cone(agent_id, steps, at):
    """On a path of 5 agents, a change of agent 2's rewards after the initialization reaches
    agent i no earlier than d(2, i) engine steps later (iterates, consensus messages and
    recommendations travel one hop per step), and does reach another agent."""
    kwargs = {"num_agents": 5, "num_arms": 4, "horizon": 200, "topology": "path"}
    if agent_id == "gosine":
        kwargs["num_arms"] = 10  # agent 2: sticky {4, 5}, U = 6, L = 7
    env = fj.make(HETERO, **env_kwargs(HETERO, agent_id, **kwargs))
    assert_light_cone(env, fj.make_jax_agent(agent_id), j=2, steps=steps, at=at)


def test_gosine_ignores_a_reply_that_is_no_arm_id():
    """A delivered recommendation that is no arm id (negative, K or above, fractional, NaN)
    or did not arrive counts as no recommendation, as the twin's ``arm_ids``; a valid inactive
    arm replaces L."""
    from agents.gosine import arm_ids as np_arm_ids

    raw = np.array([-1.0, 8.0, 2.5, np.nan, 3.0, 6.0, 1.0], np.float32)
    received = np.array([True, True, True, True, False, True, True])
    np.testing.assert_array_equal(np.asarray(arm_ids(jnp.asarray(raw), jnp.asarray(received), 8)),
                                  np_arm_ids(raw, received, 8))  # fmt: skip
    learner = GosInE()
    kwargs = env_kwargs(HETERO, "gosine", **GOSINE_RING)
    init, act_one = fj.bind(learner, fj.facts_of(fj.make(HETERO, **kwargs)))
    state = init(jax.random.PRNGKey(0))
    # agent 0: sticky {0, 1}, U = 2, L = 3; agents 1..3 get bad replies, agent 0 arm 5
    payload = jnp.asarray([[5.0], [-3.0], [7.5], [np.inf]], jnp.float32)
    obs = fj.Observation(
        step=jnp.int32(3), last_arm=jnp.zeros(4, jnp.int32), last_reward=jnp.zeros(4),
        deliveries={"recommend": GossipDelivery(jnp.asarray([1, 0, 1, 2], jnp.int32),
                                                jnp.ones(4, bool), payload)},
        context=None, phase=jnp.int32(COMMUNICATION), pulls=jnp.int32(1),
    )  # fmt: skip
    _, after = jax.jit(act_one)(jax.random.PRNGKey(1), state, obs)
    np.testing.assert_array_equal(np.asarray(after.L), [5, *np.asarray(state.L)[1:]])
    np.testing.assert_array_equal(np.asarray(after.inserts), [1, 0, 0, 0])


def test_declarations_are_the_twins():
    config = make_vec(HETERO, **RING).config
    for agent_id, port in PORTS.items():
        ours, theirs = port(), TWINS[agent_id]()
        assert ours.agent_id == theirs.agent_id == agent_id
        assert ours.version == theirs.version
        assert ours.privacy_epsilon == getattr(theirs, "privacy_epsilon", None)
        assert ours.channel_spec(config) == theirs.channel_spec(config)
        assert type(fj.make_jax_agent(agent_id)) is port


def test_refuses_what_the_twin_refuses():
    """Bad hyperparameters raise the twin's errors (same message) when built; facts the twin
    refuses raise in ``init``, before tracing."""
    bad = [
        ("dducb", {"eps": 1.5}),
        ("dducb", {"stage_length": "long"}),
        ("dducb", {"kappa": 0.0}),
        ("coop_ucb2", {"eta": 4.0}),
        ("coop_ucb2", {"gamma": -1.0}),
        ("gosine", {"beta": 1}),
        ("gosine", {"alpha": 0.0}),
    ]
    for agent_id, kwargs in bad:
        with pytest.raises(ConfigError) as theirs:
            TWINS[agent_id](**kwargs)
        with pytest.raises(ConfigError) as ours:
            PORTS[agent_id](**kwargs)
        assert str(ours.value) == str(theirs.value)
    few = fj.make(HETERO, **env_kwargs(HETERO, "gosine", **{**GOSINE_RING, "num_arms": 2}))
    with pytest.raises(ConfigError, match="gosine: num_arms: expected K >= ceil"):
        fj.bind(GosInE(), fj.facts_of(few))
    bare = fj.make(HETERO, **{**RING, "channels": {}})
    for agent_id in ("dducb", "coop_ucb2"):
        with pytest.raises(ConfigError, match=f"{agent_id}: channels.neighbors"):
            init, _ = fj.bind(PORTS[agent_id](), fj.facts_of(bare))
            init(jax.random.PRNGKey(0))
    short = fj.make(HETERO, **env_kwargs(HETERO, "dducb", **{**RING, "horizon": 4}))
    with pytest.raises(ConfigError, match="dducb: horizon"):
        fj.bind(DDUCB(), fj.facts_of(short))


@pytest.mark.parametrize("kwargs", [{}, {"accelerated": False, "stage_length": "small"},
                                    {"stage_length": 3, "kappa": 0.5}])  # fmt: skip
def test_dducb_params_are_what_the_numpy_reset_computes(kwargs):
    """The JAX learner's params (:func:`agents.dducb.dducb_params`, made without a numpy
    learner) hold what the numpy ``reset`` computes on the same facts: P, lambda2, C, the
    Chebyshev coefficients and the index's factor; C follows the stage-length rule."""
    env_kwargs_ = env_kwargs(HETERO, "dducb", **RING)
    params = DDUCB(**kwargs).make_params(fj.facts_of(fj.make(HETERO, **env_kwargs_)))
    theirs = NumpyDDUCB(**kwargs)
    facts = make_vec(HETERO, num_runs=1, **env_kwargs_).facts
    theirs.reset(facts, BatchedRNG.for_runs([0], "agents"))
    assert (params.num_agents, params.num_arms) == (theirs.N, theirs.K) == (5, 4)
    assert params.stage_length == theirs.C and params.bonus == theirs.bonus == 2 * 2.0 / 5
    np.testing.assert_array_equal(params.a, theirs._a)
    np.testing.assert_array_equal(params.b, theirs._b)
    np.testing.assert_array_equal(params.consensus.P, theirs.consensus.P)
    assert params.consensus.lambda2 == theirs.consensus.lambda2
    assert params.config == theirs.config
    if "stage_length" in kwargs and not isinstance(kwargs["stage_length"], str):
        assert params.stage_length == kwargs["stage_length"]


def test_dducb_params_refuse_bad_facts_by_name():
    """Facts the numpy reset refuses raise the same ConfigError from ``make_params``, naming
    the learner and the field: a disconnected graph, a linear family, a short horizon."""
    for env_id, kwargs, field in [
        (HETERO, {**RING, "topology": "hybrid", "topology_kwargs": {"sizes": [3, 2]}},
         "topology"),
        ("FedBandit/LinearContextual-v0", {"num_agents": 4, "num_arms": 5, "horizon": 50,
                                           "dim": 3}, "family"),
        (HETERO, {**RING, "horizon": 3}, "horizon"),
    ]:  # fmt: skip
        full = env_kwargs(env_id, "dducb", **kwargs)
        with pytest.raises(ConfigError) as ours:
            DDUCB().make_params(fj.facts_of(fj.make(env_id, **full)))
        with pytest.raises(ConfigError) as theirs:
            NumpyDDUCB().reset(make_vec(env_id, num_runs=1, **full).facts,
                               BatchedRNG.for_runs([0], "agents"))  # fmt: skip
        assert str(ours.value) == str(theirs.value)
        assert str(ours.value).startswith(f"dducb: {field}"), str(ours.value)
