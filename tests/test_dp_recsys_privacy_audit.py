"""Empirical privacy audit of the DP recommender agents (docs/privacy.md, docs/dp-recsys.md).

Agent 0 plays against a fixed reward table ``stream[t, arm]`` (Bernoulli env with means in
{0, 1}, so the reward of a pull is exactly the table entry); the neighbouring table differs in one
entry: the reward of agent 0's first pull of arm 0. The feature is the first message agent 0 sends
that depends on it (its private mean of arm 0 inside the index, or its private-sum increment).
The audit's lower bound on epsilon over thousands of batched runs must not exceed the claim (the
hybrid counter's first release is a Laplace mechanism with loss epsilon/2 here); with
``epsilon = inf`` the same audit finds a large lower bound, so the check can fail. A lower bound,
not a proof.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import fedbandit_env
from agents import DPDecentralizedUCB, DPMasterWorkerUCB
from fedbandit_env.bench.privacy_audit import audit_epsilon, neighbouring_stream
from fedbandit_env.seeding import BatchedRNG

K = 2
HORIZON = 40
TRIALS = 3000
STREAM = np.tile([1.0, 0.0], (HORIZON, 1))  # arm 0 always pays 1, arm 1 always 0
NEIGHBOUR = neighbouring_stream(STREAM, (0, 0), 0.0)  # the first reward of arm 0 is 0 instead


def _first_message(policy, stream: np.ndarray, rng: np.random.Generator, trials: int):
    """Agent 0's first non-zero message over ``trials`` batched runs (B, dim); agent 0 is paid
    from ``stream``, the other agents from ``STREAM``."""
    venv = fedbandit_env.make_vec(
        "FedBandit/Homogeneous-v0",
        num_runs=trials,
        num_agents=3,
        means=stream[0],
        horizon=HORIZON,
        topology="ring",
        reward="bernoulli",
        channels=policy.channel_spec(
            fedbandit_env.make_vec("FedBandit/Homogeneous-v0", num_runs=1, num_arms=K).config
        ),
    )
    obs, _ = venv.reset(seed=0)  # the env draws nothing that matters: rewards are the table
    seeds = [int(s) for s in rng.integers(2**31, size=trials)]
    policy.reset(venv.facts, BatchedRNG.for_runs(seeds, "agents"))
    (channel,) = venv.engine.channels
    for _ in range(2 * HORIZON):  # engine steps: pulls and communication steps
        k = np.minimum(venv.engine.pulls, HORIZON - 1)  # each run's next pull
        venv.engine.means[:, :, :] = STREAM[k][:, None, :]  # the others' rewards never change
        venv.engine.means[:, 0, :] = stream[k]
        action = policy.act(obs)
        send, payload = action.messages[channel]
        if send[:, 0].all() and np.any(payload[:, 0] != 0):
            return payload[:, 0].copy()
        obs, *_ = venv.step(action.arms, action.messages, action.pull)
    raise AssertionError("agent 0 never sent a message")


def _audit(make_policy, column: int):
    def mechanism(stream, rng, trials):
        return _first_message(make_policy(), stream, rng, trials)[:, column]

    return audit_epsilon(mechanism, STREAM, NEIGHBOUR, trials=TRIALS, seed=1, batched=True)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("make_policy", "column"),
    [
        (lambda eps: DPMasterWorkerUCB(epsilon=eps), 0),  # index of arm 0 (the private mean)
        (lambda eps: DPDecentralizedUCB(epsilon=eps), K),  # shat + ds of arm 0
    ],
    ids=["dp_mw_ucb", "dp_dec_ucb"],
)
def test_first_release_audits_below_the_claim(make_policy, column):
    claim = 1.0
    private = _audit(lambda: make_policy(claim), column)
    assert private.epsilon_lower <= claim, private
    exposed = _audit(lambda: make_policy(math.inf), column)
    assert exposed.epsilon_lower > 3 * claim, exposed  # without noise the change is visible
