"""Per-link and random latencies (fedbandit_env/latency.py, docs/time.md "latency"): the message
from j to i sent at t is read at t + L_ji (``neighbors``) and the server's download to i at t +
L_i (``push``), on both engines; a constant per-link latency is the fixed latency bit for bit;
under a random latency every message arrives once, in order on its link, at most one per step,
within the largest latency, with arrival gaps that follow the law; channels without per-link
deliveries are refused by name; the JAX engine agrees with numpy."""

from __future__ import annotations

import math

import numpy as np
import pytest

import fedbandit_env
from fedbandit_env.bench.evaluate import evaluate
from fedbandit_env.errors import ConfigError

HOMOG = "FedBandit/Homogeneous-v0"
STEPS = [[0, 2, 5], [1, 0, 3], [4, 6, 0]]  # row the sender, column the receiver
CHANNELS = {"c": {"kind": "neighbors", "dim": 1}, "p": {"kind": "push", "dim": 1}}


def arrivals(latency, steps=12, every=False, runs=1, seed=0):
    """Every agent sends its id + 10 x (the send step) on ``c`` at step 2 (every step with
    ``every``), and the server pushes 100 + id to each client; returns per step the (sender,
    receiver, payload) triples of ``c`` and the (client, payload) pairs of ``p``."""
    venv = fedbandit_env.make_vec(HOMOG, num_runs=runs, num_agents=3, num_arms=3, horizon=200,
                                  topology="complete", channels=CHANNELS,
                                  latency=latency)  # fmt: skip
    venv.reset(seed=seed)
    out = []
    for t in range(1, steps + 1):
        send = np.full((runs, 3), every or t == 2)
        ids = np.broadcast_to(np.arange(3.0)[None, :, None], (runs, 3, 1))
        obs, *_ = venv.step(np.zeros((runs, 3), np.int64),
                            {"c": (send, ids + 10 * t), "p": (send, ids + 100)})  # fmt: skip
        heard = obs.deliveries["c"]
        senders = np.broadcast_to(heard.senders, heard.mask.shape)
        c = [(b, int(senders[b, i, d]), i, float(heard.payload[b, i, d, 0]))
             for b, i, d in zip(*np.nonzero(heard.mask), strict=True)]  # fmt: skip
        got = obs.deliveries["p"]
        p = [(b, i, float(got.payload[b, i, 0]))
             for b, i in zip(*np.nonzero(got.received), strict=True)]  # fmt: skip
        out.append((c, p))
    return out


def test_a_message_from_j_to_i_is_read_at_t_plus_l_ji():
    seen = arrivals({"kind": "per_link", "steps": STEPS, "server": [1, 2, 3]})
    for t, (c, p) in enumerate(seen, start=1):
        for _, j, i, payload in c:
            assert t == 2 + STEPS[j][i] and payload == j + 20
        for _, i, payload in p:
            assert t == 2 + [1, 2, 3][i] and payload == 100 + i
    assert sum(len(c) for c, _ in seen) == 6 and sum(len(p) for _, p in seen) == 3


def test_a_constant_per_link_latency_is_the_fixed_latency_bit_for_bit():
    kw = dict(num_agents=6, num_arms=4, horizon=300, topology="ring")
    fixed = evaluate(HOMOG, "ucb1_shared", runs=3, env_kwargs={**kw, "latency": 4})
    link = evaluate(HOMOG, "ucb1_shared", runs=3,
                    env_kwargs={**kw, "latency": {"kind": "per_link", "steps": [[4] * 6] * 6}})
    np.testing.assert_array_equal(fixed.regret_by_agent, link.regret_by_agent)


@pytest.mark.parametrize("law", [{"kind": "geometric", "mean": 3, "max": 8},
                                 {"kind": "uniform", "low": 1, "high": 6}])  # fmt: skip
def test_under_a_random_latency_messages_arrive_once_in_order_within_the_largest(law):
    steps, top = 60, law.get("max", law.get("high"))
    seen = arrivals(law, steps=steps, every=True, runs=4, seed=3)
    per_link: dict[tuple, list] = {}
    for t, (c, _) in enumerate(seen, start=1):
        links = [(b, j, i) for b, j, i, _ in c]
        assert len(links) == len(set(links))  # at most one message per link and step
        for b, j, i, payload in c:
            sent = round((payload - j) / 10)
            assert 1 <= t - sent <= top
            per_link.setdefault((b, j, i), []).append(sent)
    assert len(per_link) == 4 * 6
    for sends in per_link.values():
        assert sends == sorted(sends)  # first in, first out
        assert sends[: steps - top] == list(range(1, steps - top + 1))  # each arrives once


def test_a_single_message_s_latency_follows_the_law():
    law = {"kind": "geometric", "mean": 3, "max": 40}
    seen = arrivals(law, steps=45, runs=300, seed=1)  # one message per link, sent at step 2
    gaps = [t - 2 for t, (c, _) in enumerate(seen, start=1) for _ in c]
    assert len(gaps) == 300 * 6
    assert abs(np.mean(gaps) - 3) < 4 * math.sqrt(6 / len(gaps))  # var (1 - p) / p^2 = 6
    assert abs(np.mean(np.array(gaps) == 1) - 1 / 3) < 0.04


def test_channels_without_per_link_deliveries_are_refused():
    law = {"kind": "geometric", "mean": 3, "max": 8}
    for channels, match in (
        ({"f": {"kind": "flood", "dim": 1, "ttl": 1}}, r"channels.f: latency: expected a channel"),
        ({"s": {"kind": "server", "dim": 1}}, r"channels.s: latency: expected a channel kind"),
        ({"n": {"kind": "neighbors", "dim": 1, "reduce": "sum"}}, r"with reduce='sum'"),
    ):
        with pytest.raises(ConfigError, match=match):
            fedbandit_env.make(HOMOG, channels=channels, latency=law).reset(seed=0)
    fedbandit_env.make(HOMOG, channels={"f": {"kind": "flood", "dim": 1, "ttl": 1}},
                       latency=3).reset(seed=0)  # a fixed latency takes every channel


@pytest.mark.slow
def test_jax_reads_each_message_at_its_link_s_latency_and_agrees_with_numpy():
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    import fedbandit_env.jax as fj
    from fedbandit_env.jax.types import Action

    env = fj.make(HOMOG, num_agents=3, num_arms=3, topology="complete", horizon=50,
                  channels=CHANNELS, latency={"kind": "per_link", "steps": STEPS,
                                              "server": [1, 2, 3]})  # fmt: skip
    _, state = env.reset(jax.random.PRNGKey(0))
    step = jax.jit(env.step)
    expected = arrivals({"kind": "per_link", "steps": STEPS, "server": [1, 2, 3]})
    for t in range(1, 13):
        send = jnp.full(3, t == 2)
        ids = jnp.arange(3.0)[:, None]
        action = Action(jnp.zeros(3, jnp.int32), {"c": (send, ids + 10 * t), "p": (send, ids + 100)})
        obs, state, *_ = step(jax.random.PRNGKey(t), state, action)
        heard = obs.deliveries["c"]
        mask, senders = np.asarray(heard.mask), np.asarray(heard.senders)
        c = [(0, int(senders[i, d]), i, float(np.asarray(heard.payload)[i, d, 0]))
             for i, d in zip(*np.nonzero(mask), strict=True)]  # fmt: skip
        got = np.asarray(obs.deliveries["p"].received)
        p = [(0, i, float(np.asarray(obs.deliveries["p"].payload)[i, 0]))
             for i in np.nonzero(got)[0]]  # fmt: skip
        assert (sorted(c), p) == (sorted(expected[t - 1][0]), expected[t - 1][1]), t
    kw = dict(num_agents=6, num_arms=4, horizon=300, topology="ring",
              latency={"kind": "pareto", "shape": 1.5, "max": 40})  # fmt: skip
    runs = 60
    a = evaluate(HOMOG, "ucb1_shared", runs=runs, env_kwargs=kw).final_regret_network
    b = evaluate(HOMOG, "ucb1_shared", runs=runs, env_kwargs=kw, backend="jax").final_regret_network
    se = math.sqrt(a.var(ddof=1) / runs + b.var(ddof=1) / runs)
    assert abs(a.mean() - b.mean()) <= 3 * se, (a.mean(), b.mean(), se)
