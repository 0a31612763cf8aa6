"""GosInE, synchronous (docs/gosine.md): agreement with a plain per-agent loop written from
the rules, the active-set invariants, the light cone, determinism and bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest

from agents.gosine import GosInE, sticky_sets
from fedbandit_env import ConfigError
from fedbandit_env.bench import evaluate
from tests.dp_recsys_helpers import rollout
from tests.field_helpers import assert_agree, batched, graph, light_cone, plain

N, K, T, RUNS = 5, 12, 1000, 40
MEANS = [0.95, 0.85] + [0.85 * x for x in np.sort(np.random.default_rng(1).random(K - 2))[::-1]]


def plain_gosine(rng, *, nbrs, n=N, k=K, T=T, means=MEANS, alpha=4.0, beta=3) -> tuple[float, int]:
    """One run of synchronous GosInE, agent by agent, from docs/gosine.md."""
    s = math.ceil(k / n)
    sticky = [{(i * s + m) % k for m in range(s)} for i in range(n)]
    U = [(i * s + s) % k for i in range(n)]
    L = [(i * s + s + 1) % k for i in range(n)]
    cnt = np.zeros((n, k))
    tot = np.zeros((n, k))
    start = np.zeros((n, k))
    best = max(means)
    regret, messages = 0.0, 0
    j = 1
    for t in range(T):  # t pulls done before this step
        for i in range(n):
            active = sticky[i] | {U[i], L[i]}
            idx = {}
            for a in active:
                idx[a] = (
                    math.inf
                    if cnt[i, a] == 0
                    else (tot[i, a] / cnt[i, a] + math.sqrt(alpha * math.log(t + 1) / cnt[i, a]))
                )
            top = sorted(a for a in active if idx[a] == max(idx.values()))
            arm = top[rng.integers(len(top))]
            cnt[i, arm] += 1
            tot[i, arm] += float(rng.random() < means[arm])
            regret += best - means[arm]
        if t + 1 == j**beta and t + 1 < T:  # phase end (the last one, at T, is never used)
            dn = cnt - start
            recs = []
            for i in range(n):
                if dn[i, U[i]] < dn[i, L[i]]:
                    U[i], L[i] = L[i], U[i]
                active = sorted(sticky[i] | {U[i], L[i]})
                most = max(dn[i, a] for a in active)
                top = [a for a in active if dn[i, a] == most]
                recs.append(top[rng.integers(len(top))])
            for i in range(n):
                partner = nbrs[i][rng.integers(len(nbrs[i]))]
                messages += 1
                rec = recs[partner]
                if rec not in sticky[i] | {U[i], L[i]}:
                    L[i] = rec
            start = cnt.copy()
            j += 1
        elif t + 1 == j**beta:
            j += 1
    return regret, messages


@pytest.mark.parametrize("topology", ["complete", "ring"])
def test_agrees_with_a_plain_loop_within_3_standard_errors(topology):
    _, nbrs = graph(topology, N)
    kw = {
        "num_agents": N,
        "means": MEANS,
        "horizon": T,
        "topology": topology,
        "reward": "bernoulli",
    }
    reg, msg = batched(GosInE(), RUNS, **kw)
    preg, pmsg = plain(lambda g: plain_gosine(g, nbrs=nbrs), RUNS, 5)
    assert_agree(reg, preg, f"regret ({topology})")
    assert_agree(msg, pmsg, "messages")
    assert msg[0] == N * 9  # phase ends 1, 8, ..., 729 (9 of them) before T = 1000


def test_sticky_sets_and_slots():
    sticky, u, l = sticky_sets(5, 12)  # s = 3
    assert sticky.sum(axis=1).tolist() == [3] * 5
    assert sorted(np.flatnonzero(sticky[4]).tolist()) == [0, 1, 2]  # 12, 13, 14 wrap around
    assert (u.tolist(), l.tolist()) == ([3, 6, 9, 0, 3], [4, 7, 10, 1, 4])


def test_active_set_invariants_and_arms_stay_active():
    """Every pull is of an active arm; U and L are never sticky and never equal; the active set
    holds ceil(K/N) + 2 arms."""
    states = []

    def hook(t, policy, action):
        states.append(
            (
                policy._active.copy(),
                policy.U.copy(),
                policy.L.copy(),
                action.arms.copy(),
                action.pull,
            )
        )

    rollout(
        GosInE(),
        runs=3,
        hook=hook,
        num_agents=N,
        horizon=300,
        topology="ring",
        means=MEANS,
        reward="bernoulli",
    )
    b, i = np.indices((3, N))
    sticky = sticky_sets(N, K)[0]
    for active, U, L, arms, pull in states:
        assert np.all(active.sum(axis=2) == math.ceil(K / N) + 2)
        assert np.all(U != L)
        assert not sticky[i, U].any() and not sticky[i, L].any()
        if pull is None:
            assert np.all(active[b, i, arms])
    inserted = any(not np.array_equal(states[0][2], s[2]) for s in states)
    assert inserted  # recommendations did change L


@pytest.mark.parametrize(("topology", "n"), [("ring", 9), ("star", 7), ("path", 6)])
@pytest.mark.parametrize("j", [0, 3])
def test_light_cone(topology, n, j):
    means = [0.9, 0.2, 0.8, 0.1, 0.3, 0.7, 0.4, 0.6, 0.5, 0.35, 0.25, 0.15]
    light_cone(
        lambda: GosInE(beta=2),
        "recommend",
        topology=topology,
        n=n,
        j=j,
        horizon=300,
        t_change=30,
        reach=0,
        means=means,
        reward={"kind": "gaussian", "sigma": 0.1},
    )


def test_batch_member_equals_run_alone():
    kw = {
        "family": "homogeneous",
        "num_agents": N,
        "means": MEANS,
        "horizon": 200,
        "topology": "ring",
        "reward": "bernoulli",
    }
    batch = evaluate("FedBandit/Homogeneous-v0", GosInE(), runs=3, seed=10, env_kwargs=kw)
    alone = evaluate("FedBandit/Homogeneous-v0", GosInE(), runs=1, seed=12, env_kwargs=kw)
    assert np.array_equal(batch.regret_network[2], alone.regret_network[0])


def test_bad_input_and_environments_it_cannot_run_on():
    with pytest.raises(ConfigError, match="gosine: beta"):
        GosInE(beta=1)
    with pytest.raises(ConfigError, match="gosine: family"):
        evaluate("FedBandit/LinearContextual-v0", GosInE(), runs=1, env_kwargs={"horizon": 10})
    with pytest.raises(ConfigError, match="gosine: num_arms"):
        evaluate(
            "FedBandit/Homogeneous-v0",
            GosInE(),
            runs=1,
            env_kwargs={"family": "homogeneous", "num_agents": 2, "num_arms": 3, "horizon": 20},
        )
    with pytest.raises(
        ConfigError, match="gosine: channels.recommend: expected mode .pull_one_neighbour."
    ):
        evaluate(
            "FedBandit/Homogeneous-v0",
            GosInE(),
            runs=1,
            env_kwargs={
                "family": "homogeneous",
                "num_agents": 4,
                "num_arms": 8,
                "horizon": 20,
                "channels": {"recommend": {"kind": "gossip", "dim": 1}},
            },
        )


def test_a_recommendation_that_is_no_arm_id_is_ignored():
    """A Byzantine neighbour's noisy reply (2.7, -1, 40 ...) is no recommendation: no arm is
    inserted and GosInE keeps running (it used to index with the raw value)."""
    from fedbandit_env.bench.evaluate import evaluate

    kwargs = {"num_agents": 6, "num_arms": 8, "horizon": 200, "topology": "complete"}
    attacked = {"num_byzantine": 2, "attack": "gaussian", "attack_kwargs": {"sigma": 30.0}}
    res = evaluate(
        "FedBandit/Homogeneous-v0", "gosine", runs=3, env_kwargs={**kwargs, "adversary": attacked}
    )
    assert np.isfinite(res.honest_regret_mean).all()
    silent = {"num_byzantine": 2, "attack": "silent"}
    quiet = evaluate(
        "FedBandit/Homogeneous-v0", "gosine", runs=3, env_kwargs={**kwargs, "adversary": silent}
    )
    # every noisy reply is rejected, as if the Byzantine agents were silent: same trajectories
    assert np.array_equal(res.honest_regret_mean, quiet.honest_regret_mean)
