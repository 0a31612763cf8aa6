"""Privacy wrappers: make any learner's messages differentially private (DESIGN.md §4).

A wrapper privatizes every outgoing message of the chosen channels before the environment
delivers it, accounts the privacy each agent spends, reports it in ``infos[agent]["privacy"]``,
and (optionally) stops an agent's sending — never crashing — once its budget is spent.

Per channel (:class:`ChannelPrivacy`):

* ``mechanism="laplace"``: each payload is clipped to L1 norm ``sensitivity / 2`` (so any two
  payloads differ by at most ``sensitivity`` in L1, whatever the learner computed) and released
  with i.i.d. Laplace noise of scale ``sensitivity / epsilon`` per coordinate: every message is
  pure ``epsilon``-DP with respect to everything the agent knows (message-level local DP), and an
  agent's messages compose by basic composition (``k`` messages cost ``k * epsilon``).
* ``mechanism="gaussian"``: L2 clipping to ``sensitivity / 2`` and Gaussian noise calibrated for
  ``(epsilon, delta)`` per message (analytic Gaussian mechanism); composition is accounted in
  zCDP (``rho = sensitivity^2 / (2 sigma^2)`` per message) and reported as ``(epsilon, delta)``
  with ``epsilon = rho + 2 sqrt(rho ln(1/delta))`` at the channel's ``delta``.
* ``running_sum=True`` (Laplace only): the payloads are running sums (e.g. per-arm reward sums).
  The wrapper feeds the increments (clipped to L1 norm ``sensitivity / 2`` each) to a binary-tree
  continual counter (gossip.md §2.4 / Chan–Shi–Song) indexed by the step, with per-level budget
  ``epsilon / levels``, and sends the noisy prefix sums. The whole stream is ``epsilon``-DP at
  every horizon, instead of ``epsilon`` per message.

``clip=False`` trusts the learner's declared sensitivity instead of clipping; the guarantee then
holds only if the declaration is true.

Noise comes from the run's ``network`` stream (a named child per channel), so the wrapper is
deterministic for a given run seed and never touches the learner's own random stream.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from pettingzoo.utils.wrappers import BaseParallelWrapper

from fedbandit_env.engine import agent_name
from fedbandit_env.errors import ConfigError
from fedbandit_env.privacy.calibration import (
    check_delta,
    check_epsilon,
    check_sensitivity,
    gaussian_sigma,
    gaussian_zcdp_rho,
)
from fedbandit_env.seeding import BatchedRNG, named_child, run_seed_sequence

Mechanism = Literal["laplace", "gaussian"]


@dataclass(frozen=True)
class ChannelPrivacy:
    """How one channel's outgoing messages are privatized (see the module docstring)."""

    epsilon: float = 1.0
    mechanism: Mechanism = "laplace"
    sensitivity: float = 1.0
    delta: float = 0.0
    clip: bool = True
    running_sum: bool = False

    def __post_init__(self) -> None:
        if self.mechanism not in ("laplace", "gaussian"):
            raise ConfigError(
                f"privacy.mechanism: expected 'laplace' or 'gaussian', got {self.mechanism!r}"
            )
        check_epsilon(self.epsilon, allow_inf=False)
        check_sensitivity(self.sensitivity)
        if self.mechanism == "gaussian":
            check_delta(self.delta)
            if self.running_sum:
                raise ConfigError(
                    "privacy.running_sum: expected mechanism 'laplace' (the tree counter is Laplace)"
                )
        elif self.delta != 0.0:
            raise ConfigError(
                f"privacy.delta: expected 0 for the Laplace mechanism, got {self.delta}"
            )

    @property
    def noise_scale(self) -> float:
        """Laplace scale or Gaussian sigma of one message."""
        if self.mechanism == "laplace":
            return self.sensitivity / self.epsilon
        return gaussian_sigma(self.sensitivity, self.epsilon, self.delta)

    @property
    def rho(self) -> float:
        """zCDP cost of one Gaussian message."""
        return gaussian_zcdp_rho(self.noise_scale, self.sensitivity)


def clip_norm(payload: np.ndarray, bound: float, order: int) -> np.ndarray:
    """Scale each payload row (last axis) down to norm ``bound`` (L1 or L2) if it is larger."""
    norm = np.linalg.norm(payload, ord=order, axis=-1, keepdims=True)
    return payload * np.minimum(1.0, bound / np.maximum(norm, 1e-300))


def zcdp_epsilon(rho: np.ndarray, delta: float) -> np.ndarray:
    """(epsilon, delta)-DP of a rho-zCDP mechanism: rho + 2 sqrt(rho ln(1/delta))."""
    return rho + 2.0 * np.sqrt(rho * math.log(1.0 / delta))


class _TreeSums:
    """Binary-tree continual counter over the step index, batched over (B, N, dim).

    Leaf t holds the increment sent at step t (zero when nothing is sent). At step t the block of
    level i = (lowest set bit of t) closes: alpha_i = sum_{j<i} alpha_j + x_t, the lower levels
    reset, and the closed block gets one Laplace draw of scale ``levels * sensitivity / epsilon``
    (gossip.md §2.4: per-level budget epsilon / levels). The release is the sum of the noisy
    closed blocks of the binary expansion of t: popcount(t) noise terms, each reused until its
    block is superseded."""

    def __init__(self, shape: tuple[int, ...], horizon: int, scale: float, rng: BatchedRNG):
        self.levels = int(math.floor(math.log2(horizon))) + 1
        self.alpha = np.zeros((self.levels, *shape))
        self.noisy = np.zeros((self.levels, *shape))
        self.scale = self.levels * scale
        self._exp = rng.buffered("exponential", (2, *shape[1:]))

    def release(self, t: int, increment: np.ndarray) -> np.ndarray:
        e = self._exp.next()
        noise = self.scale * (e[:, 0] - e[:, 1])
        i = (t & -t).bit_length() - 1
        self.alpha[i] = self.alpha[:i].sum(axis=0) + increment
        self.alpha[:i] = 0.0
        self.noisy[i] = self.alpha[i] + noise
        self.noisy[:i] = 0.0
        bits = [j for j in range(self.levels) if (t >> j) & 1]
        return self.noisy[bits].sum(axis=0)


class MessagePrivatizer:
    """The batched core: privatizes (B, N, dim) payloads of the wrapped channels each step and
    keeps per-agent accounts. Shared by the PettingZoo wrapper and the vector wrapper."""

    def __init__(
        self,
        channels: Mapping[str, ChannelPrivacy],
        dims: Mapping[str, int],
        num_agents: int,
        horizon: int,
        budget: float | None = None,
    ):
        for name in channels:
            if name not in dims:
                raise ConfigError(
                    f"privacy.channels.{name}: unknown channel; the environment has {sorted(dims)}"
                )
        if budget is not None:
            check_epsilon(budget, allow_inf=False, name="budget")
        self.channels = dict(channels)
        self.dims = dict(dims)
        self.num_agents = num_agents
        self.horizon = horizon
        self.budget = budget

    def reset(self, seeds: list[int]) -> None:
        b, n = len(seeds), self.num_agents
        self.num_runs = b
        self.eps_pure = {c: np.zeros((b, n)) for c in self.channels}
        self.rho = {c: np.zeros((b, n)) for c in self.channels}
        self.messages = {c: np.zeros((b, n), dtype=np.int64) for c in self.channels}
        self.suppressed = np.zeros((b, n), dtype=np.int64)
        self.exhausted = np.zeros((b, n), dtype=bool)
        self._noise, self._trees, self._last_sum = {}, {}, {}
        for name, cfg in self.channels.items():
            rng = BatchedRNG(
                [named_child(run_seed_sequence(s, "network"), f"privacy/{name}") for s in seeds]
            )
            shape = (b, n, self.dims[name])
            if cfg.running_sum:
                self._trees[name] = _TreeSums(shape, self.horizon, cfg.noise_scale, rng)
                self._last_sum[name] = np.zeros(shape)
            else:
                kind = "exponential" if cfg.mechanism == "laplace" else "normal"
                self._noise[name] = rng.buffered(kind, (2, n, self.dims[name]))

    def _spent(self, name: str, eps: np.ndarray, rho: np.ndarray) -> np.ndarray:
        cfg = self.channels[name]
        if cfg.mechanism == "gaussian":
            return zcdp_epsilon(rho, cfg.delta)
        return eps

    def channel_epsilon(self, name: str) -> np.ndarray:
        """(B, N) epsilon spent on one channel (zCDP converted at the channel's delta)."""
        return self._spent(name, self.eps_pure[name], self.rho[name])

    def epsilon_spent(self) -> np.ndarray:
        """(B, N): basic composition over channels of each channel's epsilon."""
        return sum(self.channel_epsilon(c) for c in self.channels)

    def delta_spent(self) -> np.ndarray:
        """(B, N): summed delta of the Gaussian channels an agent has used."""
        out = np.zeros((self.num_runs, self.num_agents))
        for name, cfg in self.channels.items():
            if cfg.mechanism == "gaussian":
                out += cfg.delta * (self.messages[name] > 0)
        return out

    def _after_one_more(self, name: str) -> np.ndarray:
        """(B, N) epsilon each agent would have spent on ``name`` after one more message."""
        cfg = self.channels[name]
        eps, rho = self.eps_pure[name], self.rho[name]
        if cfg.running_sum:
            eps = np.full_like(eps, cfg.epsilon)  # the whole stream costs epsilon once
        elif cfg.mechanism == "laplace":
            eps = eps + cfg.epsilon
        else:
            rho = rho + cfg.rho
        return self._spent(name, eps, rho)

    def privatize(
        self, step: int, messages: Mapping[str, tuple[np.ndarray, np.ndarray]]
    ) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """Noisy copies of the wrapped channels' (send, payload); other channels pass through."""
        out = dict(messages)
        for name, cfg in self.channels.items():
            send, payload = messages.get(name, (None, None))
            if send is None:
                send = np.zeros((self.num_runs, self.num_agents), dtype=bool)
                payload = np.zeros((self.num_runs, self.num_agents, self.dims[name]))
            send = send.copy()
            if self.budget is not None:
                others = self.epsilon_spent() - self.channel_epsilon(name)
                projected = others + self._after_one_more(name)
                blocked = send & (projected > self.budget + 1e-12)
                self.suppressed += blocked
                self.exhausted |= blocked
                send &= ~blocked
            out[name] = (send, self._noisy(name, cfg, step, send, payload))
            self._account(name, cfg, send)
        return out

    def _noisy(self, name, cfg: ChannelPrivacy, step, send, payload) -> np.ndarray:
        if cfg.running_sum:
            increment = payload - self._last_sum[name]
            if cfg.clip:
                increment = clip_norm(increment, cfg.sensitivity / 2, 1)
            increment = increment * send[..., None]
            self._last_sum[name] = np.where(send[..., None], payload, self._last_sum[name])
            return self._trees[name].release(step, increment)
        order = 1 if cfg.mechanism == "laplace" else 2
        clipped = clip_norm(payload, cfg.sensitivity / 2, order) if cfg.clip else payload
        draw = self._noise[name].next()
        if cfg.mechanism == "laplace":
            noise = cfg.noise_scale * (draw[:, 0] - draw[:, 1])
        else:
            noise = cfg.noise_scale * draw[:, 0]
        return clipped + noise

    def _account(self, name: str, cfg: ChannelPrivacy, send: np.ndarray) -> None:
        self.messages[name] += send
        if cfg.running_sum:
            self.eps_pure[name] = np.where(self.messages[name] > 0, cfg.epsilon, 0.0)
        elif cfg.mechanism == "laplace":
            self.eps_pure[name] += cfg.epsilon * send
        else:
            self.rho[name] += cfg.rho * send

    def report(self, b: int, i: int) -> dict[str, Any]:
        eps = self.epsilon_spent()
        return {
            "epsilon_spent": float(eps[b, i]),
            "delta_spent": float(self.delta_spent()[b, i]),
            "per_channel": {
                name: {
                    "messages": int(self.messages[name][b, i]),
                    "epsilon": float(self.channel_epsilon(name)[b, i]),
                }
                for name in self.channels
            },
            "budget": self.budget,
            "budget_exhausted": bool(self.exhausted[b, i]),
            "messages_suppressed": int(self.suppressed[b, i]),
        }


def _as_config(value: ChannelPrivacy | Mapping[str, Any]) -> ChannelPrivacy:
    if isinstance(value, ChannelPrivacy):
        return value
    if isinstance(value, Mapping):
        try:
            return ChannelPrivacy(**value)
        except TypeError as err:
            raise ConfigError(f"privacy: bad channel options {sorted(value)}: {err}") from None
    raise ConfigError(f"privacy: expected a ChannelPrivacy or a dict per channel, got {value!r}")


class PrivacyWrapper(BaseParallelWrapper):
    """PettingZoo wrapper privatizing the outgoing messages of chosen channels.

    ``PrivacyWrapper(env, {"neighbors": {"epsilon": 0.5, "sensitivity": 2.0}}, budget=20)``.
    Infos gain ``infos[agent]["privacy"]`` (epsilon spent, per channel, budget state).
    """

    def __init__(
        self,
        env: Any,
        channels: Mapping[str, ChannelPrivacy | Mapping[str, Any]],
        budget: float | None = None,
    ):
        super().__init__(env)
        base = env.unwrapped
        dims = {name: ch.dim for name, ch in base.engine.channels.items()}
        configs = {name: _as_config(v) for name, v in channels.items()}
        self.privatizer = MessagePrivatizer(
            configs, dims, base.num_agents_total, base.config.horizon, budget
        )

    def reset(self, seed: int | None = None, options: dict | None = None):
        obs, infos = self.env.reset(seed=seed, options=options)
        self.privatizer.reset([self.env.unwrapped.seed_used])
        return obs, self._with_privacy(infos)

    def step(self, actions: Mapping[str, Any]):
        base = self.env.unwrapped
        arms, messages = base._parse_actions(actions)
        noisy = self.privatizer.privatize(base.engine.step_count + 1, messages)
        rebuilt = {}
        for agent, i in base._index.items():
            rebuilt[agent] = {
                "arm": int(arms[0, i]),
                "messages": {
                    name: {"send": int(send[0, i]), "payload": payload[0, i]}
                    for name, (send, payload) in noisy.items()
                },
            }
        obs, rewards, terms, truncs, infos = self.env.step(rebuilt)
        return obs, rewards, terms, truncs, self._with_privacy(infos)

    def _with_privacy(self, infos: dict) -> dict:
        for i in range(self.privatizer.num_agents):
            infos[agent_name(i)]["privacy"] = self.privatizer.report(0, i)
        return infos


class PrivacyVectorWrapper:
    """The same privatization for the vector view (B runs as arrays)."""

    def __init__(
        self,
        venv: Any,
        channels: Mapping[str, ChannelPrivacy | Mapping[str, Any]],
        budget: float | None = None,
    ):
        self.venv = venv
        dims = {name: ch.dim for name, ch in venv.engine.channels.items()}
        configs = {name: _as_config(v) for name, v in channels.items()}
        self.privatizer = MessagePrivatizer(configs, dims, venv.num_agents, venv.horizon, budget)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.venv, name)

    def reset(self, seed=None, options=None):
        out = self.venv.reset(seed=seed, options=options)
        self.privatizer.reset(self.venv.seeds)
        return out

    def step(self, arms: np.ndarray, messages=None):
        engine = self.venv.engine
        checked = engine._check_messages(messages or {})
        noisy = self.privatizer.privatize(engine.step_count + 1, checked)
        return self.venv.step(arms, noisy)
