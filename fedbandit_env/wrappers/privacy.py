"""Privacy wrappers: make any learner's messages differentially private (docs/privacy.md).

A wrapper privatizes every outgoing message of the chosen channels before the environment
delivers it, accounts the privacy each agent spends, reports it (``infos[agent]["privacy"]`` in
the PettingZoo view, ``info.privacy`` arrays in the vector view), and (optionally) stops an
agent's sending, never crashing, once a message would exceed its budget.

Per channel (:class:`ChannelPrivacy`):

* ``mechanism="laplace"``: each payload is clipped to the L1 ball of radius ``sensitivity / 2``
  around ``center`` (default 0), so any two payloads differ by at most ``sensitivity`` in L1,
  whatever the learner computed, and released with i.i.d. Laplace noise of scale
  ``sensitivity / epsilon`` per coordinate: every message is pure ``epsilon``-DP with respect to
  everything the agent knows (message-level local DP), and an agent's messages compose by basic
  composition (``k`` messages cost ``k * epsilon``).
* ``mechanism="gaussian"``: L2 clipping to the ball of radius ``sensitivity / 2`` around
  ``center`` and Gaussian noise calibrated for ``(epsilon, delta)`` per message (analytic
  Gaussian mechanism), also recorded as ``rho = sensitivity^2 / (2 sigma^2)``-zCDP.
* clipping is counted: :meth:`MessagePrivatizer.clipped_fraction` is the fraction of the sent
  payload coordinates it changed (the bench stores it with each row and warns above 1 %, so a
  sensitivity that does not fit the payloads is seen, not silently absorbed).
* ``running_sum=True`` (Laplace only): the payloads are running sums (e.g. per-arm reward sums).
  The wrapper feeds the increments (clipped to the L1 ball of radius ``sensitivity / 2`` around
  ``center`` each) to the binary-tree continual counter
  :class:`~fedbandit_env.privacy.tree_counter.TreeCounter` indexed by the agent's own pulls
  (one leaf per pull at which it sends; at most ``horizon`` leaves, whatever the communication
  steps), with per-level budget ``epsilon / levels``, and sends the noisy prefix sums. The whole stream
  is ``epsilon``-DP at every horizon, instead of ``epsilon`` per message.

``center`` is a public constant, so it does not change the guarantee: two points of a ball of
radius ``sensitivity / 2`` are at most ``sensitivity`` apart (triangle inequality), wherever the
ball is. A center at the middle of the payloads' range (0.5 for payloads in [0, 1]) lets them
through unchanged at sensitivity 1, where a ball around 0 would need sensitivity 2 (twice the
noise). ``clip=False`` trusts the learner's declared sensitivity instead of clipping (``center``
is then unused); the guarantee holds only if the declaration is true.

Accounting uses :class:`~fedbandit_env.privacy.accountant.PrivacyAccountant` per agent and
channel; ``composition`` chooses how the totals (and the budgets) compose: ``"basic"``
(default), ``"advanced"``, ``"zcdp"`` or ``"best"`` (the last three need ``delta_prime``).
``budget`` (epsilon) and ``delta_budget`` cap an agent's totals under that composition: a
message that would take either total above its cap is not sent (see :class:`MessagePrivatizer`).

Noise comes from the run's ``network`` stream (a named child per channel), so the wrapper is
deterministic for a given run seed and never touches the learner's own random stream.

Bad options raise :class:`~fedbandit_env.privacy.errors.PrivacyConfigError` (a ``PrivacyError``
and a ``ConfigError``) naming the option's path, e.g. ``privacy.channels.neighbors.epsilon``.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Literal

import numpy as np
from pettingzoo.utils.wrappers import BaseParallelWrapper

from fedbandit_env.block_streams import RandomStreams, streams_for
from fedbandit_env.engine import VecInfo
from fedbandit_env.privacy._random import LaplaceStream
from fedbandit_env.privacy.accountant import Composition, PrivacyAccountant
from fedbandit_env.privacy.calibration import (
    check_delta,
    check_epsilon,
    check_noise_scale,
    check_sensitivity,
    gaussian_sigma,
    gaussian_zcdp_rho,
)
from fedbandit_env.privacy.errors import PrivacyConfigError, PrivacyError
from fedbandit_env.privacy.tree_counter import TreeCounter
from fedbandit_env.step_args import agent_name

Mechanism = Literal["laplace", "gaussian"]

_COMPOSITIONS = ("basic", "advanced", "zcdp", "best")
_EPSILON_SLACK = 1e-12  # absolute float slack of the epsilon budget check
_DELTA_SLACK = 1e-9  # relative float slack of the delta budget check


def _checked(where: str, name: str, check: Callable[..., float], value: Any, **kw: Any) -> float:
    """``check(value, name=name, **kw)``, its PrivacyError located at ``where.name``."""
    try:
        return check(value, name=name, **kw)
    except PrivacyError as err:
        raise PrivacyConfigError(where, name, err.expected, err.got) from None


def _rho_of(scale: float, *, name: str, sensitivity: float, epsilon: float) -> float:
    """The zCDP rho of one message, or a PrivacyError naming ``name`` (epsilon) when the
    noise scale is too small for a finite rho."""
    try:
        return gaussian_zcdp_rho(scale, sensitivity)
    except PrivacyError:
        raise PrivacyError(name, "a value whose zCDP cost per message is finite", epsilon) from None


def _check_center(where: str, center: Any) -> float | tuple[float, ...]:
    """``center`` as a float (scalar) or a tuple of floats (one per payload coordinate)."""
    expected = "a finite number or a 1-d sequence of finite numbers (one per coordinate)"
    try:
        arr = np.asarray(center, dtype=np.float64)
    except (TypeError, ValueError):
        raise PrivacyConfigError(where, "center", expected, center) from None
    if isinstance(center, bool | np.bool_) or arr.ndim > 1 or arr.size == 0:
        raise PrivacyConfigError(where, "center", expected, center)
    if not np.all(np.isfinite(arr)):
        raise PrivacyConfigError(where, "center", expected, center)
    return float(arr) if arr.ndim == 0 else tuple(arr.tolist())


@dataclass(frozen=True)
class ChannelPrivacy:
    """How one channel's outgoing messages are privatized (see the module docstring).

    Validated on construction: a bad value raises :class:`PrivacyConfigError` located at
    ``ChannelPrivacy.<field>`` (at ``privacy.channels.<channel>.<field>`` when the options come
    as a dict to a wrapper). The noise scale and the zCDP ``rho`` of one message are computed
    once, here.
    """

    epsilon: float = 1.0
    mechanism: Mechanism = "laplace"
    sensitivity: float = 1.0
    delta: float = 0.0
    clip: bool = True
    running_sum: bool = False
    center: float | tuple[float, ...] = 0.0
    _noise_scale: float = field(init=False, repr=False, compare=False)
    _rho: float = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        where = "ChannelPrivacy"
        if not isinstance(self.mechanism, str) or self.mechanism not in ("laplace", "gaussian"):
            raise PrivacyConfigError(where, "mechanism", "'laplace' or 'gaussian'", self.mechanism)
        epsilon = _checked(where, "epsilon", check_epsilon, self.epsilon, allow_inf=False)
        sensitivity = _checked(where, "sensitivity", check_sensitivity, self.sensitivity)
        for name in ("clip", "running_sum"):
            if not isinstance(getattr(self, name), bool | np.bool_):
                raise PrivacyConfigError(where, name, "True or False", getattr(self, name))
        if self.mechanism == "gaussian":
            delta = _checked(where, "delta", check_delta, self.delta)
            if self.running_sum:
                raise PrivacyConfigError(
                    where,
                    "running_sum",
                    "False for the Gaussian mechanism (the tree counter is Laplace)",
                    self.running_sum,
                )
            try:
                scale = gaussian_sigma(sensitivity, epsilon, delta)
            except PrivacyError as err:
                raise PrivacyConfigError(where, "epsilon", err.expected, err.got) from None
        else:
            if not isinstance(self.delta, numbers.Real) or self.delta != 0.0:
                raise PrivacyConfigError(where, "delta", "0 for the Laplace mechanism", self.delta)
            scale = sensitivity / epsilon
        scale = _checked(where, "epsilon", check_noise_scale, scale, epsilon=epsilon)
        rho = _checked(where, "epsilon", _rho_of, scale, sensitivity=sensitivity, epsilon=epsilon)
        object.__setattr__(self, "center", _check_center(where, self.center))
        object.__setattr__(self, "_noise_scale", scale)
        object.__setattr__(self, "_rho", rho)

    @property
    def noise_scale(self) -> float:
        """Laplace scale or Gaussian sigma of one message (computed once, at construction)."""
        return self._noise_scale

    @property
    def rho(self) -> float:
        """zCDP cost of one message, ``sensitivity^2 / (2 noise_scale^2)`` (computed once)."""
        return self._rho

    @classmethod
    def from_options(cls, channel: str, options: Any) -> ChannelPrivacy:
        """A channel's config from a ``ChannelPrivacy`` or a dict of its fields; errors are
        located at ``privacy.channels.<channel>``."""
        where = f"privacy.channels.{channel}"
        if isinstance(options, ChannelPrivacy):
            return options
        if not isinstance(options, Mapping):
            raise PrivacyConfigError(where, "", "a ChannelPrivacy or a dict of options", options)
        known = [f.name for f in fields(cls) if f.init]
        unknown = sorted(set(options) - set(known))
        if unknown:
            raise PrivacyConfigError(where, "", f"options among {known}", unknown)
        try:
            return cls(**options)
        except PrivacyConfigError as err:
            raise err.at(where) from None


def clip_norm(payload: np.ndarray, bound: float, order: int) -> np.ndarray:
    """Scale each payload row (last axis) down to norm ``bound`` (L1 or L2) if it is larger."""
    norm = np.linalg.norm(payload, ord=order, axis=-1, keepdims=True)
    return payload * np.minimum(1.0, bound / np.maximum(norm, 1e-300))


def clip_to_ball(
    payload: np.ndarray, center: np.ndarray | None, bound: float, order: int
) -> np.ndarray:
    """Bring each payload row into the L1/L2 ball of radius ``bound`` around ``center`` (None:
    around 0) by scaling its offset from the center down if it is longer than ``bound``."""
    if center is None:
        return clip_norm(payload, bound, order)
    return center + clip_norm(payload - center, bound, order)


@dataclass(frozen=True)
class PrivacyInfo:
    """Privacy spent per run and agent after a step: arrays of shape (B, N).

    ``epsilon_spent`` and ``delta_spent`` are the totals over the wrapped channels under
    ``composition``; ``per_channel[name]`` holds ``"messages"`` (sent so far) and ``"epsilon"``
    (that channel alone, same composition); ``budget_exhausted`` is True once a message of the
    agent was suppressed for a budget, ``messages_suppressed`` counts them. The PettingZoo
    wrapper reports row ``b = 0`` as one dict per agent (:meth:`agent_reports`)."""

    epsilon_spent: np.ndarray
    delta_spent: np.ndarray
    composition: str
    per_channel: dict[str, dict[str, np.ndarray]]
    budget: float | None
    delta_budget: float | None
    budget_exhausted: np.ndarray
    messages_suppressed: np.ndarray

    def agent_reports(self, b: int = 0) -> list[dict[str, Any]]:
        """One report dict per agent of run ``b`` (Python scalars, agent order)."""
        eps = self.epsilon_spent[b].tolist()
        dl = self.delta_spent[b].tolist()
        exhausted = self.budget_exhausted[b].tolist()
        suppressed = self.messages_suppressed[b].tolist()
        channels = [
            (name, c["messages"][b].tolist(), c["epsilon"][b].tolist())
            for name, c in self.per_channel.items()
        ]
        return [
            {
                "epsilon_spent": eps[i],
                "delta_spent": dl[i],
                "composition": self.composition,
                "per_channel": {
                    name: {"messages": msgs[i], "epsilon": ch_eps[i]}
                    for name, msgs, ch_eps in channels
                },
                "budget": self.budget,
                "delta_budget": self.delta_budget,
                "budget_exhausted": exhausted[i],
                "messages_suppressed": suppressed[i],
            }
            for i in range(len(eps))
        ]


@dataclass
class PrivateVecInfo(VecInfo):
    """The vector view's :class:`~fedbandit_env.engine.VecInfo` plus ``privacy``."""

    privacy: PrivacyInfo | None = None


class MessagePrivatizer:
    """The batched core: privatizes (B, N, dim) payloads of the wrapped channels each step and
    keeps per-agent accounts in a :class:`PrivacyAccountant` (one ledger channel per wrapped
    channel). Shared by the PettingZoo wrapper and the vector wrapper.

    Budgets: before a channel's messages go out, each sending agent's totals are computed as
    they would be after the message (``PrivacyAccountant.spent_if_recorded``, under
    ``composition``). If the epsilon total would exceed ``budget`` or the delta total would
    exceed ``delta_budget``, the message is suppressed: not delivered, not charged to the
    ledger, not accounted; ``budget_exhausted`` turns (and stays) True and
    ``messages_suppressed`` counts it. The agent's arm pull and its other channels go on as
    usual, and nothing raises. Channels are checked in the order given, so a cheaper channel
    can still send after a costlier one was blocked.
    """

    def __init__(
        self,
        channels: Mapping[str, ChannelPrivacy | Mapping[str, Any]],
        dims: Mapping[str, int],
        num_agents: int,
        horizon: int,
        budget: float | None = None,
        composition: Composition = "basic",
        delta_prime: float | None = None,
        delta_budget: float | None = None,
    ):
        for name in channels:
            if name not in dims:
                raise PrivacyConfigError(
                    "privacy.channels", name, f"a channel of the environment {sorted(dims)}", name
                )
        self.channels = {
            name: ChannelPrivacy.from_options(name, cfg) for name, cfg in channels.items()
        }
        self._centers = {
            name: self._center_array(name, cfg, dims[name]) for name, cfg in self.channels.items()
        }
        self.dims = dict(dims)
        self.num_agents = num_agents
        self.horizon = horizon
        self.composition, self.delta_prime = self._check_composition(composition, delta_prime)
        if budget is not None:
            budget = _checked("privacy", "budget", check_epsilon, budget, allow_inf=False)
        if delta_budget is not None:
            delta_budget = _checked(
                "privacy", "delta_budget", check_delta, delta_budget, allow_zero=True
            )
            if self.composition != "basic" and delta_budget < self.delta_prime:
                raise PrivacyConfigError(
                    "privacy",
                    "delta_budget",
                    f"at least delta_prime = {self.delta_prime} (composition "
                    f"{self.composition!r} spends delta_prime with the first message)",
                    delta_budget,
                )
        self.budget = budget
        self.delta_budget = delta_budget

    @staticmethod
    def _check_composition(composition: Any, delta_prime: Any) -> tuple[Composition, float | None]:
        if not isinstance(composition, str) or composition not in _COMPOSITIONS:
            raise PrivacyConfigError(
                "privacy", "composition", "'basic', 'advanced', 'zcdp' or 'best'", composition
            )
        if composition == "basic":
            return composition, delta_prime
        if delta_prime is None:
            raise PrivacyConfigError(
                "privacy", "delta_prime", f"a number in (0, 1) for {composition!r}", None
            )
        return composition, _checked("privacy", "delta_prime", check_delta, delta_prime)

    @staticmethod
    def _center_array(name: str, cfg: ChannelPrivacy, dim: int) -> np.ndarray | None:
        """The clip center of a channel as an array broadcastable to (B, N, dim), None for 0."""
        center = np.asarray(cfg.center, dtype=np.float64)
        if center.ndim == 1 and center.shape != (dim,):
            raise PrivacyConfigError(
                f"privacy.channels.{name}",
                "center",
                f"a number or a vector of length {dim} (the channel's dim)",
                cfg.center,
            )
        return None if not np.any(center) else center

    @property
    def _budgeted(self) -> bool:
        return self.budget is not None or self.delta_budget is not None

    def reset(self, seeds: list[int], random_streams: RandomStreams = "per_run") -> None:
        """Start the runs of ``seeds``; the noise comes from each run's ``network`` stream
        (per run, or as a block for the privacy audits)."""
        b, n = len(seeds), self.num_agents
        self.num_runs = b
        self.accountant = PrivacyAccountant(n, b)
        self.messages = {c: np.zeros((b, n), dtype=np.int64) for c in self.channels}
        self.suppressed = np.zeros((b, n), dtype=np.int64)
        self.exhausted = np.zeros((b, n), dtype=bool)
        self.coordinates = np.zeros(b, dtype=np.int64)  # payload coordinates sent (clipped ones)
        self.clipped = np.zeros(b, dtype=np.int64)  # of them, those the clipping changed
        self._noise: dict[str, LaplaceStream | object] = {}
        self._trees: dict[str, TreeCounter] = {}
        self._last_sum: dict[str, np.ndarray] = {}
        for name, cfg in self.channels.items():
            rng = streams_for(random_streams, seeds, "network").child(f"privacy/{name}")
            shape = (n, self.dims[name])
            if cfg.running_sum:
                self._trees[name] = TreeCounter(
                    shape,
                    self.horizon,
                    cfg.epsilon,
                    rng=rng,
                    sensitivity=cfg.sensitivity,
                    tree_index="pull",
                )
                self._last_sum[name] = np.zeros((b, *shape))
            elif cfg.mechanism == "laplace":
                self._noise[name] = LaplaceStream(rng, shape)
            else:
                self._noise[name] = rng.buffered("normal", shape)

    @property
    def epsilon_per_release(self) -> float:
        """The epsilon of one release the options ask for: the largest over the wrapped
        channels (a running sum's whole stream is one release of its epsilon)."""
        return max(cfg.epsilon for cfg in self.channels.values())

    def clipped_fraction(self) -> np.ndarray:
        """(B,) the fraction of the payload coordinates sent so far that the clipping changed
        (0 in a run that sent none)."""
        return self.clipped / np.maximum(self.coordinates, 1)

    def _count_clipped(self, rows: np.ndarray, raw: np.ndarray, clipped: np.ndarray) -> None:
        """Count the coordinates of the sent rows (``rows`` (B, N)) and those clipping changed."""
        changed = (clipped != raw) & rows[..., None]
        self.clipped += changed.reshape(self.num_runs, -1).sum(axis=1)
        self.coordinates += rows.sum(axis=1) * raw.shape[-1]

    def spent(self, channel: str | None = None):
        return self.accountant.spent(
            channel, composition=self.composition, delta_prime=self.delta_prime
        )

    def info(self) -> PrivacyInfo:
        """The privacy report of every run and agent: totals and per-channel figures computed
        once, as (B, N) arrays (C + 1 composed totals for C wrapped channels)."""
        total = self.spent()
        shape = (self.num_runs, self.num_agents)
        per_channel = {
            name: {
                "messages": self.messages[name].copy(),
                "epsilon": (
                    self.spent(name).epsilon
                    if name in self.accountant.channels
                    else np.zeros(shape)
                ),
            }
            for name in self.channels
        }
        return PrivacyInfo(
            epsilon_spent=total.epsilon,
            delta_spent=total.delta,
            composition=self.composition,
            per_channel=per_channel,
            budget=self.budget,
            delta_budget=self.delta_budget,
            budget_exhausted=self.exhausted.copy(),
            messages_suppressed=self.suppressed.copy(),
        )

    def _release(self, name: str, send: np.ndarray) -> dict[str, Any]:
        """The accountant record of one step's messages on channel ``name``."""
        cfg = self.channels[name]
        if cfg.running_sum:  # the whole stream costs epsilon once, at the first message
            return {"epsilon": cfg.epsilon, "count": send & (self.messages[name] == 0)}
        if cfg.mechanism == "laplace":
            return {"epsilon": cfg.epsilon, "count": send}
        return {"epsilon": cfg.epsilon, "delta": cfg.delta, "rho": cfg.rho, "count": send}

    def _within_budget(self, name: str, send: np.ndarray) -> np.ndarray:
        """Which agents stay within the budgets if ``send`` goes out on ``name`` (B, N)."""
        after = self.accountant.spent_if_recorded(
            name,
            **self._release(name, send),
            composition=self.composition,
            delta_prime=self.delta_prime,
        )
        ok = np.ones(send.shape, dtype=bool)
        if self.budget is not None:
            ok &= after.epsilon <= self.budget + _EPSILON_SLACK
        if self.delta_budget is not None:
            ok &= after.delta <= self.delta_budget * (1.0 + _DELTA_SLACK)
        return ok

    def privatize(
        self,
        step: int,
        messages: Mapping[str, tuple[np.ndarray, np.ndarray]],
        pulling: np.ndarray | None = None,
        live: np.ndarray | None = None,
    ) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """Noisy copies of the wrapped channels' (send, payload) of engine step ``step``; other
        channels pass through. ``messages`` must already be checked by the environment
        (:meth:`~fedbandit_env.engine.Engine.check_step`), so that a refused step privatizes
        and accounts nothing. ``pulling`` (B,) marks the runs that pull in this step (default
        all): a running sum enters its tree counter only at a pull (see :meth:`_noisy`).
        ``live`` (B,) marks the runs that have pulls left (default all): a finished run sends
        nothing and is charged nothing."""
        out = dict(messages)
        shape = (self.num_runs, self.num_agents)
        pulling = np.ones(self.num_runs, dtype=bool) if pulling is None else pulling
        for name, cfg in self.channels.items():
            send, payload = messages.get(name, (None, None))
            if send is None:
                send = np.zeros(shape, dtype=bool)
                payload = np.zeros((*shape, self.dims[name]))
            send = np.broadcast_to(send, shape).copy()
            if live is not None:
                send &= live[:, None]
            if self._budgeted and send.any():
                blocked = send & ~self._within_budget(name, send)
                self.suppressed += blocked
                self.exhausted |= blocked
                send &= ~blocked
            out[name] = (send, self._noisy(name, cfg, step, send, payload, pulling))
            self.accountant.record(name, **self._release(name, send))
            self.messages[name] += send
        return out

    def _noisy(self, name, cfg: ChannelPrivacy, step, send, payload, pulling) -> np.ndarray:
        """The released payloads of one channel. A running sum's tree counter is indexed by
        the agent's own pulls (``tree_index="pull"``): at a step where the run pulls and the
        agent sends, the change of its sum since its last insertion (clipped) enters the tree
        as the agent's next leaf; any message releases the tree's noisy prefix sum. So an
        agent has at most ``horizon`` leaves however many communication steps it takes, and a
        message at a communication step re-releases the last noisy sum (post-processing, no
        extra cost)."""
        center = self._centers[name]
        if cfg.running_sum:
            leaf = send & pulling[:, None]
            increment = payload - self._last_sum[name]
            if cfg.clip:
                raw, increment = increment, clip_to_ball(increment, center, cfg.sensitivity / 2, 1)
                self._count_clipped(leaf, raw, increment)
            self._last_sum[name] = np.where(leaf[..., None], payload, self._last_sum[name])
            pulled = np.broadcast_to(leaf[..., None], increment.shape)
            self._trees[name].insert(step, increment, pulled)
            return self._trees[name].release()
        order = 1 if cfg.mechanism == "laplace" else 2
        clipped = payload
        if cfg.clip:
            clipped = clip_to_ball(payload, center, cfg.sensitivity / 2, order)
            self._count_clipped(send, payload, clipped)
        return clipped + cfg.noise_scale * self._noise[name].next()

    def report(self, b: int, i: int) -> dict[str, Any]:
        """The report dict of agent ``i`` of run ``b`` (one agent; the wrappers use
        :meth:`info` once per step instead)."""
        return self.info().agent_reports(b)[i]


class PrivacyWrapper(BaseParallelWrapper):
    """PettingZoo wrapper privatizing the outgoing messages of chosen channels.

    ``PrivacyWrapper(env, {"neighbors": {"epsilon": 0.5, "sensitivity": 2.0}}, budget=20)``.
    Infos gain ``infos[agent]["privacy"]`` (epsilon and delta spent, per channel, budget state),
    computed once per step for all agents (:meth:`MessagePrivatizer.info`).
    """

    def __init__(
        self,
        env: Any,
        channels: Mapping[str, ChannelPrivacy | Mapping[str, Any]],
        budget: float | None = None,
        composition: Composition = "basic",
        delta_prime: float | None = None,
        delta_budget: float | None = None,
    ):
        super().__init__(env)
        base = env.unwrapped
        dims = {name: ch.dim for name, ch in base.engine.channels.items()}
        self.privatizer = MessagePrivatizer(
            _channel_options(channels),
            dims,
            base.num_agents_total,
            base.config.horizon,
            budget,
            composition,
            delta_prime,
            delta_budget,
        )

    def reset(self, seed: int | None = None, options: dict | None = None):
        obs, infos = self.env.reset(seed=seed, options=options)
        self.privatizer.reset([self.env.unwrapped.seed_used])
        return obs, self._with_privacy(infos)

    def step(self, actions: Mapping[str, Any]):
        base = self.env.unwrapped
        if not base.agents:  # the episode is over: the environment raises its HorizonError
            return self.env.step(actions)
        arms, messages, pull = base._parse_actions(actions)
        _, checked, pulling, live, _ = base.engine.check_step(arms, messages, pull)
        noisy = self.privatizer.privatize(base.engine.step_count + 1, checked, pulling, live)
        noisy = _with_masks(noisy, messages)
        if self.env is base:  # no wrapper in between: step the parsed arrays directly
            out = base._step_parsed(arms, noisy, pull)
        else:
            out = self.env.step(_as_actions(base, arms, noisy, pull))
        obs, rewards, terms, truncs, infos = out
        return obs, rewards, terms, truncs, self._with_privacy(infos)

    def _with_privacy(self, infos: dict) -> dict:
        for i, report in enumerate(self.privatizer.info().agent_reports(0)):
            infos[agent_name(i)]["privacy"] = report
        return infos


class PrivacyVectorWrapper:
    """The same privatization for the vector view (B runs as arrays), with the same options.

    ``reset`` and ``step`` return a :class:`PrivateVecInfo`: the view's info plus ``privacy``,
    a :class:`PrivacyInfo` of (B, N) arrays holding the figures the PettingZoo wrapper reports
    per agent (run b of a batch gives the same numbers as that run seed in the PettingZoo view).
    """

    def __init__(
        self,
        venv: Any,
        channels: Mapping[str, ChannelPrivacy | Mapping[str, Any]],
        budget: float | None = None,
        composition: Composition = "basic",
        delta_prime: float | None = None,
        delta_budget: float | None = None,
    ):
        self.venv = venv
        dims = {name: ch.dim for name, ch in venv.engine.channels.items()}
        self.privatizer = MessagePrivatizer(
            _channel_options(channels),
            dims,
            venv.num_agents,
            venv.horizon,
            budget,
            composition,
            delta_prime,
            delta_budget,
        )

    def __getattr__(self, name: str) -> Any:
        return getattr(self.venv, name)

    def reset(self, seed=None, options=None):
        obs, info = self.venv.reset(seed=seed, options=options)
        self.privatizer.reset(self.venv.seeds, self.venv.engine.random_streams)
        return obs, self._with_privacy(info)

    def step(self, arms: np.ndarray, messages=None, pull=None):
        engine = self.venv.engine
        _, checked, pulling, live, _ = engine.check_step(arms, messages, pull)  # before any noise
        noisy = self.privatizer.privatize(engine.step_count + 1, checked, pulling, live)
        noisy = _with_masks(noisy, messages or {})
        obs, rewards, terminated, truncated, info = self.venv.step(arms, noisy, pull)
        return obs, rewards, terminated, truncated, self._with_privacy(info)

    def _with_privacy(self, info: VecInfo) -> PrivateVecInfo:
        base = {f.name: getattr(info, f.name) for f in fields(VecInfo)}
        return PrivateVecInfo(**base, privacy=self.privatizer.info())


def _with_masks(noisy: dict, messages: Mapping[str, Any]) -> dict:
    """``noisy`` with the exclusion masks of the raw messages put back (a gossip pull's
    ``(send, payload, exclude)``, docs/channels.md): only payloads are privatized."""
    out = dict(noisy)
    for name, value in messages.items():
        if isinstance(value, tuple) and len(value) == 3:
            out[name] = (*out[name][:2], value[2])
    return out


def _as_actions(
    base: Any, arms: np.ndarray, messages: Mapping[str, tuple], pull: bool | None = None
) -> dict[str, Any]:
    """Per-agent action dicts of parsed arms (1, N), (send, payload[, exclude]) arrays and the
    run's pull flag (None: pull)."""
    extra = {} if pull is None else {"pull": int(pull)}

    def message(value: tuple, i: int) -> dict[str, Any]:
        out = {"send": int(value[0][0, i]), "payload": value[1][0, i]}
        if len(value) == 3:
            out["exclude"] = np.asarray(value[2])[0, i]
        return out

    return {
        agent: {
            **extra,
            "arm": int(arms[0, i]),
            "messages": {name: message(value, i) for name, value in messages.items()},
        }
        for agent, i in base._index.items()
    }


def _channel_options(channels: Any) -> dict[str, Any]:
    if not isinstance(channels, Mapping):
        raise PrivacyConfigError(
            "privacy", "channels", "a dict of options (or ChannelPrivacy) by channel", channels
        )
    return dict(channels)
