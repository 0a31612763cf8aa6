"""The batched engine: B independent runs of N agents on M arms, stepped with array operations.

DESIGN.md §2: arrays at the core. One engine step takes the arms (B, N) and the messages of every
channel, draws the rewards, charges and delivers the messages, and returns arrays. The PettingZoo
view (B = 1) and the vector view are thin layers over it, so both produce bit-identical
trajectories for the same run seed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from fedbandit_env.config import EnvConfig, check_sizes
from fedbandit_env.errors import ActionError, HorizonError
from fedbandit_env.instances import Instance
from fedbandit_env.linear import LinearProcess
from fedbandit_env.network import Charge, Ledger, make_channel
from fedbandit_env.seeding import BatchedRNG


@dataclass
class VecObservation:
    """What the agents observe after a step, batched: ``step`` steps completed so far (0 after
    reset), ``last_arm`` (B, N) (-1 after reset), ``last_reward`` (B, N) (0 after reset) and one
    delivery record per channel (see :mod:`fedbandit_env.network`)."""

    step: int
    last_arm: np.ndarray
    last_reward: np.ndarray
    deliveries: dict[str, Any]
    context: np.ndarray | None = (
        None  # linear family: the decision sets (B, N, K, d) of the next step
    )


@dataclass
class VecInfo:
    """Evaluation data agents must not use: ``instant_regret`` (B, N) pseudo-regret of the last
    pull against the global best arm, ``expected_reward`` (B, N), ``cumulative_regret`` (B, N),
    and the communication ``ledger``."""

    instant_regret: np.ndarray
    expected_reward: np.ndarray
    cumulative_regret: np.ndarray
    ledger: Ledger


Messages = Mapping[str, np.ndarray | tuple[np.ndarray, np.ndarray]]


def agent_name(i: int) -> str:
    return f"agent_{i}"


class Engine:
    """B runs of one environment configuration, stepped together."""

    def __init__(self, config: EnvConfig, num_runs: int):
        self.config = config
        self.num_runs = int(num_runs)
        check_sizes(
            config.num_agents,
            config.num_arms,
            self.num_runs,
            config.channels,
            topology=config.topology,
            dim=config.linear.dim if config.linear is not None else 0,
        )
        self.num_agents = config.num_agents
        self.num_arms = config.num_arms
        self.horizon = config.horizon
        self.channels = {
            name: make_channel(name, opts, config.topology, config.c1, config.c2)
            for name, opts in config.channels.items()
        }
        self.ledger = Ledger(self.num_runs, self.num_agents)
        shape = (self.num_runs, self.num_agents)
        self._no_send = np.zeros(shape, dtype=bool)
        self._run_index = np.arange(shape[0])[:, None]  # (B, 1) and (1, N): gathers by arm
        self._agent_index = np.arange(shape[1])[None, :]
        self._zeros = {n: np.zeros((*shape, ch.dim)) for n, ch in self.channels.items()}
        self._shared = config.shared_instance()
        self.linear = None
        if config.linear is not None and config.linear.dataset is not None:
            from fedbandit_env.datasets.classification import DatasetProcess

            self.linear = DatasetProcess(
                config.linear.dataset, self.num_runs, self.num_agents, self.num_arms
            )
        elif config.linear is not None:
            self.linear = LinearProcess(
                config.linear, self.num_runs, self.num_agents, self.num_arms
            )
        self.step_count = -1  # not reset yet

    # ------------------------------------------------------------------ reset
    def reset(self, seeds: Sequence[int]) -> tuple[VecObservation, VecInfo]:
        if len(seeds) != self.num_runs:
            raise ValueError(f"seeds: expected {self.num_runs} run seeds, got {len(seeds)}")
        self.seeds = [int(s) for s in seeds]
        context = None
        if self.linear is not None:
            context = self.linear.reset(self.seeds, self.config.instance_seed)
        else:
            if self._shared is not None:
                self.instances = [self._shared] * self.num_runs
            else:
                rng = BatchedRNG.for_runs(self.seeds, "instance")
                self.instances = [self.config.draw_instance(g) for g in rng.generators]
            self._set_means(self.instances)
            rewards = BatchedRNG.for_runs(self.seeds, "rewards")
            self._noise = rewards.buffered(self.config.reward.noise, (self.num_agents,))
        network = BatchedRNG.for_runs(self.seeds, "network")
        for name, channel in self.channels.items():
            channel.reset(network.child(f"channel/{name}"))
        self.ledger.reset()
        self.step_count = 0
        shape = (self.num_runs, self.num_agents)
        self.cumulative_regret = np.zeros(shape)
        obs = VecObservation(
            step=0,
            last_arm=np.full(shape, -1, dtype=np.int64),
            last_reward=np.zeros(shape),
            deliveries={n: ch.empty_delivery() for n, ch in self.channels.items()},
            context=context,
        )
        info = VecInfo(np.zeros(shape), np.zeros(shape), self.cumulative_regret.copy(), self.ledger)
        return obs, info

    def _set_means(self, instances: list[Instance]) -> None:
        """Reward parameters (B, N, M), writable so tests can perturb one agent's rewards."""
        self.means = np.stack([inst.means for inst in instances]).astype(np.float64)
        expected = np.stack([self.config.reward.expected(inst.means) for inst in instances])
        self.global_expected = expected.mean(axis=1)
        self.best_expected = self.global_expected.max(axis=1)

    # ------------------------------------------------------------------- step
    def step(
        self, arms: np.ndarray, messages: Messages | None = None
    ) -> tuple[VecObservation, np.ndarray, VecInfo]:
        if self.step_count < 0:
            raise HorizonError("step: the environment must be reset() before the first step")
        if self.step_count >= self.horizon:
            raise HorizonError(
                f"step: horizon exceeded: the episode ended after {self.horizon} steps; "
                "call reset() to start a new one"
            )
        arms = self._check_arms(arms)
        sends = self._check_messages(messages or {})
        self.step_count += 1
        t = self.step_count
        if self.linear is not None:
            rewards, expected, regret = self.linear.pull(arms)
        else:
            noise = self._noise.next()
            pulled = self.means[self._run_index, self._agent_index, arms]
            rewards = self.config.reward.sample(pulled, noise)
            expected = self.global_expected[self._run_index, arms]
            regret = self.best_expected[:, None] - expected
        self.cumulative_regret += regret
        charge = None
        deliveries = {}
        for name, channel in self.channels.items():
            send, payload = sends.get(name, (self._no_send, self._zeros[name]))
            deliveries[name], ch_charge = channel.transmit(t, send, payload)
            if charge is None:
                charge = ch_charge  # a fresh Charge per channel and step: safe to add into
            else:
                charge.add(ch_charge)
        self.ledger.record(charge or Charge.zeros(self.num_runs, self.num_agents))
        context = self.linear.context if self.linear is not None else None
        obs = VecObservation(t, arms, rewards, deliveries, context)
        info = VecInfo(regret, expected, self.cumulative_regret.copy(), self.ledger)
        return obs, rewards, info

    @property
    def truncated(self) -> bool:
        return self.step_count >= self.horizon

    # ------------------------------------------------------------- validation
    def _where(self, bad: np.ndarray) -> str:
        b, i = (int(x) for x in np.argwhere(bad)[0][:2])
        run = f"run {b}, " if self.num_runs > 1 else ""
        return f"{run}{agent_name(i)}"

    def _check_arms(self, arms: Any) -> np.ndarray:
        arr = np.asarray(arms)
        shape = (self.num_runs, self.num_agents)
        if arr.shape != shape:
            raise ActionError(
                "all agents", "arm", f"expected an array of shape {shape}, got {arr.shape}"
            )
        if not np.issubdtype(arr.dtype, np.integer):
            raise ActionError("all agents", "arm", f"expected integer arms, got dtype {arr.dtype}")
        bad = (arr < 0) | (arr >= self.num_arms)
        if bad.any():
            b, i = (int(x) for x in np.argwhere(bad)[0])
            raise ActionError(
                self._where(bad),
                "arm",
                f"expected an int in [0, {self.num_arms - 1}], got {int(arr[b, i])}",
            )
        return arr.astype(np.int64, copy=True)

    def _check_messages(self, messages: Messages) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        out = {}
        shape = (self.num_runs, self.num_agents)
        for name, value in messages.items():
            if name not in self.channels:
                raise ActionError(
                    "all agents",
                    f"messages.{name}",
                    f"unknown channel; this environment has {sorted(self.channels)}",
                )
            dim = self.channels[name].dim
            if isinstance(value, tuple):
                send, payload = (np.asarray(v) for v in value)
            else:
                payload = np.asarray(value)
                send = np.ones(shape, dtype=bool)
            send = self._check_send(name, send)
            if payload.shape != (*shape, dim):
                raise ActionError(
                    "all agents",
                    f"messages.{name}.payload",
                    f"expected shape {(*shape, dim)}, got {payload.shape}",
                )
            if not np.issubdtype(payload.dtype, np.floating) and not np.issubdtype(
                payload.dtype, np.integer
            ):
                raise ActionError(
                    "all agents",
                    f"messages.{name}.payload",
                    f"expected numbers, got {payload.dtype}",
                )
            # C order: channels reduce over agents (server, hierarchical), and numpy's summation
            # order follows the memory layout, so a strided payload could change the last bits
            payload = np.ascontiguousarray(payload, dtype=np.float64)
            with np.errstate(over="ignore", invalid="ignore"):  # junk may overflow the sum
                total = payload.sum()
            if np.isfinite(total):  # fast path: no NaN/inf anywhere
                out[name] = (send, payload)
                continue
            finite = np.isfinite(payload).all(axis=2)
            bad = send & ~finite
            if bad.any():
                raise ActionError(
                    self._where(bad),
                    f"messages.{name}.payload",
                    "expected finite numbers (NaN/inf)",
                )
            # Slots of agents that do not send may hold anything; channels mask them with
            # arithmetic (0 * NaN = NaN), so zero them here, as the ParallelEnv view does.
            out[name] = (send, np.where(send[..., None], payload, 0.0))
        return out

    def _check_send(self, name: str, send: np.ndarray) -> np.ndarray:
        """The send mask as bool (B, N); 0/1 integers are accepted like Discrete(2) values."""
        shape = (self.num_runs, self.num_agents)
        field = f"messages.{name}.send"
        if send.shape != shape:
            raise ActionError(
                "all agents", field, f"expected a bool array of shape {shape}, got {send.shape}"
            )
        if send.dtype == bool:
            return send
        if not np.issubdtype(send.dtype, np.integer):
            raise ActionError(
                "all agents", field, f"expected bool (or 0/1 integers), got dtype {send.dtype}"
            )
        bad = (send != 0) & (send != 1)
        if bad.any():
            b, i = (int(x) for x in np.argwhere(bad)[0])
            raise ActionError(
                self._where(bad), field, f"expected 0 or 1 (or bool), got {send[b, i]}"
            )
        return send.astype(bool)
