"""Test-session hooks.

The tests marked ``slow`` run first. The suite runs on two workers (pytest-xdist,
``--dist worksteal``: each worker starts with a contiguous half of the collected tests and an
idle worker takes the end of the other's queue), so with the long tests first they start early
and the last tests of the run are short ones: the workers finish together rather than one
waiting on a long test that began near the end. The order within each group is the collection
order; no test depends on another's order.
"""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Move the ``slow`` tests to the front, keeping the collection order within each group."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
