"""Per-agent learners and parallel-view policy callables, driven in the vector view.

Learners come in three shapes, all ranked alike (docs/writing-agents.md).

* :class:`PerAgentLearner` is the shape of most papers' code: one instance per agent,
  ``reset(agent, facts, rng)`` once per episode, then ``act(observation) -> action`` with the
  agent's own PettingZoo observation dict (exactly what the parallel view gives it, delivered
  messages included) and its own action dict (``{"arm": k, "messages": {...}}`` or a bare arm).
* A *policy callable* ``policy(observations, infos) -> actions`` is a PettingZoo parallel-view
  policy (RLlib, AgileRL, SB3 through SuperSuit): dicts keyed by agent name in and out.

Both run in the bench through team-policy adapters (:class:`PerAgentTeam`,
:class:`PolicyCallableTeam`), so every executor, suite, the store and the leaderboard treat them
like a batched learner. The observation dicts are built by the parallel view's own packing
function (:func:`fedbandit_env.parallel_env.agent_observation`) and actions are parsed by the
parallel view's own parser, so a learner sees and is checked exactly as in ``env.step``.

**Cost.** The adapters loop in Python over runs and agents every step (B x N observation dicts
and ``act`` calls), unlike batched team policies; ``benchmarks/bench_per_agent.py`` measures the
agent-steps per second of a plain per-agent UCB1 against the batched ``ucb1``.

**Light cone.** Instance (b, i) only ever receives agent i's observation of run b and its own
random generator (``rng.child("agent_i")`` of run b), so it cannot use other agents' data: it is
light-cone safe by construction. A policy callable receives every agent's observation of a run
at once (that is the parallel API); whether it keeps them apart is its own business.

**Infos.** The bench gives a policy callable empty per-agent ``infos``: the parallel view's infos
carry evaluation data (regret, the ledger) that agents must not use.

**State.** A policy callable is called once per run and step, the B runs interleaved. A plain
function must therefore be stateless (a forward pass of a trained network is). A stateful policy
is an object with ``__call__`` and ``reset()``: each run gets its own shallow copy
(``copy.copy``, so a large model is shared, not copied) and ``reset()`` is called on the copy
before the first step, so per-run state belongs in attributes that ``reset()`` creates.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import inspect
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from types import SimpleNamespace
from typing import Any, ClassVar

import numpy as np

from fedbandit_env.config import ChannelsSpec, EnvConfig
from fedbandit_env.engine import PULL, VecObservation
from fedbandit_env.errors import ActionError, ConfigError, FedBanditError, LearnerError
from fedbandit_env.network import CHANNEL_KINDS, make_channel
from fedbandit_env.parallel_env import FedBanditParallelEnv, agent_observation
from fedbandit_env.policy import FederationFacts, TeamAction, TeamPolicy
from fedbandit_env.seeding import BatchedRNG
from fedbandit_env.step_args import agent_name


class PerAgentLearner(ABC):
    """Base class of per-agent learners: one instance per agent (module doc).

    ``reset(agent, facts, rng)``: ``agent`` is the agent's name (``"agent_3"``), ``facts`` the
    federation's public facts of its run (``num_runs`` is 1), ``rng`` its own seeded
    ``numpy.random.Generator`` (use nothing else for randomness). ``act(observation)`` returns
    ``{"arm": k, "messages": {channel: {"send": 0/1, "payload": (dim,)}}}`` or a bare arm ``k``.

    ``channel_spec(config)`` says which channels the bench adds when the environment names none,
    ``privacy_epsilon`` declares a privacy guarantee (as for :class:`TeamPolicy`) and ``version``
    is the learner's results version: bump it whenever a change moves its results
    (docs/bench.md).
    """

    agent_id: ClassVar[str] = ""
    version: ClassVar[int] = 1
    privacy_epsilon: float | None = None

    def channel_spec(self, config: EnvConfig) -> ChannelsSpec:
        return None

    @abstractmethod
    def reset(self, agent: str, facts: FederationFacts, rng: np.random.Generator) -> None: ...

    @abstractmethod
    def act(self, observation: dict[str, Any]) -> Any: ...


# ------------------------------------------------------------------------- observation helpers
def last_pull(observation: Mapping[str, Any]) -> tuple[int, float] | None:
    """``(arm, reward)`` of the agent's last pull, or None before its first pull (the one place
    per-agent learners read the pull encoding of the observation dict). After a
    communication-only step (``phase`` 1) the observation still shows the last pull, which the
    learner has already seen: None."""
    pulled = observation.get("pulled")
    arm = int(observation["last_arm"])
    if (pulled is not None and not pulled) or arm < 0:
        return None
    if int(observation.get("phase", PULL)) != PULL:  # a communication step: no new pull
        return None
    return arm, float(observation["last_reward"])


def _init_options(cls: type) -> set[str]:
    """Keyword options a channel class takes (its ``__init__`` and its bases')."""
    names = {"kind", "dim"}
    for klass in cls.__mro__:
        init = klass.__dict__.get("__init__")
        if init is not None:
            names.update(inspect.signature(init).parameters)
    return names


def channels_from_facts(facts: FederationFacts) -> dict[str, Any]:
    """Channel objects equal to the environment's (rebuilt from the facts' descriptions, whose
    derived entries such as a hierarchical channel's ``sinks`` and ``delay`` are left out), for
    packing deliveries into per-agent dicts the way the parallel view does."""
    out = {}
    for name, described in facts.channels.items():
        accepted = _init_options(CHANNEL_KINDS[described["kind"]])
        options = {k: v for k, v in described.items() if k in accepted}
        out[name] = make_channel(name, options, facts.topology, facts.c1, facts.c2)
    return out


def agent_view(channels: Mapping[str, Any], obs: VecObservation, b: int, i: int) -> dict:
    """Agent i's observation dict of run b: the parallel view's packing, applied to row (b, i)."""
    return agent_observation(SimpleNamespace(channels=channels), obs, b, i)


class _ActionParser:
    """The parallel view's action checks (the very same methods), for one agent at a time."""

    _parse_agent = FedBanditParallelEnv._parse_agent
    _parse_arm = FedBanditParallelEnv._parse_arm
    _parse_send = staticmethod(FedBanditParallelEnv._parse_send)
    _parse_message = FedBanditParallelEnv._parse_message
    _run_pull = FedBanditParallelEnv._run_pull

    def __init__(self, num_arms: int, channels: Mapping[str, Any], num_runs: int, n: int):
        self.config = SimpleNamespace(num_arms=num_arms)
        self.engine = SimpleNamespace(channels=channels)
        self.num_runs, self.num_agents = num_runs, n
        self.num_agents_total = n
        self.possible_agents = [agent_name(i) for i in range(n)]

    def new_action(self) -> TeamAction:
        shape = (self.num_runs, self.num_agents)
        messages = {
            name: (np.zeros(shape, dtype=bool), np.zeros((*shape, ch.dim)))
            for name, ch in self.engine.channels.items()
        }
        return TeamAction(np.zeros(shape, dtype=np.int64), messages)

    def put(
        self, learner_id: str, out: TeamAction, b: int, i: int, action: Any, pulls: dict
    ) -> None:
        """Check agent i's action of run b and write it into ``out``; an optional ``pull`` key
        goes into ``pulls`` (the run's agents' pull flags, see :meth:`end_run`)."""
        agent = agent_name(i)
        sends = {n: send[b : b + 1] for n, (send, _) in out.messages.items()}
        payloads = {n: payload[b : b + 1] for n, (_, payload) in out.messages.items()}
        with _located(learner_id):
            out.arms[b, i] = self._parse_agent(agent, action, sends, payloads, i, pulls)

    def end_run(self, learner_id: str, out: TeamAction, b: int, pulls: dict) -> None:
        """Run b's pull flag from its agents' ``pull`` keys, by the parallel view's rule (a
        communication step needs every agent to give ``pull = 0``)."""
        if not pulls:
            return
        with _located(learner_id):
            pull = self._run_pull(pulls)
        if pull is False:
            if out.pull is None:
                out.pull = np.ones(self.num_runs, dtype=bool)
            out.pull[b] = False


@contextlib.contextmanager
def _located(learner_id: str):
    """Prefix an action error with the learner id (``learner: agent_i: field: ...``)."""
    try:
        yield
    except ActionError as err:
        message = str(err).removeprefix(f"{err.agent}: {err.field}: ")
        raise ActionError(f"{learner_id}: {err.agent}", err.field, message) from None


def _user_error(
    learner_id: str, agent: str, method: str, err: Exception, run: int | None = None
) -> FedBanditError:
    if isinstance(err, FedBanditError) and method == "reset":  # e.g. "family: expected ..."
        return ConfigError(f"{learner_id}: {agent}: {str(err).removeprefix(f'{learner_id}: ')}")
    return LearnerError(
        f"{learner_id}: {agent}: {method} raised {type(err).__name__}: {err}", agent, run
    )


# ------------------------------------------------------------------------------ the adapters
class PerAgentTeam(TeamPolicy):
    """A :class:`PerAgentLearner` class run as a team policy: B x N instances (module doc)."""

    def __init__(self, factory: Callable[[], PerAgentLearner], agent_id: str):
        self.agent_id = agent_id
        self._factory = factory
        self.prototype = self._new()
        self.version = int(getattr(self.prototype, "version", 1))
        self.results_note = str(getattr(self.prototype, "results_note", ""))
        self.learners: list[list[PerAgentLearner]] = []

    def _new(self) -> PerAgentLearner:
        learner = self._factory()
        if not isinstance(learner, PerAgentLearner):
            raise ConfigError(
                f"{self.agent_id}: expected a PerAgentLearner, got {type(learner).__name__}"
            )
        return learner

    @property
    def privacy_epsilon(self) -> float | None:  # type: ignore[override]
        first = self.learners[0][0] if self.learners else self.prototype
        return first.privacy_epsilon

    def channel_spec(self, config: EnvConfig) -> ChannelsSpec:
        return self.prototype.channel_spec(config)

    def reset(self, facts: FederationFacts, rng: BatchedRNG) -> None:
        channels = channels_from_facts(facts)
        self._parser = _ActionParser(facts.num_arms, channels, facts.num_runs, facts.num_agents)
        run_facts = dataclasses.replace(facts, num_runs=1)
        streams = [rng.child(agent_name(i)).generators for i in range(facts.num_agents)]
        self.learners = [
            [self._new() for _ in range(facts.num_agents)] for _ in range(facts.num_runs)
        ]
        for b, row in enumerate(self.learners):
            for i, learner in enumerate(row):
                try:
                    learner.reset(agent_name(i), run_facts, streams[i][b])
                except Exception as err:
                    raise _user_error(self.agent_id, agent_name(i), "reset", err) from err

    def act(self, obs: VecObservation) -> TeamAction:
        out = self._parser.new_action()
        channels = self._parser.engine.channels
        for b, row in enumerate(self.learners):  # Python loop over runs and agents (module doc)
            pulls: dict[str, bool] = {}
            for i, learner in enumerate(row):
                try:
                    action = learner.act(agent_view(channels, obs, b, i))
                except Exception as err:
                    raise _user_error(self.agent_id, agent_name(i), "act", err, b) from err
                self._parser.put(self.agent_id, out, b, i, action, pulls)
            self._parser.end_run(self.agent_id, out, b, pulls)
        return out


class PolicyCallableTeam(TeamPolicy):
    """A parallel-view policy ``policy(observations, infos) -> actions`` run as a team policy:
    one call per run and step with every agent's observation dict (module doc)."""

    def __init__(self, policy: Callable[..., Mapping[str, Any]], agent_id: str):
        if not callable(policy):
            raise ConfigError(f"{agent_id}: expected a callable policy, got {policy!r}")
        self.agent_id = agent_id
        self.policy = policy
        self.version = int(getattr(policy, "version", 1))
        self.privacy_epsilon = getattr(policy, "privacy_epsilon", None)

    def channel_spec(self, config: EnvConfig) -> ChannelsSpec:
        spec = getattr(self.policy, "channel_spec", None)
        return spec(config) if callable(spec) else None

    def reset(self, facts: FederationFacts, rng: BatchedRNG) -> None:
        channels = channels_from_facts(facts)
        self._parser = _ActionParser(facts.num_arms, channels, facts.num_runs, facts.num_agents)
        self._names = [agent_name(i) for i in range(facts.num_agents)]
        self._runs = [copy.copy(self.policy) for _ in range(facts.num_runs)]
        for policy in self._runs:
            reset = getattr(policy, "reset", None)
            if callable(reset):
                try:
                    reset()
                except Exception as err:
                    raise _user_error(self.agent_id, "all agents", "reset", err) from err

    def act(self, obs: VecObservation) -> TeamAction:
        out = self._parser.new_action()
        channels = self._parser.engine.channels
        for b in range(out.arms.shape[0]):
            views = {a: agent_view(channels, obs, b, i) for i, a in enumerate(self._names)}
            infos: dict[str, dict] = {a: {} for a in self._names}
            try:
                actions = self._runs[b](views, infos)
            except Exception as err:
                raise _user_error(self.agent_id, "all agents", "the policy", err) from err
            if not isinstance(actions, Mapping):
                raise ActionError(
                    f"{self.agent_id}: all agents",
                    "actions",
                    f"expected a dict by agent, got {type(actions).__name__}",
                )
            unknown = sorted(set(actions) - set(self._names))
            if unknown:
                raise ActionError(
                    f"{self.agent_id}: all agents", "actions", f"unknown agents {unknown}"
                )
            pulls: dict[str, bool] = {}
            for i, a in enumerate(self._names):
                if a not in actions:
                    raise ActionError(f"{self.agent_id}: {a}", "action", "missing")
                self._parser.put(self.agent_id, out, b, i, actions[a], pulls)
            self._parser.end_run(self.agent_id, out, b, pulls)
        return out


def callable_name(policy: Any) -> str:
    """The default id of a policy callable: ``module:qualified.name``."""
    module = getattr(policy, "__module__", None) or type(policy).__module__
    name = getattr(policy, "__qualname__", None) or type(policy).__qualname__
    return f"{module}:{name}"


def is_learner_class(obj: Any) -> bool:
    return isinstance(obj, type) and issubclass(obj, TeamPolicy | PerAgentLearner)


def accepted_kwargs(cls: Any) -> list[str] | None:
    """The keyword arguments a learner class's constructor accepts (None when it takes any, or
    has no signature to read)."""
    import inspect

    try:
        params = inspect.signature(cls).parameters.values()
    except (TypeError, ValueError):
        return None
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return None
    return sorted(p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY))


def bad_kwargs_error(name: str, cls: Any, kwargs: dict, err: Exception) -> ConfigError:
    """"bad keyword arguments", with the ones the class accepts."""
    import difflib

    accepted = accepted_kwargs(cls)
    known = ""
    if accepted is not None:
        hints = [f"{k!r} -> {close[0]!r}" for k in sorted(set(kwargs) - set(accepted))
                 if (close := difflib.get_close_matches(str(k), accepted, n=1))]  # fmt: skip
        known = f"; accepted: {accepted}" + (f"; did you mean {', '.join(hints)}?" if hints else "")
    return ConfigError(f"{name}: bad keyword arguments {sorted(kwargs)}: {err}{known}")


def per_agent_team(cls: type[PerAgentLearner], agent_id: str, kwargs: dict) -> PerAgentTeam:
    """A :class:`PerAgentTeam` of ``cls(**kwargs)`` instances (kwargs copied per instance)."""
    try:
        return PerAgentTeam(lambda: cls(**copy.deepcopy(kwargs)), agent_id)
    except TypeError as err:
        raise bad_kwargs_error(agent_id, cls, kwargs, err) from None


def as_team_policy(obj: Any, agent_id: str | None = None, kwargs: dict | None = None) -> TeamPolicy:
    """Any learner shape as a team policy: a TeamPolicy (class or instance), a PerAgentLearner
    (class, or an instance copied per agent), or a parallel-view policy callable."""
    kwargs = dict(kwargs or {})
    if isinstance(obj, type) and issubclass(obj, PerAgentLearner):
        return per_agent_team(obj, agent_id or obj.agent_id or obj.__name__, kwargs)
    if isinstance(obj, type):
        try:
            made = obj(**kwargs)
        except TypeError as err:
            name = agent_id or getattr(obj, "agent_id", "") or obj.__name__
            raise bad_kwargs_error(name, obj, kwargs, err) from None
        return as_team_policy(made, agent_id)
    if kwargs:
        raise ConfigError("agent_kwargs: only allowed with an agent id or class, not an instance")
    if isinstance(obj, TeamPolicy):
        if agent_id and not obj.agent_id:
            obj.agent_id = agent_id
        return obj
    if isinstance(obj, PerAgentLearner):
        name = agent_id or obj.agent_id or type(obj).__name__
        return PerAgentTeam(lambda: copy.deepcopy(obj), name)
    protocol = ("reset", "act", "channel_spec")
    if all(callable(getattr(obj, name, None)) for name in protocol):
        return obj  # a team policy by duck typing (the whole protocol, without the base class)
    if callable(getattr(obj, "act", None)) and callable(getattr(obj, "reset", None)):
        raise ConfigError(LEARNER_SHAPES.format(what=f"{type(obj).__name__} has reset and act "
                                                     "but no learner base class"))  # fmt: skip
    if callable(obj):
        return PolicyCallableTeam(obj, agent_id or callable_name(obj))
    raise ConfigError(LEARNER_SHAPES.format(what=f"got {obj!r:.80}"))


LEARNER_SHAPES = (
    "agent: {what}; a learner is one of three shapes (docs/writing-agents.md): a "
    "fedbandit_env.policy.TeamPolicy subclass (batched: reset(facts, rng), act(obs) for every "
    "agent and run), a fedbandit_env.per_agent.PerAgentLearner subclass (reset and act for one "
    "agent), or a policy callable policy(observations, infos) -> actions"
)
"""The error of a learner that fits none of the three shapes."""
