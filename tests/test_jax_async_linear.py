"""The JAX ports of Async-LinUCB, FedLinUCB and Sync-LinUCB (agents/jax/async_lin_ucb.py,
agents/jax/fed_lin_ucb_async.py, agents/jax/sync_lin_ucb.py; docs/async-linear.md) against their
numpy learners: mean
regret, messages, floats and staleness within 3 standard errors over 100 runs under a uniform
event clock (two settings of Async-LinUCB share one program: its float settings are traced);
the structural cases exactly (gamma = inf and alpha = inf send nothing and take no communication
step); ``act`` under ``jit`` and ``vmap`` (same key, same
bits); the refusals on JAX. (F5, no push to a client that never acts, is checked on numpy,
tests/test_async_linear.py; the ports' messages agree with numpy's here.)"""

from __future__ import annotations

import math

import numpy as np
import pytest

from tests.jax_tools import agreement

jax = pytest.importorskip("jax")

import fedbandit_env.jax as fj  # noqa: E402
from agents.jax.async_lin_ucb import AsyncLinUCB  # noqa: E402
from agents.jax.fed_lin_ucb_async import FedLinUCBAsync  # noqa: E402
from agents.jax.sync_lin_ucb import SyncLinUCB  # noqa: E402
from fedbandit_env.bench.evaluate import env_kwargs_for  # noqa: E402
from fedbandit_env.errors import ConfigError  # noqa: E402
from tests.test_jax_field_linear import jit_vmap_matches_single  # noqa: E402

LINEAR = "FedBandit/LinearContextual-v0"
BASE = {"num_agents": 6, "num_arms": 5, "dim": 4, "horizon": 100, "clock": "one_random",
        "reward": {"kind": "gaussian", "sigma": 0.3}}  # fmt: skip
RUNS = 100


@pytest.mark.slow
@pytest.mark.parametrize(
    ("agent", "kwargs"),
    [
        ("async_lin_ucb", {"gamma_u": 2.0, "gamma_d": 2.0}),
        ("async_lin_ucb", {"gamma_u": 1.5, "gamma_d": 3.0}),  # traced floats: the same program
        ("async_lin_ucb", {"gamma_u": 2.0, "gamma_d": 2.0, "sync_on_join": True}),
        ("fed_lin_ucb_async", {"alpha": 0.5}),
        ("fed_lin_ucb_async", {"alpha": 0.5, "beta": "theory", "R": 0.3}),
        ("sync_lin_ucb", {"threshold": 0.5}),
        ("sync_lin_ucb", {"threshold": 0.5, "refresh": "on_local_update"}),
    ],
)
def test_the_ports_agree_with_numpy(agent, kwargs):
    ref, out = agreement(LINEAR, agent, BASE, kwargs, runs=RUNS, exact_messages=False)
    assert ref.messages.sum() > 0 and out.messages.sum() > 0
    a, b = ref.staleness, out_staleness(agent, kwargs, out)  # events since the last download
    se = math.sqrt(a.var(ddof=1) / RUNS + b.var(ddof=1) / RUNS)
    assert abs(a.mean() - b.mean()) <= 3 * se, ("staleness", a.mean(), b.mean(), se)
    steps = out.engine_steps - BASE["horizon"]  # the communication steps of the events
    assert (steps > 0).all() and (steps <= 2 * out.messages.sum(axis=1)).all()


def out_staleness(agent, kwargs, out):
    """The JAX rollout's staleness per run, read from its final learner states."""
    return fj.make_jax_agent(agent, **kwargs).staleness(out.learner_state)


def env_of(learner, **kw):
    return fj.make(LINEAR, **env_kwargs_for(learner, LINEAR, {**BASE, **kw}))


@pytest.mark.slow
def test_infinite_thresholds_never_talk_and_take_no_communication_step():
    learner = AsyncLinUCB(gamma_u=math.inf, gamma_d=math.inf)  # FedLinUCB's alpha=inf: numpy F6
    out = fj.rollout(env_of(learner), learner, list(range(8)))
    assert out.messages.sum() == 0 and (out.engine_steps == BASE["horizon"]).all()
    np.testing.assert_array_equal(learner.staleness(out.learner_state), (BASE["horizon"] - 1) / 2)


@pytest.mark.slow
def test_act_under_jit_and_vmap_same_key_same_bits():
    """Async-LinUCB with the authors' stale decision statistics (the FedLinUCB port shares its
    decision and staleness kernels)."""
    learner = AsyncLinUCB(gamma_u=1.2, gamma_d=1.2, refresh="on_local_update")
    jit_vmap_matches_single(env_of(learner, horizon=20), learner, steps=8)
    sync = SyncLinUCB(threshold=0.05)  # syncs within the first steps
    jit_vmap_matches_single(env_of(sync, horizon=20), sync, steps=8)


def test_sync_is_refused_on_jax():
    env = fj.make(LINEAR, channels=AsyncLinUCB().channel_spec(fj.make(LINEAR).config))
    for learner in (AsyncLinUCB(), FedLinUCBAsync(), SyncLinUCB()):
        with pytest.raises(ConfigError, match=rf"{learner.agent_id}: clock: expected an event"):
            fj.bind(learner, fj.facts_of(env))
