"""An honest robust bench: the robustness parameter follows the environment, layouts are checked,
the matrix ranks like with like, and NaN indices are counted (docs/bench.md, "The robust suite"
and "Flags"; docs/adversary.md)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from agents.byzres_ucb import ByzResUCB
from agents.fed_mom_ucb import FedMoMUCB
from agents.robust_gosine import RobustGosInE
from fedbandit_env.agent_registry import _AGENTS, register_agent
from fedbandit_env.bench import evaluate
from fedbandit_env.bench.executors import run_suite
from fedbandit_env.bench.leaderboard import build, to_markdown
from fedbandit_env.bench.robust_metrics import robust_markdown, robust_matrices
from fedbandit_env.bench.store import ResultsStore
from fedbandit_env.bench.suites import Cell, Suite, get_suite
from fedbandit_env.errors import ConfigError
from fedbandit_env.kernels import argmax_one_uniform
from fedbandit_env.policy import TeamAction, TeamPolicy
from fedbandit_env.registration import make_vec
from fedbandit_env.seeding import BatchedRNG

ENV = "FedBandit/Homogeneous-v0"
SMALL = {"num_agents": 8, "num_arms": 4, "topology": "complete", "horizon": 200}


def adversary(f: int, attack: str) -> dict:
    return {"num_byzantine": f, "attack": attack}


def facts_of(policy, **kwargs):
    """The facts a learner is reset on, with its own channels."""
    preview = make_vec(ENV, num_runs=1, **kwargs)
    channels = policy.channel_spec(preview.config)
    venv = make_vec(ENV, num_runs=1, **{**kwargs, **({"channels": channels} if channels else {})})
    return venv.facts


# --- f follows the environment ------------------------------------------------------------------


def test_the_declared_bound_is_a_public_fact_and_never_the_roles():
    clean = facts_of(ByzResUCB(), **SMALL)
    assert clean.byzantine_bound == 0
    attacked = facts_of(ByzResUCB(), **SMALL, adversary=adversary(2, "demote_best"))
    assert attacked.byzantine_bound == 2
    assert not hasattr(attacked, "roles")


@pytest.mark.parametrize("bound", [0, 1, 2])
def test_byzres_default_f_is_the_bound_and_a_lower_user_f_is_noted(bound):
    kwargs = {**SMALL, **({"adversary": adversary(bound, "silent")} if bound else {})}
    rng = BatchedRNG.for_runs([0], "agents")
    default = ByzResUCB()
    default.reset(facts_of(default, **kwargs), rng)
    assert default.f == bound and default.notes() == ()
    low = ByzResUCB(f=0)
    low.reset(facts_of(low, **kwargs), rng)
    assert low.f == 0
    assert low.notes() == ((f"f = 0 < {bound} Byzantine",) if bound else ())
    high = ByzResUCB(f=3)
    high.reset(facts_of(high, **kwargs), rng)
    assert high.f == 3 and high.notes() == ()


def test_byzres_with_defaults_runs_exactly_as_with_the_environments_f():
    """The issue's case: N = 8, complete, 2 Byzantine under demote_best. The default learner is
    the f = 2 learner, bit for bit, and the row of a user's f = 1 carries the note."""
    kwargs = {**SMALL, "adversary": adversary(2, "demote_best")}
    default = evaluate(ENV, "byzres_ucb", runs=4, env_kwargs=kwargs)
    two = evaluate(ENV, "byzres_ucb", runs=4, env_kwargs=kwargs, agent_kwargs={"f": 2})
    np.testing.assert_array_equal(default.regret_by_agent, two.regret_by_agent)
    one = evaluate(ENV, "byzres_ucb", runs=4, env_kwargs=kwargs, agent_kwargs={"f": 1})
    assert one.notes == ("f = 1 < 2 Byzantine",) and default.notes == ()
    assert one.summary()["notes"] == ["f = 1 < 2 Byzantine"]


def test_fed_mom_lambda_and_robust_gosine_sticky_sets_follow_the_bound():
    kwargs = {**SMALL, "adversary": adversary(2, "silent")}
    rng = BatchedRNG.for_runs([0], "agents")
    mom = FedMoMUCB(clients="environment")
    mom.reset(facts_of(mom, **kwargs), rng)
    assert mom.lam == pytest.approx(2 / 8) and mom.k.M_Z == 2 and mom.notes() == ()
    low = FedMoMUCB(clients="environment", lam=0.1)
    low.reset(facts_of(low, **kwargs), rng)
    assert low.notes() == ("lam N = 0.8 < 2 Byzantine",)
    gosine_kwargs = {**kwargs, "num_arms": 8}
    robust = RobustGosInE()
    robust.reset(facts_of(robust, **gosine_kwargs), rng)
    assert robust.sticky.sum(axis=1).tolist() == [2] * 8  # ceil(8 / (8 - 2)) = 2 arms each
    told = RobustGosInE(sticky_agents=8)
    told.reset(facts_of(told, **gosine_kwargs), rng)
    assert told.notes() == ("sticky_agents = 8 > 6 honest (N - f)",)


def test_a_row_and_its_table_flag_a_user_f_below_the_bound():
    kwargs = {**SMALL, "horizon": 60, "adversary": adversary(2, "demote_best")}
    cells = (Cell(ENV, "byzres_ucb", 60, 2, dict(kwargs), {"f": 1}, label="byzres f=1"),
             Cell(ENV, "byzres_ucb", 60, 2, dict(kwargs)))  # fmt: skip
    store = ResultsStore(":memory:")
    run_suite(Suite("t", cells), store, quiet=True)
    flags = {r.label: json.loads(r.flags) for r in store.rows()}
    assert flags["byzres f=1"]["notes"] == ["f = 1 < 2 Byzantine"]
    assert "notes" not in flags["byzres_ucb"]
    text = to_markdown(build(store.rows()))
    line = [ln for ln in text.splitlines() if "byzres f=1" in ln][0]
    assert line.endswith("| **⚠ f = 1 \\< 2 Byzantine** |")  # Markdown-escaped


# --- layouts are checked, never guessed -----------------------------------------------------


def test_evaluate_refuses_a_layout_attack_that_does_not_fit_in_one_line():
    kwargs = {**SMALL, "adversary": adversary(2, "demote_best")}
    with pytest.raises(ConfigError) as err:
        evaluate(ENV, "ucb1_shared", runs=2, env_kwargs=kwargs)
    text = str(err.value)
    assert "\n" not in text and text.startswith("ucb1_shared: attack 'demote_best'")
    assert "'means' ([means (M), counts (M)], dim 2M)" in text
    assert "neighbors: 'counts_sums' ([counts (M), sums (M)], dim 2M)" in text
    with pytest.raises(ConfigError, match="ucb1: sends no messages .* no message of attack "
                                          "'gaussian' reaches it"):  # fmt: skip
        evaluate(ENV, "ucb1", runs=2, env_kwargs={**SMALL, "adversary": adversary(1, "gaussian")})
    # silent and crashed agents need no message: the no-communication reference runs
    evaluate(ENV, "ucb1", runs=2, env_kwargs={**SMALL, "adversary": adversary(1, "silent")})


def test_the_robust_suite_pairs_every_layout_attack_with_a_defence_and_a_plain_learner():
    from fedbandit_env.adversary import make_attack

    suite = get_suite("robust")
    cells, _ = suite.split()
    ran: dict[str, set[str]] = {}
    for c in cells:
        adv = c.env_kwargs.get("adversary")
        if adv is not None:
            ran.setdefault(adv["attack"], set()).add(c.name)
    pairs = {
        "means": ("byzres_ucb", "byzres_ucb fusion=mean"),
        "arm": ("robust_gosine", "gosine"),
        "arm_means": ("fed_mom_ucb clients=N", "fed_mom_ucb clients=N aggregate=mean"),
    }
    layout_attacks = [a for a in ran if make_attack(a).layout is not None]
    assert {"demote_best", "flipped_means", "reverse", "zhu_code", "zhu_intended", "rec_naive",
            "fedmom_sce1"} <= set(layout_attacks)  # fmt: skip
    for attack in layout_attacks:
        defence, plain = pairs[make_attack(attack).layout]
        assert {defence, plain} <= ran[attack], attack


# --- the matrix ranks like with like --------------------------------------------------------


def test_the_matrix_ranks_only_learners_of_the_same_coverage():
    base = {**SMALL, "horizon": 80}
    cells = [Cell(ENV, a, 80, 2, dict(base)) for a in ("ucb1", "ucb1_shared", "byzres_ucb")]
    for attack in ("silent", "uniform"):
        for agent in ("ucb1_shared", "byzres_ucb"):
            cells.append(Cell(ENV, agent, 80, 2, {**base, "adversary": adversary(1, attack)}))
    cells.append(Cell(ENV, "byzres_ucb", 80, 2, {**base, "adversary": adversary(1, "zhu_code")}))
    cells.append(Cell(ENV, "ucb1", 80, 2, {**base, "adversary": adversary(1, "silent")}))
    store = ResultsStore(":memory:")
    run_suite(Suite("t", tuple(cells)), store, quiet=True)
    (matrix,) = robust_matrices(build(store.rows()))
    groups = {g.attacks: g for g in matrix.groups}
    assert set(groups) == {("silent", "uniform", "zhu_code"), ("silent", "uniform"), ("silent",)}
    assert [r[:2] for r in groups[("silent",)].rows] == [("ref", "ucb1")]
    assert groups[("silent",)].reference
    # the widest coverage first, the reference last; each group ranked from 1
    assert [g.attacks for g in matrix.groups][-1] == ("silent",)
    assert [r[0] for r in groups[("silent", "uniform")].rows] == ["1"]
    text = robust_markdown(build(store.rows()))
    assert "| rank | learner | silent (f=1) | uniform (f=1) | zhu_code (f=1) |" in text
    assert "No-communication reference" in text and "| ref | ucb1 |" in text


# --- NaN indices are counted ----------------------------------------------------------------


class NaNIndex(TeamPolicy):
    """A test learner whose index is NaN at agent 0 on its first two steps of run 1."""

    agent_id = "nan_index_test"

    def reset(self, facts, rng):
        self.B, self.N, self.M = facts.num_runs, facts.num_agents, facts.num_arms
        self.t = 0
        self._u = rng.child("tiebreak").buffered("uniform", (self.N,))

    def act(self, obs):
        index = np.zeros((self.B, self.N, self.M))
        if self.t < 2 and self.B > 1:
            index[1, 0, 0] = np.nan
        self.t += 1
        return TeamAction(argmax_one_uniform(index, self._u.next()))


@pytest.fixture
def nan_learner():
    register_agent("nan_index_test", NaNIndex)
    yield
    _AGENTS.pop("nan_index_test", None)


def test_nan_indices_are_counted_per_run_stored_and_flagged(nan_learner):
    res = evaluate(ENV, "nan_index_test", runs=3, env_kwargs={**SMALL, "horizon": 10})
    assert res.nan_index_steps.tolist() == [0, 2, 0]
    assert res.summary()["nan_index_steps"] == 2 and res.summary()["nan_index_runs"] == 1
    cell = Cell(ENV, "nan_index_test", 10, 3, {k: v for k, v in SMALL.items() if k != "horizon"})
    store = ResultsStore(":memory:")
    run_suite(Suite("t", (cell,)), store, quiet=True)
    assert [json.loads(r.flags)["nan_index_steps"] for r in store.rows()] == [0, 2, 0]
    text = to_markdown(build(store.rows()))
    assert "**⚠ NaN index in 2 steps (1/3 runs)** |" in text
    # a learner that ranks nothing through the helpers reports nothing, not zero
    assert evaluate(ENV, "uniform", runs=2, env_kwargs={**SMALL, "horizon": 5}).nan_index_steps \
        is None  # fmt: skip


@pytest.mark.parametrize("agent", ["coop_ucb2", "dp_dec_ucb", "ldp_ucb"])
def test_the_three_known_sources_no_longer_give_nan_under_attack(agent):
    """coop_ucb2 and dp_dec_ucb (sqrt) and ldp_ucb (log) computed NaN indices under a
    heavy-tailed attack on N = 8 (complete graph, 2 Byzantine, T = 300, seeds 0-4)."""
    kwargs = {**SMALL, "horizon": 300, "instance_seed": None,
              "adversary": adversary(2, "heavy_tailed")}  # fmt: skip
    res = evaluate(ENV, agent, runs=5, env_kwargs=kwargs)
    assert res.nan_index_steps is not None and res.nan_index_steps.sum() == 0


def test_a_store_written_before_flags_reads_them_as_empty_and_a_writer_adds_the_column(tmp_path):
    import sqlite3

    path = tmp_path / "old.sqlite"
    store = ResultsStore(path)
    cell = Cell(ENV, "ucb1", 10, 2, {"num_agents": 2, "num_arms": 2})
    run_suite(Suite("t", (cell,)), store, quiet=True)
    store.close()
    conn = sqlite3.connect(path)
    conn.execute("ALTER TABLE runs DROP COLUMN flags")  # as a store of the release before
    conn.commit()
    conn.close()
    before = path.read_bytes()
    reader = ResultsStore(path, create=False)
    assert [r.flags for r in reader.rows()] == ["{}", "{}"]
    reader.close()
    assert path.read_bytes() == before  # a reader changes nothing
    writer = ResultsStore(path)
    assert [json.loads(r.flags) for r in writer.rows()] == [{}, {}]
    columns = {r[1] for r in writer._query("PRAGMA table_info(runs)")}
    assert "flags" in columns
