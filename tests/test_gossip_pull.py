"""The ``gossip`` channel's ``pull_one_neighbour`` mode (fedbandit_env.network.gossip): every agent
pulls the payload of one uniformly random neighbour per step; answered pulls are charged to the
responder; drops; the light cone; the two views (tests/test_views.py runs it too)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fedbandit_env
from fedbandit_env import ConfigError
from fedbandit_env.graphs import Topology
from fedbandit_env.network import GossipChannel
from fedbandit_env.network.ledger import AGENT_AGENT
from fedbandit_env.seeding import BatchedRNG

PULL = {"kind": "gossip", "dim": 2, "mode": "pull_one_neighbour"}


def _venv(n=6, topology="ring", runs=1, **channel):
    v = fedbandit_env.make_vec(
        "FedBandit/Heterogeneous-v0", num_runs=runs, num_agents=n, num_arms=3, horizon=400,
        topology=topology, channels={"g": {**PULL, **channel}}, c2=3.0,
    )
    v.reset(seed=0)
    return v


def _step(v, senders):
    send = np.zeros((v.num_runs, v.num_agents), dtype=bool)
    send[:, senders] = True
    payload = np.zeros((v.num_runs, v.num_agents, 2))
    payload[..., 0] = np.arange(v.num_agents) + 1.0
    payload[..., 1] = -(np.arange(v.num_agents) + 1.0)
    arms = np.zeros((v.num_runs, v.num_agents), dtype=np.int64)
    return v.step(arms, {"g": (send, payload)})


def test_every_agent_pulls_a_uniform_neighbour():
    v = _venv(n=5, topology="star", runs=40)  # hub 0: uniform over 4 leaves; leaves: the hub
    counts = np.zeros(5)
    for _ in range(50):
        obs, *_ = _step(v, list(range(5)))
        d = obs.deliveries["g"]
        assert np.all(d.partner[:, 1:] == 0)
        assert np.all(d.received)
        assert np.array_equal(d.payload[..., 0], d.partner + 1.0)  # the partner's payload
        np.add.at(counts, d.partner[:, 0], 1)
    assert counts[0] == 0 and counts.sum() == 2000
    assert np.all(np.abs(counts[1:] - 500) < 5 * math.sqrt(500))


def test_only_answered_pulls_are_charged_to_the_responder():
    v = _venv(n=6, topology="ring", runs=30)
    for _ in range(20):
        obs, _, _, _, info = _step(v, [2])
        d = obs.deliveries["g"]
        pulled_2 = d.partner == 2
        assert np.array_equal(d.received, pulled_2)
        assert np.all(d.payload[~pulled_2] == 0.0)
        assert np.all(d.payload[pulled_2] == [3.0, -3.0])
        step = info.ledger.step
        assert np.array_equal(step.messages[:, AGENT_AGENT], pulled_2.sum(axis=1))
        assert np.array_equal(step.floats[:, AGENT_AGENT], 2 * pulled_2.sum(axis=1))
        assert np.allclose(step.cost[:, AGENT_AGENT], 3.0 * pulled_2.sum(axis=1))
        assert np.array_equal(step.sent[:, 2], pulled_2.sum(axis=1))
        assert step.sent[:, [0, 1, 3, 4, 5]].sum() == 0


def test_drops_are_charged_and_counted():
    v = _venv(n=6, topology="complete", runs=50, drop_prob=0.3)
    sent = lost = 0
    for _ in range(20):
        obs, _, _, _, info = _step(v, list(range(6)))
        step = info.ledger.step
        assert np.all(step.messages[:, AGENT_AGENT] == 6)  # every agent answered one pull
        assert np.array_equal(step.dropped, 6 - obs.deliveries["g"].received.sum(axis=1))
        sent += 6 * 50
        lost += int(step.dropped.sum())
    assert abs(lost / sent - 0.3) < 5 * math.sqrt(0.21 / sent)


def test_not_sending_costs_nothing_and_draws_do_not_depend_on_sends():
    quiet, loud = _venv(runs=3), _venv(runs=3)
    for _ in range(10):
        q, _, _, _, qi = _step(quiet, [])
        lo, *_ = _step(loud, [0, 1, 2, 3, 4, 5])
        assert qi.ledger.step.messages.sum() == 0 and not q.deliveries["g"].received.any()
        assert np.array_equal(q.deliveries["g"].partner, lo.deliveries["g"].partner)


def test_isolated_agents_pull_nobody():
    topo = Topology.hybrid([1, 3], "complete")  # agent 0 is alone
    ch = GossipChannel("g", topo, 1, mode="pull_one_neighbour", c1=1.0, c2=1.0)
    ch.reset(BatchedRNG.for_runs([0, 1], "network").child("channel/g"))
    d, charge = ch.transmit(1, np.ones((2, 4), dtype=bool), np.ones((2, 4, 1)))
    assert np.all(d.partner[:, 0] == -1) and not d.received[:, 0].any()
    assert np.all(charge.messages[:, AGENT_AGENT] == 3)


def test_bad_mode_is_a_config_error():
    with pytest.raises(ConfigError, match=r"channels.g.mode: expected one of"):
        _venv(mode="push")


@settings(max_examples=25, deadline=None, derandomize=True)
@given(
    n=st.integers(3, 9),
    kind=st.sampled_from(["ring", "star", "path", "complete"]),
    seed=st.integers(0, 2**16),
    p_send=st.floats(0.0, 1.0),
)
def test_batch_member_equals_run_alone_and_partners_are_neighbours(n, kind, seed, p_send):
    topo = Topology.from_graph(kind, n)
    adjacency = {(int(a), int(b)) for a, b in topo.edges} | {(int(b), int(a)) for a, b in topo.edges}
    rng = np.random.default_rng(seed)
    batch = GossipChannel("g", topo, 1, mode="pull_one_neighbour", c1=1.0, c2=1.0)
    alone = GossipChannel("g", topo, 1, mode="pull_one_neighbour", c1=1.0, c2=1.0)
    batch.reset(BatchedRNG.for_runs([seed, seed + 1, seed + 2], "network").child("channel/g"))
    alone.reset(BatchedRNG.for_runs([seed + 1], "network").child("channel/g"))
    for step in range(1, 6):
        send = rng.random((3, n)) < p_send
        payload = rng.standard_normal((3, n, 1))
        d, c = batch.transmit(step, send, payload)
        e, f = alone.transmit(step, send[1:2], payload[1:2])
        assert np.array_equal(d.partner[1:2], e.partner)
        assert np.array_equal(d.payload[1:2], e.payload)
        assert np.array_equal(c.messages[1:2], f.messages) and np.array_equal(c.sent[1:2], f.sent)
        for b in range(3):
            for i in range(n):
                assert (i, int(d.partner[b, i])) in adjacency
                assert d.received[b, i] == send[b, d.partner[b, i]]


def test_light_cone_of_a_max_relay():
    """Each agent pulls and keeps the max of what it heard: agent j's change at step t reaches
    agent i no earlier than step t + d(i, j) + 1 (one hop per step)."""
    n, horizon, t_change, j = 8, 60, 10, 0

    def run(change):
        v = fedbandit_env.make_vec(
            "FedBandit/Heterogeneous-v0", num_runs=2, num_agents=n, num_arms=2, horizon=horizon,
            topology="path", channels={"g": {"kind": "gossip", "dim": 1,
                                             "mode": "pull_one_neighbour"}},
        )
        obs, _ = v.reset(seed=5)
        known = np.zeros((2, n, 1))
        history = []
        for t in range(1, horizon + 1):
            if change and t == t_change:
                known[:, j] = 100.0  # agent j learns something at step t_change
            history.append(known.copy())
            send = np.ones((2, n), dtype=bool)
            obs, *_ = v.step(np.zeros((2, n), dtype=np.int64), {"g": (send, known.copy())})
            d = obs.deliveries["g"]
            known = np.maximum(known, np.where(d.received[..., None], d.payload, 0.0))
        return np.stack(history), v.config.topology.hop_distances

    base, dist = run(False)
    moved, _ = run(True)
    for i in range(n):
        changed = np.nonzero((moved[:, :, i] != base[:, :, i]).any(axis=(1, 2)))[0]
        assert changed.size > 0
        assert changed[0] + 1 >= t_change + dist[i, j], (i, changed[0] + 1)
