"""The compiled rollout (docs/jax.md, "Rollout"): a whole horizon as one program.

:func:`rollout` runs B seeds of a learner on a JAX environment: per run, a ``lax.scan`` over
the checkpoints whose body is a ``lax.while_loop`` of engine steps until the run's pull count
reaches the checkpoint, and a ``vmap`` over runs; the whole is one ``jit``. Only the curves at
the checkpoints are kept, so memory is O(B C N) whatever the horizon. A run stops early at the
first bad input recorded inside ``jit`` (``state.error``), which is raised after the rollout.
"""

from __future__ import annotations

import time
import weakref
from dataclasses import dataclass
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from fedbandit_env.checkpoints import check_checkpoints, default_checkpoints
from fedbandit_env.errors import ConfigError
from fedbandit_env.jax.accumulate import count_value, total_value
from fedbandit_env.jax.env import EnvParams, FedBanditJaxEnv, check_state
from fedbandit_env.jax.learner import bound, params_of
from fedbandit_env.jax.types import EnvState, Observation
from fedbandit_env.policy import FederationFacts
from fedbandit_env.scores import TracedScores, watching

MAX_SEED = 2**32 - 1


@dataclass
class RolloutResult:
    """Per-run curves at ``steps`` (pulls) and per-run communication totals (numpy)."""

    seeds: list[int]
    steps: np.ndarray
    regret_by_agent: np.ndarray  # (runs, checkpoints, agents) float64
    messages: np.ndarray  # (runs, 2) int64, per link type
    floats: np.ndarray  # (runs, 2) int64
    cost: np.ndarray  # (runs, 2) float64
    dropped: np.ndarray  # (runs,) int64
    engine_steps: np.ndarray  # (runs,) engine steps taken (pulls and communication steps)
    wall_time: float  # seconds, compile included
    compile_time: float
    device: str
    learner_state: Any = None  # the learner's final state, batched over runs (numpy leaves)
    roles: np.ndarray | None = None  # (runs, agents) int8 with an adversary (docs/adversary.md)
    nan_index_steps: np.ndarray | None = None  # (runs,) steps with a NaN index; None: unwatched
    params: Any = None  # the learner's params (make_params)


class _Carry(NamedTuple):
    key: jax.Array
    obs: Observation
    env: EnvState
    learner: Any
    nan_steps: jax.Array  # steps in which the learner ranked a NaN index (fedbandit_env.scores)


def facts_of(env: FedBanditJaxEnv) -> FederationFacts:
    """The public facts of one run of ``env`` (what a learner's ``init`` gets)."""
    return FederationFacts.from_config(env.config, 1, env.twins)


def check_seeds(seeds: Any) -> list[int]:
    """The run seeds as ints, each checked before any conversion: a Python or numpy int in
    [0, 2^32 - 1] (a float, bool or string is refused, never cast)."""
    if isinstance(seeds, str | bytes) or not hasattr(seeds, "__iter__"):
        raise ConfigError(f"seeds: expected a list of ints, got {seeds!r:.80}")
    seeds = list(seeds)
    if not seeds:
        raise ConfigError("seeds: expected at least one run seed")
    for s in seeds:
        if isinstance(s, bool | np.bool_) or not isinstance(s, int | np.integer):
            raise ConfigError(f"seeds: expected ints in [0, 2^32 - 1], got {s!r:.80}")
        if not 0 <= s <= MAX_SEED:
            raise ConfigError(f"seeds: expected ints in [0, 2^32 - 1], got {s!r}")
    return [int(s) for s in seeds]


def run_keys(seeds: list[int]) -> jax.Array:
    """One PRNG key per run seed (``jax.random.PRNGKey(seed)``)."""
    for s in seeds:
        if isinstance(s, bool) or not isinstance(s, int | np.integer) or not 0 <= s <= MAX_SEED:
            raise ConfigError(f"seeds: expected ints in [0, 2^32 - 1], got {s!r}")
    return jax.vmap(jax.random.PRNGKey)(jnp.asarray(np.asarray(seeds, np.uint32)))


def params_axes(env: FedBanditJaxEnv, env_params: EnvParams) -> EnvParams:
    """The ``vmap`` axes of ``env_params``: 0 for a field stacked per run (one more leading
    axis than :attr:`~fedbandit_env.jax.env.FedBanditJaxEnv.default_params` has), None for
    one shared by every run; a field of another shape is a ConfigError naming it."""
    default = env.default_params
    axes = {}
    for name in EnvParams._fields:
        given, base = getattr(env_params, name), getattr(default, name)
        if given is None:
            if base is not None:
                raise ConfigError(f"env_params.{name}: expected an array, got None")
            axes[name] = None
            continue
        shape = tuple(np.shape(given))
        want = tuple(np.shape(base)) if base is not None else None
        if want is not None and shape == want:
            axes[name] = None
        elif want is not None and shape[1:] == want:
            axes[name] = 0
        else:
            raise ConfigError(
                f"env_params.{name}: expected shape {want} (one value for every run) or "
                f"(runs, *{want}) (one per run), got {shape}; make params with "
                "env.make_params(...)"
            )
    return EnvParams(**axes)


def rollout_program(
    env: FedBanditJaxEnv,
    learner: Any,
    steps: np.ndarray,
    ranked: list | None = None,
    axes: EnvParams | None = None,
    params: Any = None,
):
    """The jitted function ``keys (B, 2) -> (curves (B, C, N), final env states, final learner
    states, NaN-index steps (B,))`` of the environment's default params, compiled into the
    program as constants; with ``axes``, ``(keys, env_params) -> ...``, ``env_params`` an
    :class:`~fedbandit_env.jax.env.EnvParams` traced as an argument (its fields shared, axis
    None, or one per run, axis 0), so one compiled program serves any values of that shape.
    ``params``: the learner's (None: made here, :func:`~fedbandit_env.jax.learner.params_of`).
    ``ranked``, when given, receives at tracing whether the learner's ``act`` ranks any index
    through :func:`fedbandit_env.scores.note_scores` (else its NaN count means nothing)."""
    init, act = bound(learner, params_of(learner, facts_of(env)) if params is None else params)
    targets = jnp.asarray(np.asarray(steps, np.int32))

    def one_run(key: jax.Array, env_params: EnvParams):
        k_env, k_agent, key = jax.random.split(key, 3)
        obs, env_state = env.reset(k_env, env_params)
        carry = _Carry(key, obs, env_state, init(k_agent), jnp.zeros((), jnp.int32))

        def advance(c: _Carry) -> _Carry:
            key, k_act, k_step = jax.random.split(c.key, 3)
            with watching(TracedScores()) as scores:
                action, learner_state = act(k_act, c.learner, c.obs)
            if ranked is not None:
                ranked.append(bool(scores.flags))
            nan = scores.any_nan().astype(jnp.int32)
            obs, env_state, _, _, _ = env.step(k_step, c.env, action, env_params)
            return _Carry(key, obs, env_state, learner_state, c.nan_steps + nan)

        def segment(c: _Carry, target):
            def running(c: _Carry):
                return (c.env.pulls < target) & (c.env.error[0] == 0)

            c = jax.lax.while_loop(running, advance, c)
            return c, env.cumulative_regret(c.env)

        carry, curve = jax.lax.scan(segment, carry, targets)
        return curve, carry.env, carry.learner, carry.nan_steps

    if axes is None:  # the default params, as compile-time constants
        return jax.jit(jax.vmap(lambda key: one_run(key, None)))
    return jax.jit(jax.vmap(one_run, in_axes=(0, axes)))


_PROGRAMS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
"""The compiled rollouts of each live environment object (it owns them: they go with it)."""


def compiled_program(
    env: FedBanditJaxEnv, learner: Any, steps: np.ndarray, axes: EnvParams | None, args: tuple
) -> tuple[Any, list[bool], Any]:
    """The compiled rollout of ``learner`` on ``env`` for these checkpoints, params axes and
    argument shapes, the ``ranked`` flags its tracing recorded and the learner's params: compiled on the first call,
    then reused by every call with the same learner object (and configuration), checkpoints
    and shapes, whatever the seeds and the params' values (so the tests' repeated rollouts
    share one program)."""
    shapes = jax.tree_util.tree_map(lambda x: (np.shape(x), str(np.asarray(x).dtype)), args)
    key = (
        id(learner), repr(getattr(learner, "config", None)), np.asarray(steps).tobytes(),
        repr(axes), repr(jax.tree_util.tree_structure(args)), repr(shapes),
    )  # fmt: skip
    cache = _PROGRAMS.setdefault(env, {})
    if key not in cache:
        ranked: list[bool] = []
        params = params_of(learner, facts_of(env))  # made and checked once
        program = rollout_program(env, learner, steps, ranked, axes, params)
        compiled = program.lower(*args).compile()
        cache[key] = (learner, compiled, ranked, params)  # keeps id(learner) live
    _, compiled, ranked, params = cache[key]
    return compiled, ranked, params


def rollout(
    env: FedBanditJaxEnv,
    learner: Any,
    seeds: list[int],
    checkpoints: np.ndarray | None = None,
    env_params: EnvParams | None = None,
) -> RolloutResult:
    """Run ``seeds`` (one run each) of ``learner`` on ``env`` to the horizon, keeping the
    cumulative regret of every agent at ``checkpoints`` (pull counts; default: every pull up
    to 400 pulls, else the bench's log- and linear-spaced grid). ``env_params``
    (:class:`~fedbandit_env.jax.env.EnvParams`) are traced arguments of the compiled program,
    so other values of the same shapes reuse it; a field may be stacked per run (a sweep: say,
    one means matrix per run). None: ``env.default_params``, compiled in as constants (the
    bench's results; XLA folds them, so a regret curve may differ from the traced
    ``env_params=env.default_params`` in its last float32 bit, never in a decision)."""

    seeds = check_seeds(seeds)
    if checkpoints is None:
        steps = default_checkpoints(env.horizon)
    else:
        steps = check_checkpoints(checkpoints, env.horizon)
    keys = run_keys(seeds)
    args: tuple = (keys,)
    axes = None
    if env_params is not None:
        axes = params_axes(env, env_params)
        for name, axis in zip(EnvParams._fields, axes, strict=True):
            runs = None if axis is None else np.shape(getattr(env_params, name))[0]
            if runs is not None and runs != len(seeds):
                raise ConfigError(
                    f"env_params.{name}: stacked for {runs} runs, expected one per seed "
                    f"({len(seeds)})"
                )
        args = (keys, env_params)
    start = time.perf_counter()
    compiled, ranked, params = compiled_program(env, learner, steps, axes, args)
    compile_time = time.perf_counter() - start
    curves, final, learner_state, nan_steps = compiled(*args)
    curves = jax.block_until_ready(curves)
    wall = time.perf_counter() - start
    check_state(env, final, seeds, env_params)
    ledger = final.ledger
    return RolloutResult(
        seeds=seeds,
        steps=np.asarray(steps, np.int64),
        regret_by_agent=np.asarray(curves, np.float64),
        messages=count_value(ledger.messages),
        floats=count_value(ledger.floats),
        cost=total_value(ledger.cost),
        dropped=count_value(ledger.dropped),
        engine_steps=np.asarray(final.step, np.int64),
        wall_time=wall,
        compile_time=compile_time,
        device=describe_device(),
        learner_state=jax.tree_util.tree_map(np.asarray, learner_state),
        roles=_roles(final),
        nan_index_steps=np.asarray(nan_steps, np.int64) if any(ranked) else None,
        params=params,
    )


def _roles(final: Any) -> np.ndarray | None:
    """The runs' roles (0 honest, as numpy's ``reset_info.roles``) with an adversary, else
    None."""
    adversary = getattr(final, "adversary", None)
    return None if adversary is None else np.asarray(adversary.roles, np.int8)


def describe_device() -> str:
    """The JAX device the rollout ran on, in words (``"cpu: cpu"``, ``"gpu: NVIDIA H200"``)."""
    device = jax.devices()[0]
    return f"{device.platform}: {getattr(device, 'device_kind', device.platform)}"
