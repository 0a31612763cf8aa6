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
