"""coop-UCB2 (docs/coop-ucb2.md): agreement with a plain per-agent loop written from the rules,
the consensus invariants, the light cone, determinism and bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest

from agents.coop_ucb2 import CoopUCB2
from fedbandit_env import ConfigError
from fedbandit_env.bench import evaluate
from tests.dp_recsys_helpers import rollout
from tests.field_helpers import assert_agree, batched, graph, light_cone, plain

MEANS = [0.9, 0.6, 0.5, 0.3]
SIGMA = 0.5
N, K, T, RUNS = 6, 4, 300, 40


def plain_coop(
    rng, *, A, gamma=2.0, eta=2.0, sigma=1.0, kappa=0.5, T=T, means=MEANS, noise=SIGMA
) -> tuple[float, int]:
    """One run of coop-UCB2, agent by agent, from docs/coop-ucb2.md: choose, pull, then
    nhat <- P (nhat + xi), shat <- P (shat + r xi) with P = I - (kappa/d_max) L."""
    n, k = A.shape[0], len(means)
    d_max = A.sum(axis=1).max()
    P = np.eye(n) - kappa / d_max * (np.diag(A.sum(axis=1)) - A)
    c0 = 2 * gamma / (1 - eta**2 / 16)
    nhat = np.zeros((n, k))
    shat = np.zeros((n, k))
    best = max(means)
    regret, messages = 0.0, 0
    for t in range(1, T + 1):
        xi = np.zeros((n, k))
        rew = np.zeros((n, k))
        for i in range(n):
            if t <= k:
                arm = t - 1
            else:
                lt = math.log(max(t, 2))
                q = [
                    shat[i, a] / nhat[i, a]
                    + sigma
                    * math.sqrt(
                        c0 * (nhat[i, a] + math.sqrt(lt)) / (n * nhat[i, a]) * lt / nhat[i, a]
                    )
                    for a in range(k)
                ]
                top = [a for a in range(k) if q[a] == max(q)]
                arm = top[rng.integers(len(top))]
            u = means[arm] + noise * rng.standard_normal()
            regret += best - means[arm]
            xi[i, arm] = 1.0
            rew[i, arm] = u
        if t < T:  # the consensus round before the next pull
            nhat = P @ (nhat + xi)
            shat = P @ (shat + rew)
            messages += int(A.sum())
    return regret, messages


@pytest.mark.parametrize(
    ("kwargs", "topology"), [({}, "ring"), ({"gamma": 1.01, "eta": 0.0}, "star")]
)
def test_agrees_with_a_plain_loop_within_3_standard_errors(kwargs, topology):
    A, _ = graph(topology, N)
    kw = {
        "num_agents": N,
        "means": MEANS,
        "horizon": T,
        "topology": topology,
        "reward": {"kind": "gaussian", "sigma": SIGMA},
    }
    reg, msg = batched(CoopUCB2(**kwargs), RUNS, **kw)
    preg, pmsg = plain(lambda g: plain_coop(g, A=A, **kwargs), RUNS, 11)
    assert_agree(reg, preg, f"regret {kwargs}")
    assert_agree(msg, pmsg, "messages")
    assert msg[0] == (T - 1) * A.sum()  # one message per directed edge per consensus round


def test_consensus_keeps_the_network_totals():
    """Column sums of nhat and shat equal the network's pull counts and reward sums (P is doubly
    stochastic), and nhat == 1 when the index is first used."""
    seen = {}

    def hook(t, policy, action):
        seen[t] = (policy.nhat.copy(), policy.shat.copy(), action.pull)

    out = rollout(CoopUCB2(), runs=2, hook=hook, num_agents=5, horizon=30, topology="ring")
    rewards, arms, pulls = out["rewards"], out["arms"], out["pulls"]
    pull_steps = np.flatnonzero(pulls[:, 0])
    K4 = 4
    # the act of the engine step after round K's communication step holds nhat == 1
    step_k1 = pull_steps[K4] + 1  # engine step (1-based) choosing round K + 1
    assert np.allclose(seen[step_k1][0], 1.0)
    last = pull_steps[-1] + 1
    counts = np.zeros((2, K4))
    sums = np.zeros((2, K4))
    for s in pull_steps[:-1]:  # every pull but the last one has been mixed in
        for b in range(2):
            np.add.at(counts[b], arms[s, b], 1.0)
            np.add.at(sums[b], arms[s, b], rewards[s, b])
    nhat, shat, _ = seen[last]
    assert np.allclose(nhat.sum(axis=1), counts)
    assert np.allclose(shat.sum(axis=1), sums)


@pytest.mark.parametrize(("topology", "n"), [("ring", 9), ("star", 7), ("path", 6)])
def test_light_cone(topology, n):
    light_cone(
        CoopUCB2,
        "neighbors",
        topology=topology,
        n=n,
        j=0,
        horizon=60,
        t_change=25,
        reward={"kind": "gaussian", "sigma": 0.1},
    )


def test_batch_member_equals_run_alone():
    kw = {
        "family": "homogeneous",
        "num_agents": 5,
        "means": MEANS,
        "horizon": 50,
        "topology": "ring",
        "reward": {"kind": "gaussian", "sigma": 0.5},
    }
    batch = evaluate("FedBandit/Homogeneous-v0", CoopUCB2(), runs=3, seed=10, env_kwargs=kw)
    alone = evaluate("FedBandit/Homogeneous-v0", CoopUCB2(), runs=1, seed=12, env_kwargs=kw)
    assert np.array_equal(batch.regret_network[2], alone.regret_network[0])


def test_bad_input_and_environments_it_cannot_run_on():
    with pytest.raises(ConfigError, match="coop_ucb2: eta"):
        CoopUCB2(eta=4.0)
    with pytest.raises(ConfigError, match="coop_ucb2: kappa"):
        CoopUCB2(kappa=1.5)
    with pytest.raises(ConfigError, match="coop_ucb2: family"):
        evaluate("FedBandit/LinearContextual-v0", CoopUCB2(), runs=1, env_kwargs={"horizon": 10})
    with pytest.raises(ConfigError, match="coop_ucb2: kappa"):  # kappa = 1 on an even ring
        evaluate(
            "FedBandit/Homogeneous-v0",
            CoopUCB2(kappa=1.0),
            runs=1,
            env_kwargs={
                "family": "homogeneous",
                "num_agents": 4,
                "horizon": 20,
                "topology": "ring",
            },
        )
