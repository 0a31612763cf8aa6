"""Determinism (docs/architecture.md, "Seeding"): same seed, same everything, over the whole
horizon."""

from __future__ import annotations

import numpy as np
import pytest

import fedbandit_env
from fedbandit_env.seeding import BatchedRNG
from tests.helpers import assert_tree_equal, random_actions

KWARGS = {
    "num_agents": 5,
    "num_arms": 4,
    "horizon": 150,
    "topology": "ring",
    "reward": {"kind": "gaussian", "sigma": 1.0},
    "channels": {
        "n": {"kind": "neighbors", "drop_prob": 0.3},
        "g": {"kind": "gossip"},
        "s": {"kind": "server", "participation": 0.5},
        "f": {"kind": "flood", "ttl": 2, "drop_prob": 0.2},
    },
    "instance_seed": None,
}


def _trajectory(seed: int):
    env = fedbandit_env.make("FedBandit/Heterogeneous-v0", **KWARGS)
    rng = np.random.default_rng(123)  # the actions are the same in every replay
    out = [env.reset(seed=seed)]
    while env.agents:
        out.append(env.step(random_actions(env, rng)))
    return out


def test_same_seed_identical_at_every_step():
    a, b = _trajectory(7), _trajectory(7)
    assert len(a) == len(b) == KWARGS["horizon"] + 1
    for t, (x, y) in enumerate(zip(a, b, strict=True)):
        for part_x, part_y in zip(x, y, strict=True):
            assert_tree_equal(part_x, part_y, f"step {t}")


def test_different_seeds_differ():
    a, b = _trajectory(7), _trajectory(8)
    rewards_a = [step[1] for step in a[1:]]
    rewards_b = [step[1] for step in b[1:]]
    assert rewards_a != rewards_b


def test_reset_without_seed_continues_deterministically():
    """Gymnasium's convention: an unseeded reset continues the stream of the last seeded one."""
    env = fedbandit_env.make("FedBandit/Heterogeneous-v0", horizon=3)
    env.reset(seed=10)
    _, infos = env.reset()
    again = fedbandit_env.make("FedBandit/Heterogeneous-v0", horizon=3)
    again.reset(seed=10)
    _, infos_again = again.reset()
    assert env.seed_used == again.seed_used == infos["agent_0"]["run_seed"]
    assert infos_again["agent_2"]["run_seed"] == env.seed_used
    assert env.seed_used not in (10, 11)  # not s + 1: that is the next copy's seeded episode


@pytest.mark.parametrize("kind", ["uniform", "normal", "exponential"])
def test_batched_streams_do_not_depend_on_batch_size(kind):
    batch = BatchedRNG.for_runs([3, 4, 5], "agents").buffered(kind, (7,))
    alone = BatchedRNG.for_runs([4], "agents").buffered(kind, (7,))
    for _ in range(2500):  # crosses several refills
        assert np.array_equal(batch.next()[1], alone.next()[0])
