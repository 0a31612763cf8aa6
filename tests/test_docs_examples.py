"""The examples of docs/writing-agents.md (a per-agent learner) and docs/rl.md (an SB3 model
through SuperSuit as a policy callable) run as written and land in the bench."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from fedbandit_env.agent_registry import _AGENTS
from fedbandit_env.bench.evaluate import evaluate

DOCS = Path(__file__).resolve().parents[1] / "docs"


def example(page: str, marker: str) -> str:
    """The python block right after ``<!-- marker -->`` on a docs page."""
    text = (DOCS / page).read_text()
    match = re.search(rf"<!-- {marker} -->\n```python\n(.*?)```", text, flags=re.S)
    assert match, f"{page}: no python block after <!-- {marker} -->"
    return match.group(1)


def test_the_per_agent_example_is_short_runs_and_matches_ucb1(monkeypatch):
    code = example("writing-agents.md", "per-agent-example")
    assert len(code.strip().splitlines()) <= 25
    text = (DOCS / "writing-agents.md").read_text()
    assert text.index("per-agent-example") < text.index("## Batched team policies")
    monkeypatch.setitem(_AGENTS, "plain_ucb1", None)  # restored after the test
    namespace: dict = {}
    exec(compile(code, "docs/writing-agents.md", "exec"), namespace)  # noqa: S102
    kwargs = {"num_agents": 2, "num_arms": 3, "means": [0.8, 0.7, 0.4], "horizon": 400}
    plain = evaluate("FedBandit/Homogeneous-v0", "plain_ucb1", runs=20, env_kwargs=kwargs)
    ours = evaluate("FedBandit/Homogeneous-v0", "ucb1", runs=20, env_kwargs=kwargs)
    a, b = plain.final_regret_per_agent, ours.final_regret_per_agent
    se = (a.var(ddof=1) / len(a) + b.var(ddof=1) / len(b)) ** 0.5
    assert abs(a.mean() - b.mean()) <= 3 * se


def test_the_sb3_supersuit_policy_callable_example_runs():
    pytest.importorskip("supersuit")
    pytest.importorskip("stable_baselines3")
    namespace: dict = {}
    exec(compile(example("rl.md", "sb3-policy-callable"), "docs/rl.md", "exec"), namespace)  # noqa: S102
    res = namespace["res"]
    assert res.agent_id == "ppo (supersuit)" and res.final_regret_per_agent.shape == (5,)
    assert "learner ppo (supersuit) v1" in res.results_version


def test_the_batched_example_is_complete_runs_and_matches_ucb1():
    """The batched UCB1 of docs/writing-agents.md runs as written (about 40 lines, no `...`)
    and agrees with the built-in ucb1 (final regret within 3 standard errors)."""
    code = example("writing-agents.md", "batched-example")
    assert "..." not in code and len(code.strip().splitlines()) <= 50
    namespace: dict = {}
    exec(compile(code, "docs/writing-agents.md", "exec"), namespace)  # noqa: S102
    kwargs = {"num_agents": 3, "num_arms": 4, "means": [0.8, 0.7, 0.5, 0.4], "horizon": 500}
    mine = evaluate("FedBandit/Homogeneous-v0", namespace["BatchedUCB1"], runs=40,
                    env_kwargs=kwargs)  # fmt: skip
    ours = evaluate("FedBandit/Homogeneous-v0", "ucb1", runs=40, env_kwargs=kwargs)
    a, b = mine.final_regret_per_agent, ours.final_regret_per_agent
    se = (a.var(ddof=1) / len(a) + b.var(ddof=1) / len(b)) ** 0.5
    assert abs(a.mean() - b.mean()) <= 3 * se
    with pytest.raises(Exception, match="batched_ucb1: alpha: expected a number > 0"):
        namespace["BatchedUCB1"](alpha=-1)


def test_facts_give_the_maximum_degree():
    import fedbandit_env

    venv = fedbandit_env.make_vec("FedBandit/Homogeneous-v0", num_agents=5, topology="star")
    venv.reset(seed=0)
    assert venv.facts.max_degree == 4
