"""Test-only per-agent learners and parallel-view policy callables (importable by
``module:attr`` ids in joblib and Ray workers)."""

from __future__ import annotations

import math

import numpy as np

from fedbandit_env import PerAgentLearner
from fedbandit_env.per_agent import last_pull


class PlainUCB1(PerAgentLearner):
    """UCB1 written the way papers write it: one agent, Python scalars and lists."""

    agent_id = "test_plain_ucb1"

    def __init__(self, alpha: float = 2.0):
        self.alpha = alpha

    def reset(self, agent, facts, rng):
        self.counts = [0] * facts.num_arms
        self.sums = [0.0] * facts.num_arms
        self.rng = rng

    def act(self, observation):
        pull = last_pull(observation)
        if pull is not None:
            self.counts[pull[0]] += 1
            self.sums[pull[0]] += pull[1]
        untried = [k for k, n in enumerate(self.counts) if n == 0]
        if untried:
            return untried[int(self.rng.integers(len(untried)))]
        t = sum(self.counts)
        index = [
            s / n + math.sqrt(self.alpha * math.log(t) / n)
            for s, n in zip(self.sums, self.counts, strict=True)
        ]
        return {"arm": int(np.argmax(index))}


class PerAgentFlood(PerAgentLearner):
    """Epsilon-greedy on the element-wise max of own means and what the neighbours sent (the
    per-agent twin of tests.helpers.GreedyFlood), so reward changes propagate hop by hop."""

    agent_id = "test_per_agent_flood"

    def channel_spec(self, config):
        return {"neighbors": {"kind": "neighbors", "dim": config.num_arms}}

    def reset(self, agent, facts, rng):
        m = facts.num_arms
        self.sums, self.counts = np.zeros(m), np.zeros(m)
        self.known = np.full(m, -np.inf)
        self.rng = rng

    def act(self, observation):
        pull = last_pull(observation)
        if pull is not None:
            self.sums[pull[0]] += pull[1]
            self.counts[pull[0]] += 1
        own = np.where(self.counts > 0, self.sums / np.maximum(self.counts, 1), -np.inf)
        heard = observation["channels"]["neighbors"]
        received = np.where(heard["mask"][:, None] > 0, heard["payload"], -np.inf).max(axis=0)
        self.known = np.maximum(np.maximum(self.known, received), own)
        payload = np.where(np.isfinite(self.known), self.known, -1e9)
        u = self.rng.random(2)
        m = len(self.known)
        arm = min(int(u[1] * m), m - 1) if u[0] < 0.2 else int(np.argmax(payload))
        return {"arm": arm, "messages": {"neighbors": {"send": 1, "payload": payload}}}


class Recorder(PerAgentLearner):
    """Plays (step + agent index) mod M, sends its last reward on every channel and records
    every observation it gets."""

    agent_id = "test_recorder"

    def reset(self, agent, facts, rng):
        self.i = int(agent.removeprefix("agent_"))
        self.m = facts.num_arms
        self.dims = {name: ch["dim"] for name, ch in facts.channels.items()}
        self.observations = []
        self.first_draw = float(rng.random())

    def act(self, observation):
        self.observations.append(observation)
        reward = float(observation["last_reward"])
        messages = {
            name: {"send": 1, "payload": np.full(dim, reward + self.i)}
            for name, dim in self.dims.items()
        }
        return {"arm": (int(observation["step"]) + self.i) % self.m, "messages": messages}


def first_arm(observations, infos):
    """A parallel-view policy callable: every agent pulls arm 0."""
    return {agent: {"arm": 0} for agent in observations}


class GreedyPolicy:
    """A stateful parallel-view policy object (``reset()`` and ``__call__``): each agent pulls
    its arms round-robin for ``explore`` rounds, then its best empirical arm so far."""

    def __init__(self, num_arms: int = 3, explore: int = 3):
        self.num_arms, self.explore = num_arms, explore

    def reset(self):
        self.stats = {}

    def __call__(self, observations, infos):
        actions = {}
        for agent, obs in observations.items():
            sums, counts = self.stats.setdefault(
                agent, (np.zeros(self.num_arms), np.zeros(self.num_arms))
            )
            pull = last_pull(obs)
            if pull is not None:
                sums[pull[0]] += pull[1]
                counts[pull[0]] += 1
            step = int(obs["step"])
            if step < self.explore * self.num_arms:
                arm = step % self.num_arms
            else:
                arm = int(np.argmax(sums / np.maximum(counts, 1)))
            actions[agent] = {"arm": arm}
        return actions


greedy = GreedyPolicy()


class TalkThenPull(PerAgentLearner):
    """Round robin over the arms with a communication-only step (``pull = 0``) before every
    pull: it counts the pulls it sees through ``last_pull`` (each exactly once)."""

    agent_id = "test_talk_then_pull"

    def __init__(self, disagree: bool = False):
        self.disagree = disagree

    def channel_spec(self, config):
        return {"neighbors": {"kind": "neighbors", "dim": config.num_arms}}

    def reset(self, agent, facts, rng):
        self.agent, self.num_arms = agent, facts.num_arms
        self.seen, self.talk = 0, True

    def act(self, observation):
        if last_pull(observation) is not None:
            self.seen += 1
        talk, self.talk = self.talk, not self.talk
        pull = 0 if talk else 1
        if self.disagree and self.agent == "agent_1":
            pull = 1
        return {
            "arm": self.seen % self.num_arms,
            "pull": pull,
            "messages": {"neighbors": {"send": 1, "payload": np.full(self.num_arms, float(self.seen))}},
        }
