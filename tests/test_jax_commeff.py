"""The JAX learners of Li & Song's private communication-efficient elimination agents
(docs/jax.md, docs/commeff.md): ``cdp_mab``, ``ddp_mab`` and ``hdp_mab`` in
``agents/jax/commeff.py`` (the epoch machine in ``agents/jax/commeff_common.py``), against the
numpy learners.

The params are the numpy reset's (N_eff, delay, eps_msg, delta) and the schedule tables give the
numpy S_int, c(r) and h(r); on the numpy environment's observations (no noise) each JAX learner
plays the numpy arms and keeps its epochs, active sets and phases step by step; over 200 runs of an instance where the first round's eliminations decide
whether a second round fits the horizon, regret, message counts and the schedule statistics
(rounds and uploads per run, eliminations, epochs) agree within 3 se, with exact messages per
round; the Laplace scale is the twin's (computed and empirical); same key same bits, the light
cone, jit and vmap, the twins' declarations and refusals."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tests.jax_tools import agreement, assert_light_cone, same_bits

jax = pytest.importorskip("jax")

import fedbandit_env.jax as fj  # noqa: E402
from agents.commeff import CDPMAB as NumpyCDPMAB  # noqa: E402
from agents.commeff import DDPMAB as NumpyDDPMAB  # noqa: E402
from agents.commeff import HDPMAB as NumpyHDPMAB  # noqa: E402
from agents.commeff.base import COMMIT, noise_scale  # noqa: E402
from agents.jax.commeff import CDPMAB, DDPMAB, HDPMAB  # noqa: E402
from fedbandit_env.agent_registry import make_agent  # noqa: E402
from fedbandit_env.bench.evaluate import env_kwargs_for  # noqa: E402
from fedbandit_env.bench.executors import jax_attrs  # noqa: E402
from fedbandit_env.errors import ConfigError  # noqa: E402
from fedbandit_env.jax.channels.flood import FloodDelivery  # noqa: E402
from fedbandit_env.jax.channels.hierarchical import HierarchicalDelivery  # noqa: E402
from fedbandit_env.jax.channels.server import ServerDelivery  # noqa: E402
from fedbandit_env.privacy import LaplaceMechanism  # noqa: E402
from fedbandit_env.registration import make_vec  # noqa: E402
from fedbandit_env.seeding import BatchedRNG  # noqa: E402

HOMOG = "FedBandit/Homogeneous-v0"
MEANS = [0.7, 0.55, 0.42, 0.2]  # arm 2's gap is about 2 C(1): its first elimination is random
# after round 1, two arms left fit a second round in the horizon, three do not
CONFIGS = {
    "cdp_mab": {"num_agents": 4, "num_arms": 4, "horizon": 1000, "means": MEANS},
    "ddp_mab": {"num_agents": 5, "num_arms": 4, "horizon": 800, "means": MEANS,
                "topology": "ring"},
    "hdp_mab": {"num_agents": 6, "num_arms": 4, "horizon": 700, "means": MEANS,
                "topology": "hybrid",
                "topology_kwargs": {"sizes": [4, 2], "component_graph": "path"}},
}  # fmt: skip
PORTS = list(CONFIGS)
TWINS = {"cdp_mab": NumpyCDPMAB, "ddp_mab": NumpyDDPMAB, "hdp_mab": NumpyHDPMAB}
JAX_PORTS = {"cdp_mab": CDPMAB, "ddp_mab": DDPMAB, "hdp_mab": HDPMAB}


def env_kwargs(agent_id: str, **kwargs) -> dict:
    """``kwargs`` plus the twin's channels."""
    return env_kwargs_for(make_agent(agent_id), HOMOG, kwargs)


def play_numpy(policy, runs: int, kwargs: dict, seed: int = 0):
    """The numpy twin on ``runs`` seeds of the vector env (as ``evaluate`` runs it); returns
    the policy after the run."""
    venv = make_vec(HOMOG, num_runs=runs, **kwargs)
    obs, _ = venv.reset(seed=seed)
    policy.reset(venv.facts, venv.agent_rng())
    while not venv.engine.truncated:
        action = policy.act(obs)
        obs, *_ = venv.step(action.arms, action.messages, action.pull)
    return policy


# ------------------------------------------------------------ the schedule
@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"epsilon": 0.2, "privacy": "per_message"},
        {"epsilon": math.inf},
        {"rounds": 3, "delta": 0.05},
        {"rounds": 2, "delta": (0.3,), "epsilon": 2.0},
    ],
)
def test_schedule_tables_are_the_twins(kwargs):
    """The params are the numpy reset's (every field of its ``params``); epoch 1 of ``init``
    is the numpy ``reset`` (S_int, n_r, c(1), h(1), the epoch length), the tables' integer
    targets are the numpy :func:`integer_target` of S(r) for every epoch and active-set size,
    and every epoch that can end within the horizon has a row."""
    from agents.commeff import schedule

    kw = env_kwargs("cdp_mab", **CONFIGS["cdp_mab"])
    env = fj.make(HOMOG, **kw)
    ours, theirs = CDPMAB(**kwargs), NumpyCDPMAB(**kwargs)
    params = ours.make_params(fj.facts_of(env))
    state = ours.init(jax.random.PRNGKey(0), params)
    theirs.reset(make_vec(HOMOG, num_runs=1, **kw).facts, BatchedRNG.for_runs([0], "agents"))
    assert {name: getattr(params, name) for name in vars(theirs.params)} == vars(theirs.params)
    assert (params.n_eff, params.delay, params.eps_msg) == (theirs.n_eff, theirs.delay,
                                                            theirs.eps_msg)  # fmt: skip
    for name in ("r", "s_int", "n", "length", "num_active"):
        np.testing.assert_array_equal(np.asarray(getattr(state, name)), getattr(theirs, name)[0])
    np.testing.assert_allclose(np.asarray(state.c), theirs.c[0], rtol=1e-6)
    np.testing.assert_allclose(np.asarray(state.h), theirs.h[0], rtol=1e-6)
    t, k, T = params.tables, params.num_arms, params.horizon
    rows = t.s_ceil.shape[0]
    r = np.arange(1, rows + 1)[:, None]
    na = np.arange(1, k + 1)[None, :]
    kw_s = dict(num_arms=k, horizon=T, n_eff=params.n_eff, eps_msg=params.eps_msg)
    rounds = params.config.rounds
    tilde = schedule.resolution(r, rounds, None if params.delta is None else params.delta[0])
    s_int = schedule.integer_target(schedule.sample_target(r, na, tilde, **kw_s), 0)
    np.testing.assert_array_equal(t.s_ceil, np.minimum(s_int, 2**30))
    # the epochs before the last row's may end within T; the last row is the first that
    # cannot (S_int > T at one active arm), or epoch R (R + 1 commits)
    assert (s_int[:-1, 0] <= T).all()
    assert s_int[-1, 0] > T or rows == rounds


# ---------------------------------------------------------------- step by step
def to_jax_obs(obs, channels) -> fj.Observation:
    """Run 0 of a numpy VecObservation as the JAX environment's observation (the flood's sparse
    rows as the JAX channel's dense (receiver, slot) table)."""
    deliveries = {}
    for name, d in obs.deliveries.items():
        kind = channels[name].kind
        if kind == "server":
            deliveries[name] = ServerDelivery(
                np.float32(d.aggregate[0]),
                np.int32(d.count[0]),
                d.participating[0],
                d.degenerate[0],
            )
        elif kind == "hierarchical":
            deliveries[name] = HierarchicalDelivery(
                np.float32(d.aggregate[0]), np.int32(d.count[0]), np.int32(d.sent_step[0])
            )
        else:
            senders = channels[name].senders
            mask = np.zeros(senders.shape, bool)
            sent = np.full(senders.shape, -1, np.int32)
            payload = np.zeros((*senders.shape, channels[name].dim), np.float32)
            rows = d.run == 0
            at = (d.receiver[rows], d.slot[rows])
            mask[at], sent[at], payload[at] = True, d.sent_step[rows], d.payload[rows]
            deliveries[name] = FloodDelivery(senders, mask, sent, payload)
    return fj.Observation(
        step=np.int32(obs.step),
        last_arm=np.int32(obs.last_arm[0]),
        last_reward=np.float32(obs.last_reward[0]),
        deliveries=deliveries,
        context=None,
        phase=np.int32(obs.phase[0]),
        pulls=np.int32(obs.pulls[0]),
    )


@pytest.mark.parametrize(
    ("agent_id", "kwargs", "env_extra"),
    [
        ("cdp_mab", {"epsilon": math.inf}, {}),
        ("cdp_mab", {"epsilon": 1e9, "privacy": "per_message", "rounds": 2, "delta": 0.5,
                     "participation": 0.5, "timing": "latency"}, {}),
        ("ddp_mab", {"epsilon": math.inf}, {"topology": "path"}),
        ("hdp_mab", {"epsilon": math.inf, "aggregation": "unweighted", "cost_model": "path",
                     "timing": "latency"},
         {"topology_kwargs": {"sizes": [4, 2], "component_graph": "path"}}),
    ],
    ids=["cdp", "cdp-budget-participation-latency", "ddp-path", "hdp-unweighted-latency"],
)  # fmt: skip
def test_follows_the_twin_step_by_step(agent_id, kwargs, env_extra):
    """On the numpy environment's observations (the twin playing), the port plays the twin's
    arms, pull flags and upload masks at every step, sends its running means, and keeps its
    epochs, S_int, active sets, phases and positions. Without noise (or at a per-message
    epsilon of 1e9) everything is determined by the rewards; the run has several rounds, a
    commit or the round budget's end, and greedy delay slots on the graphs."""
    base = {**CONFIGS[agent_id], "horizon": 800, "means": [0.8, 0.55, 0.3, 0.1], **env_extra}
    if agent_id == "cdp_mab":
        base["num_agents"] = 6
    kw = env_kwargs(agent_id, **base)
    if "participation" in kwargs:
        kw["channels"] = NumpyCDPMAB(**kwargs).channel_spec(make_vec(HOMOG, **base).config)
    venv = make_vec(HOMOG, num_runs=1, **kw)
    obs, _ = venv.reset(seed=5)
    theirs, ours = TWINS[agent_id](**kwargs), JAX_PORTS[agent_id](**kwargs)
    theirs.reset(venv.facts, BatchedRNG.for_runs([5], "agents"))
    env = fj.make(HOMOG, **kw)
    init, act = fj.bind(ours, fj.facts_of(env))
    state = init(jax.random.PRNGKey(0))
    act = jax.jit(act)
    key = jax.random.PRNGKey(1)  # the noise is negligible: one key for every step
    name = theirs.channel_name
    uploads = 0
    fields = ("r", "s_int", "num_active", "active", "phase", "pos", "committed")
    while not venv.engine.truncated:
        action = theirs.act(obs)
        mine, state = act(key, state, to_jax_obs(obs, env.channels))
        (arms, pull, (send, payload)), mine_state = jax.device_get(
            ((mine.arms, mine.pull, mine.messages[name]), [getattr(state, f) for f in fields])
        )
        where = f"step {obs.step + 1}"
        np.testing.assert_array_equal(arms, action.arms[0], err_msg=where)
        assert bool(pull) == (True if action.pull is None else bool(action.pull[0])), where
        sent = action.messages[name][0][0] if name in action.messages else False
        np.testing.assert_array_equal(send, sent, err_msg=where)
        if send.any():
            uploads += 1
            np.testing.assert_allclose(payload, action.messages[name][1][0], rtol=1e-5,
                                       atol=1e-5, err_msg=where)  # fmt: skip
        committed = mine_state[fields.index("phase")] == COMMIT
        for f, value in zip(fields, mine_state, strict=True):
            theirs_value = getattr(theirs, f)[0]
            if f == "committed":
                value, theirs_value = value[committed], theirs_value[committed]
            np.testing.assert_array_equal(value, theirs_value, err_msg=f"{f}, {where}")
        obs, *_ = venv.step(action.arms, action.messages, action.pull)
    assert uploads >= 2 and int(state.rounds_done) == theirs.rounds_done[0]
    assert int(state.uploads) == theirs.uploads[0] == uploads
    if kwargs.get("rounds") is None:
        assert (theirs.num_active[0] == 1).all()  # eliminated down to one arm: committed
    else:
        assert theirs.rounds_done[0] == kwargs["rounds"]


# ---------------------------------------------------------------- agreement
def schedule_statistics(rounds_done, uploads, num_active, r) -> dict[str, np.ndarray]:
    """Per run: completed rounds, upload steps, arms eliminated (agent 0) and its epoch."""
    return {
        "rounds": np.asarray(rounds_done, float),
        "uploads": np.asarray(uploads, float),
        "eliminated": 4.0 - np.asarray(num_active)[:, 0],
        "epoch": np.asarray(r, float)[:, 0],
    }


@pytest.mark.parametrize("agent_id", PORTS)
def test_agrees_with_the_numpy_twin_where_the_schedule_depends_on_data(agent_id):
    """epsilon = 1 (Laplace noise on every release), 200 runs: the mean final regret, the
    message and float counts and the schedule statistics (rounds and uploads per run,
    eliminations, epochs) within 3 se; a second round happens in some runs and not in others,
    in both backends. Master-worker and hybrid rounds are charged at the upload step: their
    messages are exactly the twin's per round (2M; the relays to the sinks + Q + M)."""
    kwargs = CONFIGS[agent_id]
    ref, out = agreement(HOMOG, agent_id, kwargs, exact_messages=False)
    port = fj.make_jax_agent(agent_id)  # the numpy learner's attributes, read as the executors do
    params = port.make_params(fj.facts_of(fj.make(HOMOG, **ref.env_kwargs)))
    names = ("rounds_done", "uploads", "num_active", "r", "delay", "n_eff", "eps_msg")
    s = jax_attrs(port, names, out.learner_state)
    ours = schedule_statistics(*(s[name] for name in names[:4]))
    twin = play_numpy(make_agent(agent_id), 200, ref.env_kwargs)
    theirs = schedule_statistics(*(getattr(twin, name) for name in names[:4]))
    assert s["delay"] == params.delay == twin.delay
    assert (s["n_eff"], s["eps_msg"]) == (twin.n_eff, twin.eps_msg)
    for name in ours:
        a, b = theirs[name], ours[name]
        se = math.sqrt(a.var(ddof=1) / len(a) + b.var(ddof=1) / len(b))
        assert abs(a.mean() - b.mean()) <= 3 * se + 1e-9, (name, a.mean(), b.mean(), se)
    for stats in (ours, theirs):  # the schedule depends on the data, in both
        assert set(np.unique(stats["rounds"])) >= {1.0, 2.0}
    if agent_id != "ddp_mab":  # cdp: M uploads, M replies; hdp: relays 4 + 1, Q = 2, M
        per_round = {"cdp_mab": 2 * 4, "hdp_mab": 5 + 2 + 6}[agent_id]
        for messages, uploads in ((ref.messages, twin.uploads), (out.messages, s["uploads"])):
            np.testing.assert_array_equal(messages.sum(axis=1), per_round * np.asarray(uploads))
    np.testing.assert_array_equal(out.floats.sum(axis=1), 4 * out.messages.sum(axis=1))


# ------------------------------------------------------------------ privacy
NOISY = [
    ("cdp_mab", {"epsilon": 0.5}),
    ("cdp_mab", {"epsilon": 0.5, "participation": 0.5}),
    ("ddp_mab", {"epsilon": 2.0, "privacy": "per_message"}),
    ("hdp_mab", {"epsilon": 0.1}),
]


def noisy_env_kwargs(agent_id: str, kwargs: dict) -> dict:
    kw = env_kwargs(agent_id, **CONFIGS[agent_id])
    if "participation" in kwargs:
        kw["channels"] = NumpyCDPMAB(**kwargs).channel_spec(make_vec(HOMOG, **kw).config)
    return kw


@pytest.mark.parametrize(("agent_id", "kwargs"), NOISY)
def test_noise_scale_is_the_twins(agent_id, kwargs):
    """eps_msg (N_eff epsilon in paper mode, over ceil(p M) participants), the Laplace scale
    b_r = 1 / (eps_msg n_r) of the twin's LaplaceMechanism and its recorded scale of round 1,
    and the width h(1) of the Laplace part."""
    kw = noisy_env_kwargs(agent_id, kwargs)
    ours = JAX_PORTS[agent_id](**kwargs)
    twin = play_numpy(TWINS[agent_id](**kwargs), 1, kw)
    params = ours.make_params(fj.facts_of(fj.make(HOMOG, **kw)))
    state = ours.init(jax.random.PRNGKey(0), params)
    assert params.eps_msg == twin.eps_msg == params.privacy_epsilon == twin.privacy_epsilon
    if kwargs.get("privacy") != "per_message":
        assert params.eps_msg == kwargs["epsilon"] * twin.n_eff
        assert ours.privacy_epsilon is None  # N_eff * epsilon: known from the params
    record = twin.history[0][0]
    n1 = int(state.n[0])
    assert record.n == n1 and record.r == 1
    scale = LaplaceMechanism(twin.eps_msg, sensitivity=1.0 / n1).scale
    assert noise_scale(params.eps_msg, n1) == scale == record.noise_scale
    np.testing.assert_allclose(np.asarray(state.h), record.h, rtol=1e-6)


def test_the_release_has_the_laplace_spread():
    """Epoch 1's upload with zero rewards (ybar = y_hat = the noise) of CDP-MAB over ceil(p M)
    = 2 participants: the spread of Lap(b_1) over 20,000 draws (mean, sd, mean |x|), and
    independent across arms."""
    agent_id, kwargs = NOISY[1]
    kw = noisy_env_kwargs(agent_id, kwargs)
    ours = JAX_PORTS[agent_id](**kwargs)
    env = fj.make(HOMOG, **kw)
    p = ours.make_params(fj.facts_of(env))
    scale = LaplaceMechanism(p.eps_msg, sensitivity=1.0 / p.tables.s_ceil[0, -1]).scale
    draws = 20_000 // (p.num_agents * p.num_arms) + 1
    x = first_release(ours, env, draws).astype(np.float64) / scale
    m = x.size
    assert abs(x.mean()) < 5 * math.sqrt(2.0 / m)
    assert abs(x.std() / math.sqrt(2.0) - 1.0) < 5 * math.sqrt(5 / (4 * m))
    assert abs(np.abs(x).mean() - 1.0) < 5 / math.sqrt(m)
    pairs = x[..., 0].ravel(), x[..., 1].ravel()
    assert abs(np.corrcoef(*pairs)[0, 1]) < 5 / math.sqrt(pairs[0].size)


def first_release(learner, env, runs: int) -> np.ndarray:
    """The upload of epoch 1 (runs, N, K) when every reward is 0: ``ybar = y_hat`` is the
    Laplace noise alone (S(0) = 0)."""
    init, act = fj.bind(learner, fj.facts_of(env))
    length = int(init(jax.random.PRNGKey(0)).length[0])

    def one(key):
        state = init(key)
        obs, _ = env.reset(key)

        def step(carry, k):
            state, obs = carry
            action, state = act(k, state, obs)
            obs = obs._replace(step=obs.step + 1, pulls=obs.pulls + 1, last_arm=action.arms)
            return (state, obs), action.messages[learner.channel_name]

        keys = jax.random.split(key, length + 1)
        _, (send, payload) = jax.lax.scan(step, (state, obs), keys)
        return send[-1], payload[-1], send[:-1]

    keys = jax.random.split(jax.random.PRNGKey(3), runs)
    last, payload, before = jax.device_get(jax.jit(jax.vmap(one))(keys))
    assert last.all() and not before.any()  # the upload ends epoch 1, and only it
    return payload


def test_no_noise_at_epsilon_inf():
    ours = CDPMAB(epsilon=math.inf)
    env = fj.make(HOMOG, **env_kwargs("cdp_mab", **CONFIGS["cdp_mab"]))
    params = ours.make_params(fj.facts_of(env))
    state = ours.init(jax.random.PRNGKey(0), params)
    assert ours.privacy_epsilon == params.privacy_epsilon == math.inf
    assert noise_scale(params.eps_msg, 5) == 0.0
    assert float(state.h[0]) == 0.0
    assert not first_release(ours, env, 2).any()


# ------------------------------------------------------------ protocol checks
def test_same_key_same_bits():
    env = fj.make(HOMOG, **env_kwargs("cdp_mab", **{**CONFIGS["cdp_mab"], "horizon": 500}))
    same_bits(env, CDPMAB(), [0, 1, 2])


def test_respects_the_light_cone():
    """DDP-MAB on a path of 8: a change of agent 0's rewards from step 15 on reaches agent i
    no earlier than its hop distance later (the GIS flood, one hop per step), and does reach
    others: the first round's aggregate carries it."""
    kw = env_kwargs("ddp_mab", num_agents=8, num_arms=3, horizon=400, means=MEANS[:3],
                    topology="path")  # fmt: skip
    env = fj.make(HOMOG, **kw)
    learner = DDPMAB()
    p = learner.make_params(fj.facts_of(env))
    steps = int(p.tables.s_ceil[0, -1]) * p.num_arms + p.delay + 12
    assert_light_cone(env, learner, j=0, steps=steps, at=15)


def test_act_jits_and_vmaps():
    """``jit(vmap(act))`` over 4 runs: int32 arms, the round-robin of epoch 1 (arm s mod K at
    step s + 1), nobody uploads until the epoch ends, then everybody uploads in a
    communication-only step."""
    learner = HDPMAB(epsilon=0.5)
    sizes = {"sizes": [6, 6], "component_graph": "path"}
    kw = env_kwargs(
        "hdp_mab",
        **{
            **CONFIGS["hdp_mab"],
            "num_agents": 12,
            "num_arms": 2,
            "means": [0.6, 0.4],
            "topology_kwargs": sizes,
        },
    )
    env = fj.make(HOMOG, **kw)
    init, act = fj.bind(learner, fj.facts_of(env))
    keys = jax.random.split(jax.random.PRNGKey(0), 4)
    states = jax.vmap(init)(keys)
    obs, env_states = jax.vmap(env.reset)(keys)
    act, step = jax.jit(jax.vmap(act)), jax.jit(jax.vmap(env.step))
    split = jax.jit(jax.vmap(lambda k: jax.random.split(k)[0]))
    length = int(states.length[0, 0])
    for s in range(length + 1):
        keys = split(keys)
        action, states = act(keys, states, obs)
        arms, send, pull = jax.device_get(
            (action.arms, action.messages["hierarchical"][0], action.pull)
        )
        assert arms.dtype == np.int32 and arms.shape == (4, 12)
        if s < length:
            assert (arms == s % 2).all() and not send.any() and pull.all()
        else:
            assert send.all() and not pull.any()
        obs, env_states, *_ = step(keys, env_states, action)
    assert (np.asarray(states.uploads) == 1).all()
    assert int(env_states.error[:, 0].max()) == 0


@pytest.mark.parametrize("agent_id", PORTS)
def test_declarations_are_the_twins(agent_id):
    config = make_vec(HOMOG, **CONFIGS[agent_id]).config
    for kwargs in ({}, {"epsilon": 2.0, "privacy": "per_message"}, {"epsilon": math.inf}):
        ours, theirs = fj.make_jax_agent(agent_id, **kwargs), make_agent(agent_id, **kwargs)
        assert (ours.agent_id, ours.version) == (theirs.agent_id, theirs.version)
        assert ours.privacy_epsilon == theirs.privacy_epsilon  # None before init in paper mode
        assert ours.channel_spec(config) == theirs.channel_spec(config)
    assert fj.make_jax_agent("cdp_mab", participation=0.4).channel_spec(config) == (
        make_agent("cdp_mab", participation=0.4).channel_spec(config)
    )
    assert fj.make_jax_agent("hdp_mab", aggregation="unweighted").channel_spec(config) == (
        make_agent("hdp_mab", aggregation="unweighted").channel_spec(config)
    )


@pytest.mark.parametrize(
    ("agent_id", "kwargs"),
    [
        ("cdp_mab", {"epsilon": 0.0}),
        ("cdp_mab", {"participation": 0.0}),
        ("cdp_mab", {"participation": 1.5}),
        ("ddp_mab", {"privacy": "central"}),
        ("ddp_mab", {"rounds": 3}),
        ("ddp_mab", {"delta": 0.1}),
        ("hdp_mab", {"aggregation": "median"}),
        ("hdp_mab", {"cost_model": "star"}),
        ("hdp_mab", {"timing": "instant"}),
        ("cdp_mab", {"rounds": 2, "delta": 1.5}),
    ],
)
def test_bad_hyperparameters_raise_the_twins_error(agent_id, kwargs):
    with pytest.raises(ConfigError) as theirs:
        make_agent(agent_id, **kwargs)
    with pytest.raises(ConfigError) as ours:
        fj.make_jax_agent(agent_id, **kwargs)
    assert str(ours.value) == str(theirs.value)


def test_one_delta_per_run_is_refused():
    """A per-run delta needs the run's index, which a JAX learner has not: refused by name;
    one number in a tuple is accepted."""
    with pytest.raises(ConfigError, match=r"^cdp_mab: delta: expected one number on the JAX"):
        CDPMAB(rounds=2, delta=(0.1, 0.2))
    CDPMAB(rounds=2, delta=(0.1,))


@pytest.mark.parametrize(
    ("agent_id", "env_extra"),
    [
        ("cdp_mab", {"channels": {"server": {"kind": "server", "dim": 4, "aggregate": "sum"}}}),
        ("cdp_mab", {"channels": {}}),
        ("cdp_mab", {"horizon": 100}),
        ("ddp_mab", {"channels": {"flood": {"kind": "flood", "dim": 4, "ttl": 1}}}),
        ("ddp_mab", {"channels": {"flood": {"kind": "flood", "dim": 4, "drop_prob": 0.1}}}),
        ("hdp_mab", {"channels": {"hierarchical": {"kind": "hierarchical", "dim": 3}}}),
    ],
)
def test_bad_federations_raise_the_twins_error_in_init(agent_id, env_extra):
    """What the twin's ``reset`` refuses (wrong aggregate, missing channel, a horizon shorter
    than epoch 1 and its round, a ttl below the diameter, drops, a wrong dim), the JAX
    learner's ``make_params`` refuses with the same message, before anything is traced."""
    kw = {**CONFIGS[agent_id], **env_extra}
    with pytest.raises(ConfigError) as theirs:
        venv = make_vec(HOMOG, num_runs=1, **kw)
        make_agent(agent_id).reset(venv.facts, BatchedRNG.for_runs([0], "agents"))
    with pytest.raises(ConfigError) as ours:
        fj.make_jax_agent(agent_id).make_params(fj.facts_of(fj.make(HOMOG, **kw)))
    assert str(ours.value) == str(theirs.value)


def test_a_row_declares_n_eff_epsilon_on_both_backends():
    """The declared guarantee of a result row, N_eff * epsilon in paper mode, is the numpy
    learner's after reset on numpy and the params' on JAX."""
    from fedbandit_env.bench.evaluate import evaluate

    kw = env_kwargs("cdp_mab", **CONFIGS["cdp_mab"])
    rows = [evaluate(HOMOG, "cdp_mab", runs=2, seed=0, env_kwargs=kw, backend=backend)
            for backend in ("numpy", "jax")]  # fmt: skip
    assert rows[0].privacy_epsilon == rows[1].privacy_epsilon == 4.0
