"""LDP-UCB (docs/ldp-ucb.md): agreement with a plain loop written from the rules (Laplace and
Bernoulli mechanisms), the local mechanisms themselves, the light cone through the server, the
declared privacy, determinism and bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest

import fedbandit_env
from agents.ldp_ucb import LDPUCB
from fedbandit_env import ConfigError
from fedbandit_env.bench import evaluate
from fedbandit_env.seeding import BatchedRNG
from tests.field_helpers import assert_agree, batched, light_cone, plain

MEANS = [0.8, 0.6, 0.5, 0.3]
N, K, T, RUNS = 4, 4, 400, 40


def plain_ldp(
    rng, *, mechanism: str, epsilon: float, rescale: bool = True, n=N, T=T, means=MEANS
) -> tuple[float, int]:
    """One run of federated LDP-UCB from docs/ldp-ucb.md: N Bernoulli-reward agents per round, each
    report privatized by its agent, the server's global counts (pseudo-count 1) and sums."""
    k = len(means)
    cnt = np.ones(k)
    tot = np.zeros(k)
    best = max(means)
    regret, messages = 0.0, 0
    e = math.exp(epsilon)
    for t in range(T):
        total = cnt.sum()
        if mechanism == "laplace":
            forced = [a for a in range(k) if cnt[a] <= 4 * math.log(total + 1)]
            if forced:
                idx = [math.inf if a == forced[0] else -math.inf for a in range(k)]
            else:
                idx = [
                    tot[a] / cnt[a]
                    + math.sqrt(2 * math.log(total) / cnt[a])
                    + math.sqrt(32 * math.log(total) / (epsilon**2 * cnt[a]))
                    for a in range(k)
                ]
        else:
            w = (e + 1) / (e - 1) if rescale else 1.0
            idx = [tot[a] / cnt[a] + w * math.sqrt(2 * math.log(total) / cnt[a]) for a in range(k)]
        reports = []
        for _ in range(n):
            top = [a for a in range(k) if idx[a] == max(idx)]
            arm = top[rng.integers(len(top))]
            r = float(rng.random() < means[arm])
            regret += best - means[arm]
            if mechanism == "laplace":
                y = r + rng.laplace(0.0, 1.0 / epsilon)
            else:
                p = (r * e + 1 - r) / (1 + e)
                y = float(rng.random() < p)
            reports.append((arm, y))
        if t < T - 1:  # uploads and the server's replies (2 N messages per round)
            messages += 2 * n
            for arm, y in reports:
                cnt[arm] += 1
                tot[arm] += y
    return regret, messages


@pytest.mark.parametrize(
    ("mechanism", "epsilon", "rescale"),
    [
        ("laplace", 1.0, True),
        ("laplace", 4.0, True),
        ("bernoulli", 1.0, True),
        ("bernoulli", 1.0, False),
    ],
)
def test_agrees_with_a_plain_loop_within_3_standard_errors(mechanism, epsilon, rescale):
    kw = {"num_agents": N, "means": MEANS, "horizon": T, "topology": "ring", "reward": "bernoulli"}
    reg, msg = batched(
        LDPUCB(epsilon=epsilon, mechanism=mechanism, rescale_width=rescale), RUNS, **kw
    )
    preg, pmsg = plain(
        lambda g: plain_ldp(g, mechanism=mechanism, epsilon=epsilon, rescale=rescale), RUNS, 3
    )
    assert_agree(reg, preg, f"regret ({mechanism}, eps={epsilon}, rescale={rescale})")
    assert_agree(msg, pmsg, "messages")


def _reports(mechanism, epsilon, rewards):
    agent = LDPUCB(epsilon=epsilon, mechanism=mechanism)
    agent.reset(agent_facts(rewards.shape), BatchedRNG.for_runs([0], "agents"))
    return np.stack([agent.report(rewards) for _ in range(4000)])


def agent_facts(shape):
    venv = fedbandit_env.make_vec(
        "FedBandit/Homogeneous-v0",
        num_runs=shape[0],
        family="homogeneous",
        num_agents=shape[1],
        means=MEANS,
        horizon=5,
        reward="bernoulli",
        channels={"server": {"kind": "server", "dim": 2 * len(MEANS), "aggregate": "sum"}},
    )
    return venv.facts


def test_laplace_reports_are_unbiased_with_the_calibrated_variance():
    rewards = np.array([[0.0, 1.0, 0.25]])
    y = _reports("laplace", 0.5, rewards)  # (S, 1, 3)
    assert np.allclose(y.mean(axis=0), rewards, atol=6 * math.sqrt(8 / 4000))
    assert np.allclose(y.var(axis=0), 2 * (1 / 0.5) ** 2, rtol=0.15)  # Lap(1/eps)


def test_bernoulli_reports_follow_randomized_response():
    e = math.exp(1.0)
    rewards = np.array([[0.0, 1.0, 0.5]])
    y = _reports("bernoulli", 1.0, rewards)
    p = (rewards * e + 1 - rewards) / (1 + e)
    assert np.allclose(y.mean(axis=0), p, atol=5 * math.sqrt(0.25 / 4000))
    assert set(np.unique(y)) <= {0.0, 1.0}


def test_declares_local_privacy():
    agent = LDPUCB(epsilon=0.7)
    assert agent.privacy_epsilon == 0.7 and agent.privacy_trust_model == "local"
    res = evaluate(
        "FedBandit/Homogeneous-v0",
        agent,
        runs=1,
        env_kwargs={
            "family": "homogeneous",
            "num_agents": 3,
            "means": MEANS,
            "horizon": 10,
            "reward": "bernoulli",
        },
    )
    assert res.privacy_epsilon == 0.7
    assert LDPUCB(epsilon=math.inf).privacy_epsilon == math.inf


def test_gaussian_rewards_are_squashed_by_a_sigmoid():
    agent = LDPUCB(epsilon=math.inf)
    evaluate(
        "FedBandit/Homogeneous-v0",
        agent,
        runs=1,
        env_kwargs={
            "family": "homogeneous",
            "num_agents": 2,
            "means": MEANS,
            "horizon": 10,
            "reward": {"kind": "gaussian", "sigma": 1.0},
        },
    )
    assert agent.squash == "sigmoid"
    assert agent.unit_reward(np.array([0.0]))[0] == 0.5


@pytest.mark.parametrize("j", [0, 2])
def test_light_cone_through_the_server(j):
    light_cone(
        lambda: LDPUCB(epsilon=2.0),
        "server",
        topology="ring",
        n=5,
        j=j,
        horizon=60,
        t_change=25,
        server=True,
        means=MEANS,
        reward={"kind": "gaussian", "sigma": 0.1},
    )


def test_batch_member_equals_run_alone():
    kw = {
        "family": "homogeneous",
        "num_agents": 3,
        "means": MEANS,
        "horizon": 60,
        "reward": "bernoulli",
    }
    batch = evaluate(
        "FedBandit/Homogeneous-v0", LDPUCB(mechanism="bernoulli"), runs=3, seed=10, env_kwargs=kw
    )
    alone = evaluate(
        "FedBandit/Homogeneous-v0", LDPUCB(mechanism="bernoulli"), runs=1, seed=12, env_kwargs=kw
    )
    assert np.array_equal(batch.regret_network[2], alone.regret_network[0])


def test_bad_input_and_environments_it_cannot_run_on():
    with pytest.raises(ConfigError, match="ldp_ucb: epsilon"):
        LDPUCB(epsilon=0.0)
    with pytest.raises(ConfigError, match="ldp_ucb: mechanism"):
        LDPUCB(mechanism="gauss")
    with pytest.raises(ConfigError, match="ldp_ucb: family"):
        evaluate("FedBandit/LinearContextual-v0", LDPUCB(), runs=1, env_kwargs={"horizon": 10})
    with pytest.raises(ConfigError, match="ldp_ucb: channels.server: expected aggregate 'sum'"):
        evaluate(
            "FedBandit/Homogeneous-v0",
            LDPUCB(),
            runs=1,
            env_kwargs={
                "family": "homogeneous",
                "num_agents": 2,
                "means": MEANS,
                "horizon": 10,
                "channels": {"server": {"kind": "server", "dim": 8}},
            },
        )


@pytest.mark.parametrize("mechanism", ["laplace", "bernoulli"])
def test_audit_bound_stays_below_the_claim_and_catches_the_broken_variant(mechanism, monkeypatch):
    """``fedbandit audit``: the first report carrying agent 0's changed reward is one
    epsilon-LDP release; the empirical lower bound must not exceed epsilon, and the broken
    variant (twice the epsilon in its mechanism, the same declaration) must be caught."""
    from fedbandit_env import agent_registry
    from fedbandit_env.bench.audit_agent import audit_learner

    if "ldp_ucb" not in agent_registry.list_agents():  # a checkout not installed again yet
        monkeypatch.setitem(agent_registry._AGENTS, "ldp_ucb", "agents.ldp_ucb:LDPUCB")

    kwargs = {"epsilon": 1.0, "mechanism": mechanism}
    ok = audit_learner("ldp_ucb", kwargs, trials=3000)
    assert ok.declared == ok.per_release == 1.0
    assert 0.5 <= ok.result.epsilon_lower <= 1.0  # within the claim, with power
    if mechanism == "laplace":
        bad = audit_learner("ldp_ucb", kwargs, trials=3000, broken=True)
        assert bad.result.epsilon_lower > 1.0
