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


# ------------------------------------------------------------------ the JAX learner of the page
def page_jax_learner():
    """The class defined by the python block after ``<!-- jax-example -->``."""
    pytest.importorskip("jax")
    match = re.search(r"<!-- jax-example -->\n```python\n(.*?)```", PAGE.read_text(), re.S)
    assert match, "docs/writing-agents.md: no python block after <!-- jax-example -->"
    code = match.group(1)
    assert "..." not in code and len(code.strip().splitlines()) <= 50
    namespace: dict = {}
    exec(compile(code, str(PAGE), "exec"), namespace)  # noqa: S102
    return namespace["JaxUCB1"]


@pytest.mark.slow
def test_the_page_jax_learner_learns_and_agrees_with_the_built_in_port():
    """It beats uniform play by half, repeats itself bit for bit, and its mean regret is within
    3 standard errors of the built-in JAX ucb1's on the same seeds (the two break ties with
    different uniforms, so they agree in distribution, not bit for bit)."""
    learner = page_jax_learner()
    env = "FedBandit/Homogeneous-v0"
    mine = evaluate(env, learner, runs=30, seed=0, env_kwargs=KW, backend="jax")
    again = evaluate(env, learner, runs=30, seed=0, env_kwargs=KW, backend="jax")
    port = evaluate(env, "ucb1", runs=30, seed=0, env_kwargs=KW, backend="jax")
    uniform = evaluate(env, "uniform", runs=30, seed=0, env_kwargs=KW, backend="jax")
    a, b = mine.final_regret_per_agent, port.final_regret_per_agent
    assert a.mean() < 0.5 * uniform.final_regret_per_agent.mean()
    assert np.array_equal(again.final_regret_per_agent, a)
    se = np.sqrt(a.var(ddof=1) / a.size + b.var(ddof=1) / b.size)
    assert abs(a.mean() - b.mean()) <= 3 * se, (a.mean(), b.mean(), se)


def test_the_page_jax_learner_refuses_a_bad_alpha_and_the_linear_family():
    learner = page_jax_learner()
    with pytest.raises(ConfigError, match="jax_ucb1: alpha: expected a number > 0, got -1"):
        learner(alpha=-1)
    import fedbandit_env.jax as fj

    env = fj.make("FedBandit/LinearContextual-v0", channels={})
    with pytest.raises(ConfigError, match=r"^jax_ucb1: family: expected"):
        fj.bind(learner(), fj.facts_of(env))
