"""The bench on the JAX backend (docs/bench.md, "Backends"): ``evaluate(backend="jax")``, the
store, the leaderboard, the command line, the reference file and a user's own JAX learner.
Rows of the two backends are never pooled: their cells' hashes and results versions differ."""

from __future__ import annotations

import json
import sqlite3
import sys

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402

import fedbandit_env.jax as fj  # noqa: E402
from fedbandit_env.bench import html as page  # noqa: E402
from fedbandit_env.bench.cli import main  # noqa: E402
from fedbandit_env.bench.evaluate import evaluate  # noqa: E402
from fedbandit_env.bench.executors import EvalTask, run_suite  # noqa: E402
from fedbandit_env.bench.leaderboard import build, current_rows, to_latex, to_markdown  # noqa: E402
from fedbandit_env.bench.migrate import SCHEMA  # noqa: E402
from fedbandit_env.bench.reference import (  # noqa: E402
    JAX_SEED_OFFSET,
    ReferenceError,
    cell_record,
    check_reference,
    current_reference_rows,
    dumps,
    load_reference,
)
from fedbandit_env.bench.store import ResultsStore  # noqa: E402
from fedbandit_env.bench.suites import SUITES, Cell, Suite  # noqa: E402
from fedbandit_env.bench.versions import (  # noqa: E402
    JAX_BACKEND_VERSION,
    backend_suffix,
    registered_results_version,
)
from fedbandit_env.errors import ConfigError, StoreError  # noqa: E402
from fedbandit_env.jax.types import PULL, Action  # noqa: E402
from fedbandit_env.policy import MULTI_ARMED, require_family  # noqa: E402

ENV = "FedBandit/Homogeneous-v0"
SMALL = {"num_agents": 3, "num_arms": 4, "topology": "ring"}
HORIZON = 60
RUNS = 3


class GreedyJax:
    """A user's own JAX learner: each agent tries every arm once, then pulls the arm of
    highest empirical mean (first among ties). Defined here, named by the tests as an object,
    a registered id and ``tests.test_jax_bench:GreedyJax``."""

    agent_id = "greedy_jax"
    version = 2
    privacy_epsilon = None

    def make_params(self, facts):
        require_family(self.agent_id, facts, MULTI_ARMED)
        return (facts.num_agents, facts.num_arms)

    def init(self, key, shape):
        return jnp.zeros(shape, jnp.int32), jnp.zeros(shape, jnp.float32)

    def act(self, key, state, obs, shape):
        counts, sums = state
        pulled = (obs.phase == PULL) & (obs.last_arm >= 0)
        hit = (obs.last_arm[:, None] == jnp.arange(counts.shape[1])) & pulled[:, None]
        counts = counts + hit.astype(jnp.int32)
        sums = sums + jnp.where(hit, obs.last_reward[:, None], jnp.float32(0.0))
        mean = sums / jnp.maximum(counts, 1).astype(jnp.float32)
        index = jnp.where(counts > 0, mean, jnp.float32(jnp.inf))
        return Action(jnp.argmax(index, axis=1).astype(jnp.int32), {}), (counts, sums)


def _cell(agent_id: str = "ucb1", backend: str = "numpy", seed: int = 0, runs: int = RUNS):
    return Cell(ENV, agent_id, HORIZON, runs, dict(SMALL), {}, seed, backend=backend)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """ucb1 on numpy and on JAX, same cell otherwise and same seeds 0..2, and the JAX cell on
    its own seeds from JAX_SEED_OFFSET too."""
    path = tmp_path_factory.mktemp("jax_bench") / "runs.sqlite"
    results = ResultsStore(path)
    cells = (_cell(), _cell(backend="jax"), _cell(backend="jax", seed=JAX_SEED_OFFSET, runs=2))
    assert run_suite(Suite("jaxbench", cells), results, quiet=True) == 2 * RUNS + 2
    return path


def test_evaluate_on_jax_fills_the_result_like_numpy():
    kwargs = {**SMALL, "horizon": HORIZON}
    res = evaluate(ENV, "ucb1", runs=RUNS, seed=5, env_kwargs=kwargs, backend="jax")
    ref = evaluate(ENV, "ucb1", runs=RUNS, seed=5, env_kwargs=kwargs)
    assert res.backend == "jax" and ref.backend == "numpy"
    assert res.seeds == ref.seeds == [5, 6, 7] and np.array_equal(res.steps, ref.steps)
    assert res.regret_by_agent.shape == ref.regret_by_agent.shape == (RUNS, HORIZON, 3)
    assert res.regret_per_agent.shape == res.regret_network.shape == (RUNS, HORIZON)
    np.testing.assert_allclose(res.regret_network, res.regret_by_agent.sum(axis=2))
    assert (np.diff(res.regret_network, axis=1) >= -1e-5).all()  # cumulative regret
    assert res.regret_network[:, -1].min() > 0
    for name in ("messages", "floats", "cost"):
        assert getattr(res, name).shape == getattr(ref, name).shape == (RUNS, 2)
    assert res.messages.sum() == 0 and res.privacy_epsilon is None and res.wall_time > 0
    assert res.results_version == ref.results_version + backend_suffix("jax")
    assert res.results_version.endswith(f"/ backend jax v{JAX_BACKEND_VERSION} (jax {jax.__version__})")
    assert res.summary()["backend"] == "jax" and ref.summary()["backend"] == "numpy"
    assert res.env_kwargs == kwargs and res.agent_id == "ucb1"


def test_a_cell_names_its_backend_only_when_it_is_not_numpy():
    numpy_cell, jax_cell = _cell(), _cell(backend="jax")
    assert "backend" not in numpy_cell.config and jax_cell.config["backend"] == "jax"
    assert numpy_cell.config_hash != jax_cell.config_hash
    assert numpy_cell.env_key == jax_cell.env_key  # one table for both


def test_the_store_keeps_the_backends_apart_and_the_leaderboard_shows_both(store):
    results = ResultsStore(store, create=False)
    rows = results.rows()
    assert sorted(r.backend for r in rows) == ["jax"] * 5 + ["numpy"] * 3
    jax_rows = [r for r in rows if r.backend == "jax"]
    assert {r.cell_hash for r in jax_rows} == {_cell(backend="jax").config_hash}
    assert {r.results_version for r in jax_rows} == {
        registered_results_version(ENV, "ucb1", None, "jax")
    }
    same_seed = {r.backend: r for r in rows if r.seed == 0}
    assert same_seed["numpy"].results_version != same_seed["jax"].results_version
    notes: list[str] = []
    kept = current_rows(rows, notes.append)
    assert len(kept) == 8 and not notes  # both backends' rows are current
    entries = build(kept)
    assert len(entries) == 2  # one table, one entry per backend: never pooled
    by_backend = {e.backend: e for e in entries}
    assert by_backend["numpy"].runs == 3 and by_backend["jax"].runs == 5
    assert by_backend["jax"].paired.verdict == "baseline"  # its own backend's baseline
    assert by_backend["numpy"].paired.verdict == "baseline"
    text = to_markdown(entries)
    assert "| rank | learner | backend | runs |" in text
    assert "| ucb1 [jax] | jax |" in text and "| ucb1 | numpy |" in text
    assert "& backend &" in to_latex(entries)
    table = page._table(entries)
    assert ">backend</th>" in table and "<td class='name'>jax</td>" in table
    numpy_only = build([r for r in kept if r.backend == "numpy"])
    assert "backend" not in to_markdown(numpy_only) and "backend" not in to_latex(numpy_only)
    assert ">backend</th>" not in page._table(numpy_only)


def test_a_rerun_of_a_jax_cell_runs_nothing(store):
    cells = (_cell(), _cell(backend="jax"))
    assert run_suite(Suite("jaxbench", cells), ResultsStore(store), quiet=True) == 0


def test_cli_run_backend_jax_writes_a_row(tmp_path, capsys):
    path = tmp_path / "cli.sqlite"
    main(["run", ENV, "ucb1", "--backend", "jax", "--runs", "2", "--horizon", "40",
          "--env-kwargs", json.dumps(SMALL), "--store", str(path)])  # fmt: skip
    summary = json.loads(capsys.readouterr().out)
    assert summary["backend"] == "jax" and summary["rows_written"] == 2
    rows = ResultsStore(path, create=False).rows()
    assert [(r.backend, r.seed, r.horizon) for r in rows] == [("jax", 0, 40), ("jax", 1, 40)]
    main(["leaderboard", "--store", str(path)])
    assert "| 1 | ucb1 | jax | 2 |" in capsys.readouterr().out


def test_cli_suite_backend_jax_runs_the_suites_jax_cells(tmp_path, capsys, monkeypatch):
    from fedbandit_env import agent_registry

    # a learner without a JAX port, registered for this test only
    monkeypatch.setitem(agent_registry._AGENTS, "numpy_only_ucb1", "baselines.ucb:UCB1")
    spread = Cell("FedBandit/Heterogeneous-v0", "ucb1", HORIZON, 2,
                  {**SMALL, "client_spread": 0.1}, {}, 0)  # fmt: skip
    private = Cell(ENV, "ucb1", HORIZON, 2, dict(SMALL), {}, 0, privacy={"epsilon": 1.0})
    cells = (_cell(runs=2), _cell("numpy_only_ucb1", runs=2), spread, private)
    monkeypatch.setitem(SUITES, "tinyjax", Suite("tinyjax", cells))
    path = tmp_path / "suite.sqlite"
    main(["suite", "tinyjax", "--backend", "jax", "--store", str(path), "--verbose"])
    out = capsys.readouterr().out
    assert "skipping on FedBandit/Homogeneous-v0: numpy_only_ucb1" in out
    # every cell the backend cannot run is named, with why, even without --verbose
    gaps = next(line for line in out.splitlines() if "on the jax backend" in line)
    assert gaps.startswith("suite tinyjax on the jax backend: runs 1 cells; 3 cannot run there")
    assert f"numpy_only_ucb1 on {ENV}: no jax port of numpy_only_ucb1 (it runs on numpy)" in gaps
    assert (
        "ucb1 on FedBandit/Heterogeneous-v0: FedBandit/Heterogeneous-v0: client_spread: "
        "not on the JAX backend" in gaps
    )
    assert f"ucb1 on {ENV}: a privacy wrapper (numpy-only" in gaps
    rows = ResultsStore(path, create=False).rows()
    assert {(r.agent_id, r.backend) for r in rows} == {("ucb1", "jax")} and len(rows) == 2
    assert rows[0].cell_hash == _cell(backend="jax").config_hash
    main(["leaderboard", "--store", str(path), "--suite", "tinyjax"])
    assert "| 1 | ucb1 | jax | 2 |" in capsys.readouterr().out


def test_a_user_jax_learner_is_evaluated_stored_and_ranked(tmp_path):
    kwargs = {**SMALL, "horizon": HORIZON}
    res = evaluate(ENV, GreedyJax(), runs=2, env_kwargs=kwargs, backend="jax")
    assert res.agent_id == "greedy_jax" and "learner greedy_jax v2" in res.results_version
    fj.register_jax_agent("test_greedy_jax", GreedyJax)
    path = tmp_path / "user.sqlite"
    suite = Suite("user", (_cell("test_greedy_jax", "jax", runs=2), _cell(runs=2)))
    assert run_suite(suite, ResultsStore(path), quiet=True) == 4
    rows = ResultsStore(path, create=False).rows()
    notes: list[str] = []
    entries = build(current_rows(rows, notes.append))
    assert not notes and {(e.label, e.backend) for e in entries} == {
        ("test_greedy_jax", "jax"),
        ("ucb1", "numpy"),
    }
    mine = next(e for e in entries if e.label == "test_greedy_jax")
    assert mine.rank in (1, 2) and mine.normalized is not None  # vs the numpy ucb1
    assert mine.paired is None  # seeds are never paired across backends
    assert "| test_greedy_jax | jax | 2 |" in to_markdown(entries)


def test_a_user_jax_learner_by_module_attr_on_the_command_line(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(__import__("pathlib").Path(__file__).parents[1]))
    agent = "tests.test_jax_bench:GreedyJax"
    path = tmp_path / "cli_user.sqlite"
    main(["run", ENV, agent, "--backend", "jax", "--runs", "2", "--horizon", "40",
          "--env-kwargs", json.dumps(SMALL), "--store", str(path)])  # fmt: skip
    assert json.loads(capsys.readouterr().out)["rows_written"] == 2
    main(["leaderboard", "--store", str(path)])
    assert "| 1 | tests.test_jax_bench:GreedyJax | jax | 2 |" in capsys.readouterr().out


def test_privacy_wrappers_are_numpy_only(tmp_path, capsys):
    with pytest.raises(ConfigError, match="privacy: the privacy wrappers are numpy-only"):
        evaluate(ENV, "ucb1", runs=2, env_kwargs=SMALL, privacy={"epsilon": 1.0}, backend="jax")
    with pytest.raises(ConfigError, match="cell.privacy: the privacy wrappers are numpy-only"):
        Cell(ENV, "ucb1", 10, privacy={"epsilon": 1.0}, backend="jax")
    with pytest.raises(SystemExit) as exit_:
        main(["run", ENV, "ucb1", "--backend", "jax", "--privacy", '{"epsilon": 1}'])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and "--privacy" in err and "numpy-only" in err


def test_an_unknown_backend_names_the_option_and_the_backends(capsys):
    expected = r"backend: expected one of \['numpy', 'jax'\], got 'torch'"
    with pytest.raises(ConfigError, match=expected):
        evaluate(ENV, "ucb1", runs=2, env_kwargs=SMALL, backend="torch")
    with pytest.raises(ConfigError, match=expected):
        Cell(ENV, "ucb1", 10, backend="torch")
    with pytest.raises(ConfigError, match=expected):
        EvalTask(ENV, "ucb1", 2, backend="torch")
    with pytest.raises(SystemExit) as exit_:
        main(["run", ENV, "ucb1", "--backend", "torch"])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and "--backend" in err and "'numpy', 'jax'" in err


def test_a_missing_jax_extra_names_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "fedbandit_env.jax", None)  # as if JAX were not installed
    with pytest.raises(ConfigError, match=r"pip install 'fedbandit\[jax\]'"):
        evaluate(ENV, "ucb1", runs=2, env_kwargs=SMALL, backend="jax")


def test_an_old_store_reads_as_numpy(tmp_path, store):
    """A store written before backends (no backend anywhere: rows' configs name none) reads
    every row as numpy; a row whose config names an unknown backend is refused by name."""
    path = tmp_path / "old.sqlite"
    conn = sqlite3.connect(path)
    conn.execute(SCHEMA.format(table="runs"))
    for row in ResultsStore(store, create=False).rows():
        if row.backend == "numpy":
            values = [getattr(row, c) for c in _columns()]
            conn.execute(f"INSERT INTO runs VALUES ({', '.join('?' * len(values))})", values)
    conn.commit()
    conn.close()
    rows = ResultsStore(path, create=False).rows()
    assert len(rows) == 3 and {r.backend for r in rows} == {"numpy"}
    assert all("backend" not in json.loads(r.config) for r in rows)
    entries = build(current_rows(rows, lambda _m: None))
    assert [e.backend for e in entries] == ["numpy"] and "backend" not in to_markdown(entries)
    conn = sqlite3.connect(path)
    config = json.loads(rows[0].config)
    conn.execute("UPDATE runs SET config = ? WHERE seed = 0",
                 (json.dumps({**config, "backend": "cuda"}),))  # fmt: skip
    conn.commit()
    conn.close()
    with pytest.raises(StoreError, match=r"config.backend: expected one of \['jax'\]"):
        ResultsStore(path, create=False).rows()


def _columns():
    from fedbandit_env.bench.store import COLUMNS

    return COLUMNS


def test_reference_jax_rows_on_their_own_seeds(tmp_path, store):
    rows = ResultsStore(store, create=False).rows()
    numpy_rows = [r for r in rows if r.backend == "numpy"]
    same_seeds = [r for r in rows if r.backend == "jax" and r.seed < JAX_SEED_OFFSET]
    own_seeds = [r for r in rows if r.backend == "jax" and r.seed >= JAX_SEED_OFFSET]
    bad = tmp_path / "shared.json"
    bad.write_text(dumps([cell_record("quick", numpy_rows), cell_record("quick", same_seeds)]))
    with pytest.raises(ReferenceError, match=r"seeds: a jax cell's seeds must be disjoint"):
        load_reference(bad)
    good = tmp_path / "reference.json"
    jax_record = cell_record("quick", own_seeds)
    jax_record["final_regret_per_agent"][1] += 1.0  # an edited JAX number
    good.write_text(dumps([cell_record("quick", numpy_rows), jax_record]))
    ref = load_reference(good)
    ref_rows = ref.rows()
    assert sorted(r.backend for r in ref_rows) == ["jax"] * 2 + ["numpy"] * 3
    notes: list[str] = []
    assert len(current_reference_rows(ref_rows, notes.append)) == 5 and not notes
    assert len(build(ref_rows)) == 2  # never pooled
    report = check_reference(ref, note=lambda _m: None)
    assert len(report.checked) == 2 and not report.skipped
    # every re-run number is bit-identical but the edited one: the JAX cell is compared too
    assert len(report.differences) == 1, report.differences
    assert f"seed {JAX_SEED_OFFSET + 1}: final_regret_per_agent" in report.differences[0]
