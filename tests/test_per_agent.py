"""Per-agent learners and parallel-view policy callables in the bench (fedbandit_env.per_agent):
the observation each instance gets is the parallel view's, every executor and suite runs them,
they are light-cone safe, and bad objects give errors naming the learner and the agent."""

from __future__ import annotations

import numpy as np
import pytest

import fedbandit_env
from fedbandit_env import ActionError, ConfigError, LearnerError, PerAgentLearner
from fedbandit_env.agent_registry import _AGENTS, list_agents, make_agent
from fedbandit_env.bench.cli import main
from fedbandit_env.bench.evaluate import evaluate
from fedbandit_env.bench.executors import run_suite
from fedbandit_env.bench.leaderboard import build, to_markdown
from fedbandit_env.bench.store import ResultsStore
from fedbandit_env.bench.suites import Cell, Suite, get_suite
from fedbandit_env.per_agent import PerAgentTeam, PolicyCallableTeam
from tests import test_light_cone
from tests.helpers import assert_tree_equal
from tests.per_agent_helpers import PerAgentFlood, PlainUCB1, Recorder

HOMO = "FedBandit/Homogeneous-v0"
HETERO = "FedBandit/Heterogeneous-v0"
SMALL = {"num_agents": 3, "num_arms": 3, "topology": "ring"}


def numbers(store: ResultsStore) -> list[tuple]:
    return sorted(r.numbers for r in store.rows())


@pytest.fixture
def registered(monkeypatch):
    monkeypatch.setitem(_AGENTS, "test_plain_ucb1", PlainUCB1)
    return "test_plain_ucb1"


@pytest.mark.parametrize(
    "channels",
    [
        ("neighbors", "gossip", "server"),
        {"f": {"kind": "flood", "ttl": 2, "dim": 2}},
        {"h": {"kind": "hierarchical", "dim": 3}},
    ],
)
def test_each_instance_gets_exactly_the_parallel_views_observation(channels):
    """Record what every instance saw in a batched run and replay its actions through the
    PettingZoo parallel view: the observation dicts are bit-identical, channels included."""
    kwargs = {**SMALL, "horizon": 12, "channels": channels}
    if "h" in channels:
        kwargs.update(num_agents=4, topology="hybrid", topology_kwargs={"sizes": [2, 2]})
    n = kwargs["num_agents"]
    made: list[Recorder] = []

    class Tracked(Recorder):
        def reset(self, agent, facts, rng):
            super().reset(agent, facts, rng)
            made.append(self)

    team = make_agent_from(Tracked)
    venv = fedbandit_env.make_vec(HETERO, num_runs=2, **kwargs)
    obs, _ = venv.reset(seed=5)
    team.reset(venv.facts, venv.agent_rng())
    for _ in range(12):
        action = team.act(obs)
        obs, *_ = venv.step(action.arms, action.messages)
    assert len(made) == 2 * n
    for b in range(2):
        env = fedbandit_env.make(HETERO, **kwargs)
        observations, _ = env.reset(seed=5 + b)
        for step in range(12):
            actions = {}
            for i, agent in enumerate(env.possible_agents):
                learner = team.learners[b][i]
                assert_tree_equal(learner.observations[step], observations[agent])
                actions[agent] = _replay(learner, observations[agent])
            observations, *_ = env.step(actions)


def _replay(learner: Recorder, observation: dict) -> dict:
    """The action ``learner`` took on ``observation`` (its act without recording)."""
    reward = float(observation["last_reward"])
    messages = {
        name: {"send": 1, "payload": np.full(dim, reward + learner.i)}
        for name, dim in learner.dims.items()
    }
    return {"arm": (int(observation["step"]) + learner.i) % learner.m, "messages": messages}


def make_agent_from(cls) -> PerAgentTeam:
    return fedbandit_env.per_agent.as_team_policy(cls, cls.agent_id)


def test_run_b_of_a_batch_equals_the_same_seed_alone():
    batch = evaluate(HOMO, PlainUCB1, runs=3, seed=4, env_kwargs={**SMALL, "horizon": 150})
    alone = evaluate(HOMO, PlainUCB1, runs=1, seed=5, env_kwargs={**SMALL, "horizon": 150})
    assert np.array_equal(batch.regret_by_agent[1], alone.regret_by_agent[0])
    assert batch.agent_id == "test_plain_ucb1"


def test_register_agent_accepts_a_per_agent_class(registered):
    assert registered in list_agents()
    policy = make_agent(registered, alpha=1.0)
    assert isinstance(policy, PerAgentTeam) and policy.prototype.alpha == 1.0
    result = evaluate(HOMO, registered, runs=2, env_kwargs={**SMALL, "horizon": 100})
    assert result.agent_id == registered and result.final_regret_per_agent.shape == (2,)
    with pytest.raises(ConfigError, match="test_plain_ucb1: bad keyword arguments"):
        make_agent(registered, beta=1)
    quick = get_suite("quick").available(lambda _m: None)  # swept like any registered learner
    assert {c.env_id for c in quick if c.agent_id == registered} >= {HETERO, HOMO}


def test_module_class_ids_resolve_without_registration():
    agent = "tests.per_agent_helpers:PlainUCB1"
    assert agent not in list_agents()
    result = evaluate(HOMO, agent, runs=2, env_kwargs={**SMALL, "horizon": 80})
    assert result.agent_id == agent
    assert agent not in list_agents()  # resolving never registers
    with pytest.raises(fedbandit_env.UnknownIdError, match="cannot be imported"):
        make_agent("tests.per_agent_helpers:Nope")


def test_per_agent_learners_and_policy_callables_in_serial_and_joblib(registered):
    cells = tuple(
        Cell(HETERO, agent, 60, 4, SMALL, kwargs, label=agent)
        for agent, kwargs in (
            (registered, {}),  # registered at runtime: the class travels to the worker
            ("tests.per_agent_helpers:PerAgentFlood", {}),  # imported in the worker
            ("tests.per_agent_helpers:greedy", {}),  # a stateful policy object
            ("tests.per_agent_helpers:first_arm", {}),  # a policy function
        )
    )
    suite = Suite("per_agent", cells)
    assert len(suite.available(lambda _m: None)) == 4
    serial, joblib = ResultsStore(":memory:"), ResultsStore(":memory:")
    run_suite(suite, serial, "serial", chunk=4, quiet=True)
    run_suite(suite, joblib, "joblib", n_jobs=2, chunk=1, quiet=True)
    assert numbers(serial) == numbers(joblib) and len(numbers(joblib)) == 16
    table = to_markdown(build(serial.rows(), baseline=registered))
    for cell in cells:
        assert f"| {cell.agent_id} | 4 |" in table


@pytest.mark.slow
def test_per_agent_learners_and_policy_callables_on_ray(tmp_path):
    ray = pytest.importorskip("ray")
    cells = tuple(
        Cell(HETERO, agent, 60, 4, SMALL, {}, label=agent)
        for agent in ("tests.per_agent_helpers:PlainUCB1", "tests.per_agent_helpers:greedy")
    )
    suite = Suite("per_agent_ray", cells)
    serial, on_ray = ResultsStore(":memory:"), ResultsStore(tmp_path / "r.sqlite")
    run_suite(suite, serial, "serial", chunk=4, quiet=True)
    try:
        run_suite(suite, on_ray, "ray", n_jobs=2, chunk=2, quiet=True)
    finally:
        ray.shutdown()
    assert numbers(serial) == numbers(on_ray) and len(numbers(on_ray)) == 8


@pytest.mark.parametrize(
    ("topology", "n", "topo"), [("ring", 9, {}), ("grid", 12, {"rows": 3, "cols": 4})]
)
def test_light_cone_of_a_per_agent_learner(topology, n, topo):
    j = 4
    base_arms, base_msgs, dist = test_light_cone._run(
        topology, n, make_agent_from(PerAgentFlood), **topo
    )
    arms, msgs, _ = test_light_cone._run(
        topology, n, make_agent_from(PerAgentFlood), perturb_agent=j, **topo
    )
    for i in range(n):
        changed = np.nonzero(
            (arms[:, :, i] != base_arms[:, :, i]).any(axis=1)
            | (msgs[:, :, i] != base_msgs[:, :, i]).any(axis=(1, 2))
        )[0]
        assert changed.size > 0, f"agent {i} never saw agent {j}'s change"
        assert changed[0] + 1 > test_light_cone.T_CHANGE + dist[i, j], (i, changed[0] + 1)


class Broken(PerAgentLearner):
    agent_id = "test_broken"

    def __init__(self, mode: str = "ok"):
        self.mode = mode

    def reset(self, agent, facts, rng):
        self.agent = agent
        if self.mode == "reset" and agent == "agent_1":
            raise RuntimeError("boom in reset")

    def act(self, observation):
        if self.agent != "agent_2":
            return 0
        return (
            {
                "list": [0, 1],
                "range": {"arm": 7},
                "float": {"arm": 0.5},
                "raise": None,
                "payload": {"arm": 0, "messages": {"neighbors": {"send": 1, "payload": [1.0]}}},
                "ok": 0,
            }[self.mode]
            if self.mode != "raise"
            else 1 / 0
        )


@pytest.mark.parametrize(
    ("mode", "error", "match"),
    [
        ("list", ActionError, r"test_broken: agent_2: arm: expected an int in \[0, 2\]"),
        ("range", ActionError, r"test_broken: agent_2: arm: expected an int in \[0, 2\], got 7"),
        ("float", ActionError, "test_broken: agent_2: arm: expected an int"),
        ("raise", LearnerError, "test_broken: agent_2: act raised ZeroDivisionError"),
        ("reset", LearnerError, "test_broken: agent_1: reset raised RuntimeError: boom"),
        (
            "payload",
            ActionError,
            r"test_broken: agent_2: messages.neighbors.payload: expected shape \(3,\)",
        ),
    ],
)
def test_bad_per_agent_learners_name_the_learner_and_the_agent(mode, error, match):
    kwargs = {**SMALL, "horizon": 5, "channels": ("neighbors",)}
    with pytest.raises(error, match=match):
        evaluate(HETERO, Broken, runs=2, env_kwargs=kwargs, agent_kwargs={"mode": mode})


def test_bad_policy_callables_name_the_learner_and_the_agent():
    kwargs = {**SMALL, "horizon": 5}

    def no_dict(observations, infos):
        return [0, 0, 0]

    def missing(observations, infos):
        return {"agent_0": 0}

    def out_of_range(observations, infos):
        return {a: 9 for a in observations}

    def raises(observations, infos):
        raise KeyError("oops")

    cases = [
        (no_dict, ActionError, "no_dict: all agents: actions: expected a dict by agent"),
        (missing, ActionError, "missing: agent_1: action: missing"),
        (out_of_range, ActionError, r"out_of_range: agent_0: arm: expected an int in \[0, 2\]"),
        (raises, LearnerError, "raises: all agents: the policy raised KeyError"),
    ]
    for policy, error, match in cases:
        with pytest.raises(error, match=match):
            evaluate(HOMO, policy, runs=1, env_kwargs=kwargs, name=policy.__name__)


def test_a_policy_callable_is_labelled_by_name_or_qualified_name():
    from tests.per_agent_helpers import first_arm

    kwargs = {**SMALL, "horizon": 20}
    assert evaluate(HOMO, first_arm, runs=1, env_kwargs=kwargs).agent_id == (
        "tests.per_agent_helpers:first_arm"
    )
    named = evaluate(HOMO, first_arm, runs=1, env_kwargs=kwargs, name="always arm 0")
    assert named.agent_id == "always arm 0"
    assert "learner always arm 0 v1" in named.results_version
    assert isinstance(make_agent("tests.per_agent_helpers:first_arm"), PolicyCallableTeam)
    with pytest.raises(ConfigError, match="first_arm: bad keyword arguments"):
        make_agent("tests.per_agent_helpers:first_arm", explore=2)


def test_a_stateful_policy_object_gets_one_copy_per_run():
    from tests.per_agent_helpers import greedy

    kwargs = {**SMALL, "horizon": 60}
    batch = evaluate(HOMO, greedy, runs=3, seed=0, env_kwargs=kwargs)
    alone = evaluate(HOMO, greedy, runs=1, seed=2, env_kwargs=kwargs)
    assert np.array_equal(batch.regret_by_agent[2], alone.regret_by_agent[0])


def test_cli_run_accepts_module_class_and_module_function_ids(capsys):
    for agent in ("tests.per_agent_helpers:PlainUCB1", "tests.per_agent_helpers:first_arm"):
        main(
            [
                "run",
                HOMO,
                agent,
                "--runs",
                "2",
                "--horizon",
                "50",
                "--env-kwargs",
                '{"num_agents": 2, "num_arms": 3}',
            ]
        )
        out = capsys.readouterr().out
        assert f'"agent_id": "{agent}"' in out and '"runs": 2' in out


def test_an_object_of_no_learner_shape_is_a_clear_error():
    with pytest.raises(ConfigError, match="agent: got 42; a learner is one of three shapes"):
        evaluate(HOMO, 42, runs=1, env_kwargs={**SMALL, "horizon": 5})


def test_a_per_agent_learner_takes_communication_steps():
    """``pull = 0`` from every agent is a communication-only step of the run (docs/architecture.md,
    "Communication steps"); ``last_pull`` reports each pull once; agents that disagree name the
    agent and the field."""
    from fedbandit_env.bench import evaluate
    from fedbandit_env.seeding import BatchedRNG
    from tests.per_agent_helpers import TalkThenPull

    res = evaluate(HOMO, TalkThenPull, runs=2, seed=0, env_kwargs={**SMALL, "horizon": 20})
    # every pull is preceded by a communication step: two messages per agent per pull
    assert (res.messages.sum(axis=1) == 2 * 20 * SMALL["num_agents"] * 2).all()
    venv = fedbandit_env.make_vec(HOMO, num_runs=1, **{**SMALL, "horizon": 6})
    team = make_agent("tests.per_agent_helpers:TalkThenPull")
    obs, _ = venv.reset(seed=0)
    team.reset(venv.facts, BatchedRNG.for_runs([0], "agents"))
    steps = 0
    while not venv.engine.truncated:
        action = team.act(obs)
        obs, *_ = venv.step(action.arms, action.messages, action.pull)
        steps += 1
    assert steps == 12 and [lr.seen for lr in team.learners[0]] == [5] * SMALL["num_agents"]
    bad = make_agent("tests.per_agent_helpers:TalkThenPull", disagree=True)
    obs, _ = venv.reset(seed=0)
    bad.reset(venv.facts, BatchedRNG.for_runs([0], "agents"))
    with pytest.raises(ActionError, match=r"tests.per_agent_helpers:TalkThenPull: agent_\d: pull"):
        bad.act(obs)
