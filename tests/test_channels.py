"""Channel semantics: each kind delivers exactly what it should, to whom, when, at what cost."""

from __future__ import annotations

import math

import numpy as np
import pytest

import fedbandit_env
from fedbandit_env import ConfigError
from fedbandit_env.network.ledger import AGENT_AGENT, AGENT_SERVER


def venv_for(channels, n=4, topology="path", runs=1, **kw):
    v = fedbandit_env.make_vec(
        "FedBandit/Heterogeneous-v0",
        num_runs=runs,
        num_agents=n,
        num_arms=3,
        horizon=40,
        topology=topology,
        channels=channels,
        c1=5.0,
        c2=2.0,
        **kw,
    )
    v.reset(seed=0)
    return v


def send_only(v, name, senders, dim, value=None):
    send = np.zeros((v.num_runs, v.num_agents), dtype=bool)
    send[:, senders] = True
    payload = np.zeros((v.num_runs, v.num_agents, dim))
    for i in range(v.num_agents):
        payload[:, i] = (i + 1) * 10 + np.arange(dim) if value is None else value
    arms = np.zeros((v.num_runs, v.num_agents), dtype=np.int64)
    return v.step(arms, {name: (send, payload)})


def test_neighbors_reach_exactly_the_neighbours_same_step():
    v = venv_for({"n": {"kind": "neighbors", "dim": 2}})
    obs, _, _, _, info = send_only(v, "n", [1], 2)
    d = obs.deliveries["n"]
    got = {
        (i, int(d.senders[i, k]))
        for i in range(4)
        for k in range(d.senders.shape[1])
        if d.mask[0, i, k]
    }
    assert got == {(0, 1), (2, 1)}
    k = list(d.senders[2]).index(1)
    assert np.array_equal(d.payload[0, 2, k], [20.0, 21.0])
    step = info.ledger.step
    assert step.messages[0, AGENT_AGENT] == 2 and step.floats[0, AGENT_AGENT] == 4
    assert step.cost[0, AGENT_AGENT] == 2 * 2.0 and step.cost[0, AGENT_SERVER] == 0
    assert step.sent[0].tolist() == [0, 2, 0, 0]


def test_not_sending_costs_nothing():
    v = venv_for(("neighbors", "gossip", "server", "flood"))
    arms = np.zeros((1, 4), dtype=np.int64)
    for _ in range(5):
        _, _, _, _, info = v.step(arms)
    assert info.ledger.total.messages.sum() == 0 and info.ledger.total.cost.sum() == 0


def test_gossip_one_uniform_edge_per_step_and_exchange():
    v = venv_for({"g": {"kind": "gossip", "dim": 1}}, n=4, topology="complete", runs=50)
    counts = np.zeros((4, 4))
    for _ in range(40):
        obs, _, _, _, info = send_only(v, "g", [0, 1, 2, 3], 1)
        d = obs.deliveries["g"]
        on_edge = d.partner >= 0
        assert np.all(on_edge.sum(axis=1) == 2)  # exactly one edge per run
        b, i = np.nonzero(on_edge)
        j = d.partner[b, i]
        assert np.all(d.partner[b, j] == i)  # symmetric
        assert np.array_equal(d.payload[b, i, 0], (j + 1) * 10.0)  # partner's payload
        np.add.at(counts, (i, j), 1)
        assert np.all(info.ledger.step.messages[:, AGENT_AGENT] == 2)
    per_edge = counts[np.triu_indices(4, 1)]  # 6 edges, 2000 draws: about 333 each
    assert per_edge.sum() == 2000
    assert np.all(np.abs(per_edge - 2000 / 6) < 5 * math.sqrt(2000 / 6))


def test_gossip_only_the_sender_is_charged_and_heard():
    v = venv_for({"g": {"kind": "gossip", "dim": 1}}, n=2, topology="path")
    obs, _, _, _, info = send_only(v, "g", [0], 1)
    d = obs.deliveries["g"]
    assert d.received[0].tolist() == [False, True]
    assert d.partner[0].tolist() == [1, 0]
    assert info.ledger.step.messages[0, AGENT_AGENT] == 1


@pytest.mark.parametrize(("aggregate", "expected"), [("mean", 20.0), ("sum", 40.0)])
def test_server_aggregates_uploads_and_broadcasts(aggregate, expected):
    v = venv_for({"s": {"kind": "server", "dim": 1, "aggregate": aggregate}})
    obs, _, _, _, info = send_only(v, "s", [0, 2], 1, value=None)
    d = obs.deliveries["s"]
    # payloads are 10 and 30
    assert d.count[0] == 2 and d.aggregate[0, 0] == expected
    step = info.ledger.step
    assert step.messages[0, AGENT_SERVER] == 2 + 4  # two uploads, four broadcast deliveries
    assert step.cost[0, AGENT_SERVER] == 2 * 5.0  # two two-way links at c1


def test_server_charge_broadcast_charges_every_link():
    v = venv_for({"s": {"kind": "server", "dim": 1, "charge_broadcast": True}})
    _, _, _, _, info = send_only(v, "s", [0], 1)
    assert info.ledger.step.cost[0, AGENT_SERVER] == 4 * 5.0


def test_server_reply_none_charges_the_uploads_only_and_keeps_the_sum_for_the_server():
    v = venv_for({"s": {"kind": "server", "dim": 1, "aggregate": "sum", "reply": "none"}})
    obs, _, _, _, info = send_only(v, "s", [0, 2], 1)
    assert obs.deliveries["s"].aggregate[0, 0] == 40.0  # 10 + 30 reached the server
    step = info.ledger.step
    assert step.messages[0, AGENT_SERVER] == 2 and step.cost[0, AGENT_SERVER] == 2 * 5.0
    assert step.floats[0, AGENT_SERVER] == 2 and step.sent[0].tolist() == [1, 0, 1, 0]


def test_push_delivers_each_addressed_message_to_its_client_only():
    v = venv_for({"p": {"kind": "push", "dim": 2}})
    obs, _, _, _, info = send_only(v, "p", [1, 3], 2)
    d = obs.deliveries["p"]
    assert d.received[0].tolist() == [False, True, False, True]
    np.testing.assert_array_equal(d.payload[0], [[0, 0], [20, 21], [0, 0], [40, 41]])
    step = info.ledger.step
    assert step.messages[0].tolist() == [0, 2] and step.floats[0].tolist() == [0, 4]
    assert step.cost[0, AGENT_SERVER] == 2 * 5.0 and step.sent.sum() == 0  # the server's
    env = fedbandit_env.make("FedBandit/Heterogeneous-v0", num_agents=4, num_arms=3,
                             channels={"p": {"kind": "push", "dim": 2}})  # fmt: skip
    obs, _ = env.reset(seed=0)
    assert set(obs["agent_0"]["channels"]["p"]) == {"received", "payload"}


def test_push_drops_are_charged_and_counted():
    v = venv_for({"p": {"kind": "push", "dim": 1, "drop_prob": 0.5}}, runs=50)
    obs, _, _, _, info = send_only(v, "p", [0, 1, 2, 3], 1)
    got = obs.deliveries["p"].received.sum()
    assert info.ledger.step.messages[:, AGENT_SERVER].sum() == 200
    assert info.ledger.step.dropped.sum() == 200 - got and 60 < got < 140


def test_server_participation_picks_ceil_pn_and_ignores_others():
    v = venv_for(
        {"s": {"kind": "server", "dim": 1, "participation": 0.3}},
        n=10,
        runs=20,
        topology="complete",
    )
    for _ in range(10):
        obs, _, _, _, info = send_only(v, "s", list(range(10)), 1)
        d = obs.deliveries["s"]
        assert np.all(d.participating.sum(axis=1) == math.ceil(0.3 * 10))
        assert np.all(d.count == 3)
        expected = ((np.arange(10) + 1) * 10.0 * d.participating).sum(axis=1) / 3
        assert np.allclose(d.aggregate[:, 0], expected)
        assert np.all(info.ledger.step.cost[:, AGENT_SERVER] == 3 * 5.0)


def test_flood_delivers_after_hop_distance_and_respects_ttl():
    v = venv_for({"f": {"kind": "flood", "dim": 1, "ttl": 3}}, n=5, topology="path")
    arrivals = {}
    obs, _, _, _, info = send_only(v, "f", [0], 1)  # sent at step 1
    first_cost = info.ledger.step.messages[0, AGENT_AGENT]
    for step in range(1, 6):
        d = obs.deliveries["f"]
        for r, o, h, s in zip(d.receiver, d.origin, d.hops, d.sent_step, strict=True):
            arrivals[int(r)] = (step, int(o), int(h), int(s))
        obs, _, _, _, info = v.step(np.zeros((1, 5), dtype=np.int64))
    # agent h hops away gets it at step 1 + h - 1; agent 4 is beyond ttl = 3
    assert arrivals == {1: (1, 0, 1, 1), 2: (2, 0, 2, 1), 3: (3, 0, 3, 1)}
    assert first_cost == 1  # hop 1: agent 0 forwards to its single neighbour


def test_flood_relay_cost_counts_every_forward():
    v = venv_for({"f": {"kind": "flood", "dim": 2, "ttl": 2}}, n=5, topology="star")
    _, _, _, _, info = send_only(v, "f", [1], 2)  # a leaf
    hop1 = info.ledger.step.messages[0, AGENT_AGENT]
    _, _, _, _, info = v.step(np.zeros((1, 5), dtype=np.int64))
    hop2 = info.ledger.step.messages[0, AGENT_AGENT]
    assert (hop1, hop2) == (1, 4)  # leaf -> centre; centre forwards to its 4 neighbours
    assert info.ledger.total.floats[0, AGENT_AGENT] == 5 * 2


@pytest.mark.parametrize(
    ("topology", "per_round"), [("complete", 1225), ("star", 98), ("ring", 1250)]
)
def test_flood_gis_cost_matches_commeff_per_round_figures(topology, per_round):
    """The per-round costs of Li & Song's Table I (star 2(M-1), ring M^2/2, complete M(M-1)/2) at
    M = 50, c2 = 1: every agent floods its statistics once per round."""
    v = fedbandit_env.make_vec(
        "FedBandit/Homogeneous-v0",
        num_runs=1,
        num_agents=50,
        num_arms=2,
        horizon=40,
        topology=topology,
        channels={"f": {"kind": "flood", "cost_model": "gis"}},
        c2=1.0,
    )
    v.reset(seed=0)
    ttl = v.channels["f"].ttl
    arms = np.zeros((1, 50), dtype=np.int64)
    _, _, _, _, info = v.step(arms, {"f": np.ones((1, 50, 2))})
    for _ in range(ttl - 1):
        _, _, _, _, info = v.step(arms)
    assert info.ledger.total.cost[0, AGENT_AGENT] == per_round


def test_hierarchical_delay_aggregation_and_costs():
    channels = {
        "h": {"kind": "hierarchical", "dim": 1, "aggregate": "unweighted", "cost_model": "path"}
    }
    v = fedbandit_env.make_vec(
        "FedBandit/Heterogeneous-v0",
        num_runs=1,
        num_agents=7,
        num_arms=2,
        horizon=10,
        topology="hybrid",
        topology_kwargs={"sizes": [5, 2], "component_graph": "path"},
        channels=channels,
        c1=5.0,
        c2=2.0,
    )
    v.reset(seed=0)
    ch = v.channels["h"]
    assert v.config.topology.sinks == (2, 5)  # centre of the path 0-1-2-3-4; lowest of 5-6
    assert ch.delay == 1  # ecc of the sink of the 5-path is 2 hops
    obs, _, _, _, info = send_only(v, "h", [0, 4, 6], 1)
    assert obs.deliveries["h"].count[0] == 0  # still travelling
    # unweighted: mean of component means (10+50)/2 = 30 and 70 -> 50
    step = info.ledger.step
    assert step.messages[0, AGENT_AGENT] == 2 + 2 + 1  # hop distances to the sinks
    assert step.cost[0, AGENT_AGENT] == 2.0 * 5 and step.cost[0, AGENT_SERVER] == 2 * 5.0
    obs, _, _, _, _ = v.step(np.zeros((1, 7), dtype=np.int64))
    d = obs.deliveries["h"]
    assert d.count[0] == 3 and d.aggregate[0, 0] == pytest.approx(50.0) and d.sent_step[0] == 1


def test_hierarchical_weighted_is_mean_of_all_senders_and_edges_cost():
    v = fedbandit_env.make_vec(
        "FedBandit/Heterogeneous-v0",
        num_runs=1,
        num_agents=6,
        num_arms=2,
        horizon=10,
        topology="hybrid",
        topology_kwargs={"sizes": [4, 2], "component_graph": "star"},
        channels={"h": {"kind": "hierarchical", "dim": 1}},
        c1=5.0,
        c2=2.0,
    )
    v.reset(seed=0)
    assert v.channels["h"].delay == 0  # star centres are one hop from everyone
    obs, _, _, _, info = send_only(v, "h", [0, 1, 4], 1)
    assert obs.deliveries["h"].aggregate[0, 0] == pytest.approx((10 + 20 + 50) / 3)
    # edges model: ecc(sink)=1 times |E_q| (3 and 1) for both active components
    assert info.ledger.step.cost[0, AGENT_AGENT] == 2.0 * (3 + 1)


def test_drop_probability_drops_about_that_fraction_deterministically():
    def run():
        v = venv_for(
            {"n": {"kind": "neighbors", "dim": 1, "drop_prob": 0.25}},
            n=10,
            topology="complete",
            runs=5,
        )
        delivered = dropped = 0
        for _ in range(30):
            _, _, _, _, info = send_only(v, "n", list(range(10)), 1)
            dropped += info.ledger.step.dropped.sum()
            delivered += info.ledger.step.messages[:, AGENT_AGENT].sum()
        return dropped / delivered

    frac = run()
    assert abs(frac - 0.25) < 0.03
    assert run() == frac


@pytest.mark.parametrize(
    ("channels", "match"),
    [
        ({"x": {"kind": "carrier-pigeon"}}, r"channels\.x\.kind"),
        ({"n": {"kind": "neighbors", "dim": 0}}, r"channels\.n\.dim"),
        ({"n": {"kind": "neighbors", "drop_prob": 1.0}}, r"channels\.n\.drop_prob"),
        ({"s": {"kind": "server", "participation": 0.0}}, r"channels\.s\.participation"),
        ({"s": {"kind": "server", "aggregate": "mode"}}, r"channels\.s\.aggregate"),
        ({"s": {"kind": "server", "reply": "some"}}, r"channels\.s\.reply"),
        ({"s": {"kind": "server", "reply": "none", "charge_broadcast": True}},
         r"channels\.s\.charge_broadcast"),
        ({"p": {"kind": "push", "aggregate": "sum"}}, r"channels\.p: unknown option"),
        ({"f": {"kind": "flood", "ttl": 0}}, r"channels\.f\.ttl"),
        ({"n": {"kind": "neighbors", "colour": 1}}, r"channels\.n: unknown option"),
    ],
)
def test_bad_channel_config_names_the_field(channels, match):
    with pytest.raises(ConfigError, match=match):
        fedbandit_env.make("FedBandit/Heterogeneous-v0", channels=channels)


# ---------------------------------------------------------------- drops and their ledger charges
# Every channel charges a lost message as transmitted and counts it in ``dropped`` (README,
# "Channels"); the payloads below are powers of two so a sum tells exactly which arrived.


def test_gossip_drops_each_direction_and_charges_both():
    v = venv_for({"g": {"kind": "gossip", "dim": 1, "drop_prob": 0.3}}, n=5, runs=200)
    got = lost = 0
    for _ in range(10):
        obs, _, _, _, info = send_only(v, "g", list(range(5)), 1)
        d, step = obs.deliveries["g"], info.ledger.step
        on_edge = d.partner >= 0
        assert np.all(on_edge.sum(axis=1) == 2)  # the edge is drawn whether or not it drops
        assert not np.any(d.received & ~on_edge)
        b, i = np.nonzero(on_edge)
        arrived = d.received[b, i]
        want = np.where(arrived, (d.partner[b, i] + 1) * 10.0, 0.0)
        assert np.array_equal(d.payload[b, i, 0], want)
        assert np.all(step.messages[:, AGENT_AGENT] == 2) and np.all(step.floats[:, 0] == 2)
        assert np.all(step.cost[:, AGENT_AGENT] == 2 * 2.0)  # lost messages are paid for
        assert np.array_equal(step.dropped, 2 - d.received.sum(axis=1))
        got += int(arrived.sum())
        lost += int((~arrived).sum())
    assert abs(lost / (got + lost) - 0.3) < 0.04
    assert v.engine.ledger.total.dropped.sum() == lost


@pytest.mark.parametrize("charge_broadcast", [False, True])
def test_server_drops_uploads_charges_them_and_broadcasts_only_what_arrived(charge_broadcast):
    n, runs = 6, 300
    v = venv_for(
        {
            "s": {
                "kind": "server",
                "dim": 1,
                "aggregate": "sum",
                "drop_prob": 0.6,
                "charge_broadcast": charge_broadcast,
            }
        },
        n=n,
        topology="complete",
        runs=runs,
    )
    senders = [0, 2, 3, 5]
    send = np.zeros((runs, n), dtype=bool)
    send[:, senders] = True
    payload = np.broadcast_to(2.0 ** np.arange(n), (runs, n))[..., None].copy()
    obs, _, _, _, info = v.step(np.zeros((runs, n), dtype=np.int64), {"s": (send, payload)})
    d, step = obs.deliveries["s"], info.ledger.step
    bits = d.aggregate[:, 0].astype(np.int64)
    arrived = (bits[:, None] >> np.arange(n)) & 1
    assert not np.any(arrived[:, [1, 4]])  # only senders arrive
    assert np.array_equal(arrived.sum(axis=1), d.count)
    assert 0 < (d.count == 0).sum() < runs  # some runs lose every upload
    down = np.where(d.count > 0, n, 0)
    assert np.array_equal(step.messages[:, AGENT_SERVER], 4 + down)  # lost uploads count
    assert np.array_equal(step.floats[:, AGENT_SERVER], 4 + down)
    links = 4 + np.where(d.count > 0, n - 4, 0) * charge_broadcast
    assert np.array_equal(step.cost[:, AGENT_SERVER], 5.0 * links)
    assert np.array_equal(step.dropped, 4 - d.count)
    assert abs((4 - d.count).sum() / (4 * runs) - 0.6) < 0.05


def test_flood_drops_deliveries_at_the_receiver_and_relays_regardless():
    runs = 400
    v = venv_for(
        {"f": {"kind": "flood", "dim": 1, "ttl": 2, "drop_prob": 0.3}},
        n=6,
        topology="ring",
        runs=runs,
    )
    obs1, _, _, _, info = send_only(v, "f", [0], 1)  # hop 1 (agents 1, 5) this step
    step1 = info.ledger.step  # the ledger object is reused: keep this step's charge
    obs2, _, _, _, info = v.step(np.zeros((runs, 6), dtype=np.int64))  # hop 2 (2, 4) next
    step2 = info.ledger.step
    got1 = np.zeros((runs, 6), dtype=bool)
    got2 = np.zeros((runs, 6), dtype=bool)
    for got, obs in ((got1, obs1), (got2, obs2)):
        d = obs.deliveries["f"]
        assert np.all(d.origin == 0) and np.all(d.payload[:, 0] == 10.0)
        got[d.run, d.receiver] = True
    assert not np.any(got1[:, [0, 2, 3, 4]]) and not np.any(got2[:, [0, 1, 3, 5]])
    # relay cost in full: 0 forwards to its 2 neighbours, then 1 and 5 forward to theirs (2 + 2)
    for step, msgs, got in ((step1, 2, got1), (step2, 4, got2)):
        assert np.all(step.messages[:, AGENT_AGENT] == msgs)
        assert np.all(step.cost[:, AGENT_AGENT] == 2.0 * msgs)
        assert np.array_equal(step.dropped, 2 - got.sum(axis=1))
    lost = 1 - np.concatenate([got1[:, [1, 5]], got2[:, [2, 4]]]).mean()
    assert abs(lost - 0.3) < 0.04
    # relaying does not depend on the relay's own copy: agent 2 hears agent 0 through agent 1
    # in runs where agent 1's copy was lost about as often as otherwise
    assert np.any(~got1[:, 1] & got2[:, 2])
    assert abs(got2[~got1[:, 1], 2].mean() - got2[got1[:, 1], 2].mean()) < 0.12


def test_hierarchical_drops_members_not_sinks_and_uploads_only_what_arrived():
    runs, n = 300, 6
    v = fedbandit_env.make_vec(
        "FedBandit/Heterogeneous-v0",
        num_runs=runs,
        num_agents=n,
        num_arms=2,
        horizon=10,
        topology="hybrid",
        topology_kwargs={"sizes": [3, 3], "component_graph": "path"},
        channels={
            "h": {
                "kind": "hierarchical",
                "dim": 1,
                "aggregate": "sum",
                "cost_model": "path",
                "drop_prob": 0.5,
            }
        },
        c1=5.0,
        c2=2.0,
    )
    v.reset(seed=0)
    assert v.config.topology.sinks == (1, 4)  # centres of the paths 0-1-2 and 3-4-5
    send = np.zeros((runs, n), dtype=bool)
    send[:, [0, 1, 2, 5]] = True  # component 1: sink 4 silent, only member 5 sends
    payload = np.broadcast_to(2.0 ** np.arange(n), (runs, n))[..., None].copy()
    obs, _, _, _, info = v.step(np.zeros((runs, n), dtype=np.int64), {"h": (send, payload)})
    d, step = obs.deliveries["h"], info.ledger.step
    arrived = (d.aggregate[:, 0].astype(np.int64)[:, None] >> np.arange(n)) & 1
    assert np.all(arrived[:, 1] == 1)  # the sink's own payload never drops
    assert not np.any(arrived[:, [3, 4]])
    assert np.array_equal(arrived.sum(axis=1), d.count)
    lost = 1 - arrived[:, [0, 2, 5]].mean()
    assert abs(lost - 0.5) < 0.05
    uploads = 1 + arrived[:, 5]  # component 0 always (its sink), component 1 iff 5 arrived
    assert np.array_equal(step.messages[:, AGENT_SERVER], uploads + n)  # count >= 1 always
    assert np.array_equal(step.cost[:, AGENT_SERVER], 5.0 * uploads)
    # path model: every sender's hops are paid, lost or not (0, 2 and 5 are one hop away)
    assert np.all(step.messages[:, AGENT_AGENT] == 3)
    assert np.all(step.cost[:, AGENT_AGENT] == 2.0 * 3)
    assert np.array_equal(step.dropped, 4 - d.count)


@pytest.mark.parametrize(
    ("topology", "n", "topology_kwargs", "opts"),
    [
        ("ring", 8, {}, {"ttl": 3}),
        ("grid", 9, {}, {"cost_model": "gis"}),
        ("hybrid", 7, {"sizes": [1, 2, 4], "component_graph": "path"}, {"cost_model": "gis"}),
        ("star", 6, {}, {"ttl": 1}),
    ],
)
def test_flood_matches_a_brute_force_reference(topology, n, topology_kwargs, opts):
    """Every delivery, message count and cost of the vectorized flood equals a loop over the
    messages sent in the last ttl steps (the LOCAL protocol of Dubey & Pentland, Section 4.2; GIS,
    Li & Song, Algorithm 2)."""
    v = venv_for(
        {"f": {"kind": "flood", "dim": 1, **opts}},
        n=n,
        topology=topology,
        runs=2,
        topology_kwargs=topology_kwargs,
    )
    ch = v.channels["f"]
    topo = v.config.topology
    dist, deg, ttl = topo.hop_distances, topo.degrees, ch.ttl
    rng = np.random.default_rng(3)
    history = []  # (step, run, origin, value)
    for t in range(1, 25):
        send = rng.random((2, n)) < 0.3
        payload = rng.normal(size=(2, n, 1))
        obs, _, _, _, info = v.step(np.zeros((2, n), dtype=np.int64), {"f": (send, payload)})
        history += [(t, b, i, payload[b, i, 0]) for b, i in zip(*np.nonzero(send), strict=True)]
        want, msgs, links = set(), np.zeros(2, dtype=np.int64), [set(), set()]
        for s, b, origin, value in history:
            h = t - s + 1
            if h > ttl:
                continue
            for r in np.nonzero(dist[origin] == h)[0]:
                slot = list(ch.senders[r]).index(origin)
                want.add((b, int(r), origin, slot, h, s, value))
            if ch.cost_model == "relay":
                msgs[b] += deg[dist[origin] == h - 1].sum()
            for e, (x, y) in enumerate(topo.edges):
                dx, dy = dist[origin, x], dist[origin, y]
                if dx != dy and max(dx, dy) == h:
                    msgs[b] += ch.cost_model == "gis"
                    links[b].add((h, e))
        d = obs.deliveries["f"]
        got = set(
            zip(
                d.run.tolist(),
                d.receiver.tolist(),
                d.origin.tolist(),
                d.slot.tolist(),
                d.hops.tolist(),
                d.sent_step.tolist(),
                d.payload[:, 0].tolist(),
                strict=True,
            )
        )
        assert got == want and len(d.run) == len(want), t
        step = info.ledger.step
        assert step.messages[:, AGENT_AGENT].tolist() == msgs.tolist(), t
        if ch.cost_model == "relay":
            assert step.cost[:, AGENT_AGENT].tolist() == (2.0 * msgs).tolist(), t
        else:
            assert step.cost[:, AGENT_AGENT].tolist() == [2.0 * len(x) for x in links], t
