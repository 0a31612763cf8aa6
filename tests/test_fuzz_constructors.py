"""Fuzzing every public constructor (docs/limits.md, "Errors"): ``make`` of every registered id,
``make_vec``, ``make_agent`` of every registered learner (reset and stepped on a small
environment), the channel and privacy-wrapper configs and the RL views, with wrong types, huge
integers, NaN and inf, numpy scalars, negative numbers, misspelt names and plausible values.

Every failure must be a ``ValueError`` or ``TypeError`` whose message names an argument; no other
exception class, no ``MemoryError``, no hang (a case is stopped after
``fuzz_harness.CASE_TIMEOUT`` seconds and counted as a failure). Hypothesis runs derandomized
(fixed seed) with a bounded number of examples per target, so the test is reproducible and
takes a few seconds per group. ``benchmarks/fuzz_constructors.py`` runs the same harness with
more examples and prints the counts by outcome.
"""

from __future__ import annotations

import pytest

from fedbandit_env import list_envs
from tests.fuzz_harness import fuzz, targets

EXAMPLES = 12
TARGETS = sorted(targets())
SHIPPED_ENVS = [env_id for env_id in list_envs() if env_id.startswith("FedBandit/")]


def test_every_public_constructor_is_fuzzed():
    groups = {name.partition(":")[0] for name in TARGETS}
    assert groups == {"make", "make_vec", "make_agent", "channel", "privacy", "rl"}
    from importlib.metadata import entry_points

    # the shipped ids: the package's entry points and its own environments (a test may have
    # registered a learner or an environment of its own in this worker since collection)
    for agent_id in {entry.name for entry in entry_points(group="fedbandit.agents")}:
        assert f"make_agent:{agent_id}" in TARGETS
    for env_id in SHIPPED_ENVS:
        assert f"make:{env_id}" in TARGETS


@pytest.mark.parametrize("target", TARGETS)
def test_constructor_errors_are_value_or_type_errors_naming_an_argument(target):
    failures = []

    def record(name, kwargs, outcome, detail):
        if outcome == "other":
            failures.append(f"{name}({kwargs!r}): {detail}")

    fuzz(target, EXAMPLES, record)
    assert not failures, "\n".join(failures[:5])
