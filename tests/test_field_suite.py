"""The ``field`` suite (the field agents next to their papers' baselines) and the registry:
the ``standard`` suite sweeps the field agents in through the registry, and cells of ids that
are not registered in an installation are skipped with a note instead of failing."""

from __future__ import annotations

import dataclasses

from fedbandit_env.bench.executors import run_suite
from fedbandit_env.bench.store import ResultsStore
from fedbandit_env.bench.suites import Cell, Suite, get_suite

FIELD = ("dducb", "coop_ucb2", "fed1_ucb", "fed2_ucb", "dislinucb", "gosine", "ldp_ucb")
OURS = ("fed1_ucb", "fed2_ucb", "dislinucb")


def test_the_field_suite_names_the_seven_agents_and_baselines():
    suite = get_suite("field")
    ids = {c.agent_id for c in suite.candidates()}
    assert set(FIELD) <= ids
    assert {"ucb1", "ucb1_shared", "gossip_ucb", "linucb", "fed_lin_ucb"} <= ids
    linear = {c.agent_id for c in suite.candidates() if "Linear" in c.env_id}
    assert "dislinucb" in linear and not linear & {"fed1_ucb", "fed2_ucb", "dducb"}


def test_unregistered_ids_are_skipped_with_a_note():
    suite = Suite(
        "t",
        (
            Cell("FedBandit/Homogeneous-v0", "not_a_field_agent", 50, 2, {"num_agents": 3}),
            Cell("FedBandit/Homogeneous-v0", "ucb1", 50, 2, {"num_agents": 3}),
        ),
    )
    notes: list[str] = []
    cells = suite.available(notes.append)
    assert [c.agent_id for c in cells] == ["ucb1"]
    assert notes == [
        "suite t: skipping on FedBandit/Homogeneous-v0: not_a_field_agent: "
        "['not_a_field_agent'] not registered in this installation"
    ]


def test_the_field_suite_runs_its_registered_cells(tmp_path):
    """Every available field cell of this branch's agents, shrunk (T = 200, 2 seeds), runs into
    a store; the multi-armed agents are skipped on the linear family and vice versa."""
    notes: list[str] = []
    cells = [c for c in get_suite("field").available(notes.append) if c.agent_id in OURS]
    assert {(c.agent_id, c.env_id.split("/")[1]) for c in cells} == {
        ("fed1_ucb", "Heterogeneous-v0"),
        ("fed2_ucb", "Heterogeneous-v0"),
        ("fed1_ucb", "Homogeneous-v0"),
        ("fed2_ucb", "Homogeneous-v0"),
        ("dislinucb", "LinearContextual-v0"),
    }
    small = Suite("field_small", tuple(dataclasses.replace(c, horizon=200, runs=2) for c in cells))
    store = ResultsStore(tmp_path / "f.sqlite")
    assert run_suite(small, store, quiet=True) == 2 * len(cells)
    assert all(r.final_regret_per_agent >= 0 for r in store.rows())


def test_the_standard_suite_sweeps_the_field_agents_in():
    notes: list[str] = []
    cells = get_suite("standard").available(notes.append)
    got = {(c.agent_id, c.env_id.split("/")[1]) for c in cells if c.agent_id in OURS}
    assert got == {
        ("fed1_ucb", "Heterogeneous-v0"),
        ("fed2_ucb", "Heterogeneous-v0"),
        ("fed1_ucb", "Homogeneous-v0"),
        ("fed2_ucb", "Homogeneous-v0"),
        ("dislinucb", "LinearContextual-v0"),
    }
    assert any("dislinucb" in n and "family: expected 'linear'" in n for n in notes)
