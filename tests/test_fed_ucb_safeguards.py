"""Safeguards of the private FedUCB agents (agents/fed_ucb_common.py): rewards clipped to
[-B, B] (docs/linear.md, "Reward bound and clipping") and the eigenvalue floor of the synchronized
W."""

from __future__ import annotations

import numpy as np
import pytest

import fedbandit_env
from agents.fed_lin_ucb import FedLinUCB
from agents.fed_lin_ucb_decentralized import FedLinUCBDecentralized
from agents.fed_ucb_common import floor_spectrum
from fedbandit_env.privacy import GramTreePrivatizer

ENV = "FedBandit/LinearContextual-v0"
D = 4


def setup(policy, runs=2, n=3, horizon=30, **kw):
    spec = policy.channel_spec(fedbandit_env.make_vec(ENV, dim=D).config)
    v = fedbandit_env.make_vec(
        ENV, num_runs=runs, num_agents=n, dim=D, horizon=horizon, channels=spec, **kw
    )
    obs, _ = v.reset(seed=5)
    policy.reset(v.facts, v.agent_rng())
    return v, obs


@pytest.mark.parametrize("cls", [FedLinUCB, FedLinUCBDecentralized])
@pytest.mark.parametrize("private", [True, False])
def test_private_agents_clip_gaussian_rewards_to_B(cls, private):
    policy = cls(epsilon=1.0, private=private, sync_threshold=1e12, B=0.5)
    v, obs = setup(policy, reward={"kind": "gaussian", "sigma": 2.0})
    action = policy.act(obs)
    x = np.take_along_axis(obs.context, action.arms[..., None, None], axis=2)[:, :, 0]
    obs, rewards, *_ = v.step(action.arms, action.messages, action.pull)
    policy.act(obs)  # folds the first pull
    y = np.clip(rewards, -0.5, 0.5) if private else rewards
    assert np.any(np.abs(rewards) > 0.5)  # the clip has work to do
    if cls is FedLinUCB:
        u, Q = policy.u, policy.Q
    else:
        u, Q = policy.u[:, :, 0], policy.Q[:, :, 0]
    assert np.allclose(u, y[..., None] * x)
    assert np.allclose(Q[..., D, D], y**2)
    expected = (np.abs(rewards) > 0.5) if private else np.zeros_like(rewards, dtype=bool)
    assert np.array_equal(policy.clipped_rewards, expected.astype(np.int64))


def test_bernoulli_rewards_are_never_clipped():
    policy = FedLinUCB(epsilon=1.0)
    v, obs = setup(policy, horizon=20)
    for _ in range(20):
        action = policy.act(obs)
        obs, *_ = v.step(action.arms, action.messages, action.pull)
    policy.act(obs)
    assert policy.clipped_rewards.sum() == 0


def forced_tree(policy, shape, rng):
    """Huge node noise and no PSD shift: the synchronized W is indefinite almost surely."""
    return GramTreePrivatizer(
        shape, D, sigma=30.0, shift=0.0, levels=policy.constants.m, rng=rng.child("forced")
    )


@pytest.mark.parametrize("floor", [None, 1e-3])
@pytest.mark.parametrize("threshold", [0.0, 1.0])
def test_centralized_floors_an_indefinite_W_and_counts_the_events(floor, threshold):
    horizon = 30
    policy = FedLinUCB(epsilon=1.0, sync_threshold=threshold, eig_floor=floor)
    v, obs = setup(policy, horizon=horizon)
    policy.tree = forced_tree(policy, (3,), v.agent_rng())
    expected_floor = policy.rho_min if floor is None else floor
    assert policy.eig_floor == expected_floor
    raw_low, indefinite = np.zeros(2, dtype=np.int64), 0
    while not v.engine.truncated:  # engine steps: trials and sync (communication) steps
        stats = obs.deliveries["stats"]
        arrived = np.flatnonzero(stats.count > 0)
        raw = stats.aggregate[arrived, : D * D].reshape(-1, D, D).copy()
        action = policy.act(obs)
        if arrived.size:
            eig = np.linalg.eigvalsh(raw)
            low = eig[:, 0] < expected_floor
            raw_low += np.bincount(arrived[low], minlength=2)
            indefinite += int((eig[:, 0] < 0).sum())
            W = policy.W[arrived, 0]
            # eigenvalues clipped at the floor, eigenvectors kept; W above the floor untouched
            assert np.allclose(
                np.linalg.eigvalsh(W), np.maximum(eig, expected_floor), rtol=1e-9, atol=1e-6
            )
            vec = np.linalg.eigh(raw)[1]
            assert np.allclose(
                np.einsum("kia,kij,kjb->kab", vec, W, vec),
                np.einsum("ka,ab->kab", np.maximum(eig, expected_floor), np.eye(D)),
                atol=1e-6,
            )
            assert np.array_equal(W[~low], raw[~low])
        V = policy.W + policy.flight_U + policy.U
        assert np.all(np.isfinite(policy.radius(V, policy.M)))
        obs, *_ = v.step(action.arms, action.messages, action.pull)
    assert indefinite > 0  # the forced noise did make W indefinite
    assert np.array_equal(policy.eig_clip_events, raw_low)
    assert np.all(policy.eig_clip_events > 0)
    assert np.all(policy.n_sync > 0)
    if threshold == 0.0:  # a sync after every trial but the last (paper timing)
        assert np.all(policy.n_sync == horizon - 1)


def test_decentralized_floors_an_indefinite_W_and_counts_the_events():
    horizon, n, gamma = 30, 4, 2
    policy = FedLinUCBDecentralized(gamma=gamma, epsilon=1.0, sync_threshold=1.0, eig_floor=1e-3)
    v, obs = setup(policy, n=n, horizon=horizon, topology="path")
    policy.tree = forced_tree(policy, (n, gamma), v.agent_rng())
    for _ in range(horizon):
        action = policy.act(obs)
        for slot in range(gamma):
            W, _ = policy.W(slot)
            assert np.linalg.eigvalsh(W)[..., 0].min() >= 1e-3 * (1 - 1e-9)
            assert np.all(np.isfinite(policy.radius(W + policy.U[:, :, slot], policy.size)))
        obs, *_ = v.step(action.arms, action.messages, action.pull)
    raw = policy.R_U.sum(axis=3)
    assert np.linalg.eigvalsh(raw)[..., 0].min() < 0  # the forced noise did make W indefinite
    assert np.allclose(policy._W, floor_spectrum(raw, 1e-3)[0])
    assert np.all(policy.eig_clip_events > 0) and np.all(policy.n_requests > 0)


def test_default_noise_never_needs_the_floor():
    policy = FedLinUCB(epsilon=1.0, sync_threshold=0.0)
    v, obs = setup(policy, horizon=20)
    while not v.engine.truncated:
        action = policy.act(obs)
        obs, *_ = v.step(action.arms, action.messages, action.pull)
    assert policy.eig_clip_events.sum() == 0 and np.all(policy.n_sync == 19)


def test_floor_spectrum_keeps_matrices_above_the_floor_bit_for_bit():
    rng = np.random.default_rng(0)
    a = rng.normal(size=(3, D, D))
    W = a @ a.swapaxes(1, 2) + np.array([5.0, -100.0, 5.0])[:, None, None] * np.eye(D)
    out, low = floor_spectrum(W, 1.0)
    assert low.tolist() == [False, True, False]
    assert np.array_equal(out[[0, 2]], W[[0, 2]])
    assert np.linalg.eigvalsh(out[1])[0] == pytest.approx(1.0)
