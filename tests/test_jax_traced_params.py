"""A learner's float params as traced arguments of its compiled rollout (docs/jax.md, "Compiling
once"): which fields are traced, a sweep over them is one compile with the bits of a fresh
compile, and a learner that reads a float in Python is compiled with its params as constants."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import pytest

pytest.importorskip("jax")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

import fedbandit_env.jax as fj  # noqa: E402
from fedbandit_env.jax.rollout import _PROGRAMS, clear_programs  # noqa: E402
from fedbandit_env.jax.traced_params import (  # noqa: E402
    Slot,
    Unread,
    fill,
    learner_template,
    split,
    traceable,
)
from fedbandit_env.jax.types import Action  # noqa: E402
from fedbandit_env.xp import is_inf, is_zero, log_of, sqrt_of  # noqa: E402

KW = {"num_agents": 3, "num_arms": 4, "horizon": 60, "topology": "ring"}


@dataclass(frozen=True)
class Inner:
    scale: float
    levels: int


@dataclass(frozen=True)
class Outer:
    epsilon: float
    delta: float
    zero: float
    infinite: float
    flag: bool
    name: str
    bounds: tuple[float, float]
    inner: Inner
    table: np.ndarray

    def __post_init__(self) -> None:  # a check that a tracer would fail
        if not self.epsilon > 0:
            raise ValueError("epsilon")


def _outer() -> Outer:
    return Outer(0.5, 1e-3, 0.0, math.inf, True, "x", (0.0, 1.0), Inner(2.0, 7), np.ones(3))


def test_the_traced_fields_are_the_finite_nonzero_floats_at_any_depth():
    params = _outer()
    template, floats = split(params)
    assert floats == (0.5, 1e-3, 2.0)
    assert (template.epsilon, template.delta, template.inner.scale) == (Slot(0), Slot(1), Slot(2))
    # constants: 0 and inf (branches), bools, strings, tuples, ints, arrays
    assert template.zero == 0.0 and template.infinite == math.inf and template.flag is True
    assert template.bounds == (0.0, 1.0) and template.inner.levels == 7
    assert template.table is params.table
    assert params.epsilon == 0.5 and params.inner.scale == 2.0  # the params are unchanged
    back = fill(template, (0.25, 2e-3, 3.0))  # no __init__ or __post_init__ runs
    assert (back.epsilon, back.delta, back.inner.scale, back.inner.levels) == (0.25, 2e-3, 3.0, 7)
    assert [traceable(x) for x in (1.5, np.float32(2.0), 1, True, 0.0, -0.0, math.nan, 1e-300,
                                   1e300, -3.0)] == [True, True, False, False, False, False,
                                                     False, False, False, True]  # fmt: skip


def test_the_branch_helpers_read_numbers_and_never_a_tracer():
    assert is_inf(math.inf) and is_inf(np.float64(-np.inf)) and not is_inf(2.0)
    assert is_zero(0.0) and is_zero(0) and not is_zero(1e-9)
    assert log_of(np, 2.0) == math.log(2.0) and sqrt_of(np, 2.0) == math.sqrt(2.0)

    def traced(x):
        assert not is_inf(x) and not is_zero(x)
        return log_of(jnp, x) + sqrt_of(jnp, x)

    np.testing.assert_allclose(jax.jit(traced)(jnp.float32(4.0)), math.log(4.0) + 2.0,
                               rtol=1e-6)  # fmt: skip


def test_an_unread_learner_setting_refuses_every_use():
    unread = Unread("config.c")
    for use in (float, bool, lambda u: u + 1, lambda u: 2.0 * u, lambda u: u > 0,
                lambda u: u == 1.0, np.asarray, math.log, jnp.asarray):  # fmt: skip
        with pytest.raises(TypeError):
            use(unread)


class _State(NamedTuple):
    sums: jnp.ndarray


class _Greedy:
    """A test learner: arm argmax(sums + c * noise); ``c`` from its params (``read="params"``),
    from its own attribute inside ``act`` (``"self"``), or tested in Python (``"branch"``)."""

    def __init__(self, c: float, read: str = "params") -> None:
        self.c, self.read = c, read

    def make_params(self, facts: Any) -> Inner:
        return Inner(scale=self.c, levels=facts.num_arms)

    def init(self, key: jax.Array, params: Inner) -> _State:
        return _State(jnp.zeros((KW["num_agents"], params.levels), jnp.float32))

    def act(self, key, state, obs, params):
        c = self.c if self.read == "self" else params.scale
        if self.read == "branch" and params.scale > 1.0:
            c = 2.0 * c
        noise = jax.random.uniform(key, state.sums.shape)
        arms = jnp.argmax(state.sums + c * noise, axis=1).astype(jnp.int32)
        sums = state.sums.at[jnp.arange(KW["num_agents"]), jnp.maximum(obs.last_arm, 0)].add(
            jnp.where(obs.last_arm >= 0, obs.last_reward, 0.0)
        )
        return Action(arms, {}), _State(sums)


def _run(learner, seeds=(0, 1)):
    env = fj.make("FedBandit/Homogeneous-v0", channels=(), **KW)
    return fj.rollout(env, learner, list(seeds), checkpoints=[30, 60])


def test_a_sweep_over_a_float_param_is_one_compile_with_the_bits_of_a_fresh_compile():
    clear_programs()
    first = _run(_Greedy(0.5))
    second = _run(_Greedy(3.0))
    assert first.compile_time > 0 and second.compile_time == 0.0
    assert len(_PROGRAMS) == 1
    assert not np.array_equal(first.regret_by_agent, second.regret_by_agent)
    clear_programs()
    fresh = _run(_Greedy(3.0))  # its own compile: the same program, the same bits
    assert fresh.compile_time > 0
    np.testing.assert_array_equal(fresh.regret_by_agent, second.regret_by_agent)


@pytest.mark.parametrize("read", ["self", "branch"])
def test_a_learner_that_reads_a_float_in_python_compiles_its_params_in(read):
    """Reading ``self.c`` in ``act`` (not the params) or branching on a param in Python cannot
    share a program across values: each value compiles its own, with its own numbers."""
    clear_programs()
    runs = {c: _run(_Greedy(c, read)) for c in (0.5, 3.0)}
    assert all(r.compile_time > 0 for r in runs.values())
    for c, run in runs.items():  # the same numbers as a program of that value alone
        clear_programs()
        np.testing.assert_array_equal(_run(_Greedy(c, read)).regret_by_agent, run.regret_by_agent)
    stand_in, key = learner_template(_Greedy(0.5, read))
    assert isinstance(stand_in.c, Unread) and key["c"] == "float" and key["read"] == read


@pytest.mark.slow
def test_what_tracing_learned_about_a_learner_saves_the_next_settings_traces(monkeypatch):
    """A learner whose traced params failed is not traced that way again for another value
    (on another environment too), and one known to take communication-only steps is traced
    for its chunked program directly: the traces are counted."""
    import importlib

    rollout_module = importlib.import_module("fedbandit_env.jax.rollout")
    traces: list[bool] = []
    real = rollout_module.rollout_program

    def counted(*args, **kwargs):
        traces.append(args[6])  # pulls_only
        return real(*args, **kwargs)

    monkeypatch.setattr(rollout_module, "rollout_program", counted)
    clear_programs()
    _run(_Greedy(0.5, "branch"))
    assert len(traces) == 2  # traced params (failed), then constants
    _run(_Greedy(3.0, "branch"), seeds=(0, 1, 2))  # another value, another batch shape
    assert len(traces) == 3  # constants only
    traces.clear()
    env, learner = _gosine_env()
    fj.rollout(env, learner, [0], checkpoints=[20])
    assert traces[-1] is False and traces.count(True) >= 1  # found out: it communicates
    traces.clear()
    fj.rollout(env, learner, [0, 1], checkpoints=[20])
    assert traces == [False]  # straight to the chunked program


def _gosine_env():
    from fedbandit_env.bench.evaluate import env_kwargs_for

    learner = fj.make_jax_agent("gosine")
    env_id = "FedBandit/Homogeneous-v0"
    return fj.make(env_id, **env_kwargs_for(learner, env_id, {**KW, "horizon": 20})), learner


def test_a_ported_learner_sweeps_epsilon_in_one_compile():
    """``ldp_ucb`` (Laplace scale from epsilon) over epsilon in {0.5, 1, 2}: one compile."""
    from fedbandit_env.bench.evaluate import env_kwargs_for

    clear_programs()
    env_id = "FedBandit/Homogeneous-v0"
    kwargs = env_kwargs_for(fj.make_jax_agent("ldp_ucb"), env_id, {**KW, "horizon": 40})
    env = fj.make(env_id, **kwargs)
    times = [fj.rollout(env, fj.make_jax_agent("ldp_ucb", epsilon=eps), [0, 1]).compile_time
             for eps in (0.5, 1.0, 2.0)]  # fmt: skip
    assert times[0] > 0 and times[1:] == [0.0, 0.0]



@dataclass(frozen=True)
class _Counted:
    TRACED_INTS = ("f",)
    REPORT_ONLY = ("notes",)

    f: int
    g: int
    flag: bool
    notes: tuple[str, ...]


def test_an_int_field_named_in_traced_ints_is_traced_and_report_only_fields_are_left_out():
    params = _Counted(2, 3, True, ("f = 2 < 3 Byzantine",))
    template, values = split(params)
    assert values == (2,) and type(values[0]) is int
    assert template.f == Slot(0) and template.g == 3 and template.flag is True
    assert isinstance(template.notes, Unread)  # never in the program, nor in its key
    import pickle

    other, _ = split(_Counted(5, 3, True, ()))
    assert pickle.dumps(other) == pickle.dumps(template)  # the same program key
    assert fj.traced_params.values_of(values)[0].dtype == np.int32
    assert split(_Counted(True, 3, True, ()))[1] == ()  # a bool is not an int here


@pytest.mark.slow
def test_a_sweep_over_byzres_f_is_one_compile_with_the_bits_of_a_fresh_compile():
    """ByzRes-UCB's f (the values trimmed at each end) is a traced int32: f in {0, 1, 2, 3}
    under a 2-Byzantine adversary compiles one program, each f's numbers those of a program
    compiled for it alone, and the row's notes are each f's own."""
    from fedbandit_env.bench.backends import jax_learner
    from fedbandit_env.bench.evaluate import _build_jax

    kw = {"num_agents": 7, "num_arms": 3, "horizon": 50, "topology": "complete",
          "adversary": {"num_byzantine": 2, "attack": "flipped_means"}}  # fmt: skip

    def run(f: int):
        learner, label = jax_learner("byzres_ucb", {"f": f})
        _, env = _build_jax(fj, learner, "FedBandit/Homogeneous-v0", kw, label)
        return fj.rollout(env, learner, [0, 1])

    clear_programs()
    runs = {f: run(f) for f in (0, 1, 2, 3)}
    assert runs[0].compile_time > 0 and all(runs[f].compile_time == 0.0 for f in (1, 2, 3))
    assert runs[1].params.notes == ("f = 1 < 2 Byzantine",) and runs[2].params.notes == ()
    assert not np.array_equal(runs[0].regret_by_agent, runs[2].regret_by_agent)
    clear_programs()
    alone = run(2)
    assert alone.compile_time > 0
    np.testing.assert_array_equal(alone.regret_by_agent, runs[2].regret_by_agent)


SHARED = {"byzres_ucb", "centralized_linucb", "centralized_ucb1", "coop_ucb2", "dducb",
          "discounted_ucb", "dp_dec_ucb", "dp_mw_ucb", "fed_lin_ucb", "fed_lin_ucb_decentralized",
          "dislinucb", "epsilon_greedy", "sw_ucb",
          "epsilon_greedy_shared", "fed1_ucb", "fed2_ucb", "gosine",
          "gossip_fed_ucb", "gossip_ucb", "kl_ucb", "kl_ucb_shared", "ldp_ucb", "robust_gosine",
          "thompson_beta", "thompson_beta_shared", "thompson_gaussian",
          "thompson_gaussian_shared", "linucb", "ucb1", "ucb1_shared", "async_lin_ucb",
          "fed_lin_ucb_async", "sync_lin_ucb"}  # fmt: skip
"""The ports whose float settings are traced arguments (docs/jax.md, "Compiling once"); the
others compile per setting."""


def test_the_ports_that_share_a_program_across_float_settings():
    """Traced once each (nothing compiles): the ports of :data:`SHARED` take their float params
    as arguments; every other port is compiled with its params as constants."""
    from fedbandit_env.bench.evaluate import env_kwargs_for
    from fedbandit_env.errors import ConfigError

    shared, constants = set(), set()
    federations = [("FedBandit/Homogeneous-v0", {**KW, "horizon": 1000}),
                   ("FedBandit/LinearContextual-v0", {**KW, "horizon": 50, "dim": 2}),
                   ("FedBandit/LinearContextual-v0", {**KW, "horizon": 50, "dim": 2,
                                                      "clock": "one_random"})]  # fmt: skip
    from fedbandit_env.jax.learner import shipped_jax_agents

    ports = shipped_jax_agents()  # not the learners other tests register in this process
    for agent in ports:
        kwargs = {"clients": "environment"} if agent == "fed_mom_ucb" else {}
        learner = fj.make_jax_agent(agent, **kwargs)
        for env_id, env_kwargs in federations:
            try:
                env = fj.make(env_id, **env_kwargs_for(learner, env_id, env_kwargs))
                learner.make_params(fj.facts_of(env))
            except ConfigError:  # the other family
                continue
            (shared if fj.params_traced(env, learner) else constants).add(agent)
            break
    assert shared | constants == set(ports)  # every port was traced
    assert shared == SHARED, (sorted(shared - SHARED), sorted(SHARED - shared))


def test_a_plain_object_of_the_project_that_params_hold_is_walked():
    """A counter object (not a dataclass) holding its ``TreeParams``: its epsilon and
    sensitivity are traced like a dataclass field's; its ints stay constants."""
    from fedbandit_env.jax.tree_counter import TreeCounter

    counter = TreeCounter((2, 3), 16, 0.5)
    template, floats = split(Inner(scale=counter, levels=3))
    assert floats == (0.5, 1.0)  # epsilon, sensitivity
    assert template.scale.params.epsilon == Slot(0) and template.scale.params.horizon == 16
    assert counter.params.epsilon == 0.5  # the object itself is unchanged
    assert fill(template, (0.25, 2.0)).scale.params.epsilon == 0.25
