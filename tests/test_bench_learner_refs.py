"""The numpy references of benchmarks/learner_refs_private.py are recognisably their agents: at a
tiny scale each reference's mean regret is within a factor of 2 of the agent's on the same
instance and, where the agent learns within the horizon, both are well below uniform play."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import fedbandit_env
from fedbandit_env.agent_registry import make_agent

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import learner_refs_private as refs  # noqa: E402
from learner_refs_base import ENV, PerRunStreams, per_run_streams  # noqa: E402

B, N, M, STEPS = 20, 4, 4, 400


def agent_regret(agent_id: str, **kwargs) -> float:
    """Mean cumulative regret per agent of the registered learner over STEPS pulls per agent."""
    policy = make_agent(agent_id, **kwargs)
    kw = {"num_agents": N, "num_arms": M, "horizon": STEPS, "topology": "ring"}
    preview = fedbandit_env.make_vec(ENV, num_runs=1, **kw).config
    venv = fedbandit_env.make_vec(ENV, num_runs=B, channels=policy.channel_spec(preview) or (), **kw)
    obs, _ = venv.reset(seed=0)
    policy.reset(venv.facts, venv.agent_rng())
    while not venv.engine.truncated:
        action = policy.act(obs)
        obs, *_ = venv.step(action.arms, action.messages, action.pull)
    return float(venv.engine.cumulative_regret.mean())


def reference_regret(agent_id: str, **kwargs) -> tuple[float, float, np.ndarray]:
    """Mean regret per agent of the reference, that of uniform play, and its pull counts."""
    if kwargs.pop("per_run", False):
        with per_run_streams():
            return reference_regret(agent_id, **kwargs)
    if kwargs:
        builder = {
            "gossip_fed_ucb": refs.make_gossip_fed_ucb,
            "dp_mw_ucb": refs.make_dp_mw_ucb,
            "dp_dec_ucb": refs.make_dp_dec_ucb,
        }[agent_id]
        r, loop = builder(B, N, M, STEPS, **kwargs)
    else:
        r, loop = refs.BUILDERS[agent_id](B, N, M, STEPS)
    loop(STEPS)
    return float(r.regret.mean()), float(r.gap.mean() * STEPS), r.counts


CASES = [
    # (agent id, epsilon or None for the default, whether both must learn within STEPS)
    ("gossip_fed_ucb", None, False),  # epsilon = 1: the privacy term keeps it exploring
    ("gossip_fed_ucb", 1e4, True),
    ("dp_mw_ucb", None, True),
    ("dp_mw_ucb", 1e3, True),
    ("dp_dec_ucb", None, True),
    ("dp_dec_ucb", 1e3, True),
    ("cdp_mab", None, True),
    ("ddp_mab", None, True),
    ("hdp_mab", None, True),
]


@pytest.mark.parametrize("per_run", [False, True], ids=["one generator", "per-run streams"])
@pytest.mark.parametrize(("agent_id", "epsilon", "learns"), CASES)
def test_reference_regret_matches_agent(
    agent_id: str, epsilon: float | None, learns: bool, per_run: bool
):
    kwargs = {} if epsilon is None else {"epsilon": epsilon}
    ours, uniform, counts = reference_regret(agent_id, per_run=per_run, **kwargs)
    theirs = agent_regret(agent_id, **kwargs)
    assert counts.reshape(B * N, M).sum(axis=1) == pytest.approx(STEPS)  # STEPS pulls per agent
    assert 0.5 * theirs < ours < 2.0 * theirs, (ours, theirs, uniform)
    if learns:
        assert max(ours, theirs) < 0.9 * uniform, (ours, theirs, uniform)


def test_per_run_streams_do_not_depend_on_the_batch():
    """Under the reproducibility contract a run's reference draws are its own: the first runs of
    a larger batch get the numbers they get alone, call after call, for every kind."""
    small, large = PerRunStreams(2), PerRunStreams(5)
    for _ in range(3):
        assert np.array_equal(small.random(2 * 3), large.random(5 * 3)[: 2 * 3])
        assert np.array_equal(small.standard_normal((2, 4)), large.standard_normal((5, 4))[:2])
        assert np.array_equal(small.laplace(0.0, 2.0, 2), large.laplace(0.0, 2.0, 5)[:2])
    runs = np.array([1])
    assert np.array_equal(small.laplace_rows(runs, (3,)), large.laplace_rows(runs, (3,)))
