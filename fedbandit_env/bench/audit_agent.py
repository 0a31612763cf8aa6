"""Empirical privacy audit of a whole learner (DESIGN.md §4: claims are checked, not trusted).

Agent 0 of a 3-agent ring is paid from a fixed 0/1 reward table (Bernoulli rewards with means 0
or 1 are deterministic), the others from the base table; the neighbouring table differs in one
entry, the reward of agent 0's first pull of arm 0. The audited output is the first message agent
0 sends after that reward (reduced to a scalar by ``feature``). Over many independent runs the
audit of :func:`fedbandit_env.privacy.audit_epsilon` gives a high-confidence lower bound on the
epsilon of that release, which must not exceed the learner's claim. A lower bound, not a proof.

The claim is the learner's own declaration, ``TeamPolicy.privacy_epsilon``, read after ``reset``
on the audit's federation (:func:`declared_claim`); a learner that declares nothing, or ``inf``,
claims no privacy, and the audit just reports how much its first message leaks. A learner kwarg
named ``epsilon`` is never taken for a claim (epsilon-greedy's is an exploration rate).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from fedbandit_env.agent_registry import make_agent
from fedbandit_env.bench.evaluate import declared_epsilon
from fedbandit_env.errors import ConfigError
from fedbandit_env.privacy import AuditResult, audit_epsilon, neighbouring_stream
from fedbandit_env.registration import make_vec
from fedbandit_env.seeding import BatchedRNG

ENV = "FedBandit/Homogeneous-v0"


def first_message(
    agent_id: str,
    agent_kwargs: dict[str, Any],
    stream: np.ndarray,
    base: np.ndarray,
    rng: np.random.Generator,
    trials: int,
    feature: Callable[[np.ndarray], np.ndarray],
) -> np.ndarray:
    """Agent 0's first message after its first pull of arm 0, over ``trials`` batched runs."""
    horizon, num_arms = stream.shape
    policy = make_agent(agent_id, **agent_kwargs)
    venv = _audit_env(agent_id, policy, trials, num_arms, horizon)
    obs, _ = venv.reset(seed=0)
    seeds = [int(s) for s in rng.integers(2**31, size=trials)]
    policy.reset(venv.facts, BatchedRNG.for_runs(seeds, "agents"))
    pulled = np.zeros(trials, dtype=bool)
    while not venv.engine.truncated:
        k = np.minimum(venv.engine.pulls, horizon - 1)  # each run's next pull (communication
        venv.engine.means[:, :, :] = base[k][:, None, :]  # steps do not consume the stream)
        venv.engine.means[:, 0, :] = stream[k]
        action = policy.act(obs)
        for send, payload in action.messages.values():
            ready = pulled & send[:, 0]
            if ready.all():
                return feature(payload[:, 0])
        obs, *_ = venv.step(action.arms, action.messages, action.pull)
        pulled |= obs.last_arm[:, 0] == 0
    raise ConfigError(f"{agent_id}: audit: agent 0 sent no message after pulling arm 0")


def _audit_env(agent_id: str, policy: Any, num_runs: int, num_arms: int, horizon: int) -> Any:
    """The audit's federation (3 agents on a ring, Bernoulli rewards) with the learner's
    channels; a learner that asks for none has nothing to audit."""
    preview = make_vec(ENV, num_runs=1, num_agents=3, num_arms=num_arms, horizon=horizon)
    channels = policy.channel_spec(preview.config)
    if not channels:
        raise ConfigError(f"{agent_id}: audit: the learner sends no messages, nothing to audit")
    return make_vec(
        ENV,
        num_runs=num_runs,
        num_agents=3,
        num_arms=num_arms,
        horizon=horizon,
        topology="ring",
        reward="bernoulli",
        channels=channels,
    )


def declared_claim(
    agent_id: str,
    agent_kwargs: dict[str, Any] | None = None,
    *,
    horizon: int = 40,
    num_arms: int = 2,
) -> float | None:
    """The privacy epsilon the learner declares on the audit's federation (after ``reset``):
    a number, ``inf`` (not private) or None (no declaration)."""
    policy = make_agent(agent_id, **dict(agent_kwargs or {}))
    venv = _audit_env(agent_id, policy, 1, num_arms, horizon)
    policy.reset(venv.facts, BatchedRNG.for_runs([0], "agents"))
    return declared_epsilon(policy)


def audit_agent(
    agent_id: str,
    agent_kwargs: dict[str, Any] | None = None,
    *,
    trials: int = 3000,
    seed: int = 0,
    horizon: int = 40,
    num_arms: int = 2,
    feature: Callable[[np.ndarray], np.ndarray] | None = None,
    confidence: float = 0.95,
) -> AuditResult:
    """Lower bound on the epsilon of a learner's first message about one reward (see module)."""
    kwargs = dict(agent_kwargs or {})
    base = np.zeros((horizon, num_arms))
    base[:, 0] = 1.0  # arm 0 always pays 1, the others 0
    neighbour = neighbouring_stream(base, (0, 0), 0.0)
    feat = feature or (lambda payload: payload.sum(axis=-1))

    def mechanism(stream: np.ndarray, rng: np.random.Generator, n: int) -> np.ndarray:
        return first_message(agent_id, kwargs, stream, base, rng, n, feat)

    return audit_epsilon(
        mechanism, base, neighbour, trials=trials, seed=seed, batched=True, confidence=confidence
    )
