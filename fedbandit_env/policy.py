"""The team-policy protocol (docs/writing-agents.md) and its adapter to the PettingZoo view.

A reference agent is a *batched team policy*: one object drives all N agents of all B runs with
array operations. ``reset(facts, rng)`` gives it the federation's public facts and its own
``agents`` random stream; ``act(obs)`` maps the last :class:`VecObservation` to the arms (B, N)
and the outgoing messages. Agent i may only use row i of what it observes (its own rewards and
the messages delivered to it); the light-cone test checks this for every shipped agent.

:class:`ParallelPolicyAdapter` turns a team policy into a per-agent dict policy for the PettingZoo
``ParallelEnv`` (B = 1), rebuilding the batched observation from the dicts alone.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from fedbandit_env.agent_views import channel_delivery
from fedbandit_env.config import ChannelsSpec, EnvConfig
from fedbandit_env.delay import RandomDelay
from fedbandit_env.engine import PULL, VecObservation
from fedbandit_env.errors import ConfigError
from fedbandit_env.graphs import Topology
from fedbandit_env.seeding import BatchedRNG
from fedbandit_env.step_args import agent_name


@dataclass(frozen=True)
class FederationFacts:
    """Public facts every agent may use: sizes, horizon, topology, channels, reward bounds."""

    num_runs: int
    num_agents: int
    num_arms: int
    horizon: int
    family: str
    topology: Topology
    channels: dict[str, dict[str, Any]]
    reward_bounds: tuple[float, float]
    c1: float
    c2: float
    extra: dict[str, Any] = field(default_factory=dict)
    byzantine_bound: int = 0
    """The environment's declared bound f on Byzantine agents (``adversary.num_byzantine``; 0
    without an adversary): a public fact, as the robust papers assume f known. It says how many
    agents may be Byzantine, never which ones (the roles are not a fact)."""
    clock: str = "sync"
    """The environment's clock kind (:data:`fedbandit_env.clock.CLOCK_KINDS`): ``"sync"``, every
    agent pulls at every step, or an event clock, one client per step (docs/time.md). The
    protocol is public; the rates and draws of an event clock are not facts."""
    reward_delay: int = 0
    """The delay in pulls before a pull's reward reaches its agent (0: none; docs/time.md); the
    largest delay under a random delay."""
    random_delay: bool = False
    """Whether the delay is random: several rewards may then arrive at one pull, one slot per
    delay in the observation (docs/time.md, "reward_delay")."""
    latency: int = 0
    """The engine steps added to every message's delivery (0: none; docs/time.md)."""
    churn: str = "always"
    """The churn kind (``"always"``: nobody leaves; ``"schedule"`` or ``"markov"``: clients
    leave and join, docs/time.md). Who is away when is not a fact: the observation says who
    pulls next (``active``)."""

    @property
    def max_degree(self) -> int:
        """The largest number of neighbours of any agent (d_max of the consensus papers)."""
        degrees = self.topology.degrees
        return int(degrees.max()) if degrees.size else 0

    @classmethod
    def from_config(cls, config: EnvConfig, num_runs: int, channels: Mapping) -> FederationFacts:
        return cls(
            num_runs=num_runs,
            num_agents=config.num_agents,
            num_arms=config.num_arms,
            horizon=config.horizon,
            family=config.family,
            topology=config.topology,
            channels={name: ch.describe() for name, ch in channels.items()},
            reward_bounds=config.reward.bounds,
            c1=config.c1,
            c2=config.c2,
            extra=dict(config.extra),
            byzantine_bound=byzantine_bound(config),
            clock="sync" if config.clock is None else config.clock.kind,
            reward_delay=delay_pulls(config.reward_delay),
            random_delay=isinstance(config.reward_delay, RandomDelay),
            latency=int(getattr(config.latency, "max", config.latency) or 0),
            churn="always" if config.churn is None else config.churn.kind,
        )


LOCK_STEP = (
    "it assumes lock-step: every agent pulls (and its statistics and messages move) at every "
    "step"
)
"""Why a learner that declares no event-time option refuses an event clock."""


def delay_pulls(delay: Any) -> int:
    """The fact ``reward_delay`` of a config's delay: d, the largest random delay, or 0."""
    return 0 if delay is None else int(getattr(delay, "max", delay))


CHURN_REASON = "it assumes every client is there at every pull and for every message"
"""Why a learner that does not declare ``churn`` refuses it."""


def check_event_time(policy: Any, facts: FederationFacts) -> None:
    """Refuse, before the first step, an event clock, a reward delay or a latency that ``policy`` does not
    declare in its ``event_time`` (docs/time.md, "What every learner does"): a ConfigError naming the learner,
    ``clock``, the accepted value and the learner's reason."""
    accepted = getattr(policy, "event_time", ())
    name = getattr(policy, "agent_id", "") or type(policy).__name__
    if facts.clock != "sync" and "clock" not in accepted:
        why = getattr(policy, "lock_step_reason", LOCK_STEP)
        raise ConfigError(f"{name}: clock: expected 'sync' ({why}), got {facts.clock!r}; the "
                          "learners that run under an event clock are listed in docs/time.md")  # fmt: skip
    if facts.reward_delay and "reward_delay" not in accepted:
        raise ConfigError(f"{name}: reward_delay: expected None (it reads each pull's reward in "
                          f"the pull's own observation), got {facts.reward_delay} pulls; the "
                          "learners that run with delayed rewards are listed in docs/time.md")  # fmt: skip
    if facts.random_delay and "random_delay" not in accepted:
        raise ConfigError(f"{name}: reward_delay: expected None or a fixed delay (it folds one "
                          "arrived reward per agent and pull), got a random delay; the learners "
                          "that run with random delays are listed in docs/time.md")  # fmt: skip
    if facts.latency and "latency" not in accepted:
        raise ConfigError(f"{name}: latency: expected None (it relies on the channels' own "
                          f"timing), got {facts.latency} steps; the learners that run with a "
                          "latency are listed in docs/time.md")  # fmt: skip
    if facts.churn != "always" and "churn" not in accepted:
        why = getattr(policy, "churn_reason", CHURN_REASON)
        raise ConfigError(f"{name}: churn: expected None ({why}), got kind {facts.churn!r}; the "
                          "learners that run with churn are listed in docs/time.md")  # fmt: skip


def byzantine_bound(config: EnvConfig) -> int:
    """The declared f of ``config``'s adversary (0 without one)."""
    return 0 if config.adversary is None else int(config.adversary.num_byzantine)


MULTI_ARMED: tuple[str, ...] = ("heterogeneous", "homogeneous")
"""The families with a fixed set of M arms (the linear family's arms are per-step feature vectors)."""


def require_family(agent_id: str, facts: FederationFacts, families: tuple[str, ...]) -> None:
    """Raise a clear error before the first step if the environment's family is not one of
    ``families`` (a multi-armed learner on the linear family, say)."""
    if facts.family not in families:
        wanted = " or ".join(repr(f) for f in families)
        kind = " (multi-armed)" if tuple(families) == MULTI_ARMED else ""
        raise ConfigError(f"{agent_id}: family: expected {wanted}{kind}, got {facts.family!r}")


TIMINGS: tuple[str, ...] = ("paper", "latency")
"""How a reference agent times a paper's "communicate, then pull" rounds: ``"paper"`` takes a
communication step first (docs/architecture.md, "Communication steps"), exactly as the paper;
``"latency"`` sends with the pull and uses the reply one step later (a physical round trip)."""


def check_timing(agent_id: str, timing: Any) -> str:
    """``timing`` must be one of :data:`TIMINGS`; the error names the agent and the field."""
    if not isinstance(timing, str) or timing not in TIMINGS:
        raise ConfigError(
            f"{agent_id}: timing: expected 'paper' (communication steps, the paper's protocol) "
            f"or 'latency' (messages travel with the pulls, one step late), got {timing!r}"
        )
    return timing


@dataclass
class TeamAction:
    """Arms (B, N) and, per channel, ``(send (B, N) bool, payload (B, N, dim))``; a gossip
    channel in mode ``pull_one_neighbour`` also takes ``(send, payload, exclude (B, N, N)
    bool)``, the agents each agent must not pull (docs/channels.md).

    ``pull`` (docs/writing-agents.md, "Communication steps"): None (every run pulls) or a bool
    array (B,); the runs where it is False take a communication-only step: the messages travel,
    no arm is pulled (``arms`` are ignored there) and the horizon's pull count stays."""

    arms: np.ndarray
    messages: dict[str, tuple[np.ndarray, ...]] = field(default_factory=dict)
    pull: np.ndarray | None = None


def require_channel(agent_id: str, facts: FederationFacts, name: str, kind: str, dim: int) -> None:
    """Raise a clear error naming learner ``agent_id`` before the first step if channel
    ``name`` is missing or not of ``kind`` and ``dim``."""
    have = facts.channels.get(name)
    if have is None:
        raise ConfigError(
            f"{agent_id}: channels.{name}: expected a {kind!r} channel of dim {dim}; "
            f"the environment has {sorted(facts.channels) or 'no channels'}"
        )
    if have["kind"] != kind or have["dim"] != dim:
        raise ConfigError(
            f"{agent_id}: channels.{name}: expected kind {kind!r} with dim {dim}, got "
            f"kind {have['kind']!r} with dim {have['dim']}"
        )


class TeamPolicy(ABC):
    """Base class of batched team policies. Subclasses set ``agent_id`` and implement
    :meth:`reset` and :meth:`act`; ``channel_spec`` says which channels they need.

    ``privacy_epsilon`` (optional) is the differential-privacy guarantee the learner declares for
    what it sends, per agent: a float epsilon, ``math.inf`` for a learner that is explicitly not
    private (e.g. a private algorithm run in its non-private mode), ``None`` (the default) for no
    declaration. It may depend on the federation, so the bench and ``fedbandit audit`` read it
    after :meth:`reset`. It is a claim about privacy only: hyperparameters that happen to be
    called ``epsilon`` (an exploration rate) are not read.

    ``version`` is the learner's results version (docs/bench.md): bump it whenever a change
    moves its results (trajectories or random streams), so stored rows of the old code are
    never ranked together with new ones.
    """

    agent_id: ClassVar[str] = ""
    version: ClassVar[int] = 1
    event_time: ClassVar[tuple[str, ...]] = ()
    """The event-time options this learner runs under besides ``drift``, which needs nothing of a
    learner (docs/time.md): ``("clock",)`` for one that reads ``obs.pulled`` and ``obs.active``.
    An undeclared option is refused before the first step (:func:`check_event_time`)."""
    privacy_epsilon: float | None = None
    payload_layouts: ClassVar[dict[str, str]] = {}
    """What the payload of each of its channels means, by channel name, in the words of the
    attacks (``fedbandit_env.adversary.attacks.LAYOUTS``: ``"means"`` [means, counts],
    ``"arm"`` an arm id, ``"arm_means"`` one mean per arm). Undeclared: a layout attack does
    not know what it is overwriting, so the robust suite does not pair them
    (docs/adversary.md, "Payload layouts"). Metadata only: nothing else reads it."""

    def channel_spec(self, config: EnvConfig) -> ChannelsSpec:
        """Channels this learner talks over (used by the bench when the env names none)."""
        return None

    def notes(self) -> tuple[str, ...]:
        """What is off in this learner's setting for the federation it was reset on, in a few
        words each (``"f = 1 < 2 Byzantine"``: a robustness parameter below the environment's
        declared bound). Read after :meth:`reset`; the bench stores them with the row and the
        tables flag it (docs/bench.md, "Flags"). None by default."""
        return ()

    def require_channel(self, facts: FederationFacts, name: str, kind: str, dim: int) -> None:
        """Raise a clear error before the first step if a needed channel is missing
        (:func:`require_channel` naming this learner)."""
        require_channel(self.agent_id, facts, name, kind, dim)

    @abstractmethod
    def reset(self, facts: FederationFacts, rng: BatchedRNG) -> None: ...

    @abstractmethod
    def act(self, obs: VecObservation) -> TeamAction: ...


class ParallelPolicyAdapter:
    """Run a team policy on a PettingZoo ``FedBanditParallelEnv`` through per-agent dicts."""

    def __init__(self, policy: TeamPolicy, env: Any):
        self.policy = policy
        self.env = env.unwrapped

    def reset(self, seed: int) -> None:
        facts = self.env.facts
        check_event_time(self.policy, facts)
        self.policy.reset(facts, BatchedRNG.for_runs([seed], "agents"))
        self._active: np.ndarray | None = None  # an event clock's client of the coming step

    def _event_time(self, per_agent: list, phase: int) -> dict[str, Any]:
        """The event-time fields of the batched observation (docs/time.md) from the per-agent
        dicts: ``active`` as given; ``pulled``, the client announced as active one step before
        (if that step pulled); the arrived rewards of a reward delay."""
        out: dict[str, Any] = {}
        if "active" in per_agent[0]:
            active = np.array([[bool(o["active"]) for o in per_agent]])
            before = getattr(self, "_active", None)
            out["pulled"] = np.zeros_like(active) if before is None else before & (phase == PULL)
            out["active"], self._active = active, active
        if "arrived" in per_agent[0]:  # (1, N), or (1, N, D) under a random delay
            got = np.array([[np.asarray(o["arrived"], bool) for o in per_agent]])
            arms = np.array([[np.asarray(o["arrived_arm"]) for o in per_agent]], dtype=np.int64)
            pulls = np.array([[np.asarray(o["arrived_pull"]) for o in per_agent]], np.int64)
            out["arrived_arm"] = np.where(got, arms, -1)
            out["arrived_pull"] = np.where(got, pulls, -1)
            out["arrived_reward"] = np.array([[np.asarray(o["arrived_reward"], np.float64)
                                               for o in per_agent]])  # fmt: skip
        return out

    def observation_from_dicts(
        self, observations: Mapping[str, Mapping[str, Any]]
    ) -> VecObservation:
        names = [agent_name(i) for i in range(self.env.num_agents_total)]
        per_agent = [observations[a] for a in names]
        deliveries = {
            name: channel_delivery(ch, [o["channels"][name] for o in per_agent])
            for name, ch in self.env.engine.channels.items()
        }
        context = None
        if "decision_set" in per_agent[0]:
            context = np.stack([o["decision_set"] for o in per_agent])[None]
        last_arm = np.array([[o["last_arm"] for o in per_agent]], dtype=np.int64)
        pulled = np.array([[o["pulled"] for o in per_agent]], dtype=bool)
        pulls = int(per_agent[0]["step"])  # the observation's step counts the run's pulls
        return VecObservation(
            step=max(self.env.engine.step_count, 0),  # engine steps (pulls + communication)
            last_arm=np.where(pulled, last_arm, -1),
            last_reward=np.array([[float(o["last_reward"]) for o in per_agent]]),
            deliveries=deliveries,
            context=context,
            phase=np.array([int(per_agent[0]["phase"])], dtype=np.int64),
            pulls=np.array([pulls], dtype=np.int64),
            **self._event_time(per_agent, int(per_agent[0]["phase"])),
        )

    def __call__(self, observations: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
        action = self.policy.act(self.observation_from_dicts(observations))
        extra = {}
        if action.pull is not None:
            extra = {"pull": int(np.asarray(action.pull).reshape(-1)[0])}
        out = {}
        for i in range(self.env.num_agents_total):
            msgs = {}
            for name, message in action.messages.items():
                send, payload = message[:2]
                msgs[name] = {"send": int(send[0, i]), "payload": payload[0, i].copy()}
                if len(message) == 3:  # gossip pull mode's exclusion mask (docs/channels.md)
                    msgs[name]["exclude"] = np.asarray(message[2])[0, i].copy()
            out[agent_name(i)] = {"arm": int(action.arms[0, i]), "messages": msgs, **extra}
        return out


def run_episode(env: Any, policy: TeamPolicy, seed: int) -> list[tuple]:
    """Play one episode of a ParallelEnv with a team policy; returns the per-step tuples
    ``(actions, observations, rewards, infos)`` (handy for tests and examples)."""
    adapter = ParallelPolicyAdapter(policy, env)
    obs, _ = env.reset(seed=seed)
    adapter.reset(seed)
    trajectory = []
    while env.agents:
        actions = adapter(obs)
        obs, rewards, _, _, infos = env.step(actions)
        trajectory.append((actions, obs, rewards, infos))
    return trajectory
