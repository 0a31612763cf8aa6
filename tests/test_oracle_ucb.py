"""The centralized oracle UCB1 (baselines/oracle_ucb.py): equal to a plain-loop UCB1 on the pooled
rewards, lock step across agents, and an upper reference that beats independent UCB1 on a
heterogeneous instance whose local best arms are not the global best (the gossip paper's setting)."""

from __future__ import annotations

import math

import numpy as np
import pytest

import fedbandit_env
from baselines.oracle_ucb import CentralizedUCB1
from fedbandit_env.bench import evaluate

ENV = "FedBandit/Heterogeneous-v0"


def reference_ucb1(history: list[tuple[np.ndarray, np.ndarray]], num_arms: int, scale: float):
    """One run's next arm from its (arms (N,), rewards (N,)) history: every arm once in index
    order, then argmax_k mean_k + scale sqrt(2 ln n / n_k) on all agents' pooled pulls, lowest
    index on ties."""
    step = len(history)
    if step < num_arms:
        return step
    counts, sums = [0.0] * num_arms, [0.0] * num_arms
    for arms, rewards in history:
        for arm, reward in zip(arms, rewards, strict=True):
            counts[arm] += 1.0
            sums[arm] += reward
    total = sum(counts)
    best, best_index = 0, -math.inf
    for k in range(num_arms):
        index = sums[k] / counts[k] + scale * math.sqrt(2.0 * math.log(total) / counts[k])
        if index > best_index:
            best, best_index = k, index
    return best


@pytest.mark.parametrize(
    ("reward", "scale"), [("bernoulli", 1.0), ({"kind": "gaussian", "sigma": 1.0}, 0.5)]
)
def test_plays_the_plain_loop_ucb1_on_pooled_rewards_at_every_step(reward, scale):
    runs, n, m, horizon = 2, 4, 5, 300
    venv = fedbandit_env.make_vec(
        ENV, num_runs=runs, num_agents=n, num_arms=m, horizon=horizon, reward=reward
    )
    obs, _ = venv.reset(seed=8)
    policy = CentralizedUCB1(scale=scale)
    policy.reset(venv.facts, venv.agent_rng())
    history: list[list] = [[] for _ in range(runs)]
    played = np.zeros((horizon, runs), dtype=np.int64)
    for step in range(horizon):
        arms = policy.act(obs).arms
        for b in range(runs):
            assert np.all(arms[b] == reference_ucb1(history[b], m, scale)), (step, b)
        played[step] = arms[:, 0]
        obs, *_ = venv.step(arms, {})
        for b in range(runs):
            history[b].append((obs.last_arm[b].copy(), obs.last_reward[b].copy()))
    # the check is not vacuous: every arm is revisited after the initialization in some run
    assert all(len(np.unique(played[m:, b])) >= 3 for b in range(runs))


def test_beats_independent_ucb1_where_local_best_arms_mislead():
    """Agents 0 and 1 prefer arm 0 locally, the global best is arm 1: independent UCB1 has linear
    regret, the oracle pools every agent's rewards and finds arm 1 (all agents in lock step)."""
    means = [[0.8, 0.6], [0.8, 0.6], [0.0, 0.9]]
    kwargs = {"means": means, "horizon": 4002, "topology": "complete", "reward": "bernoulli"}
    ucb = evaluate(ENV, "ucb1", runs=6, seed=0, env_kwargs=kwargs)
    oracle = evaluate(ENV, "centralized_ucb1", runs=6, seed=0, env_kwargs=kwargs)
    # global means 0.533 / 0.7 (gap 1/6). Measured per agent at T = 4000: oracle 15.7-27.8,
    # independent UCB1 413-425 (two of three agents locked on arm 0: about 2/3 * 4000 / 6 = 444)
    linear = 4000 / 6 * 2 / 3
    assert ucb.final_regret_per_agent.min() > 0.85 * linear
    assert oracle.final_regret_per_agent.max() < 0.1 * ucb.final_regret_per_agent.min()
