"""The PettingZoo view: one run (B = 1) of the batched engine, packed into per-agent dicts.

FedBandit federated multi-armed bandit (PettingZoo parallel API)

| | |
|---|---|
| Creation | ``fedbandit_env.make("FedBandit/Heterogeneous-v0", **kwargs)`` |
| Parallel API | yes |
| Agents | ``agent_0 ... agent_{N-1}`` (N = ``num_agents``) |
| Action | ``Dict(arm: Discrete(M), messages: Dict(<channel>: Dict(send: Discrete(2), payload: Box(dim))))``; a bare int is accepted as "pull this arm, send nothing" |
| Observation | ``Dict(step, last_arm, pulled, last_reward, phase, channels: Dict(<channel>: ...))`` |
| Episode end | truncation after ``horizon`` steps; there is no termination |

**Action.** ``arm`` is the arm to pull. For each configured channel an agent may send one
payload of ``dim`` finite floats per step (``send = 1``); not sending (``send = 0``, the channel
left out, or ``messages`` left out) is allowed and costs nothing. ``send`` must be a Discrete(2)
value (0, 1 or a bool; anything else raises); the payload of a message not sent is never read.
An optional ``pull`` (0/1, default 1; not part of the action space, like the bare-int shorthand)
of 0 in every agent's action makes the step a *communication step*: the messages travel, no arm is
pulled, no reward or regret accrues and the horizon's pull count stays (docs/architecture.md,
"Communication steps"); the agents of a run must agree. More than ``max_communication_steps`` of
them in a row raise a ``CommunicationError``.

**Observation** (all fixed-shape, explicit dtypes):

* ``step`` — Box((), int64) in [0, T]: pulls completed (steps, without communication steps),
  0 after reset (a bounded Box, so flatteners give it one dimension, not a one-hot of T + 1).
* ``last_arm`` — Discrete(M): the arm pulled in the last step (0 after reset, see ``pulled``).
* ``pulled`` — Discrete(2): 1 once the agent has pulled an arm, 0 after reset ("no pull yet").
* ``last_reward`` — Box((), float64): the local reward of that pull (0 after reset).
* ``phase`` — Discrete(2): 0 after a pull step (and after reset), 1 after a communication step
  (``last_arm``, ``pulled`` and ``last_reward`` then still describe the last pull).
* ``decision_set`` (linear family only) — Box(K, d) in [-1, 1]: the K feature vectors the agent
  chooses from in the next step (its ``arm`` is an index into them).
* ``active`` (with an event ``clock`` or ``churn`` only, docs/time.md) — Discrete(2): 1 if this
  agent pulls at the next step (under churn: it is present at the next pull). Every agent still gives an action; an inactive agent's ``arm`` is not
  pulled, and its ``last_arm`` and ``last_reward`` stay those of its own last pull.
* ``arrived``, ``arrived_arm``, ``arrived_reward``, ``arrived_pull`` (with ``reward_delay`` only,
  docs/time.md) — Discrete(2), Discrete(M), Box((), float64), Box((), int64): whether the reward
  of this agent's pull ``reward_delay`` pulls ago arrived now, that pull's arm, its reward and the
  pull it was drawn at (0: none); ``last_reward`` is then 0 (the reward of the pull just made
  arrives later). Under a random delay with largest delay D, one slot per delay: MultiBinary(D),
  Box((D,), int64), Box((D,), float64), Box((D,), int64), slot j the pull made j + 1 pulls
  before.
* ``channels`` — one entry per channel, the messages delivered to this agent in the last step:

  * ``neighbors``: ``senders`` (D,) neighbour ids (-1 padding, D = max degree), ``mask`` (D,)
    which of them arrived, ``payload`` (D, dim).
  * ``gossip``: ``partner`` (-1 unless the agent is on this step's random edge; with
    ``mode="pull_one_neighbour"`` the neighbour it pulled from), ``received``, ``payload`` (dim,).
  * ``server``: ``aggregate`` (dim,) sum or mean of the uploads that arrived, ``count``,
    ``participating`` (whether this agent was picked to upload this step).
  * ``flood``: ``senders`` (S,) the origins within ttl hops, ``mask``, ``sent_step``,
    ``payload`` (S, dim); a message sent at step s from d hops away arrives at step s + d - 1.
  * ``hierarchical``: ``aggregate`` (dim,), ``count``, ``sent_step`` of the round delivered.

**Rewards.** The local reward of the pull (Bernoulli, Gaussian or clipped Gaussian).

**Infos** (evaluation only; agents must not use them), flat per agent (numbers only):
``phase`` (as in the observation), ``instant_regret`` (pseudo-regret of the pull against the
global best arm, 0 in a communication step), ``expected_reward``,
``cumulative_regret`` (this agent), ``messages_sent`` (this agent, cumulative), ``run_seed``
(the run seed of the episode, the same for every agent) and, in an environment made with
``adversary=``, ``role`` (0 honest, 1 Byzantine, 2 crashed; docs/adversary.md; never in the
observations). The run's communication ledger (step
and cumulative messages, floats and cost per link type) is run-level, not per agent: read it
with :attr:`FedBanditParallelEnv.ledger`.

**State** (``state()``, ``state_space``): Box((2N,), float64), each agent's last arm (-1 after
reset) followed by each agent's last reward.

**Arguments.** ``num_agents``, ``num_arms``, ``horizon``, ``family`` ("heterogeneous" or
"homogeneous"), ``means`` (fixed instance: a vector or an N x M matrix), ``instance``
(generator: "gossip" or "commeff" for heterogeneous, "uniform" for homogeneous),
``instance_seed`` (int: one instance for every run; None: a new instance per run seed),
``reward`` ("bernoulli", {"kind": "gaussian", "sigma": 1.0}, {"kind": "clipped_gaussian", ...}),
``topology`` ("complete", "ring", "path", "star", "grid", "erdos_renyi", "random_regular",
"hybrid" or a networkx graph), ``topology_kwargs``, ``channels`` (list of kinds or
{name: {"kind": ..., "dim": ..., options}}), ``c1`` (agent–server link cost), ``c2``
(agent–agent link cost), ``render_mode`` (None, "human": print, or "ansi": return the text),
``max_cycles`` (PettingZoo's name for ``horizon``; giving both with different values raises),
``max_communication_steps`` (default 64: communication steps allowed in a row), ``adversary``
(Byzantine and crashed agents, docs/adversary.md; default None).

**Seeding** (Gymnasium's convention). ``reset(seed=s)`` plays run seed s, a non-negative int
(anything else raises a ``TypeError``/``ValueError`` naming ``seed``). A later ``reset()``
without a seed continues the stream seeded by the last seeded reset: its run seed is drawn from
a generator seeded at that reset (:class:`~fedbandit_env.reset_args.SeedContinuation`), so
environments seeded 0, 1, 2, ... never replay each other's episodes; with no seed ever given it
draws from fresh OS entropy. The run seed played is in every info (``run_seed``) and in
``seed_used``. ``reset(options=...)``: these environments take no options; unknown keys raise
nothing but a ``UserWarning`` naming them (PettingZoo's own API checkers pass
``options={"options": 1}`` and require it to work); a non-dict raises a ``TypeError``. The
vector view, ``OneLearner-v0`` and ``AgentsVecEnv`` refuse unknown keys. Rewards, network
randomness and the agents' streams are separate (docs/architecture.md, "Seeding").

**AEC API.** :func:`env` (and :func:`raw_env`, without PettingZoo's order-enforcing wrapper)
give the AEC view of the same environment through ``pettingzoo.utils.parallel_to_aec``;
``fedbandit_env.make_aec(id)`` does the same for a registered id.

**Versions.** Every environment id is ``-v0``. Communication steps are optional (the ``pull``
key, the ``phase`` field and info; runs that never use them are plain pull-every-step runs); the
observation's ``step`` is a Box, ``last_arm`` is Discrete(M) with the ``pulled`` flag, infos are
flat (the ledger is :attr:`FedBanditParallelEnv.ledger`, each info carries ``run_seed``), and an
unseeded reset continues the seeded stream.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from gymnasium import spaces
from gymnasium.utils import EzPickle
from pettingzoo import ParallelEnv
from pettingzoo.utils.conversions import parallel_to_aec, parallel_to_aec_wrapper

from fedbandit_env.agent_views import channel_observation, channel_space, payload_space
from fedbandit_env.config import EnvConfig, make_config
from fedbandit_env.delay import RandomDelay
from fedbandit_env.engine import Engine, VecInfo, VecObservation
from fedbandit_env.errors import ActionError, HorizonError
from fedbandit_env.policy import FederationFacts
from fedbandit_env.reset_args import SeedContinuation, check_reset_options
from fedbandit_env.seeding import BatchedRNG
from fedbandit_env.step_args import agent_name


def observation_space(config: EnvConfig, engine: Engine) -> spaces.Dict:
    lo, hi = config.reward.bounds
    fields: dict[str, spaces.Space] = {
        "step": spaces.Box(0, config.horizon, shape=(), dtype=np.int64),
        "last_arm": spaces.Discrete(config.num_arms),
        "pulled": spaces.Discrete(2),
        "last_reward": spaces.Box(lo, hi, shape=(), dtype=np.float64),
        "phase": spaces.Discrete(2),
    }
    if engine.channels:
        fields["channels"] = spaces.Dict(
            {name: channel_space(ch) for name, ch in engine.channels.items()}
        )
    if config.linear is not None:
        shape = (config.num_arms, config.linear.dim)
        fields["decision_set"] = spaces.Box(-1.0, 1.0, shape=shape, dtype=np.float64)
    if config.clock is not None or config.churn is not None:  # whether it pulls at the next step
        fields["active"] = spaces.Discrete(2)
    if isinstance(config.reward_delay, RandomDelay):  # one slot per delay 1..D
        size, top = config.reward_delay.max, config.horizon
        fields["arrived"] = spaces.MultiBinary(size)
        fields["arrived_arm"] = spaces.Box(0, config.num_arms - 1, shape=(size,), dtype=np.int64)
        fields["arrived_reward"] = spaces.Box(min(lo, 0.0), max(hi, 0.0), shape=(size,),
                                              dtype=np.float64)  # fmt: skip
        fields["arrived_pull"] = spaces.Box(0, top, shape=(size,), dtype=np.int64)
    elif config.reward_delay is not None:  # the reward that arrived now, of an earlier pull
        fields["arrived"] = spaces.Discrete(2)
        fields["arrived_arm"] = spaces.Discrete(config.num_arms)
        fields["arrived_reward"] = spaces.Box(lo, hi, shape=(), dtype=np.float64)
        fields["arrived_pull"] = spaces.Box(0, config.horizon, shape=(), dtype=np.int64)
    return spaces.Dict(fields)


def action_space(config: EnvConfig, engine: Engine) -> spaces.Dict:
    fields: dict[str, spaces.Space] = {"arm": spaces.Discrete(config.num_arms)}
    if engine.channels:
        fields["messages"] = spaces.Dict(
            {
                name: spaces.Dict({"send": spaces.Discrete(2), "payload": payload_space((ch.dim,))})
                for name, ch in engine.channels.items()
            }
        )
    return spaces.Dict(fields)


def state_space(config: EnvConfig) -> spaces.Box:
    """Box((2N,), float64): each agent's last arm (-1 after reset), then its last reward."""
    n, lo, hi = config.num_agents, *config.reward.bounds
    low = np.concatenate([np.full(n, -1.0), np.full(n, min(lo, 0.0))])
    high = np.concatenate([np.full(n, config.num_arms - 1.0), np.full(n, max(hi, 0.0))])
    return spaces.Box(low, high, dtype=np.float64)


def agent_observation(engine: Engine, obs: VecObservation, b: int, i: int) -> dict[str, Any]:
    arm = int(obs.last_arm[b, i])
    out: dict[str, Any] = {
        "step": np.array(obs.pulls[b], dtype=np.int64),
        "last_arm": np.int64(max(arm, 0)),
        "pulled": np.int64(arm >= 0),
        "last_reward": np.array(obs.last_reward[b, i], dtype=np.float64),
        "phase": np.int64(obs.phase[b]),
    }
    if engine.channels:
        out["channels"] = {
            name: channel_observation(ch, obs.deliveries[name], b, i)
            for name, ch in engine.channels.items()
        }
    if obs.context is not None:
        out["decision_set"] = obs.context[b, i].copy()
    if obs.active is not None:
        out["active"] = np.int64(obs.active[b, i])
    if obs.arrived_arm is not None and obs.arrived_arm.ndim == 3:  # a random delay's slots
        arrived = obs.arrived_arm[b, i]
        out["arrived"] = (arrived >= 0).astype(np.int8)
        out["arrived_arm"] = np.maximum(arrived, 0).astype(np.int64)
        out["arrived_reward"] = obs.arrived_reward[b, i].astype(np.float64)
        out["arrived_pull"] = np.maximum(obs.arrived_pull[b, i], 0).astype(np.int64)
    elif obs.arrived_arm is not None:
        arrived = int(obs.arrived_arm[b, i])
        out["arrived"], out["arrived_arm"] = np.int64(arrived >= 0), np.int64(max(arrived, 0))
        out["arrived_reward"] = np.array(obs.arrived_reward[b, i], dtype=np.float64)
        out["arrived_pull"] = np.array(max(int(obs.arrived_pull[b, i]), 0), dtype=np.int64)
    return out


def agent_info(info: VecInfo, b: int, i: int, run_seed: int, phase: int) -> dict[str, Any]:
    """Agent i's flat info dict in run b (numbers only; the ledger is run-level); with an
    adversary also its ``role`` (0 honest, 1 Byzantine, 2 crashed; docs/adversary.md)."""
    out = {
        "phase": int(phase),
        "instant_regret": float(info.instant_regret[b, i]),
        "expected_reward": float(info.expected_reward[b, i]),
        "cumulative_regret": float(info.cumulative_regret[b, i]),
        "messages_sent": int(info.ledger.total.sent[b, i]),
        "run_seed": int(run_seed),
    }
    if info.roles is not None:
        out["role"] = int(info.roles[b, i])
    return out


def metadata_name(env_id: str) -> str:
    """PettingZoo's ``metadata["name"]`` of an id: ``FedBandit/Heterogeneous-v0`` gives
    ``fedbandit_heterogeneous_v0``."""
    return env_id.lower().replace("/", "_").replace("-v", "_v").replace("-", "_")


class FedBanditParallelEnv(ParallelEnv, EzPickle):
    """N agents on a communication topology pull arms and exchange messages (see module doc)."""

    metadata = {
        "name": "fedbandit_v0",
        "render_modes": ["human", "ansi"],
        "render_fps": 4,
        "is_parallelizable": True,
    }

    def __init__(self, render_mode: str | None = None, env_id: str | None = None, **kwargs: Any):
        """``env_id``: the registered id this environment was made from (sets
        ``metadata["name"]``; :func:`fedbandit_env.make` passes it)."""
        EzPickle.__init__(self, render_mode=render_mode, env_id=env_id, **kwargs)
        if render_mode not in (None, "human", "ansi"):
            raise ValueError(
                f"render_mode: expected None, 'human' or 'ansi', got {render_mode!r}"
            )
        self.render_mode = render_mode
        self.config = make_config(**kwargs)
        name = metadata_name(env_id) if env_id else f"fedbandit_{self.config.family}_v0"
        self.metadata = {**type(self).metadata, "name": name}
        self.engine = Engine(self.config, 1)
        self.num_agents_total = self.config.num_agents
        self.possible_agents = [agent_name(i) for i in range(self.num_agents_total)]
        self._index = {a: i for i, a in enumerate(self.possible_agents)}
        self.agents: list[str] = []
        self._obs_space = observation_space(self.config, self.engine)
        self._act_space = action_space(self.config, self.engine)
        self.state_space = state_space(self.config)
        self._seeds = SeedContinuation()
        self._seed: int | None = None
        self._last: tuple[VecObservation, VecInfo] | None = None

    # ------------------------------------------------------------- PettingZoo
    def observation_space(self, agent: str) -> spaces.Dict:
        """The same space object for every agent (no cache: a cache on a method would keep
        every environment alive)."""
        self._agent_index(agent)
        return self._obs_space

    def action_space(self, agent: str) -> spaces.Dict:
        self._agent_index(agent)
        return self._act_space

    def name_from_id(self, env_id: str) -> None:
        """Set ``metadata["name"]`` from the registered id (kept through pickling)."""
        self.metadata = {**self.metadata, "name": metadata_name(env_id)}
        self._ezpickle_kwargs["env_id"] = env_id

    @property
    def facts(self) -> FederationFacts:
        return FederationFacts.from_config(self.config, 1, self.engine.channels)

    @property
    def seed_used(self) -> int | None:
        """The run seed of the current episode (also in every info as ``run_seed``)."""
        return self._seed

    @property
    def ledger(self) -> dict[str, Any]:
        """The run's communication ledger after the last step: ``{"step": ..., "total": ...}``,
        each with messages, floats and cost per link type (run-level, so not in the per-agent
        infos)."""
        if self._last is None:
            raise HorizonError("ledger: the environment must be reset() first")
        return self.engine.ledger.summary(0)

    def reset(self, seed: int | None = None, options: dict | None = None):
        check_reset_options(options, strict=False)  # PettingZoo's checkers pass dummy options
        self._seed = self._seeds.next(seed)
        obs, info = self.engine.reset([self._seed])
        self._last = (obs, info)
        self.agents = list(self.possible_agents)
        return self._observations(obs), self._infos(info)

    def step(self, actions: Mapping[str, Any]):
        if not self.agents:
            if self._last is None:
                raise HorizonError("step: the environment must be reset() before the first step")
            raise HorizonError(
                f"step: horizon exceeded: the episode ended after {self.config.horizon} steps; "
                "call reset() to start a new one"
            )
        arms, messages, pull = self._parse_actions(actions)
        return self._step_parsed(arms, messages, pull)

    def _step_parsed(
        self,
        arms: np.ndarray,
        messages: dict[str, tuple[np.ndarray, np.ndarray]],
        pull: bool | None = None,
    ):
        """``step`` after ``_parse_actions``: arms (1, N), per channel (send, payload) arrays
        and the run's pull flag (None: pull; the privacy wrapper steps its noisy messages through
        here without re-parsing)."""
        obs, rewards, info = self.engine.step(arms, messages, pull)
        self._last = (obs, info)
        truncated = self.engine.truncated
        obs_d = self._observations(obs)
        rew_d = {a: float(rewards[0, i]) for a, i in self._index.items()}
        term_d = dict.fromkeys(self.possible_agents, False)
        trunc_d = dict.fromkeys(self.possible_agents, truncated)
        info_d = self._infos(info)
        if truncated:
            self.agents = []
        return obs_d, rew_d, term_d, trunc_d, info_d

    def render(self) -> str | None:
        """``"ansi"``: the text below; ``"human"``: the same text printed, returns None."""
        if self.render_mode is None or self._last is None:
            return None
        text = self._render_text()
        if self.render_mode == "human":
            print(text)
            return None
        return text

    def _render_text(self) -> str:
        obs, info = self._last
        total = self.engine.ledger.total
        lines = [
            f"step {int(obs.pulls[0])}/{self.config.horizon}  "
            f"messages {int(total.messages[0].sum())}  cost {float(total.cost[0].sum()):.1f}",
            "agent      arm  reward    regret(cum)",
        ]
        for i, a in enumerate(self.possible_agents):
            lines.append(
                f"{a:<10} {int(obs.last_arm[0, i]):>3}  {float(obs.last_reward[0, i]):>7.3f}"
                f"  {float(info.cumulative_regret[0, i]):>10.2f}"
            )
        return "\n".join(lines)

    def close(self) -> None:
        return None

    def state(self) -> np.ndarray:
        """Global view for centralised training: each agent's last arm and last reward."""
        if self._last is None:
            raise HorizonError("state: the environment must be reset() first")
        obs = self._last[0]
        return np.concatenate([obs.last_arm[0].astype(np.float64), obs.last_reward[0]])

    # --------------------------------------------------------------- helpers
    def _agent_index(self, agent: str) -> int:
        if agent not in self._index:
            raise ActionError(
                str(agent), "agent", f"unknown agent; expected one of {self.possible_agents}"
            )
        return self._index[agent]

    def _observations(self, obs: VecObservation) -> dict[str, dict]:
        return {a: agent_observation(self.engine, obs, 0, i) for a, i in self._index.items()}

    def _infos(self, info: VecInfo) -> dict[str, dict]:
        phase = int(self._last[0].phase[0])
        return {a: agent_info(info, 0, i, self._seed, phase) for a, i in self._index.items()}

    def _parse_actions(self, actions: Mapping[str, Any]):
        if not isinstance(actions, Mapping):
            raise ActionError("all agents", "actions", f"expected a dict by agent, got {actions!r}")
        for a in actions:
            self._agent_index(a)
        n = self.num_agents_total
        arms = np.zeros((1, n), dtype=np.int64)
        sends = {name: np.zeros((1, n), dtype=bool) for name in self.engine.channels}
        payloads = {name: np.zeros((1, n, ch.dim)) for name, ch in self.engine.channels.items()}
        pulls: dict[str, bool] = {}
        excludes: dict[str, np.ndarray] = {}
        for agent, i in self._index.items():
            if agent not in actions:
                raise ActionError(agent, "action", "missing: every live agent must act each step")
            arms[0, i] = self._parse_agent(
                agent, actions[agent], sends, payloads, i, pulls, excludes
            )
        pull = None
        if pulls:
            pull = self._run_pull(pulls)
        messages = {
            name: (sends[name], payloads[name], excludes[name])
            if name in excludes
            else (sends[name], payloads[name])
            for name in sends
        }
        return arms, messages, pull

    def _run_pull(self, pulls: dict[str, bool]) -> bool | None:
        """The run's pull flag from the agents' optional ``pull`` keys: every agent that gives
        one must agree with the others (a communication step is a step of the whole run), and
        ``pull = 0`` needs every agent to say so (an agent that omits the key pulls)."""
        values = set(pulls.values())
        if len(pulls) < self.num_agents_total and False in values:
            agent = next(a for a in self.possible_agents if a not in pulls)
            raise ActionError(
                agent,
                "pull",
                "missing: another agent asked for a communication step (pull = 0); a "
                "communication step is taken by every agent of the run, so all must give pull = 0",
            )
        if len(values) > 1:
            first = next(iter(pulls.values()))
            agent = next(a for a, v in pulls.items() if v != first)
            raise ActionError(
                agent,
                "pull",
                f"expected {int(first)} like {next(iter(pulls))}: a communication step is taken "
                "by every agent of the run, so all agents must give the same pull",
            )
        return None if values == {True} else False

    def _parse_agent(self, agent, action, sends, payloads, i, pulls, excludes=None) -> int:
        if isinstance(action, Mapping):
            if "arm" not in action:
                raise ActionError(agent, "arm", "missing from the action dict")
            unknown = set(action) - {"arm", "messages", "pull"}
            if unknown:
                raise ActionError(agent, "action", f"unknown keys {sorted(unknown)}")
            arm, messages = action["arm"], action.get("messages") or {}
            if "pull" in action:
                pulls[agent] = self._parse_send(agent, "pull", action["pull"])
        else:
            arm, messages = action, {}
        arm = self._parse_arm(agent, arm)
        if not isinstance(messages, Mapping):
            raise ActionError(agent, "messages", f"expected a dict by channel, got {messages!r}")
        for name, msg in messages.items():
            if name not in self.engine.channels:
                raise ActionError(
                    agent,
                    f"messages.{name}",
                    f"unknown channel; this environment has {sorted(self.engine.channels)}",
                )
            if isinstance(msg, Mapping) and "exclude" in msg and excludes is not None:
                row = self._parse_exclude(agent, name, msg["exclude"])
                excludes.setdefault(name, np.zeros((1, self.num_agents_total, row.size), bool))
                excludes[name][0, i] = row
            send, payload = self._parse_message(agent, name, msg)
            sends[name][0, i] = send
            if send:
                payloads[name][0, i] = payload
        return arm

    def _parse_exclude(self, agent: str, name: str, value: Any) -> np.ndarray:
        """An agent's exclusion row (N,) bool on a gossip channel in mode
        ``pull_one_neighbour`` (docs/channels.md): True for the agents it must not pull."""
        field = f"messages.{name}.exclude"
        channel = self.engine.channels[name]
        if not getattr(channel, "takes_exclude", False):
            raise ActionError(
                agent,
                field,
                "expected no exclusion mask: only a gossip channel in mode 'pull_one_neighbour' "
                f"takes one, and {name!r} is kind {channel.kind!r}",
            )
        n = self.num_agents_total
        row = np.asarray(value)
        if row.shape != (n,) or not (row.dtype == bool or np.issubdtype(row.dtype, np.integer)):
            raise ActionError(
                agent, field, f"expected {n} bools (one per agent id), got {row.dtype} {row.shape}"
            )
        if row.dtype != bool and ((row != 0) & (row != 1)).any():
            raise ActionError(agent, field, f"expected 0/1 or bools, got {row.tolist()}")
        return row.astype(bool)

    def _parse_arm(self, agent: str, arm: Any) -> int:
        m = self.config.num_arms
        if isinstance(arm, np.ndarray) and arm.shape == ():
            arm = arm.item()
        if isinstance(arm, bool) or not isinstance(arm, int | np.integer):
            raise ActionError(agent, "arm", f"expected an int in [0, {m - 1}], got {arm!r}")
        if not 0 <= arm < m:
            raise ActionError(agent, "arm", f"expected an int in [0, {m - 1}], got {arm}")
        return int(arm)

    @staticmethod
    def _parse_send(agent: str, field: str, send: Any) -> bool:
        """A ``Discrete(2)`` value: 0, 1, False, True (or a 0-d integer/bool array)."""
        if isinstance(send, np.ndarray) and send.shape == () and send.dtype != object:
            send = send.item()
        if isinstance(send, bool | np.bool_):
            return bool(send)
        if isinstance(send, int | np.integer) and send in (0, 1):
            return bool(send)
        raise ActionError(agent, field, f"expected 0 or 1 (Discrete(2)), got {send!r}")

    def _parse_message(self, agent: str, name: str, msg: Any) -> tuple[bool, np.ndarray | None]:
        field = f"messages.{name}"
        if msg is None:
            return False, None
        if isinstance(msg, Mapping):
            unknown = set(msg) - {"send", "payload", "exclude"}
            if unknown:
                raise ActionError(agent, field, f"unknown keys {sorted(unknown)}")
            send = self._parse_send(agent, f"{field}.send", msg.get("send", 1))
            payload = msg.get("payload")
        else:
            send, payload = True, msg
        if not send:
            return False, None
        dim = self.engine.channels[name].dim
        arr = np.asarray(payload)
        if arr.dtype == object or not (
            np.issubdtype(arr.dtype, np.floating) or np.issubdtype(arr.dtype, np.integer)
        ):
            raise ActionError(agent, f"{field}.payload", f"expected {dim} numbers, got {arr.dtype}")
        if arr.shape != (dim,):
            raise ActionError(
                agent, f"{field}.payload", f"expected shape ({dim},), got {arr.shape}"
            )
        if not np.all(np.isfinite(arr)):
            raise ActionError(agent, f"{field}.payload", "expected finite numbers, got NaN/inf")
        return True, arr.astype(np.float64)


def parallel_env(**kwargs: Any) -> FedBanditParallelEnv:
    """PettingZoo's family-module factory: the parallel environment (module doc)."""
    return FedBanditParallelEnv(**kwargs)


def raw_env(**kwargs: Any) -> Any:
    """The AEC view without PettingZoo's order-enforcing wrapper (``parallel_to_aec_wrapper``)."""
    return parallel_to_aec_wrapper(FedBanditParallelEnv(**kwargs))


def env(**kwargs: Any) -> Any:
    """The AEC view (``pettingzoo.utils.parallel_to_aec``): agents act in turn, a round of the
    parallel environment is played once every agent has acted."""
    return parallel_to_aec(FedBanditParallelEnv(**kwargs))


def run_seed_rng(seed: int) -> BatchedRNG:
    """The agents' stream of a ParallelEnv run seed (for learners driven by hand)."""
    return BatchedRNG.for_runs([seed], "agents")
