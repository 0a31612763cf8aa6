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
  ``(epsilon, delta)`` per message (analytic Gaussian mechanism), also recorded as
  ``rho = sensitivity^2 / (2 sigma^2)``-zCDP.

Accounting uses :class:`~fedbandit_env.privacy.accountant.PrivacyAccountant` per agent and
channel; ``composition`` chooses how the totals (and the budget) compose: ``"basic"`` (default),
``"advanced"``, ``"zcdp"`` or ``"best"`` (the last three need ``delta_prime``).
* ``running_sum=True`` (Laplace only): the payloads are running sums (e.g. per-arm reward sums).
  The wrapper feeds the increments (clipped to L1 norm ``sensitivity / 2`` each) to the
  binary-tree continual counter :class:`~fedbandit_env.privacy.tree_counter.TreeCounter`
  (gossip.md §2.4) indexed by the step, with per-level budget ``epsilon / levels``, and sends the
  noisy prefix sums. The whole stream is ``epsilon``-DP at
  every horizon, instead of ``epsilon`` per message.

``clip=False`` trusts the learner's declared sensitivity instead of clipping; the guarantee then
holds only if the declaration is true.

Noise comes from the run's ``network`` stream (a named child per channel), so the wrapper is
deterministic for a given run seed and never touches the learner's own random stream.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from pettingzoo.utils.wrappers import BaseParallelWrapper

from fedbandit_env.engine import agent_name
from fedbandit_env.errors import ConfigError
from fedbandit_env.privacy._random import LaplaceStream
from fedbandit_env.privacy.accountant import Composition, PrivacyAccountant
from fedbandit_env.privacy.calibration import (
    check_delta,
    check_epsilon,
    check_sensitivity,
    gaussian_sigma,
    gaussian_zcdp_rho,
)
from fedbandit_env.privacy.tree_counter import TreeCounter
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


class MessagePrivatizer:
    """The batched core: privatizes (B, N, dim) payloads of the wrapped channels each step and
    keeps per-agent accounts in a :class:`PrivacyAccountant` (one ledger channel per wrapped
    channel). Shared by the PettingZoo wrapper and the vector wrapper."""

    def __init__(
        self,
        channels: Mapping[str, ChannelPrivacy],
        dims: Mapping[str, int],
        num_agents: int,
        horizon: int,
        budget: float | None = None,
        composition: Composition = "basic",
        delta_prime: float | None = None,
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
        self.composition = composition
        self.delta_prime = delta_prime
        PrivacyAccountant(num_agents).spent(composition=composition, delta_prime=delta_prime)

    def reset(self, seeds: list[int]) -> None:
        b, n = len(seeds), self.num_agents
        self.num_runs = b
        self.accountant = PrivacyAccountant(n, b)
        self.messages = {c: np.zeros((b, n), dtype=np.int64) for c in self.channels}
        self.suppressed = np.zeros((b, n), dtype=np.int64)
        self.exhausted = np.zeros((b, n), dtype=bool)
        self._noise: dict[str, LaplaceStream | object] = {}
        self._trees: dict[str, TreeCounter] = {}
        self._last_sum: dict[str, np.ndarray] = {}
        for name, cfg in self.channels.items():
            rng = BatchedRNG(
                [named_child(run_seed_sequence(s, "network"), f"privacy/{name}") for s in seeds]
            )
            shape = (n, self.dims[name])
            if cfg.running_sum:
                self._trees[name] = TreeCounter(
                    shape, self.horizon, cfg.epsilon, rng=rng, sensitivity=cfg.sensitivity
                )
                self._last_sum[name] = np.zeros((b, *shape))
            elif cfg.mechanism == "laplace":
                self._noise[name] = LaplaceStream(rng, shape)
            else:
                self._noise[name] = rng.buffered("normal", shape)

    def spent(self, channel: str | None = None):
        return self.accountant.spent(
            channel, composition=self.composition, delta_prime=self.delta_prime
        )

    def _record(self, accountant: PrivacyAccountant, name: str, send: np.ndarray) -> None:
        cfg = self.channels[name]
        if cfg.running_sum:  # the whole stream costs epsilon once, at the first message
            accountant.record(name, cfg.epsilon, count=send & (self.messages[name] == 0))
        elif cfg.mechanism == "laplace":
            accountant.record(name, cfg.epsilon, count=send)
        else:
            accountant.record(name, cfg.epsilon, cfg.delta, rho=cfg.rho, count=send)

    def _within_budget(self, name: str, send: np.ndarray) -> np.ndarray:
        trial = copy.deepcopy(self.accountant)
        self._record(trial, name, send)
        eps = trial.spent(composition=self.composition, delta_prime=self.delta_prime).epsilon
        return eps <= self.budget + 1e-12

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
            if self.budget is not None and send.any():
                blocked = send & ~self._within_budget(name, send)
                self.suppressed += blocked
                self.exhausted |= blocked
                send &= ~blocked
            out[name] = (send, self._noisy(name, cfg, step, send, payload))
            self._record(self.accountant, name, send)
            self.messages[name] += send
        return out

    def _noisy(self, name, cfg: ChannelPrivacy, step, send, payload) -> np.ndarray:
        if cfg.running_sum:
            increment = payload - self._last_sum[name]
            if cfg.clip:
                increment = clip_norm(increment, cfg.sensitivity / 2, 1)
            self._last_sum[name] = np.where(send[..., None], payload, self._last_sum[name])
            pulled = np.broadcast_to(send[..., None], increment.shape)
            self._trees[name].insert(step, increment, pulled)
            return self._trees[name].release()
        order = 1 if cfg.mechanism == "laplace" else 2
        clipped = clip_norm(payload, cfg.sensitivity / 2, order) if cfg.clip else payload
        return clipped + cfg.noise_scale * self._noise[name].next()

    def report(self, b: int, i: int) -> dict[str, Any]:
        total = self.spent()
        per_channel = {}
        for name in self.channels:
            eps = self.spent(name).epsilon if self.messages[name].any() else None
            per_channel[name] = {
                "messages": int(self.messages[name][b, i]),
                "epsilon": 0.0 if eps is None else float(eps[b, i]),
            }
        return {
            "epsilon_spent": float(total.epsilon[b, i]),
            "delta_spent": float(total.delta[b, i]),
            "composition": self.composition,
            "per_channel": per_channel,
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
        composition: Composition = "basic",
        delta_prime: float | None = None,
    ):
        super().__init__(env)
        base = env.unwrapped
        dims = {name: ch.dim for name, ch in base.engine.channels.items()}
        configs = {name: _as_config(v) for name, v in channels.items()}
        self.privatizer = MessagePrivatizer(
            configs,
            dims,
            base.num_agents_total,
            base.config.horizon,
            budget,
            composition,
            delta_prime,
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
