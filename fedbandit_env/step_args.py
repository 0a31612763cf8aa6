"""What the engine accepts at a step: the arms, the pull flag and the messages (docs/architecture.md,
"One step", item 2: errors name the run, the agent and the field).

:class:`StepChecks` holds the checks of one step's input that :meth:`Engine.check_step
<fedbandit_env.engine.Engine.check_step>` makes; the engine inherits them (it provides
``num_runs``, ``num_agents``, ``num_arms`` and ``channels``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from fedbandit_env.errors import ActionError
from fedbandit_env.shapes import RunAgents, Runs

Messages = Mapping[
    str, np.ndarray | tuple[np.ndarray, np.ndarray] | tuple[np.ndarray, np.ndarray, np.ndarray]
]
"""Per channel a payload, ``(send, payload)`` or, for a gossip channel in mode
``pull_one_neighbour``, ``(send, payload, exclude)`` (docs/channels.md)."""


def agent_name(i: int) -> str:
    return f"agent_{i}"


def _all_agents(field: str, expected: str) -> ActionError:
    """The error of an input that is wrong as a whole, not in one agent's row."""
    return ActionError("all agents", field, expected)


class StepChecks:
    """The engine's checks of a step's arms, pull flag, messages and exclusion masks."""

    num_runs: int
    num_agents: int
    num_arms: int
    channels: dict[str, Any]

    def _check_pull(self, pull: Any) -> Runs:
        """The pull flag as bool (B,): None/True/False/0/1 for every run, or one per run."""
        if pull is None:
            return np.ones(self.num_runs, dtype=bool)
        arr = np.asarray(pull)
        if arr.shape == ():
            arr = np.full(self.num_runs, arr.item())
        if arr.shape != (self.num_runs,):
            expected = f"expected a bool or a bool array of shape {(self.num_runs,)}"
            raise _all_agents("pull", f"{expected}, got shape {arr.shape}")
        if arr.dtype != bool:
            if not np.issubdtype(arr.dtype, np.integer) or ((arr != 0) & (arr != 1)).any():
                raise _all_agents("pull", f"expected bool (or 0/1 integers), got {pull!r}")
        return arr.astype(bool, copy=False)

    def _agent_error(self, bad: np.ndarray, field: str, expected: str) -> ActionError:
        """The error naming the first run and agent where ``bad`` (B, N) is True."""
        b, i = (int(x) for x in np.argwhere(bad)[0])
        run = f"run {b}, " if self.num_runs > 1 else ""
        return ActionError(f"{run}{agent_name(i)}", field, expected)

    def _check_arms(self, arms: Any) -> RunAgents:
        arr, shape = np.asarray(arms), (self.num_runs, self.num_agents)
        if arr.shape != shape:
            raise _all_agents("arm", f"expected an array of shape {shape}, got {arr.shape}")
        if arr.dtype.kind not in "iu":  # signed or unsigned integers
            raise _all_agents("arm", f"expected integer arms, got dtype {arr.dtype}")
        bad = (arr < 0) | (arr >= self.num_arms)
        if bad.any():
            got = int(arr[bad][0])
            raise self._agent_error(
                bad, "arm", f"expected an int in [0, {self.num_arms - 1}], got {got}"
            )
        return arr.astype(np.int64, copy=True)  # the engine's own copy (obs.last_arm)

    def _check_messages(self, messages: Messages) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        out, shape = {}, (self.num_runs, self.num_agents)
        for name, value in messages.items():
            field = f"messages.{name}"
            if name not in self.channels:
                channels = sorted(self.channels)
                raise _all_agents(field, f"unknown channel; this environment has {channels}")
            if isinstance(value, tuple):
                if len(value) not in (2, 3):
                    expected = "expected (send, payload) or (send, payload, exclude)"
                    raise _all_agents(field, f"{expected}, got a tuple of {len(value)}")
                send, payload = (np.asarray(v) for v in value[:2])
                send = self._check_send(name, send)
            else:  # a payload alone: every agent sends
                payload, send = np.asarray(value), np.ones(shape, dtype=bool)
            full = (*shape, self.channels[name].dim)
            if payload.shape != full:
                raise _all_agents(f"{field}.payload", f"expected shape {full}, got {payload.shape}")
            if payload.dtype.kind not in "fiu":  # floating or integer (not bool, complex, ...)
                raise _all_agents(f"{field}.payload", f"expected numbers, got {payload.dtype}")
            # C order: channels reduce over agents (server, hierarchical), and numpy's summation
            # order follows the memory layout, so a strided payload could change the last bits
            payload = np.ascontiguousarray(payload, dtype=np.float64)
            finite = np.isfinite(payload).all(axis=2)
            bad = send & ~finite
            if bad.any():
                expected = "expected finite numbers (NaN/inf)"
                raise self._agent_error(bad, f"{field}.payload", expected)
            if not finite.all():
                # the slots of agents that do not send may hold anything; zero them, as the
                # ParallelEnv view does, so that no channel ever sees a NaN
                payload = np.where(send[..., None], payload, 0.0)
            out[name] = (send, payload)
        return out

    def _check_excludes(self, messages: Messages) -> dict[str, np.ndarray]:
        """The exclusion masks (B, N, N) bool by channel, the third element of a ``(send,
        payload, exclude)`` message (docs/channels.md); names and lengths are already checked."""
        out, shape = {}, (self.num_runs, self.num_agents, self.num_agents)
        for name, value in messages.items():
            if not (isinstance(value, tuple) and len(value) == 3):
                continue
            channel, field = self.channels[name], f"messages.{name}.exclude"
            if not getattr(channel, "takes_exclude", False):
                mode = getattr(channel, "mode", None)
                what = f"kind {channel.kind!r}" + (f" in mode {mode!r}" if mode else "")
                raise _all_agents(
                    field,
                    "expected no exclusion mask: only a gossip channel in mode "
                    f"'pull_one_neighbour' takes one, and {name!r} is {what}",
                )
            mask = np.asarray(value[2])
            if mask.shape != shape or mask.dtype != bool:
                got = f"{mask.dtype} {mask.shape}"
                raise _all_agents(field, f"expected a bool array of shape {shape}, got {got}")
            out[name] = mask
        return out

    def _check_send(self, name: str, send: np.ndarray) -> np.ndarray:
        """The send mask as bool (B, N); 0/1 integers are accepted like Discrete(2) values."""
        shape, field = (self.num_runs, self.num_agents), f"messages.{name}.send"
        if send.shape != shape:
            raise _all_agents(field, f"expected a bool array of shape {shape}, got {send.shape}")
        if send.dtype != bool and not np.issubdtype(send.dtype, np.integer):
            raise _all_agents(field, f"expected bool (or 0/1 integers), got dtype {send.dtype}")
        bad = (send != 0) & (send != 1)
        if bad.any():
            expected = f"expected 0 or 1 (or bool), got {send[bad][0]}"
            raise self._agent_error(bad, field, expected)
        return send.astype(bool, copy=False)
