"""The JAX twin of the adversary (fedbandit_env/jax/adversary.py; docs/adversary.md, docs/jax.md):
agreement in distribution with the numpy engine under Byzantine and crashed agents, the payload
replacement step by step against the numpy engine, crashed agents' silence in the ledger, the
placements' laws, same key same bits, jit/vmap, and the refusals."""

from __future__ import annotations

import math

import numpy as np
import pytest

jax = pytest.importorskip("jax")

import jax.numpy as jnp  # noqa: E402

import fedbandit_env  # noqa: E402
import fedbandit_env.jax as fj  # noqa: E402
from fedbandit_env.adversary import Attack, attacks  # noqa: E402
from fedbandit_env.bench.evaluate import evaluate  # noqa: E402
from fedbandit_env.errors import ConfigError  # noqa: E402
from fedbandit_env.jax.adversary import PER_RECEIVER  # noqa: E402
from fedbandit_env.jax.env import AdversaryEnvState  # noqa: E402
from fedbandit_env.jax.rollout import rollout_program, run_keys  # noqa: E402
from fedbandit_env.jax.types import Action, EnvState  # noqa: E402
from tests.jax_tools import agreement  # noqa: E402

HOMOGENEOUS = "FedBandit/Homogeneous-v0"
HETEROGENEOUS = "FedBandit/Heterogeneous-v0"
MEANS = [0.7, 0.5, 0.4, 0.2]
N, M = 5, len(MEANS)


def ring(**kw):
    """A small ring with the ``ucb1_shared`` channel (neighbors, [counts, sums], dim 2M)."""
    base = {"num_agents": 6, "num_arms": 3, "horizon": 200, "topology": "ring",
            "channels": {"neighbors": {"kind": "neighbors", "dim": 6}}}  # fmt: skip
    return {**base, **kw}


# ------------------------------------------------------------- agreement with numpy
def test_agreement_with_the_numpy_engine_under_random_roles_and_crash_pulls():
    """Uniform placement, a crashed agent with a uniform crash pull, noise payloads: final
    network regret within 3 se over 200 runs, message counts (random: crash pulls) too."""
    kwargs = ring(horizon=100, adversary={"num_byzantine": 1, "num_crashed": 1,
                                          "crash_at": "uniform", "attack": "uniform",
                                          "attack_kwargs": {"hi": 50.0}})  # fmt: skip
    ref, _ = agreement(HETEROGENEOUS, "ucb1_shared", kwargs, exact_messages=False)
    assert ref.roles is not None


def test_agreement_of_the_honest_regret_under_a_rushing_attack():
    """Agents 0 and 1 Byzantine (``first``) with ``alie`` on a complete graph: network
    regret (every agent, as numpy's ``final_regret_network``) and honest regret (role 0 only,
    numpy's ``honest_regret_mean``) within 3 se; messages exact."""
    kwargs = {
        "num_agents": 5,
        "num_arms": 3,
        "horizon": 100,
        "topology": "complete",
        "means": [0.8, 0.5, 0.3],
        "adversary": {"num_byzantine": 2, "placement": "first", "attack": "alie"},
    }
    ref, out = agreement(HOMOGENEOUS, "ucb1_shared", kwargs)
    np.testing.assert_array_equal(ref.roles, np.tile([1, 1, 0, 0, 0], (len(ref.roles), 1)))
    a = ref.honest_regret_mean
    b = out.regret_by_agent[:, -1, 2:].mean(axis=1)
    se = math.sqrt(a.var(ddof=1) / len(a) + b.var(ddof=1) / len(b))
    assert abs(a.mean() - b.mean()) <= 3 * se, (a.mean(), b.mean(), se)
    # the Byzantine agents are scored in the network regret too (the learner acts for them)
    assert out.regret_by_agent[:, -1, :2].sum() > 0
    np.testing.assert_allclose(ref.final_regret_network, ref.regret_by_agent[:, -1].sum(1))


# ------------------------------------------------------------ payload replacement
def _hand_step(env_id, kwargs, payload, send, arms):
    """One hand-built step on the numpy engine (one run) and on the JAX env; returns both
    delivery records of the single channel ``c`` (numpy, JAX) and the JAX info."""
    venv = fedbandit_env.make_vec(env_id, num_runs=1, **kwargs)
    venv.reset(seed=0)
    obs, *_ = venv.step(
        np.asarray(arms)[None], {"c": (np.asarray(send)[None], np.asarray(payload)[None])}
    )
    env = fj.make(env_id, **kwargs)
    _, state = env.reset(jax.random.PRNGKey(0))
    action = Action(
        jnp.asarray(arms, jnp.int32), {"c": (jnp.asarray(send), jnp.asarray(payload, jnp.float32))}
    )
    jobs, _, _, _, info = env.step(jax.random.PRNGKey(1), state, action)  # eager: one step
    return obs.deliveries["c"], jobs.deliveries["c"], info


DETERMINISTIC = [
    ("silent", {}), ("zeros", {}), ("fixed", {"values": [0.1, 0.2, 0.3, 0.4]}),
    ("fixed", {"values": [0.1, 0.2, 0.3, 0.4], "counts": "huge"}), ("zhu_intended", {}),
    ("demote_best", {"counts": "own"}), ("demote_best", {"counts": "zero"}), ("reverse", {}),
    ("alie", {"z": 1.5}),
]  # fmt: skip


@pytest.mark.parametrize(("attack", "attack_kwargs"), DETERMINISTIC)
def test_the_byzantine_payloads_are_the_numpy_attacks_on_a_hand_built_step(attack, attack_kwargs):
    """Agents 1 and 3 Byzantine on a complete graph with per-neighbour delivery: every
    receiver's slot of every sender holds what the numpy engine delivers (float32 rounding)."""
    kwargs = {"num_agents": N, "num_arms": M, "means": MEANS, "horizon": 10,
              "topology": "complete", "channels": {"c": {"kind": "neighbors", "dim": 2 * M}},
              "adversary": {"placement": "fixed", "byzantine_ids": [1, 3], "attack": attack,
                            "attack_kwargs": attack_kwargs}}  # fmt: skip
    rng = np.random.default_rng(3)
    payload = np.concatenate([rng.random((N, M)), rng.integers(0, 9, (N, M))], axis=1)
    send = np.array([True, True, False, True, True])
    ref, out, info = _hand_step(HOMOGENEOUS, kwargs, payload, send, [0, 1, 2, 3, 0])
    np.testing.assert_array_equal(np.asarray(out.mask), ref.mask[0])
    np.testing.assert_allclose(np.asarray(out.payload), ref.payload[0], rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(np.asarray(info["roles"]), [0, 1, 0, 1, 0])
    if attack != "silent":  # the Byzantine slots were replaced (not the learner's rows)
        slot = list(np.asarray(ref.senders).reshape(-1, N - 1)[0]).index(1)
        assert not np.allclose(np.asarray(out.payload)[0, slot], payload[1])


@pytest.mark.slow
def test_recommendation_attacks_on_a_dim_one_channel():
    """``rec_worst`` is the numpy arm exactly; ``rec_naive`` never the best arm and uniform on
    the others; ``rec_smart`` the honest agents' least-pulled suboptimal arm."""
    kwargs = {
        "num_agents": N,
        "num_arms": M,
        "means": MEANS,
        "horizon": 10,
        "topology": "complete",
        "channels": {"c": {"kind": "neighbors", "dim": 1}},
        "adversary": {"placement": "fixed", "byzantine_ids": [2], "attack": "rec_worst"},
    }
    payload, send = np.zeros((N, 1)), np.ones(N, bool)
    ref, out, _ = _hand_step(HOMOGENEOUS, kwargs, payload, send, [0, 0, 0, 1, 0])
    np.testing.assert_array_equal(np.asarray(out.payload), ref.payload[0])
    assert (np.asarray(out.payload)[0, 1] == M - 1).all()  # agent 0's slot of sender 2

    def arms_sent(attack, arms, keys=400):
        kw = {**kwargs, "adversary": {**kwargs["adversary"], "attack": attack}}
        env = fj.make(HOMOGENEOUS, **kw)
        _, state = env.reset(jax.random.PRNGKey(0))
        action = Action(jnp.asarray(arms, jnp.int32), {"c": (jnp.ones(N, bool), jnp.zeros((N, 1)))})
        step = jax.vmap(lambda k: env.step(k, state, action)[0].deliveries["c"].payload)
        return np.asarray(step(jax.random.split(jax.random.PRNGKey(2), keys)))[:, 0, 1, 0]

    naive = arms_sent("rec_naive", [0, 0, 0, 0, 0])
    assert set(np.unique(naive)) == {1.0, 2.0, 3.0}  # never the best arm 0
    assert np.abs(np.bincount(naive.astype(int), minlength=M)[1:] / 400 - 1 / 3).max() < 0.1
    # honest agents 0, 1, 3, 4 pulled arms 1, 1, 3, 3; arm 2 is the least-pulled suboptimal
    smart = arms_sent("rec_smart", [1, 1, 0, 3, 3])
    assert (smart == 2.0).all()


@pytest.mark.slow
def test_noise_attacks_follow_their_laws():
    """``uniform`` in [lo, hi), ``gaussian`` own payload + N(0, sigma^2), ``flipped_means`` in
    [0, 0.1] near the best and [0.9, 1] elsewhere, the other agents' rows untouched."""
    base = {"num_agents": N, "num_arms": M, "means": MEANS, "horizon": 10, "topology": "complete",
            "channels": {"c": {"kind": "neighbors", "dim": 2 * M}}}  # fmt: skip
    payload = jnp.tile(jnp.arange(2 * M, dtype=jnp.float32), (N, 1))

    def received(attack, attack_kwargs, keys=1000):
        adv = {"placement": "fixed", "byzantine_ids": [4], "attack": attack,
               "attack_kwargs": attack_kwargs}  # fmt: skip
        env = fj.make(HOMOGENEOUS, **base, adversary=adv)
        _, state = env.reset(jax.random.PRNGKey(0))
        action = Action(jnp.zeros(N, jnp.int32), {"c": (jnp.ones(N, bool), payload)})
        step = jax.vmap(lambda k: env.step(k, state, action)[0].deliveries["c"].payload)
        got = np.asarray(step(jax.random.split(jax.random.PRNGKey(5), keys)))
        np.testing.assert_array_equal(got[:, 0, :3], np.broadcast_to(payload[1:4], (keys, 3, 8)))
        return got[:, 0, 3]  # agent 0's slot of sender 4

    u = received("uniform", {"lo": 2.0, "hi": 5.0})
    assert u.min() >= 2.0 and u.max() < 5.0 and abs(u.mean() - 3.5) < 0.05
    g = received("gaussian", {"sigma": 2.0}) - np.asarray(payload[4])
    assert abs(g.mean()) < 0.1 and abs(g.std() - 2.0) < 0.1
    f = received("flipped_means", {"beta": 0.25})[:, :M]  # arms 0, 1 within 0.25 of the best
    assert (f[:, :2] <= 0.1).all() and (f[:, 2:] >= 0.9).all()


def test_fedmom_attacks_send_the_running_mean_of_their_fake_draws():
    """``fedmom_sce1``: per arm the mean of one fake draw per pull, U[0, 0.1) on the
    beta-optimal arms and U[0.9, 1) on the others; ``fedmom_sce2`` keeps the own payload off
    the beta-optimal arms."""
    for attack in ("fedmom_sce1", "fedmom_sce2"):
        kwargs = {"num_agents": 3, "num_arms": M, "means": MEANS, "horizon": 20,
                  "topology": "star", "channels": {"s": {"kind": "server", "dim": M}},
                  "adversary": {"placement": "fixed", "byzantine_ids": [1], "attack": attack,
                                "attack_kwargs": {"beta": 0.25}}}  # fmt: skip
        env = fj.make(HETEROGENEOUS, **kwargs)
        _, state = env.reset(jax.random.PRNGKey(0))
        own = jnp.full((3, M), 0.5, jnp.float32)
        step = env.step  # eager: a few steps
        for t, arm in enumerate([0, 0, 3, 1]):
            action = Action(jnp.full(3, arm, jnp.int32), {"s": (jnp.zeros(3, bool), own)})
            _, state, *_ = step(jax.random.PRNGKey(t), state, action)
        sums, counts = (np.asarray(x)[1] for x in state.adversary.attack["s"])
        np.testing.assert_array_equal(counts, [2, 1, 0, 1])
        assert 0 <= sums[0] / 2 < 0.1 and 0 <= sums[1] < 0.1 and 0.9 <= sums[3] < 1.0
        # a step in which the learner uploads: the server hears the Byzantine client's fake means
        action = Action(jnp.full(3, 2, jnp.int32),
                        {"s": (jnp.array([False, True, False]), own)})  # fmt: skip
        obs, state, *_ = step(jax.random.PRNGKey(9), state, action)
        sums, counts = (np.asarray(x)[1] for x in state.adversary.attack["s"])
        fake = sums / np.maximum(counts, 1)
        want = fake if attack == "fedmom_sce1" else np.where([1, 1, 0, 0], fake, 0.5)
        np.testing.assert_allclose(np.asarray(obs.deliveries["s"].aggregate), want, rtol=1e-6)


def test_channels_left_out_of_the_attack_carry_no_byzantine_message():
    kwargs = {"num_agents": 4, "num_arms": 2, "horizon": 10, "topology": "complete",
              "channels": {"a": {"kind": "neighbors", "dim": 1},
                           "b": {"kind": "neighbors", "dim": 1}},
              "adversary": {"placement": "fixed", "byzantine_ids": [0], "attack": "zeros",
                            "channels": ["a"]}}  # fmt: skip
    env = fj.make(HOMOGENEOUS, **kwargs)
    _, state = env.reset(jax.random.PRNGKey(0))
    ones = (jnp.ones(4, bool), jnp.ones((4, 1), jnp.float32))
    obs, *_ = env.step(
        jax.random.PRNGKey(1), state, Action(jnp.zeros(4, jnp.int32), {"a": ones, "b": ones})
    )
    a, b = obs.deliveries["a"], obs.deliveries["b"]
    assert np.asarray(a.mask)[1, 0] and np.asarray(a.payload)[1, 0, 0] == 0.0  # the attack's
    assert not np.asarray(b.mask)[1:, 0].any()  # sender 0 (slot 0 of agents 1..3) silent on b
    assert np.asarray(b.mask)[0].all()


# ---------------------------------------------------------------- crashed agents
def test_crashed_agents_send_nothing_from_their_crash_pull_and_the_ledger_is_exact():
    """Agent 2 crashes at pull 20 on a ring of 6 where every agent sends every step: the ledger
    counts 2 messages per sender and step, the numpy engine's numbers exactly, and agent 2's
    slot stays empty from step 20 (and in a communication step right before it)."""
    T, crash = 50, 20
    kwargs = ring(horizon=T, adversary={"placement": "fixed", "crashed_ids": [2],
                                        "crash_at": crash})  # fmt: skip
    ref = evaluate(HETEROGENEOUS, "ucb1_shared", runs=4, seed=0, env_kwargs=kwargs)
    out = fj.rollout(fj.make(HETEROGENEOUS, **kwargs), fj.make_jax_agent("ucb1_shared"),
                     list(range(4)))  # fmt: skip
    expected = T * 6 * 2 - (T - crash + 1) * 2
    np.testing.assert_array_equal(out.messages.sum(1), expected)
    np.testing.assert_array_equal(out.messages, ref.messages)
    np.testing.assert_array_equal(out.floats, ref.floats)

    env = fj.make(HETEROGENEOUS, **kwargs)
    _, state = env.reset(jax.random.PRNGKey(0))
    msg = {"neighbors": (jnp.ones(6, bool), jnp.ones((6, 6), jnp.float32))}
    step = env.step  # eager: a few steps
    heard = []  # did agent 1 (slot 1: neighbour 2) hear agent 2, per step
    for t in range(1, 24):
        pull = t != crash  # step 20 is communication-only, after pull 19: agent 2 is down
        obs, state, *_ = step(jax.random.PRNGKey(t), state,
                              Action(jnp.zeros(6, jnp.int32), msg, pull))  # fmt: skip
        heard.append(bool(np.asarray(obs.deliveries["neighbors"].mask)[1, 1]))
    assert heard == [True] * (crash - 1) + [False] * (23 - crash + 1)


# ------------------------------------------------------------------ placements
@pytest.mark.slow
def test_placements_have_the_numpy_laws():
    """Per-agent role frequencies (``uniform``), the number of distinct Byzantine ids
    (``code_fedmom``, with replacement) and the uniform crash pulls agree with numpy within 3
    se; ``local_f`` always meets its premise; deterministic placements are the numpy rows."""
    runs = 200
    keys = jax.random.split(jax.random.PRNGKey(0), runs)

    def both(kwargs):
        env = fj.make(HETEROGENEOUS, **kwargs)
        adv = jax.vmap(lambda k: env.reset(k)[1].adversary)(keys)
        venv = fedbandit_env.make_vec(HETEROGENEOUS, num_runs=runs, **kwargs)
        venv.reset(seed=list(range(runs)))
        return env, adv, venv.engine.adversary

    def close(a, b):
        a, b = np.asarray(a, float), np.asarray(b, float)
        se = math.sqrt(a.var(ddof=1) / len(a) + b.var(ddof=1) / len(b)) + 1e-12
        assert abs(a.mean() - b.mean()) <= 3 * se, (a.mean(), b.mean(), se)

    _, adv, ref = both(ring(adversary={"num_byzantine": 2, "num_crashed": 1,
                                       "crash_at": "uniform"}))  # fmt: skip
    roles = np.asarray(adv.roles)
    assert ((roles == 1).sum(1) == 2).all() and ((roles == 2).sum(1) == 1).all()
    for i in range(6):
        close(roles[:, i] == 1, ref.roles[:, i] == 1)
    pulls = np.asarray(adv.crash_pull)
    close(pulls[roles == 2], ref.crash_pull[ref.roles == 2])
    assert (pulls[roles != 2] == 201).all()

    _, adv, ref = both(ring(adversary={"num_byzantine": 3, "placement": "code_fedmom"}))
    close((np.asarray(adv.roles) == 1).sum(1), (ref.roles == 1).sum(1))

    env, adv, _ = both(ring(num_agents=8, adversary={"num_byzantine": 3, "placement": "local_f",
                                                     "local_f": 1}))  # fmt: skip
    roles = np.asarray(adv.roles)
    nb = env.config.topology.neighbors
    byz_nb = ((roles == 1)[:, np.where(nb >= 0, nb, 0)] & (nb >= 0)).sum(2)
    assert (byz_nb[roles == 0] <= 1).all() and np.asarray(adv.ok).all()

    for placement in ("first", "max_degree", "min_degree"):
        kw = {
            "num_agents": 5,
            "horizon": 20,
            "topology": "star",
            "adversary": {"num_byzantine": 1, "num_crashed": 1, "placement": placement},
        }
        _, adv, ref = both(kw)
        np.testing.assert_array_equal(np.asarray(adv.roles), ref.roles)


# ------------------------------------------------------------- keys, jit, vmap
@pytest.mark.slow
def test_same_key_same_bits_and_roles_move_no_other_draw():
    kwargs = ring(
        horizon=60,
        adversary={
            "num_byzantine": 1,
            "num_crashed": 1,
            "crash_at": "uniform",
            "attack": "gaussian",
        },
    )
    env = fj.make(HETEROGENEOUS, **kwargs)
    # same_bits (tests/jax_tools.py) with one compile: the rollout program run twice
    program = rollout_program(env, fj.make_jax_agent("ucb1_shared"), np.array([30, 60]))
    keys = run_keys([0, 1, 2])
    (c1, f1, _, _), (c2, f2, _, _) = program(keys), program(keys)
    np.testing.assert_array_equal(c1, c2)
    np.testing.assert_array_equal(f1.ledger.messages.lo, f2.ledger.messages.lo)
    np.testing.assert_array_equal(f1.adversary.roles, f2.adversary.roles)
    np.testing.assert_array_equal(f1.adversary.crash_pull, f2.adversary.crash_pull)
    # the same key with and without the adversary: the same instance and the same rewards
    clean = fj.make(HETEROGENEOUS, **{**kwargs, "adversary": None})
    action = Action(jnp.arange(6, dtype=jnp.int32) % 3, {})
    outs = []
    for e in (env, clean):
        _, state = e.reset(jax.random.PRNGKey(4))
        outs.append((state.means, e.step(jax.random.PRNGKey(5), state, action)[2]))
    np.testing.assert_array_equal(outs[0][0], outs[1][0])
    np.testing.assert_array_equal(outs[0][1], outs[1][1])


def test_reset_and_step_under_jit_and_vmap_and_the_state_without_an_adversary():
    env = fj.make(HETEROGENEOUS, **ring(adversary={"num_byzantine": 2, "attack": "zeros"}))
    keys = jax.random.split(jax.random.PRNGKey(1), 7)
    obs, state = jax.jit(jax.vmap(env.reset))(keys)
    assert isinstance(state, AdversaryEnvState) and state.adversary.roles.shape == (7, 6)
    assert AdversaryEnvState._fields == ("env", "adversary")  # composes EnvState
    assert isinstance(state.env, EnvState) and state.step is state.env.step
    send = jnp.ones((7, 6), bool)
    action = Action(
        jnp.zeros((7, 6), jnp.int32), {"neighbors": (send, jnp.ones((7, 6, 6)))}, jnp.ones(7, bool)
    )
    obs, state2, rewards, done, info = jax.jit(jax.vmap(env.step))(keys, state, action)
    np.testing.assert_array_equal(info["roles"], state.adversary.roles)
    np.testing.assert_array_equal(info["honest"], np.asarray(state.adversary.roles) == 0)
    byz = np.asarray(state.adversary.roles) == 1
    delivered = np.asarray(obs.deliveries["neighbors"].payload)  # (7, N, D, dim)
    senders = np.asarray(env.channels["neighbors"].senders)
    from_byz = byz[:, senders]  # (7, N, D)
    assert (delivered[from_byz] == 0.0).all() and (delivered[~from_byz] == 1.0).all()
    # no adversary: the plain EnvState, no roles in info
    plain = fj.make(HETEROGENEOUS, **ring())
    _, s = plain.reset(jax.random.PRNGKey(0))
    assert type(s) is EnvState
    assert (
        "roles" not in plain.step(jax.random.PRNGKey(1), s, Action(jnp.zeros(6, jnp.int32), {}))[4]
    )


# ------------------------------------------------------------------- refusals
def test_per_receiver_attacks_and_run_time_attacks_are_refused_by_name():
    kw = {
        "num_agents": 4,
        "horizon": 10,
        "topology": "complete",
        "channels": {"r": {"kind": "gossip", "dim": 1, "mode": "pull_one_neighbour"}},
    }
    adv = {"num_byzantine": 1, "attack": "rec_smart", "attack_kwargs": {"per_receiver": True}}
    fedbandit_env.make_vec(HOMOGENEOUS, num_runs=1, **kw, adversary=adv).reset(seed=0)  # numpy
    with pytest.raises(ConfigError, match=f"attack 'rec_smart'.*{PER_RECEIVER}"):
        fj.make(HOMOGENEOUS, **kw, adversary=adv)

    class Constant(Attack):
        def payload(self, channel_name, dim, view):
            return np.ones(view.send.shape, bool), np.ones((*view.send.shape, dim))

    attacks.register_attack("jax_test_constant", Constant)
    try:
        with pytest.raises(ConfigError, match="attack 'jax_test_constant': not on the JAX"):
            fj.make(
                HOMOGENEOUS, **kw, adversary={"num_byzantine": 1, "attack": "jax_test_constant"}
            )
    finally:
        attacks._ATTACKS.pop("jax_test_constant")


@pytest.mark.parametrize(
    ("env_id", "match"),
    [
        ("FedBandit/Byzantine-FedMoM-Sce1-v0", "client_spread: not on the JAX backend"),
        ("FedBandit/Malicious-Vial22-v0", "not on the JAX backend"),
    ],
)
def test_presets_the_backend_cannot_honour_are_refused_by_name(env_id, match):
    with pytest.raises(ConfigError, match=f"{env_id}: {match}"):
        fj.make(env_id)


def test_presets_with_supported_attacks_run():
    env = fj.make("FedBandit/Byzantine-ZhuTMLR-v0", horizon=30)
    assert env.adversary.attack_id == "zhu_code"
    _, state = env.reset(jax.random.PRNGKey(0))
    np.testing.assert_array_equal(state.adversary.roles, [1] + [0] * 9)
    env = fj.make("FedBandit/Malicious-GosInE-v0", horizon=30)
    assert env.adversary.attack_id == "rec_smart"


@pytest.mark.parametrize(
    "adversary",
    [
        {"num_byzantine": 6},  # no honest agent left
        {"num_byzantine": 1, "attack": "fixed", "attack_kwargs": {"values": [0.1, 0.2]}},
        {"num_byzantine": 1, "attack": "rec_worst"},  # dim 1 expected, the channel has 6
        {"num_byzantine": 3, "placement": "local_f", "local_f": 0},  # impossible on a ring
        {"num_byzantine": 1, "channels": ["nope"]},
    ],
)
def test_bad_adversaries_raise_the_numpy_errors(adversary):
    kwargs = ring(adversary=adversary)
    with pytest.raises(ConfigError) as numpy_err:
        fedbandit_env.make_vec(HETEROGENEOUS, num_runs=1, **kwargs).reset(seed=0)
    with pytest.raises(ConfigError) as jax_err:
        fj.make(HETEROGENEOUS, **kwargs)
    assert str(numpy_err.value) in str(jax_err.value)


def test_means_attacks_refuse_the_linear_family_as_numpy_does():
    kwargs = {"num_agents": 3, "num_arms": 3, "horizon": 10, "dim": 2,
              "channels": {"c": {"kind": "neighbors", "dim": 6}},
              "adversary": {"num_byzantine": 1, "attack": "demote_best"}}  # fmt: skip
    with pytest.raises(ConfigError, match="linear family") as err:
        fj.make("FedBandit/LinearContextual-v0", **kwargs)
    with pytest.raises(ConfigError) as numpy_err:
        fedbandit_env.make_vec("FedBandit/LinearContextual-v0", num_runs=1, **kwargs).reset(seed=0)
    assert str(numpy_err.value) == str(err.value)


def test_the_bench_keeps_roles_and_the_adversary_version_on_jax():
    from fedbandit_env.bench.evaluate import evaluate
    from fedbandit_env.bench.versions import registered_results_version

    adversary = {"num_byzantine": 1, "attack": "zeros"}
    kwargs = {"num_agents": 4, "num_arms": 3, "topology": "ring", "horizon": 40,
              "adversary": adversary}  # fmt: skip
    res = evaluate("FedBandit/Heterogeneous-v0", "ucb1_shared", runs=3, env_kwargs=kwargs,
                   backend="jax")  # fmt: skip
    assert res.roles.shape == (3, 4) and ((res.roles == 1).sum(axis=1) == 1).all()
    assert res.results_version == registered_results_version(
        "FedBandit/Heterogeneous-v0", "ucb1_shared", backend="jax", adversary=adversary
    )
    from fedbandit_env.bench.versions import JAX_BACKEND_VERSION

    assert f" / adversary v1 / backend jax v{JAX_BACKEND_VERSION}" in res.results_version
    honest = res.regret_by_agent[:, -1][res.roles == 0].reshape(3, 3).mean(axis=1)
    np.testing.assert_allclose(res.honest_regret_mean, honest)


def test_an_attack_sweep_runs_on_jax_and_names_what_stays_on_numpy():
    """The robust suite's sweep on the JAX backend: the cells numpy runs (the learner's and
    the attack's decisions are the numpy ones), on JAX; an attack without a JAX twin is named
    as a backend gap."""
    from fedbandit_env.agent_registry import list_agents
    from fedbandit_env.bench.suites import BACKEND_GAP, AttackSweep, Suite

    class Constant(Attack):
        def payload(self, channel_name, dim, view):
            return np.ones(view.send.shape, bool), np.ones((*view.send.shape, dim))

    keep = {"ucb1_shared"}
    sweep = AttackSweep("FedBandit/Heterogeneous-v0", 30, 2,
                        {"num_agents": 4, "num_arms": 3, "topology": "ring"}, byzantine=(1,),
                        exclude=tuple(a for a in list_agents() if a not in keep))  # fmt: skip
    attacks.register_attack("jax_test_constant", Constant)
    try:
        on_numpy, _ = Suite("tiny_robust", sweeps=(sweep,)).split()
        suite = Suite("tiny_robust", sweeps=(sweep,)).with_backend("jax")
        on_jax, skipped = suite.split()
        summary = suite.backend_summary(on_jax, skipped)
    finally:
        attacks._ATTACKS.pop("jax_test_constant")

    def attack(cell):
        return (cell.env_kwargs.get("adversary") or {}).get("attack")

    assert {c.backend for c in on_jax} == {"jax"}
    assert {attack(c) for c in on_numpy} - {attack(c) for c in on_jax} == {"jax_test_constant"}
    gaps = [reason for (_env, reason) in skipped if reason.startswith(BACKEND_GAP)]
    assert any("attack 'jax_test_constant': not on the JAX backend" in r for r in gaps)
    assert summary.startswith("suite tiny_robust on the jax backend: runs")
