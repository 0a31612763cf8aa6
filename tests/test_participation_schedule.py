"""The server channel's participation schedule (``join_round``; fedbandit_env.network.server):
agents inactive until their round, refused uploads not charged, rounds counted per run, the
broadcast to everyone, no randomness drawn, batch = single runs, the light cone, and bad input.
Both views are checked bit for bit in tests/test_views.py (config ``joining``)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fedbandit_env
from fedbandit_env.config import normalize_channels
from fedbandit_env.errors import ConfigError
from fedbandit_env.network import make_channel
from fedbandit_env.network.ledger import AGENT_SERVER
from fedbandit_env.policy import TeamAction, TeamPolicy
from fedbandit_env.seeding import BatchedRNG

ENV = "FedBandit/Heterogeneous-v0"


def _channel(join, n, runs=2, **opts):
    from fedbandit_env.config import make_topology

    spec = normalize_channels({"s": {"kind": "server", "join_round": join, **opts}}, 3)
    ch = make_channel("s", spec["s"], make_topology("ring", n, {}), 1.0, 1.0)
    ch.reset(BatchedRNG.for_runs(list(range(runs)), "network"))
    return ch


@settings(max_examples=60, deadline=None)
@given(
    data=st.data(),
    n=st.integers(3, 7),
    steps=st.integers(1, 12),
)
def test_uploads_count_and_charges_follow_the_schedule(data, n, steps):
    """Property: an upload arrives iff the agent sends and has joined (its round <= the rounds
    completed so far in its run); only arrivals are charged; a round is a step with an arrival;
    the broadcast reaches all N agents."""
    join = data.draw(st.lists(st.integers(0, 4), min_size=n, max_size=n))
    join[data.draw(st.integers(0, n - 1))] = 0
    ch = _channel(join, n)
    rounds = np.zeros(2, dtype=np.int64)
    for t in range(1, steps + 1):
        send = np.array(
            data.draw(st.lists(st.booleans(), min_size=2 * n, max_size=2 * n))
        ).reshape(2, n)
        payload = np.arange(2 * n * 3, dtype=float).reshape(2, n, 3)
        active = np.array(join)[None, :] <= rounds[:, None]
        assert np.array_equal(ch.active, active)
        delivery, charge = ch.transmit(t, send, payload)
        up = send & active
        assert np.array_equal(delivery.participating, active)
        assert np.array_equal(delivery.count, up.sum(axis=1))
        expected = np.einsum("bn,bnd->bd", up.astype(float), payload) / np.maximum(
            up.sum(axis=1), 1
        )[:, None]
        assert np.allclose(delivery.aggregate, expected)
        down = np.where(up.any(axis=1), n, 0)
        assert np.array_equal(charge.messages[:, AGENT_SERVER], up.sum(axis=1) + down)
        assert np.array_equal(charge.cost[:, AGENT_SERVER], up.sum(axis=1) * 1.0)
        assert np.array_equal(charge.sent, up)
        rounds += up.any(axis=1)


def test_runs_count_their_own_rounds():
    ch = _channel([0, 1, 2], 3)
    payload = np.ones((2, 3, 3))
    send = np.array([[True, True, True], [False, False, False]])
    for _ in range(2):
        ch.transmit(1, send, payload)
    assert ch.active.tolist() == [[True, True, True], [True, False, False]]


def test_schedule_draws_no_randomness():
    """Same network draws with and without a schedule (participation picks and drops)."""
    opts = {"participation": 0.5, "drop_prob": 0.3}
    plain, joined = _channel(None, 6, **opts), _channel([0] * 6, 6, **opts)
    send = np.ones((2, 6), dtype=bool)
    for t in range(1, 20):
        a, _ = plain.transmit(t, send, np.ones((2, 6, 3)))
        b, _ = joined.transmit(t, send, np.ones((2, 6, 3)))
        assert np.array_equal(a.participating, b.participating)
        assert np.array_equal(a.count, b.count)


def test_describe_and_facts_carry_the_schedule():
    venv = fedbandit_env.make_vec(
        ENV,
        num_runs=1,
        num_agents=3,
        channels={"s": {"kind": "server", "dim": 2, "join_round": [0, 2, 1]}},
    )
    assert venv.facts.channels["s"]["join_round"] == [0, 2, 1]
    plain = fedbandit_env.make_vec(ENV, num_runs=1, num_agents=3, channels=("server",))
    assert plain.facts.channels["server"]["join_round"] is None


@pytest.mark.parametrize(
    ("join", "match"),
    [
        ([0, 1], r"channels\.s\.join_round: expected one round per agent \(3\)"),
        ([0, -1, 2], r"channels\.s\.join_round\[1\]"),
        ([1, 1, 2], r"at least one agent that joins at round 0"),
        ("012", r"channels\.s\.join_round: expected None or a list"),
        ([0, 1.5, 2], r"channels\.s\.join_round\[1\]"),
    ],
)
def test_bad_schedule_is_a_clear_error(join, match):
    with pytest.raises((ConfigError, TypeError), match=match):
        fedbandit_env.make_vec(
            ENV,
            num_runs=1,
            num_agents=3,
            channels={"s": {"kind": "server", "dim": 2, "join_round": join}},
        )


# ------------------------------------------------------------------ through the engine
class ServerGreedy(TeamPolicy):
    """Reward-driven and communicating over a server channel with a schedule: each agent uploads
    its empirical means every step and plays epsilon-greedy (0.2) on the element-wise max of its
    own means and the server's last average."""

    agent_id = "test_server_greedy"

    def reset(self, facts, rng):
        B, N, M = facts.num_runs, facts.num_agents, facts.num_arms
        self.m = M
        self.sums, self.counts = np.zeros((B, N, M)), np.zeros((B, N, M))
        self.known = np.full((B, N, M), -1e9)
        self._explore = rng.child("explore").buffered("uniform", (N, 2))
        self._send = np.ones((B, N), dtype=bool)

    def act(self, obs):
        if obs.step > 0:
            b, i = np.indices(obs.last_arm.shape)
            self.sums[b, i, obs.last_arm] += obs.last_reward
            self.counts[b, i, obs.last_arm] += 1
        own = self.sums / np.maximum(self.counts, 1)
        s = obs.deliveries["s"]
        heard = np.where((s.count > 0)[:, None, None], s.aggregate[:, None, :], -1e9)
        self.known = np.maximum(np.maximum(self.known, heard), own)
        u = self._explore.next()
        random_arm = np.minimum((u[..., 1] * self.m).astype(np.int64), self.m - 1)
        arms = np.where(u[..., 0] < 0.2, random_arm, np.argmax(self.known, axis=2))
        return TeamAction(arms, {"s": (self._send, own)})


JOIN = [0, 0, 1, 3, 2]


def _run(perturb=None, runs=3, seed=4, horizon=60, join=JOIN):
    policy = ServerGreedy()
    venv = fedbandit_env.make_vec(
        ENV,
        num_runs=runs,
        num_agents=5,
        num_arms=4,
        horizon=horizon,
        reward={"kind": "gaussian", "sigma": 0.1},
        channels={"s": {"kind": "server", "dim": 4, "join_round": join}},
    )
    obs, _ = venv.reset(seed=seed)
    policy.reset(venv.facts, venv.agent_rng())
    arms, charges = [], []
    for t in range(1, horizon + 1):
        if perturb is not None and t == 20:
            venv.engine.means[:, perturb, :] = 1.0 - venv.engine.means[:, perturb, :]
            venv.engine.means[:, perturb, 3] += 3.0
        action = policy.act(obs)
        arms.append(action.arms.copy())
        obs, *_ = venv.step(action.arms, action.messages)
        charges.append(venv.engine.ledger.step.messages.copy())
    return np.stack(arms), np.stack(charges)


def test_light_cone_and_batch_equals_single_runs():
    base, charges = _run()
    for b in range(3):
        one, one_charges = _run(runs=1, seed=4 + b)
        assert np.array_equal(one[:, 0], base[:, b])
        assert np.array_equal(one_charges[:, 0], charges[:, b])
    for j in (0, 3):
        arms, _ = _run(perturb=j)
        for i in range(5):
            changed = np.nonzero((arms[:, :, i] != base[:, :, i]).any(axis=1))[0]
            assert changed.size > 0, (i, j)
            # through the server: one hop (a reward of step t reaches decisions of t + 2)
            assert changed[0] + 1 > 20 + (0 if i == j else 1), (i, j, changed[0] + 1)


def test_an_inactive_agent_reaches_nobody_before_it_joins():
    """Agent 4 joins at round 40 (rounds happen every step here, so with step 41): a change of
    its rewards at step 20 reaches the others' decisions from step 42 on, not before."""
    late = [0, 0, 1, 3, 40]
    base, _ = _run(join=late, horizon=70)
    arms, _ = _run(perturb=4, join=late, horizon=70)
    firsts = []
    for i in range(4):
        changed = np.nonzero((arms[:, :, i] != base[:, :, i]).any(axis=1))[0]
        firsts += [changed[0] + 1] if changed.size else []
    assert firsts, "the change never reached another agent (the test would be vacuous)"
    assert min(firsts) > 41, firsts
