"""Test-only learners and utilities shared by the test modules."""

from __future__ import annotations

import numpy as np

from fedbandit_env.engine import VecObservation
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


def assert_tree_equal(a, b, path: str = "") -> None:
    """Exact equality of nested dicts / arrays / scalars."""
    if isinstance(a, dict):
        assert isinstance(b, dict) and set(a) == set(b), f"{path}: keys {set(a)} != {set(b)}"
        for k in a:
            assert_tree_equal(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        assert np.array_equal(np.asarray(a), np.asarray(b)), f"{path}: {a} != {b}"
    else:
        assert a == b, f"{path}: {a} != {b}"
