"""Per-receiver payloads (Byzantine equivocation, docs/adversary.md): a marked sender's message to
each receiver comes from its own row ``payloads[b, j, i]``; the neighbors channel against a
plain loop over the receivers and their neighbours, for every reduction."""

from __future__ import annotations

import numpy as np
import pytest

from fedbandit_env.errors import ConfigError
from fedbandit_env.graphs import Topology
from fedbandit_env.network import NeighborsChannel
from fedbandit_env.network.robust import robust_reduce
from fedbandit_env.seeding import BatchedRNG

SEEDS = [3, 4, 5]
REDUCTIONS = [None, "sum", "mean", "max", "median", "trimmed_mean", "geometric_median"]
GRAPHS = {
    "ring": lambda: Topology.from_graph("ring", 7),
    "complete": lambda: Topology.from_graph("complete", 6),
    "random_regular": lambda: Topology.from_graph("random_regular", 8, seed=1, degree=3),
}


def channel(topo, reduce, drop_prob=0.0):
    kw = {} if reduce is None else {"reduce": reduce}
    ch = NeighborsChannel("n", topo, 3, c1=1.0, c2=2.0, drop_prob=drop_prob, **kw)
    ch.reset(BatchedRNG.for_runs(SEEDS, "network").child("channel/n"))
    return ch


def messages(rng, n):
    send = rng.random((len(SEEDS), n)) < 0.8
    payload = rng.standard_normal((len(SEEDS), n, 3))
    marked = rng.random((len(SEEDS), n)) < 0.4
    per = rng.standard_normal((len(SEEDS), n, n, 3)) * 5.0
    return send, payload, marked, per


def plain(reduce, topo, send, payload, marked, per, heard):
    """What each receiver gets, by loops: the heard neighbours' messages, a marked sender's
    message to that receiver from ``per``; reduced like the channel."""
    B, N = send.shape
    out = np.zeros((B, N, 3))
    for b in range(B):
        for i in range(N):
            vals = []
            for d, j in enumerate(topo.neighbors[i]):
                if j >= 0 and heard[b, i, d]:
                    vals.append(per[b, j, i] if marked[b, j] else payload[b, j])
            if not vals:
                continue
            v = np.array(vals)
            if reduce == "sum":
                out[b, i] = v.sum(axis=0)
            elif reduce == "mean":
                out[b, i] = v.sum(axis=0) / len(v)
            elif reduce == "max":
                out[b, i] = v.max(axis=0)
            elif reduce in ("median", "trimmed_mean"):  # trim 1: fewer than 3 -> median
                trim = reduce == "trimmed_mean" and len(v) > 2
                out[b, i] = np.sort(v, axis=0)[1:-1].mean(axis=0) if trim else np.median(v, axis=0)
    return out


@pytest.mark.parametrize("graph", sorted(GRAPHS))
@pytest.mark.parametrize("reduce", REDUCTIONS)
def test_per_receiver_messages_reach_each_receiver(graph, reduce):
    topo = GRAPHS[graph]()
    rng = np.random.default_rng(7)
    padded = channel(topo, None, drop_prob=0.2)
    ch = channel(topo, reduce, drop_prob=0.2)
    for step in range(1, 5):
        send, payload, marked, per = messages(rng, topo.num_agents)
        shown, charge_plain = padded.transmit(step, send, payload)
        got, charge = ch.transmit(step, send, payload, per_receiver=(marked, per))
        # what is sent, charged and dropped does not depend on the per-receiver contents
        for field in ("messages", "floats", "cost", "dropped", "sent"):
            assert np.array_equal(getattr(charge, field), getattr(charge_plain, field))
        if reduce is None:
            assert np.array_equal(got.mask, shown.mask)
            for b, i, d in zip(*np.nonzero(got.mask), strict=True):
                j = topo.neighbors[i, d]
                want = per[b, j, i] if marked[b, j] else payload[b, j]
                assert np.array_equal(got.payload[b, i, d], want)
            assert not got.payload[~got.mask].any()
            continue
        if reduce == "geometric_median":  # the plain gather, reduced by the same algorithm
            gathered = plain_gather(topo, payload, marked, per)
            want, _ = robust_reduce(reduce, gathered, shown.mask, shown.mask.sum(axis=2))
            np.testing.assert_allclose(got.value, want, rtol=1e-12, atol=1e-12)
            continue
        want = plain(reduce, topo, send, payload, marked, per, shown.mask)
        np.testing.assert_allclose(got.value, want, rtol=1e-12, atol=1e-12)
        assert np.array_equal(got.count, shown.mask.sum(axis=2))


def plain_gather(topo, payload, marked, per):
    """(B, N, D, dim) by loops: slot d of receiver i holds neighbour j's message to i."""
    B, N = marked.shape
    out = np.zeros((B, N, topo.neighbors.shape[1], 3))
    for b in range(B):
        for i in range(N):
            for d, j in enumerate(topo.neighbors[i]):
                if j >= 0:
                    out[b, i, d] = per[b, j, i] if marked[b, j] else payload[b, j]
    return out


@pytest.mark.parametrize("reduce", REDUCTIONS)
def test_per_receiver_rows_equal_to_the_payload_change_nothing(reduce):
    topo = GRAPHS["random_regular"]()
    rng = np.random.default_rng(11)
    a, b = channel(topo, reduce), channel(topo, reduce)
    for step in range(1, 4):
        send, payload, marked, _ = messages(rng, topo.num_agents)
        same = np.repeat(payload[:, :, None, :], topo.num_agents, axis=2)  # j's row to everyone
        ref, _ = a.transmit(step, send, payload)
        got, _ = b.transmit(step, send, payload, per_receiver=(marked, same))
        for field in ("payload", "mask", "value", "count", "degenerate"):
            if hasattr(ref, field):
                assert np.array_equal(getattr(got, field), getattr(ref, field)), field


def test_per_receiver_shapes_are_checked():
    topo = GRAPHS["ring"]()
    ch = channel(topo, "median")
    send = np.ones((len(SEEDS), 7), bool)
    with pytest.raises(ConfigError, match=r"channels\.n: per-receiver payloads: expected"):
        ch.transmit(1, send, np.zeros((3, 7, 3)), per_receiver=(send, np.zeros((3, 7, 3))))


# ------------------------------------------------------------------ through the environment
def test_rec_smart_per_receiver_tells_each_receiver_its_own_least_pulled_arm():
    import fedbandit_env

    B, N, M = 3, 6, 5
    env = fedbandit_env.make_vec(
        "FedBandit/Homogeneous-v0",
        num_runs=B,
        num_agents=N,
        num_arms=M,
        horizon=40,
        topology="complete",
        channels={"rec": {"kind": "gossip", "dim": 1, "mode": "pull_one_neighbour"}},
        adversary={
            "num_byzantine": 2,
            "placement": "first",
            "attack": "rec_smart",
            "attack_kwargs": {"per_receiver": True},
        },
    )
    env.reset(seed=1)
    best = np.argmax(env.engine.global_expected, axis=1)
    rng = np.random.default_rng(0)
    counts = np.zeros((B, N, M))
    send, payload = np.ones((B, N), bool), np.full((B, N, 1), 0.0)
    told = 0
    for _ in range(40):
        arms = rng.integers(M, size=(B, N))
        obs, *_ = env.step(arms, {"rec": (send, payload)})
        np.add.at(counts, (np.arange(B)[:, None], np.arange(N)[None, :], arms), 1)
        d = obs.deliveries["rec"]
        for b in range(B):
            for i in range(2, N):  # honest receivers
                p = d.partner[b, i]
                if p >= 2 or not d.received[b, i]:
                    assert p < 0 or d.payload[b, i, 0] == 0.0  # honest partners send 0 here
                    continue
                own = counts[b, i].copy()
                own[best[b]] = np.inf
                assert d.payload[b, i, 0] in np.flatnonzero(own == own.min())
                told += 1
    assert told > 50


def test_a_per_receiver_payload_on_a_server_channel_is_refused(monkeypatch):
    import fedbandit_env
    from fedbandit_env.adversary import Attack, attacks

    class Equivocate(Attack):
        knowledge = "oblivious"

        def payload(self, channel_name, dim, view):
            B, N = view.send.shape
            return np.ones((B, N), bool), np.zeros((B, N, N, dim))

    monkeypatch.setitem(attacks._ATTACKS, "test_equivocate", Equivocate)  # not left registered
    env = fedbandit_env.make_vec(
        "FedBandit/Heterogeneous-v0",
        num_runs=2,
        num_agents=4,
        channels={"up": {"kind": "server", "dim": 2}},
        adversary={"num_byzantine": 1, "attack": "test_equivocate"},
    )
    env.reset(seed=0)
    with pytest.raises(ConfigError, match=r"attack 'test_equivocate': channel 'up': per-receiver"):
        env.step(np.zeros((2, 4), int), {"up": (np.ones((2, 4), bool), np.zeros((2, 4, 2)))})
