"""A local Ray stays on this machine (docs/bench.md, "Executors"): ``--executor ray`` without
an address starts Ray bound to the loopback address, with no dashboard, so no other machine
can submit jobs to it."""

from __future__ import annotations

import pytest

from fedbandit_env.agent_registry import agent_entry
from fedbandit_env.bench.executors import LOOPBACK, WorkUnit, execute
from fedbandit_env.bench.suites import Cell


def test_a_local_ray_instance_listens_on_loopback_only():
    ray = pytest.importorskip("ray")
    if ray.is_initialized():
        ray.shutdown()
    cell = Cell("FedBandit/Heterogeneous-v0", "ucb1", 20, 2, {"num_agents": 2, "num_arms": 2})
    unit = WorkUnit("t", cell, (0, 1), agent_entry("ucb1"))
    try:
        rows = list(execute([unit], "ray", n_jobs=1))
        nodes = ray.nodes()
        assert [n["NodeManagerAddress"] for n in nodes] == [LOOPBACK]
        assert ray.get_runtime_context().gcs_address.startswith(f"{LOOPBACK}:")
        assert len(rows) == 1 and len(rows[0]) == 2
    finally:
        ray.shutdown()
