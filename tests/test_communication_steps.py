"""Communication-only steps (docs/architecture.md, "Communication steps"): a step in which the
run's agents send and receive messages without pulling an arm. No reward is drawn, regret and the
horizon's pull count stay, the ledger charges the messages, the observation and the infos show
the phase, and a run may not take more than ``max_communication_steps`` of them in a row."""

from __future__ import annotations

import numpy as np
import pytest

import fedbandit_env
from fedbandit_env.engine import COMMUNICATION, PULL
from fedbandit_env.errors import ActionError, CommunicationError, ConfigError, HorizonError

ENV = "FedBandit/Heterogeneous-v0"
SERVER = {"s": {"kind": "server", "dim": 3}}


def _venv(runs=2, horizon=4, **kw):
    kw.setdefault("channels", SERVER)
    return fedbandit_env.make_vec(
        ENV, num_runs=runs, num_agents=3, num_arms=3, horizon=horizon, **kw
    )


def _send(venv, value=1.0):
    shape = (venv.num_runs, venv.num_agents)
    return {"s": (np.ones(shape, dtype=bool), np.full((*shape, 3), value))}


def test_communication_step_draws_no_reward_and_keeps_regret_and_pulls():
    venv = _venv()
    venv.reset(seed=0)
    arms = np.zeros((2, 3), dtype=np.int64)
    obs, rewards, _, trunc, info = venv.step(arms + 1, _send(venv))
    charge = venv.engine.ledger.step.messages.copy()
    assert charge.sum() > 0
    regret, pulled_arm, reward = info.cumulative_regret.copy(), obs.last_arm.copy(), rewards.copy()
    obs, rewards, _, trunc, info = venv.step(arms, _send(venv, 2.0), pull=np.array([False, True]))
    assert obs.step == 2 and obs.pulls.tolist() == [1, 2]
    assert obs.phase.tolist() == [COMMUNICATION, PULL]
    assert np.all(rewards[0] == 0.0) and np.all(info.instant_regret[0] == 0.0)
    assert np.array_equal(info.cumulative_regret[0], regret[0])
    # the last pull is still what last_arm / last_reward describe in the communicating run
    assert np.array_equal(obs.last_arm[0], pulled_arm[0])
    assert np.array_equal(obs.last_reward[0], reward[0])
    assert np.all(obs.last_arm[1] == 0)
    # the ledger charges the messages of both runs as in any step; the server delivered them
    assert np.array_equal(venv.engine.ledger.step.messages, charge)
    assert np.allclose(obs.deliveries["s"].aggregate[0], 2.0)  # mean of the three payloads
    assert not trunc.any()


def test_horizon_counts_pulls_and_runs_finish_apart():
    venv = _venv(horizon=3)
    venv.reset(seed=1)
    arms = np.zeros((2, 3), dtype=np.int64)
    pattern = [[True, True], [False, True], [True, True], [True, False]]
    done = []
    for pull in pattern:
        obs, _, _, trunc, _ = venv.step(arms, _send(venv), pull=np.array(pull))
        done.append(trunc[:, 0].tolist())
    # run 1 made its 3 pulls at step 3, run 0 (one communication step) at step 4
    assert done[2] == [False, True] and done[3] == [True, True]
    assert venv.engine.pulls.tolist() == [3, 3]
    assert venv.engine.truncated
    with pytest.raises(HorizonError, match="horizon exceeded"):
        venv.step(arms, pull=np.array([False, False]))


def test_finished_run_ignores_the_steps_of_the_others():
    venv = _venv(horizon=2)
    venv.reset(seed=2)
    arms = np.zeros((2, 3), dtype=np.int64)
    venv.step(arms, _send(venv), pull=np.array([True, False]))
    venv.step(arms, _send(venv), pull=np.array([True, True]))  # run 0 done
    sent = venv.engine.ledger.total.messages.copy()
    regret = venv.engine.cumulative_regret.copy()
    obs, rewards, _, trunc, _ = venv.step(arms, _send(venv), pull=np.array([True, True]))
    assert trunc.all()
    total = venv.engine.ledger.total.messages
    assert np.array_equal(total[0], sent[0]) and (total[1] > sent[1]).any()
    assert np.array_equal(venv.engine.cumulative_regret[0], regret[0])
    assert np.all(rewards[0] == 0.0) and obs.pulls.tolist() == [2, 2]


def test_pull_flag_is_validated():
    venv = _venv()
    venv.reset(seed=0)
    arms = np.zeros((2, 3), dtype=np.int64)
    with pytest.raises(ActionError, match=r"pull: expected a bool or a bool array of shape \(2,\)"):
        venv.step(arms, pull=np.array([True, False, True]))
    with pytest.raises(ActionError, match="pull: expected bool"):
        venv.step(arms, pull=np.array([2, 0]))
    obs, *_ = venv.step(arms, pull=False)  # a scalar applies to every run
    assert obs.phase.tolist() == [COMMUNICATION, COMMUNICATION]


def test_runaway_guard():
    venv = _venv(max_communication_steps=2)
    venv.reset(seed=0)
    arms = np.zeros((2, 3), dtype=np.int64)
    talk = np.array([True, False])
    venv.step(arms, pull=talk)
    venv.step(arms, pull=talk)
    with pytest.raises(
        CommunicationError, match="run 1: more than max_communication_steps=2 communication steps"
    ):
        venv.step(arms, pull=talk)
    # a pull resets the count
    venv = _venv(max_communication_steps=2)
    venv.reset(seed=0)
    for pull in [False, False, True, False, False, True]:
        venv.step(arms, pull=pull)
    with pytest.raises(ConfigError, match="max_communication_steps: expected an int >= 1"):
        _venv(max_communication_steps=0)


def _actions(env, pull=None):
    out = {}
    for agent in env.agents:
        action = {"arm": 1}
        if pull is not None:
            action["pull"] = pull
        out[agent] = action
    return out


def test_parallel_view_pull_key_phase_and_infos():
    env = fedbandit_env.make(ENV, num_agents=3, num_arms=3, horizon=2, channels=SERVER)
    obs, infos = env.reset(seed=4)
    assert obs["agent_0"]["phase"] == PULL and infos["agent_0"]["phase"] == PULL
    assert env.observation_space("agent_0").contains(obs["agent_0"])
    obs, rewards, _, truncs, infos = env.step(_actions(env, pull=0))
    assert env.observation_space("agent_0").contains(obs["agent_0"])
    assert obs["agent_1"]["phase"] == COMMUNICATION and infos["agent_1"]["phase"] == COMMUNICATION
    assert obs["agent_1"]["step"] == 0 and obs["agent_1"]["pulled"] == 0
    assert rewards == dict.fromkeys(env.possible_agents, 0.0)
    assert infos["agent_2"]["cumulative_regret"] == 0.0
    obs, _, _, truncs, _ = env.step(_actions(env, pull=True))
    assert obs["agent_1"]["step"] == 1 and obs["agent_1"]["phase"] == PULL
    assert not any(truncs.values())
    obs, _, _, truncs, _ = env.step(_actions(env))  # no pull key: pull
    assert all(truncs.values()) and env.agents == []


def test_parallel_view_agents_must_agree_on_pull():
    env = fedbandit_env.make(ENV, num_agents=3, num_arms=3, horizon=2, channels=SERVER)
    env.reset(seed=0)
    actions = _actions(env, pull=0)
    actions["agent_2"]["pull"] = 1
    with pytest.raises(ActionError, match="agent_2: pull: expected 0 like agent_0"):
        env.step(actions)
    actions = _actions(env, pull=0)
    del actions["agent_1"]["pull"]
    with pytest.raises(ActionError, match="agent_1: pull: missing"):
        env.step(actions)
    actions = _actions(env, pull=0)
    actions["agent_0"]["pull"] = 3
    with pytest.raises(ActionError, match=r"agent_0: pull: expected 0 or 1"):
        env.step(actions)


def test_linear_decision_set_stays_during_a_communication_step():
    venv = fedbandit_env.make_vec(
        "FedBandit/LinearContextual-v0", num_runs=2, num_agents=2, num_arms=3, horizon=5
    )
    obs, _ = venv.reset(seed=0)
    before = obs.context.copy()
    arms = np.zeros((2, 2), dtype=np.int64)
    obs, *_ = venv.step(arms, pull=np.array([False, True]))
    assert np.array_equal(obs.context[0], before[0])
    assert not np.array_equal(obs.context[1], before[1])


@pytest.mark.parametrize("env_id", [ENV, "FedBandit/LinearContextual-v0"])
def test_the_kth_pull_sees_the_same_draws_whatever_the_communication_steps(env_id):
    """A communication step consumes nothing from the rewards streams: the rewards, regret and
    decision sets of each pull equal those of a run that never communicates."""
    kw = {"num_agents": 3, "num_arms": 3, "horizon": 40}
    if env_id == ENV:
        kw["channels"] = SERVER
    arms = np.random.default_rng(0).integers(0, 3, size=(40, 2, 3))
    pauses = np.random.default_rng(1).random((200, 2)) < 0.4

    def play(pausing):
        venv = fedbandit_env.make_vec(env_id, num_runs=2, **kw)
        obs, _ = venv.reset(seed=[5, 6])
        pulls = [[], []]
        k = np.zeros(2, dtype=int)
        step = 0
        while not venv.engine.truncated:
            pull = ~pauses[step] if pausing else np.ones(2, dtype=bool)
            a = arms[np.minimum(k, 39), np.arange(2)]
            obs, rewards, _, _, info = venv.step(a, pull=pull)
            for b in range(2):
                if obs.phase[b] == PULL and k[b] < 40:
                    context = None if obs.context is None else obs.context[b].copy()
                    pulls[b].append((rewards[b].copy(), info.instant_regret[b].copy(), context))
            k += obs.phase == PULL
            step += 1
        return pulls, step

    base, base_steps = play(False)
    paused, steps = play(True)
    assert steps > base_steps
    for b in range(2):
        assert len(base[b]) == len(paused[b]) == 40
        for x, y in zip(base[b], paused[b], strict=True):
            assert np.array_equal(x[0], y[0]) and np.array_equal(x[1], y[1])
            assert (x[2] is None) or np.array_equal(x[2], y[2])


def test_buffered_stream_per_run_positions_match_a_run_alone():
    from fedbandit_env.seeding import BatchedRNG

    batch = BatchedRNG.for_runs([3, 4], "rewards").buffered("normal", (2,))
    alone = [BatchedRNG.for_runs([s], "rewards").buffered("normal", (2,)) for s in (3, 4)]
    rng = np.random.default_rng(0)
    seen = [[], []]
    for step in range(3000):  # several chunks, uneven consumption
        advance = None if step < 5 else rng.random(2) < 0.6
        out = batch.next(advance)
        for b in range(2):
            if advance is None or advance[b]:
                seen[b].append(out[b].copy())
    for b in range(2):
        expected = [alone[b].next()[0].copy() for _ in range(len(seen[b]))]
        assert np.array_equal(np.array(seen[b]), np.array(expected))
