"""Payload slots of agents that do not send are ignored, whatever they hold (NaN, inf, huge,
negative): every channel kind delivers, bit for bit, what it delivers when those slots are zero,
in the vector view and in the ParallelEnv view (which never reads an unsent payload)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import fedbandit_env
from fedbandit_env.agent_views import channel_observation

ENV = "FedBandit/Heterogeneous-v0"
CASES = {
    "neighbors": ({"c": {"kind": "neighbors", "dim": 3, "drop_prob": 0.2}}, "ring", {}),
    "gossip": ({"c": {"kind": "gossip", "dim": 3, "drop_prob": 0.2}}, "complete", {}),
    "server-mean": (
        {"c": {"kind": "server", "dim": 3, "participation": 0.6, "drop_prob": 0.2}},
        "complete",
        {},
    ),
    "server-sum": ({"c": {"kind": "server", "dim": 3, "aggregate": "sum"}}, "complete", {}),
    "flood": ({"c": {"kind": "flood", "dim": 3, "ttl": 2, "drop_prob": 0.2}}, "ring", {}),
    "hierarchical-weighted": (
        {"c": {"kind": "hierarchical", "dim": 3, "drop_prob": 0.2}},
        "hybrid",
        {"sizes": [3, 3]},
    ),
    "hierarchical-unweighted": (
        {"c": {"kind": "hierarchical", "dim": 3, "aggregate": "unweighted"}},
        "hybrid",
        {"sizes": [2, 4]},
    ),
    "hierarchical-sum": (
        {"c": {"kind": "hierarchical", "dim": 3, "aggregate": "sum"}},
        "hybrid",
        {"sizes": [3, 3]},
    ),
}
# "huge" mixes +-1e308 so the payload's sum may overflow (slow path) or cancel (fast path);
# "negative" is finite junk (fast path), where 0 * junk would give -0.0 instead of 0.0.
JUNK = {
    "nan": [np.nan],
    "inf": [np.inf, -np.inf],
    "huge": [1e308, -1e308, 1e308],
    "negative": [-7.5, -1e300],
    "mixed": [np.nan, -np.inf, 1e308, -2.0],
}
N, T, SEEDS = 6, 15, [3, 4]


def _kwargs(case):
    channels, topology, topology_kwargs = CASES[case]
    return {
        "num_agents": N,
        "num_arms": 3,
        "horizon": T,
        "topology": topology,
        "topology_kwargs": topology_kwargs,
        "channels": channels,
    }


def _actions(junk):
    """Per step: arms (B, N), send (B, N), payload with zeros and with junk in unsent slots."""
    rng = np.random.default_rng(11)
    out = []
    for t in range(T):
        arms = rng.integers(3, size=(len(SEEDS), N))
        send = rng.random((len(SEEDS), N)) < 0.5
        send[:, :] = {2: False, 3: True}.get(t, send)  # a step with no sender, one with all
        sent = rng.normal(size=(len(SEEDS), N, 3))  # negative values too
        clean = np.where(send[..., None], sent, 0.0)
        fill = np.resize(np.asarray(JUNK[junk]), clean.shape)
        out.append((arms, send, clean, np.where(send[..., None], sent, fill)))
    return out


def assert_bitwise_equal(a, b, where):
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape, where
    assert a.tobytes() == b.tobytes(), f"{where}: {a} != {b}"


def _vector_deliveries(case, actions, which):
    v = fedbandit_env.make_vec(ENV, num_runs=len(SEEDS), **_kwargs(case))
    v.reset(seed=SEEDS)
    steps = []
    for arms, send, clean, junky in actions:
        payload = clean if which == "clean" else junky
        obs, *_ , info = v.step(arms, {"c": (send, payload)})
        steps.append((obs.deliveries["c"], info.ledger.step))
    return v, steps


@pytest.mark.parametrize("junk", sorted(JUNK))
@pytest.mark.parametrize("case", sorted(CASES))
def test_unsent_junk_is_never_delivered(case, junk):
    actions = _actions(junk)
    _, clean = _vector_deliveries(case, actions, "clean")
    venv, junky = _vector_deliveries(case, actions, "junk")
    delivered = 0
    for t, ((d0, c0), (d1, c1)) in enumerate(zip(clean, junky, strict=True)):
        for f in dataclasses.fields(d0):
            assert_bitwise_equal(getattr(d0, f.name), getattr(d1, f.name), f"step {t} {f.name}")
        for f in dataclasses.fields(c0):
            assert_bitwise_equal(getattr(c0, f.name), getattr(c1, f.name), f"step {t} {f.name}")
        delivered += int(c1.messages.sum())
    assert delivered > 0  # the sent slots did carry messages

    # ParallelEnv view: run b with the same actions, junk payloads with send = 0
    channel = venv.engine.channels["c"]
    for b, seed in enumerate(SEEDS):
        env = fedbandit_env.make(ENV, **_kwargs(case))
        env.reset(seed=seed)
        for t, (arms, send, _, junk_payload) in enumerate(actions):
            acts = {
                f"agent_{i}": {
                    "arm": int(arms[b, i]),
                    "messages": {"c": {"send": int(send[b, i]), "payload": junk_payload[b, i]}},
                }
                for i in range(N)
            }
            obs, *_ = env.step(acts)
            for i in range(N):
                want = channel_observation(channel, junky[t][0], b, i)
                got = obs[f"agent_{i}"]["channels"]["c"]
                assert set(got) == set(want)
                for key in want:
                    assert_bitwise_equal(got[key], want[key], f"run {b} step {t} agent_{i} {key}")


@pytest.mark.parametrize("case", sorted(CASES))
def test_payload_memory_layout_does_not_change_deliveries(case):
    """A strided or Fortran-ordered payload delivers the same bits as a C-ordered copy (numpy's
    summation order follows the memory layout; the engine makes payloads C-ordered)."""
    actions = _actions("negative")
    layouts = {
        "c": lambda p: np.ascontiguousarray(p),
        "fortran": lambda p: np.asfortranarray(p),
        "strided": lambda p: np.repeat(p, 2, axis=2)[..., ::2],
        "transposed": lambda p: np.ascontiguousarray(p.transpose(2, 0, 1)).transpose(1, 2, 0),
    }
    out = {}
    for name, layout in layouts.items():
        v = fedbandit_env.make_vec(ENV, num_runs=len(SEEDS), **_kwargs(case))
        v.reset(seed=SEEDS)
        out[name] = []
        for arms, send, _, junky in actions:
            payload = layout(junky)
            assert np.array_equal(payload, junky)
            obs, *_ = v.step(arms, {"c": (send, payload)})
            out[name].append(obs.deliveries["c"])
    for name in layouts:
        for t, (d0, d1) in enumerate(zip(out["c"], out[name], strict=True)):
            for f in dataclasses.fields(d0):
                assert_bitwise_equal(getattr(d0, f.name), getattr(d1, f.name), f"{name} {t}")
