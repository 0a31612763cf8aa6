"""Other bandit libraries as learners (fedbandit_env.library_learners): ids ``mabwiser:<Policy>``
and ``smpybandits:<Policy>``, kwargs passed through, independent per agent, regret in agreement
with our own ``ucb1`` / ``thompson_beta``, clear errors for a missing extra or a bad policy."""

from __future__ import annotations

import importlib.util
import sys
import types

import numpy as np
import pytest

from fedbandit_env import ConfigError, LearnerError
from fedbandit_env.agent_registry import list_agents, make_agent
from fedbandit_env.bench.evaluate import EvalResult, evaluate
from fedbandit_env.bench.executors import run_suite
from fedbandit_env.bench.store import ResultsStore
from fedbandit_env.bench.suites import Cell, Suite

HOMO = "FedBandit/Homogeneous-v0"
# a fixed homogeneous Bernoulli instance: 2 independent agents, gaps 0.1 and 0.4
BERNOULLI = {"num_agents": 2, "num_arms": 3, "means": [0.8, 0.7, 0.4], "topology": "complete"}
SEEDS = 20
HORIZON = 400


def final_regret(agent: str, **agent_kwargs) -> EvalResult:
    kwargs = {**BERNOULLI, "horizon": HORIZON}
    return evaluate(HOMO, agent, runs=SEEDS, env_kwargs=kwargs, agent_kwargs=agent_kwargs)


def agree(a: np.ndarray, b: np.ndarray) -> bool:
    """Mean final regrets within 3 standard errors of their difference."""
    se = np.sqrt(a.var(ddof=1) / len(a) + b.var(ddof=1) / len(b))
    return abs(a.mean() - b.mean()) <= 3 * se


needs_mabwiser = pytest.mark.skipif(
    importlib.util.find_spec("mabwiser") is None, reason="the mabwiser extra is not installed"
)


@pytest.mark.slow
@needs_mabwiser
def test_mabwiser_ucb1_and_thompson_agree_with_ours():
    ours_ucb = final_regret("ucb1").final_regret_per_agent
    theirs_ucb = final_regret("mabwiser:UCB1", alpha=1.0)
    assert theirs_ucb.agent_id == "mabwiser:UCB1"
    assert "(mabwiser " in theirs_ucb.results_version
    assert agree(ours_ucb, theirs_ucb.final_regret_per_agent)
    ours_ts = final_regret("thompson_beta").final_regret_per_agent
    theirs_ts = final_regret("mabwiser:ThompsonSampling").final_regret_per_agent
    assert agree(ours_ts, theirs_ts)
    # the check has power: uniform play does not agree with UCB1, nor UCB1 with Thompson
    uniform = final_regret("uniform").final_regret_per_agent
    assert not agree(ours_ucb, uniform) and not agree(ours_ts, theirs_ucb.final_regret_per_agent)


@needs_mabwiser
def test_mabwiser_agents_are_independent_and_reproducible():
    kwargs = {**BERNOULLI, "horizon": 60}
    a = evaluate(HOMO, "mabwiser:EpsilonGreedy", runs=3, env_kwargs=kwargs)
    b = evaluate(HOMO, "mabwiser:EpsilonGreedy", runs=1, seed=2, env_kwargs=kwargs)
    assert np.array_equal(a.regret_by_agent[2], b.regret_by_agent[0])
    assert a.messages.sum() == 0
    assert "mabwiser:UCB1" not in list_agents()


@needs_mabwiser
def test_mabwiser_in_suites_and_joblib_workers():
    cells = (Cell(HOMO, "mabwiser:UCB1", 60, 4, BERNOULLI, {"alpha": 1.0}),)
    suite = Suite("libraries", cells)
    assert suite.available(lambda _m: None) == list(cells)
    serial, joblib = ResultsStore(":memory:"), ResultsStore(":memory:")
    run_suite(suite, serial, "serial", chunk=4, quiet=True)
    run_suite(suite, joblib, "joblib", n_jobs=2, chunk=2, quiet=True)
    assert sorted(r.numbers for r in serial.rows()) == sorted(r.numbers for r in joblib.rows())
    assert len(serial.rows()) == 4


@needs_mabwiser
def test_mabwiser_errors_are_clear(monkeypatch):
    with pytest.raises(ConfigError, match=r"mabwiser: policy: expected one of \[.*'UCB1'"):
        make_agent("mabwiser:UCB2")
    with pytest.raises(ConfigError, match="mabwiser:LinUCB: contextual policies"):
        make_agent("mabwiser:LinUCB")
    with pytest.raises(ConfigError, match=r"mabwiser:UCB1: bad keyword arguments \['beta'\]"):
        make_agent("mabwiser:UCB1", beta=1.0)
    with pytest.raises(
        ConfigError, match="^mabwiser:UCB1: agent_0: family: expected 'heterogeneous' or"
    ):
        evaluate("FedBandit/LinearContextual-v0", "mabwiser:UCB1", runs=1)
    with pytest.raises(LearnerError, match="mabwiser:UCB1: agent_0: reset raised ValueError"):
        evaluate(HOMO, "mabwiser:UCB1", runs=1, agent_kwargs={"alpha": -1.0})
    monkeypatch.setitem(sys.modules, "mabwiser.mab", None)  # as if not installed
    with pytest.raises(ConfigError, match=r"needs the mabwiser package.*fedbandit\[mabwiser\]"):
        make_agent("mabwiser:UCB1")


def test_a_missing_smpybandits_names_its_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "SMPyBandits.Policies", None)
    with pytest.raises(ConfigError, match=r"smpybandits:UCB: needs the smpybandits package"):
        make_agent("smpybandits:UCB")


class FakeUCB:
    """The SMPyBandits policy interface, drawing its tie-breaks from numpy's global state."""

    def __init__(self, nbArms, lower=0.0, amplitude=1.0, alpha=4.0):  # noqa: N803
        self.nbArms, self.lower, self.amplitude, self.alpha = nbArms, lower, amplitude, alpha

    def startGame(self):  # noqa: N802
        self.t, self.pulls, self.rewards = 0, np.zeros(self.nbArms), np.zeros(self.nbArms)

    def getReward(self, arm, reward):  # noqa: N802
        self.t += 1
        self.pulls[arm] += 1
        self.rewards[arm] += (reward - self.lower) / self.amplitude

    def choice(self):
        untried = np.flatnonzero(self.pulls == 0)
        if untried.size:
            return int(np.random.choice(untried))  # noqa: NPY002
        index = self.rewards / self.pulls + np.sqrt(self.alpha * np.log(self.t) / self.pulls)
        return int(np.argmax(index))


@pytest.fixture
def fake_smpybandits(monkeypatch):
    package = types.ModuleType("SMPyBandits")
    policies = types.ModuleType("SMPyBandits.Policies")
    policies.UCB = FakeUCB
    package.Policies = policies
    monkeypatch.setitem(sys.modules, "SMPyBandits", package)
    monkeypatch.setitem(sys.modules, "SMPyBandits.Policies", policies)


def test_smpybandits_adapter_wiring_and_global_rng_isolation(fake_smpybandits):
    kwargs = {**BERNOULLI, "horizon": 200}
    np.random.seed(123)  # noqa: NPY002
    before = np.random.get_state()[1].copy()  # noqa: NPY002
    a = evaluate(HOMO, "smpybandits:UCB", runs=3, env_kwargs=kwargs, agent_kwargs={"alpha": 2})
    assert np.array_equal(np.random.get_state()[1], before)  # noqa: NPY002
    np.random.seed(7)  # noqa: NPY002 (the caller's global state changes nothing)
    b = evaluate(
        HOMO, "smpybandits:UCB", runs=1, seed=1, env_kwargs=kwargs, agent_kwargs={"alpha": 2}
    )
    np.random.seed(8)  # noqa: NPY002
    c = evaluate(
        HOMO, "smpybandits:UCB", runs=1, seed=1, env_kwargs=kwargs, agent_kwargs={"alpha": 2}
    )
    assert np.array_equal(b.regret_by_agent, c.regret_by_agent)
    assert np.array_equal(a.regret_by_agent[1], b.regret_by_agent[0])  # run b = seed alone
    assert (
        a.final_regret_per_agent.mean()
        < 0.5 * final_regret("uniform").final_regret_per_agent.mean()
    )
    with pytest.raises(ConfigError, match=r"smpybandits: policy: expected one of \['UCB'\]"):
        make_agent("smpybandits:Nope")
    with pytest.raises(ConfigError, match=r"smpybandits:UCB: bad keyword arguments \['gamma'\]"):
        evaluate(HOMO, "smpybandits:UCB", runs=1, agent_kwargs={"gamma": 1})


@pytest.mark.slow
def test_smpybandits_thompson_agrees_with_ours():
    pytest.importorskip(
        "SMPyBandits.Policies",
        reason="the smpybandits extra is not installed (it needs scipy < 1.14, which cannot "
        "share an environment with the test extra; docs/writing-agents.md)",
    )
    ours = final_regret("thompson_beta").final_regret_per_agent
    theirs = final_regret("smpybandits:Thompson").final_regret_per_agent
    assert agree(ours, theirs)
