"""Byzantine-robustness metrics and the robust suite (docs/adversary.md, "Metrics and the robust
suite"; docs/bench.md, "The robust suite"): the metrics against plain loops, the suite's cells
and skip reasons, the leaderboard's column and the page's panel only with attacked rows, the
rows of adversary cells, and a tiny end-to-end run through the CLI."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from fedbandit_env.agent_registry import _AGENTS, register_agent
from fedbandit_env.bench import cli
from fedbandit_env.bench.evaluate import evaluate
from fedbandit_env.bench.executors import plan, run_suite
from fedbandit_env.bench.leaderboard import build, current_rows, to_markdown
from fedbandit_env.bench.robust_metrics import (
    adversary_of,
    attack_gain,
    clean_key,
    clean_ratio,
    cooperation_ratio,
    ols,
    regret_vs_byzantine_neighbours,
    robust_markdown,
    silent_key,
)
from fedbandit_env.bench.store import ResultsStore, log_checkpoints, rows_from_result
from fedbandit_env.bench.suites import (
    ROBUST_TOPOLOGIES,
    SUITES,
    AttackSweep,
    Cell,
    Suite,
    get_suite,
)
from fedbandit_env.bench.versions import ADVERSARY_VERSION, HISTORY
from fedbandit_env.errors import ConfigError
from fedbandit_env.registration import make_vec

ENV = "FedBandit/Homogeneous-v0"
SMALL = {"num_agents": 6, "num_arms": 4, "topology": "ring"}
COLUMN = "under attack / clean"


def adversary(f: int, attack: str) -> dict:
    return {"num_byzantine": f, "attack": attack}


# --- metrics against plain loops ---------------------------------------------------------------


def test_regret_vs_byzantine_neighbours_matches_a_plain_loop():
    kwargs = {**SMALL, "num_agents": 8, "horizon": 120, "adversary": adversary(2, "uniform")}
    res = evaluate(ENV, "ucb1_shared", runs=6, env_kwargs=kwargs)
    graph = make_vec(ENV, num_runs=1, **kwargs).config.topology.graph
    xs, ys = [], []
    for b in range(6):
        for i in range(8):
            if res.roles[b, i] != 0:
                continue
            xs.append(sum(1 for j in graph.neighbors(i) if res.roles[b, j] == 1))
            ys.append(res.regret_by_agent[b, -1, i])
    got = regret_vs_byzantine_neighbours(res)
    assert got.points == len(xs) == 6 * 6
    assert got.values == tuple(sorted(set(xs)))
    for v, n, m in zip(got.values, got.counts, got.means, strict=True):
        group = [y for x, y in zip(xs, ys, strict=True) if x == v]
        assert n == len(group)
        assert m == pytest.approx(sum(group) / len(group), rel=1e-12)
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx
    intercept = my - slope * mx
    rss = sum((y - intercept - slope * x) ** 2 for x, y in zip(xs, ys, strict=True))
    assert got.slope == pytest.approx(slope, rel=1e-9)
    assert got.intercept == pytest.approx(intercept, rel=1e-9)
    assert got.slope_se == pytest.approx(math.sqrt(rss / (n - 2) / sxx), rel=1e-9)


def test_ols_recovers_an_exact_line_and_refuses_nothing_to_regress_on():
    slope, se, intercept = ols(np.array([0, 1, 2, 3]), np.array([1.0, 3.0, 5.0, 7.0]))
    assert (slope, intercept) == pytest.approx((2.0, 1.0)) and se == pytest.approx(0.0, abs=1e-12)
    slope, se, intercept = ols(np.array([1, 1, 1]), np.array([1.0, 2.0, 3.0]))
    assert math.isnan(slope) and math.isnan(se) and intercept == pytest.approx(2.0)


def test_regret_vs_byzantine_neighbours_needs_roles():
    res = evaluate(ENV, "ucb1", runs=2, env_kwargs={**SMALL, "horizon": 20})
    with pytest.raises(ConfigError, match="result.roles: expected"):
        regret_vs_byzantine_neighbours(res)


def test_attack_gain_and_cooperation_ratio_match_plain_loops():
    base = {**SMALL, "horizon": 150}
    runs, seed = 5, 3
    attacked = evaluate(ENV, "ucb1_shared", runs=runs, seed=seed,
                        env_kwargs={**base, "adversary": adversary(1, "uniform")})  # fmt: skip
    silent = evaluate(ENV, "ucb1_shared", runs=runs, seed=seed,
                      env_kwargs={**base, "adversary": adversary(1, "silent")})  # fmt: skip
    ucb1 = evaluate(ENV, "ucb1", runs=runs, seed=seed,
                    env_kwargs={**base, "adversary": adversary(1, "silent")})  # fmt: skip
    clean = evaluate(ENV, "ucb1_shared", runs=runs, seed=seed, env_kwargs=base)
    assert np.array_equal(attacked.roles, silent.roles)  # same seeds: the same honest agents

    def honest_mean(res, b):
        vals = [res.regret_by_agent[b, -1, i] for i in range(6) if res.roles[b, i] == 0]
        return sum(vals) / len(vals)

    diffs = [honest_mean(attacked, b) - honest_mean(silent, b) for b in range(runs)]
    mean = sum(diffs) / runs
    sd = math.sqrt(sum((d - mean) ** 2 for d in diffs) / (runs - 1))
    gain = attack_gain(attacked, silent)
    assert gain.pairs == runs
    assert gain.mean == pytest.approx(mean, rel=1e-12)
    assert gain.se == pytest.approx(sd / math.sqrt(runs), rel=1e-12)
    ref = sum(honest_mean(ucb1, b) for b in range(runs)) / runs
    mine = sum(honest_mean(attacked, b) for b in range(runs)) / runs
    assert cooperation_ratio(ucb1, attacked) == pytest.approx(ref / mine, rel=1e-12)
    plain_clean = sum(clean.regret_by_agent[b, -1].mean() for b in range(runs)) / runs
    assert clean_ratio(attacked, clean) == pytest.approx(mine / plain_clean, rel=1e-12)
    # a learner the attack does not move gains nothing, on every seed
    zero = attack_gain(ucb1, ucb1)
    assert zero.mean == 0.0 and zero.se == 0.0


def test_attack_gain_pairs_only_common_seeds():
    base = {**SMALL, "horizon": 60}
    a = evaluate(ENV, "ucb1_shared", runs=4, seed=0,
                 env_kwargs={**base, "adversary": adversary(1, "zeros")})  # fmt: skip
    s = evaluate(ENV, "ucb1_shared", runs=4, seed=2,
                 env_kwargs={**base, "adversary": adversary(1, "silent")})  # fmt: skip
    gain = attack_gain(a, s)
    assert gain.pairs == 2  # seeds 2 and 3
    want = [a.honest_regret_mean[b] - s.honest_regret_mean[b - 2] for b in (2, 3)]
    assert gain.mean == pytest.approx(sum(want) / 2, rel=1e-12)


def test_environment_keys_of_the_attacked_clean_and_silent_tables():
    cell = Cell(ENV, "ucb1", 10, 1, {**SMALL, "adversary": {
        "num_byzantine": 2, "placement": "first", "attack": "uniform",
        "attack_kwargs": {"hi": 5.0}, "knowledge": "omniscient"}})  # fmt: skip
    assert adversary_of(cell.env_key)["attack"] == "uniform"
    assert clean_key(cell.env_key) == Cell(ENV, "ucb1", 10, 1, dict(SMALL)).env_key
    silent = {**SMALL, "adversary": {"num_byzantine": 2, "placement": "first", "attack": "silent"}}
    assert silent_key(cell.env_key) == Cell(ENV, "ucb1", 10, 1, silent).env_key
    zero = Cell(ENV, "ucb1", 10, 1, {**SMALL, "adversary": adversary(0, "zeros")})
    assert adversary_of(zero.env_key) is None  # f = 0 and no crash: a clean table


# --- rows of adversary cells -------------------------------------------------------------------


def test_rows_of_an_adversary_cell_store_the_honest_metrics_under_their_own_version():
    kwargs = {**SMALL, "adversary": adversary(2, "uniform")}
    cell = Cell(ENV, "ucb1_shared", 80, 3, kwargs)
    res = evaluate(ENV, "ucb1_shared", runs=3, env_kwargs={**kwargs, "horizon": 80},
                   checkpoints=log_checkpoints(80))  # fmt: skip
    assert res.results_version.endswith(f" / adversary v{ADVERSARY_VERSION}")
    rows = rows_from_result(cell, "t", res)
    for b, row in enumerate(rows):
        honest = res.roles[b] == 0
        assert row["final_regret_per_agent"] == pytest.approx(
            res.regret_by_agent[b, -1, honest].mean(), rel=1e-12)  # fmt: skip
        assert row["final_regret_network"] == pytest.approx(
            res.regret_by_agent[b, -1, honest].sum(), rel=1e-12)  # fmt: skip
        curve = json.loads(row["curve"])
        assert curve[-1] == pytest.approx(row["final_regret_per_agent"], rel=1e-12)
        assert curve[3] == pytest.approx(res.regret_by_agent[b, 3, honest].mean(), rel=1e-12)
    # the store, the planner and the leaderboard agree on that version
    store = ResultsStore(":memory:")
    store.append(rows)
    assert plan(Suite("t", (cell,)), [cell], store, 10) == []
    assert len(current_rows(store.rows(), lambda _m: None)) == 3
    # cells without an adversary keep their version and numbers
    clean = evaluate(ENV, "ucb1_shared", runs=3, env_kwargs={**SMALL, "horizon": 80})
    assert "adversary" not in clean.results_version
    row = rows_from_result(Cell(ENV, "ucb1_shared", 80, 3, dict(SMALL)), "t", clean)[0]
    assert row["final_regret_per_agent"] == clean.regret_per_agent[0, -1]
    (row,) = [h for h in HISTORY if h[0].startswith("rows of a cell with an adversary")]
    assert row[1] == str(ADVERSARY_VERSION)


# --- the suite ---------------------------------------------------------------------------------


def _refuser():
    """A learner that refuses any setting with more than 6 agents (a ConfigError in reset)."""
    from baselines.ucb import UCB1Shared

    class Picky(UCB1Shared):
        agent_id = "picky_test"

        def reset(self, facts, rng):
            if facts.num_agents > 6:
                raise ConfigError("picky_test: num_agents: expected at most 6, got more")
            return super().reset(facts, rng)

    return Picky


@pytest.fixture
def picky():
    register_agent("picky_test", _refuser())
    register_agent("missing_module_test", "no_such_module_here:Learner")
    yield
    _AGENTS.pop("picky_test", None)
    _AGENTS.pop("missing_module_test", None)


def test_attack_sweep_cells_and_skip_reasons(picky):
    sweep = AttackSweep(ENV, 50, 2, dict(SMALL), byzantine=(1, 2))
    big = AttackSweep(ENV, 50, 2, {**SMALL, "num_agents": 8}, byzantine=(1,))
    suite = Suite("t", (), None, "", (sweep, big))
    cells, skipped = suite.split()
    assert suite.skip_summary(skipped).endswith(
        f"({len(skipped)} reasons: a learner that refuses the setting, or an attack that does "
        "not fit its channels; --verbose says which)"
    )
    by = {}
    for c in cells:
        adv = c.env_kwargs.get("adversary")
        key = (c.agent_id, c.env_kwargs["num_agents"])
        by.setdefault(key, set()).add(None if adv is None else (adv["num_byzantine"],
                                                                adv["attack"]))  # fmt: skip
    # f = 0 is the clean row: no adversary key, so its hash is the plain cell's
    assert None in by[("ucb1_shared", 6)]
    assert Cell(ENV, "ucb1_shared", 50, 2, dict(SMALL)) in cells
    # a learner that declares no channels: clean and under silent only
    assert by[("ucb1", 6)] == {None, (1, "silent"), (2, "silent")}
    # a learner that declares its [means, counts] layout gets every means attack at every f;
    # one sharing [counts, sums] of the same dim gets only the attacks of no layout
    for f in (1, 2):
        for attack in ("zhu_code", "alie", "demote_best", "silent"):
            assert (f, attack) in by[("byzres_ucb", 6)]
        for attack in ("alie", "gaussian", "uniform", "silent"):
            assert (f, attack) in by[("ucb1_shared", 6)]
        for attack in ("zhu_code", "demote_best", "rec_naive"):
            assert (f, attack) not in by[("ucb1_shared", 6)]
    # an arm-id learner (gosine) gets the recommendation attacks, not the means ones
    assert (1, "rec_naive") in by[("gosine", 6)] and (1, "zhu_code") not in by[("gosine", 6)]
    reasons = {r: names for (_env, r), names in skipped.items()}
    assert any(r.startswith("attack 'zhu_code' writes payload layout 'means' ([means (M), counts "
                            "(M)], dim 2M) and the learner's channels carry neighbors: "
                            "'counts_sums' ([counts (M), sums (M)], dim 2M)")
               and "ucb1_shared" in n and "byzres_ucb" not in n
               for r, n in reasons.items())  # fmt: skip
    assert any(r.startswith("attack 'rec_naive' writes payload layout 'arm'") and "ucb1_shared" in n
               for r, n in reasons.items())  # fmt: skip
    assert any(r.startswith("family: expected 'linear'") and "linucb" in n
               for r, n in reasons.items())  # fmt: skip
    # a learner that refuses the setting is skipped with its reason, under every attack
    assert ("picky_test", 6) in by and ("picky_test", 8) not in by
    assert reasons["num_agents: expected at most 6, got more"] == ["picky_test"]
    # a learner whose module is missing is skipped, not a crash
    assert any(r.startswith("ModuleNotFoundError") and "missing_module_test" in n
               for r, n in reasons.items())  # fmt: skip
    no_channels = [r for r in reasons if r.startswith("sends no messages (no channel), so no "
                                                      "message of attack")]  # fmt: skip
    assert no_channels and "ucb1" in reasons[no_channels[0]]
    # the summary calls a learner skipped only where none of its cells runs
    summary = suite.skip_summary(skipped, cells)
    whole, partial = summary.split("the attacks that do not fit")
    assert "linucb" in whole and "ucb1_shared" not in whole and "ucb1_shared" in partial


def test_the_robust_suite_is_declared_on_three_graphs_and_reaches_the_robust_agents():
    suite = get_suite("robust")
    assert "robust_full" in SUITES
    assert [sw.env_kwargs["topology"] for sw in suite.sweeps] == [t for t, _ in ROBUST_TOPOLOGIES]
    assert all(isinstance(sw, AttackSweep) and sw.byzantine == (1, 2) for sw in suite.sweeps)
    cells = suite.available(lambda _m: None, agent_id="ucb1_shared")
    assert {c.env_kwargs["topology"] for c in cells} == {"complete", "ring", "random_regular"}
    assert sum("adversary" not in c.env_kwargs for c in cells) == 3  # one clean row per graph
    # the robust agents are swept from the registry (skipped with a reason if absent)
    names = {c.agent_id for c in suite.candidates()}
    assert {"byzres_ucb", "fed_mom_ucb", "robust_gosine"} <= names


# --- leaderboard and page ----------------------------------------------------------------------


def _store(attacked: bool) -> ResultsStore:
    base = dict(SMALL)
    cells = [Cell(ENV, a, 100, 3, dict(base)) for a in ("ucb1", "ucb1_shared")]
    if attacked:
        for attack in ("silent", "uniform"):
            cells += [Cell(ENV, "ucb1_shared", 100, 3, {**base, "adversary": adversary(1, attack)})]
        cells += [Cell(ENV, "ucb1", 100, 3, {**base, "adversary": adversary(1, "silent")})]
    store = ResultsStore(":memory:")
    run_suite(Suite("t", tuple(cells)), store, quiet=True)
    return store


def test_the_column_appears_only_in_tables_of_attacked_environments():
    clean_only = build(_store(False).rows())
    text = to_markdown(clean_only)
    assert COLUMN not in text and "Regret under attack" not in text and robust_markdown(
        clean_only) == ""  # fmt: skip
    header = ("| rank | learner | runs | final regret / agent | 95% CI | vs ucb1 | messages | "
              "floats | privacy ε | paired Δ vs ucb1 (95% CI) |")  # fmt: skip
    assert text.splitlines()[2] == header  # existing tables keep their columns
    assert all(e.robust is None for e in clean_only)

    store = _store(True)
    entries = build(store.rows())
    text = to_markdown(entries)
    tables = text.split("### ")[1:]
    clean_table = [t for t in tables if t.startswith("FedBandit/Homogeneous-v0 (horizon")][0]
    assert COLUMN not in clean_table and clean_table.splitlines()[2] == header
    zhu = [t for t in tables if "uniform" in t.splitlines()[0] and t.startswith("FedBandit")][0]
    assert COLUMN in zhu.splitlines()[2]
    # the values, from the stored rows by a plain loop
    rows = store.rows()

    def mean_final(agent, attack):
        vals = [r.final_regret_per_agent for r in rows if r.agent_id == agent
                and (json.loads(r.env_key)["env_kwargs"].get("adversary") or {}).get("attack")
                == attack]  # fmt: skip
        return sum(vals) / len(vals)

    ratio = mean_final("ucb1_shared", "uniform") / mean_final("ucb1_shared", None)
    coop = mean_final("ucb1", "silent") / mean_final("ucb1_shared", "uniform")
    line = [ln for ln in zhu.splitlines() if ln.startswith("| 1 | ucb1_shared")][0]
    cells = [c.strip() for c in line.strip("|").split("|")]
    assert cells[-3] == f"{ratio:.2f}" and cells[-1] == f"{coop:.2f}"
    diffs = {}
    for r in rows:
        adv = json.loads(r.env_key)["env_kwargs"].get("adversary") or {}
        if r.agent_id == "ucb1_shared" and adv.get("attack") in ("uniform", "silent"):
            diffs.setdefault(r.seed, {})[adv["attack"]] = r.final_regret_per_agent
    d = [v["uniform"] - v["silent"] for v in diffs.values()]
    mean = sum(d) / len(d)
    se = math.sqrt(sum((x - mean) ** 2 for x in d) / (len(d) - 1) / len(d))
    assert cells[-2] == f"{mean:+.1f}".replace("-", "−") + f" ± {se:.1f}"
    # the summary matrix: one per clean setting, a table per coverage, f named in each column;
    # the learner that sends nothing is the no-communication reference, not ranked
    summary = robust_markdown(entries)
    assert summary.startswith("### Regret under attack / clean: FedBandit/Homogeneous-v0")
    silent = mean_final("ucb1_shared", "silent") / mean_final("ucb1_shared", None)
    ranked, reference = summary.split("No-communication reference")
    assert "Ranked among learners exposed to the same 2 of 2 attacks: silent, uniform" in ranked
    assert "| rank | learner | silent (f=1) | uniform (f=1) |" in ranked
    assert f"| 1 | ucb1_shared | {silent:.2f} | {ratio:.2f} |" in ranked
    ucb1 = mean_final("ucb1", "silent") / mean_final("ucb1", None)
    assert "| rank | learner | silent (f=1) |" in reference
    assert f"| ref | ucb1 | {ucb1:.2f} |" in reference and "ucb1 |" not in ranked


@pytest.mark.slow
def test_the_page_has_the_robustness_panel_only_with_attacked_rows(tmp_path):
    pytest.importorskip("matplotlib")
    from fedbandit_env.bench.html import write_html

    page = write_html(build(_store(True).rows()), tmp_path / "a", "t").read_text()
    assert "id='robustness'" in page and "href='#robustness'" in page
    assert f"<th onclick='sortTable(this)' title='sort by {COLUMN}'>{COLUMN}</th>" in page
    page = write_html(build(_store(False).rows()), tmp_path / "b", "t").read_text()
    assert "robustness" not in page and COLUMN not in page


# --- end to end --------------------------------------------------------------------------------


def test_a_tiny_robust_suite_through_the_cli(tmp_path, monkeypatch, capsys):
    tiny = Suite("robust", (), None, "tiny",
                 (AttackSweep(ENV, 60, 2, dict(SMALL), byzantine=(1,)),))  # fmt: skip
    monkeypatch.setitem(SUITES, "robust", tiny)
    store = tmp_path / "r.sqlite"
    cli.main(["suite", "robust", "--store", str(store), "--agents",
              "ucb1,ucb1_shared,byzres_ucb,gosine", "--quiet"])  # fmt: skip
    rows = ResultsStore(store, create=False).rows()
    attacks = {(r.agent_id, (json.loads(r.env_key)["env_kwargs"].get("adversary") or {})
                .get("attack")) for r in rows}  # fmt: skip
    assert ("ucb1", "silent") in attacks and ("ucb1", "zhu_code") not in attacks
    assert ("byzres_ucb", "zhu_code") in attacks and ("gosine", "rec_smart") in attacks
    assert ("ucb1_shared", "alie") in attacks and ("ucb1_shared", "zhu_code") not in attacks
    assert len(rows) == 2 * len(attacks)
    capsys.readouterr()
    cli.main(["leaderboard", "--store", str(store), "--suite", "robust"])
    out = capsys.readouterr().out
    assert COLUMN in out and "### Regret under attack / clean" in out
    # a re-run has nothing left to do: the rows are at the current version
    cli.main(["suite", "robust", "--store", str(store), "--agents", "ucb1", "--quiet"])
    assert ResultsStore(store, create=False).count() == len(rows)
