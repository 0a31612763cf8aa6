"""The JAX linear learners do not deadlock XLA:CPU at large batches.

Private ``fed_lin_ucb`` with B = 100 runs of M = 100 agents used to hang inside the compiled
program on a 2-core machine: jaxlib's batched LAPACK kernels (Cholesky factors, triangular
solves) wait on XLA's intra-op thread pool for chunks that no worker is free to run once as many
of them run at once as the pool has threads (fedbandit_env/jax/linear_kernels.py, "Why no
LAPACK"). The rollout runs in a subprocess under a timeout, so that a hang fails the test
instead of hanging pytest. A hang needs as many concurrent kernels as the pool has threads (never
on one core, rarely on many), so a second test checks, deterministically, that the compiled
``act`` of the learners built on those kernels calls no LAPACK kernel at all.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

jax = pytest.importorskip("jax")

import fedbandit_env.jax as fj  # noqa: E402
from fedbandit_env.bench.evaluate import env_kwargs_for  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
LINEAR = "FedBandit/LinearContextual-v0"
TIMEOUT_S = 300
"""Seconds for the whole subprocess, imports and compile included: 9 s on an idle 2-core machine
and about 20 s on a busy one, so a slow CI machine has a wide margin; before the fix the rollout
hung (never returned) in 10 of 15 tries on 2 cores."""

DEFAULT_LEVEL = {**os.environ, "JAX_DISABLE_MOST_OPTIMIZATIONS": "0"}
"""The child compiles at JAX's default level, as users do: the timing above was measured there,
and its run, not its compile, is most of the time (tests/conftest.py turns most optimizations
off for the session)."""

ROLLOUT = """
import numpy as np
import fedbandit_env.jax as fj
from fedbandit_env.bench.evaluate import env_kwargs_for

env_id = "FedBandit/LinearContextual-v0"
learner = fj.make_jax_agent("fed_lin_ucb")  # private by default
kwargs = {"num_agents": 100, "num_arms": 10, "dim": 10, "horizon": 5}
env = fj.make(env_id, **env_kwargs_for(learner, env_id, kwargs))
out = fj.rollout(env, learner, list(range(100)), checkpoints=np.array([5]))
assert out.regret_by_agent.shape == (100, 1, 100), out.regret_by_agent.shape
assert np.isfinite(out.regret_by_agent).all()
print("finished")
"""


@pytest.mark.slow
def test_private_fed_lin_ucb_with_100_runs_of_100_agents_finishes():
    try:
        done = subprocess.run([sys.executable, "-c", ROLLOUT], capture_output=True, text=True,
                              cwd=ROOT, timeout=TIMEOUT_S, env=DEFAULT_LEVEL)  # fmt: skip
    except subprocess.TimeoutExpired:
        pytest.fail(f"the rollout did not finish in {TIMEOUT_S} s: a deadlock in XLA:CPU?")
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split()[-1:] == ["finished"], done.stdout[-1000:]


@pytest.mark.parametrize(
    "agent_id, agent_kwargs, env_kwargs",
    [
        ("fed_lin_ucb", {}, {}),
        ("fed_lin_ucb", {"private": False}, {}),
        ("linucb", {}, {}),
        ("centralized_linucb", {}, {}),
        ("fed_lin_ucb_decentralized", {}, {"topology": "ring"}),
        ("dislinucb", {}, {}),
    ],
    ids=["fed_lin_ucb-private", "fed_lin_ucb-nonprivate", "linucb", "centralized", "decentralized",
         "dislinucb"],  # fmt: skip
)
def test_the_compiled_act_calls_no_lapack_kernel(agent_id, agent_kwargs, env_kwargs):
    """No LAPACK custom call (``lapack_*_ffi`` on CPU) in ``jit(vmap(act))``."""
    learner = fj.make_jax_agent(agent_id, **agent_kwargs)
    kwargs = {"num_agents": 4, "num_arms": 5, "dim": 3, "horizon": 10, **env_kwargs}
    env = fj.make(LINEAR, **env_kwargs_for(learner, LINEAR, kwargs))
    facts = fj.facts_of(env)
    keys = jax.random.split(jax.random.PRNGKey(0), 2)
    obs, _ = jax.jit(jax.vmap(env.reset))(keys)
    init, act = fj.bind(learner, facts)
    states = jax.jit(jax.vmap(init))(keys)
    text = jax.jit(jax.vmap(act)).lower(keys, states, obs).compile().as_text()
    targets = re.findall(r'custom_call_target="(\w+)"', text)
    assert [t for t in targets if "lapack" in t] == []
