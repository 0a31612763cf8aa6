"""The batched engine: B independent runs of N agents on M arms, stepped with array operations.

The PettingZoo view (B = 1) and the vector view are thin layers over it, so both produce
bit-identical trajectories for the same run seed. docs/architecture.md: "One step", "Seeding",
"Communication steps" (``pull`` False: messages travel, no arm is pulled; the horizon counts
pulls); with ``adversary=``, docs/adversary.md, "What roles do in a step".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from fedbandit_env.adversary import Adversary, AttackSpec
from fedbandit_env.adversary.payloads import honest_agents
from fedbandit_env.block_streams import RandomStreams, streams_for
from fedbandit_env.churn import Presence, check_churn_channels
from fedbandit_env.clock import EventClock
from fedbandit_env.config import EnvConfig, check_sizes
from fedbandit_env.contextual import ContextualProcess
from fedbandit_env.delay import DelayLine, RandomDelay, RandomDelayLine
from fedbandit_env.drift import MeansDrift
from fedbandit_env.errors import CommunicationError, HorizonError
from fedbandit_env.instances import Instance
from fedbandit_env.latency import LatencyLine, LinkLatency, LinkLine, check_link_channels
from fedbandit_env.network import Ledger, make_channel
from fedbandit_env.seeding import BatchedRNG
from fedbandit_env.shapes import RunAgentContexts, RunAgentPayload, RunAgents, Runs
from fedbandit_env.step_args import Messages, StepChecks

PULL = 0
"""``phase`` of a step in which the run's agents pulled an arm (and of the observation after reset)."""
COMMUNICATION = 1
"""``phase`` of a communication-only step: messages travelled, no arm was pulled
(docs/architecture.md, "Communication steps")."""


@dataclass
class VecObservation:
    """What the agents observe after a step, batched: ``step`` engine steps completed so far
    (0 after reset), ``last_arm`` (B, N) the arm of the last pull (-1 before the first pull),
    ``last_reward`` (B, N) its reward (0 before the first pull), one delivery record per channel
    (see :mod:`fedbandit_env.network`), ``phase`` (B,) :data:`PULL` or :data:`COMMUNICATION` and
    ``pulls`` (B,) each run's pulls (docs/architecture.md, "Communication steps"). ``phase`` and
    ``pulls`` default to "every step pulled" when a caller builds an observation by hand.
    ``active``, ``pulled`` and ``time``: an event clock's (:meth:`EventClock.stamp`);
    ``arrived_arm``, ``arrived_reward`` and ``arrived_pull``: a reward delay's
    (:meth:`DelayLine.stamp`; (B, N, D) under a random delay, :class:`RandomDelayLine`)."""

    step: int
    last_arm: RunAgents
    last_reward: RunAgents
    deliveries: dict[str, Any]
    context: RunAgentContexts | None = None  # linear family: the next step's decision sets
    phase: Runs | None = None
    pulls: Runs | None = None
    active: RunAgents | None = None
    pulled: RunAgents | None = None
    time: Runs | None = None
    arrived_arm: RunAgents | None = None
    arrived_reward: RunAgents | None = None
    arrived_pull: RunAgents | None = None

    def __post_init__(self) -> None:
        runs = np.shape(self.last_arm)[0]
        self.phase = np.zeros(runs, np.int64) if self.phase is None else self.phase
        self.pulls = np.full(runs, self.step, np.int64) if self.pulls is None else self.pulls


@dataclass
class VecInfo:
    """Evaluation data agents must not use: ``instant_regret`` (B, N) pseudo-regret of the last
    pull against the global best arm, ``expected_reward`` (B, N), ``cumulative_regret`` (B, N),
    the communication ``ledger`` and the runs' ``roles`` (B, N) with ``adversary=`` (None
    without; docs/adversary.md); :attr:`honest` selects the agents the honest metrics count."""

    instant_regret: RunAgents
    expected_reward: RunAgents
    cumulative_regret: RunAgents
    ledger: Ledger
    roles: RunAgents | None = None

    @property
    def honest(self) -> RunAgents:
        """(B, N) bool: the honest agents (every agent without an adversary)."""
        return honest_agents(self.roles, self.cumulative_regret)


class CheckedStep(NamedTuple):
    """A step's input after :meth:`Engine.check_step`: the arms (int64, the engine's own copy),
    the messages as checked (send (B, N) bool, payload (B, N, dim) float64) per channel, the
    runs that pull and the runs still live (each (B,) bool), and the runs' communication
    streaks after the step (B,)."""

    arms: RunAgents
    sends: dict[str, tuple[RunAgents, RunAgentPayload]]
    pulling: Runs
    live: Runs
    streak: Runs


class Engine(StepChecks):
    """B runs of one environment configuration, stepped together."""

    def __init__(self, config: EnvConfig, num_runs: int, random_streams: RandomStreams = "per_run"):
        self.config = config
        self.num_runs = int(num_runs)
        streams_for(random_streams, [0], "rewards")  # checks the name
        self.random_streams = random_streams
        check_sizes(config.num_agents, config.num_arms, self.num_runs, config.channels,
                    topology=config.topology, dim=0 if config.linear is None else config.linear.dim)
        self.num_agents = config.num_agents
        self.num_arms = config.num_arms
        runs_agents = self.num_runs * self.num_agents
        self._flat_start = (np.arange(runs_agents) * self.num_arms).reshape(self.num_runs, -1)
        self.horizon = config.horizon
        self.channels = {
            name: make_channel(name, opts, config.topology, config.c1, config.c2)
            for name, opts in config.channels.items()
        }
        if config.churn is not None:
            check_churn_channels(self.channels)
        if isinstance(config.latency, LinkLatency):
            check_link_channels(self.channels)
        self.ledger = Ledger(self.num_runs, self.num_agents)
        self._shared = config.shared_instance()
        self.linear: ContextualProcess | None = None
        if config.linear is not None:  # the linear family: generated or data-set contexts
            self.linear = config.linear.build_process(self.num_runs, self.num_agents, self.num_arms)
        self.step_count = -1  # not reset yet (engine steps, pulls and communication steps)
        self.max_communication_steps = config.max_communication_steps
        self.adversary: Adversary | None = None
        if config.adversary is not None:
            self.adversary = Adversary(config.adversary, self._attack_spec())
        self.roles: np.ndarray | None = None

    def _attack_spec(self) -> AttackSpec:
        chans = self.channels.items()
        return AttackSpec(self.num_runs, self.num_agents, self.num_arms, self.horizon,
                          channels={name: ch.dim for name, ch in chans},
                          channel_kinds={name: ch.kind for name, ch in chans},
                          topology=self.config.topology, family=self.config.family)  # fmt: skip

    # ------------------------------------------------------------------ reset
    def reset(self, seeds: Sequence[int]) -> tuple[VecObservation, VecInfo]:
        if len(seeds) != self.num_runs:
            raise ValueError(f"seeds: expected {self.num_runs} run seeds, got {len(seeds)}")
        self.seeds = [int(s) for s in seeds]
        context = None
        if self.linear is not None:
            context = self.linear.reset(self.seeds, self.config.instance_seed, self.random_streams)
            if self.config.drift is not None:  # theta* drifts (the generated family only)
                self._drift = self.linear.start_drift(self.config.drift, self.streams("drift"))
        else:
            if self._shared is not None:
                self.instances = [self._shared] * self.num_runs
            else:
                rng = self.streams("instance")
                self.instances = [self.config.draw_instance(g) for g in rng.generators]
            self._set_means(self.instances)
            rewards = self.streams("rewards")
            self._noise = rewards.buffered(self.config.reward.noise, (self.num_agents,))
            if self.config.drift is not None:  # the means in force at the first pull
                drift, stream = self.config.drift, self.streams("drift")
                self._drift = MeansDrift(drift, self.config.draw_instance, stream, self.means)
                self._set_expected()
        away = self.config.churn  # clients that leave and join (docs/time.md, "churn")
        self.churn = None if away is None else Presence(away, self.streams("churn"),
                                                        self.num_runs, self.num_agents)  # fmt: skip
        present = None if self.churn is None else self.churn.present
        self.clock = EventClock.of(self.config.clock, self.streams, self.num_agents, present)
        d = self.config.reward_delay  # rewards in flight (docs/time.md, "reward_delay")
        if isinstance(d, RandomDelay):
            self.delay = RandomDelayLine(d, self.streams("delay"), self.num_runs, self.num_agents)
        else:
            self.delay = DelayLine(d, self.num_runs, self.num_agents) if d else None
        network = self.streams("network")
        for name, channel in self.channels.items():
            channel.reset(network.child(f"channel/{name}"))
        lag = self.config.latency  # messages in flight (docs/time.md, "latency")
        if isinstance(lag, LinkLatency):  # per message: per link or random
            self.latency = LinkLine(lag, self.channels, self.streams("latency"), self.num_runs,
                                    self.num_agents)  # fmt: skip
        else:
            self.latency = LatencyLine(lag, self.channels) if lag else None
        self.ledger.reset()
        if self.adversary is not None:
            spec = self._attack_spec()
            self.roles = self.adversary.reset(self.streams("adversary"), self.seeds, spec)
        self.step_count = 0
        self.pulls = np.zeros(self.num_runs, dtype=np.int64)
        self.streak = np.zeros(self.num_runs, dtype=np.int64)  # communication steps in a row
        shape = (self.num_runs, self.num_agents)
        self.cumulative_regret = np.zeros(shape)
        self.last_arm = np.full(shape, -1, dtype=np.int64)
        self.last_reward = np.zeros(shape)
        empty = {n: ch.empty_delivery() for n, ch in self.channels.items()}
        # phase and pulls: the defaults (no step, no pull)
        obs = VecObservation(0, self.last_arm, self.last_reward, empty, context=context)
        if self.clock is not None:
            self.clock.stamp(obs, np.zeros(shape, bool))
        elif self.churn is not None:  # lock-step with churn: who pulls at the first pull
            obs.pulled, obs.active = np.zeros(shape, bool), self.churn.present.copy()
        regret, expected = np.zeros(shape), np.zeros(shape)
        info = VecInfo(regret, expected, self.cumulative_regret.copy(), self.ledger, self._roles())
        return obs, info

    def _roles(self) -> np.ndarray | None:
        return None if self.roles is None else self.roles.copy()

    def streams(self, stream: str) -> BatchedRNG:
        """The named stream of the current runs (per run, or as a block for the privacy
        audits: :data:`fedbandit_env.block_streams.RandomStreams`)."""
        return streams_for(self.random_streams, self.seeds, stream)

    def _set_means(self, instances: list[Instance]) -> None:
        """Reward parameters (B, N, M), writable so tests can perturb one agent's rewards, and
        their expected rewards (``global_means="generating"``: the generating means')."""
        self.means = np.ascontiguousarray(np.stack([inst.means for inst in instances]), np.float64)
        # from each instance's own layout (a homogeneous instance is a transposed view): the
        # mean over agents then sums in the order it always has, bit for bit
        expected = np.stack([self.config.reward.expected(inst.means) for inst in instances])
        global_expected = expected.mean(axis=1)
        if any(inst.generating is not None for inst in instances):  # global_means="generating"
            reward = self.config.reward
            global_expected = np.stack(
                [
                    reward.expected(inst.means).mean(axis=0)
                    if inst.generating is None
                    else reward.expected(inst.generating)
                    for inst in instances
                ]
            )
        self._set_expected(global_expected)

    def _set_expected(self, global_expected: np.ndarray | None = None) -> None:
        """The global expected reward of each arm (B, M) (the mean over agents of the current
        ``means``, unless given), its best (B,), and per (run, agent, arm) the expected rewards
        and gaps a step reads at the pulled arms."""
        if global_expected is None:
            global_expected = self.config.reward.expected(self.means).mean(axis=1)
        self.global_expected = global_expected
        self.best_expected = self.global_expected.max(axis=1)
        gap = self.best_expected[:, None] - self.global_expected
        shape = self.means.shape
        self._expected = np.ascontiguousarray(np.broadcast_to(self.global_expected[:, None], shape))
        self._gap = np.ascontiguousarray(np.broadcast_to(gap[:, None], shape))

    # ------------------------------------------------------------------- step
    def step(
        self, arms: np.ndarray, messages: Messages | None = None, pull: Any = None
    ) -> tuple[VecObservation, RunAgents, VecInfo]:
        """One engine step of every run (``arms`` (B, N) integers). ``pull``: None or True (every
        run pulls), False (no run pulls) or a bool array (B,); a run that does not pull, or has
        made its ``horizon`` pulls, draws nothing (docs/architecture.md, "Communication steps")."""
        arms, sends, pulling, live, self.streak = self.check_step(arms, messages, pull)
        self.step_count += 1
        pulls_before = self.pulls.copy() if self.adversary is not None else None
        self.pulls += pulling
        if self.config.drift is not None and self._drift.advance(self.pulls, pulling):
            self._set_expected()  # the means of this pull (docs/time.md: dynamic regret)
        rewards, expected, regret = self._draw(arms, pulling)
        who = pulling[:, None]  # the agents that pulled: all of a pulling run's, or its client
        if self.clock is not None:
            who, rewards, expected, regret = self.clock.only_active(who, rewards, expected, regret)
        elif self.churn is not None:  # lock-step: the present clients pull (docs/time.md)
            who = who & self.churn.present
            rewards, expected, regret = (np.where(who, x, 0.0) for x in (rewards, expected, regret))
        self.cumulative_regret += regret
        # the runs (agents) that did not pull keep their last pull
        self.last_arm = np.where(who, arms, self.last_arm)
        self.last_reward = np.where(who, rewards, self.last_reward)
        if self.adversary is not None and self.adversary.config.active:
            sends = self._adversarial(sends, arms, pulling, pulls_before)
        if not live.all():  # finished runs send nothing
            sends = {name: (send & live[:, None], pay) for name, (send, pay) in sends.items()}
        if self.churn is not None:  # an absent client sends nothing
            sends = self.churn.silence(sends, {n: ch.kind for n, ch in self.channels.items()})
        deliveries = self._transmit(self.step_count, sends, self._check_excludes(messages or {}))
        if self.latency is not None:  # what was sent ``latency`` engine steps ago
            deliveries = self.latency.shift(deliveries)
        if self.churn is not None:  # and receives nothing: dropped and counted
            deliveries, dropped = self.churn.deliver(deliveries)
            self.ledger.drop(dropped)
        context = self.linear.context if self.linear is not None else None
        phase = np.where(pulling, PULL, COMMUNICATION)
        obs = VecObservation(self.step_count, self.last_arm, self.last_reward, deliveries,
                             context=context, phase=phase, pulls=self.pulls.copy())  # fmt: skip
        moving = pulling & (self.pulls < self.horizon)
        present = None
        if self.churn is not None:  # who is present at the next pull
            self.churn.advance(self.pulls, moving)
            present = self.churn.present
            if self.clock is None:
                obs.pulled, obs.active = np.broadcast_to(who, present.shape).copy(), present.copy()
        if self.clock is not None:  # the pulling runs' next event
            self.clock.stamp(obs, who, moving, present)
        if self.delay is not None:  # the rewards that arrive now, of the pulls ``reward_delay`` ago
            self.delay.stamp(obs, self.pulls, pulling, arms, np.asarray(rewards), who)
        info = VecInfo(regret, expected, self.cumulative_regret.copy(), self.ledger, self._roles())
        return obs, rewards, info

    def _adversarial(self, sends: dict, arms: np.ndarray, pulling: np.ndarray, pulls_before):
        """The step's messages after the roles (docs/adversary.md, "What roles do in a step";
        what an omniscient attack sees: "Attacks")."""
        adversary = self.adversary
        adversary.count_pulls(self._flat_start, arms, pulling)
        down = adversary.down(pulls_before) if adversary.any_crashed else None
        extras: dict[str, Any] = {}
        if adversary.omniscient and adversary.any_byzantine:
            means = None if self.linear is not None else self.global_expected.copy()
            extras = {
                "means": means,
                "best_arm": None if means is None else np.argmax(means, axis=1),
                "pull_counts": adversary.pull_counts.copy(),
                "last_arm": self.last_arm.copy(),
            }
        return adversary.messages(self.step_count, sends, self.channels, down, extras)

    def _draw(self, arms: RunAgents, pulling: Runs) -> tuple[RunAgents, RunAgents, RunAgents]:
        """Rewards, expected rewards and pseudo-regret (B, N) of the pulls, 0 in the runs that
        do not pull; only the pulling runs consume their reward streams."""
        if self.linear is not None:
            rewards, expected, regret = self.linear.pull(arms, pulling)
        else:
            noise = self._noise.next(pulling)
            at = self._flat_start + arms  # the flat position of [b, i, arms[b, i]] in (B, N, M)
            rewards = self.config.reward.sample(self.means.reshape(-1)[at], noise)
            expected = self._expected.reshape(-1)[at]
            regret = self._gap.reshape(-1)[at]
        if not pulling.all():
            drawn = (rewards, expected, regret)
            rewards, expected, regret = (np.where(pulling[:, None], x, 0.0) for x in drawn)
        return rewards, expected, regret

    def _transmit(self, t: int, sends: dict, excludes: dict) -> dict[str, Any]:
        """Every channel transmits (a silent step where the learner gave no message, not called
        if that step is empty: docs/architecture.md, "One step path") with its exclusion masks,
        and the sum of the channels' charges goes to the ledger."""
        deliveries, charges, dims = {}, [], []
        for name, channel in self.channels.items():
            if name not in sends and channel.silent_step_is_empty:
                deliveries[name] = channel.empty_delivery()
                continue
            send, payload = sends.get(name) or self._silence(channel)
            extra: dict[str, Any] = {}
            if name in excludes:
                extra["exclude"] = excludes[name]
            if self.adversary is not None and name in self.adversary.per_receiver:
                extra["per_receiver"] = self.adversary.per_receiver[name]  # equivocation
            deliveries[name], charge = channel.transmit(t, send, payload, **extra)
            charges.append(charge)
            dims.append(channel.dim)
        byzantine = None if self.adversary is None else self.adversary.byzantine
        self.ledger.record(charges, byzantine=byzantine, dims=dims)
        return deliveries

    def _silence(self, channel: Any) -> tuple[RunAgents, RunAgentPayload]:
        """The message of a channel the learner said nothing on: nobody sends."""
        shape = (self.num_runs, self.num_agents)
        return np.zeros(shape, dtype=bool), np.zeros((*shape, channel.dim))

    def check_step(
        self, arms: Any, messages: Messages | None = None, pull: Any = None
    ) -> CheckedStep:
        """Every check :meth:`step` makes, without stepping: raises what ``step`` would raise and
        changes nothing, for a wrapper that acts on the messages first (privacy)."""
        if self.step_count < 0:
            raise HorizonError("step: the environment must be reset() before the first step")
        live = self.pulls < self.horizon
        if not live.any():
            raise HorizonError(
                f"step: horizon exceeded: the episode ended after {self.horizon} pulls; "
                "call reset() to start a new one"
            )
        pulling = self._check_pull(pull) & live
        streak = np.where(live & ~pulling, self.streak + 1, 0)  # communication steps in a row
        if streak.max() > self.max_communication_steps:
            b = int(np.argmax(streak > self.max_communication_steps))
            run = f"run {b}: " if self.num_runs > 1 else ""
            raise CommunicationError(
                f"step: {run}more than max_communication_steps={self.max_communication_steps} "
                "communication steps in a row without a pull; the learner must pull (pull=True) "
                "or the environment be made with a larger max_communication_steps"
            )
        checked_arms = self._check_arms(arms)
        sends = self._check_messages(messages or {})
        self._check_excludes(messages or {})
        return CheckedStep(checked_arms, sends, pulling, live, streak)

    @property
    def done_runs(self) -> Runs:
        """(B,) bool: the runs that have made their ``horizon`` pulls."""
        return self.pulls >= self.horizon

    @property
    def truncated(self) -> bool:
        """Every run has made its ``horizon`` pulls (the episode is over)."""
        return bool(self.done_runs.all())
