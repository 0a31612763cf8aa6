"""The robust reductions of fedbandit_env/network/robust.py, one source for both engines, in the
JAX ``neighbors`` and ``server`` channels (float32, under jit, Weiszfeld in a ``lax.while_loop``)
against the numpy channels (float64):
the same values, counts, ``degenerate`` flags and charges step by step under jit, with the JAX
channel's drops, participation and random grouping replayed into the twin; the delivery's pytree
is the same at reset and after a step; and the channels step inside the JAX environment like the
numpy engine."""

from __future__ import annotations

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402

import fedbandit_env  # noqa: E402
import fedbandit_env.jax as fj  # noqa: E402
from fedbandit_env.jax.types import Action  # noqa: E402
from fedbandit_env.network import make_channel  # noqa: E402
from fedbandit_env.seeding import BatchedRNG  # noqa: E402

ENV_ID = "FedBandit/Heterogeneous-v0"
STEPS = 12
DIM = 3
REDUCTIONS = {
    "median": ("median", {}),
    "trimmed_mean": ("trimmed_mean", {}),
    "trimmed_mean-2": ("trimmed_mean", {"trim": 2}),
    "median_of_means-2": ("median_of_means", {"group_size": 2}),
    "median_of_means-3-random": ("median_of_means", {"group_size": 3, "grouping": "random"}),
    "geometric_median": ("geometric_median", {}),
}
GRAPHS = {
    "ring": {"topology": "ring", "num_agents": 7},
    "complete": {"topology": "complete", "num_agents": 6},
    "random_regular": {"topology": "random_regular", "num_agents": 8,
                       "topology_kwargs": {"degree": 5}},
}  # fmt: skip


def channel_pair(options, **kwargs):
    """The numpy channel (one run) and the JAX channel of one configuration, built by the two
    backends' ``make`` from the same options."""
    env = fj.make(ENV_ID, num_arms=3, horizon=40, channels={"c": {"dim": DIM, **options}},
                  c1=5.0, c2=2.0, **kwargs)  # fmt: skip
    config = env.config
    twin = make_channel("c", config.channels["c"], config.topology, config.c1, config.c2)
    twin.reset(BatchedRNG.for_runs([0], "network").child("channel/c"))
    return twin, env.channels["c"]


def messages_of(n, seed=1, integer=False):
    """Send masks (T, N) (one step in which nobody sends) and float32 payloads (T, N, dim);
    integer payloads make ties."""
    rng = np.random.default_rng(seed)
    send = rng.random((STEPS, n)) < 0.75
    send[STEPS // 3] = False
    payload = rng.normal(size=(STEPS, n, DIM)) * 3
    return send, (np.round(payload) if integer else payload).astype(np.float32)


def run_jax(twin, channel, keys, send, payload):
    """``channel.transmit`` over T steps of one run, a jitted scan: stacked deliveries, charges
    and the draws (:func:`jax_draws`) of each step."""

    def steps(keys, send, payload):
        def body(state, x):
            key, send, payload = x
            delivery, state, charge = channel.transmit(key, state, send, payload)
            return state, (delivery, charge, jax_draws(twin, channel, key))

        return jax.lax.scan(body, channel.init(), (keys, send, payload))[1]

    out = jax.jit(steps)(keys, jnp.asarray(send), jnp.asarray(payload))
    return jax.tree.map(np.asarray, out)


class Replay:
    """Stands in for a numpy channel's buffered uniform stream: this step's draws of run 0."""

    value: np.ndarray

    def next(self, *args):
        return np.asarray(self.value, np.float64)[None]


def jax_draws(twin, channel, key):
    """What the JAX channel draws with the step's ``key``: drop uniforms as 1 where the message
    was kept and 0 where it was lost, and the grouping's uniforms (zeros where it draws none)."""
    if twin.kind == "neighbors":
        shape = channel.senders.shape
        k_drop, k_group = channel.keys(key)
    else:
        shape = (channel.num_agents,)
        _, k_drop, k_group = channel.keys(key)
    kept = channel.kept(k_drop, shape)
    order = channel.group_order(k_group)
    return (jnp.ones(shape) if kept is None else kept.astype(jnp.float32),
            jnp.zeros(shape) if order is None else order)  # fmt: skip


def replay_draws(twin, draws, t, step_delivery):
    """Set the twin's streams to the JAX draws of step ``t``; the participation as uniforms 0
    for the agents the JAX channel picked and 1 for the others."""
    kept, order = draws
    if getattr(twin, "_pick", None) is not None:
        twin._pick.value = np.where(step_delivery.participating, 0.0, 1.0)
    if twin._drops is not None:
        twin._drops.value = kept[t]
    if twin._groups is not None:
        twin._groups.value = order[t]


def install_replays(twin):
    for name in ("_drops", "_groups", "_pick"):
        if getattr(twin, name, None) is not None:
            setattr(twin, name, Replay())


def assert_same_steps(twin, channel, reduce, send, payload, seed=0):
    keys = jax.random.split(jax.random.PRNGKey(seed), STEPS)
    delivery, charge, draws = run_jax(twin, channel, keys, send, payload)
    install_replays(twin)
    value_field = "value" if twin.kind == "neighbors" else "aggregate"
    tol = 2e-5 if reduce == "geometric_median" else 2e-6
    heard = 0
    for t in range(STEPS):
        step = type(delivery)(*(v[t] for v in delivery))
        replay_draws(twin, draws, t, step)
        d, c = twin.transmit(t + 1, send[t][None], payload[t][None].astype(np.float64))
        np.testing.assert_array_equal(step.count, d.count[0], err_msg=f"count step {t}")
        np.testing.assert_array_equal(step.degenerate, d.degenerate[0], err_msg=f"step {t}")
        want = getattr(d, value_field)[0]
        np.testing.assert_allclose(getattr(step, value_field), want, rtol=tol,
                                   atol=tol * max(1.0, np.abs(want).max()),
                                   err_msg=f"{reduce} step {t}")  # fmt: skip
        np.testing.assert_array_equal(charge.messages[t], c.messages[0], err_msg=f"step {t}")
        np.testing.assert_array_equal(charge.floats[t], c.floats[0], err_msg=f"step {t}")
        np.testing.assert_array_equal(charge.cost[t], c.cost[0], err_msg=f"step {t}")
        assert int(charge.dropped[t]) == int(c.dropped[0]), t
        heard += int(np.sum(d.count))
    assert heard > 0
    return delivery


@pytest.mark.parametrize("graph", sorted(GRAPHS))
@pytest.mark.parametrize("case", sorted(REDUCTIONS))
def test_neighbors_twin_gives_the_numpy_values(graph, case):
    reduce, options = REDUCTIONS[case]
    twin, channel = channel_pair(
        {"kind": "neighbors", "reduce": reduce, "drop_prob": 0.3, **options}, **GRAPHS[graph]
    )
    send, payload = messages_of(twin.num_agents, integer=graph == "complete")
    delivery = assert_same_steps(twin, channel, reduce, send, payload)
    if reduce == "trimmed_mean" and graph == "ring":  # at most two neighbours: degenerate
        assert delivery.degenerate.any()


@pytest.mark.parametrize("case", sorted(REDUCTIONS))
def test_server_twin_gives_the_numpy_values(case):
    reduce, options = REDUCTIONS[case]
    integer = case in ("median", "trimmed_mean-2", "median_of_means-2")  # ties
    twin, channel = channel_pair(
        {"kind": "server", "aggregate": reduce, "drop_prob": 0.3, "participation": 0.7,
         **options},
        num_agents=9,
    )  # fmt: skip
    send, payload = messages_of(twin.num_agents, seed=2, integer=integer)
    assert_same_steps(twin, channel, reduce, send, payload, seed=3)


def test_trimmed_mean_flags_degenerate_steps_on_jax():
    """trim 2 over at most 4 uploads: every step that heard anything fell back to the median."""
    twin, channel = channel_pair(
        {"kind": "server", "aggregate": "trimmed_mean", "trim": 2}, num_agents=4
    )
    send, payload = messages_of(4)
    delivery = assert_same_steps(twin, channel, "trimmed_mean", send, payload)
    np.testing.assert_array_equal(delivery.degenerate, delivery.count > 0)


@pytest.mark.parametrize("kind", ["neighbors", "server"])
@pytest.mark.parametrize("case", sorted(REDUCTIONS) + ["sum"])
def test_delivery_pytree_is_the_same_at_reset_and_after_a_step(kind, case):
    reduce, options = REDUCTIONS.get(case, ("sum", {}))
    field = "reduce" if kind == "neighbors" else "aggregate"
    _, channel = channel_pair({"kind": kind, field: reduce, **options}, num_agents=5)
    n = channel.num_agents
    transmit = jax.jit(lambda key, send, payload: channel.transmit(key, (), send, payload)[0])
    if kind == "server":
        transmit = jax.jit(lambda key, send, payload: channel.transmit(key, 0, send, payload)[0])
    delivery = transmit(jax.random.PRNGKey(0), jnp.ones(n, bool), jnp.ones((n, DIM), jnp.float32))
    empty = channel.empty()
    assert jax.tree.structure(empty) == jax.tree.structure(delivery)
    for a, b in zip(jax.tree.leaves(empty), jax.tree.leaves(delivery), strict=True):
        assert a.shape == b.shape and a.dtype == b.dtype


END_TO_END = {
    "neighbors-trimmed_mean": {"kind": "neighbors", "reduce": "trimmed_mean"},
    "neighbors-geometric_median": {"kind": "neighbors", "reduce": "geometric_median"},
    "server-median_of_means": {"kind": "server", "aggregate": "median_of_means", "group_size": 2},
    "server-median": {"kind": "server", "aggregate": "median"},
}


@pytest.mark.parametrize("case", sorted(END_TO_END))
def test_robust_channel_steps_in_the_jax_env_like_the_numpy_engine(case):
    """Every agent pulls arm 0 and sends every step under ``jit(vmap(env.step))``: the last
    delivery equals the numpy engine's (nothing is drawn), and so do the ledger's messages."""
    kw = {"num_agents": 6, "num_arms": 3, "horizon": 30, "topology": "random_regular",
          "topology_kwargs": {"degree": 3}, "channels": {"c": {"dim": DIM, **END_TO_END[case]}}}  # fmt: skip
    runs, steps = 2, 4
    env = fj.make(ENV_ID, **kw)
    n = env.num_agents
    payload = (np.arange(n * DIM, dtype=np.float32).reshape(n, DIM) % 5) ** 2
    action = Action(jnp.zeros(n, jnp.int32), {"c": (jnp.ones(n, bool), jnp.asarray(payload))})
    _, state = jax.jit(jax.vmap(env.reset))(jax.random.split(jax.random.PRNGKey(0), runs))
    step = jax.jit(jax.vmap(env.step, in_axes=(0, 0, None)))
    for t in range(steps):
        obs, state, _, _, _ = step(jax.random.split(jax.random.PRNGKey(t + 1), runs), state, action)
    assert not np.asarray(state.error).any()
    got = jax.tree.map(lambda x: np.asarray(x)[0], obs.deliveries["c"])

    venv = fedbandit_env.make_vec(ENV_ID, num_runs=runs, **kw)
    venv.reset(seed=0)
    for _ in range(steps):
        numpy_obs, *_ = venv.step(
            np.zeros((runs, n), np.int64),
            {"c": (np.ones((runs, n), bool), np.broadcast_to(payload, (runs, n, DIM)))},
        )
    want = numpy_obs.deliveries["c"]
    for k, v in vars(want).items():
        np.testing.assert_allclose(got._asdict()[k], np.asarray(v)[0], rtol=2e-4, atol=2e-4,
                                   err_msg=k)  # fmt: skip
