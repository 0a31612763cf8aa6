"""DDUCB (docs/dducb.md): agreement with a plain per-agent loop written from the rules,
stage lengths and the Chebyshev mixing, the light cone, determinism and bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest

from agents.dducb import DDUCB, chebyshev_coefficients, stage_length
from fedbandit_env import ConfigError
from fedbandit_env.bench import evaluate
from tests.field_helpers import assert_agree, batched, graph, light_cone, plain

MEANS = [0.9, 0.6, 0.5, 0.3]
SIGMA = 0.5
N, K, T, RUNS = 6, 4, 300, 40


def plain_dducb(
    rng,
    *,
    accelerated: bool,
    A: np.ndarray,
    nbrs,
    T: int = T,
    means=MEANS,
    sigma=SIGMA,
    eta=2.0,
    eps=1 / 22,
) -> tuple[float, int]:
    """One run of DDUCB, agent by agent, from the rules of docs/dducb.md (not from the agent's
    code): the Chebyshev recursion is run on the raw iterates y_r and divided by T_C(1/lambda) at
    the end."""
    n, k = A.shape[0], len(means)
    d_max = A.sum(axis=1).max()
    kappa = d_max / (d_max + 1)
    P = np.eye(n) - kappa / d_max * (np.diag(A.sum(axis=1)) - A)
    ev = np.sort(np.abs(np.linalg.eigvalsh(P)))[::-1]
    lam = ev[1]
    if accelerated:
        C = math.ceil(math.log(2 * n / eps) / math.sqrt(2 * math.log(1 / lam)))
    else:
        C = math.ceil(math.log(n / eps) / math.log(1 / lam))
    best = max(means)
    regret = 0.0
    messages = 0

    def draw(arm):
        return means[arm] + sigma * rng.standard_normal()

    beta = [np.zeros((2, k)) for _ in range(n)]
    for t in range(k):  # init: everybody pulls every arm once
        for i in range(n):
            beta[i][0, t] = draw(t)
            beta[i][1, t] = 1.0
            regret += best - means[t]
    alpha = [b / n for b in beta]
    gamma = [np.zeros((2, k)) for _ in range(n)]
    delta = [np.zeros((2, k)) for _ in range(n)]
    s = float(k)
    t = k
    y_prev, y = None, [b.copy() for b in beta]
    norm_prev, norm = None, 1.0
    r = 0
    while t < T:
        for i in range(n):  # choose and pull
            cnt = alpha[i][1]
            idx = np.full(k, np.inf)
            ok = cnt > 0
            idx[ok] = alpha[i][0, ok] / cnt[ok] + np.sqrt(2 * eta * math.log(s) / (n * cnt[ok]))
            top = np.flatnonzero(idx == idx.max())
            arm = int(top[rng.integers(top.size)])
            u = draw(arm)
            regret += best - means[arm]
            gamma[i][:, arm] += (u, 1.0)
            alpha[i][:, arm] += (u / n, 1.0 / n)
        s += n
        t += 1
        messages += int(A.sum())  # every agent sends to each neighbour
        Py = [sum(P[i, j] * y[j] for j in [i, *nbrs[i]]) for i in range(n)]
        if accelerated:
            if r == 0:
                new, new_norm = [v / lam for v in Py], norm / lam
            else:
                new = [2 / lam * Py[i] - y_prev[i] for i in range(n)]
                new_norm = 2 / lam * norm - norm_prev
            y_prev, y, norm_prev, norm = y, new, norm, new_norm
        else:
            y = Py
        r += 1
        if r == C:
            mixed = [v / norm for v in y] if accelerated else y
            s = float((t - C) * n)
            for i in range(n):
                if accelerated:
                    delta[i] = delta[i] + mixed[i]
                    alpha[i] = delta[i].copy()
                    beta[i] = gamma[i].copy()
                else:
                    alpha[i] = mixed[i].copy()
                    beta[i] = mixed[i] + gamma[i]
                gamma[i] = np.zeros((2, k))
            y_prev, y = None, [b.copy() for b in beta]
            norm_prev, norm = None, 1.0
            r = 0
    return regret, messages


@pytest.mark.parametrize("accelerated", [True, False])
def test_agrees_with_a_plain_loop_within_3_standard_errors(accelerated):
    A, nbrs = graph("ring", N)
    kw = {
        "num_agents": N,
        "means": MEANS,
        "horizon": T,
        "topology": "ring",
        "reward": {"kind": "gaussian", "sigma": SIGMA},
    }
    reg, msg = batched(DDUCB(accelerated=accelerated), RUNS, **kw)  # index sigma 1
    preg, pmsg = plain(lambda g: plain_dducb(g, accelerated=accelerated, A=A, nbrs=nbrs), RUNS, 7)
    assert_agree(reg, preg, f"regret (accelerated={accelerated})")
    assert_agree(msg, pmsg, "messages")
    assert msg[0] == (T - K) * 2 * N  # one message per directed edge per step


def test_sigma_enters_the_bonus_squared():
    """The plain loop above uses the index sigma 1; sigma enters as 2 eta sigma^2 / N."""
    agent = DDUCB(sigma=2.0)
    evaluate(
        "FedBandit/Homogeneous-v0",
        agent,
        runs=1,
        env_kwargs={
            "family": "homogeneous",
            "num_agents": 4,
            "means": MEANS,
            "horizon": 20,
            "topology": "ring",
        },
    )
    assert agent.bonus == pytest.approx(2 * 2.0 * 4.0 / 4)


def test_chebyshev_normalised_recursion_equals_the_polynomial():
    """z_C = T_C(P/lam) x / T_C(1/lam) for a random symmetric stochastic P."""
    A, _ = graph("ring", 7)
    P = (np.eye(7) + A) / 3
    lam = np.sort(np.abs(np.linalg.eigvalsh(P)))[::-1][1]
    x = np.random.default_rng(0).random((7, 3))
    C = 9
    a, b = chebyshev_coefficients(lam, C)
    z_prev, z = x, P @ x
    for r in range(1, C):
        z_prev, z = z, a[r] * (P @ z) - b[r] * z_prev
    w, V = np.linalg.eigh(P)
    cheb = np.polynomial.chebyshev.Chebyshev.basis(C)
    expected = V @ np.diag(cheb(w / lam)) @ V.T @ x / cheb(1 / lam)
    assert np.allclose(z, expected, atol=1e-10)
    assert np.allclose(z.sum(axis=0), x.sum(axis=0))  # T_C(P/lam)/T_C(1/lam) keeps the sums


def test_stage_lengths():
    lam = (1 + 2 * math.cos(2 * math.pi / 100)) / 3  # the authors' 100-cycle
    assert stage_length(100, lam, 1 / 22, True) == math.ceil(
        math.log(4400) / math.sqrt(2 * math.log(1 / lam))
    )
    assert stage_length(100, lam, 1 / 22, False) == math.ceil(math.log(2200) / math.log(1 / lam))
    assert stage_length(100, lam, 1 / 22, False, "small") == stage_length(100, lam, 1 / 22, True)
    assert stage_length(100, lam, 1 / 22, True, "small") == math.ceil(
        math.log(4400) / math.sqrt(2 * math.log(1 / lam)) / 3
    )
    assert stage_length(10, 0.0, 1 / 22, True) == 1  # complete graph: exact in one round
    assert stage_length(10, 0.5, 1 / 22, True, 5) == 5


def test_complete_graph_averages_exactly_in_one_round():
    res = evaluate(
        "FedBandit/Homogeneous-v0",
        DDUCB(),
        runs=2,
        env_kwargs={
            "family": "homogeneous",
            "num_agents": 5,
            "means": MEANS,
            "horizon": 60,
            "topology": "complete",
        },
    )
    assert np.all(np.isfinite(res.final_regret_network))


@pytest.mark.parametrize(("topology", "n"), [("ring", 9), ("star", 7), ("path", 6)])
@pytest.mark.parametrize("accelerated", [True, False])
def test_light_cone(topology, n, accelerated):
    light_cone(
        lambda: DDUCB(accelerated=accelerated, stage_length=3),
        "neighbors",
        topology=topology,
        n=n,
        j=0,
        horizon=70,
        t_change=25,
        reward={"kind": "gaussian", "sigma": 0.1},
    )


def test_padded_and_aggregating_channels_give_the_same_run():
    kw = {
        "family": "homogeneous",
        "num_agents": 6,
        "means": MEANS,
        "horizon": 80,
        "topology": "grid",
        "reward": {"kind": "gaussian", "sigma": 0.5},
    }
    out = []
    for spec in ({"kind": "neighbors", "dim": 8, "reduce": "sum"}, {"kind": "neighbors", "dim": 8}):
        res = evaluate(
            "FedBandit/Homogeneous-v0",
            DDUCB(),
            runs=3,
            seed=4,
            env_kwargs={**kw, "channels": {"neighbors": spec}},
        )
        out.append(res.regret_network)
    assert np.array_equal(out[0], out[1])


def test_batch_member_equals_run_alone():
    kw = {
        "family": "homogeneous",
        "num_agents": 5,
        "means": MEANS,
        "horizon": 50,
        "topology": "ring",
        "reward": {"kind": "gaussian", "sigma": 0.5},
    }
    batch = evaluate("FedBandit/Homogeneous-v0", DDUCB(), runs=3, seed=10, env_kwargs=kw)
    alone = evaluate("FedBandit/Homogeneous-v0", DDUCB(), runs=1, seed=12, env_kwargs=kw)
    assert np.array_equal(batch.regret_network[2], alone.regret_network[0])


def test_bad_input_and_environments_it_cannot_run_on():
    with pytest.raises(ConfigError, match="dducb: eps"):
        DDUCB(eps=0.0)
    with pytest.raises(ConfigError, match="dducb: stage_length"):
        DDUCB(stage_length="tiny")
    with pytest.raises(ConfigError, match="dducb: family"):
        evaluate("FedBandit/LinearContextual-v0", DDUCB(), runs=1, env_kwargs={"horizon": 10})
    with pytest.raises(ConfigError, match="dducb: topology: expected one connected graph"):
        evaluate(
            "FedBandit/Homogeneous-v0",
            DDUCB(),
            runs=1,
            env_kwargs={
                "family": "homogeneous",
                "num_agents": 4,
                "horizon": 20,
                "topology": "hybrid",
                "topology_kwargs": {"sizes": [2, 2], "component_graph": "path"},
            },
        )
