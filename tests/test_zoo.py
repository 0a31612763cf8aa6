"""The baseline zoo (baselines.index and friends): light cone, determinism, batch independence,
sublinear regret, tie-breaks, KL-UCB root finding and config errors."""

from __future__ import annotations

import numpy as np
import pytest

import fedbandit_env
from baselines.index import argmax_uniform_ties
from baselines.ucb import bernoulli_kl, kl_upper_bound
from fedbandit_env import ConfigError, make_agent
from fedbandit_env.bench import evaluate

INDEPENDENT = ["ucb1", "kl_ucb"]
SHARED = ["ucb1_shared", "kl_ucb_shared"]
ZOO = INDEPENDENT + SHARED

HORIZON = 60
T_CHANGE = 15
M = 4


def _run(agent_id, topology, n, perturb_agent=None, runs=3, seed=3, **topo):
    policy = make_agent(agent_id)
    venv = fedbandit_env.make_vec(
        "FedBandit/Heterogeneous-v0",
        num_runs=runs,
        num_agents=n,
        num_arms=M,
        horizon=HORIZON,
        topology=topology,
        topology_kwargs=topo,
        reward={"kind": "clipped_gaussian", "sigma": 0.3},
        channels={"neighbors": {"kind": "neighbors", "dim": 2 * M}},
    )
    obs, _ = venv.reset(seed=seed)
    policy.reset(venv.facts, venv.agent_rng())
    arms, msgs = [], []
    for t in range(1, HORIZON + 1):
        if perturb_agent is not None and t == T_CHANGE:
            means = venv.engine.means
            means[:, perturb_agent, :] = 1.0 - means[:, perturb_agent, :]
        action = policy.act(obs)
        arms.append(action.arms.copy())
        sent = action.messages.get("neighbors")
        msgs.append(sent[1].copy() if sent else np.zeros((runs, n, 2 * M)))
        obs, *_ = venv.step(action.arms, action.messages)
    return np.stack(arms), np.stack(msgs), venv.config.topology.hop_distances


@pytest.mark.parametrize("agent_id", ZOO)
@pytest.mark.parametrize(("topology", "n", "topo"), [("ring", 7, {}), ("star", 5, {})])
def test_light_cone(agent_id, topology, n, topo):
    j = 0
    base_arms, base_msgs, dist = _run(agent_id, topology, n, **topo)
    arms, msgs, _ = _run(agent_id, topology, n, perturb_agent=j, **topo)
    reached = 0
    for i in range(n):
        changed = np.nonzero(
            (arms[:, :, i] != base_arms[:, :, i]).any(axis=1)
            | (msgs[:, :, i] != base_msgs[:, :, i]).any(axis=(1, 2))
        )[0]
        if changed.size:
            reached += 1
            assert changed[0] + 1 > T_CHANGE + dist[i, j], (i, changed[0] + 1)
        if agent_id in INDEPENDENT and i != j:
            assert changed.size == 0, f"independent agent {i} reacted to agent {j}"
    assert reached >= (2 if agent_id in SHARED else 1)  # the test is not vacuous


@pytest.mark.parametrize("agent_id", ZOO)
def test_deterministic_and_batch_independent(agent_id):
    a_arms, a_msgs, _ = _run(agent_id, "ring", 5, runs=3, seed=11)
    b_arms, b_msgs, _ = _run(agent_id, "ring", 5, runs=3, seed=11)
    assert np.array_equal(a_arms, b_arms) and np.array_equal(a_msgs, b_msgs)
    alone, alone_msgs, _ = _run(agent_id, "ring", 5, runs=1, seed=12)
    assert np.array_equal(a_arms[:, 1], alone[:, 0])
    assert np.array_equal(a_msgs[:, 1], alone_msgs[:, 0])


@pytest.mark.parametrize("agent_id", ["ucb1"])
def test_regret_is_sublinear_on_homogeneous_instance(agent_id):
    kwargs = {"num_agents": 2, "num_arms": 3, "horizon": 4000, "means": [0.9, 0.6, 0.5]}
    res = evaluate("FedBandit/Homogeneous-v0", agent_id, runs=8, seed=0, env_kwargs=kwargs)
    final = res.regret_per_agent[:, -1]
    quarter = res.regret_per_agent[:, np.searchsorted(res.steps, 1000)]
    ratio = final / quarter
    # linear regret would give 4; sqrt would give 2; log(4000)/log(1000) = 1.2
    assert ratio.max() < 2.2, ratio


def test_shared_variant_uses_neighbours_statistics():
    kwargs = {"num_agents": 6, "num_arms": 5, "horizon": 1500, "means": [0.9, 0.5, 0.5, 0.4, 0.3]}
    env = {**kwargs, "topology": "complete"}
    solo = evaluate("FedBandit/Homogeneous-v0", "ucb1", runs=6, seed=0, env_kwargs=env)
    shared = evaluate("FedBandit/Homogeneous-v0", "ucb1_shared", runs=6, seed=0, env_kwargs=env)
    assert shared.final_regret_per_agent.mean() < 0.5 * solo.final_regret_per_agent.mean()
    assert shared.messages.sum(axis=1).min() == 6 * 5 * 1500  # every agent, every edge, every step


def test_argmax_ties_are_uniform():
    index = np.array([[1.0, 3.0, 3.0, 0.0, 3.0]])
    rng = np.random.default_rng(0)
    picks = np.array([argmax_uniform_ties(index, rng.random(index.shape))[0] for _ in range(3000)])
    assert set(picks) == {1, 2, 4}
    counts = np.bincount(picks, minlength=5)[[1, 2, 4]]
    assert np.all(np.abs(counts / 3000 - 1 / 3) < 0.04), counts


def test_kl_upper_bound_solves_the_equation():
    p = np.array([0.0, 0.2, 0.5, 0.9, 1.0])
    level = np.array([0.1, 0.3, 0.05, 0.2, 0.4])
    q = kl_upper_bound(p, level, 40)
    assert np.all(q >= p)
    inner = q < 1 - 1e-9
    assert np.allclose(bernoulli_kl(p, q)[inner], level[inner], atol=1e-6)


@pytest.mark.parametrize(
    ("agent_id", "kwargs", "field"),
    [
        ("ucb1", {"alpha": -1.0}, "alpha"),
        ("kl_ucb", {"precision": 2.0}, "precision"),
    ],
)
def test_bad_config_names_agent_and_field(agent_id, kwargs, field):
    with pytest.raises(ConfigError, match=f"{agent_id}: {field}"):
        make_agent(agent_id, **kwargs)


def test_kl_ucb_rejects_unbounded_rewards_before_the_first_step():
    with pytest.raises(ConfigError, match="kl_ucb: reward"):
        evaluate(
            "FedBandit/Heterogeneous-v0",
            "kl_ucb",
            runs=1,
            env_kwargs={"horizon": 5, "reward": {"kind": "gaussian", "sigma": 1.0}},
        )


def test_shared_variant_needs_its_channel():
    with pytest.raises(ConfigError, match="ucb1_shared: channels.neighbors"):
        evaluate(
            "FedBandit/Heterogeneous-v0",
            "ucb1_shared",
            runs=1,
            env_kwargs={"horizon": 5, "channels": ("neighbors",)},
        )
