"""Aggregating delivery of the ``neighbors`` channel (fedbandit_env.network.neighbors): the
sum / mean / max over the neighbours whose message arrived equals the padded reduction exactly,
with the same charges, on every kind of graph, with and without drops."""

from __future__ import annotations

import numpy as np
import pytest

import fedbandit_env
from baselines.trivial import Flooding
from fedbandit_env.errors import ConfigError
from fedbandit_env.graphs import Topology
from fedbandit_env.network import NeighborsAggregate, NeighborsChannel
from fedbandit_env.seeding import BatchedRNG

TOPOLOGIES = {
    "ring": lambda: Topology.from_graph("ring", 9),
    "complete": lambda: Topology.from_graph("complete", 8),
    "star": lambda: Topology.from_graph("star", 7),
    "grid": lambda: Topology.from_graph("grid", 12),
    "erdos_renyi": lambda: Topology.from_graph("erdos_renyi", 14, seed=3, p=0.4),
    "hybrid_complete": lambda: Topology.hybrid([4, 1, 5, 3], "complete"),
    "hybrid_path": lambda: Topology.hybrid([4, 3], "path"),
}


def _padded_reduction(delivery, reduce):
    mask, payload = delivery.mask, delivery.payload
    count = mask.sum(axis=2)
    if reduce == "max":
        value = np.where(mask[..., None], payload, -np.inf).max(axis=2)
        value[count == 0] = 0.0
        return value, count
    total = np.where(mask[..., None], payload, 0.0).sum(axis=2)
    if reduce == "mean":
        total = total / np.maximum(count, 1)[..., None]
    return total, count


def _pair(topo, dim, reduce, drop_prob):
    kw = {"c1": 1.0, "c2": 2.0, "drop_prob": drop_prob}
    padded = NeighborsChannel("n", topo, dim, **kw)
    aggregate = NeighborsChannel("n", topo, dim, reduce=reduce, **kw)
    for ch in (padded, aggregate):
        ch.reset(BatchedRNG.for_runs([4, 5, 6], "network").child("channel/n"))
    return padded, aggregate


@pytest.mark.parametrize("kind", sorted(TOPOLOGIES))
@pytest.mark.parametrize("reduce", ["sum", "mean", "max"])
@pytest.mark.parametrize("drop_prob", [0.0, 0.3])
def test_aggregate_equals_padded_reduction(kind, reduce, drop_prob):
    topo = TOPOLOGIES[kind]()
    rng = np.random.default_rng(hash((kind, reduce)) % 2**32)
    for dim, integer in ((3, False), (1, True)):
        padded, aggregate = _pair(topo, dim, reduce, drop_prob)
        for step in range(1, 6):
            send = rng.random((3, topo.num_agents)) < (0.7 if step > 1 else 0.15)
            payload = rng.standard_normal((3, topo.num_agents, dim)) * 10.0 ** rng.integers(
                -6, 6, (3, topo.num_agents, dim)
            )
            if integer:
                payload = np.round(payload)
            ref, ref_charge = padded.transmit(step, send, payload)
            got, charge = aggregate.transmit(step, send, payload)
            assert isinstance(got, NeighborsAggregate)
            value, count = _padded_reduction(ref, reduce)
            assert np.array_equal(got.count, count)
            assert np.array_equal(got.value, value), (kind, reduce, dim)
            for field in ("messages", "floats", "cost", "dropped", "sent"):
                assert np.array_equal(getattr(charge, field), getattr(ref_charge, field)), field


def test_clique_max_path_covers_runner_up_ties_and_lone_senders():
    topo = Topology.from_graph("complete", 5)
    padded, aggregate = _pair(topo, 2, "max", 0.0)
    payload = np.array([[[3.0, 1.0], [3.0, -1.0], [1.0, -2.0], [0.0, -5.0], [2.0, -7.0]]] * 3)
    send = np.array([[True] * 5, [True, False, False, False, False], [False, True, True, 0, 0]])
    ref, _ = padded.transmit(1, send.astype(bool), payload)
    got, _ = aggregate.transmit(1, send.astype(bool), payload)
    value, count = _padded_reduction(ref, "max")
    assert np.array_equal(got.value, value) and np.array_equal(got.count, count)


def test_unknown_reduction_is_a_config_error():
    with pytest.raises(ConfigError, match=r"channels.n.reduce: expected one of"):
        NeighborsChannel("n", Topology.from_graph("ring", 4), 2, c1=1.0, c2=1.0, reduce="min")


@pytest.mark.parametrize("topology", ["ring", "complete"])
def test_flooding_is_bit_identical_on_aggregating_and_padded_channels(topology):
    kw = {"num_agents": 7, "num_arms": 3, "horizon": 40, "topology": topology}
    runs = []
    for spec in ({"kind": "neighbors", "dim": 3, "reduce": "max"}, {"kind": "neighbors", "dim": 3}):
        venv = fedbandit_env.make_vec(
            "FedBandit/Heterogeneous-v0", num_runs=2, channels={"neighbors": spec}, **kw
        )
        obs, _ = venv.reset(seed=3)
        policy = Flooding()
        policy.reset(venv.facts, venv.agent_rng())
        sent = []
        for _ in range(40):
            action = policy.act(obs)
            sent.append(action.messages["neighbors"][1].copy())
            obs, _, _, _, info = venv.step(action.arms, action.messages)
        runs.append((np.stack(sent), info.cumulative_regret, info.ledger.total.messages))
    for a, b in zip(runs[0], runs[1], strict=True):
        assert np.array_equal(a, b)


def test_parallel_view_observes_the_aggregate():
    env = fedbandit_env.make(
        "FedBandit/Heterogeneous-v0",
        num_agents=4,
        num_arms=3,
        topology="ring",
        channels={"neighbors": {"kind": "neighbors", "dim": 2, "reduce": "sum"}},
    )
    obs, _ = env.reset(seed=0)
    actions = {
        a: {"arm": 0, "messages": {"neighbors": {"send": 1, "payload": np.ones(2)}}}
        for a in env.agents
    }
    obs, *_ = env.step(actions)
    agent = env.agents[0]
    assert env.observation_space(agent).contains(obs[agent])
    got = obs[agent]["channels"]["neighbors"]
    assert int(got["count"]) == 2 and np.array_equal(got["value"], [2.0, 2.0])
