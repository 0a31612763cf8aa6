"""The batched UCB1 of docs/writing-agents.md, extracted from the Markdown and run as written:
it is complete (about 40 lines, nothing elided), it learns (its regret is far below uniform
play's), it is deterministic, and its hyperparameter error names the learner and the field."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from fedbandit_env.bench.evaluate import evaluate
from fedbandit_env.errors import ConfigError

PAGE = Path(__file__).resolve().parents[1] / "docs" / "writing-agents.md"
KW = {"num_agents": 3, "num_arms": 4, "means": [0.8, 0.7, 0.5, 0.4], "horizon": 600}


def page_learner():
    """The class defined by the python block after ``<!-- batched-example -->``."""
    match = re.search(r"<!-- batched-example -->\n```python\n(.*?)```", PAGE.read_text(), re.S)
    assert match, "docs/writing-agents.md: no python block after <!-- batched-example -->"
    code = match.group(1)
    assert "..." not in code and 30 <= len(code.strip().splitlines()) <= 50
    namespace: dict = {}
    exec(compile(code, str(PAGE), "exec"), namespace)  # noqa: S102
    return namespace["BatchedUCB1"]


def test_the_page_learner_learns_and_beats_uniform_play():
    learner = page_learner()
    mine = evaluate("FedBandit/Homogeneous-v0", learner, runs=20, seed=0, env_kwargs=KW)
    uniform = evaluate("FedBandit/Homogeneous-v0", "uniform", runs=20, seed=0, env_kwargs=KW)
    a, b = mine.final_regret_per_agent, uniform.final_regret_per_agent
    assert a.mean() < 0.5 * b.mean(), (a.mean(), b.mean())
    again = evaluate("FedBandit/Homogeneous-v0", learner, runs=20, seed=0, env_kwargs=KW)
    assert np.array_equal(again.final_regret_per_agent, a)  # same seed, same bits


def test_the_page_learner_refuses_a_bad_alpha():
    learner = page_learner()
    with pytest.raises(ConfigError, match="batched_ucb1: alpha: expected a number > 0, got -1"):
        learner(alpha=-1)
