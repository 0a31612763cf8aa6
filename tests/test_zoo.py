"""The baseline zoo (baselines.index and friends): light cone, determinism, batch independence,
sublinear regret, tie-breaks, KL-UCB root finding and config errors."""

from __future__ import annotations

import numpy as np
import pytest

import fedbandit_env
from baselines.formulas import bernoulli_kl, kl_upper_bound
from baselines.index import argmax_uniform_ties
from fedbandit_env import ConfigError, make_agent
from fedbandit_env.bench import evaluate

INDEPENDENT = ["ucb1", "kl_ucb", "epsilon_greedy", "thompson_beta", "thompson_gaussian"]
SHARED = [f"{a}_shared" for a in INDEPENDENT]
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


def _growth(agent_id):
    """regret(T) / regret(T / 4) per run on a homogeneous Bernoulli instance."""
    kwargs = {"num_agents": 2, "num_arms": 3, "horizon": 4000, "means": [0.9, 0.6, 0.5]}
    res = evaluate("FedBandit/Homogeneous-v0", agent_id, runs=10, seed=0, env_kwargs=kwargs)
    quarter = res.regret_per_agent[:, np.searchsorted(res.steps, 1000)]
    return res.regret_per_agent[:, -1] / quarter


@pytest.mark.parametrize("agent_id", ["ucb1", "thompson_beta", "thompson_gaussian", "kl_ucb"])
def test_regret_is_sublinear_on_homogeneous_instance(agent_id):
    # linear regret gives 4, log(4000)/log(1000) = 1.2; measured per-run maxima are 1.9 (ucb1),
    # 1.4 (thompson_beta, kl_ucb) and 1.5 (thompson_gaussian)
    ratio = _growth(agent_id)
    assert ratio.max() < 2.5, ratio


def test_constant_epsilon_greedy_regret_is_linear():
    """The growth test above has power: constant exploration grows by about 4x."""
    assert _growth("epsilon_greedy").mean() > 3.0


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
        ("epsilon_greedy", {"epsilon": 1.5}, "epsilon"),
        ("thompson_gaussian", {"scale": "big"}, "scale"),
    ],
)
def test_bad_config_names_agent_and_field(agent_id, kwargs, field):
    with pytest.raises(ConfigError, match=f"{agent_id}: {field}"):
        make_agent(agent_id, **kwargs)


@pytest.mark.parametrize("agent_id", ["kl_ucb", "thompson_beta_shared"])
def test_unit_interval_learners_reject_unbounded_rewards_before_the_first_step(agent_id):
    with pytest.raises(ConfigError, match=f"{agent_id}: reward"):
        evaluate(
            "FedBandit/Heterogeneous-v0",
            agent_id,
            runs=1,
            env_kwargs={"horizon": 5, "reward": {"kind": "gaussian", "sigma": 1.0}},
        )


def test_bernoulli_trick_is_identity_on_binary_rewards():
    policy = make_agent("thompson_beta")
    venv = fedbandit_env.make_vec("FedBandit/Homogeneous-v0", num_runs=2, horizon=50)
    obs, _ = venv.reset(seed=0)
    policy.reset(venv.facts, venv.agent_rng())
    total = np.zeros((2, venv.num_agents))
    for _ in range(50):
        action = policy.act(obs)
        obs, rewards, *_ = venv.step(action.arms, action.messages)
        total += rewards
    policy.act(obs)
    assert np.array_equal(policy.sums.sum(axis=-1), total)


def test_shared_variant_needs_its_channel():
    with pytest.raises(ConfigError, match="ucb1_shared: channels.neighbors"):
        evaluate(
            "FedBandit/Heterogeneous-v0",
            "ucb1_shared",
            runs=1,
            env_kwargs={"horizon": 5, "channels": ("neighbors",)},
        )


@pytest.mark.parametrize(("a", "b"), [(1.0, 1.0), (3.0, 8.0), (40.0, 2.0)])
def test_fixed_budget_beta_sampler_matches_beta(a, b):
    from scipy import stats

    from baselines.formulas import ATTEMPTS, gamma_marsaglia_tsang

    rng = np.random.default_rng(1)
    size = 20_000
    shapes = np.broadcast_to([a, b], (size, 2))
    g = gamma_marsaglia_tsang(
        shapes, rng.standard_normal((size, 2, ATTEMPTS)), rng.random((size, 2, ATTEMPTS))
    )
    x = g[:, 0] / g.sum(axis=1)
    assert stats.kstest(x, stats.beta(a, b).cdf).pvalue > 1e-3


@pytest.mark.parametrize("agent_id", ["ucb1_shared", "thompson_beta_shared"])
def test_parallel_view_plays_the_same_arms_as_the_vector_view(agent_id):
    kwargs = {
        "num_agents": 4,
        "num_arms": 3,
        "horizon": 40,
        "topology": "ring",
        "channels": {"neighbors": {"kind": "neighbors", "dim": 6}},
    }
    env = fedbandit_env.make("FedBandit/Heterogeneous-v0", **kwargs)
    traj = fedbandit_env.run_episode(env, make_agent(agent_id), seed=5)
    parallel_arms = np.array([[a[f"agent_{i}"]["arm"] for i in range(4)] for a, *_ in traj])
    venv = fedbandit_env.make_vec("FedBandit/Heterogeneous-v0", num_runs=1, **kwargs)
    policy = make_agent(agent_id)
    obs, _ = venv.reset(seed=5)
    policy.reset(venv.facts, venv.agent_rng())
    vector_arms = []
    for _ in range(40):
        action = policy.act(obs)
        vector_arms.append(action.arms[0])
        obs, *_ = venv.step(action.arms, action.messages)
    assert np.array_equal(parallel_arms, np.array(vector_arms))


@pytest.mark.parametrize("agent_id", ["ucb1", "thompson_beta"])
def test_shared_variant_with_every_message_dropped_plays_like_the_independent_one(agent_id):
    env = {
        "num_agents": 4,
        "num_arms": 3,
        "horizon": 300,
        "topology": "ring",
        "channels": {"neighbors": {"kind": "neighbors", "dim": 6, "drop_prob": 1 - 1e-12}},
    }
    runs = {}
    for variant in (agent_id, f"{agent_id}_shared"):
        res = evaluate("FedBandit/Heterogeneous-v0", variant, runs=3, seed=0, env_kwargs=env)
        runs[variant] = res.regret_network
    assert np.array_equal(runs[agent_id], runs[f"{agent_id}_shared"])


def test_bench_zoo_script_runs_at_tiny_scale():
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    args = ["--runs=1", "--horizon=20", "--num-agents=3", "--num-arms=3"]
    done = subprocess.run(
        [sys.executable, str(root / "benchmarks" / "bench_zoo.py"), *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("\n| ") == 12  # header + 11 learners


@pytest.mark.parametrize("agent_id", SHARED)
def test_shared_variants_stay_finite_on_noisy_received_statistics(agent_id):
    """A privacy wrapper may add noise to the statistics; indices must stay well defined."""
    policy = make_agent(agent_id)
    venv = fedbandit_env.make_vec(
        "FedBandit/Heterogeneous-v0",
        num_runs=2,
        num_agents=4,
        num_arms=3,
        horizon=50,
        topology="ring",
        channels={"neighbors": {"kind": "neighbors", "dim": 6}},
    )
    obs, _ = venv.reset(seed=0)
    policy.reset(venv.facts, venv.agent_rng())
    noise = np.random.default_rng(0)
    for _ in range(50):
        with np.errstate(all="raise"):  # no NaN, no invalid sqrt/log/Gamma shape
            action = policy.act(obs)
        send, payload = action.messages["neighbors"]
        noisy = payload + noise.normal(0.0, 20.0, payload.shape)
        obs, *_ = venv.step(action.arms, {"neighbors": (send, noisy)})
    assert np.all((action.arms >= 0) & (action.arms < 3))


def test_shared_variant_can_be_made_private_by_the_privacy_wrapper():
    """The statistics are running sums: each step an agent's own [counts, sums] grow by an
    increment of L1 norm <= 2 (rewards in [0, 1]), so two increments differ by <= 4 and the
    tree-counter mode of the wrapper privatizes them."""
    from fedbandit_env.wrappers import PrivacyVectorWrapper

    regret = {}
    for epsilon in (None, 1.0):
        venv = fedbandit_env.make_vec(
            "FedBandit/Heterogeneous-v0",
            num_runs=4,
            num_agents=5,
            num_arms=5,
            horizon=600,
            channels={"neighbors": {"kind": "neighbors", "dim": 10}},
        )
        if epsilon is not None:
            privacy = {"epsilon": epsilon, "sensitivity": 4.0, "running_sum": True}
            venv = PrivacyVectorWrapper(venv, {"neighbors": privacy})
        policy = make_agent("thompson_beta_shared")
        obs, _ = venv.reset(seed=0)
        policy.reset(venv.facts, venv.agent_rng())
        for _ in range(600):
            action = policy.act(obs)
            obs, _, _, _, info = venv.step(action.arms, action.messages)
        regret[epsilon] = info.cumulative_regret.mean()
    assert np.isfinite(regret[1.0]) and regret[1.0] > 2 * regret[None], regret


MULTI_ARMED_LEARNERS = [
    "ucb1",
    "ucb1_shared",
    "kl_ucb",
    "thompson_beta",
    "thompson_gaussian_shared",
    "epsilon_greedy",
    "centralized_ucb1",
    "gossip_ucb",
    "dp_mw_ucb",
    "dp_dec_ucb",
    "cdp_mab",
    "ddp_mab",
    "hdp_mab",
]


@pytest.mark.parametrize("agent_id", MULTI_ARMED_LEARNERS)
def test_multi_armed_learners_reject_the_linear_family(agent_id):
    # the linear family's "arms" are fresh feature vectors each step: an arm index means nothing
    from fedbandit_env.bench.evaluate import incompatibility

    env_kwargs = {"num_agents": 4, "num_arms": 5, "horizon": 500}
    reason = incompatibility("FedBandit/LinearContextual-v0", agent_id, env_kwargs)
    assert reason is not None and f"{agent_id}: family: expected 'heterogeneous' or" in reason
    assert incompatibility("FedBandit/Homogeneous-v0", agent_id, env_kwargs) is None
