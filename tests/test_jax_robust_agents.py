"""The JAX ports of the Byzantine-robust reference agents (docs/jax.md) against their numpy twins:
``byzres_ucb`` (agents/jax/byzres_ucb.py, docs/byzres-ucb.md), ``fed_mom_ucb``
(agents/jax/fed_mom_ucb.py, docs/fed-mom-ucb.md) and ``robust_gosine``
(agents/jax/robust_gosine.py, docs/robust-gosine.md).

Every check is on a clean environment (the clean
equivalents of the presets: the homogeneous family, a ``server`` channel built from the
learner's ``channel_spec``). Deterministic ports (ByzRes-UCB with lowest-id ties, Fed-MoM-UCB)
follow the twin step by step on the numpy environment's observations; every port agrees with
its twin in distribution over 200 runs (the data-dependent schedules too: Fed-MoM-UCB's phase
ends, robust GosInE's blocks), gives the same bits for the same key, respects the light cone,
jits and vmaps, and declares and refuses what the twin does.

The JAX gossip channel takes the exclusion mask of robust GosInE's rule ``"2021"`` as the numpy
channel does (:meth:`fedbandit_env.network.gossip.GossipChannel.allowed_neighbours`); the first
robust GosInE test checks the two channels' pulls against each other.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402

import fedbandit_env.jax as fj  # noqa: E402
from agents.byzres_fusion import fuse  # noqa: E402
from agents.byzres_ucb import ByzResUCB as NumpyByzResUCB  # noqa: E402
from agents.fed_mom_ucb import FedMoMUCB as NumpyFedMoMUCB  # noqa: E402
from agents.fed_mom_ucb import s_of  # noqa: E402
from agents.jax.byzres_ucb import ByzResUCB  # noqa: E402
from agents.jax.fed_mom_ucb import FedMoMUCB, first_stopping_phase  # noqa: E402
from agents.jax.robust_gosine import RobustGosInE  # noqa: E402
from agents.robust_gosine import RobustGosInE as NumpyRobustGosInE  # noqa: E402
from fedbandit_env.bench.evaluate import env_kwargs_for, evaluate  # noqa: E402
from fedbandit_env.errors import ActionError, ConfigError  # noqa: E402
from fedbandit_env.jax.channels.neighbors import NeighborsDelivery  # noqa: E402
from fedbandit_env.jax.channels.server import ServerDelivery  # noqa: E402
from fedbandit_env.jax.env import replace_env  # noqa: E402
from fedbandit_env.jax.rollout import run_keys  # noqa: E402
from fedbandit_env.registration import make_vec  # noqa: E402
from fedbandit_env.seeding import BatchedRNG  # noqa: E402

HOMOG = "FedBandit/Homogeneous-v0"
RUNS = 200
BYZ = {"num_agents": 5, "num_arms": 4, "horizon": 300, "topology": "complete"}
MOM = {"num_agents": 6, "num_arms": 4, "horizon": 400, "reward": {"kind": "gaussian", "sigma": 0.5}}
MOM_AGENT = {"clients": "environment", "lam": 0.1, "mapping": "geometric"}  # B = 2, G = 3
GOS = {"num_agents": 5, "num_arms": 10, "horizon": 500, "topology": "complete"}


def with_channels(policy, env_id: str, **kwargs) -> dict:
    """``kwargs`` plus the twin's channels."""
    return env_kwargs_for(policy, env_id, kwargs)


def within_3se(a: np.ndarray, b: np.ndarray, what: str) -> None:
    a, b = np.asarray(a, float), np.asarray(b, float)
    se = math.sqrt(a.var(ddof=1) / len(a) + b.var(ddof=1) / len(b))
    assert abs(a.mean() - b.mean()) <= 3 * se + 1e-9, (
        f"{what}: numpy {a.mean():.3f} vs JAX {b.mean():.3f}, 3 se = {3 * se:.3f}"
    )


def agree(env_id, twin, learner, env_kwargs, make=fj.make, exact_messages=True):
    """The twin (a policy instance, its final state kept) and the JAX port on the same
    environment and ``RUNS`` seeds: mean final network regret within 3 se; message and float
    counts per run exactly equal, or their means within 3 se. Returns (numpy, JAX) results."""
    ref = evaluate(env_id, twin, runs=RUNS, seed=0, env_kwargs=env_kwargs)
    out = fj.rollout(make(env_id, **ref.env_kwargs), learner, list(range(RUNS)))
    within_3se(ref.final_regret_network, out.regret_by_agent[:, -1].sum(axis=1), "regret")
    for x, y in ((ref.messages, out.messages), (ref.floats, out.floats)):
        if exact_messages:
            np.testing.assert_array_equal(np.sort(x.sum(1)), np.sort(y.sum(1)))
        else:
            within_3se(x.sum(1), y.sum(1), "messages")
    return ref, out


class Stepper:
    """``act`` and ``env.step`` of one (environment, learner) under jit(vmap), compiled once
    and reused for the same-bits, light-cone and jit/vmap checks (the trajectory of
    :func:`tests.jax_tools.trajectory`, with its perturbation of agent j's reward parameters,
    without a compile per call)."""

    def __init__(self, env, learner):
        self.env = env
        init, act = fj.bind(learner, fj.facts_of(env))

        def start(key):
            k_env, k_agent, key = jax.random.split(key, 3)
            obs, state = env.reset(k_env)
            return key, obs, state, init(k_agent)

        def advance(key, obs, state, lstate):
            key, k_act, k_step = jax.random.split(key, 3)
            action, lstate = act(k_act, lstate, obs)
            obs, state, *_ = env.step(k_step, state, action)
            sent = {n: jnp.where(m[0][:, None], m[1], 0.0) for n, m in action.messages.items()}
            pull = jnp.asarray(action.pull, bool)
            return (key, obs, state, lstate), (action.arms, pull, sent)

        self.start, self.advance = jax.jit(jax.vmap(start)), jax.jit(jax.vmap(advance))

    def run(self, seeds, steps: int, perturb_agent: int | None = None, at: int = 0):
        """(arms (T, B, N), pull (T, B), sent payloads {channel: (T, B, N, dim)}, the final
        learner states); with ``perturb_agent`` its means are flipped and its arm 0 raised by
        3 before step ``at`` (the light cone's probe, as :func:`tests.jax_tools.trajectory`)."""
        carry = self.start(run_keys(list(seeds)))
        arms, pulls, sent = [], [], []
        for t in range(1, steps + 1):
            if perturb_agent is not None and t == at:
                key, obs, state, lstate = carry
                j = perturb_agent
                means = state.means.at[:, j, :].set(1.0 - state.means[:, j, :])
                carry = (key, obs, replace_env(state, means=means.at[:, j, 0].add(3.0)), lstate)
            carry, (a, p, m) = self.advance(*carry)
            assert a.dtype == jnp.int32 and a.shape == (len(seeds), self.env.num_agents)
            arms.append(np.asarray(a))
            pulls.append(np.asarray(p))
            sent.append({n: np.asarray(v) for n, v in m.items()})
        payloads = {n: np.stack([x[n] for x in sent]) for n in sent[0]}
        return np.stack(arms), np.stack(pulls), payloads, carry[3]


def same_bits_and_light_cone(stepper, j: int, steps: int, at: int, max_hops=None,
                             seeds=(0, 1, 2, 3)):  # fmt: skip
    """Same key, same bits (two runs of the compiled step); agent j's change at step ``at``
    reaches agent i no earlier than its hop distance later (``max_hops`` overrides it, 1 for a
    server's one-step broadcast) and reaches some other agent (the check of
    :func:`tests.jax_tools.assert_light_cone`). Returns the unperturbed run."""
    base = stepper.run(seeds, steps)
    again = stepper.run(seeds, steps)
    for a, b in zip(jax.tree_util.tree_leaves(base), jax.tree_util.tree_leaves(again),
                    strict=True):  # fmt: skip
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    moved = stepper.run(seeds, steps, perturb_agent=j, at=at)
    dist = stepper.env.config.topology.hop_distances
    seen_elsewhere = False
    for i in range(stepper.env.num_agents):
        diff = (base[0][:, :, i] != moved[0][:, :, i]).any(axis=1)
        for name, p in base[2].items():
            diff |= (p[:, :, i] != moved[2][name][:, :, i]).any(axis=(1, 2))
        changed = np.nonzero(diff)[0]
        if changed.size == 0:
            continue
        hops = dist[i, j] if max_hops is None else (0 if i == j else max_hops)
        assert changed[0] + 1 > at + hops, (i, j, changed[0] + 1, at, hops)
        seen_elsewhere |= i != j
    assert seen_elsewhere, "no other agent saw the change (vacuous)"
    return base


# ===================================================================== ByzRes-UCB
def byz_obs(obs, m: int) -> fj.Observation:
    """Run 0 of a numpy observation as the JAX environment's, for ByzRes-UCB's channel."""
    deliveries = {}
    if "neighbors" in obs.deliveries:
        d = obs.deliveries["neighbors"]
        deliveries["neighbors"] = NeighborsDelivery(
            jnp.asarray(d.senders, jnp.int32), jnp.asarray(d.mask[0]),
            jnp.asarray(sent_rows(d.senders, d.mask[0], d.payload[0]), jnp.float32),
        )  # fmt: skip
    return _obs(obs, deliveries)


def sent_rows(senders, mask, payload) -> np.ndarray:
    """(N, dim) the rows a padded delivery (N, D, dim) was gathered from: each sender's
    payload, read at a slot that heard it (zeros for an agent nobody heard)."""
    sent = np.zeros((senders.shape[0], payload.shape[-1]))
    rows, slots = np.nonzero(mask)
    sent[senders[rows, slots]] = payload[rows, slots]
    return sent


def _obs(obs, deliveries) -> fj.Observation:
    return fj.Observation(
        step=jnp.int32(obs.step), last_arm=jnp.asarray(obs.last_arm[0], jnp.int32),
        last_reward=jnp.asarray(obs.last_reward[0], jnp.float32), deliveries=deliveries,
        context=None, phase=jnp.int32(obs.phase[0]), pulls=jnp.int32(obs.pulls[0]),
    )  # fmt: skip


def start(learner, facts):
    """The learner's state at reset on a federation (its params, or its facts, checked
    first)."""
    init, _ = fj.bind(learner, facts)
    return init(jax.random.PRNGKey(0))


def follow(env_id, env_kwargs, ours, theirs, convert, compare, steps: int, seed: int = 3):
    """The twin plays the numpy environment; the port acts on the same observations and must
    pick the same arms, pull flags and messages and keep the same state (``compare``)."""
    venv = make_vec(env_id, num_runs=1, **env_kwargs)
    obs, _ = venv.reset(seed=seed)
    theirs.reset(venv.facts, BatchedRNG.for_runs([seed], "agents"))
    init, act_one = fj.bind(ours, fj.facts_of(fj.make(env_id, **env_kwargs)))
    state = init(jax.random.PRNGKey(0))
    act = jax.jit(act_one)
    for _ in range(steps):
        if venv.engine.truncated:
            break
        action = theirs.act(obs)
        mine, state = act(jax.random.PRNGKey(obs.step), state, convert(obs))
        np.testing.assert_array_equal(np.asarray(mine.arms), action.arms[0], f"step {obs.step}")
        pull = True if action.pull is None else bool(np.asarray(action.pull).reshape(-1)[0])
        assert bool(mine.pull) == pull, obs.step
        for name, message in action.messages.items():
            send = np.asarray(message[0][0])
            np.testing.assert_array_equal(np.asarray(mine.messages[name][0]), send)
            np.testing.assert_allclose(np.asarray(mine.messages[name][1])[send],
                                       message[1][0][send], rtol=2e-6, atol=1e-6)  # fmt: skip
        for name, message in mine.messages.items():  # a message the twin does not send
            if name not in action.messages:
                assert not np.asarray(message[0]).any(), (name, obs.step)
        compare(state, theirs, obs.step)
        obs, *_ = venv.step(action.arms, action.messages, action.pull)


def byz_compare(state, twin, step):
    st = twin.state
    np.testing.assert_array_equal(np.asarray(state.n), st.n[0], f"n at step {step}")
    np.testing.assert_allclose(np.asarray(state.s.total - state.s.carry), st.s[0], rtol=2e-6,
                               atol=1e-5)  # fmt: skip
    if st.pulls >= twin.M:
        np.testing.assert_allclose(np.asarray(state.z), st.z[0], rtol=2e-6, atol=1e-6)
        np.testing.assert_allclose(np.asarray(state.g), st.g[0], rtol=2e-6)
        np.testing.assert_array_equal(np.asarray(state.accepted), st.accepted[0])


@pytest.mark.parametrize(
    ("env_kwargs", "agent_kwargs"),
    [
        ({**BYZ, "horizon": 150}, {"tiebreak": "lowest"}),
        ({**BYZ, "num_agents": 6, "topology": "star", "horizon": 120},
         {"tiebreak": "lowest", "sync": "comm_step", "f": 2, "kappa": 2.0}),
        ({**BYZ, "horizon": 100}, {"tiebreak": "lowest", "fusion": "mean"}),
    ],
)  # fmt: skip
def test_byzres_follows_the_twin_step_by_step(env_kwargs, agent_kwargs):
    """Lowest-id ties (the code's): on the numpy environment's observations the port keeps
    the twin's n, s, z, g and |A| (the filter, the trim, the fallback, Q) and picks the twin's
    arm, pull flag and message at every step (the initialization, both syncs, the plain
    mean)."""
    theirs = NumpyByzResUCB(**agent_kwargs)
    kwargs = with_channels(theirs, HOMOG, **env_kwargs)
    follow(HOMOG, kwargs, ByzResUCB(**agent_kwargs), theirs, lambda o: byz_obs(o, 4),
           byz_compare, 2 * env_kwargs["horizon"])  # fmt: skip


def test_byzres_fusion_agrees_across_engines():
    """Steps 1-3 (agents/byzres_fusion.py, one function) on random neighbour tables (filter,
    value ties, fewer than 2f + 1 accepted, unheard slots): float32 JAX on one run against
    float64 numpy on a batch of one, z, g and |A| to float32 rounding."""
    rng = np.random.default_rng(0)
    n_agents, d, m = 40, 6, 5
    xbar = rng.integers(0, 4, (n_agents, m)) / 4.0  # quarter steps: many value ties
    n = rng.integers(1, 30, (n_agents, m)).astype(float)
    nb_mean = rng.integers(0, 4, (n_agents, d, m)) / 4.0
    nb_count = rng.integers(0, 45, (n_agents, d, m)).astype(float)
    heard = rng.random((n_agents, d)) < 0.8
    for kappa, f, filtered in ((1.5, 1, True), (1.0, 2, True), (2.5, 0, True), (1.5, 0, False)):
        ours = fuse(jnp.asarray(xbar, jnp.float32), jnp.asarray(n, jnp.int32),
                    jnp.asarray(nb_mean, jnp.float32), jnp.asarray(nb_count, jnp.float32),
                    jnp.asarray(heard), kappa, f, filtered)  # fmt: skip
        theirs = fuse(xbar[None], n[None], nb_mean[None], nb_count[None], heard[None], kappa,
                         f, filtered)  # fmt: skip
        for a, b in zip(ours, theirs, strict=True):
            np.testing.assert_allclose(np.asarray(a, np.float64), b[0], rtol=2e-6)


def test_byzres_agrees_with_the_twin():
    """Uniform ties and the code's timing (a communication step before every pull), N = 5 on
    the complete graph: regret within 3 se over 200 runs, exact message and float counts
    (every agent sends 2M floats to 4 neighbours in each communication step), twice the engine
    steps after the initialization."""
    agent = {"sync": "comm_step"}
    ref, out = agree(HOMOG, NumpyByzResUCB(**agent), ByzResUCB(**agent), BYZ)
    rounds = BYZ["horizon"] - BYZ["num_arms"]
    assert (out.messages.sum(1) == rounds * 20).all()
    assert (out.floats.sum(1) == rounds * 20 * 8).all()
    assert (out.engine_steps == BYZ["horizon"] + rounds).all()


def test_byzres_same_bits_light_cone_jit_and_vmap():
    """act under jit(vmap), the code's timing: the initialization's arm k at step k + 1, then a
    communication step before every pull; same key, same bits; on a ring with f = 0 (every
    neighbour fused) a change of agent 0's rewards reaches agent i no earlier than i hops
    later, and does reach another agent."""
    ring = {**BYZ, "num_agents": 6, "topology": "ring", "horizon": 60}
    env = fj.make(HOMOG, **with_channels(NumpyByzResUCB(), HOMOG, **ring))
    stepper = Stepper(env, ByzResUCB(f=0, sync="comm_step"))
    arms, pulls, sent, states = same_bits_and_light_cone(stepper, j=0, steps=60, at=10)
    for k in range(4):
        assert (arms[k] == k).all()
    np.testing.assert_array_equal(pulls[:10, 0], [1, 1, 1, 1, 0, 1, 0, 1, 0, 1])
    # 4 init pulls and 27 rounds folded (the last step's pull is folded by the next act)
    assert (np.asarray(states.n).sum(axis=2) == 4 + 27).all()
    assert not sent["neighbors"][:4].any() and sent["neighbors"][4].any()


def test_byzres_declarations_and_refusals_are_the_twins():
    config = make_vec(HOMOG, **BYZ).config
    for kwargs in ({}, {"fusion": "none"}, {"sync": "comm_step", "f": 3}):
        ours, theirs = ByzResUCB(**kwargs), NumpyByzResUCB(**kwargs)
        assert (ours.agent_id, ours.version) == (theirs.agent_id, theirs.version)
        assert ours.privacy_epsilon == theirs.privacy_epsilon is None
        assert ours.channel_spec(config) == theirs.channel_spec(config)
    assert fj.make_jax_agent("byzres_ucb", kappa=2.0).config.kappa == 2.0
    for kwargs, field in (({"kappa": 0.5}, "kappa"), ({"f": -1}, "f"),
                          ({"tiebreak": "high"}, "tiebreak"), ({"sync": "x"}, "sync"),
                          ({"fusion": "median"}, "fusion")):  # fmt: skip
        with pytest.raises(ConfigError, match=f"byzres_ucb: {field}"):
            ByzResUCB(**kwargs)
    hetero = fj.make("FedBandit/Heterogeneous-v0", **with_channels(NumpyByzResUCB(),
                     "FedBandit/Heterogeneous-v0", **BYZ))  # fmt: skip
    with pytest.raises(ConfigError, match="byzres_ucb: family"):
        start(ByzResUCB(), fj.facts_of(hetero))
    reduced = {"neighbors": {"kind": "neighbors", "dim": 8, "reduce": "median"}}
    with pytest.raises(ConfigError, match="byzres_ucb: channels.neighbors.reduce"):
        start(ByzResUCB(), fj.facts_of(fj.make(HOMOG, **BYZ, channels=reduced)))
    short = fj.make(HOMOG, **with_channels(NumpyByzResUCB(), HOMOG, **{**BYZ, "horizon": 4}))
    with pytest.raises(ConfigError, match="byzres_ucb: horizon"):
        start(ByzResUCB(), fj.facts_of(short))
    with pytest.raises(ConfigError, match="byzres_ucb: channels.neighbors"):
        start(ByzResUCB(), fj.facts_of(fj.make(HOMOG, **BYZ, channels={})))


# ===================================================================== Fed-MoM-UCB
def mom_obs(obs, m: int) -> fj.Observation:
    d = obs.deliveries["server"]
    delivery = ServerDelivery(jnp.asarray(d.aggregate[0], jnp.float32), jnp.int32(d.count[0]),
                              jnp.asarray(d.participating[0]), jnp.zeros((), bool))  # fmt: skip
    return _obs(obs, {"server": delivery})


def mom_compare(state, twin, step):
    np.testing.assert_array_equal(np.asarray(state.counts), twin.counts[0], f"step {step}")
    np.testing.assert_array_equal(np.asarray(state.active), twin.active[0], f"step {step}")
    for name in ("p", "pos", "L", "committed", "rounds", "awaiting"):
        assert int(getattr(state, name)) == int(getattr(twin, name)[0]), (name, step)
    if twin.committed[0]:
        assert int(state.commit_arm) == int(twin.commit_arm[0])
    if twin.rounds[0] > 0:
        np.testing.assert_allclose(float(state.E), twin.E[0], rtol=1e-6)


@pytest.mark.parametrize(
    "agent_kwargs",
    [MOM_AGENT, {**MOM_AGENT, "schedule": "doubling", "epsilon": 0.4},
     {"clients": "environment", "beta": 0.6}],
)  # fmt: skip
def test_fed_mom_follows_the_twin_step_by_step(agent_kwargs):
    """No randomness in the algorithm: on the numpy environment's observations the port keeps
    the twin's counts, active set, phase, position, length, width, rounds and commitment and
    picks the twin's arm, pull flag and upload at every step (both schedules; a beta large
    enough to commit early)."""
    theirs = NumpyFedMoMUCB(**agent_kwargs)
    kwargs = with_channels(theirs, HOMOG, **MOM)
    follow(HOMOG, kwargs, FedMoMUCB(**agent_kwargs), theirs, lambda o: mom_obs(o, 4),
           mom_compare, 2 * MOM["horizon"])  # fmt: skip


def test_fed_mom_agrees_with_the_twin_and_its_phase_ends():
    """Median of means over G = 3 groups of B = 2 clients, 200 runs: regret within 3 se; the
    phase ends (uploads) depend on the data, so the message counts' means within 3 se, and
    every phase end is N uploads and N broadcast deliveries (``rounds`` of the final state);
    the rounds per run and the runs that committed agree with the twin's within 3 se."""
    twin = NumpyFedMoMUCB(**MOM_AGENT)
    ref, out = agree(HOMOG, twin, FedMoMUCB(**MOM_AGENT), MOM, exact_messages=False)
    n = MOM["num_agents"]
    rounds = out.learner_state.rounds
    np.testing.assert_array_equal(out.messages.sum(1), rounds * 2 * n)
    np.testing.assert_array_equal(out.engine_steps, MOM["horizon"] + rounds)
    within_3se(twin.rounds, rounds, "phase ends per run")
    within_3se(twin.committed, out.learner_state.committed, "committed runs")
    assert rounds.std() > 0  # the schedule does depend on the data


def test_fed_mom_stopping_phase_is_the_twins():
    """``p_star``, the first phase with E(s(p)) <= beta / 4, is the twin's float64 test."""
    for kwargs in ({}, {"schedule": "doubling"}, {"beta": 0.6}, {"sigma_c": 0.2},
                   {"lam": 0.1, "mapping": "geometric", "epsilon": 0.01, "beta": 0.11},
                   {"epsilon": 0.0, "sigma_c": 0.0}):  # fmt: skip
        twin = NumpyFedMoMUCB(**{"clients": "environment", **kwargs})
        cfg = twin.config
        k = twin.constants(10, 5000, 89)
        p = first_stopping_phase(k, cfg.sigma, cfg.sigma_c, k.beta, cfg.schedule)
        last = 20_000 if cfg.schedule == "linear" else 60
        width = [k.width(s_of(cfg.schedule, q), cfg.sigma, cfg.sigma_c) for q in range(1, last)]
        meets = [q for q, w in enumerate(width, 1) if w <= k.beta / 4]
        assert p == (meets[0] if meets else 2**31 - 1), kwargs


def test_fed_mom_same_bits_light_cone_jit_and_vmap():
    """act under jit(vmap): phase 1 pulls each arm L = 10 times in ascending id, then uploads
    in a communication step; same key, same bits; a change of client 0's rewards reaches the
    other client only through the server's broadcast, one step after an upload
    (``max_hops=1``), and does (two clients in one group, B = 2: client 0's inflated arm 0
    moves U and the elimination)."""
    pair = {**MOM, "num_agents": 2}
    env = fj.make(HOMOG, **with_channels(NumpyFedMoMUCB(**MOM_AGENT), HOMOG, **pair))
    stepper = Stepper(env, FedMoMUCB(**MOM_AGENT))
    arms, pulls, sent, states = same_bits_and_light_cone(stepper, j=0, steps=60, at=5,
                                                         max_hops=1)  # fmt: skip
    np.testing.assert_array_equal(arms[:40, 0, 0], np.repeat(np.arange(4), 10))
    assert pulls[:40].all() and not pulls[40].any() and pulls[41].all()
    assert sent["server"][40].any() and not sent["server"][41:].any()
    assert (np.asarray(states.rounds) >= 1).all() and (np.asarray(states.p) >= 2).all()


def test_fed_mom_declarations_and_refusals_are_the_twins():
    config = make_vec(HOMOG, **MOM).config
    for kwargs in ({}, MOM_AGENT, {"lam": 0.3, "mapping": "polynomial"}):
        ours, theirs = FedMoMUCB(**kwargs), NumpyFedMoMUCB(**kwargs)
        assert (ours.agent_id, ours.version) == (theirs.agent_id, theirs.version)
        assert ours.privacy_epsilon == theirs.privacy_epsilon is None
        assert ours.channel_spec(config) == theirs.channel_spec(config)
    for kwargs, field in (({"lam": 0.5}, "lam"), ({"mapping": "x"}, "mapping"),
                          ({"delta": 1.0}, "delta"), ({"beta": 0.0}, "beta"),
                          ({"sigma": 0.0}, "sigma"), ({"clients": "all"}, "clients"),
                          ({"lam": 0.0, "mapping": "harmonic"}, "lam")):  # fmt: skip
        with pytest.raises(ConfigError, match=f"fed_mom_ucb: {field}"):
            FedMoMUCB(**kwargs)
    derived = FedMoMUCB()  # clients="derived": N must be the derived M
    m = derived.constants(4, 400, 8).M  # clean: lam = 0 / 8, so M does not depend on N
    with pytest.raises(ConfigError, match=f"fed_mom_ucb: num_agents: expected M = {m}"):
        start(derived, fj.facts_of(fj.make(HOMOG, **with_channels(derived, HOMOG, **MOM))))
    right = with_channels(derived, HOMOG, **{**MOM, "num_agents": m})
    assert start(derived, fj.facts_of(fj.make(HOMOG, **right))).counts.shape == (m, 4)
    spec = with_channels(NumpyFedMoMUCB(**MOM_AGENT), HOMOG, **MOM)["channels"]["server"]
    for change, field in (({"group_size": 3}, "server.group_size"),
                          ({"grouping": "random"}, "server.grouping"),
                          ({"participation": 0.5}, "server: expected participation"),
                          ({"drop_prob": 0.1}, "server: expected participation")):  # fmt: skip
        env = fj.make(HOMOG, **MOM, channels={"server": {**spec, **change}})
        with pytest.raises(ConfigError, match=f"fed_mom_ucb: channels.{field}"):
            start(FedMoMUCB(**MOM_AGENT), fj.facts_of(env))
    with pytest.raises(ConfigError, match="client_spread"):  # the Gaussian client means
        fj.make("FedBandit/Heterogeneous-v0", means=[0.4, 0.5, 0.9], client_spread=0.01)


# =============================================================== robust GosInE
def test_the_gossip_pull_with_an_exclusion_mask_is_the_numpy_channels():
    """The JAX gossip channel's pull with a mask that excludes nobody is its pull without one
    (the same partners, replies and charges); with a mask, its partners are the numpy channel's
    ``allowed_neighbours`` for the same uniforms, and no excluded neighbour is pulled."""
    n = 7
    ring = {**GOS, "topology": "ring", "num_agents": n}
    env = fj.make(HOMOG, **with_channels(NumpyRobustGosInE(), HOMOG, **ring))
    channel, twin = env.channels["recommend"], env.twins["recommend"]
    assert channel.takes_exclude
    twin._agents = np.arange(n)  # what the numpy channel's reset sets
    send = jnp.asarray([True, False, True, True, False, True, True])
    payload = jnp.arange(n, dtype=jnp.float32)[:, None]

    def both(key, mask):
        plain = channel.transmit(key, (), send, payload)
        open_mask = channel.transmit(key, (), send, payload, jnp.zeros((n, n), bool))
        return plain, open_mask, channel.transmit(key, (), send, payload, mask)

    both = jax.jit(both)
    for s in range(20):
        key = jax.random.PRNGKey(s)
        mask = jax.random.bernoulli(jax.random.PRNGKey(100 + s), 0.4, (n, n))
        plain, open_mask, masked = both(key, mask)
        for x, y in zip(jax.tree_util.tree_leaves(plain), jax.tree_util.tree_leaves(open_mask),
                        strict=True):  # fmt: skip
            np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
        u = np.asarray(jax.random.uniform(jax.random.split(key)[0], (n,), jnp.float32))
        expected = twin.allowed_neighbours(u[None].astype(np.float64), np.asarray(mask)[None])
        partner = np.asarray(masked[0].partner)
        np.testing.assert_array_equal(partner, expected[0])
        assert all(h < 0 or not bool(mask[i, h]) for i, h in enumerate(partner))


def gos_compare_none(env_kwargs, agent_kwargs):
    twin = NumpyRobustGosInE(**agent_kwargs)
    return agree(HOMOG, twin, RobustGosInE(**agent_kwargs), env_kwargs)


def test_robust_gosine_rule_none_agrees_with_the_twin():
    """Rule ``"none"`` (GosInE itself) on the complete graph, N = 5, K = 10, beta = 3: regret
    within 3 se over 200 runs, and exact counts: every agent's pull is answered at each of the
    phase ends before the horizon (j^3 <= 500: 7 phase ends, 5 messages of 1 float each)."""
    ref, out = gos_compare_none(GOS, {"rule": "none"})
    assert (out.messages.sum(1) == 7 * 5).all() and (out.engine_steps == 500 + 7).all()


def test_robust_gosine_rule_2021_agrees_with_the_twin_and_its_blocks():
    """Rule ``"2021"`` with beta = 2 (phase ends at pulls 1, 4, 9, ..., 484) on the test
    JAX environment, whose gossip channel applies the exclusion mask: regret within 3 se over 200 runs; blocking
    depends on the data (honest agents block each other on a clean environment): the
    blocking events per run, the blocks still running at the end and the answered pulls
    (messages) agree with the twin's within 3 se."""
    agent = {"beta": 2, "eta": 1.5}
    twin = NumpyRobustGosInE(**agent)
    ref, out = agree(HOMOG, twin, RobustGosInE(**agent), GOS, exact_messages=False)
    state = out.learner_state
    jax_blocks = state.blocks.sum(axis=1)
    running = (state.blocked_until > (state.phase - 1)[:, None, None]).sum(axis=(1, 2))
    twin_running = (twin.blocked_until > twin.phase - 1).sum(axis=(1, 2))
    within_3se(twin_running, running, "blocks running at the end")
    assert jax_blocks.mean() > 5 and running.mean() > 0.5  # blocking happens: not vacuous
    # the twin counts its blocking events over all runs: its per-run mean, with the port's
    # spread standing in for the twin's
    se = jax_blocks.std(ddof=1) * math.sqrt(2 / RUNS)
    assert abs(twin.blocks / RUNS - jax_blocks.mean()) <= 3 * se, (twin.blocks / RUNS, se)
    assert (out.messages.sum(1) < 22 * 5).any()  # some pulls found every neighbour blocked...
    assert (out.engine_steps == 500 + 22).all()  # ...but every phase end is a step


def test_the_exclusion_mask_is_checked_by_name():
    """Rule ``"2021"`` sends (send, payload, exclude) and rule ``"none"`` (send, payload); a
    mask of the wrong shape, or on a channel that takes none, is refused by name."""
    env = fj.make(HOMOG, **with_channels(NumpyRobustGosInE(), HOMOG, **{**GOS, "horizon": 30}))
    obs = jax.eval_shape(env.reset, jax.random.PRNGKey(0))[0]
    facts, key = fj.facts_of(env), jax.random.PRNGKey(1)
    for rule, size in (("none", 2), ("2021", 3)):  # traced only: the message's structure
        init, act = fj.bind(RobustGosInE(rule=rule), facts)
        state = init(key)
        action = jax.eval_shape(act, key, state, obs)[0]
        assert len(action.messages["recommend"]) == size
    n = env.num_agents
    _, state = env.reset(jax.random.PRNGKey(0))
    good = (jnp.ones(n, bool), jnp.zeros((n, 1), jnp.float32))
    for bad, match in (((*good, jnp.zeros((n, n + 1), bool)), r"shape \(5, 5\)"),):
        action = fj.Action(jnp.zeros(n, jnp.int32), {"recommend": bad})
        with pytest.raises(ActionError, match=f"messages.recommend.exclude.*{match}"):
            env.step(jax.random.PRNGKey(1), state, action)


def test_robust_gosine_same_bits_light_cone_jit_and_vmap():
    """Rule 2021, beta = 2, act under jit(vmap): the phase ends after
    pulls 1, 4 and 9 are communication steps in which every agent offers its arm; same key,
    same bits; on a ring of 6 a change of agent 0's rewards reaches agent i no earlier than i
    hops later (recommendations travel one hop per phase end), and does reach another."""
    ring = {**GOS, "num_agents": 6, "num_arms": 12, "topology": "ring", "horizon": 80}
    env = fj.make(HOMOG, **with_channels(NumpyRobustGosInE(), HOMOG, **ring))
    stepper = Stepper(env, RobustGosInE(beta=2))
    arms, pulls, sent, states = same_bits_and_light_cone(stepper, j=0, steps=70, at=3)
    np.testing.assert_array_equal(np.flatnonzero(~pulls[:13, 0]), [1, 5, 11])
    assert (np.asarray(states.phase) == 8).all()  # 7 phase ends (pull 49) in 70 steps


def test_robust_gosine_declarations_and_refusals_are_the_twins():
    config = make_vec(HOMOG, **GOS).config
    for kwargs in ({}, {"rule": "none"}, {"eta": 3.0, "sticky_agents": 3}):
        ours, theirs = RobustGosInE(**kwargs), NumpyRobustGosInE(**kwargs)
        assert (ours.agent_id, ours.version) == (theirs.agent_id, theirs.version)
        assert ours.privacy_epsilon == theirs.privacy_epsilon is None
        assert ours.channel_spec(config) == theirs.channel_spec(config)
    for kwargs, field in (({"alpha": 0.0}, "alpha"), ({"beta": 1}, "beta"),
                          ({"rule": "2022"}, "rule"), ({"eta": 1.0}, "eta"),
                          ({"sticky_agents": 0}, "sticky_agents")):  # fmt: skip
        with pytest.raises(ConfigError, match=f"robust_gosine: {field}"):
            RobustGosInE(**kwargs)
    env = fj.make(HOMOG, **with_channels(NumpyRobustGosInE(), HOMOG, **GOS))
    with pytest.raises(ConfigError, match="robust_gosine: sticky_agents"):
        start(RobustGosInE(sticky_agents=6), fj.facts_of(env))
    few = fj.make(HOMOG, **with_channels(NumpyRobustGosInE(), HOMOG, **{**GOS, "num_arms": 2}))
    with pytest.raises(ConfigError, match="robust_gosine: num_arms"):
        start(RobustGosInE(), fj.facts_of(few))
    with pytest.raises(ConfigError, match="robust_gosine: channels.recommend"):
        start(RobustGosInE(), fj.facts_of(fj.make(HOMOG, **GOS, channels={})))
    params = RobustGosInE(sticky_agents=2).make_params(fj.facts_of(env))
    np.testing.assert_array_equal(params.sticky.sum(axis=1), 5)  # ceil(10 / 2) arms each


@pytest.mark.slow
def test_byzres_notes_come_from_its_params_on_jax():
    """A user f below the environment's declared bound is noted on the JAX row too: the note is
    made by the pure params function both engines call, not read from a numpy learner."""
    from fedbandit_env.bench.evaluate import evaluate

    kw = {"num_agents": 8, "num_arms": 4, "horizon": 30, "topology": "complete",
          "adversary": {"num_byzantine": 2, "attack": "demote_best"}}  # fmt: skip
    env = "FedBandit/Homogeneous-v0"
    low = evaluate(env, "byzres_ucb", runs=1, env_kwargs=kw, agent_kwargs={"f": 1}, backend="jax")
    assert low.notes == ("f = 1 < 2 Byzantine",)
    assert evaluate(env, "byzres_ucb", runs=1, env_kwargs=kw, backend="jax").notes == ()
    channels = {"neighbors": {"kind": "neighbors", "dim": 8}}
    facts = fj.facts_of(fj.make(env, **kw, channels=channels))
    params = fj.make_jax_agent("byzres_ucb").make_params(facts)
    assert params.f == 2 and params.notes == ()
