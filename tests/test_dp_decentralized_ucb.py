"""DP-Dec-UCB (docs/dp-recsys.md, Algorithm 2): the consensus invariants of Algorithm 2, equality
with coop-UCB at epsilon = inf, the index fed by the counters, the light cone, determinism and bad
input."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

import fedbandit_env
from agents import DPDecentralizedUCB
from fedbandit_env import ConfigError
from fedbandit_env.graphs import consensus_weights, default_kappa
from fedbandit_env.privacy import hybrid_noise_variance
from tests.dp_recsys_helpers import GAUSSIAN, MEANS, rollout

K = 4
EPSILONS = [2.0, math.inf]


class Recorder:
    """Snapshots of the agent's state after each act (t = the step being chosen)."""

    def __init__(self):
        self.nhat, self.shat, self.sums, self.index = {}, {}, {}, {}

    def __call__(self, t, policy, action):
        self.nhat[t] = policy.nhat.copy()
        self.shat[t] = policy.shat.copy()
        self.sums[t] = policy.sums.value.copy()  # counters after the pulls of steps 1..t-1
        if t >= K + 2 and policy.nhat.min() > 0:  # (paper timing: t counts engine steps)
            self.index[t] = policy.index(t)


def _run(epsilon, topology="ring", num_agents=6, horizon=80, **kwargs):
    """``timing="latency"`` unless the ``agent`` kwargs say otherwise (the step-indexed checks
    below; the paper timing is checked in tests/test_dp_decentralized_ucb_timing.py)."""
    rec = Recorder()
    policy = DPDecentralizedUCB(epsilon=epsilon, **{"timing": "latency", **kwargs.pop("agent", {})})
    out = rollout(
        policy,
        runs=3,
        hook=rec,
        topology=topology,
        num_agents=num_agents,
        horizon=horizon,
        **kwargs,
    )
    return policy, rec, out


@pytest.mark.parametrize("epsilon", EPSILONS)
@pytest.mark.parametrize("topology", ["ring", "path", "star", "complete"])
def test_invariants_of_section_4_5(epsilon, topology):
    policy, rec, out = _run(epsilon, topology)
    arms = out["arms"]  # (T, B, N)
    T, B, N = arms.shape
    # the K + 1 initial steps: round robin, then arm 0 again
    assert np.array_equal(arms[: K + 1, 0, 0], [0, 1, 2, 3, 0])
    # nhat == 1 at step K + 2 (the paper's t = K + 1, one step late)
    np.testing.assert_allclose(rec.nhat[K + 2], 1.0, rtol=0, atol=1e-12)
    counts = np.zeros((B, N, K))
    b, i = np.indices((B, N))
    history = {1: counts.copy()}  # counts after the pulls of steps 1..t-1
    for t in range(1, T + 1):
        counts[b, i, arms[t - 1]] += 1
        history[t + 1] = counts.copy()
    for t in range(2, T + 1):
        if t >= K + 2:
            assert rec.nhat[t].min() >= 1.0 - 1e-12  # the max(., 1) guard never binds
        # column conservation over the pulls of steps 1..t-2
        np.testing.assert_allclose(
            rec.nhat[t].sum(axis=1), history[t - 1].sum(axis=1), rtol=1e-12, atol=1e-9
        )
        np.testing.assert_allclose(
            rec.shat[t].sum(axis=1), rec.sums[t - 1].sum(axis=1), rtol=1e-10, atol=1e-8
        )


def test_complete_graph_with_uniform_weights_gives_the_exact_average():
    """P = J/M (kappa = (M-1)/M): every agent holds the network average, c_i = 0, same index."""
    policy, rec, out = _run(2.0, "complete", num_agents=5, agent={"kappa": 4 / 5})
    np.testing.assert_allclose(policy.P, np.full((5, 5), 0.2), atol=1e-15)
    np.testing.assert_allclose(policy.c, 0.0, atol=1e-9)
    for t in range(K + 2, 81):
        np.testing.assert_allclose(
            rec.nhat[t], np.broadcast_to(rec.nhat[t][:, :1], (3, 5, K)), rtol=1e-12
        )
        np.testing.assert_allclose(
            rec.index[t], np.broadcast_to(rec.index[t][:, :1], (3, 5, K)), rtol=1e-10
        )
    assert (out["arms"][K + 1 :] == out["arms"][K + 1 :, :, :1]).all()


def test_non_private_equals_coop_ucb_with_the_global_matrix():
    """epsilon = inf: nhat <- P(nhat + xi), shat <- P(shat + r) with the dense P (coop-UCB),
    one step late; the agent computes it from its neighbours' messages only."""
    policy, rec, out = _run(math.inf, "ring", num_agents=6)
    P = consensus_weights(fedbandit_env.graphs.make_graph("ring", 6), 2 / 3)
    arms, rewards = out["arms"], np.clip(out["rewards"], 0, 1)
    T, B, N = arms.shape
    nhat, shat = np.zeros((B, N, K)), np.zeros((B, N, K))
    b, i = np.indices((B, N))
    xi, r = np.zeros((B, N, K)), np.zeros((B, N, K))
    for t in range(1, T + 1):
        nhat = np.einsum("ik,bkj->bij", P, nhat + xi)
        shat = np.einsum("ik,bkj->bij", P, shat + r)
        np.testing.assert_allclose(rec.nhat[t], nhat, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(rec.shat[t], shat, rtol=1e-11, atol=1e-11)
        # increments of step t - 1 (the reward of the pull at step t - 1) go out at step t
        xi, r = np.zeros((B, N, K)), np.zeros((B, N, K))
        if t >= 2:
            xi[b, i, arms[t - 2]] = 1.0
            r[b, i, arms[t - 2]] = rewards[t - 2]


@pytest.mark.parametrize("epsilon", EPSILONS)
def test_index_is_built_from_the_counter_outputs(epsilon):
    """shat carries the counters' increments; the index is shat/nhat + UCB width + privacy width,
    and the played arm is its argmax."""
    policy, rec, out = _run(epsilon, "ring", num_agents=6)
    c = policy.c[None, :, None]
    ln_inv_delta = math.log(2) + 2.0 * math.log(80)  # delta = T^-rho / 2, rho = 2
    for t in range(K + 2, 81):
        n, s = rec.nhat[t], rec.shat[t]
        width = np.sqrt(2 * 2.0 * (n + c) / (6 * n) * math.log(t) / n)
        priv = 0.0 if math.isinf(epsilon) else ln_inv_delta / epsilon * np.log(n) ** 1.5 / n
        np.testing.assert_allclose(rec.index[t], s / n + width + priv, rtol=1e-12)
        assert np.array_equal(out["arms"][t - 1], rec.index[t].argmax(axis=2))
    exact = np.zeros_like(policy.sums.value)
    arms, rewards = out["arms"][:-1], np.clip(out["rewards"][:-1], 0, 1)
    b, i = np.indices(arms.shape[1:])
    for t in range(arms.shape[0]):
        exact[b, i, arms[t]] += rewards[t]
    noise = policy.sums.value - exact
    if math.isinf(epsilon):
        np.testing.assert_allclose(noise, 0.0, atol=1e-9)
    else:
        # the hybrid counters' releases, with noise of the closed-form size (the hybrid mechanism)
        counter = policy.sums.counter
        np.testing.assert_array_equal(policy.sums.value, counter.release())
        np.testing.assert_allclose(counter.exact(), exact, atol=1e-9)
        z2 = noise**2 / hybrid_noise_variance(counter.counts, epsilon)
        assert 0.3 < z2.mean() < 3.0


# ------------------------------------------------------------------------------ light cone

HORIZON = 70
T_CHANGE = 25


def _light_cone_run(topology, n, epsilon, perturb_agent=None):
    policy = DPDecentralizedUCB(epsilon=epsilon)

    def perturb(t, venv):
        if perturb_agent is not None and t == T_CHANGE:
            venv.engine.means[:, perturb_agent, :] = 1.0 - venv.engine.means[:, perturb_agent, :]

    out = rollout(
        policy,
        runs=3,
        seed=3,
        before_step=perturb,
        topology=topology,
        num_agents=n,
        horizon=HORIZON,
        reward=GAUSSIAN,
    )
    return out["arms"], out["payloads"]["neighbors"], out["venv"].config.topology.hop_distances


@pytest.mark.parametrize(("topology", "n"), [("ring", 9), ("star", 7), ("path", 6)])
@pytest.mark.parametrize("j", [0, 3])
@pytest.mark.parametrize("epsilon", EPSILONS)
def test_light_cone(topology, n, j, epsilon):
    """Agent j's rewards from step T_CHANGE on cannot change agent i's arms or messages at steps
    <= T_CHANGE + d(i, j) (the light-cone invariant)."""
    base_arms, base_msgs, dist = _light_cone_run(topology, n, epsilon)
    arms, msgs, _ = _light_cone_run(topology, n, epsilon, perturb_agent=j)
    for i in range(n):
        changed = np.nonzero(
            (arms[:, :, i] != base_arms[:, :, i]).any(axis=1)
            | (msgs[:, :, i] != base_msgs[:, :, i]).any(axis=(1, 2))
        )[0]
        assert changed.size > 0, f"agent {i} never saw agent {j}'s change (vacuous test)"
        first_step = changed[0] + 1  # arms[k] is the action of step k + 1
        assert first_step > T_CHANGE + dist[i, j], (i, j, first_step)


@pytest.mark.parametrize("timing", ["paper", "latency"])
@pytest.mark.parametrize("epsilon", EPSILONS)
def test_determinism_and_batch_independence(epsilon, timing):
    _, _, a = _run(epsilon, agent={"timing": timing})
    _, _, b = _run(epsilon, agent={"timing": timing})
    assert np.array_equal(a["arms"], b["arms"])
    assert np.array_equal(a["payloads"]["neighbors"], b["payloads"]["neighbors"])
    policy = DPDecentralizedUCB(epsilon=epsilon, timing=timing)
    alone = rollout(policy, runs=1, seed=2, num_agents=6, horizon=80)
    assert np.array_equal(alone["arms"][:, 0], a["arms"][:, 2])
    assert np.array_equal(alone["payloads"]["neighbors"][:, 0], a["payloads"]["neighbors"][:, 2])


def test_graph_constants_and_default_kappa_on_the_paper_cycle():
    venv = fedbandit_env.make_vec(
        "FedBandit/Homogeneous-v0",
        num_runs=1,
        num_agents=20,
        num_arms=10,
        horizon=100,
        topology="ring",
        channels={"neighbors": {"kind": "neighbors", "dim": 20}},
    )
    venv.reset(seed=0)
    policy = DPDecentralizedUCB()
    policy.reset(venv.facts, venv.agent_rng())
    assert policy.kappa == pytest.approx(2 / 3)
    assert policy.kappa == default_kappa(venv.config.topology.graph)
    assert policy.constants.c0 == pytest.approx(375.29, abs=0.005)
    assert 102 < policy.c.min() < policy.c.max() < 137
    maxed = DPDecentralizedUCB(ci_mode="max")
    maxed.reset(venv.facts, venv.agent_rng())
    assert np.all(maxed.c == policy.c.max())


# ------------------------------------------------------------------------------ bad input


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"epsilon": 0.0}, "epsilon"),
        ({"epsilon": -2.0}, "epsilon"),
        ({"epsilon": math.nan}, "epsilon"),
        ({"rho": 1.0}, "rho"),
        ({"rho": 0.5}, "rho"),
        ({"rho": math.inf}, "rho"),
        ({"kappa": 0.0}, "kappa"),
        ({"kappa": 1.5}, "kappa"),
        ({"index_sigma": 0.0}, "index_sigma"),
        ({"clip": (1, 0)}, "clip"),
        ({"ci_mode": "value"}, "ci_mode"),
        ({"delta_horizon": 1}, "delta_horizon"),
    ],
)
def test_bad_parameters(kwargs, field):
    with pytest.raises(ConfigError, match=rf"dp_dec_ucb: {field}"):
        DPDecentralizedUCB(**kwargs)


def _reset(policy, **kwargs):
    env_kwargs = {
        "num_agents": 6,
        "num_arms": K,
        "horizon": 50,
        "topology": "ring",
        "channels": {"neighbors": {"kind": "neighbors", "dim": 2 * K}},
        **kwargs,
    }
    venv = fedbandit_env.make_vec("FedBandit/Homogeneous-v0", num_runs=1, **env_kwargs)
    venv.reset(seed=0)
    policy.reset(venv.facts, venv.agent_rng())


def test_bipartite_graph_with_kappa_one_is_rejected():
    with pytest.raises(ConfigError, match=r"dp_dec_ucb: kappa: kappa = 1.0 gives max.*'ring'"):
        _reset(DPDecentralizedUCB(kappa=1.0), num_agents=20)
    _reset(DPDecentralizedUCB(kappa=1.0), num_agents=5)  # odd cycle: not bipartite, fine


def test_graph_it_cannot_run_on():
    with pytest.raises(ConfigError, match=r"dp_dec_ucb: topology: expected one connected graph"):
        _reset(DPDecentralizedUCB(), topology="hybrid", topology_kwargs={"sizes": [3, 3]})


def test_wrong_family():
    """A multi-armed family is required: the linear-contextual family is rejected by name."""
    venv = fedbandit_env.make_vec(
        "FedBandit/Homogeneous-v0",
        num_runs=1,
        num_agents=6,
        num_arms=K,
        topology="ring",
        channels={"neighbors": {"kind": "neighbors", "dim": 2 * K}},
    )
    venv.reset(seed=0)
    facts = dataclasses.replace(venv.facts, family="linear")
    with pytest.raises(
        ConfigError,
        match=r"dp_dec_ucb: family: expected 'heterogeneous' or 'homogeneous' .*got 'linear'",
    ):
        DPDecentralizedUCB().reset(facts, venv.agent_rng())
    DPDecentralizedUCB().reset(dataclasses.replace(facts, family="heterogeneous"), venv.agent_rng())


@pytest.mark.parametrize(("timing", "steps"), [("paper", K), ("latency", K + 1)])
def test_horizon_shorter_than_initialisation(timing, steps):
    with pytest.raises(ConfigError, match=rf"dp_dec_ucb: horizon: expected more than {steps}"):
        _reset(DPDecentralizedUCB(timing=timing), horizon=steps)


@pytest.mark.parametrize(
    ("channels", "pattern"),
    [
        ({"server": {"kind": "server", "dim": 2 * K}}, r"channels.neighbors: expected a"),
        ({"neighbors": {"kind": "neighbors", "dim": K}}, r"channels.neighbors: expected kind"),
    ],
)
def test_missing_or_wrong_channel(channels, pattern):
    with pytest.raises(ConfigError, match="dp_dec_ucb: " + pattern):
        _reset(DPDecentralizedUCB(), channels=channels)


def test_registered_id_and_non_private_variant():
    policy = fedbandit_env.make_agent("dp_dec_ucb", epsilon=math.inf, rho=1.2)
    assert isinstance(policy, DPDecentralizedUCB) and policy.config.rho == 1.2


@pytest.mark.parametrize("policy_class", ["dp_mw_ucb", "dp_dec_ucb"])
def test_pettingzoo_view_plays_the_same_arms_as_the_vector_view(policy_class):
    """Both agents through the per-agent dict adapter equal run 0 of the vector view."""
    policy = fedbandit_env.make_agent(policy_class, epsilon=2.0)
    out = rollout(policy, runs=1, seed=4, horizon=60)
    env = fedbandit_env.make(
        "FedBandit/Homogeneous-v0",
        num_agents=6,
        means=MEANS[:4],
        horizon=60,
        topology="ring",
        reward=GAUSSIAN,
        channels=policy.channel_spec(out["venv"].config),
    )
    trajectory = fedbandit_env.run_episode(env, fedbandit_env.make_agent(policy_class), seed=4)
    arms = np.array([[a[f"agent_{i}"]["arm"] for i in range(6)] for a, *_ in trajectory])
    assert np.array_equal(arms, out["arms"][:, 0])
