"""Message latency: the ``latency`` option of an environment (docs/time.md, "latency").

Every channel delivers a message at some step after it is sent (the same step for ``neighbors``,
``gossip``, ``server`` and ``push``; hop h - 1 steps later for ``flood``; after the sinks'
eccentricity for ``hierarchical``: docs/architecture.md, "Timing conventions"). ``latency`` adds a
fixed delay of L engine steps to every delivery of every channel:

* ``L`` (an int >= 1) or ``{"kind": "fixed", "steps": L}``: what a channel delivers at engine step
  t reaches the receivers in the observation of engine step t + L. Messages arrive in the order
  they were sent (every message takes the same time). A message is charged when it is sent, as
  always: the messages of the last L steps of a run are charged and never delivered (in flight at
  the horizon).
* ``None`` or ``0``: no latency (the default): the channels' own timing.

Latency counts engine steps, communication-only steps included (a message travels while the
agents talk), where a reward delay counts pulls. Per-link and random latencies are not built yet
and are refused by name. A learner that relies on the channels' own timing (a reply in the step
after its request) refuses a latency by name (docs/time.md, "What every learner does").

The numpy engine keeps the last L steps' delivery records of each channel (:class:`LatencyLine`);
an engine step then costs O(L) records of memory and one swap per channel, whatever L
(``benchmarks/bench_time_options.py`` times it).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from typing import Any

from fedbandit_env.delay import fixed_option

LATENCY_KINDS: tuple[str, ...] = ("fixed",)
"""The accepted ``latency`` kinds (an int is ``fixed``)."""


def latency_option(value: Any, *, horizon: int) -> int | None:
    """The latency L >= 1 in engine steps of a ``latency`` argument, or None for none."""
    return fixed_option("latency", value, "steps", "the latency L in engine steps", horizon,
                        "per-link and random latencies are not built yet")  # fmt: skip


class LatencyLine:
    """The numpy engine's deliveries in flight: per channel, the records of the last L steps
    (oldest first), started with L empty records."""

    def __init__(self, latency: int, channels: Mapping[str, Any]):
        self.latency = latency
        self.line = {name: deque(ch.empty_delivery() for _ in range(latency))
                     for name, ch in channels.items()}  # fmt: skip

    def shift(self, deliveries: dict[str, Any]) -> dict[str, Any]:
        """This step's records enter the line; the records sent L steps ago leave it (what the
        receivers observe now)."""
        out = {}
        for name, record in deliveries.items():
            line = self.line[name]
            line.append(record)
            out[name] = line.popleft()
        return out
