"""Test-only learners and utilities shared by the test modules."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

import fedbandit_env
from fedbandit_env.engine import PULL, VecObservation
from fedbandit_env.policy import FederationFacts, TeamAction, TeamPolicy
from fedbandit_env.seeding import BatchedRNG


class GreedyFlood(TeamPolicy):
    """Reward-driven and communicating, so reward changes propagate: each agent floods the
    element-wise max of its own empirical means and what it heard over ``neighbors``, and plays
    the arm with the best known value (epsilon-greedy with epsilon = 0.2)."""

    agent_id = "test_greedy_flood"

    def channel_spec(self, config):
        return {"neighbors": {"kind": "neighbors", "dim": config.num_arms}}

    def reset(self, facts: FederationFacts, rng: BatchedRNG) -> None:
        self.require_channel(facts, "neighbors", "neighbors", facts.num_arms)
        shape = (facts.num_runs, facts.num_agents, facts.num_arms)
        self.m = facts.num_arms
        self.sums = np.zeros(shape)
        self.counts = np.zeros(shape)
        self.known = np.full(shape, -np.inf)
        self._explore = rng.child("explore").buffered("uniform", (facts.num_agents, 2))
        self._send = np.ones(shape[:2], dtype=bool)

    def act(self, obs: VecObservation) -> TeamAction:
        if obs.step > 0:
            b, i = np.indices(obs.last_arm.shape)
            self.sums[b, i, obs.last_arm] += obs.last_reward
            self.counts[b, i, obs.last_arm] += 1
        own = np.where(self.counts > 0, self.sums / np.maximum(self.counts, 1), -np.inf)
        heard = obs.deliveries["neighbors"]
        received = np.where(heard.mask[..., None], heard.payload, -np.inf).max(axis=2)
        self.known = np.maximum(np.maximum(self.known, received), own)
        u = self._explore.next()
        greedy = np.argmax(np.where(np.isfinite(self.known), self.known, -1e9), axis=2)
        random_arm = np.minimum((u[..., 1] * self.m).astype(np.int64), self.m - 1)
        arms = np.where(u[..., 0] < 0.2, random_arm, greedy)
        payload = np.where(np.isfinite(self.known), self.known, -1e9)
        return TeamAction(arms, {"neighbors": (self._send, payload)})


def random_actions(env, rng: np.random.Generator, send_prob: float = 0.5) -> dict:
    """Random valid per-agent actions with random messages on every channel."""
    actions = {}
    for agent in env.agents:
        space = env.action_space(agent)
        arm = int(rng.integers(space["arm"].n))
        msgs = {}
        if "messages" in space.spaces:
            for name, sub in space["messages"].spaces.items():
                dim = sub["payload"].shape[0]
                msgs[name] = {
                    "send": int(rng.random() < send_prob),
                    "payload": rng.normal(size=dim),
                }
        actions[agent] = {"arm": arm, "messages": msgs}
    return actions


def assert_means_within_3se(new: np.ndarray, old: np.ndarray) -> None:
    """The mean regrets of two implementations (one value per run) agree within 3 standard
    errors of their difference; a zero standard error (identical constant runs) is refused, so
    the check cannot pass vacuously."""
    se = np.hypot(new.std(ddof=1) / np.sqrt(new.size), old.std(ddof=1) / np.sqrt(old.size))
    assert se > 0.0
    assert abs(new.mean() - old.mean()) <= 3.0 * se, (new.mean(), old.mean(), se)


def assert_tree_equal(a, b, path: str = "") -> None:
    """Bit-exact equality of nested dicts / lists / arrays / scalars: same keys, same types and
    dtypes, same shapes and the same bytes (so NaN == NaN and -0.0 != 0.0)."""
    if isinstance(a, dict):
        assert isinstance(b, dict) and set(a) == set(b), f"{path}: keys {set(a)} != {set(b)}"
        for k in a:
            assert_tree_equal(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, list | tuple):
        assert type(a) is type(b) and len(a) == len(b), f"{path}: {a} != {b}"
        for k, (x, y) in enumerate(zip(a, b, strict=True)):
            assert_tree_equal(x, y, f"{path}[{k}]")
    elif isinstance(a, np.ndarray | np.generic) or isinstance(b, np.ndarray | np.generic):
        assert type(a) is type(b), f"{path}: {type(a)} != {type(b)}"
        x, y = np.asarray(a), np.asarray(b)
        assert x.dtype == y.dtype and x.shape == y.shape, (
            f"{path}: {x.dtype}{x.shape} != {y.dtype}{y.shape}"
        )
        assert x.tobytes() == y.tobytes(), f"{path}: {a} != {b}"
    elif isinstance(a, float):
        assert type(b) is float and np.float64(a).tobytes() == np.float64(b).tobytes(), (
            f"{path}: {a!r} != {b!r}"
        )
    else:
        assert type(a) is type(b) and a == b, f"{path}: {a!r} != {b!r}"


class Chatty(TeamPolicy):
    """Talks on every channel of the environment and lets every delivery steer its arms.

    Each agent sends on each channel with probability 0.6 (its own stream), a payload built from
    its empirical means and what it heard; it plays the best of ``own means + heard`` with
    epsilon = 0.25, where ``heard`` is a running average of everything delivered to it: neighbours'
    payloads, the gossip partner's payload, flood payloads (weighted by hops and sent step), the
    server and hierarchical aggregates (weighted by their counts). A difference in any delivery
    therefore changes later arms and messages.
    """

    agent_id = "test_chatty"

    def reset(self, facts: FederationFacts, rng: BatchedRNG) -> None:
        self.facts = facts
        b, n, m = facts.num_runs, facts.num_agents, facts.num_arms
        self.m = m
        self.sums = np.zeros((b, n, m))
        self.counts = np.zeros((b, n, m))
        self.heard = np.zeros((b, n, m))
        self.names = sorted(facts.channels)
        self._u = rng.child("chatty").buffered("uniform", (n, 2 + len(self.names)))

    def _received(self, name: str, d) -> np.ndarray:
        """What channel ``name`` delivered to each agent, as (B, N, dim)."""
        kind = self.facts.channels[name]["kind"]
        b, n = self.sums.shape[:2]
        if kind == "neighbors":
            return np.where(d.mask[..., None], d.payload, 0.0).sum(axis=2)
        if kind == "gossip":
            partner = (d.partner >= 0)[..., None] * 0.01
            return np.where(d.received[..., None], d.payload, 0.0) + partner
        if kind in ("server", "hierarchical"):
            weight = np.log1p(d.count)[:, None, None]
            out = np.broadcast_to(d.aggregate[:, None, :] * weight, (b, n, d.aggregate.shape[1]))
            if kind == "server":
                out = out * (1.0 + d.participating[..., None])
            else:
                out = out * (d.sent_step >= 0)[:, None, None]
            return out
        if kind == "flood":
            out = np.zeros((b, n, self.facts.channels[name]["dim"]))
            w = 1.0 / (d.hops + 1.0) + 1e-3 * d.sent_step
            np.add.at(out, (d.run, d.receiver), d.payload * w[:, None])
            return out
        raise AssertionError(kind)

    def act(self, obs: VecObservation) -> TeamAction:
        if obs.step > 0:
            b, i = np.indices(obs.last_arm.shape)
            fresh = (obs.phase == PULL)[:, None]  # after a communication step: nothing new
            self.sums[b, i, obs.last_arm] += np.where(fresh, obs.last_reward, 0.0)
            self.counts[b, i, obs.last_arm] += fresh
        own = self.sums / np.maximum(self.counts, 1)
        for name in self.names:
            got = self._received(name, obs.deliveries[name])
            k = min(got.shape[2], self.m)
            self.heard[..., :k] = 0.9 * self.heard[..., :k] + 0.1 * np.tanh(got[..., :k])
        u = self._u.next()
        score = own + self.heard
        random_arm = np.minimum((u[..., 1] * self.m).astype(np.int64), self.m - 1)
        arms = np.where(u[..., 0] < 0.25, random_arm, np.argmax(score, axis=2))
        messages = {}
        for c, name in enumerate(self.names):
            dim = self.facts.channels[name]["dim"]
            payload = score[..., np.arange(dim) % self.m]  # own row only, cycled to dim
            messages[name] = (u[..., 2 + c] < 0.6, payload)
        return TeamAction(arms, messages)


class Pausing(Chatty):
    """Chatty with communication-only steps (docs/architecture.md, "Communication steps"): each
    run skips its pull with probability 0.35 (its own stream), at most ``streak`` times in a
    row, so runs of one batch take different numbers of steps."""

    agent_id = "test_pausing"

    def __init__(self, streak: int = 3):
        self.streak_max = streak

    def reset(self, facts: FederationFacts, rng: BatchedRNG) -> None:
        super().reset(facts, rng)
        self._p = rng.child("pausing").buffered("uniform", (1,))
        self.streak = np.zeros(facts.num_runs, dtype=np.int64)

    def act(self, obs: VecObservation) -> TeamAction:
        action = super().act(obs)
        pull = (self._p.next()[:, 0] >= 0.35) | (self.streak >= self.streak_max)
        self.streak = np.where(pull, 0, self.streak + 1)
        action.pull = pull
        return action


def gossip_venv(n, m, rounds, topology, runs, reward=None, **kw):
    """A heterogeneous vector env with the two channels of the gossip agents (docs/gossip.md),
    horizon ``rounds + m`` (the M initialization steps first) and Gaussian(1) rewards by default."""
    return fedbandit_env.make_vec(
        "FedBandit/Heterogeneous-v0",
        num_runs=runs,
        num_agents=n,
        num_arms=m,
        horizon=rounds + m,
        topology=topology,
        reward=reward or {"kind": "gaussian", "sigma": 1.0},
        channels=("neighbors", "gossip"),
        **kw,
    )


def data_file_or_skip(relative: str) -> tuple[Path | None, pytest.MarkDecorator]:
    """The data set file ``relative`` in the data folder ($FEDBANDIT_DATA,
    :func:`fedbandit_env.datasets.files.data_file`) and a ``skipif`` mark for the tests that need
    it, with the reason naming the variable and the expected path."""
    from fedbandit_env.datasets.files import DATA_VAR, find_data_file

    path = find_data_file(relative)
    where = os.environ.get(DATA_VAR)
    reason = (
        f"{relative} is not in the data folder {where} ({DATA_VAR})"
        if where
        else f"{DATA_VAR} is not set: point it to the data folder that holds {relative} "
        "(the package never ships or downloads it)"
    )
    return path, pytest.mark.skipif(path is None, reason=reason)
