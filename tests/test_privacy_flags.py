"""Privacy says what it did: per-release and composed epsilon as two named fields, the clipped
fraction, and a warning above 1 % (docs/privacy.md, "Clipping"; docs/bench.md, "Flags")."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

from fedbandit_env.bench import evaluate
from fedbandit_env.bench.evaluate import ClippingWarning
from fedbandit_env.bench.executors import run_suite
from fedbandit_env.bench.leaderboard import build, to_markdown
from fedbandit_env.bench.store import ResultsStore
from fedbandit_env.bench.suites import Cell, Suite
from fedbandit_env.wrappers.privacy import MessagePrivatizer

ENV = "FedBandit/Homogeneous-v0"
KWARGS = {"num_agents": 4, "num_arms": 3, "topology": "ring", "horizon": 100}


def test_a_wrapped_run_reports_both_epsilons_and_the_clipped_fraction_and_warns():
    with pytest.warns(ClippingWarning, match=r"ucb1_shared: privacy wrapper clipped \d+% of the "
                                             r"payload coordinates .*sensitivity 1 \(L1/L2 "
                                             r"radius 0.5 around 0.0\)"):  # fmt: skip
        res = evaluate(ENV, "ucb1_shared", runs=3, env_kwargs=KWARGS, privacy={"epsilon": 1.0})
    summary = res.summary()
    assert summary["epsilon_per_release"] == 1.0
    # one Laplace release per agent and step, composed by basic composition: 100 steps
    assert summary["epsilon_composed"] == pytest.approx(100.0)
    assert summary["privacy_epsilon"] == pytest.approx(100.0)  # the run's guarantee
    assert summary["clipped_fraction"] > 0.5  # counts of up to 100 in a ball of radius 0.5


def test_the_clipped_fraction_is_the_share_of_sent_coordinates_that_changed():
    """A plain count against the privatizer's: rows of L1 norm above the radius change in every
    nonzero coordinate, rows inside do not; only sent rows count."""
    priv = MessagePrivatizer({"c": {"epsilon": 1.0, "sensitivity": 2.0}}, {"c": 3}, 2, 10)
    priv.reset([0])
    payload = np.array([[[0.2, 0.3, 0.0], [3.0, 0.0, 1.0]]])  # norms 0.5 (kept), 4 (clipped)
    priv.privatize(1, {"c": (np.array([[True, True]]), payload)})
    assert priv.clipped_fraction().tolist() == [2 / 6]  # coordinates 3.0 and 1.0 of 6 sent
    priv.privatize(2, {"c": (np.array([[True, False]]), payload)})  # only the kept row sent
    assert priv.clipped_fraction().tolist() == [2 / 9]


def test_no_warning_and_a_small_fraction_when_the_sensitivity_fits_the_payloads():
    with warnings.catch_warnings():
        warnings.simplefilter("error", ClippingWarning)
        res = evaluate(ENV, "ucb1_shared", runs=2, env_kwargs={**KWARGS, "horizon": 20},
                       privacy={"epsilon": 1.0, "sensitivity": 1000.0})  # fmt: skip
    assert res.summary()["clipped_fraction"] == 0.0


def test_rows_keep_the_privacy_flags_and_the_table_flags_heavy_clipping():
    cell = Cell(ENV, "ucb1_shared", 60, 2, {k: v for k, v in KWARGS.items() if k != "horizon"},
                privacy={"epsilon": 1.0})  # fmt: skip
    store = ResultsStore(":memory:")
    with pytest.warns(ClippingWarning):
        run_suite(Suite("t", (cell,)), store, quiet=True)
    flags = [json.loads(r.flags) for r in store.rows()]
    assert all(f["epsilon_per_release"] == 1.0 and f["epsilon_composed"] == 60.0 for f in flags)
    assert all(0.5 < f["clipped_fraction"] <= 1.0 for f in flags)
    text = to_markdown(build(store.rows()))
    assert "% of payload coordinates clipped** |" in text
