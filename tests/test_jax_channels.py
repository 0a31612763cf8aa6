"""The JAX channels gossip, server, flood, hierarchical and push (fedbandit_env/jax/channels/) against
their numpy twins (fedbandit_env/network/): the same deliveries and charges step by step where
the channel draws nothing (or its draws are replayed into the twin), the same means of
messages, drops and deliveries where it draws, under jit and vmap, and inside the environment."""

from __future__ import annotations

import math

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402

import fedbandit_env  # noqa: E402
import fedbandit_env.jax as fj  # noqa: E402
from fedbandit_env.agent_views import channel_observation  # noqa: E402
from fedbandit_env.jax.accumulate import count_value, total_value  # noqa: E402
from fedbandit_env.jax.types import Action  # noqa: E402
from fedbandit_env.network import make_channel  # noqa: E402
from fedbandit_env.seeding import BatchedRNG  # noqa: E402

ENV_ID = "FedBandit/Heterogeneous-v0"
HYBRID = {
    "topology": "hybrid",
    "num_agents": 11,
    "topology_kwargs": {"sizes": [1, 3, 7], "component_graph": "path"},
}
STEPS = 20
DIM = 2


def channel_pair(options, runs=1, seed=0, topology="path", num_agents=6, **kwargs):
    """The numpy channel (reset on ``runs`` run seeds) and the JAX channel of one
    configuration, built by the two backends' ``make`` from the same options."""
    env = fj.make(
        ENV_ID,
        num_agents=num_agents,
        num_arms=3,
        horizon=40,
        topology=topology,
        channels={"c": {"dim": DIM, **options}},
        c1=5.0,
        c2=2.0,
        **kwargs,
    )
    config = env.config
    twin = make_channel("c", config.channels["c"], config.topology, config.c1, config.c2)
    twin.reset(BatchedRNG.for_runs(list(range(seed, seed + runs)), "network").child("channel/c"))
    return twin, env.channels["c"]


def messages_of(n, steps=STEPS, rate=0.4, seed=1):
    """Send masks (T, N) (one step in which nobody sends) and float32 payloads (T, N, dim)."""
    rng = np.random.default_rng(seed)
    send = rng.random((steps, n)) < rate
    send[steps // 3] = False
    payload = rng.normal(size=(steps, n, DIM)).astype(np.float32)
    return send, payload


def jax_steps(channel, keys, send, payload):
    """``channel.transmit`` over T steps of one run (a scan): stacked deliveries and charges."""

    def body(state, x):
        key, send, payload = x
        delivery, state, charge = channel.transmit(key, state, send, payload)
        return state, (delivery, charge)

    _, out = jax.lax.scan(body, channel.init(), (keys, jnp.asarray(send), jnp.asarray(payload)))
    return out


def run_jax(channel, send, payload, seed=0):
    keys = jax.random.split(jax.random.PRNGKey(seed), len(send))
    delivery, charge = jax.jit(lambda k, s, p: jax_steps(channel, k, s, p))(keys, send, payload)
    return jax.tree.map(np.asarray, delivery), jax.tree.map(np.asarray, charge)


def numpy_view(twin, d) -> dict[str, np.ndarray]:
    """Run 0 of a numpy delivery in the JAX channel's fields (the flood's sparse rows as its
    per-agent observation)."""
    if twin.kind == "flood":
        obs = [channel_observation(twin, d, 0, i) for i in range(twin.num_agents)]
        return {
            k: np.stack([o[k] for o in obs]) for k in ("senders", "mask", "sent_step", "payload")
        }
    return {k: np.asarray(v)[0] for k, v in vars(d).items()}


def assert_same_step(twin, d, c, delivery, charge, t):
    """Delivery and charge of step ``t`` equal: ids, masks and counts exactly, payloads within
    float32 rounding, messages, floats, cost and dropped exactly."""
    want = numpy_view(twin, d)
    got = {k: v[t] for k, v in delivery._asdict().items()}
    assert sorted(want) == sorted(got)
    for k, v in want.items():
        if np.issubdtype(np.asarray(v).dtype, np.floating):
            np.testing.assert_allclose(got[k], v, rtol=1e-5, atol=1e-5, err_msg=f"{k} step {t}")
        else:
            np.testing.assert_array_equal(
                got[k], np.asarray(v).astype(got[k].dtype), err_msg=f"{k} step {t}"
            )
    np.testing.assert_array_equal(charge.messages[t], c.messages[0], err_msg=f"step {t}")
    np.testing.assert_array_equal(charge.floats[t], c.floats[0], err_msg=f"step {t}")
    np.testing.assert_array_equal(charge.cost[t], c.cost[0], err_msg=f"step {t}")
    assert int(charge.dropped[t]) == int(c.dropped[0]), t


DETERMINISTIC = {
    "gossip-edge-one-edge": ({"kind": "gossip"}, {"topology": "complete", "num_agents": 2}),
    "gossip-pull-one-edge": (
        {"kind": "gossip", "mode": "pull_one_neighbour"},
        {"topology": "complete", "num_agents": 2},
    ),
    "server-sum-broadcast": ({"kind": "server", "aggregate": "sum", "charge_broadcast": True}, {}),
    "server-join-round": ({"kind": "server", "join_round": [0, 1, 3, 0, 2, 5]}, {}),
    "server-reply-none": ({"kind": "server", "aggregate": "sum", "reply": "none"}, {}),
    "push": ({"kind": "push"}, {}),
    "flood-relay-path": ({"kind": "flood"}, {}),
    "flood-relay-ring-ttl2": ({"kind": "flood", "ttl": 2}, {"topology": "ring", "num_agents": 8}),
    "flood-gis-grid": (
        {"kind": "flood", "cost_model": "gis"},
        {"topology": "grid", "num_agents": 9},
    ),
    "flood-gis-hybrid": ({"kind": "flood", "cost_model": "gis"}, HYBRID),
    "flood-star-ttl1": ({"kind": "flood", "ttl": 1}, {"topology": "star", "num_agents": 5}),
    "hierarchical-weighted-edges": ({"kind": "hierarchical"}, HYBRID),
    "hierarchical-unweighted-path": (
        {"kind": "hierarchical", "aggregate": "unweighted", "cost_model": "path"},
        HYBRID,
    ),
    "hierarchical-sum-broadcast": (
        {"kind": "hierarchical", "aggregate": "sum", "charge_broadcast": True},
        {"topology": "path"},
    ),
    "hierarchical-star-no-delay": ({"kind": "hierarchical"}, {"topology": "star", "num_agents": 5}),
}


@pytest.mark.parametrize("case", sorted(DETERMINISTIC))
def test_deterministic_channels_deliver_and_charge_exactly_like_the_twin(case):
    options, kwargs = DETERMINISTIC[case]
    twin, channel = channel_pair(options, **kwargs)
    send, payload = messages_of(twin.num_agents)
    delivery, charge = run_jax(channel, send, payload)
    for t in range(STEPS):
        d, c = twin.transmit(t + 1, send[t][None], payload[t][None].astype(np.float64))
        assert_same_step(twin, d, c, delivery, charge, t)
    assert charge.messages.sum() > 0 and delivery_count(channel.kind, delivery).sum() > 0
    if "join_round" in options:  # agents join over the run: refused first, accepted at the end
        assert not delivery.participating[0].all() and delivery.participating[-1].all()
    if channel.kind == "hierarchical" and channel.delay > 0:  # a broadcast in flight at the end
        assert (delivery.sent_step >= 0).any() and (charge.messages[-channel.delay :] > 0).any()


def delivery_count(kind, delivery) -> np.ndarray:
    """Per step (leading axes kept): the deliveries that arrived (gossip: payloads received;
    server, hierarchical: contributing uploads; flood: slots heard)."""
    if kind == "gossip":
        return delivery.received.sum(axis=-1)
    if kind == "flood":
        return delivery.mask.sum(axis=(-2, -1))
    if kind == "push":
        return delivery.received.sum(axis=-1)
    return delivery.count


def numpy_delivered(twin, d) -> np.ndarray:
    """(B,) :func:`delivery_count` of a numpy delivery."""
    if twin.kind == "gossip":
        return d.received.sum(axis=1)
    if twin.kind == "flood":
        return np.bincount(d.run, minlength=twin.num_runs)
    if twin.kind == "push":
        return d.received.sum(axis=1)
    return d.count


# ------------------------------------------------------------ replayed draws
class Replay:
    """Stands in for a numpy channel's buffered uniform stream: ``next()`` returns the draws of
    this step for one run, set from what the JAX channel drew."""

    value: np.ndarray

    def next(self, *args):
        return np.asarray(self.value, np.float64)[None]


def gossip_draws(twin, d):
    """The uniforms that make the numpy gossip choose the JAX edge or pulls and lose the same
    messages: u picks index (or slot) floor(u k) = k' for u = (k' + 1/2) / k; a drop uniform
    is 1 where the message arrived and 0 where it did not (irrelevant where nobody sent)."""
    partner, received = d.partner, d.received
    if twin.mode == "edge":
        a, c = np.flatnonzero(partner >= 0)
        idx = [k for k, e in enumerate(twin.edges) if sorted(e) == [a, c]][0]
        a, c = twin.edges[idx]
        return [(idx + 0.5) / len(twin.edges)], [float(received[c]), float(received[a])]
    nb, deg = twin.topology.neighbors, twin.topology.degrees
    u = [(list(nb[i]).index(p) + 0.5) / deg[i] if p >= 0 else 0.5 for i, p in enumerate(partner)]
    return u, received.astype(float)


REPLAYED = {
    "gossip-edge-ring-drops": (
        {"kind": "gossip", "drop_prob": 0.3},
        {"topology": "ring", "num_agents": 6},
    ),
    "gossip-edge-grid": ({"kind": "gossip"}, {"topology": "grid", "num_agents": 9}),
    "gossip-pull-star-drops": (
        {"kind": "gossip", "mode": "pull_one_neighbour", "drop_prob": 0.3},
        {"topology": "star", "num_agents": 5},
    ),
    "gossip-pull-hybrid": ({"kind": "gossip", "mode": "pull_one_neighbour"}, HYBRID),
    "server-participation": ({"kind": "server", "participation": 0.5}, {}),
    "flood-drops": ({"kind": "flood", "drop_prob": 0.3}, {"topology": "ring", "num_agents": 8}),
}


@pytest.mark.parametrize("case", sorted(REPLAYED))
def test_random_channels_match_the_twin_given_the_same_draws(case):
    """Where the channel draws (gossip edges and pulls, participation, flood drops), the JAX
    draws replayed into the numpy twin give the same deliveries and charges step by step."""
    options, kwargs = REPLAYED[case]
    twin, channel = channel_pair(options, **kwargs)
    send, payload = messages_of(twin.num_agents, rate=0.6)
    delivery, charge = run_jax(channel, send, payload)
    pick, drops = Replay(), Replay()
    if twin.kind == "gossip":
        twin._edge_u, twin._drops = pick, (drops if twin.drop_prob > 0 else None)
    elif twin.kind == "server":
        twin._pick = pick
    else:
        twin._drops = drops
    for t in range(STEPS):
        step = type(delivery)(*(v[t] for v in delivery))
        if twin.kind == "gossip":
            pick.value, drops.value = gossip_draws(twin, step)
        elif twin.kind == "server":
            pick.value = np.where(step.participating, 0.0, 1.0)
            assert step.participating.sum() == twin.num_participants
        else:
            drops.value = step.mask.astype(float)
        d, c = twin.transmit(t + 1, send[t][None], payload[t][None].astype(np.float64))
        assert_same_step(twin, d, c, delivery, charge, t)
    if twin.drop_prob > 0:
        assert charge.dropped.sum() > 0


# --------------------------------------------------------- in distribution
RUNS = 200
RANDOM = {
    "gossip-edge-drops": (
        {"kind": "gossip", "drop_prob": 0.3},
        {"topology": "ring", "num_agents": 6},
    ),
    "gossip-pull-drops": (
        {"kind": "gossip", "mode": "pull_one_neighbour", "drop_prob": 0.3},
        {"topology": "star", "num_agents": 5},
    ),
    "server-participation-drops-join": (
        {
            "kind": "server",
            "participation": 0.5,
            "drop_prob": 0.2,
            "join_round": [0, 1, 3, 0, 2, 5],
        },
        {},
    ),
    "flood-drops": ({"kind": "flood", "drop_prob": 0.3}, {"topology": "ring", "num_agents": 6}),
    "hierarchical-drops": ({"kind": "hierarchical", "drop_prob": 0.3, "aggregate": "sum"}, HYBRID),
    "push-drops": ({"kind": "push", "drop_prob": 0.3}, {}),
}


def within_3se(x: np.ndarray, y: np.ndarray, what: str) -> tuple[float, float, float]:
    x, y = x.astype(float), y.astype(float)
    se = math.sqrt(x.var(ddof=1) / len(x) + y.var(ddof=1) / len(y))
    assert abs(x.mean() - y.mean()) <= 3 * se + 1e-9, (what, x.mean(), y.mean(), 3 * se)
    return x.mean(), y.mean(), 3 * se


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(RANDOM))
def test_random_channels_agree_in_distribution_under_jit_and_vmap(case):
    """Per-run totals over 20 steps of 200 runs (the same messages in every run): messages,
    cost, dropped messages and deliveries have the numpy twin's means within 3 standard
    errors; the vmapped batch draws what the runs made one at a time draw: counts, masks and
    charges bit for bit, float payload sums to float32 rounding (XLA may add them in another
    order once batched)."""
    options, kwargs = RANDOM[case]
    twin, channel = channel_pair(options, runs=RUNS, **kwargs)
    n = twin.num_agents
    send, payload = messages_of(n, rate=0.6)
    np_msgs, np_cost, np_drop, np_heard = (np.zeros(RUNS) for _ in range(4))
    for t in range(STEPS):
        d, c = twin.transmit(
            t + 1,
            np.broadcast_to(send[t], (RUNS, n)),
            np.broadcast_to(payload[t], (RUNS, n, DIM)).astype(np.float64),
        )
        np_msgs += c.messages.sum(axis=1)
        np_cost += c.cost.sum(axis=1)
        np_drop += c.dropped
        np_heard += numpy_delivered(twin, d)

    keys = jax.random.split(jax.random.PRNGKey(7), (RUNS, STEPS))

    def steps(k):
        return jax_steps(channel, k, send, payload)

    batch, one = jax.jit(lambda k: (jax.vmap(steps)(k), steps(k[3])))(keys)
    delivery, charge = batch = jax.tree.map(np.asarray, batch)
    for a, b in zip(jax.tree.leaves(one), jax.tree.leaves(batch), strict=True):
        a = np.asarray(a)
        if np.issubdtype(a.dtype, np.floating):
            np.testing.assert_allclose(a, b[3], rtol=2e-6, atol=1e-6)
        else:
            np.testing.assert_array_equal(a, b[3])
    figures = {
        "messages": within_3se(np_msgs, charge.messages.sum(axis=(1, 2)), "messages"),
        "cost": within_3se(np_cost, charge.cost.sum(axis=(1, 2)), "cost"),
        "dropped": within_3se(np_drop, charge.dropped.sum(axis=1), "dropped"),
        "delivered": within_3se(
            np_heard, delivery_count(channel.kind, delivery).sum(axis=1), "delivered"
        ),
    }
    print(case, {k: tuple(round(x, 3) for x in v) for k, v in figures.items()})
    assert charge.dropped.sum() > 0


# ----------------------------------------------------------- in the env
END_TO_END = {
    "gossip": ({"kind": "gossip"}, {"topology": "ring"}),
    "gossip-pull": ({"kind": "gossip", "mode": "pull_one_neighbour"}, {"topology": "star"}),
    "server": ({"kind": "server", "join_round": [0, 0, 1, 2, 0, 3]}, {}),
    "flood": ({"kind": "flood", "cost_model": "gis"}, {"topology": "ring"}),
    "hierarchical": ({"kind": "hierarchical"}, {"topology": "path"}),
    "push": ({"kind": "push"}, {}),
}


@pytest.mark.parametrize("case", sorted(END_TO_END))
def test_each_kind_steps_in_the_env_under_jit_vmap_with_the_engine_ledger(case):
    """``fedbandit_env.jax.make(..., channels=...)`` stepped under ``jit(vmap(env.step))``
    with every agent pulling arm 0 and sending on every step: the channel's state is carried,
    and the ledger's totals equal the numpy engine's (every agent sends, so the counts are
    deterministic even where the channel draws)."""
    options, kwargs = END_TO_END[case]
    kw = {
        "num_agents": 6,
        "num_arms": 3,
        "horizon": 30,
        "c1": 5.0,
        "c2": 2.0,
        "channels": {"c": {"dim": DIM, **options}},
        **kwargs,
    }
    runs, steps = 4, 12
    env = fj.make(ENV_ID, **kw)
    n = env.num_agents
    payload = np.arange(n * DIM, dtype=np.float32).reshape(n, DIM)
    action = Action(jnp.zeros(n, jnp.int32), {"c": (jnp.ones(n, bool), jnp.asarray(payload))})
    keys = jax.random.split(jax.random.PRNGKey(0), runs)
    _, state = jax.jit(jax.vmap(env.reset))(keys)
    step = jax.jit(jax.vmap(env.step, in_axes=(0, 0, None)))
    for t in range(steps):
        step_keys = jax.random.split(jax.random.PRNGKey(t + 1), runs)
        obs, state, _, _, _ = step(step_keys, state, action)
    assert not np.asarray(state.error).any()
    delivery = jax.tree.map(lambda x: np.asarray(x)[0], obs.deliveries["c"])  # run 0

    venv = fedbandit_env.make_vec(ENV_ID, num_runs=runs, **kw)
    venv.reset(seed=0)
    for _ in range(steps):
        numpy_obs, *_, info = venv.step(
            np.zeros((runs, n), np.int64),
            {"c": (np.ones((runs, n), bool), np.broadcast_to(payload, (runs, n, DIM)))},
        )
    if venv.channels["c"].kind != "gossip":  # the last step's delivery, where it is drawn-free
        want = numpy_view(venv.channels["c"], numpy_obs.deliveries["c"])
        for k, v in want.items():
            np.testing.assert_allclose(delivery._asdict()[k], v, rtol=1e-5, err_msg=k)
    total = info.ledger.total
    np.testing.assert_array_equal(count_value(state.ledger.messages), total.messages)
    np.testing.assert_array_equal(count_value(state.ledger.floats), total.floats)
    np.testing.assert_allclose(total_value(state.ledger.cost), total.cost, rtol=1e-6)
    assert total.messages.sum() > 0
