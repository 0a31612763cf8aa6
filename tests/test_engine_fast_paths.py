"""The engine's and channels' per-step fast paths (docs/bench.md, "Speed and scale") against the
straightforward forms they replace: same numbers, bit for bit, and the same random stream use.

* rewards, expected rewards and regret gathered at flat positions equal the (run, agent, arm)
  gathers and the per-step subtraction ``best - expected``, also after the means are edited in
  place;
* buffered streams drawn in place per run and transposed once equal the stacked per-run draws;
* the ``neighbors`` slot loop when every agent sends equals the masked loop (and the padded
  reduction), isolated agents included;
* the ``gossip`` channel on flat (run, agent) indices equals the 2-D indexed form;
* a channel nobody sends on and that draws nothing is skipped: zero step charge, totals kept;
* an all-True send mask reaches the channel as its shared read-only ``everyone`` mask, and the
  ``neighbors`` channel's constant charge of an everyone-sends step is shared read-only, the
  engine adding other channels' charges into a new one;
* ``LaplaceStream.next_at`` equals ``next()`` at those positions;
* the arm check still names the first bad arm.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fedbandit_env
from fedbandit_env.errors import ActionError
from fedbandit_env.graphs import Topology
from fedbandit_env.network import NeighborsChannel
from fedbandit_env.network.gossip import GossipChannel, GossipDelivery
from fedbandit_env.network.ledger import AGENT_AGENT
from fedbandit_env.privacy._random import LaplaceStream
from fedbandit_env.seeding import BatchedRNG, BufferedStream
from tests.helpers import assert_tree_equal


# ----------------------------------------------------------------------------- rewards
@pytest.mark.parametrize("env_id", ["FedBandit/Homogeneous-v0", "FedBandit/Heterogeneous-v0"])
def test_flat_gathers_equal_the_indexed_gathers(env_id):
    venv = fedbandit_env.make_vec(env_id, num_runs=4, num_agents=5, num_arms=6, horizon=50)
    venv.reset(seed=3)
    engine = venv.engine
    engine.means[:, 2, :] = 1.0 - engine.means[:, 2, :]  # edited in place, as tests do
    rng = np.random.default_rng(0)
    b, i = np.indices((4, 5))
    twin = fedbandit_env.make_vec(env_id, num_runs=4, num_agents=5, num_arms=6, horizon=50)
    twin.reset(seed=3)
    twin.engine.means[:, 2, :] = 1.0 - twin.engine.means[:, 2, :]
    for _ in range(30):
        arms = rng.integers(0, 6, (4, 5))
        rewards, expected, regret = engine._draw(arms)
        noise = twin.engine._noise.next()
        old_rewards = twin.engine.config.reward.sample(twin.engine.means[b, i, arms], noise)
        old_expected = twin.engine.global_expected[b, arms]
        old_regret = twin.engine.best_expected[:, None] - old_expected
        assert np.array_equal(rewards, old_rewards)
        assert np.array_equal(expected, old_expected)
        assert np.array_equal(regret, old_regret)


# ----------------------------------------------------------------------------- streams
def _stacked(generators, kind, shape, chunk):
    draw = {
        "uniform": lambda g: g.random((chunk, *shape)),
        "normal": lambda g: g.standard_normal((chunk, *shape)),
        "exponential": lambda g: g.standard_exponential((chunk, *shape)),
    }[kind]
    return np.stack([draw(g) for g in generators], axis=1)


@pytest.mark.parametrize("kind", ["uniform", "normal", "exponential"])
@pytest.mark.parametrize("shape", [(), (4,), (2, 3)])
def test_buffered_refill_equals_the_stacked_draws(kind, shape):
    seqs = [np.random.SeedSequence(s) for s in (1, 2, 3)]
    stream = BufferedStream([np.random.Generator(np.random.PCG64(s)) for s in seqs], kind, shape)
    gens = [np.random.Generator(np.random.PCG64(s)) for s in seqs]
    expected = np.concatenate([_stacked(gens, kind, shape, stream.chunk) for _ in range(2)])
    got = np.stack([stream.next() for _ in range(2 * stream.chunk)])
    assert np.array_equal(got, expected)
    assert all(stream.next().flags.c_contiguous for _ in range(3))


@pytest.mark.parametrize("runs", [1, 3])
@pytest.mark.parametrize("shape", [(), (4,), (2, 3)])
def test_buffered_outputs_are_never_written_again(runs, shape):
    """The rows are drawn into again at every chunk: the steps handed out (kept by callers)
    must stay as they were, also for one run (where a transposed block is contiguous)."""
    seqs = [np.random.SeedSequence(s) for s in range(runs)]
    stream = BufferedStream(
        [np.random.Generator(np.random.PCG64(s)) for s in seqs], "uniform", shape
    )
    kept = [stream.next() for _ in range(3 * stream.chunk + 1)]
    copies = [k.copy() for k in kept]
    for _ in range(2 * stream.chunk):
        stream.next()
    assert all(np.array_equal(k, c) for k, c in zip(kept, copies, strict=True))
    assert len({k.tobytes() for k in kept}) == len(kept)  # fresh draws, not one buffer reused


@pytest.mark.parametrize("block", [False, True], ids=["per_run", "block_streams"])
def test_laplace_next_at_equals_next_at_the_positions(block):
    """Also under the audits' block streams, whose stream holds one Generator for all runs."""
    from fedbandit_env.seeding import BlockRNG

    make = BlockRNG.for_batch if block else BatchedRNG.for_runs
    a = LaplaceStream(make([5, 6, 7], "agents"), (4, 3))
    b = LaplaceStream(make([5, 6, 7], "agents"), (4, 3))
    rng = np.random.default_rng(1)
    for step in range(200):
        flat = np.ravel_multi_index(
            (np.arange(3)[:, None], np.arange(4)[None, :], rng.integers(0, 3, (3, 4))), (3, 4, 3)
        )
        if step % 2:  # a few positions (gathered) as well as one per row (subtracted, taken)
            flat = flat.reshape(-1)[rng.random(12) < 0.2]
        assert np.array_equal(a.next_at(flat), b.next().reshape(-1)[flat])


# ----------------------------------------------------------------------------- neighbors
TOPOLOGIES = {
    "ring": lambda: Topology.from_graph("ring", 9),
    "star": lambda: Topology.from_graph("star", 7),
    "grid": lambda: Topology.from_graph("grid", 12),
    "path_with_isolated": lambda: Topology.hybrid([4, 1, 3], "path"),
    "complete": lambda: Topology.from_graph("complete", 6),
}


@pytest.mark.parametrize("kind", sorted(TOPOLOGIES))
@pytest.mark.parametrize("reduce", ["sum", "mean", "max"])
def test_everyone_sends_path_equals_the_padded_reduction(kind, reduce):
    topo = TOPOLOGIES[kind]()
    kw = {"c1": 1.0, "c2": 2.0}
    padded = NeighborsChannel("n", topo, 3, **kw)
    agg = NeighborsChannel("n", topo, 3, reduce=reduce, **kw)
    for ch in (padded, agg):
        ch.reset(BatchedRNG.for_runs([4, 5], "network").child("channel/n"))
    rng = np.random.default_rng(7)
    send = np.ones((2, topo.num_agents), dtype=bool)
    for step in range(1, 4):
        payload = rng.standard_normal((2, topo.num_agents, 3)) * 10.0 ** rng.integers(-5, 5)
        ref, ref_charge = padded.transmit(step, send, payload)
        value, count = agg._slot_loop(send, payload, None, True)  # the loop itself, any graph
        got, charge = agg.transmit(step, send, payload)
        mask = ref.mask
        if reduce == "max":
            want = np.where(mask[..., None], ref.payload, -np.inf).max(axis=2)
            want[mask.sum(axis=2) == 0] = 0.0
        else:
            want = np.where(mask[..., None], ref.payload, 0.0).sum(axis=2)
        if reduce == "mean":
            want = want / np.maximum(mask.sum(axis=2), 1)[..., None]
            value = value / np.maximum(count, 1)[..., None]
        assert np.array_equal(count, mask.sum(axis=2))
        assert np.array_equal(value, want)
        assert np.array_equal(got.value, want)
        assert np.array_equal(got.count, count)
        slot_loop = agg._csr is None and not (agg._cliques and reduce == "max")
        if slot_loop:  # the slot loop's counts: one read-only array for every such step
            assert not got.count.flags.writeable
        for field in ("messages", "floats", "cost", "dropped", "sent"):
            assert np.array_equal(getattr(charge, field), getattr(ref_charge, field))


@pytest.mark.parametrize("kind", ["ring", "grid", "complete"])
def test_padded_everyone_path_equals_the_masked_path(kind):
    """Every agent sends on a regular graph: the padded delivery without masking equals the
    general masked path (forced here), delivery and charge."""
    topo = TOPOLOGIES[kind]()
    fast, slow = (NeighborsChannel("n", topo, 3, c1=1.0, c2=2.5) for _ in range(2))
    slow._all_valid = False  # the general path
    for ch in (fast, slow):
        ch.reset(BatchedRNG.for_runs([4, 5], "network").child("channel/n"))
    rng = np.random.default_rng(3)
    send = np.ones((2, topo.num_agents), dtype=bool)
    for step in range(1, 4):
        payload = rng.standard_normal((2, topo.num_agents, 3)) * 10.0 ** rng.integers(-5, 5)
        got, charge = fast.transmit(step, send, payload)
        want, want_charge = slow.transmit(step, send, payload)
        for field in ("senders", "mask", "payload"):
            a, b = getattr(got, field), getattr(want, field)
            assert a.dtype == b.dtype and np.array_equal(a, b), field
        for field in ("messages", "floats", "cost", "dropped", "sent"):
            assert np.array_equal(getattr(charge, field), getattr(want_charge, field)), field


# ----------------------------------------------------------------------------- gossip
def _old_gossip_transmit(ch: GossipChannel, send, payload):
    """The 2-D indexed form the flat one replaced."""
    edge = ch.active_edges(ch._edge_u.next())
    drop_u = ch._drops.next() if ch._drops is not None else None
    rows = np.arange(ch.num_runs)
    a, c = edge[:, 0], edge[:, 1]
    d = ch.empty_delivery()
    d.partner[rows, a] = c
    d.partner[rows, c] = a
    a_sends, c_sends = send[rows, a], send[rows, c]
    to_c, to_a = a_sends.copy(), c_sends.copy()
    if drop_u is not None:
        to_c &= drop_u[:, 0] >= ch.drop_prob
        to_a &= drop_u[:, 1] >= ch.drop_prob
    d.received[rows, a] = to_a
    d.received[rows, c] = to_c
    d.payload[rows, a] = np.where(to_a[:, None], payload[rows, c], 0.0)
    d.payload[rows, c] = np.where(to_c[:, None], payload[rows, a], 0.0)
    charge = ch._charge()
    count = a_sends.astype(np.int64) + c_sends
    charge.messages[:, AGENT_AGENT] = count
    charge.floats[:, AGENT_AGENT] = count * ch.dim
    charge.cost[:, AGENT_AGENT] = ch.c2 * count
    charge.dropped[:] = count - to_a - to_c
    charge.sent[rows, a] = a_sends
    charge.sent[rows, c] = c_sends
    return d, charge


@settings(max_examples=25, deadline=None)
@given(
    n=st.integers(2, 9),
    drop=st.sampled_from([0.0, 0.4]),
    p_send=st.sampled_from([0.3, 1.0]),
    seed=st.integers(0, 2**16),
)
def test_flat_gossip_equals_the_indexed_form(n, drop, p_send, seed):
    topo = Topology.from_graph("ring" if n > 2 else "path", n)
    new = GossipChannel("g", topo, 2, c1=1.0, c2=3.0, drop_prob=drop)
    old = GossipChannel("g", topo, 2, c1=1.0, c2=3.0, drop_prob=drop)
    for ch in (new, old):
        ch.reset(BatchedRNG.for_runs([seed, seed + 1, seed + 2], "network").child("channel/g"))
    rng = np.random.default_rng(seed)
    for step in range(1, 8):
        send = rng.random((3, n)) < p_send
        payload = rng.standard_normal((3, n, 2))
        got, charge = new.transmit(step, send, payload)
        want, want_charge = _old_gossip_transmit(old, send, payload)
        assert isinstance(got, GossipDelivery)
        for field in ("partner", "received", "payload"):
            assert np.array_equal(getattr(got, field), getattr(want, field)), field
            assert getattr(got, field).dtype == getattr(want, field).dtype
        for field in ("messages", "floats", "cost", "dropped", "sent"):
            assert np.array_equal(getattr(charge, field), getattr(want_charge, field)), field


# ----------------------------------------------------------------------------- idle channels
def test_an_idle_channel_without_drops_is_skipped_and_charges_nothing():
    venv = fedbandit_env.make_vec(
        "FedBandit/Homogeneous-v0",
        num_runs=2,
        num_agents=4,
        num_arms=3,
        horizon=5,
        channels={"n": {"kind": "neighbors", "dim": 2}},
    )
    venv.reset(seed=0)
    arms = np.zeros((2, 4), dtype=np.int64)
    obs, *_, info = venv.step(arms, {"n": np.ones((2, 4, 2))})
    sent = info.ledger.total.messages.copy()
    assert sent[:, AGENT_AGENT].sum() > 0
    obs, *_, info = venv.step(arms)  # nobody sends
    assert not info.ledger.step.messages.any() and not info.ledger.step.sent.any()
    assert np.array_equal(info.ledger.total.messages, sent)
    assert_tree_equal(vars(obs.deliveries["n"]), vars(venv.channels["n"].empty_delivery()))
    assert venv.channels["n"].idle_is_free


def _ring_env(**channels):
    return fedbandit_env.make_vec(
        "FedBandit/Homogeneous-v0", num_runs=3, num_agents=5, num_arms=3, horizon=9,
        topology="ring", c2=2.5, channels=channels,
    )


def test_an_all_true_mask_is_the_channels_shared_everyone_mask():
    """A learner's all-True send mask (or a payload without a mask) reaches the channel as the
    channel's own read-only ``everyone`` array; a mask with a False is passed as it is."""
    venv = _ring_env(n={"kind": "neighbors", "dim": 2})
    venv.reset(seed=0)
    engine, channel = venv.engine, venv.channels["n"]
    payload = np.ones((3, 5, 2))
    assert not channel.everyone.flags.writeable and channel.everyone.all()
    ones = np.ones((3, 5), dtype=np.int64)  # 0/1 integers are masks too
    for message in (payload, (np.ones((3, 5), dtype=bool), payload), (ones, payload)):
        send, _ = engine._check_messages({"n": message})["n"]
        assert send is channel.everyone
    partial = np.ones((3, 5), dtype=bool)
    partial[1, 2] = False
    send, _ = engine._check_messages({"n": (partial, payload)})["n"]
    assert send is partial


def test_constant_charges_are_shared_read_only_and_added_into_a_new_one():
    """Every agent sends on two neighbors channels and a gossip channel: the neighbors
    channels hand out their read-only constant charge, the engine adds the others into a new one,
    and the ledger counts exactly what the channels carried (a ring of 5: 10 directed messages
    per neighbors channel, 2 per gossip edge, in every run and step)."""
    venv = _ring_env(
        a={"kind": "neighbors", "dim": 2},
        b={"kind": "neighbors", "dim": 3, "reduce": "sum"},
        g={"kind": "gossip", "dim": 1},
    )
    venv.reset(seed=4)
    full = venv.channels["a"]._full_charge
    kept = {field: array.copy() for field, array in vars(full).items()}
    arms = np.zeros((3, 5), dtype=np.int64)
    messages = {"a": np.ones((3, 5, 2)), "b": np.ones((3, 5, 3)), "g": np.ones((3, 5, 1))}
    for step in range(1, 5):
        info = venv.step(arms, messages)[-1]
        assert full.frozen and info.ledger.step is not full
        for field in ("messages", "floats", "cost", "dropped", "sent"):
            assert np.array_equal(getattr(full, field), kept[field]), field
        per_step = {"messages": 10 + 10 + 2, "floats": 10 * 2 + 10 * 3 + 2 * 1}
        for field, value in per_step.items():
            assert (getattr(info.ledger.step, field)[:, AGENT_AGENT] == value).all(), field
            assert (getattr(info.ledger.total, field)[:, AGENT_AGENT] == step * value).all()
        assert (info.ledger.total.cost[:, AGENT_AGENT] == step * 2.5 * 22).all()
        assert (info.ledger.total.sent.sum(axis=1) == step * 22).all()
    # one channel alone: its constant charge is the step's charge, the totals still add up
    solo = _ring_env(a={"kind": "neighbors", "dim": 2})
    solo.reset(seed=4)
    for step in range(1, 4):
        info = solo.step(arms, {"a": np.ones((3, 5, 2))})[-1]
        assert info.ledger.step is solo.channels["a"]._full_charge
        assert (info.ledger.total.messages[:, AGENT_AGENT] == step * 10).all()


@pytest.mark.parametrize(
    "spec",
    [
        {"kind": "server", "dim": 2},
        {"kind": "flood", "dim": 2},
        {"kind": "neighbors", "dim": 2},
    ],
)
def test_idle_deliveries_are_read_only_and_a_rebound_field_stays_with_its_step(spec):
    """An idle step's delivery is the channel's empty delivery with read-only arrays, shared
    between idle steps of one batch; a learner that rebinds one of its fields changes only that
    step's record."""
    venv = fedbandit_env.make_vec(
        "FedBandit/Homogeneous-v0", num_runs=2, num_agents=4, num_arms=3, horizon=5,
        channels={"c": spec},
    )
    venv.reset(seed=0)
    arms = np.zeros((2, 4), dtype=np.int64)
    first = venv.step(arms)[0].deliveries["c"]
    assert_tree_equal(vars(first), vars(venv.channels["c"].empty_delivery()))
    arrays = [v for v in vars(first).values() if isinstance(v, np.ndarray)]
    assert arrays and not any(a.flags.writeable for a in arrays)
    name = next(k for k, v in vars(first).items() if isinstance(v, np.ndarray))
    setattr(first, name, "rebound")
    second = venv.step(arms)[0].deliveries["c"]
    assert isinstance(getattr(second, name), np.ndarray)
    assert_tree_equal(vars(second), vars(venv.channels["c"].empty_delivery()))


def test_a_channel_with_drops_still_draws_when_idle():
    kw = dict(num_runs=1, num_agents=4, num_arms=3, horizon=6)
    channels = {"n": {"kind": "neighbors", "dim": 1, "drop_prob": 0.5}}
    a = fedbandit_env.make_vec("FedBandit/Homogeneous-v0", channels=channels, **kw)
    b = fedbandit_env.make_vec("FedBandit/Homogeneous-v0", channels=channels, **kw)
    assert not a.channels["n"].idle_is_free
    a.reset(seed=1)
    b.reset(seed=1)
    arms = np.zeros((1, 4), dtype=np.int64)
    a.step(arms)  # idle step: the drop draws of step 1 are consumed
    b.step(arms, {"n": (np.zeros((1, 4), dtype=bool), np.zeros((1, 4, 1)))})
    ones = np.ones((1, 4, 1))
    oa, *_ = a.step(arms, {"n": ones})
    ob, *_ = b.step(arms, {"n": ones})
    assert np.array_equal(oa.deliveries["n"].mask, ob.deliveries["n"].mask)


# ----------------------------------------------------------------------------- arm check
@pytest.mark.parametrize(
    ("arms", "bad"),
    [
        (np.array([[0, 1], [2, -1]]), "run 1, agent_1: arm: expected an int in [0, 2], got -1"),
        (np.array([[0, 3], [2, 1]], dtype=np.int32), "run 0, agent_1: arm: expected an int in"),
        (np.array([[0, 1], [2**64 - 1, 1]], dtype=np.uint64), "run 1, agent_0: arm"),
    ],
)
def test_the_arm_check_names_the_first_bad_arm(arms, bad):
    venv = fedbandit_env.make_vec(
        "FedBandit/Homogeneous-v0", num_runs=2, num_agents=2, num_arms=3, horizon=5
    )
    venv.reset(seed=0)
    with pytest.raises(ActionError, match=bad.replace("[", r"\[").replace("]", r"\]")):
        venv.step(arms)


def test_small_integer_arms_are_accepted_and_copied():
    venv = fedbandit_env.make_vec(
        "FedBandit/Homogeneous-v0", num_runs=1, num_agents=3, num_arms=3, horizon=5
    )
    venv.reset(seed=0)
    arms = np.array([[0, 2, 1]], dtype=np.uint8)
    obs, *_ = venv.step(arms)
    arms[0, 0] = 1
    assert obs.last_arm.dtype == np.int64 and obs.last_arm.tolist() == [[0, 2, 1]]


@settings(max_examples=30, deadline=None)
@given(
    fast=st.integers(0, 70),
    kind=st.sampled_from(["uniform", "normal", "exponential"]),
    seed=st.integers(0, 2**16),
)
def test_buffered_runs_stay_exact_when_they_diverge(fast, kind, seed):
    """``fast`` common steps (handed out by blocks), then steps where only some runs consume:
    every run sees its own stream in order, as if drawn alone."""
    shape = (300,)  # chunk 54 steps, blocks of 18 for three runs
    seqs = [np.random.SeedSequence(s) for s in (seed, seed + 1, seed + 2)]
    stream = BufferedStream([np.random.Generator(np.random.PCG64(s)) for s in seqs], kind, shape)
    alone = [BufferedStream([np.random.Generator(np.random.PCG64(s))], kind, shape) for s in seqs]
    assert stream.block < stream.chunk
    rng = np.random.default_rng(seed)
    for _ in range(fast):
        got = stream.next()
        for b, one in enumerate(alone):
            assert np.array_equal(got[b], one.next()[0])
    for _ in range(80):
        advance = rng.random(3) < 0.6
        got = stream.next(advance)
        for b, one in enumerate(alone):
            want = one.next(np.array([advance[b]]))[0]
            assert np.array_equal(got[b], want)


IDLE_FREE_CHANNELS = [
    {"kind": "server", "dim": 2},
    {"kind": "server", "dim": 2, "aggregate": "sum", "charge_broadcast": True},
    {"kind": "hierarchical", "dim": 2},
    {"kind": "hierarchical", "dim": 2, "aggregate": "unweighted", "cost_model": "path"},
    {"kind": "flood", "dim": 2, "ttl": 3},
    {"kind": "neighbors", "dim": 2, "reduce": "sum"},
]


@pytest.mark.parametrize("spec", IDLE_FREE_CHANNELS, ids=lambda s: s["kind"])
@pytest.mark.parametrize("silent_as", ["absent", "all_false"])
def test_skipping_idle_steps_equals_transmitting_them(spec, silent_as):
    """Sparse senders, many silent steps: the engine that skips a channel's idle steps (no
    message given, or a send mask with no True) delivers, charges and totals exactly what the
    channel's own ``transmit`` gives on every step; the channel says when it may be skipped
    (a hierarchical aggregate or a flood message still in flight keeps it busy)."""
    kw = dict(num_runs=3, num_agents=6, num_arms=3, horizon=60, topology="ring")
    skip = fedbandit_env.make_vec("FedBandit/Homogeneous-v0", channels={"c": spec}, **kw)
    every = fedbandit_env.make_vec("FedBandit/Homogeneous-v0", channels={"c": spec}, **kw)
    every.engine.channels["c"] = _NeverIdle(every.channels["c"])
    skip.reset(seed=5)
    every.reset(seed=5)
    rng = np.random.default_rng(1)
    skipped = 0
    for t in range(60):
        arms = rng.integers(0, 3, (3, 6))
        send = (rng.random((3, 6)) < 0.15) & (t % 7 == 0)
        payload = rng.normal(size=(3, 6, 2))
        if send.any():
            messages = {"c": (send, payload)}
        else:
            messages = {} if silent_as == "absent" else {"c": (send, payload)}
            skipped += skip.channels["c"].idle_is_free
        a = skip.step(arms, messages)
        b = every.step(arms, messages)
        assert_tree_equal(vars(a[0].deliveries["c"]), vars(b[0].deliveries["c"]))
        for name in ("messages", "floats", "cost", "dropped", "sent"):
            assert np.array_equal(getattr(a[-1].ledger.step, name), getattr(b[-1].ledger.step, name))
            assert np.array_equal(getattr(a[-1].ledger.total, name), getattr(b[-1].ledger.total, name))
    assert skipped > 20  # the comparison covered skipped steps


class _NeverIdle:
    """A channel wrapper that is never skipped (the engine calls ``transmit`` every step)."""

    idle_is_free = False

    def __init__(self, channel):
        self._channel = channel

    def __getattr__(self, name):
        return getattr(self._channel, name)


def test_all_pull_steps_after_communication_steps_equal_the_mixed_step():
    """Once runs have diverged (communication steps), a step in which every run pulls and
    none has finished takes the pull loop's lean path: the same observation, rewards, regret,
    ledger and random stream use as the general mixed step."""
    kw = dict(num_runs=4, num_agents=5, num_arms=3, horizon=40)
    channels = {"c": {"kind": "server", "dim": 2, "participation": 0.6}}
    lean = fedbandit_env.make_vec("FedBandit/Homogeneous-v0", channels=channels, **kw)
    mixed = fedbandit_env.make_vec("FedBandit/Homogeneous-v0", channels=channels, **kw)
    general = mixed.engine._step_mixed
    mixed.engine._step_all = lambda arms, messages, live=False: (  # never the lean path
        general(arms, messages, np.ones(4, dtype=bool))
        if live
        else type(mixed.engine)._step_all(mixed.engine, arms, messages)
    )
    lean.reset(seed=2)
    mixed.reset(seed=2)
    rng = np.random.default_rng(3)
    lean_steps = 0
    while not lean.engine.truncated:
        arms = rng.integers(0, 3, (4, 5))
        pull = rng.random(4) < 0.8 if rng.random() < 0.3 else np.ones(4, dtype=bool)
        if pull.all() and rng.random() < 0.5:
            pull = None  # "every run pulls" said without an array
        messages = {"c": rng.normal(size=(4, 5, 2))}
        every = pull is None or pull.all()
        lean_steps += (not lean.engine.even) and every and lean.engine.pulls.max() < 40
        a, b = lean.step(arms, messages, pull), mixed.step(arms, messages, pull)
        for x, y in zip(a[:4], b[:4], strict=True):
            if isinstance(x, np.ndarray):
                assert np.array_equal(x, y)
        for name in ("step", "last_arm", "last_reward", "phase", "pulls"):
            assert np.array_equal(getattr(a[0], name), getattr(b[0], name))
        assert_tree_equal(vars(a[0].deliveries["c"]), vars(b[0].deliveries["c"]))
        assert np.array_equal(a[-1].cumulative_regret, b[-1].cumulative_regret)
        assert np.array_equal(a[-1].ledger.total.cost, b[-1].ledger.total.cost)
        assert np.array_equal(lean.engine.streak, mixed.engine.streak)
        assert lean.engine.headroom == 40 - lean.engine.pulls.max()
        assert lean.engine.truncated == bool((lean.engine.pulls >= 40).all())
    assert mixed.engine.truncated and lean_steps > 10


@pytest.mark.parametrize("env_id", ["FedBandit/Homogeneous-v0", "FedBandit/LinearContextual-v0"])
def test_lock_step_communication_steps_touch_no_stream(env_id):
    """A step in which no run pulls (every run of the batch communicates, as DP-Dec-UCB's
    rounds do) draws nothing and leaves the buffered streams in their block mode, so the pulls
    that follow take the pull loop's lean path; the pulls see the draws of a run that never
    communicates, and the decision sets stay (handed out as a fresh array)."""
    kw = dict(num_runs=3, num_agents=2, num_arms=3, horizon=30)
    talk, plain = (fedbandit_env.make_vec(env_id, **kw) for _ in range(2))
    talk.reset(seed=4)
    plain.reset(seed=4)
    arms = np.random.default_rng(0).integers(0, 3, (30, 3, 2))
    nobody = np.zeros(3, dtype=bool)
    for t in range(30):
        before = talk.engine.linear.context if talk.engine.linear is not None else None
        obs, rewards, *_ = talk.step(arms[t], pull=nobody)
        assert not rewards.any() and np.all(obs.phase == 1)
        if before is not None:
            assert obs.context is not before and np.array_equal(obs.context, before)
        a, b = talk.step(arms[t]), plain.step(arms[t])
        assert np.array_equal(a[1], b[1])
        assert np.array_equal(a[-1].cumulative_regret, b[-1].cumulative_regret)
        if b[0].context is not None:
            assert np.array_equal(a[0].context, b[0].context)
    streams = [talk.engine._noise] if talk.engine.linear is None else [talk.engine.linear._noise]
    assert all(s._run_pos is None for s in streams)  # never left the block mode
