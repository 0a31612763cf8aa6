"""The batched engine: B independent runs of N agents on M arms, stepped with array operations.

DESIGN.md §2: arrays at the core. One engine step takes the arms (B, N) and the messages of every
channel, draws the rewards, charges and delivers the messages, and returns arrays. The PettingZoo
view (B = 1) and the vector view are thin layers over it, so both produce bit-identical
trajectories for the same run seed. A run may also take a communication-only step (``pull``
False: messages travel, no arm is pulled; docs/architecture.md, "Communication steps"); the
horizon counts pulls.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from fedbandit_env.config import EnvConfig, check_sizes
from fedbandit_env.contextual import ContextualProcess
from fedbandit_env.errors import ActionError, CommunicationError, HorizonError
from fedbandit_env.instances import Instance
from fedbandit_env.network import Charge, Ledger, make_channel
from fedbandit_env.seeding import BatchedRNG

PULL = 0
"""``phase`` of a step in which the run's agents pulled an arm (and of the observation after reset)."""
COMMUNICATION = 1
"""``phase`` of a communication-only step: messages travelled, no arm was pulled
(docs/architecture.md, "Communication steps")."""
assert (PULL, COMMUNICATION) == (0, 1)  # the mixed step builds the phase as ``~pulling``


@dataclass
class VecObservation:
    """What the agents observe after a step, batched: ``step`` engine steps completed so far
    (0 after reset), ``last_arm`` (B, N) the arm of the last pull (-1 before the first pull),
    ``last_reward`` (B, N) its reward (0 before the first pull) and one delivery record per
    channel (see :mod:`fedbandit_env.network`).

    ``phase`` (B,) is :data:`PULL` or :data:`COMMUNICATION`: what the last step of each run was;
    after a communication step ``last_arm``/``last_reward`` still describe the last pull, so a
    learner must not fold them in again. ``pulls`` (B,) counts each run's pulls (the horizon's
    clock); it equals ``step`` in a run that never took a communication step. Both default to
    "every step pulled" when a caller builds an observation by hand."""

    step: int
    last_arm: np.ndarray
    last_reward: np.ndarray
    deliveries: dict[str, Any]
    context: np.ndarray | None = (
        None  # linear family: the decision sets (B, N, K, d) of the next step
    )
    phase: np.ndarray | None = None
    pulls: np.ndarray | None = None

    def __post_init__(self) -> None:
        runs = np.shape(self.last_arm)[0]
        if self.phase is None:
            self.phase = np.zeros(runs, dtype=np.int64)
        if self.pulls is None:
            self.pulls = np.full(runs, self.step, dtype=np.int64)


@dataclass
class VecInfo:
    """Evaluation data agents must not use: ``instant_regret`` (B, N) pseudo-regret of the last
    pull against the global best arm, ``expected_reward`` (B, N), ``cumulative_regret`` (B, N),
    and the communication ``ledger``."""

    instant_regret: np.ndarray
    expected_reward: np.ndarray
    cumulative_regret: np.ndarray
    ledger: Ledger


_SMALL_PAYLOAD = 1 << 17
"""Payloads up to this many floats are checked for NaN/inf with ``isfinite`` (its boolean
temporary costs less than the error-state context of the one-pass sum up to about 2^17 floats,
measured side by side); larger ones with the sum."""

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
        # flat gathers by arm: (b * N + i) * M into the means, b * M into the global tables
        self._flat_base = np.arange(shape[0] * shape[1], dtype=np.int64).reshape(shape)
        self._flat_base *= self.num_arms
        self._run_base = np.repeat(np.arange(shape[0], dtype=np.int64) * self.num_arms, shape[1])
        self._run_base = self._run_base.reshape(shape)
        self._no_charge = Charge.zeros(*shape)  # the charge of a step without channels
        for array in vars(self._no_charge).values():
            array.setflags(write=False)
        self._shared = config.shared_instance()
        self.linear: ContextualProcess | None = None
        if config.linear is not None:  # the linear family: generated or data-set contexts
            self.linear = config.linear.build_process(self.num_runs, self.num_agents, self.num_arms)
        self.step_count = -1  # not reset yet (engine steps, pulls and communication steps)
        self.max_communication_steps = config.max_communication_steps

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
        self.pulls = np.zeros(self.num_runs, dtype=np.int64)
        self.streak = np.zeros(self.num_runs, dtype=np.int64)  # communication steps in a row
        self.even = True  # every run has pulled in every step so far
        self.headroom = self.horizon  # steps every run can still pull in: horizon - max pulls
        self._all_pull_phase = np.zeros(self.num_runs, dtype=np.int64)  # PULL in every run
        self._all_pull_phase.setflags(write=False)
        shape = (self.num_runs, self.num_agents)
        self.cumulative_regret = np.zeros(shape)
        self.last_arm = np.full(shape, -1, dtype=np.int64)
        self.last_reward = np.zeros(shape)
        obs = VecObservation(
            step=0,
            last_arm=self.last_arm,
            last_reward=self.last_reward,
            deliveries={n: ch.empty_delivery() for n, ch in self.channels.items()},
            context=context,
            phase=np.zeros(self.num_runs, dtype=np.int64),
            pulls=self.pulls.copy(),
        )
        info = VecInfo(np.zeros(shape), np.zeros(shape), self.cumulative_regret.copy(), self.ledger)
        return obs, info

    def _set_means(self, instances: list[Instance]) -> None:
        """Reward parameters (B, N, M), writable so tests can perturb one agent's rewards."""
        # C order, so the flat view the steps gather from is a view, not a copy
        self.means = np.ascontiguousarray(np.stack([inst.means for inst in instances]), np.float64)
        expected = np.stack([self.config.reward.expected(inst.means) for inst in instances])
        self.global_expected = expected.mean(axis=1)
        self.best_expected = self.global_expected.max(axis=1)
        # the pseudo-regret of each (run, arm), the same subtraction a step made per pull
        self._gap = (self.best_expected[:, None] - self.global_expected).reshape(-1)

    # ------------------------------------------------------------------- step
    def step(
        self, arms: np.ndarray, messages: Messages | None = None, pull: Any = None
    ) -> tuple[VecObservation, np.ndarray, VecInfo]:
        """One engine step. ``pull`` (docs/architecture.md, "Communication steps"): None or True
        (every run pulls), False (no run pulls) or a bool array (B,): the runs where it is False
        take a communication-only step (messages are sent, charged and delivered as in any step;
        no reward is drawn, regret and the run's pull count stay; ``arms`` are ignored there).
        A run that has finished its ``horizon`` pulls while others have not ignores the step."""
        if self.step_count < 0:
            raise HorizonError("step: the environment must be reset() before the first step")
        pulling = None if pull is None else self._check_pull(pull)  # None: every run pulls
        if pulling is None or pulling.all():
            if self.even:
                return self._step_all(arms, messages)
            if self.headroom > 0:  # after communication steps, all runs live
                self.streak.fill(0)  # what the mixed step does when every run pulls
                return self._step_all(arms, messages, live=True)
        if pulling is None:
            pulling = np.ones(self.num_runs, dtype=bool)
        return self._step_mixed(arms, messages, pulling)

    def _step_all(
        self, arms, messages, live: bool = False
    ) -> tuple[VecObservation, np.ndarray, VecInfo]:
        """Every run pulls (the pull loop: kept as lean as before communication steps).
        ``live``: the caller has checked that every run has pulls left (the runs' step counts
        may differ from their pull counts after communication steps); the trajectory is the
        one :meth:`_step_mixed` makes when every run pulls."""
        if not live and self.step_count >= self.horizon:
            raise HorizonError(
                f"step: horizon exceeded: the episode ended after {self.horizon} steps; "
                "call reset() to start a new one"
            )
        arms = self._check_arms(arms)
        sends = self._check_messages(messages or {})
        self.step_count += 1
        t = self.step_count
        self.pulls += 1
        self.headroom -= 1
        rewards, expected, regret = self._draw(arms)
        self.cumulative_regret += regret
        deliveries = self._transmit(t, sends)
        context = self.linear.context if self.linear is not None else None
        self.last_arm, self.last_reward = arms, rewards
        obs = VecObservation(
            t, arms, rewards, deliveries, context, self._pull_phase(), self.pulls.copy()
        )
        info = VecInfo(regret, expected, self.cumulative_regret.copy(), self.ledger)
        return obs, rewards, info

    def _pull_phase(self) -> np.ndarray:
        """The ``phase`` of a step in which every run pulled: one read-only array per reset."""
        return self._all_pull_phase

    def _draw(
        self, arms: np.ndarray, runs: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Rewards, expected rewards and regret of the pulls; ``runs`` (B,): only these runs
        pull and consume their reward streams (the others' outputs are discarded)."""
        if self.linear is not None:
            return self.linear.pull(arms, runs)
        noise = self._noise.next(runs)
        # flat gathers (means[b, i, arms[b, i]] and global_expected[b, arms[b, i]]); the means
        # are read through a view each step, so edits of ``self.means`` in place take effect
        pulled = self.means.reshape(-1).take(self._flat_base + arms)
        rewards = self.config.reward.sample(pulled, noise)
        column = self._run_base + arms
        expected = self.global_expected.reshape(-1).take(column)
        regret = self._gap.take(column)
        return rewards, expected, regret

    def _transmit(self, t: int, sends: dict) -> dict[str, Any]:
        charge = None
        deliveries = {}
        for name, channel in self.channels.items():
            message = sends.get(name)
            if channel.idle_is_free and (
                message is None or (message[0] is not channel.everyone and not message[0].any())
            ):
                deliveries[name] = channel.idle_delivery()  # nobody sends: nothing to do
                continue
            send, payload = message or (self._no_send, self._zeros[name])
            deliveries[name], ch_charge = channel.transmit(t, send, payload)
            if charge is None:
                charge = ch_charge  # a channel's own (possibly read-only, shared) charge
            elif charge.frozen:  # a channel's constant charge is never written: a new sum
                charge = charge.plus(ch_charge)
            else:
                charge.add(ch_charge)
        if charge is None:  # nothing travelled: the totals stay, the step's charge is zero
            self.ledger.step = self._no_charge
        else:
            self.ledger.record(charge)
        return deliveries

    def _step_mixed(self, arms, messages, pulling: np.ndarray):
        """Some runs communicate without pulling, or some have finished their pulls.

        A run that does not pull draws nothing from its ``rewards`` streams (reward noise,
        decision sets: its decision set stays the one it was shown), so the k-th pull of a run
        sees the same reward draws whatever communication steps come before it; the channels
        draw every step, as in any step. A run's streams depend only on its own sequence of
        steps, so run b of a batch stays bit-identical to that seed run alone."""
        every_live = self.headroom > 0  # every run has pulls left: no run is finished
        live = None if every_live else self.pulls < self.horizon
        if live is not None and not live.any():
            raise HorizonError(
                f"step: horizon exceeded: the episode ended after {self.horizon} pulls; "
                "call reset() to start a new one"
            )
        self.even = False
        if live is None:
            talking = ~pulling
        else:
            pulling = pulling & live
            talking = live & ~pulling
        self.streak += 1
        self.streak *= talking  # communication steps in a row: 0 where the run pulled (or ended)
        self._check_streak(self.streak)
        arms = self._check_arms(arms)
        sends = self._check_messages(messages or {})
        if live is not None and not live.all():  # finished runs send nothing
            for name, (send, payload) in list(sends.items()):
                sends[name] = (send & live[:, None], payload)
        self.step_count += 1
        self.pulls += pulling
        self.headroom = self.horizon - int(self.pulls.max())
        rows = pulling[:, None]
        if pulling.any():
            rewards, expected, regret = self._draw(arms, pulling)
            rewards = np.where(rows, rewards, 0.0)
            expected = np.where(rows, expected, 0.0)
            regret = np.where(rows, regret, 0.0)
        else:  # nobody pulls: no stream is touched, nothing is drawn (the values are the same)
            rewards, expected, regret = (np.zeros(arms.shape) for _ in range(3))
            if self.linear is not None:  # the sets stay; a copy, as the select made before
                self.linear.context = self.linear.context.copy()
        self.cumulative_regret += regret
        deliveries = self._transmit(self.step_count, sends)
        context = self.linear.context if self.linear is not None else None
        self.last_arm = np.where(rows, arms, self.last_arm)
        self.last_reward = np.where(rows, rewards, self.last_reward)
        phase = (~pulling).astype(np.int64)  # COMMUNICATION (1) where no pull, else PULL (0)
        obs = VecObservation(
            self.step_count,
            self.last_arm,
            self.last_reward,
            deliveries,
            context,
            phase,
            self.pulls.copy(),
        )
        info = VecInfo(regret, expected, self.cumulative_regret.copy(), self.ledger)
        return obs, rewards, info

    def _check_streak(self, streak: np.ndarray) -> None:
        """Refuse a step that makes a run's communication streak longer than allowed."""
        if streak.max() > self.max_communication_steps:
            b = int(np.argmax(streak > self.max_communication_steps))
            run = f"run {b}: " if self.num_runs > 1 else ""
            raise CommunicationError(
                f"step: {run}more than max_communication_steps={self.max_communication_steps} "
                "communication steps in a row without a pull; the learner must pull (pull=True) "
                "or the environment be made with a larger max_communication_steps"
            )

    def check_step(
        self, arms: Any, messages: Messages | None = None, pull: Any = None
    ) -> tuple[dict[str, tuple[np.ndarray, np.ndarray]], np.ndarray, np.ndarray]:
        """Every check :meth:`step` makes, without stepping: raises what ``step`` would raise
        (before reset, after the last pull, a bad pull flag, a too-long communication streak, a
        bad arm or message) and changes nothing. Returns the checked messages, the runs that
        would pull and the runs still live (not finished), each (B,) bool; a wrapper that acts
        on the messages before the step (privacy) calls it first, so that a refused step
        touches nothing."""
        if self.step_count < 0:
            raise HorizonError("step: the environment must be reset() before the first step")
        live = self.pulls < self.horizon
        if not live.any():
            raise HorizonError(
                f"step: horizon exceeded: the episode ended after {self.horizon} pulls; "
                "call reset() to start a new one"
            )
        pulling = self._check_pull(pull) & live
        self._check_streak((self.streak + 1) * (live & ~pulling))
        self._check_arms(arms)
        sends = self._check_messages(messages or {})
        return sends, pulling, live

    def _check_pull(self, pull: Any) -> np.ndarray:
        """The pull flag as bool (B,): None/True/False/0/1 for every run, or one per run."""
        if pull is None:
            return np.ones(self.num_runs, dtype=bool)
        arr = np.asarray(pull)
        if arr.shape == ():
            arr = np.full(self.num_runs, arr.item())
        if arr.shape != (self.num_runs,):
            raise ActionError(
                "all agents",
                "pull",
                f"expected a bool or a bool array of shape ({self.num_runs},), got shape "
                f"{arr.shape}",
            )
        if arr.dtype != bool:
            if not np.issubdtype(arr.dtype, np.integer) or ((arr != 0) & (arr != 1)).any():
                raise ActionError(
                    "all agents", "pull", f"expected bool (or 0/1 integers), got {pull!r}"
                )
            arr = arr.astype(bool)
        return arr

    @property
    def done_runs(self) -> np.ndarray:
        """(B,) bool: the runs that have made their ``horizon`` pulls."""
        return self.pulls >= self.horizon

    @property
    def truncated(self) -> bool:
        """Every run has made its ``horizon`` pulls (the episode is over)."""
        if self.even:
            return self.step_count >= self.horizon
        if self.headroom > 0:  # no run has made its horizon pulls yet
            return False
        return bool((self.pulls >= self.horizon).all())

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
        if arr.dtype != np.int64 and not np.issubdtype(arr.dtype, np.integer):
            raise ActionError("all agents", "arm", f"expected integer arms, got dtype {arr.dtype}")
        out = arr.astype(np.int64, copy=True)  # the engine's own copy (obs.last_arm)
        # one reduction for both bounds: read as unsigned, a negative arm is huge
        if out.view(np.uint64).max() >= self.num_arms:
            bad = (arr < 0) | (arr >= self.num_arms)
            if bad.any():
                b, i = (int(x) for x in np.argwhere(bad)[0])
                raise ActionError(
                    self._where(bad),
                    "arm",
                    f"expected an int in [0, {self.num_arms - 1}], got {int(arr[b, i])}",
                )
        return out

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
            channel = self.channels[name]
            dim = channel.dim
            if isinstance(value, tuple):
                send, payload = (np.asarray(v) for v in value)
                send = self._check_send(name, send)
                if send is not channel.everyone and send.all():
                    send = channel.everyone  # every agent sends: the channel's shared mask
            else:
                payload = np.asarray(value)
                send = channel.everyone
            if payload.shape != (*shape, dim):
                raise ActionError(
                    "all agents",
                    f"messages.{name}.payload",
                    f"expected shape {(*shape, dim)}, got {payload.shape}",
                )
            if payload.dtype.kind not in "fiu":  # floating or integer (not bool, complex, ...)
                raise ActionError(
                    "all agents",
                    f"messages.{name}.payload",
                    f"expected numbers, got {payload.dtype}",
                )
            # C order: channels reduce over agents (server, hierarchical), and numpy's summation
            # order follows the memory layout, so a strided payload could change the last bits
            payload = np.ascontiguousarray(payload, dtype=np.float64)
            if payload.size <= _SMALL_PAYLOAD:
                clean = bool(np.isfinite(payload).all())
            else:  # one pass, no temporary: a finite sum means no NaN/inf anywhere
                with np.errstate(over="ignore", invalid="ignore"):  # junk may overflow the sum
                    clean = bool(np.isfinite(payload.sum()))
            if clean:  # fast path: no NaN/inf anywhere
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
