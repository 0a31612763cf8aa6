"""The compiled rollout's shape (docs/jax.md, "Rollout" and "Compiling once"): every loop with a
trip count known when it compiles (chunks behind a batch-level cond for a learner that takes
communication-only steps), one compile per program key, compile time reported apart, and the persistent cache."""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("jax")

import jax.numpy as jnp  # noqa: E402

import fedbandit_env.jax as fj  # noqa: E402
from fedbandit_env.config import make_config  # noqa: E402
from fedbandit_env.jax.rollout import (  # noqa: E402
    CHUNK,
    compiled_program,
    max_engine_steps,
    run_keys,
    takes_communication_steps,
)
from fedbandit_env.jax.types import Action  # noqa: E402

KW = {"num_agents": 4, "num_arms": 3, "horizon": 90, "topology": "ring"}


def _env(agent: str, **kw):
    learner = fj.make_jax_agent(agent)
    config = make_config(**{**KW, **kw})
    channels = learner.channel_spec(config)
    return fj.make("FedBandit/Homogeneous-v0", channels=channels, **{**KW, **kw}), learner


def _whiles(compiled) -> list[str | None]:
    """The known trip count of every ``while`` in the optimized HLO (None: unknown)."""
    counts = []
    for line in compiled.as_text().splitlines():
        if re.search(r"= .*\bwhile\(", line):
            found = re.search(r'known_trip_count":\{"n":"(\d+)"', line)
            counts.append(found.group(1) if found else None)
    return counts


def test_a_learner_that_only_pulls_runs_loops_of_known_trip_count():
    env, learner = _env("ucb1_shared")
    compiled, *_ = compiled_program(env, learner, np.array([10, 90]), None, (run_keys([0, 1]),))
    trips = _whiles(compiled)
    assert None not in trips and "90" in trips  # the horizon's steps, one fori_loop


def test_a_learner_with_communication_steps_runs_chunks_of_known_trip_count():
    env, learner = _env("gosine")
    params = learner.make_params(fj.facts_of(env))
    assert takes_communication_steps(env, learner, params)
    plain, ucb1 = _env("ucb1")
    assert not takes_communication_steps(plain, ucb1, ucb1.make_params(fj.facts_of(plain)))
    compiled, *_ = compiled_program(env, learner, np.array([10, 90]), None, (run_keys([0, 1]),))
    trips = _whiles(compiled)
    assert None not in trips and str(CHUNK) in trips  # chunks of CHUNK steps
    # the most steps a run can take: 90 pulls, each after at most 64 communication-only steps
    assert max_engine_steps(env) == 90 * 65
    chunks = -(-90 * 65 // CHUNK)  # 92 chunks: groups of 10 chunks, 10 groups
    group = math.isqrt(chunks - 1) + 1
    assert str(group) in trips and str(-(-chunks // group)) in trips
    result = fj.rollout(env, learner, [0, 1], checkpoints=[10, 90])
    assert (result.engine_steps > 90).all()  # the communication-only steps were taken


class _Sender:
    """Every agent pulls arm 0 and sends (1, t) on channel ``c`` every step."""

    def make_params(self, facts):
        return facts.num_agents

    def init(self, key, params):
        return jnp.zeros((), jnp.float32)

    def act(self, key, state, obs, params):
        payload = jnp.stack([jnp.ones(params), jnp.full(params, state)], axis=1)
        send = jnp.ones(params, bool)
        return Action(jnp.zeros(params, jnp.int32), {"c": (send, payload)}), state + 1.0


@pytest.mark.parametrize(
    "agent, env_id, kw",
    [
        # Weiszfeld's geometric median, a loop of at most 100 steps in every step
        (None, "FedBandit/Homogeneous-v0", {"channels": {"c": {"kind": "neighbors", "dim": 2,
                                                              "reduce": "geometric_median"}}}),
        # the adversary's local_f roles, drawn again until they fit (at most 1,000 draws)
        ("ucb1", "FedBandit/Homogeneous-v0",
         {"adversary": {"num_byzantine": 1, "placement": "local_f", "local_f": 1}}),
        # the gossip paper's means, drawn again until they fit (at most 10,000 draws)
        ("ucb1", "FedBandit/Heterogeneous-v0", {"instance": "gossip"}),
    ],
)  # fmt: skip
def test_every_loop_of_a_rollout_program_has_a_known_trip_count(agent, env_id, kw):
    learner = _Sender() if agent is None else fj.make_jax_agent(agent)
    env = fj.make(env_id, **{**KW, "topology": "complete", **kw})
    compiled, *_ = compiled_program(env, learner, np.array([10, 90]), None, (run_keys([0, 1]),))
    assert None not in _whiles(compiled)
    text = compiled.as_text()
    assert "while" in text  # the loop is there, with its trip count known


def test_a_second_rollout_of_the_same_shape_compiles_nothing():
    """Other environment and learner objects of the same settings, other seeds: the same
    program, ``compile_time`` 0; another setting compiles its own."""
    env, learner = _env("ucb1", horizon=70)
    first = fj.rollout(env, learner, [0, 1, 2], checkpoints=[35, 70])
    env2, learner2 = _env("ucb1", horizon=70)
    again = fj.rollout(env2, learner2, [5, 6, 7], checkpoints=[35, 70])
    assert first.compile_time > 0 and again.compile_time == 0.0
    assert again.run_time == again.wall_time
    same = fj.rollout(env2, learner2, [0, 1, 2], checkpoints=[35, 70])
    np.testing.assert_array_equal(same.regret_by_agent, first.regret_by_agent)
    swept = fj.rollout(env2, fj.make_jax_agent("ucb1", alpha=1.0), [0, 1, 2], checkpoints=[35, 70])
    assert swept.compile_time == 0.0  # another float setting: a traced argument, same program
    assert not np.array_equal(swept.regret_by_agent, first.regret_by_agent)
    other = fj.rollout(env2, learner2, [0, 1, 2], checkpoints=[30, 70])
    assert other.compile_time > 0  # other checkpoints: another program


@pytest.mark.slow
def test_the_curve_at_a_checkpoint_does_not_depend_on_the_other_checkpoints():
    """A checkpoint's regret is the run's cumulative regret right after the step whose pull
    reached it: every grid that holds it gives the same value, for a learner that pulls every
    step and for one with communication-only steps."""
    for agent in ("ucb1_shared", "gosine"):
        env, learner = _env(agent, horizon=60)
        every = fj.rollout(env, learner, [3, 4], checkpoints=np.arange(1, 61))
        some = fj.rollout(env, learner, [3, 4], checkpoints=[1, 7, 33, 60])
        np.testing.assert_array_equal(
            some.regret_by_agent, every.regret_by_agent[:, [0, 6, 32, 59]]
        )
        assert np.all(np.diff(every.regret_by_agent, axis=1) >= 0)


def test_communication_steps_come_on_top_of_the_horizons_pulls():
    env, learner = _env("gosine", horizon=40)
    out = fj.rollout(env, learner, [0])
    assert int(out.engine_steps[0]) > 40  # gosine's recommendation steps come on top


def test_the_persistent_compilation_cache_fills_its_folder(tmp_path):
    code = (
        "import fedbandit_env.jax as fj\n"
        "env = fj.make('FedBandit/Homogeneous-v0', num_agents=2, num_arms=2, horizon=5)\n"
        "out = fj.rollout(env, fj.make_jax_agent('ucb1'), [0])\n"
        "print(out.compile_time > 0)\n"
    )
    env = {**os.environ, "FEDBANDIT_JAX_CACHE": str(tmp_path / "cache"), "JAX_PLATFORMS": "cpu"}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          timeout=300, check=True)  # fmt: skip
    assert done.stdout.strip() == "True"
    assert any((tmp_path / "cache").iterdir())


def test_results_report_compile_time_apart():
    from fedbandit_env.bench.evaluate import evaluate

    res = evaluate("FedBandit/Homogeneous-v0", "ucb1", runs=2, seed=0, backend="jax",
                   env_kwargs={"num_agents": 2, "num_arms": 3, "horizon": 20})  # fmt: skip
    summary = json.loads(json.dumps(res.summary()))
    assert summary["compile_time"] + summary["run_time"] == pytest.approx(summary["wall_time"])


def test_a_store_written_before_compile_times_reads_zero_and_a_writer_adds_the_column(tmp_path):
    import sqlite3

    from fedbandit_env.bench.executors import run_suite
    from fedbandit_env.bench.store import ResultsStore
    from fedbandit_env.bench.suites import Cell, Suite

    path = tmp_path / "old.sqlite"
    store = ResultsStore(path)
    cell = Cell("FedBandit/Homogeneous-v0", "ucb1", 10, 2, {"num_agents": 2, "num_arms": 2},
                backend="jax")  # fmt: skip
    run_suite(Suite("t", (cell,)), store, quiet=True)
    times = [r.compile_time for r in store.rows()]
    assert len(times) == 2 and times[0] == times[1] >= 0  # each run's share
    store.close()
    conn = sqlite3.connect(path)
    conn.execute("ALTER TABLE runs DROP COLUMN compile_time")  # as a store of the release before
    conn.execute("ALTER TABLE runs DROP COLUMN flags")
    conn.commit()
    conn.close()
    reader = ResultsStore(path, create=False)
    assert [r.compile_time for r in reader.rows()] == [0.0, 0.0]
    reader.close()
    writer = ResultsStore(path)
    columns = {r[1] for r in writer._query("PRAGMA table_info(runs)")}
    assert {"flags", "compile_time"} <= columns


@pytest.mark.parametrize("bad", ["", None, 3])
def test_a_bad_cache_folder_is_refused_by_name(bad):
    from fedbandit_env.errors import ConfigError

    with pytest.raises(ConfigError, match=r"FEDBANDIT_JAX_CACHE: expected a folder path, got"):
        fj.enable_compilation_cache(bad)
