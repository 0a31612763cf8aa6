"""The JAX environment of one run, gymnax / JaxMARL style (docs/jax.md).

``env = fedbandit_env.jax.make(id, **kwargs)`` holds what fixes the shapes (``env.config``, the
validated :class:`~fedbandit_env.config.EnvConfig` of the same id and kwargs: sizes, horizon,
topology, channels, adversary). What does not change a shape is an explicit pytree,
:class:`EnvParams` (gymnax's ``params``): the fixed instance's means or theta*, the reward noise
and the communication-streak limit; ``env.default_params`` holds the configuration's and
``env.make_params(...)`` checks others. ``reset(key, params=None)`` returns ``(obs, state)``
and ``step(key, state, action, params=None)`` returns ``(obs, state, rewards, done, info)``;
both are pure and jittable, the state is a pytree, and runs (or a sweep over params: a
``vmap``, not a recompile) batch with ``vmap``.

Semantics follow the numpy engine (:mod:`fedbandit_env.engine`): a step draws the rewards of
the pulled arms, charges and delivers the messages of every channel and advances the pull
clock; a step with ``pull`` False is communication-only (messages travel, no reward is drawn,
the regret and pull count stay); a run that has made its ``horizon`` pulls sends and draws
nothing. Bad input inside ``jit`` cannot raise: the first one is recorded in ``state.error``
and :func:`check_state` (called by the rollout) raises it by name. With ``adversary=``
(docs/adversary.md) the state is an :class:`AdversaryEnvState` (``state.adversary``: the run's
roles, drawn at reset) and, before the channels transmit, the crashed agents that are down are
silenced and the Byzantine rows come from the attack (:mod:`fedbandit_env.jax.adversary`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from fedbandit_env.churn import (
    check_churn_channels,
    drop_absent,
    markov_presence,
    scheduled_presence,
)
from fedbandit_env.clock import client_cdf, client_of, clock_weights, event_gap, one_hot
from fedbandit_env.config import EnvConfig
from fedbandit_env.delay import (
    RandomDelay,
    delay_slot,
    draw_delay,
    random_arrivals,
    random_enter,
    swap_delayed,
)
from fedbandit_env.drift import orthogonal_unit, rotated_theta, segment_of, smooth_means
from fedbandit_env.errors import ActionError, CommunicationError, ConfigError
from fedbandit_env.jax import instances
from fedbandit_env.jax.accumulate import (
    count_add,
    count_zeros,
    total_add,
    total_zeros,
)
from fedbandit_env.jax.adversary import (
    ADVERSARY_TAG,
    BYZANTINE,
    LOCAL_F_TRIES,
    AdversaryState,
    JaxAdversary,
)
from fedbandit_env.jax.channels import jax_channel
from fedbandit_env.jax.channels.neighbors import SlotDelivery
from fedbandit_env.jax.types import (
    COMMUNICATION,
    PULL,
    Action,
    Charge,
    ClockState,
    EnvState,
    Ledger,
    Observation,
    zero_charge,
)
from fedbandit_env.latency import (
    LinkLatency,
    check_link_channels,
    link_arrive,
    link_enter,
    slot_latency,
)
from fedbandit_env.network import make_channel

BAD_ARM, LONG_STREAK, BAD_PAYLOAD, BAD_INSTANCE, BAD_PLACEMENT, BAD_ATTACK = 1, 2, 3, 4, 5, 6
BAD_ARM_DTYPE = 7
"""``state.error[0]`` codes of the bad input recorded inside ``jit``."""
DRIFT_TAG = 0x64726674
"""``fold_in`` tag of a step's drift key (docs/time.md): the other draws of a step do not move."""
CLOCK_TAG = 0x636C6B00
"""``fold_in`` tag of an event clock's keys (docs/time.md, "clock"), at reset and each step."""
CHURN_TAG = 0x63687572
"""``fold_in`` tag of a step's churn key (docs/time.md, "churn")."""
DELAY_TAG = 0x646C6179
"""``fold_in`` tag of a step's random reward delays (docs/time.md, "reward_delay")."""
LATENCY_TAG = 0x6C617400
"""``fold_in`` tag of a step's random latencies (docs/time.md, "latency")."""


class EnvParams(NamedTuple):
    """The parameters of one run that change no shape (a pytree; gymnax's ``EnvParams``).

    ``means`` (N, M) float32, the reward parameters every run uses (None: each run draws its
    instance from its key, by the configuration's generator); ``theta`` (d,) float32, the linear
    family's theta* (None: drawn per run); ``reward_sigma`` () float32, the noise of a
    Gaussian or clipped-Gaussian reward (the linear family's Gaussian noise; unused with
    Bernoulli rewards); ``max_communication_steps`` () int32, the longest streak of
    communication-only steps allowed. Stacked along a leading axis, a batch of params is a sweep
    that one compiled program runs (``vmap``)."""

    means: Any
    theta: Any
    reward_sigma: Any
    max_communication_steps: Any


class AdversaryEnvState(NamedTuple):
    """The state of a run with an adversary: ``env`` the run's
    :class:`~fedbandit_env.jax.types.EnvState` and ``adversary``
    (:class:`~fedbandit_env.jax.adversary.AdversaryState`: roles, crash pulls, attack states).
    The environment's fields read through (``state.step`` is ``state.env.step``), so code that
    reads a run's state takes either kind; :func:`replace_env` changes them."""

    env: EnvState
    adversary: AdversaryState

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name in ("env", "adversary"):  # copy, pickle, unset fields
            raise AttributeError(name)
        return getattr(self.env, name)


def replace_env(state: EnvState | AdversaryEnvState, **changes: Any) -> Any:
    """``state`` with some of the environment's fields replaced, with or without an
    adversary."""
    if isinstance(state, AdversaryEnvState):
        return state._replace(env=state.env._replace(**changes))
    return state._replace(**changes)


class FedBanditJaxEnv:
    """One run of an environment configuration, as pure functions of JAX arrays."""

    def __init__(self, config: EnvConfig, env_id: str = ""):
        self.config = config
        self.env_id = env_id
        self.num_agents = config.num_agents
        self.num_arms = config.num_arms
        self.horizon = config.horizon
        self.family = config.family
        self.linear = config.linear
        self.twins = {
            name: make_channel(name, opts, config.topology, config.c1, config.c2)
            for name, opts in config.channels.items()
        }
        self.channels = {name: jax_channel(twin) for name, twin in self.twins.items()}
        self.adversary = None
        if config.adversary is not None:  # validated by the numpy Adversary (docs/adversary.md)
            self.adversary = JaxAdversary(config, self.twins, where=env_id or "adversary")
        shared = config.shared_instance()
        self._means = None if shared is None else np.asarray(shared.means, np.float32)
        self.drift = config.drift
        self.clock = config.clock
        self.reward_delay = config.reward_delay
        self.latency = config.latency
        self._link_latency = {}  # a fixed per-link latency per link of each channel
        if isinstance(self.latency, LinkLatency):
            check_link_channels(self.twins)
            for name, twin in self.twins.items():
                if self.latency.law is not None:
                    continue
                if twin.kind == "neighbors":
                    senders = np.asarray(twin.senders)
                    receivers = np.broadcast_to(np.arange(self.num_agents)[:, None], senders.shape)
                    fixed = slot_latency(self.latency, senders, receivers).reshape(-1)
                else:
                    fixed = self.latency.server
                self._link_latency[name] = np.asarray(fixed, np.int32)
        self.churn = config.churn
        if self.churn is not None:
            check_churn_channels(self.twins)
        self._theta = self._pool = None
        if self.linear is not None and config.instance_seed is not None:
            from fedbandit_env.linear import draw_pool, draw_theta

            rng = np.random.default_rng(config.instance_seed)
            self._theta = np.asarray(draw_theta(self.linear, rng), np.float32)
            if isinstance(self.linear.arms, tuple):  # the pool of every run, after theta*
                self._pool = np.asarray(draw_pool(self.linear, rng), np.float32)

    @property
    def default_params(self) -> EnvParams:
        """The :class:`EnvParams` of the configuration (what ``reset`` and ``step`` use when
        given none)."""
        return EnvParams(
            means=None if self._means is None else jnp.asarray(self._means),
            theta=None if self._theta is None else jnp.asarray(self._theta),
            reward_sigma=jnp.float32(self._sigma(self.config)),
            max_communication_steps=jnp.int32(self.config.max_communication_steps),
        )

    @staticmethod
    def _sigma(config: EnvConfig) -> float:
        if config.linear is not None:
            return float(config.linear.sigma)
        return float(getattr(config.reward, "sigma", 0.0))

    def make_params(
        self,
        *,
        means: Any = None,
        theta: Any = None,
        reward_sigma: Any = None,
        max_communication_steps: Any = None,
    ) -> EnvParams:
        """:attr:`default_params` with the given fields replaced, each checked as the
        configuration checks it (a :class:`~fedbandit_env.errors.ConfigError` naming the
        field and the expected value): ``means`` a vector (M,) or an (N, M) matrix (the
        homogeneous family: one vector), in [0, 1] for Bernoulli rewards (multi-armed
        families); ``theta`` (d,) finite (linear family); ``reward_sigma`` > 0;
        ``max_communication_steps`` an int >= 0."""
        from fedbandit_env.instances import fixed_instance
        from fedbandit_env.validation import check_int, check_real

        cfg, p = self.config, self.default_params
        if means is not None:
            if self.linear is not None:
                raise ConfigError("means: the linear family has no means; give theta instead")
            inst = fixed_instance(np.asarray(means, np.float64), self.num_agents)
            if inst.means.shape != (self.num_agents, self.num_arms):
                raise ConfigError(
                    f"means: expected shape ({self.num_arms},) or ({self.num_agents}, "
                    f"{self.num_arms}), got {np.shape(means)}"
                )
            if cfg.family == "homogeneous" and not inst.is_homogeneous:
                raise ConfigError(
                    "means: the homogeneous family expects one mean vector for all agents"
                )
            cfg.reward.validate(inst.means)
            p = p._replace(means=jnp.asarray(inst.means, jnp.float32))
        if theta is not None:
            if self.linear is None:
                raise ConfigError("theta: only the linear family has theta*; give means instead")
            arr = np.asarray(theta, np.float64)
            if arr.shape != (self.linear.dim,) or not np.isfinite(arr).all():
                raise ConfigError(
                    f"theta: expected {self.linear.dim} finite numbers, got shape {arr.shape}"
                )
            p = p._replace(theta=jnp.asarray(arr, jnp.float32))
        if reward_sigma is not None:
            sigma = check_real("reward_sigma", reward_sigma, low=0.0, low_open=True)
            p = p._replace(reward_sigma=jnp.float32(sigma))
        if max_communication_steps is not None:
            steps = check_int("max_communication_steps", max_communication_steps, minimum=0)
            p = p._replace(max_communication_steps=jnp.int32(steps))
        return p

    @property
    def agents(self) -> list[str]:
        return [f"agent_{i}" for i in range(self.num_agents)]

    # ------------------------------------------------------------------ reset
    def reset(
        self, key: jax.Array, params: EnvParams | None = None
    ) -> tuple[Observation, EnvState]:
        """The first observation and state of a run (its instance or theta* drawn from ``key``
        unless ``params`` fixes it; None: :attr:`default_params`)."""
        params = self.default_params if params is None else params
        k_instance, k_context = jax.random.split(key)
        n, m = self.num_agents, self.num_arms
        means = gap = theta = context = drift_state = pool = None
        error = jnp.zeros(3, jnp.int32)
        if self.linear is None:
            if params.means is not None:
                means = jnp.asarray(params.means, jnp.float32)
            else:
                means, ok = instances.draw_means(self.config, k_instance)
                error = jnp.where(ok, error, jnp.array([BAD_INSTANCE, 0, 0], jnp.int32))
            if self.drift is not None:  # the means in force at the first pull
                means = self._drifted(jnp.ones((), jnp.int32), jnp.asarray(True), means)
            gap = self._gap(means, params)
        else:
            if params.theta is not None:
                theta = jnp.asarray(params.theta, jnp.float32)
            else:
                theta = instances.draw_theta(self.linear, k_instance)
            if isinstance(self.linear.arms, tuple):  # Li & Wang's pool of this run
                pool = (jnp.asarray(self._pool) if self._pool is not None else
                        instances.draw_pool(self.linear, jax.random.fold_in(k_instance, 1)))  # fmt: skip
            context = instances.decision_sets(self.linear, k_context, theta, n, m, pool)
            if self.drift is not None and self.drift.kind == "smooth":  # theta*(0) and u
                w = jax.random.normal(jax.random.fold_in(key, DRIFT_TAG), theta.shape, theta.dtype)
                drift_state = jnp.stack([theta, orthogonal_unit(theta, w, jnp)])
        present = None if self.churn is None else self._presence_at_first_pull()
        state = EnvState(
            step=jnp.zeros((), jnp.int32),
            pulls=jnp.zeros((), jnp.int32),
            streak=jnp.zeros((), jnp.int32),
            last_arm=jnp.full(n, -1, jnp.int32),
            last_reward=jnp.zeros(n, jnp.float32),
            means=means,
            gap=gap,
            theta=theta,
            context=context,
            counts=jnp.zeros((n, m) if self.linear is None else (n, 0), jnp.int32),
            regret=total_zeros((n,)),
            channels={name: ch.init() for name, ch in self.channels.items()},
            ledger=Ledger(
                count_zeros((2,)),
                count_zeros((2,)),
                total_zeros((2,)),
                count_zeros(),
                zero_charge(),
            ),  # fmt: skip
            error=error,
            drift=drift_state,
            clock=None if self.clock is None else self._clock_init(key, present),
            delay=self._delay_line(),
            pool=pool,
            latency=self._latency_ring(),
            churn=present,
        )  # fmt: skip
        if self.adversary is not None:  # a key of its own: the instance draws do not move
            adv = self.adversary.init(jax.random.fold_in(key, ADVERSARY_TAG))
            bad = jnp.array([BAD_PLACEMENT, 0, 0], jnp.int32)
            error = jnp.where((error[0] == 0) & ~adv.ok, bad, error)
            state = AdversaryEnvState(state._replace(error=error), adv)
        deliveries = self._empty_deliveries()
        return self._observe(state, deliveries, jnp.asarray(PULL, jnp.int32)), state

    # ------------------------------------------------------------------- step
    def step(
        self, key: jax.Array, state: EnvState, action: Action, params: EnvParams | None = None
    ) -> tuple[Observation, EnvState, jnp.ndarray, jnp.ndarray, dict[str, Any]]:
        """One engine step of one run: rewards (N,), ``done`` (the run has made its horizon
        pulls) and ``info`` (``instant_regret`` (N,), ``cumulative_regret`` (N,) and the step's
        ``charge``). ``params``: None, :attr:`default_params`."""
        params = self.default_params if params is None else params
        n = self.num_agents
        raw = jnp.asarray(action.arms)
        if raw.shape != (n,):  # static: refused while tracing, before anything runs
            raise ActionError("all agents", "arm", f"expected an array of shape ({n},), got "
                              f"{raw.shape}")  # fmt: skip
        integral = bool(jnp.issubdtype(raw.dtype, jnp.integer))  # float, NaN or bool: refused
        if not integral:
            self.bad_arm_dtype = str(raw.dtype)  # named by check_state
        arms = raw.astype(jnp.int32) if integral else jnp.zeros(n, jnp.int32)
        live = state.pulls < self.horizon
        pulling = jnp.asarray(action.pull, bool) & live
        streak = jnp.where(live & ~pulling, state.streak + 1, 0)
        error = state.error
        if not integral:
            error = _first_error(error, BAD_ARM_DTYPE, state.step, pulling & jnp.ones(n, bool))
        bad_arm = (raw < 0) | (raw >= self.num_arms) if integral else jnp.zeros(n, bool)
        error = _first_error(error, BAD_ARM, state.step, bad_arm & pulling)
        error = _first_error(
            error, LONG_STREAK, state.step,
            jnp.full(n, streak > params.max_communication_steps),
        )  # fmt: skip
        arms = jnp.clip(arms, 0, self.num_arms - 1)
        k_reward, k_context, k_net = jax.random.split(key, 3)
        who = pulling  # who pulls: every agent of a pulling run, or its event's client
        if self.clock is not None:
            who = pulling & state.clock.active
        elif self.churn is not None:  # the present clients (docs/time.md, "churn")
            who = pulling & state.churn

        if self.linear is None:
            means, gap, total = state.means, state.gap, state.regret
            if self.drift is not None:  # dynamic regret: against the means of this pull
                means, gap, error = self._drift_step(key, state, pulling, params, error)
            mean = means[jnp.arange(n), arms]
            rewards = instances.sample_reward(self.config, k_reward, mean, params.reward_sigma)
            regret = jnp.where(who, gap[arms], 0.0)
            onehot = (arms[:, None] == jnp.arange(self.num_arms)) & (
                who if jnp.ndim(who) == 0 else who[:, None]
            )
            counts = state.counts + onehot.astype(jnp.int32)
            context = None
            if self.drift is not None:
                total = total_add(state.regret, regret)
        else:
            theta = state.theta
            if self.drift is not None:  # theta* in force at this pull (dynamic regret)
                theta, error = self._theta_step(key, state, pulling, error)
            expected = state.context @ theta  # (N, K)
            chosen = expected[jnp.arange(n), arms]
            rewards = instances.linear_reward(self.linear, k_reward, chosen, params.reward_sigma)
            regret = jnp.where(who, expected.max(axis=1) - chosen, 0.0)
            fresh = instances.decision_sets(self.linear, k_context, theta, n, self.num_arms,
                                            state.pool)  # fmt: skip
            context = jnp.where(pulling, fresh, state.context)
            counts, total = state.counts, total_add(state.regret, regret)
        rewards = jnp.where(who, rewards, 0.0)

        last_arm = jnp.where(who, arms, state.last_arm)
        adversary = getattr(state, "adversary", None)
        adv = None
        if self.adversary is not None and self.adversary.active:
            seen = state if self.drift is None else replace_env(state, means=means, gap=gap)
            adv = self._adversary_step(key, seen, counts, last_arm, pulling, params)
        present = getattr(state, "churn", None)
        deliveries, channel_states, charge, error, attack_states = self._transmit(
            k_net, state, action.messages, live, error, adv, present
        )
        ring = getattr(state, "latency", None)
        if ring is not None and isinstance(self.latency, LinkLatency):  # per message
            deliveries, ring = self._link_shift(key, state.step + 1, deliveries, ring)
        elif ring is not None:  # what was sent ``latency`` engine steps ago (docs/time.md)
            slot = state.step % self.latency
            deliveries, ring = (jax.tree.map(lambda buf: buf[slot], ring),
                                jax.tree.map(lambda buf, new: buf.at[slot].set(new), ring,
                                             deliveries))  # fmt: skip
        if present is not None:  # an absent client receives nothing: dropped and counted
            deliveries, dropped = self._drop_absent(deliveries, present)
            charge = charge._replace(dropped=charge.dropped + dropped)
        ledger = state.ledger
        ledger = Ledger(
            count_add(ledger.messages, charge.messages),
            count_add(ledger.floats, charge.floats),
            total_add(ledger.cost, charge.cost),
            count_add(ledger.dropped, charge.dropped),
            charge,
        )
        state = EnvState(
            step=state.step + 1,
            pulls=state.pulls + pulling,
            streak=streak,
            last_arm=last_arm,
            last_reward=jnp.where(who, rewards, state.last_reward),
            means=state.means if self.linear is not None else means,
            gap=state.gap if self.linear is not None else gap,
            theta=state.theta if self.linear is None else theta,
            context=context,
            counts=counts,
            regret=total,
            channels=channel_states,
            ledger=ledger,
            error=error,
            drift=state.drift,
            clock=state.clock,
            delay=state.delay,
            pool=state.pool,
            latency=ring,
            churn=present,
        )
        more = pulling & (state.pulls < self.horizon)
        if present is not None:  # who is present at the next pull
            present = self._presence_next(key, present, state.pulls, more)
            state = state._replace(churn=present)
        if self.clock is not None:  # the pulling run's next event
            state = state._replace(clock=self._clock_next(key, state.clock, more, present=present))
        phase = jnp.where(pulling, PULL, COMMUNICATION).astype(jnp.int32)
        info = {
            "instant_regret": regret,
            "cumulative_regret": self.cumulative_regret(state),
            "charge": charge,
        }
        if self.adversary is not None:
            astate = adversary._replace(attack={**adversary.attack, **attack_states})
            state = AdversaryEnvState(state, astate)
            info["roles"] = state.adversary.roles
            info["honest"] = state.adversary.roles == 0
        obs = self._observe(state, deliveries, phase)
        if self.clock is not None or self.churn is not None:
            obs = obs._replace(pulled=jnp.broadcast_to(who, (n,)))
        if self.reward_delay is not None:  # the rewards of the pulls reward_delay ago arrive
            held = (state.delay, key) if isinstance(self.reward_delay, RandomDelay) else state.delay
            obs, line = self._arrive(obs, held, state.pulls, pulling, arms, rewards, who)
            state = replace_env(state, delay=line)
        return obs, state, rewards, state.pulls >= self.horizon, info

    def _adversary_step(self, key, state, counts, last_arm, pulling, params: EnvParams):
        """(key, adversary state, down agents (N,), the omniscient facts) of a step: the
        facts an attack's view holds (docs/adversary.md, "Attacks"), this step's pull in."""
        m = self.num_arms
        if self.linear is None:
            means = instances.expected_reward(self.config, state.means, params.reward_sigma)
            means = means.mean(axis=0)
        else:  # no global means (the means attacks are refused in the linear family)
            means = jnp.zeros(m, jnp.float32)
        facts = {
            "step": state.step + 1,
            "means": means,
            "best_arm": jnp.argmax(means).astype(jnp.int32),
            "pull_counts": counts,
            "last_arm": last_arm,
            "pulling": pulling,
        }
        down = self.adversary.down(state.adversary, state.pulls)
        return jax.random.fold_in(key, ADVERSARY_TAG), state.adversary, down, facts

    def _transmit(self, key, state, messages: Mapping, live, error, adv=None, present=None):
        """Every channel transmits (a channel given no message: nobody sends on it); the step's
        charge is the sum of the channels' charges. With ``adv`` (an active adversary) the
        messages first go through :meth:`JaxAdversary.channel`. With churn, only the
        ``present`` clients (N,) send (a ``push`` row is the server's message to a client: it is
        dropped at arrival instead, :meth:`_drop_absent`)."""
        unknown = sorted(set(messages) - set(self.channels))
        if unknown:
            raise ActionError(
                "all agents", f"messages.{unknown[0]}",
                f"unknown channel; this environment has {sorted(self.channels)}",
            )  # fmt: skip
        deliveries, states, charge, attack_states = {}, {}, zero_charge(), {}
        keys = jax.random.split(key, max(len(self.channels), 1))
        for idx, (k, (name, channel)) in enumerate(zip(keys, self.channels.items(), strict=False)):
            send, payload, exclude = self._message(name, channel, messages.get(name))
            finite = jnp.isfinite(payload).all(axis=1)
            error = _first_error(error, BAD_PAYLOAD, state.step, send & live & ~finite)
            if adv is not None:  # the learner's messages, then the roles' (docs/adversary.md)
                k_adv, astate, down, facts = adv
                payload = jnp.where((~send & ~finite)[:, None], 0.0, payload)
                send, payload, a_state = self.adversary.channel(
                    jax.random.fold_in(k_adv, idx), astate, name, send, payload, down, facts
                )
                if a_state is not None:
                    attack_states[name] = a_state
                finite = jnp.isfinite(payload).all(axis=1)
                bad = send & live & ~finite & (astate.roles == BYZANTINE)
                error = _first_error(error, BAD_ATTACK, state.step, bad)
            send = send & live
            if present is not None and self.twins[name].kind != "push":
                send = send & present
            payload = jnp.where(send[:, None] & finite[:, None], payload, 0.0)
            extra = () if exclude is None else (exclude,)  # only a channel that takes one
            deliveries[name], states[name], c = channel.transmit(
                k, state.channels[name], send, payload, *extra
            )
            charge = Charge(*(a + b for a, b in zip(charge, c, strict=True)))
        return deliveries, states, charge, error, attack_states

    def _message(self, name: str, channel, message) -> tuple[jnp.ndarray, jnp.ndarray, Any]:
        """(send (N,) bool, payload (N, dim) float32, exclude (N, N) bool or None) of one
        channel, checked by shape; ``exclude`` only on a channel that takes it (the gossip
        channel's pull mode, docs/channels.md)."""
        n = self.num_agents
        if message is None:
            return jnp.zeros(n, bool), jnp.zeros((n, channel.dim), jnp.float32), None
        exclude = None
        if isinstance(message, tuple):
            if len(message) == 3:
                message, exclude = message[:2], self._exclude(name, channel, message[2])
            send, payload = message
            send = jnp.asarray(send)
            if send.shape != (n,):
                raise ActionError(
                    "all agents", f"messages.{name}.send",
                    f"expected a bool array of shape ({n},) per run, got {send.shape}",
                )  # fmt: skip
            send = send.astype(bool)
        else:
            payload = message
            send = jnp.ones(n, bool)
        payload = jnp.asarray(payload)
        if payload.shape != (n, channel.dim):
            raise ActionError(
                "all agents", f"messages.{name}.payload",
                f"expected shape ({n}, {channel.dim}) per run, got {payload.shape}",
            )  # fmt: skip
        return send, payload.astype(jnp.float32), exclude

    def _exclude(self, name: str, channel, exclude) -> jnp.ndarray:
        """A message's exclusion mask, checked: a channel that takes one, shape (N, N)."""
        n = self.num_agents
        if not getattr(channel, "takes_exclude", False):
            raise ActionError(
                "all agents", f"messages.{name}.exclude",
                "expected no exclusion mask: only a gossip channel in mode "
                "'pull_one_neighbour' takes one",
            )  # fmt: skip
        exclude = jnp.asarray(exclude)
        if exclude.shape != (n, n):
            raise ActionError(
                "all agents", f"messages.{name}.exclude",
                f"expected a bool array of shape ({n}, {n}) per run, got {exclude.shape}",
            )  # fmt: skip
        return exclude.astype(bool)

    def _observe(self, state: EnvState, deliveries, phase) -> Observation:
        return Observation(
            step=state.step,
            last_arm=state.last_arm,
            last_reward=state.last_reward,
            deliveries=deliveries,
            context=state.context,
            phase=phase,
            pulls=state.pulls,
            active=self._active(state),
            pulled=None if self._active(state) is None else jnp.zeros(self.num_agents, bool),
            time=None if self.clock is None else state.clock.time,
            **self._no_arrival(),
        )

    def _delay_line(self) -> Any:
        """A new run's rewards in flight: (arms, rewards) (d, N) of a fixed delay; (arms,
        rewards, due pulls) (N, D) of a random one; None without a delay."""
        n, d = self.num_agents, self.reward_delay
        if d is None:
            return None
        if isinstance(d, RandomDelay):
            shape = (n, d.max)
            return (jnp.full(shape, -1, jnp.int32), jnp.zeros(shape, jnp.float32),
                    jnp.zeros(shape, jnp.int32))  # fmt: skip
        return jnp.full((d, n), -1, jnp.int32), jnp.zeros((d, n), jnp.float32)

    def _no_arrival(self) -> dict[str, Any]:
        """The arrival fields of an observation in which no reward arrives."""
        d = self.reward_delay
        if d is None:
            return {}
        shape = (self.num_agents, d.max) if isinstance(d, RandomDelay) else (self.num_agents,)
        return {"arrived_arm": jnp.full(shape, -1, jnp.int32),
                "arrived_reward": jnp.zeros(shape, jnp.float32),
                "arrived_pull": jnp.full(shape, -1, jnp.int32)}  # fmt: skip

    def _arrive(self, obs, line, pulls, pulling, arms, rewards, who):
        """A reward delay's step (:func:`fedbandit_env.delay.swap_delayed`, as the numpy
        :class:`~fedbandit_env.delay.DelayLine`): the pull
        ``pulls`` (the new count) enters the line, the pull ``pulls - d`` leaves it and its
        rewards arrive in ``obs``, whose ``last_reward`` is hidden (0)."""
        if isinstance(self.reward_delay, RandomDelay):
            return self._arrive_random(obs, line, pulls, pulling, arms, rewards, who)
        slot = delay_slot(pulls, self.reward_delay)
        line_arms, line_rewards = line
        out_arm, out_reward, new_arms, new_rewards = swap_delayed(
            line_arms[slot], line_rewards[slot], pulling, arms, rewards, who, jnp
        )
        line = (line_arms.at[slot].set(new_arms), line_rewards.at[slot].set(new_rewards))
        made = jnp.where(out_arm >= 0, pulls - self.reward_delay, -1).astype(jnp.int32)
        obs = obs._replace(arrived_arm=out_arm, arrived_reward=out_reward, arrived_pull=made,
                           last_reward=jnp.zeros_like(obs.last_reward))  # fmt: skip
        return obs, line

    def _arrive_random(self, obs, line, pulls, pulling, arms, rewards, who):
        """A random delay's step (the numpy :class:`~fedbandit_env.delay.RandomDelayLine`):
        the rewards due now arrive, one slot per delay (:func:`~fedbandit_env.delay.
        random_arrivals`), then the pull made now enters the line with its delays, one uniform
        per agent from ``fold_in(key, DELAY_TAG)`` (the key is the step's, passed as ``line``'s
        companion in :meth:`step`)."""
        line, key = line
        out_arm, out_reward, made = random_arrivals(*line, pulls, pulling, jnp)
        u = jax.random.uniform(jax.random.fold_in(key, DELAY_TAG), (self.num_agents,))
        delays = draw_delay(u, self.reward_delay, jnp)
        who = jnp.broadcast_to(who, (self.num_agents,))
        line = random_enter(line, pulls, pulling, who, arms, rewards, delays, jnp)
        obs = obs._replace(arrived_arm=out_arm.astype(jnp.int32), arrived_reward=out_reward,
                           arrived_pull=made.astype(jnp.int32),
                           last_reward=jnp.zeros_like(obs.last_reward))  # fmt: skip
        return obs, line

    # ------------------------------------------------------------------ latency
    def _links(self, name: str) -> int:
        """The links of a channel under a per-link latency: N D slots (neighbors), N (push)."""
        channel = self.channels[name]
        return channel.senders.size if self.twins[name].kind == "neighbors" else self.num_agents

    def _latency_ring(self) -> Any:
        """A new run's messages in flight: the last L records of each channel, stacked (fixed);
        per channel an arrival ring (mask (S, L + 2), payload (S, L + 2, dim), last arrival
        (S,)) under a per-link or random latency; None without a latency."""
        lag = self.latency
        if lag is None:
            return None
        if not isinstance(lag, LinkLatency):
            return jax.tree.map(lambda x: jnp.stack([x] * lag),
                                {name: ch.empty() for name, ch in self.channels.items()})  # fmt: skip
        rings = {}
        for name, channel in self.channels.items():
            shape = (self._links(name), lag.max + 2)  # R = max + 1 positions and a spare
            rings[name] = (jnp.zeros(shape, bool), jnp.zeros((*shape, channel.dim), jnp.float32),
                           jnp.full(shape[:1], -1, jnp.int32))  # fmt: skip
        return rings

    def _empty_deliveries(self) -> dict[str, Any]:
        """The deliveries of a step in which nothing arrives (a per-link latency's neighbours:
        :class:`SlotDelivery`, whose slots hold messages sent at different steps)."""
        out = {name: ch.empty() for name, ch in self.channels.items()}
        if isinstance(self.latency, LinkLatency):
            out = {name: SlotDelivery(r.senders, r.mask, r.payload) if hasattr(r, "mask") else r
                   for name, r in out.items()}  # fmt: skip
        return out

    def _link_shift(self, key: jax.Array, step: jnp.ndarray, deliveries: dict[str, Any],
                    rings: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:  # fmt: skip
        """A per-link or random latency's step (the numpy :class:`~fedbandit_env.latency.
        LinkLine`): this step's deliveries enter the rings (:func:`~fedbandit_env.latency.
        link_enter`), what is due at engine step ``step`` leaves them; random latencies drawn
        per link from ``fold_in(key, LATENCY_TAG)`` and the channel's index."""
        out, new = {}, {}
        base = jax.random.fold_in(key, LATENCY_TAG)
        for idx, (name, record) in enumerate(deliveries.items()):
            slots = hasattr(record, "mask")
            mask = record.mask if slots else record.received
            links = mask.size
            payload = record.payload.reshape(links, -1)
            if self.latency.law is not None:
                u = jax.random.uniform(jax.random.fold_in(base, idx), (links,))
                lat = draw_delay(u, self.latency.law, jnp)
            else:
                lat = jnp.asarray(self._link_latency[name])
            ring = link_enter(rings[name], step, lat, mask.reshape(-1), payload, jnp)
            new[name], got, pay = link_arrive(ring, step, jnp)
            if slots:
                out[name] = SlotDelivery(record.senders, got.reshape(mask.shape),
                                         pay.reshape(record.payload.shape))  # fmt: skip
            else:
                out[name] = record._replace(received=got, payload=pay)
        return out, new

    def _active(self, state: EnvState) -> Any:
        """The clients that pull at the next step: an event clock's client, else the present
        clients under churn; None under lock-step without churn."""
        if self.clock is not None:
            return state.clock.active
        return getattr(state, "churn", None)

    # ------------------------------------------------------------------ churn
    def _presence_at_first_pull(self) -> jnp.ndarray:
        """(N,) bool the clients present at pull 1 (every one under a Markov churn)."""
        if self.churn.kind == "markov":
            return jnp.ones(self.num_agents, bool)
        return scheduled_presence(jnp.ones((), jnp.int32), self.churn, self.num_agents, jnp)

    def _presence_next(self, key: jax.Array, present: jnp.ndarray, pulls: jnp.ndarray,
                       moving: jnp.ndarray) -> jnp.ndarray:  # fmt: skip
        """The clients present at pull ``pulls + 1`` of a ``moving`` run (the numpy
        :meth:`~fedbandit_env.churn.Presence.advance`); one uniform per client from
        ``fold_in(key, CHURN_TAG)`` under a Markov churn."""
        churn = self.churn
        if churn.kind == "markov":
            u = jax.random.uniform(jax.random.fold_in(key, CHURN_TAG), (self.num_agents,))
            new = markov_presence(present, u, churn.p_leave, churn.p_join, jnp)
        else:
            new = scheduled_presence(pulls + 1, churn, self.num_agents, jnp)
        return jnp.where(moving, new, present)

    @staticmethod
    def _drop_absent(deliveries: dict[str, Any], present: jnp.ndarray):
        """The deliveries without what reached absent clients (the numpy
        :meth:`~fedbandit_env.churn.Presence.deliver`) and the dropped count () int32."""
        out, dropped = {}, jnp.zeros((), jnp.int32)
        for name, record in deliveries.items():
            field = "mask" if hasattr(record, "mask") else "received"
            if not hasattr(record, field):  # the server's uploads (reply "none"): no receiver
                out[name] = record
                continue
            kept, lost = drop_absent(getattr(record, field), present, jnp)
            out[name] = record._replace(**{field: kept})
            dropped = dropped + lost.astype(jnp.int32)
        return out, dropped

    # ------------------------------------------------------------------ clock
    def _clock_init(self, key: jax.Array, present: Any = None) -> ClockState:
        """The clock of a new run: its stragglers and its first event (docs/time.md)."""
        key = jax.random.fold_in(key, CLOCK_TAG)
        k_slow, k_first = jax.random.split(key)
        n, clock = self.num_agents, self.clock
        rates = jnp.asarray(clock.rates, jnp.float32)
        slow = round(clock.frac * n)
        if slow:  # a uniformly random subset of round(frac N) clients, slowed down
            chosen = jax.random.permutation(k_slow, n)[:slow]
            rates = rates.at[chosen].multiply(jnp.float32(clock.slowdown))
        start = ClockState(jnp.zeros(n, bool), jnp.zeros((), jnp.float32),
                           jnp.zeros((), jnp.int32), rates)  # fmt: skip
        return self._clock_next(k_first, start, jnp.asarray(True), tagged=True, present=present)

    def _clock_next(self, key: jax.Array, clock: ClockState, moving: jnp.ndarray,
                    tagged: bool = False, present: Any = None) -> ClockState:  # fmt: skip
        """The next event of a ``moving`` run: its client, among the ``present`` clients under
        churn (:func:`~fedbandit_env.clock.clock_weights`), and its time stamp (the event's
        index, or the Poisson time); a run that does not move keeps its clock."""
        key = key if tagged else jax.random.fold_in(key, CLOCK_TAG)
        k_client, k_gap = jax.random.split(key)
        rates = clock.rates if present is None else clock_weights(clock.rates, present, jnp)
        if self.clock.kind == "trace":
            trace = jnp.asarray(self.clock.clients, jnp.int32)
            client = trace[jnp.minimum(clock.event, trace.shape[0] - 1)]
        else:
            u = jax.random.uniform(k_client, (), jnp.float32)
            client = client_of(u, client_cdf(rates, jnp), jnp)
        if self.clock.timed:
            u = jax.random.uniform(k_gap, (), jnp.float32)
            time = clock.time + event_gap(u, rates.sum(), jnp)
        else:
            time = clock.event.astype(jnp.float32)
        active = one_hot(client, self.num_agents, jnp)
        if present is not None:  # nobody present: the event passes without a pull
            active = active & present
        new = ClockState(active, time, clock.event + 1, clock.rates)
        return jax.tree_util.tree_map(lambda a, b: jnp.where(moving, a, b), new, clock)

    def cumulative_regret(self, state: EnvState) -> jnp.ndarray:
        """(N,) pseudo-regret of each agent so far: ``counts @ gap`` (integer pull counts) in
        the multi-armed families, the compensated sum in the linear family."""
        if self.linear is None and self.drift is None:
            return state.counts.astype(jnp.float32) @ state.gap
        return state.regret.total - state.regret.carry

    # ------------------------------------------------------------------ drift
    def _gap(self, means: jnp.ndarray, params: EnvParams) -> jnp.ndarray:
        """(M,) gaps of the global expected rewards (the agents' average) of ``means``."""
        expected = instances.expected_reward(self.config, means, params.reward_sigma)
        expected = expected.mean(axis=0)
        return jnp.maximum(expected.max() - expected, 0.0)  # >= 0 however XLA fuses the mean

    def _drifted(self, t: jnp.ndarray, pulling: jnp.ndarray, means: jnp.ndarray) -> jnp.ndarray:
        """The means at pull ``t`` of a smooth drift or of given segment means (the numpy
        engine's ``Engine._drift_to``); ``means`` where the run does not pull."""
        drift, n, m = self.drift, self.num_agents, self.num_arms
        if drift.kind == "smooth":
            row = smooth_means(t, m, drift.period, drift.amplitude, drift.center, jnp, jnp.float32)
            return jnp.where(pulling, jnp.broadcast_to(row, (n, m)), means)
        if drift.means is not None:
            segments = jnp.asarray(drift.means, jnp.float32)
            return jnp.where(pulling, segments[segment_of(t, drift.change_points, jnp)], means)
        return means

    def _changed(self, key: jax.Array, t: jnp.ndarray,
                 pulling: jnp.ndarray) -> tuple[jnp.ndarray, jax.Array]:  # fmt: skip
        """Whether a piecewise drift changes at this pull ``t`` (numpy: ``drift.Changes``), and
        the key of the new instance: both from ``fold_in(key, DRIFT_TAG)``."""
        k_change, k_draw = jax.random.split(jax.random.fold_in(key, DRIFT_TAG))
        if self.drift.rate:
            return pulling & (jax.random.uniform(k_change) < self.drift.rate), k_draw
        return pulling & (t == jnp.asarray(self.drift.change_points, jnp.int32)).any(), k_draw

    def _theta_step(self, key: jax.Array, state: Any, pulling: jnp.ndarray,
                    error: jnp.ndarray) -> tuple[jnp.ndarray, jnp.ndarray]:  # fmt: skip
        """theta* in force at this pull of the linear family (the numpy process's
        ``drift_to``): turned in its plane (smooth), or redrawn behind a ``lax.cond``."""
        drift, t = self.drift, state.pulls + 1
        if drift.kind == "smooth":
            theta0, u = state.drift[0], state.drift[1]
            turned = rotated_theta(t, theta0, u, drift.period, jnp)
            return jnp.where(pulling, turned, state.theta), error
        changed, k_draw = self._changed(key, t, pulling)
        theta = jax.lax.cond(changed, lambda _: instances.draw_theta(self.linear, k_draw),
                             lambda _: state.theta, None)  # fmt: skip
        return theta, error

    def _drift_step(self, key: jax.Array, state: Any, pulling: jnp.ndarray, params: EnvParams,
                    error: jnp.ndarray) -> tuple[jnp.ndarray, jnp.ndarray, jnp.ndarray]:  # fmt: skip
        """(means, gaps, error) in force at this pull (docs/time.md, "drift"). A redrawing drift
        draws the new instance behind a ``lax.cond`` on the change."""
        drift, t = self.drift, state.pulls + 1
        if not drift.redraws:
            means = self._drifted(t, pulling, state.means)
            return means, self._gap(means, params), error
        changed, k_draw = self._changed(key, t, pulling)

        def redraw(_):
            means, ok = instances.draw_means(self.config, k_draw)
            return means, self._gap(means, params), ok

        def keep(_):
            return state.means, state.gap, jnp.asarray(True)

        means, gap, ok = jax.lax.cond(changed, redraw, keep, None)
        bad = jnp.array([BAD_INSTANCE, 0, 0], jnp.int32)
        error = jnp.where((error[0] == 0) & ~ok, bad.at[1].set(state.step), error)
        return means, gap, error


def _first_error(error: jnp.ndarray, code: int, step: jnp.ndarray, bad: jnp.ndarray):
    """Record (code, step, first bad agent) unless an error is already recorded."""
    new = jnp.stack([jnp.asarray(code, jnp.int32), step.astype(jnp.int32),
                     jnp.argmax(bad).astype(jnp.int32)])  # fmt: skip
    return jnp.where((error[0] == 0) & bad.any(), new, error)


def check_state(
    env: FedBanditJaxEnv,
    state: EnvState,
    seeds: list[int] | None = None,
    env_params: EnvParams | None = None,
) -> None:
    """Raise the first bad input recorded inside ``jit`` (a batch of states: the first run
    with one), naming the run, the agent, the field and the expected value (``env_params``:
    the params the runs used; None: the environment's defaults)."""
    error = np.asarray(state.error).reshape(-1, 3)
    bad = np.flatnonzero(error[:, 0])
    if bad.size == 0:
        return
    b = int(bad[0])
    code, step, agent = (int(x) for x in error[b])
    run = (
        f"run seed {seeds[b]}, " if seeds is not None else (f"run {b}, " if len(error) > 1 else "")
    )
    who = f"{run}agent_{agent}"
    if code == BAD_ARM:
        raise ActionError(
            who, "arm", f"expected an int in [0, {env.num_arms - 1}] (step {step + 1})"
        )
    if code == BAD_ARM_DTYPE:
        dtype = getattr(env, "bad_arm_dtype", "a non-integer dtype")
        raise ActionError(
            who, "arm", f"expected integer arms in [0, {env.num_arms - 1}], got dtype {dtype} "
            f"(step {step + 1}; float, NaN and bool arms are refused, never cast)"
        )  # fmt: skip
    if code == LONG_STREAK:
        limit = np.ravel(env.config.max_communication_steps)
        if env_params is not None:
            limit = np.ravel(np.asarray(env_params.max_communication_steps))
        raise CommunicationError(
            f"step {step + 1}: {run}more than max_communication_steps="
            f"{int(limit[b % limit.size])} communication steps in a row without a pull"
        )
    if code == BAD_PAYLOAD:
        raise ActionError(
            who, "messages.payload", f"expected finite numbers (NaN/inf, step {step + 1})"
        )
    if code == BAD_PLACEMENT:  # the numpy message (fedbandit_env.adversary.roles)
        adv = env.config.adversary
        where = f"run seed {seeds[b]}" if seeds is not None else f"run {b}"
        raise ConfigError(
            f"adversary.local_f: no placement of {adv.num_byzantine} Byzantine agents in which "
            f"every honest agent has at most local_f = {adv.local_f} Byzantine neighbours was "
            f"found in {LOCAL_F_TRIES} tries ({where}); lower num_byzantine, raise local_f or "
            "use a denser topology"
        )
    if code == BAD_ATTACK:
        attack = env.adversary.attack_id if env.adversary is not None else "?"
        raise ConfigError(
            f"attack {attack!r}: {who}: the Byzantine payloads hold NaN/inf (step {step + 1})"
        )
    raise ConfigError(
        f"instance: {run}no instance met the {env.config.instance!r} conditions in the allowed draws"
    )
