"""The JAX ports of three field agents (docs/jax.md): ``ldp_ucb`` (``agents/jax/ldp_ucb.py``,
docs/ldp-ucb.md) and ``fed1_ucb`` / ``fed2_ucb`` (``agents/jax/fed_ucb.py``,
docs/fed-ucb12.md), against the numpy learners.

LDP-UCB: both mechanisms agree in distribution with exact message counts (2N per round), the
params (noise constants) are the numpy learner's and the reports have the mechanism's law
(empirically, next to numpy's). Fed1/Fed2-UCB: the params are the numpy learners', the phase
machine follows the numpy learner step by step on the same observations; regret and the
data-dependent schedule (phases, server rounds, eliminations, commitments, messages) agree with
it within 3 standard errors over 200 runs. All three: same key same bits, the light cone through
the server (one hop), ``act`` under jit and vmap, the numpy learners' declarations and
refusals."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tests import jax_tools
from tests.jax_tools import AGREEMENT_RUNS, agreement, assert_light_cone, same_bits

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402

import fedbandit_env.jax as fj  # noqa: E402
from agents.fed1_ucb import Fed1UCB as NumpyFed1UCB  # noqa: E402
from agents.fed2_ucb import Fed2UCB as NumpyFed2UCB  # noqa: E402
from agents.jax.fed_ucb import Fed1UCB, Fed2UCB  # noqa: E402
from agents.jax.ldp_ucb import LDPUCB  # noqa: E402
from agents.ldp_ucb import LDPUCB as NumpyLDPUCB  # noqa: E402
from fedbandit_env.agent_registry import make_agent  # noqa: E402
from fedbandit_env.bench.evaluate import env_kwargs_for, evaluate  # noqa: E402
from fedbandit_env.errors import ConfigError  # noqa: E402
from fedbandit_env.jax.channels.server import ServerDelivery  # noqa: E402
from fedbandit_env.registration import make_vec  # noqa: E402
from fedbandit_env.seeding import BatchedRNG  # noqa: E402

HETERO = "FedBandit/Heterogeneous-v0"
HOMO = "FedBandit/Homogeneous-v0"
TRIANGLE = "FedBandit/GossipTriangle-v0"  # N=3, M=5, Gaussian(1) rewards: LDP-UCB's sigmoid
SMALL = {"num_agents": 4, "num_arms": 4, "horizon": 200, "topology": "ring"}  # Bernoulli
FED_SMALL = {"num_agents": 6, "num_arms": 4, "horizon": 400, "topology": "ring"}
PORTS = {"ldp_ucb": LDPUCB, "fed1_ucb": Fed1UCB, "fed2_ucb": Fed2UCB}
NUMPY = {"ldp_ucb": NumpyLDPUCB, "fed1_ucb": NumpyFed1UCB, "fed2_ucb": NumpyFed2UCB}
SHORT = {
    "ldp_ucb": {},
    "fed1_ucb": {"f": 2, "width_scale": 0.3},
    "fed2_ucb": {"f": 2, "g": 2, "width_scale": 0.3},
}  # phases of a few pulls; early eliminations


def env_kwargs(env_id: str, agent_id: str, agent_kwargs=None, **kwargs) -> dict:
    """``kwargs`` plus the numpy learner's channels."""
    return env_kwargs_for(make_agent(agent_id, **(agent_kwargs or {})), env_id, kwargs)


def jax_env(env_id: str, agent_id: str, agent_kwargs=None, **kwargs):
    return fj.make(env_id, **env_kwargs(env_id, agent_id, agent_kwargs, **kwargs))


def within_3_se(a, b, what: str) -> None:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    se = math.sqrt(a.var(ddof=1) / a.size + b.var(ddof=1) / b.size)
    assert abs(a.mean() - b.mean()) <= 3 * se + 1e-9, (what, a.mean(), b.mean(), 3 * se)


# ---------------------------------------------------------------- LDP-UCB
@pytest.mark.parametrize(
    ("env_id", "env", "agent_kwargs"),
    [
        (HOMO, SMALL, {}),  # LDP-UCB-L, epsilon 1: forced exploration, then the private index
        (TRIANGLE, {"horizon": 200}, {"mechanism": "bernoulli", "epsilon": 2.0}),  # sigmoid
    ],
)
def test_ldp_ucb_agrees_with_the_numpy_learner(env_id, env, agent_kwargs):
    """Mean final regret within 3 se over 200 runs; N uploads and N replies (2K floats each)
    in each of the T - 1 communication steps: exact counts."""
    ref, out = agreement(env_id, "ldp_ucb", env, agent_kwargs)
    n, k, t = out.regret_by_agent.shape[2], ref.env_kwargs.get("num_arms", 5), env["horizon"]
    assert (out.messages.sum(axis=1) == 2 * n * (t - 1)).all()
    assert (out.floats.sum(axis=1) == 2 * n * (t - 1) * 2 * k).all()
    assert (out.engine_steps == 2 * t - 1).all()


@pytest.mark.parametrize("epsilon", [0.25, 1.0, 3.0, 800.0, math.inf])
@pytest.mark.parametrize("mechanism", ["laplace", "bernoulli"])
@pytest.mark.parametrize("rescale", [True, False])
def test_ldp_ucb_params_are_the_numpy_learners(epsilon, mechanism, rescale):
    """The params the JAX learner gets are those the numpy ``reset`` computed on the same facts
    (one pure function, :func:`agents.ldp_ucb.ldp_params`): the Laplace scale 1/epsilon and
    32/epsilon^2 (LDP-UCB-L), the randomized-response keep probability and the width w
    (LDP-UCB-B), by hand; the squashing of bounded rewards is the affine map of the bounds."""
    env = jax_env(HOMO, "ldp_ucb", **SMALL)
    ours = LDPUCB(epsilon=epsilon, mechanism=mechanism, rescale_width=rescale)
    params = ours.make_params(fj.facts_of(env))
    theirs = NumpyLDPUCB(epsilon=epsilon, mechanism=mechanism, rescale_width=rescale)
    theirs.reset(fj.facts_of(env), BatchedRNG([np.random.SeedSequence(0)]))
    assert params == theirs.params == ours.make_params(fj.facts_of(env))
    assert (params.squash, params.lo, params.hi) == ("bounds", 0.0, 1.0)
    assert params.width == theirs.width
    e = math.exp(epsilon) if epsilon < 700 else math.inf
    if mechanism == "laplace":
        assert params.scale == theirs.scale == (0.0 if math.isinf(epsilon) else 1.0 / epsilon)
        assert params.priv_coef == theirs.priv_coef
        assert (params.keep, params.width) == (1.0, 1.0)
    else:
        assert params.keep == theirs.keep == (1.0 if math.isinf(e) else e / (1 + e))
        w = (e + 1) / (e - 1) if rescale and math.isfinite(e) else 1.0
        assert params.width == w and (params.scale, params.priv_coef) == (0.0, 0.0)


@pytest.mark.parametrize("mechanism", ["laplace", "bernoulli"])
def test_ldp_ucb_reports_have_the_mechanisms_law(mechanism):
    """Empirically, 8000 reports of the reward r = 0.3 at epsilon = 1: LDP-UCB-L has mean r,
    sd sqrt(2)/epsilon and mean |noise| 1/epsilon; LDP-UCB-B is 1 with probability
    (r e + 1 - r)/(1 + e); both within 5 se of the law and of the numpy learner's reports."""
    draws, r, eps = 8000, 0.3, 1.0
    env = jax_env(HOMO, "ldp_ucb", **SMALL)  # Bernoulli rewards: bounds (0, 1), r unchanged
    ours = LDPUCB(epsilon=eps, mechanism=mechanism)
    params = ours.make_params(fj.facts_of(env))
    keys = jax.random.split(jax.random.PRNGKey(5), draws // 4)
    mine = np.asarray(jax.vmap(lambda k: ours.report(k, jnp.full(4, r), params))(keys),
                      np.float64)  # fmt: skip
    venv = make_vec(HOMO, num_runs=draws // 4, **env_kwargs(HOMO, "ldp_ucb", **SMALL))
    numpy_learner = NumpyLDPUCB(epsilon=eps, mechanism=mechanism)
    numpy_learner.reset(venv.facts, BatchedRNG.for_runs(list(range(draws // 4)), "agents"))
    theirs = numpy_learner.report(np.full((draws // 4, 4), r))
    mine, theirs = mine.ravel(), theirs.ravel()
    if mechanism == "laplace":
        scale = 1.0 / eps
        assert abs(mine.mean() - r) < 5 * math.sqrt(2) * scale / math.sqrt(draws)
        kurtosis_se = math.sqrt(5 / (4 * draws))  # relative se of a Laplace sample sd
        assert abs(mine.std() / (math.sqrt(2) * scale) - 1) < 5 * kurtosis_se
        assert abs(np.abs(mine - r).mean() / scale - 1) < 5 / math.sqrt(draws)
        assert abs(mine.std() / theirs.std() - 1) < 5 * math.sqrt(2) * kurtosis_se
    else:
        e = math.exp(eps)
        p = (r * e + 1 - r) / (1 + e)
        assert set(np.unique(mine)) <= {0.0, 1.0}
        se = math.sqrt(p * (1 - p) / draws)
        assert abs(mine.mean() - p) < 5 * se
        assert abs(mine.mean() - theirs.mean()) < 5 * math.sqrt(2) * se


# ---------------------------------------------------------------- Fed1/Fed2-UCB
def to_jax_obs(obs) -> fj.Observation:
    """Run 0 of a numpy VecObservation (a ``server`` channel) as the JAX observation."""
    d = obs.deliveries["server"]
    delivery = ServerDelivery(jnp.asarray(d.aggregate[0], jnp.float32),
                              jnp.asarray(d.count[0], jnp.int32),
                              jnp.asarray(d.participating[0]), jnp.zeros((), bool))  # fmt: skip
    return fj.Observation(
        step=jnp.int32(obs.step), last_arm=jnp.asarray(obs.last_arm[0], jnp.int32),
        last_reward=jnp.asarray(obs.last_reward[0], jnp.float32),
        deliveries={"server": delivery}, context=None, phase=jnp.int32(obs.phase[0]),
        pulls=jnp.int32(obs.pulls[0]),
    )  # fmt: skip


@pytest.mark.parametrize(
    ("agent_id", "agent_kwargs"),
    [
        ("fed1_ucb", {"f": 3, "width_scale": 0.3}),
        ("fed2_ucb", {"f": 3, "g": 1, "width_scale": 0.3}),
        ("fed2_ucb", {"f": lambda p: 2 + p, "width_scale": 0.3}),
    ],
)
def test_fed_phase_machine_follows_the_numpy_learner_step_by_step(agent_id, agent_kwargs):
    """On the numpy environment's observations (the numpy learner playing), the JAX learner
    plays its arms, takes its server rounds (``pull``) with its uploads, and keeps its active
    set, phase, position, rounds and counts at every step; eliminations happen (not
    vacuous)."""
    horizon = 200
    kwargs = env_kwargs(HETERO, agent_id, agent_kwargs, **{**FED_SMALL, "horizon": horizon})
    venv = make_vec(HETERO, num_runs=1, **kwargs)
    obs, _ = venv.reset(seed=2)
    theirs = NUMPY[agent_id](**agent_kwargs)
    theirs.reset(venv.facts, BatchedRNG.for_runs([2], "agents"))
    ours = PORTS[agent_id](**agent_kwargs)
    init, act = fj.bind(ours, fj.facts_of(fj.make(HETERO, **kwargs)))
    state, act = init(jax.random.PRNGKey(0)), jax.jit(act)
    while not venv.engine.truncated:
        action = theirs.act(obs)
        mine, state = act(jax.random.PRNGKey(1), state, to_jax_obs(obs))
        where = f"step {obs.step}"
        np.testing.assert_array_equal(np.asarray(mine.arms), action.arms[0], err_msg=where)
        pull = True if action.pull is None else bool(np.asarray(action.pull)[0])
        assert bool(mine.pull) == pull, where
        send, payload = mine.messages["server"]
        np.testing.assert_array_equal(np.asarray(send), action.messages["server"][0][0])
        np.testing.assert_allclose(np.asarray(payload), action.messages["server"][1][0],
                                   rtol=1e-5, atol=1e-6, err_msg=where)  # fmt: skip
        np.testing.assert_array_equal(np.asarray(state.active), theirs.active[0], err_msg=where)
        for name in ("phase", "pos", "length", "rounds", "num_phases", "committed"):
            assert int(getattr(state, name)) == int(getattr(theirs, name)[0]), (name, where)
        np.testing.assert_array_equal(np.asarray(state.counts), theirs.counts[0])
        obs, *_ = venv.step(action.arms, action.messages, action.pull)
    assert theirs.active[0].sum() < 4 and theirs.num_phases[0] > 2


@pytest.mark.parametrize(
    ("agent_id", "agent_kwargs"),
    [
        ("fed1_ucb", {"f": 5, "width_scale": 0.6}),
        ("fed2_ucb", {"f": lambda p: 3 + p, "width_scale": 0.6}),
    ],
)
def test_fed_schedule_and_regret_agree_with_the_numpy_learner(agent_id, agent_kwargs, monkeypatch):
    """Where the schedule depends on the data (arms leave after a varying number of phases;
    Fed2: clients join by g(p) = 2^p, a callable f), over 200 runs: the mean final regret,
    messages and floats (``agreement``) and the completed phases, server rounds, eliminated
    arms and commitments of the final states all within 3 se of the numpy learner's."""
    learners = []

    def evaluate_numpy(env_id, agent, **kwargs):  # the numpy learner, kept to read its state
        learners.append(NUMPY[agent](**kwargs.pop("agent_kwargs")))
        return evaluate(env_id, learners[-1], **kwargs)

    monkeypatch.setattr(jax_tools, "evaluate", evaluate_numpy)
    ref, out = agreement(HETERO, agent_id, dict(FED_SMALL), agent_kwargs, exact_messages=False)
    theirs, s, k = learners[0], out.learner_state, FED_SMALL["num_arms"]
    within_3_se(theirs.num_phases, s.num_phases, "phases")
    within_3_se(theirs.rounds, s.rounds, "rounds")
    within_3_se(k - theirs.active.sum(axis=1), k - s.active.sum(axis=1), "eliminations")
    within_3_se(theirs.committed, s.committed, "commitments")
    assert s.num_phases.std() > 0 and (k - s.active.sum(axis=1)).std() > 0  # data-dependent
    assert (s.rounds == s.num_phases).all()  # every round has an upload
    assert len(ref.seeds) == AGREEMENT_RUNS


# ---------------------------------------------------------------- all three
@pytest.mark.parametrize("agent_id", ["ldp_ucb", "fed2_ucb"])  # fed2 runs fed1's phase machine
def test_same_key_same_bits(agent_id):
    env = jax_env(HETERO, agent_id, SHORT[agent_id], **{**FED_SMALL, "horizon": 40})
    same_bits(env, fj.make_jax_agent(agent_id, **SHORT[agent_id]), [0, 1, 2])


@pytest.mark.parametrize("agent_id", ["ldp_ucb", "fed2_ucb"])  # fed2 runs fed1's phase machine
def test_respects_the_light_cone(agent_id):
    """A change of agent 1's rewards at step 5 (Fed: within phase 1, agent 1 a client of it)
    reaches another agent only through the server, no earlier than one step later (the
    broadcast of the next server round), and does reach one."""
    kwargs = SHORT[agent_id]
    env = jax_env(HETERO, agent_id, kwargs, **{**FED_SMALL, "horizon": 60})
    assert_light_cone(env, fj.make_jax_agent(agent_id, **kwargs), j=1, steps=30, at=5,
                      max_hops=1)  # fmt: skip


def test_act_jits_and_vmaps():
    """``act`` under jit(vmap) over 4 runs. LDP-UCB: pull steps and upload steps alternate,
    every agent uploads after every pull and the counts grow by N when the sums arrive. Fed1-UCB (f = 2,
    4 arms): 8 pulls round-robin, then a server round with every agent uploading."""
    keys = jax.random.split(jax.random.PRNGKey(0), 4)
    for agent_id, learner in (("ldp_ucb", LDPUCB()), ("fed1_ucb", Fed1UCB(f=2))):
        env = jax_env(HETERO, agent_id, SHORT[agent_id], **FED_SMALL)
        init, act = fj.bind(learner, fj.facts_of(env))
        states = jax.vmap(init)(keys)
        obs, env_states = jax.vmap(env.reset)(keys)
        act, step = jax.jit(jax.vmap(act)), jax.jit(jax.vmap(env.step))
        for s in range(12):
            action, states = act(keys, states, obs)
            assert action.arms.dtype == jnp.int32 and action.arms.shape == (4, 6)
            send, pull = np.asarray(action.messages["server"][0]), np.asarray(action.pull)
            if agent_id == "ldp_ucb":
                assert (pull == (s % 2 == 0)).all() and (send == (s % 2 == 1)).all()
                np.testing.assert_array_equal(np.asarray(states.n).sum(axis=1),
                                              4 + 6 * (s // 2))  # fmt: skip
            else:
                assert (pull == (s != 8)).all() and (send == (s == 8)).all()
                if s < 8:
                    assert (np.asarray(action.arms) == s % 4).all()
            obs, env_states, *_ = step(keys, env_states, action)
        if agent_id == "fed1_ucb":
            assert (np.asarray(states.num_phases) == 1).all()


def test_declarations_are_the_numpy_learners():
    config = make_vec(HETERO, **FED_SMALL).config
    for agent_id, port in PORTS.items():
        for kwargs in ({}, SHORT[agent_id]):
            ours, theirs = port(**kwargs), NUMPY[agent_id](**kwargs)
            assert (ours.agent_id, ours.version) == (theirs.agent_id, theirs.version)
            assert ours.privacy_epsilon == theirs.privacy_epsilon
            assert ours.channel_spec(config) == theirs.channel_spec(config)
    assert LDPUCB(epsilon=0.5).privacy_epsilon == 0.5
    assert LDPUCB.privacy_trust_model == NumpyLDPUCB.privacy_trust_model == "local"
    assert fj.make_jax_agent("ldp_ucb", epsilon=2.0).privacy_epsilon == 2.0
    assert isinstance(fj.make_jax_agent("fed2_ucb"), Fed2UCB)


@pytest.mark.parametrize(
    ("agent_id", "kwargs", "field"),
    [
        ("ldp_ucb", {"epsilon": 0.0}, "epsilon"),
        ("ldp_ucb", {"mechanism": "gauss"}, "mechanism"),
        ("ldp_ucb", {"squash": "tanh"}, "squash"),
        ("fed1_ucb", {"f": 0}, "f"),
        ("fed1_ucb", {"sigma": 0.0}, "sigma"),
        ("fed2_ucb", {"sigma_c": -1.0}, "sigma_c"),
        ("fed2_ucb", {"width_scale": -1.0}, "width_scale"),
    ],
)
def test_bad_hyperparameters_raise_the_numpy_learners_error(agent_id, kwargs, field):
    with pytest.raises(ConfigError) as ours:
        PORTS[agent_id](**kwargs)
    with pytest.raises(ConfigError) as theirs:
        NUMPY[agent_id](**kwargs)
    assert str(ours.value) == str(theirs.value)
    assert f"{agent_id}: {field}" in str(ours.value)


@pytest.mark.parametrize(
    ("agent_id", "channels", "match"),
    [
        ("ldp_ucb", {"server": {"kind": "server", "dim": 8, "aggregate": "mean"}},
         "ldp_ucb: channels.server"),
        ("ldp_ucb", {"server": {"kind": "server", "dim": 8, "aggregate": "sum",
                                "participation": 0.5}}, "participation"),
        ("fed1_ucb", {"server": {"kind": "server", "dim": 4, "aggregate": "mean",
                                 "join_round": [0, 0, 1, 1, 1, 1]}}, "join_round"),
        ("fed2_ucb", {"server": {"kind": "server", "dim": 4, "aggregate": "mean",
                                 "drop_prob": 0.1}}, "drop_prob"),
        ("fed2_ucb", {}, "fed2_ucb: channels.server"),
    ],
)  # fmt: skip
def test_refuses_the_federations_the_numpy_learner_refuses(agent_id, channels, match):
    """The numpy learner's checks of the facts, run in ``make_params`` before tracing: the same
    error."""
    env = fj.make(HETERO, **{**FED_SMALL, "channels": channels})
    facts = fj.facts_of(env)
    with pytest.raises(ConfigError, match=match) as ours:
        PORTS[agent_id]().make_params(facts)
    with pytest.raises(ConfigError) as theirs:
        NUMPY[agent_id]().reset(facts, BatchedRNG([np.random.SeedSequence(0)]))
    assert str(ours.value) == str(theirs.value)


def test_the_linear_family_is_refused():
    env = fj.make("FedBandit/LinearContextual-v0", num_agents=3, num_arms=4, dim=3, horizon=20)
    for agent_id, port in PORTS.items():
        with pytest.raises(ConfigError, match=f"{agent_id}: family"):
            port().make_params(fj.facts_of(env))


@pytest.mark.parametrize(
    ("agent_id", "agent_kwargs", "f"),
    [
        ("fed1_ucb", {}, [0, math.floor(10 * math.log(400))]),  # the default f, a constant
        ("fed2_ucb", {"f": 7, "g": 1}, [0, 7]),
        ("fed2_ucb", {"f": lambda p: 50 * p}, [0, 50, 100, 150, 200]),  # tabulated
    ],
)
def test_fed_params_are_the_numpy_learners(agent_id, agent_kwargs, f):
    """The params the JAX learner gets are those the numpy ``reset`` computed (one pure
    function per learner): ln T, the join schedule (Fed2: the channel's, ``g`` new clients per
    phase), f (Fed1's default ``floor(10 ln T)``) and, for a callable f, its table up to the
    first phase whose F(1, p) passes the horizon, and ``F(1, c_i - 1)`` of every client."""
    ours, theirs = PORTS[agent_id](**agent_kwargs), NUMPY[agent_id](**agent_kwargs)
    facts = fj.facts_of(jax_env(HETERO, agent_id, agent_kwargs, **FED_SMALL))
    params = ours.make_params(facts)
    theirs.reset(facts, BatchedRNG([np.random.SeedSequence(0)]))
    assert params.log_T == theirs.params.log_T == math.log(FED_SMALL["horizon"])
    for name in ("join_round", "f_table", "cum_table", "before"):
        np.testing.assert_array_equal(getattr(params, name), getattr(theirs.params, name))
    if callable(params.f):
        np.testing.assert_array_equal(params.f_table, f)  # 50 + 100 + 150 + 200 > 400
        cum = np.cumsum(f)
        assert cum[-2] <= FED_SMALL["horizon"] < cum[-1]
    else:
        assert params.f_const == f[1] and list(params.f_table) == [0]
    join = [int(r) for r in params.join_round]
    fed2 = list(range(6)) if agent_kwargs.get("g") == 1 else [0, 0, 1, 1, 1, 1]  # g(p) = 2^p
    assert join == (fed2 if agent_id == "fed2_ucb" else [0] * 6)
    assert list(params.before) == [theirs.cumulative_pulls(r) for r in join]
    assert list(params.before) == [sum(f[1:2]) * r if params.f_const else int(np.sum(f[: r + 1]))
                                   for r in join]  # fmt: skip


def test_fed_callable_f_is_checked_at_every_reachable_phase():
    """A callable f that gives a bad value at a phase the horizon can reach is refused when the
    params are made (both engines, the same error naming the learner and the phase)."""
    bad = {"f": lambda p: 60 if p < 3 else 0}  # F(1, 2) = 120 <= 400: phase 3 is reachable
    facts = fj.facts_of(jax_env(HETERO, "fed2_ucb", bad, **FED_SMALL))
    with pytest.raises(ConfigError, match=r"fed2_ucb: f\(3\)") as ours:
        Fed2UCB(**bad).make_params(facts)
    with pytest.raises(ConfigError) as theirs:
        NumpyFed2UCB(**bad).reset(facts, BatchedRNG([np.random.SeedSequence(0)]))
    assert str(ours.value) == str(theirs.value)
