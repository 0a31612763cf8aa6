"""Decentralized FedUCB (specs/linear.md §2.8): cliques of G^gamma, flooding, light cone."""

from __future__ import annotations

import numpy as np
import pytest

import fedbandit_env
from agents.fed_lin_ucb_decentralized import FedLinUCBDecentralized
from fedbandit_env import ConfigError
from fedbandit_env.bench import evaluate

ENV = "FedBandit/LinearContextual-v0"
SCALE = {"private": False, "beta_scale": 0.1}


def test_complete_graph_matches_centralized_and_path_sits_between():
    """§7 item 6: complete G, gamma = 1 is close to centralized FedUCB; a path (pairs) sits
    between that and independent agents."""
    kw = {"num_agents": 6, "horizon": 1000}
    dec = evaluate(
        ENV,
        "fed_lin_ucb_decentralized",
        runs=3,
        env_kwargs={**kw, "topology": "complete"},
        agent_kwargs=SCALE,
    )
    cen = evaluate(
        ENV, "fed_lin_ucb", runs=3, env_kwargs={**kw, "topology": "complete"}, agent_kwargs=SCALE
    )
    alone = evaluate(ENV, "linucb", runs=3, env_kwargs=kw, agent_kwargs={"beta_scale": 0.1})
    path = evaluate(
        ENV,
        "fed_lin_ucb_decentralized",
        runs=3,
        env_kwargs={**kw, "topology": "path"},
        agent_kwargs=SCALE,
    )
    d, c = dec.final_regret_per_agent.mean(), cen.final_regret_per_agent.mean()
    assert abs(d - c) < 0.1 * c
    assert c < path.final_regret_per_agent.mean() < alone.final_regret_per_agent.mean()


def test_cliques_of_the_power_graph():
    v = fedbandit_env.make_vec(
        ENV,
        num_runs=1,
        num_agents=7,
        topology="path",
        channels=FedLinUCBDecentralized(gamma=2).channel_spec(fedbandit_env.make_vec(ENV).config),
    )
    v.reset(seed=0)
    policy = FedLinUCBDecentralized(gamma=2, private=False)
    policy.reset(v.facts, v.agent_rng())
    assert len(policy.cliques) == 3  # ceil(7 / (gamma + 1))
    for clique in policy.cliques:
        assert max(clique) - min(clique) <= 2  # within gamma hops on the path


@pytest.mark.parametrize("private", [False, True])
def test_light_cone(private):
    n, horizon, t_change, j = 7, 70, 20, 2  # agent 2 shares the clique {1, 2, 3}
    spec = FedLinUCBDecentralized(gamma=2).channel_spec(fedbandit_env.make_vec(ENV, dim=4).config)

    def run(perturb: bool):
        policy = FedLinUCBDecentralized(
            gamma=2, private=private, epsilon=1.0, beta_scale=0.05, sync_threshold=0.5
        )
        v = fedbandit_env.make_vec(
            ENV,
            num_runs=2,
            num_agents=n,
            dim=4,
            horizon=horizon,
            topology="path",
            channels=spec,
            reward={"kind": "gaussian", "sigma": 0.1},
        )
        obs, _ = v.reset(seed=1)
        policy.reset(v.facts, v.agent_rng())
        arms, msgs = [], []
        for t in range(1, horizon + 1):
            action = policy.act(obs)
            arms.append(action.arms.copy())
            msgs.append(action.messages["flood"][1].copy())
            if perturb and t >= t_change:
                action_arms = action.arms.copy()
                obs, rewards, *_ = v.step(action_arms, action.messages)
                obs.last_reward[:, j] += 3.0  # agent j's rewards change from trial t_change on
            else:
                obs, *_ = v.step(action.arms, action.messages)
        return np.stack(arms), np.stack(msgs), v.config.topology.hop_distances

    base_arms, base_msgs, dist = run(False)
    arms, msgs, _ = run(True)
    reached = 0
    for i in range(n):
        changed = np.nonzero(
            (arms[:, :, i] != base_arms[:, :, i]).any(axis=1)
            | (msgs[:, :, i] != base_msgs[:, :, i]).any(axis=(1, 2))
        )[0]
        if changed.size:
            reached += 1
            assert changed[0] + 1 > t_change + dist[i, j], (i, changed[0] + 1)
    assert reached >= 2  # the change did propagate (agent j and its clique)


def test_batch_member_equals_run_alone():
    kw = {"num_agents": 5, "horizon": 200, "topology": "ring"}
    both = evaluate(
        ENV,
        "fed_lin_ucb_decentralized",
        runs=2,
        seed=3,
        env_kwargs=kw,
        agent_kwargs={"epsilon": 1.0, "gamma": 2, "sync_threshold": 1.0},
    )
    alone = evaluate(
        ENV,
        "fed_lin_ucb_decentralized",
        runs=1,
        seed=4,
        env_kwargs=kw,
        agent_kwargs={"epsilon": 1.0, "gamma": 2, "sync_threshold": 1.0},
    )
    assert np.array_equal(both.regret_network[1], alone.regret_network[0])
    assert both.messages.sum() > 0


def test_bad_input():
    with pytest.raises(
        ConfigError, match=r"fed_lin_ucb_decentralized: gamma: expected an int >= 1"
    ):
        FedLinUCBDecentralized(gamma=0)
    with pytest.raises(ConfigError, match=r"fed_lin_ucb_decentralized: epsilon"):
        FedLinUCBDecentralized(epsilon=-1.0)
    v = fedbandit_env.make_vec(
        ENV, num_runs=1, channels={"flood": {"kind": "flood", "dim": 113, "ttl": 1}}
    )
    v.reset(seed=0)
    with pytest.raises(ConfigError, match=r"channels\.flood\.ttl: expected >= gamma = 2"):
        FedLinUCBDecentralized(gamma=2).reset(v.facts, v.agent_rng())


def test_horizon_and_graph_checks():
    """T >= 2 gamma + 1 (one sync round) and a connected graph, checked before the first step."""
    policy = FedLinUCBDecentralized(gamma=2, private=False)
    spec = policy.channel_spec(fedbandit_env.make_vec(ENV).config)
    short = fedbandit_env.make_vec(ENV, num_runs=1, num_agents=4, horizon=4, channels=spec)
    short.reset(seed=0)
    with pytest.raises(
        ConfigError,
        match=r"fed_lin_ucb_decentralized: horizon: expected at least 2 \* gamma \+ 1 = 5 "
        r"trials .*got 4",
    ):
        policy.reset(short.facts, short.agent_rng())
    ok = evaluate(
        ENV,
        FedLinUCBDecentralized(gamma=2, private=False),
        runs=1,
        env_kwargs={"num_agents": 4, "horizon": 5},
    )
    assert ok.final_regret_per_agent.shape == (1,)
    split = fedbandit_env.make_vec(
        ENV,
        num_runs=1,
        num_agents=4,
        topology="hybrid",
        topology_kwargs={"sizes": [2, 2]},
        channels=spec,
    )
    split.reset(seed=0)
    with pytest.raises(
        ConfigError, match=r"fed_lin_ucb_decentralized: topology: expected a connected graph"
    ):
        policy.reset(split.facts, split.agent_rng())
