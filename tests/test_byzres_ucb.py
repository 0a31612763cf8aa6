"""ByzRes-UCB (docs/byzres-ucb.md): an independent plain loop of the rules of Zhu, Koppel,
Velasquez & Liu (TMLR; the authors' dist_TMLR.m) agrees with the batched agent, exactly on the
same reward streams with ties to the lowest arm and within 3 standard errors with uniform ties;
on a ring with f = 1 it is UCB1; the preset; the light cone under attack; bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest

import fedbandit_env
from agents.byzres_fusion import fuse, width_factor
from agents.byzres_ucb import ByzResUCB
from fedbandit_env import ConfigError
from fedbandit_env.bench import evaluate
from tests.dp_recsys_helpers import rollout
from tests.field_helpers import assert_agree, light_cone

MEANS = [0.5, 0.45, 0.4, 0.3]
ENV = "FedBandit/Homogeneous-v0"


def neighbours(topology: str, n: int) -> list[list[int]]:
    venv = fedbandit_env.make_vec(ENV, num_runs=1, num_agents=n, num_arms=2, horizon=5,
                                  topology=topology, family="homogeneous")  # fmt: skip
    edges = venv.config.topology.edges
    nb = [set() for _ in range(n)]
    for a, b in edges:
        nb[int(a)].add(int(b))
        nb[int(b)].add(int(a))
    return [sorted(s) for s in nb]


def attack_message(attack: str, sent: list, honest: list[int], means: list[float]):
    """What a Byzantine agent sends (docs/adversary.md): means and, per arm, the largest count
    among this step's honest messages."""
    m = len(means)
    counts = [max(sent[j][1][k] for j in honest) for k in range(m)]
    if attack == "zhu_code":
        values = [0.0] * m
    elif attack == "demote_best":
        best = means.index(max(means))
        values = [0.0 if k == best else 1.0 for k in range(m)]
    else:
        raise ValueError(attack)
    return values, counts


def plain_byzres(
    uniforms,
    nbrs,
    *,
    means=MEANS,
    byzantine=(),
    attack="zhu_code",
    kappa=1.5,
    f=1,
    fusion="trimmed",
    sync="step",
    rng=None,
):
    """One run of ByzRes-UCB, agent by agent and arm by arm, written from the pseudo-code of the
    authors' dist_TMLR.m (not from the agent's code). ``uniforms[p][i]``: agent i's reward noise
    of pull p (reward 1 iff below the arm's mean); ties to the lowest arm, or uniform from
    ``rng``. Returns the arms of every pull (P, N), the messages sent (list of (N, 2M) per
    sending step) and each agent's regret of the rounds after the init (N,)."""
    n_agents, m = len(nbrs), len(means)
    honest = [i for i in range(n_agents) if i not in byzantine]
    s = [[0.0] * m for _ in range(n_agents)]
    cnt = [[0.0] * m for _ in range(n_agents)]
    best = max(means)
    arms_log, sent_log = [], []
    regret = [0.0] * n_agents
    inbox = None  # inbox[i] = list of (h, values, counts) delivered to i

    def state_messages():
        return [([s[i][k] / max(cnt[i][k], 1.0) for k in range(m)], list(cnt[i]))
                for i in range(n_agents)]  # fmt: skip

    def deliver(sent):
        out = list(sent)
        for b in byzantine:
            out[b] = attack_message(attack, sent, honest, means)
        return [[(h, *out[h]) for h in nbrs[i]] for i in range(n_agents)]

    def choose(i, t):
        q = []
        for k in range(m):
            own = s[i][k] / cnt[i][k]
            if fusion == "none":
                a_vals, trim = [], f
            elif fusion == "mean":
                a_vals, trim = [v[k] for _, v, _ in inbox[i]], 0
            else:
                a_vals = [v[k] for _, v, c in inbox[i] if kappa * c[k] >= cnt[i][k]]
                trim = f
            if len(a_vals) <= 2 * trim:
                z, g = own, 1.0
            else:
                kept = sorted(a_vals)[trim : len(a_vals) - trim]
                total = 0.0
                for v in kept:
                    total += v
                z = (own + total) / (len(kept) + 1)
                eta = 1.0 / (len(kept) + 1)
                g = (4.0 * eta * eta + kappa * eta + kappa) / 4.0
            q.append(z + math.sqrt(2.0 * g * math.log(t) / cnt[i][k]))
        top = max(q)
        tied = [k for k in range(m) if q[k] == top]
        return tied[0] if rng is None else tied[int(rng.integers(len(tied)))]

    for p in range(len(uniforms)):
        if p >= m and sync == "comm_step" and fusion != "none":  # communication step
            msgs = state_messages()
            sent_log.append(msgs)
            inbox = deliver(msgs)
        msgs = state_messages()
        if p < m:
            arms = [p] * n_agents
        else:
            arms = [choose(i, p - m + 1) for i in range(n_agents)]
        for i in range(n_agents):
            k = arms[i]
            cnt[i][k] += 1.0
            s[i][k] += 1.0 if uniforms[p][i] < means[k] else 0.0
            if p >= m:
                regret[i] += best - means[k]
        arms_log.append(arms)
        if sync == "step" and fusion != "none":
            sent_log.append(msgs)
            inbox = deliver(msgs)
    return np.array(arms_log), [np.array([v + c for v, c in x]) for x in sent_log], np.array(regret)


def reward_uniforms(out, pulls: int) -> np.ndarray:
    """The environment's reward noise of each pull (P, B, N), from a fresh copy of its ``rewards``
    stream (one uniform per agent and pull, whatever arm it pulls)."""
    venv = out["venv"]
    stream = venv.engine.streams("rewards").buffered("uniform", (venv.num_agents,))
    return np.stack([stream.next() for _ in range(pulls)])


def agent_rollout(policy, runs=3, seed=5, **kw):
    out = rollout(policy, runs=runs, seed=seed, family="homogeneous", means=MEANS,
                  reward="bernoulli", **kw)  # fmt: skip
    pulls = out["pulls"][:, 0]
    arms = out["arms"][pulls]  # (P, B, N)
    sends = out["sends"].get("neighbors")
    payloads = out["payloads"].get("neighbors")
    return out, arms, sends, payloads


CASES = [
    # topology, N, Byzantine ids, attack, f, fusion, sync
    ("complete", 7, [0], "zhu_code", 1, "trimmed", "step"),
    ("complete", 8, [0, 1], "demote_best", 2, "trimmed", "comm_step"),
    ("complete", 7, [0], "demote_best", 1, "mean", "step"),
    ("star", 7, [3], "zhu_code", 1, "trimmed", "step"),
]


@pytest.mark.parametrize(("topology", "n", "byz", "attack", "f", "fusion", "sync"), CASES)
def test_same_streams_same_trajectories_as_a_plain_loop(topology, n, byz, attack, f, fusion, sync):
    """Ties to the lowest arm: every arm of every pull and every message agree exactly."""
    horizon = 150
    adversary = {"num_byzantine": len(byz), "placement": "fixed", "byzantine_ids": byz,
                 "attack": attack}  # fmt: skip
    policy = ByzResUCB(f=f, tiebreak="lowest", fusion=fusion, sync=sync)
    out, arms, sends, payloads = agent_rollout(policy, num_agents=n, horizon=horizon,
                                               topology=topology, adversary=adversary)  # fmt: skip
    u = reward_uniforms(out, horizon)
    nbrs = neighbours(topology, n)
    sent_steps = sends.any(axis=(1, 2))
    for b in range(arms.shape[1]):
        p_arms, p_msgs, _ = plain_byzres(u[:, b], nbrs, byzantine=byz, attack=attack, f=f,
                                         fusion=fusion, sync=sync)  # fmt: skip
        assert np.array_equal(arms[:, b], p_arms), f"run {b}: arms differ"
        agent_msgs = payloads[sent_steps][:, b]
        assert len(p_msgs) == agent_msgs.shape[0]
        assert np.array_equal(agent_msgs, np.stack(p_msgs)), f"run {b}: messages differ"
    # not vacuous: the fused index moved arms away from plain UCB1 on the same streams
    none_arms = agent_rollout(ByzResUCB(tiebreak="lowest", fusion="none"), num_agents=n,
                              horizon=horizon, topology=topology, adversary=adversary)[1]  # fmt: skip
    assert not np.array_equal(arms, none_arms)


def test_uniform_ties_agree_with_the_plain_loop_within_3_standard_errors():
    n, horizon, runs = 6, 304, 40
    adversary = {"num_byzantine": 1, "placement": "first", "attack": "zhu_code"}
    res = evaluate(ENV, ByzResUCB(), runs=runs, seed=0,
                   env_kwargs={"family": "homogeneous", "num_agents": n, "means": MEANS,
                               "horizon": horizon, "reward": "bernoulli",
                               "adversary": adversary},
                   checkpoints=np.array([4, horizon]))  # fmt: skip
    ours = (res.regret_by_agent[:, 1, 1:] - res.regret_by_agent[:, 0, 1:]).mean(axis=1)
    nbrs = neighbours("complete", n)
    plain = []
    for r in range(runs):
        g = np.random.default_rng([7, r])
        u = g.random((horizon, n))
        plain.append(plain_byzres(u, nbrs, byzantine=[0], rng=g)[2][1:].mean())
    assert_agree(ours, np.array(plain), "honest regret per agent")


@pytest.mark.parametrize("tiebreak", ["uniform", "lowest"])
def test_ring_with_f_1_is_ucb1_bit_for_bit(tiebreak):
    """Every agent of a ring has 2 = 2f neighbours, so every arm falls back to UCB1 with
    sqrt(2 ln t / n): the same trajectories as no communication, on the same streams."""
    kw = {"family": "homogeneous", "num_agents": 6, "means": MEANS, "horizon": 400,
          "reward": "bernoulli", "topology": "ring",
          "channels": {"neighbors": {"kind": "neighbors", "dim": 8}},
          "adversary": {"num_byzantine": 1, "placement": "first", "attack": "zhu_code"}}  # fmt: skip
    ring = evaluate(ENV, ByzResUCB(tiebreak=tiebreak, f=1), runs=3, seed=1, env_kwargs=kw)
    # no message of an attack reaches a learner that sends nothing: the bench runs it with the
    # same roles under 'silent' (the honest agents' streams are the attacked run's)
    silent = {**kw, "adversary": {**kw["adversary"], "attack": "silent"}}
    ucb1 = evaluate(ENV, ByzResUCB(tiebreak=tiebreak, fusion="none"), runs=3, seed=1,
                    env_kwargs=silent)  # fmt: skip
    assert np.array_equal(ring.regret_by_agent, ucb1.regret_by_agent)
    # the ring's agents talk (6 x 2 messages per step); without communication nobody does
    assert ring.messages.sum() == 3 * 400 * 12 and ucb1.messages.sum() == 0
    if tiebreak == "lowest":  # and the plain loop's UCB1
        out, arms, _, _ = agent_rollout(ByzResUCB(tiebreak="lowest", f=1), num_agents=6, horizon=400,
                                        topology="ring", adversary=kw["adversary"])  # fmt: skip
        u = reward_uniforms(out, 400)
        for b in range(arms.shape[1]):
            p_arms = plain_byzres(u[:, b], neighbours("ring", 6), fusion="none")[0]
            assert np.array_equal(arms[:, b], p_arms)


def test_fuse_by_hand():
    """One receiver, one arm, 5 neighbours: the filter drops the count-1 sender, the trim drops
    one of the two equal smallest values and the largest."""
    xbar = np.array([[[0.5]]])
    n = np.array([[[10.0]]])
    vals = np.array([0.1, 0.1, 0.9, 0.4, 0.6])[None, None, :, None]
    cnts = np.array([8.0, 7.0, 20.0, 1.0, 9.0])[None, None, :, None]  # 1.5 * 1 < 10
    heard = np.ones((1, 1, 5), dtype=bool)
    z, g, size = fuse(xbar, n, vals, cnts, heard, 1.5, 1)
    assert size[0, 0, 0] == 4  # A = {0.1, 0.1, 0.9, 0.6}, keep {0.1, 0.6}
    assert z[0, 0, 0] == pytest.approx((0.5 + 0.1 + 0.6) / 3)
    assert g[0, 0, 0] == pytest.approx(width_factor(2, 1.5))
    z, g, _ = fuse(xbar, n, vals, cnts, heard, 1.5, 2)  # |A| = 4 <= 2f: UCB1
    assert (z[0, 0, 0], g[0, 0, 0]) == (0.5, 1.0)
    z, _, size = fuse(xbar, n, vals, cnts, heard, 1.5, 0, filtered=False)
    assert size[0, 0, 0] == 5 and z[0, 0, 0] == pytest.approx((0.5 + 2.1) / 6)
    # the paper's example: N = 10, f = 1, all 9 others kept -> eta = 1/8, g = 0.4375
    assert width_factor(7, 1.5) == 0.4375


def test_preset():
    env = fedbandit_env.make_vec("FedBandit/Byzantine-ZhuTMLR-v0", num_runs=2)
    cfg = env.config
    assert (cfg.family, cfg.num_agents, cfg.num_arms, cfg.horizon) == ("homogeneous", 10, 4, 10_000)
    assert np.all(cfg.topology.degrees == 9)  # complete graph
    assert env.facts.channels["neighbors"]["dim"] == 8
    assert "reduce" not in env.facts.channels["neighbors"]
    adv = cfg.adversary
    assert (adv.num_byzantine, adv.placement, adv.attack) == (1, "first", "zhu_code")
    _, info = env.reset(seed=0)
    assert info.roles.tolist() == [[1] + [0] * 9] * 2
    assert np.allclose(env.engine.global_expected, [MEANS, MEANS])
    assert cfg.reward.name == "bernoulli"


@pytest.mark.parametrize("attack", ["zhu_code", "alie"])
def test_light_cone_of_an_honest_agent_under_attack(attack):
    """f = 0 on a ring (with f = 1 a ring is UCB1 and nothing travels): agent 3's change reaches
    agent i no sooner than d(3, i) steps later, through the graph or the rushing attacker."""
    light_cone(lambda: ByzResUCB(f=0), "neighbors", topology="ring", n=7, j=3, horizon=60,
               t_change=20, family="homogeneous", means=MEANS, reward="bernoulli",
               adversary={"num_byzantine": 1, "placement": "first", "attack": attack})  # fmt: skip


def test_batch_member_equals_run_alone():
    kw = {"horizon": 300}
    batch = evaluate("FedBandit/Byzantine-ZhuTMLR-v0", ByzResUCB(), runs=3, seed=10, env_kwargs=kw)
    alone = evaluate("FedBandit/Byzantine-ZhuTMLR-v0", ByzResUCB(), runs=1, seed=12, env_kwargs=kw)
    assert np.array_equal(batch.regret_by_agent[2], alone.regret_by_agent[0])


def test_bad_input_and_environments_it_cannot_run_on():
    for kwargs, match in (
        ({"kappa": 0.5}, "byzres_ucb: kappa: expected"),
        ({"kappa": "x"}, "byzres_ucb: kappa"),
        ({"f": -1}, "byzres_ucb: f: expected"),
        ({"f": 1.5}, "byzres_ucb: f"),
        ({"tiebreak": "random"}, "byzres_ucb: tiebreak: expected one of 'uniform', 'lowest'"),
        ({"sync": "late"}, "byzres_ucb: sync: expected one of 'step', 'comm_step'"),
        ({"fusion": "median"}, "byzres_ucb: fusion: expected one of 'trimmed', 'mean', 'none'"),
    ):
        with pytest.raises(ConfigError, match=match):
            ByzResUCB(**kwargs)
    with pytest.raises(ConfigError, match="byzres_ucb: family: expected 'homogeneous'"):
        evaluate("FedBandit/LinearContextual-v0", ByzResUCB(), runs=1, env_kwargs={"horizon": 10})
    with pytest.raises(ConfigError, match="byzres_ucb: family: expected 'homogeneous'"):
        evaluate("FedBandit/Heterogeneous-v0", ByzResUCB(), runs=1, env_kwargs={"horizon": 10})
    base = {"family": "homogeneous", "num_agents": 4, "means": MEANS}
    with pytest.raises(ConfigError, match="byzres_ucb: channels.neighbors.reduce: expected None"):
        evaluate(ENV, ByzResUCB(), runs=1, env_kwargs={
            **base, "horizon": 20,
            "channels": {"neighbors": {"kind": "neighbors", "dim": 8, "reduce": "mean"}}})  # fmt: skip
    with pytest.raises(ConfigError, match="byzres_ucb: channels.neighbors: expected"):
        evaluate(ENV, ByzResUCB(), runs=1, env_kwargs={
            **base, "horizon": 20, "channels": {"neighbors": {"kind": "neighbors", "dim": 3}}})  # fmt: skip
    with pytest.raises(ConfigError, match="byzres_ucb: horizon: expected more than M = 4"):
        evaluate(ENV, ByzResUCB(), runs=1, env_kwargs={**base, "horizon": 4})
