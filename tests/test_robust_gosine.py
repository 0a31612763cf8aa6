"""Robust GosInE (docs/robust-gosine.md) and the gossip channel's exclusion mask
(docs/channels.md): rule "none" is the suite's GosInE bit for bit, a plain per-agent loop of the
2021 blocking rule gives the same blocklists and the same pulls on the same streams, the mask's
pull is uniform over what is left, an agent with nobody left is not charged, no mask (or an
all-False one) changes nothing, the presets, and bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest

import fedbandit_env
from agents.gosine import GosInE
from agents.robust_gosine import RobustGosInE, block_until
from fedbandit_env import ConfigError
from fedbandit_env.bench import evaluate
from fedbandit_env.errors import ActionError
from fedbandit_env.network.ledger import AGENT_AGENT
from fedbandit_env.policy import ParallelPolicyAdapter, run_episode
from tests.field_helpers import light_cone

N, K = 6, 12
MEANS = [0.95, 0.85] + [0.85 * x for x in np.sort(np.random.default_rng(1).random(K - 2))[::-1]]
PULL = {"kind": "gossip", "dim": 1, "mode": "pull_one_neighbour"}


def _env_kwargs(topology="complete", horizon=600, adversary=None, n=N):
    return {
        "family": "homogeneous",
        "num_agents": n,
        "means": MEANS,
        "horizon": horizon,
        "topology": topology,
        "reward": "bernoulli",
        "channels": {"recommend": PULL},
        "adversary": adversary,
    }


# ------------------------------------------------------------------ V1: rule "none" is GosInE
@pytest.mark.parametrize(
    "adversary", [None, {"num_byzantine": 2, "attack": "rec_smart"}], ids=["m=0", "m=2"]
)
def test_rule_none_is_gosine_bit_for_bit(adversary):
    kw = _env_kwargs("ring", 700, adversary)
    a = evaluate("FedBandit/Homogeneous-v0", GosInE(), runs=3, seed=4, env_kwargs=kw)
    b = evaluate(
        "FedBandit/Homogeneous-v0", RobustGosInE(rule="none"), runs=3, seed=4, env_kwargs=kw
    )
    assert np.array_equal(a.regret_by_agent, b.regret_by_agent)
    assert np.array_equal(a.messages, b.messages)
    c = evaluate("FedBandit/Homogeneous-v0", RobustGosInE(), runs=3, seed=4, env_kwargs=kw)
    if adversary is not None:  # blocking does change the run (the comparison can fail)
        assert not np.array_equal(a.regret_by_agent, c.regret_by_agent)


# ------------------------------------------------ an independent plain loop of the 2021 rule
def _plain_blocking_run(topology, eta, runs=3, horizon=1500, seed=2):
    """Play the agent in the vector view and replay the blocking rule agent by agent in plain
    Python from what it observes: its own B_j (the arm it recommends), the deliveries and the
    channel's uniforms (a spy on the stream; no value is changed). Returns the counts of
    blocking events and of pulls with nobody left."""
    kw = _env_kwargs(topology, horizon, {"num_byzantine": 2, "attack": "rec_naive"})
    policy = RobustGosInE(beta=2, eta=eta)
    venv = fedbandit_env.make_vec("FedBandit/Homogeneous-v0", num_runs=runs, **kw)
    obs, _ = venv.reset(seed=seed)
    policy.reset(venv.facts, venv.agent_rng())
    channel = venv.engine.channels["recommend"]
    drawn = []
    inner = channel._edge_u.next

    def spy():
        u = inner()
        drawn.append(u.copy())
        return u

    channel._edge_u.next = spy
    nbrs = [[int(h) for h in row if h >= 0] for row in venv.config.topology.neighbors]
    blocked = [[{} for _ in range(N)] for _ in range(runs)]  # blocked[b][i][h] = until
    rec = [[None] * N for _ in range(runs)]  # (arm, source) of the last recommendation
    j = 0
    events = nobody = 0
    pending = None
    while not venv.engine.truncated:
        action = policy.act(obs)
        if pending is not None:  # the agent folded the delivery in: its sources
            assert np.array_equal(policy.src, pending)
            pending = None
        talk = action.pull is not None
        if talk:
            j += 1  # the k-th communication step follows the end of phase k
            best = policy.outgoing[..., 0].astype(int)  # B_j of every agent
            send, payload, mask = action.messages["recommend"]
            for b in range(runs):
                for i in range(N):
                    if j >= 2 and rec[b][i] is not None and rec[b][i][0] != best[b, i]:
                        h = rec[b][i][1]
                        until = math.ceil(j**eta)
                        blocked[b][i][h] = max(blocked[b][i].get(h, 0), until)
                        events += 1
                    barred = {h for h, until in blocked[b][i].items() if until > j}
                    assert set(np.flatnonzero(mask[b, i]).tolist()) == barred, (b, i, j)
        else:
            assert len(action.messages["recommend"]) == 2  # no mask outside phase ends
        obs, _, _, _, info = venv.step(action.arms, action.messages, action.pull)
        if talk:
            u = drawn[-1]
            d = obs.deliveries["recommend"]
            for b in range(runs):
                for i in range(N):
                    barred = {h for h, until in blocked[b][i].items() if until > j}
                    left = [h for h in nbrs[i] if h not in barred]
                    want = left[min(int(u[b, i] * len(left)), len(left) - 1)] if left else -1
                    assert d.partner[b, i] == want, (b, i, j)
                    nobody += not left
                    rec[b][i] = (int(d.payload[b, i, 0]), want) if d.received[b, i] else None
            # every pull made is answered (all send at a phase end), nobody-left is not charged
            assert np.array_equal(
                info.ledger.step.messages[:, AGENT_AGENT], (d.partner >= 0).sum(axis=1)
            )
            assert np.array_equal(d.received, d.partner >= 0)
            pending = np.where(d.received, d.partner, -1)
    assert events == policy.blocks
    return events, nobody, j


@pytest.mark.parametrize(("topology", "eta"), [("complete", 2.0), ("ring", 1.5)])
def test_blocklists_and_pulls_match_a_plain_loop(topology, eta):
    events, nobody, phases = _plain_blocking_run(topology, eta)
    assert phases >= 30 and events > 0  # the rule fired: the comparison can fail
    if topology == "ring":
        assert nobody > 0  # both ring neighbours blocked at some phase end: pulls nobody


def test_block_until():
    assert [block_until(j, 2) for j in (2, 3, 5)] == [4, 9, 25]
    assert block_until(3, 1.5) == math.ceil(3**1.5) == 6


def test_reblocking_keeps_the_later_expiry():
    policy = RobustGosInE(eta=2.0)
    venv = fedbandit_env.make_vec(
        "FedBandit/Homogeneous-v0", num_runs=1, **_env_kwargs("complete", 50)
    )
    venv.reset(seed=0)
    policy.reset(venv.facts, venv.agent_rng())
    policy.src[0, 0], policy.rec[0, 0] = 3, 5
    policy._block(4, np.zeros((1, N), dtype=np.int64))  # rec 5 != B_j 0: until 16
    assert policy.blocked_until[0, 0, 3] == 16
    policy.blocked_until[0, 0, 3] = 100
    policy._block(5, np.zeros((1, N), dtype=np.int64))  # 25 < 100: kept
    assert policy.blocked_until[0, 0, 3] == 100
    policy._block(6, np.full((1, N), 5, dtype=np.int64))  # rec == B_j: no block
    assert policy.blocks == 2
    assert policy.blocked(99)[0, 0, 3] and not policy.blocked(100)[0, 0, 3]


@pytest.mark.parametrize(("topology", "n"), [("ring", 9), ("path", 6)])
def test_light_cone(topology, n):
    """Blocking uses only the agent's own B_j and what it received: information still moves
    one hop per step."""
    light_cone(
        lambda: RobustGosInE(beta=2, eta=1.5),
        "recommend",
        topology=topology,
        n=n,
        j=0,
        horizon=300,
        t_change=30,
        reach=0,
        means=[0.9, 0.2, 0.8, 0.1, 0.3, 0.7, 0.4, 0.6, 0.5, 0.35, 0.25, 0.15],
        reward={"kind": "gaussian", "sigma": 0.1},
    )


# ------------------------------------------------------------------ the exclusion mask
def _venv(n=5, topology="complete", runs=1, **channel):
    v = fedbandit_env.make_vec(
        "FedBandit/Heterogeneous-v0", num_runs=runs, num_agents=n, num_arms=3, horizon=400,
        topology=topology, channels={"g": {**PULL, **channel}}, c2=2.0,
    )  # fmt: skip
    v.reset(seed=0)
    return v


def _message(v, exclude=None, senders=None):
    shape = (v.num_runs, v.num_agents)
    send = np.ones(shape, dtype=bool)
    if senders is not None:
        send[:] = False
        send[:, senders] = True
    payload = np.broadcast_to(np.arange(v.num_agents, dtype=float)[None, :, None], (*shape, 1))
    return (send, payload) if exclude is None else (send, payload, exclude)


def _arms(v):
    return np.zeros((v.num_runs, v.num_agents), dtype=np.int64)


def test_the_pull_is_uniform_over_the_neighbours_left():
    v = _venv(n=5, runs=4000)
    mask = np.zeros((4000, 5, 5), dtype=bool)
    mask[:, 0, [1, 3]] = True  # agent 0 may pull 2 or 4
    mask[:, 2, :] = True  # agent 2 may pull nobody
    obs, _, _, _, info = v.step(_arms(v), {"g": _message(v, mask)})
    d = obs.deliveries["g"]
    counts = np.bincount(d.partner[:, 0], minlength=5)
    assert counts[[0, 1, 3]].sum() == 0
    assert abs(counts[2] - 2000) < 5 * math.sqrt(1000)
    assert np.all(d.partner[:, 2] == -1) and not d.received[:, 2].any()
    assert np.all(d.payload[:, 2] == 0.0)
    assert np.array_equal(d.payload[..., 0][d.received], d.partner[d.received].astype(float))
    step = info.ledger.step
    assert np.all(step.messages[:, AGENT_AGENT] == 4)  # agent 2's pull is not charged
    assert np.allclose(step.cost[:, AGENT_AGENT], 2.0 * 4)
    assert np.all(step.sent[:, 2] == (d.partner == 2).sum(axis=1))


def test_the_same_draw_picks_among_the_neighbours_left():
    """One uniform per agent: with the mask, floor(u d') over the remaining neighbours in id
    order, u the draw the unmasked channel uses (two copies of one seed)."""
    free, masked = _venv(n=6, topology="ring", runs=300), _venv(n=6, topology="ring", runs=300)
    mask = np.zeros((300, 6, 6), dtype=bool)
    mask[:, 0, 1] = True  # agent 0 (neighbours 1, 5) keeps only 5
    f, *_ = free.step(_arms(free), {"g": _message(free)})
    m, *_ = masked.step(_arms(masked), {"g": _message(masked, mask)})
    assert np.all(m.deliveries["g"].partner[:, 0] == 5)
    assert np.array_equal(m.deliveries["g"].partner[:, 1:], f.deliveries["g"].partner[:, 1:])
    for _ in range(5):  # later draws did not move
        f, *_ = free.step(_arms(free), {"g": _message(free)})
        m, *_ = masked.step(_arms(masked), {"g": _message(masked)})
        assert np.array_equal(f.deliveries["g"].partner, m.deliveries["g"].partner)


def test_no_mask_and_an_all_false_mask_change_nothing():
    a, b = _venv(n=7, topology="star", runs=20), _venv(n=7, topology="star", runs=20)
    for t in range(30):
        senders = [t % 7, (3 * t) % 7]
        oa, ra, _, _, ia = a.step(_arms(a), {"g": _message(a, senders=senders)})
        mask = np.zeros((20, 7, 7), dtype=bool)
        ob, rb, _, _, ib = b.step(_arms(b), {"g": _message(b, mask, senders)})
        da, db = oa.deliveries["g"], ob.deliveries["g"]
        assert np.array_equal(da.partner, db.partner)
        assert np.array_equal(da.received, db.received)
        assert np.array_equal(da.payload, db.payload)
        assert np.array_equal(ra, rb)
        assert np.array_equal(ia.ledger.step.messages, ib.ledger.step.messages)
        assert np.array_equal(ia.ledger.step.sent, ib.ledger.step.sent)


def test_the_privacy_wrappers_pass_the_mask_on():
    from fedbandit_env.wrappers import PrivacyVectorWrapper, PrivacyWrapper

    v = PrivacyVectorWrapper(_venv(n=4, runs=3), {"g": {"epsilon": 1.0}})
    v.reset(seed=0)
    mask = np.zeros((3, 4, 4), dtype=bool)
    mask[:, 0, 1:] = True
    obs, *_ = v.step(_arms(v), {"g": _message(v, mask)})
    assert np.all(obs.deliveries["g"].partner[:, 0] == -1)
    assert np.all(obs.deliveries["g"].partner[:, 1:] >= 0)
    env = PrivacyWrapper(
        fedbandit_env.make(
            "FedBandit/Heterogeneous-v0", num_agents=4, num_arms=3, horizon=10,
            topology="complete", channels={"g": PULL},
        ),
        {"g": {"epsilon": 1.0}},
    )  # fmt: skip
    env.reset(seed=0)
    acts = {a: {"arm": 0, "messages": {"g": {"send": 1, "payload": [0.0],
                                           "exclude": [a == "agent_0"] * 4}}}
            for a in env.agents}  # fmt: skip
    obs, *_ = env.step(acts)
    assert obs["agent_0"]["channels"]["g"]["partner"] == -1  # it barred everyone
    assert all(obs[a]["channels"]["g"]["partner"] >= 0 for a in ("agent_1", "agent_2"))


def test_bad_masks_are_refused_naming_the_field():
    v = _venv(n=4, runs=2)
    with pytest.raises(ActionError, match=r"messages.g.exclude.*shape \(2, 4, 4\)"):
        v.step(_arms(v), {"g": _message(v, np.zeros((2, 4, 3), dtype=bool))})
    with pytest.raises(ActionError, match=r"messages.g.exclude.*bool"):
        v.step(_arms(v), {"g": _message(v, np.zeros((2, 4, 4), dtype=np.int64))})
    with pytest.raises(ActionError, match=r"messages.g: expected \(send, payload\)"):
        v.step(_arms(v), {"g": (*_message(v, np.zeros((2, 4, 4), bool)), None)})
    edge = _venv(n=4, runs=2, mode="edge")
    with pytest.raises(ActionError, match=r"messages.g.exclude: expected no exclusion mask.*edge"):
        edge.step(_arms(edge), {"g": _message(edge, np.zeros((2, 4, 4), dtype=bool))})
    nb = fedbandit_env.make_vec(
        "FedBandit/Heterogeneous-v0", num_runs=2, num_agents=4, num_arms=3, horizon=10,
        channels={"n": {"kind": "neighbors", "dim": 1}},
    )  # fmt: skip
    nb.reset(seed=0)
    with pytest.raises(ActionError, match=r"messages.n.exclude: expected no exclusion mask"):
        nb.step(_arms(nb), {"n": _message(nb, np.zeros((2, 4, 4), dtype=bool))})


def test_parallel_view_takes_the_mask_and_matches_the_vector_view():
    kw = _env_kwargs("ring", 300, {"num_byzantine": 2, "attack": "rec_naive"})
    vec = evaluate("FedBandit/Homogeneous-v0", RobustGosInE(beta=2), runs=1, seed=5, env_kwargs=kw)
    env = fedbandit_env.make("FedBandit/Homogeneous-v0", **kw)
    traj = run_episode(env, RobustGosInE(beta=2), seed=5)
    excl = [a for a, *_ in traj if "exclude" in a["agent_0"]["messages"]["recommend"]]
    assert len(excl) >= 10
    regret = [traj[-1][3][f"agent_{i}"]["cumulative_regret"] for i in range(N)]
    assert regret == pytest.approx(vec.regret_by_agent[0, -1].tolist(), abs=1e-9)
    with pytest.raises(ActionError, match=r"agent_0: messages.recommend.exclude: expected 6"):
        env.reset(seed=0)
        acts = {a: {"arm": 0, "messages": {"recommend": {"send": 1, "payload": [0.0],
                                                         "exclude": [1, 0]}}}
                for a in env.agents}  # fmt: skip
        env.step(acts)
    assert ParallelPolicyAdapter  # the adapter passes the third element as "exclude"


# ------------------------------------------------------------------ presets
def test_presets():
    v = fedbandit_env.make_vec("FedBandit/Malicious-GosInE-v0", num_runs=2)
    _, info = v.reset(seed=0)
    assert v.num_agents == 20 and v.config.num_arms == 40 and v.horizon == 64_000
    assert np.array_equal(info.roles[0], [0] * 15 + [1] * 5)
    means = v.engine.global_expected[0]
    assert means[:2] == pytest.approx([0.95, 0.85]) and means[2:].max() < 0.85
    assert v.config.topology.num_components == 1 and set(v.config.topology.degrees) == {19}
    for p in (1.0, 0.5, 0.25):
        w = fedbandit_env.make_vec("FedBandit/Malicious-Vial22-v0", num_runs=1, p=p, horizon=5)
        _, info = w.reset(seed=0)
        topo = w.config.topology
        assert w.num_agents == 35 and w.config.num_arms == 100
        assert np.array_equal(info.roles[0], [0] * 25 + [1] * 10)
        honest = topo.adjacency[:25, :25] if hasattr(topo, "adjacency") else None
        edges = {(int(a), int(b)) for a, b in topo.edges if a < 25 and b < 25}
        assert _connected(25, edges), p
        assert topo.num_components == 1
        if honest is not None:
            assert honest.shape == (25, 25)
        mean_degree = 2 * len(topo.edges) / 35
        assert abs(mean_degree - 34 * p) < 4, (p, mean_degree)
    again = fedbandit_env.make_vec("FedBandit/Malicious-Vial22-v0", p=0.25, graph_seed=0)
    assert np.array_equal(again.config.topology.edges, topo.edges)
    other = fedbandit_env.make_vec("FedBandit/Malicious-Vial22-v0", p=0.25, graph_seed=1)
    assert not np.array_equal(other.config.topology.edges, topo.edges)
    with pytest.raises(ConfigError, match="Malicious-Vial22-v0: p"):
        fedbandit_env.make_vec("FedBandit/Malicious-Vial22-v0", p=0.0)
    with pytest.raises(ConfigError, match=r"Malicious-Vial22-v0: unknown keyword.*num_agents"):
        fedbandit_env.make_vec("FedBandit/Malicious-Vial22-v0", num_agents=30)
    res = evaluate(
        "FedBandit/Malicious-GosInE-v0",
        RobustGosInE(sticky_agents=15),
        runs=1,
        env_kwargs={"horizon": 300},
    )
    assert res.roles.shape == (1, 20) and np.isfinite(res.honest_regret_mean).all()


def _connected(n, edges):
    seen, todo = {0}, [0]
    while todo:
        a = todo.pop()
        for x, y in edges:
            for u, w in ((x, y), (y, x)):
                if u == a and w not in seen:
                    seen.add(w)
                    todo.append(w)
    return len(seen) == n


# ------------------------------------------------------------------ bad input
def test_config_errors_name_the_agent_and_field():
    with pytest.raises(ConfigError, match=r"robust_gosine: rule: expected one of \['2021'"):
        RobustGosInE(rule="2022")
    with pytest.raises(ConfigError, match="robust_gosine: eta"):
        RobustGosInE(eta=1.0)
    with pytest.raises(ConfigError, match="robust_gosine: beta"):
        RobustGosInE(beta=1)
    with pytest.raises(ConfigError, match="robust_gosine: alpha"):
        RobustGosInE(alpha=0.0)
    with pytest.raises(ConfigError, match="robust_gosine: sticky_agents"):
        RobustGosInE(sticky_agents=0)
    with pytest.raises(ConfigError, match=r"robust_gosine: sticky_agents: expected an int in"):
        evaluate(
            "FedBandit/Homogeneous-v0", RobustGosInE(sticky_agents=9), runs=1,
            env_kwargs=_env_kwargs(horizon=10),
        )  # fmt: skip
    with pytest.raises(ConfigError, match=r"robust_gosine: num_arms: expected K >= ceil"):
        evaluate(
            "FedBandit/Homogeneous-v0", RobustGosInE(sticky_agents=1), runs=1,
            env_kwargs=_env_kwargs(horizon=10),
        )  # fmt: skip
    with pytest.raises(ConfigError, match="robust_gosine: family"):
        evaluate("FedBandit/LinearContextual-v0", RobustGosInE(), runs=1, env_kwargs={"horizon": 5})


def test_sticky_agents_sizes_the_sticky_sets():
    policy = RobustGosInE(sticky_agents=4)
    venv = fedbandit_env.make_vec(
        "FedBandit/Homogeneous-v0", num_runs=1, **_env_kwargs("complete", 10)
    )
    venv.reset(seed=0)
    policy.reset(venv.facts, venv.agent_rng())
    assert np.all(policy.sticky.sum(axis=1) == 3)  # ceil(12 / 4)
    assert policy.sticky[:4].any(axis=0).all()  # agents 0..3 cover every arm


def test_jax_backend_checks_the_mask_by_name():
    """The JAX gossip channel takes the mask (tests/test_jax_robust_agents.py); one of the
    wrong shape is refused by name."""
    fj = pytest.importorskip("fedbandit_env.jax")
    jnp = pytest.importorskip("jax.numpy")
    env = fj.make("FedBandit/Homogeneous-v0", **{**_env_kwargs(horizon=5), "adversary": None})
    n = env.num_agents
    message = (jnp.ones(n, bool), jnp.zeros((n, 1)), jnp.zeros((n, n + 1), bool))
    with pytest.raises(ActionError, match="messages.recommend.exclude"):
        env._message("recommend", env.channels["recommend"], message)
