"""The compiled rollout (docs/jax.md, "Rollout"): a whole horizon as one program.

:func:`rollout` runs B seeds of a learner on a JAX environment: per run, engine steps in loops
whose trip counts are known when the program compiles (``horizon`` steps for a learner that only
pulls; chunks of :data:`CHUNK` masked steps behind a batch-level ``cond``, as many as the
most steps a run can take, for one that takes communication-only steps), a ``vmap`` over runs,
the whole one ``jit``, compiled once per :func:`program_key` in the process. Only the curves at the checkpoints are kept, so memory is
O(B C N) whatever the horizon. The first bad input recorded inside ``jit`` (``state.error``) is
raised after the rollout.
"""

from __future__ import annotations

import hashlib
import pickle
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from fedbandit_env.checkpoints import check_checkpoints, default_checkpoints
from fedbandit_env.errors import ConfigError
from fedbandit_env.jax.accumulate import count_value, total_value
from fedbandit_env.jax.batch import RUNS_AXIS, any_run
from fedbandit_env.jax.env import EnvParams, FedBanditJaxEnv, check_state
from fedbandit_env.jax.learner import bound, params_of
from fedbandit_env.jax.traced_params import (
    TRACE_ERRORS,
    fill,
    learner_template,
    split,
    values_of,
)
from fedbandit_env.jax.types import EnvState, Observation
from fedbandit_env.policy import FederationFacts
from fedbandit_env.scores import TracedScores, watching
from fedbandit_env.xp import bounded_while

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

    @property
    def run_time(self) -> float:
        """Seconds of running: ``wall_time`` less ``compile_time`` (0 when the process had the
        program already)."""
        return max(self.wall_time - self.compile_time, 0.0)


class _Carry(NamedTuple):
    key: jax.Array
    obs: Observation
    env: EnvState
    learner: Any
    nan_steps: jax.Array  # steps in which the learner ranked a NaN index (fedbandit_env.scores)
    curve: jax.Array  # (C, N) the cumulative regret at the checkpoints reached so far
    reached: jax.Array  # () int32: how many checkpoints have been reached


CHUNK = 64
"""Engine steps per iteration of the outer loop of a learner that takes communication-only
steps: its runs' step counts are data, so their loop reads "does any run still step?" once per
chunk, never per step, and skips the chunks left once every run is done (docs/jax.md, "Rollout")."""

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


def takes_communication_steps(env: FedBanditJaxEnv, learner: Any, params: Any) -> bool:
    """Whether ``learner``'s action can be a communication-only step: its ``pull`` is not the
    constant True (read while tracing one ``act``, nothing runs)."""
    init, act = bound(learner, params)
    seen: list[bool] = []

    def one(key: jax.Array):
        k_env, k_agent, k_act = jax.random.split(key, 3)
        obs, _ = env.reset(k_env)
        with watching(TracedScores()):
            action, _ = act(k_act, init(k_agent), obs)
        seen.append(not (isinstance(action.pull, bool) and action.pull))
        return action.arms

    jax.eval_shape(one, jax.random.PRNGKey(0))
    return seen[-1]


def max_engine_steps(env: FedBanditJaxEnv, env_params: EnvParams | None = None) -> int:
    """The most engine steps a run can take: each of its ``horizon`` pulls comes after at most
    ``max_communication_steps`` communication-only steps in a row (the environment stops a run
    at a longer streak, docs/architecture.md, "Communication steps"); the largest of
    ``env_params``' values when given, else the configuration's."""
    limit = env.config.max_communication_steps
    if env_params is not None:
        limit = int(np.max(np.asarray(env_params.max_communication_steps)))
    return env.horizon * (limit + 1)


class _CommunicationSteps(Exception):
    """Raised while tracing a program built for a learner that only pulls, at the first action
    whose ``pull`` is not the constant True (:func:`compiled_program` rebuilds it)."""


def rollout_program(
    env: FedBanditJaxEnv,
    learner: Any,
    steps: np.ndarray,
    ranked: list | None = None,
    axes: EnvParams | None = None,
    params: Any = None,
    pulls_only: bool | None = None,
    template: Any = None,
    max_steps: int | None = None,
):
    """The jitted function ``keys (B, 2) -> (curves (B, C, N), final env states, final learner
    states, NaN-index steps (B,))`` of the environment's default params, compiled into the
    program as constants; with ``axes``, ``(keys, env_params) -> ...``, ``env_params`` an
    :class:`~fedbandit_env.jax.env.EnvParams` traced as an argument (its fields shared, axis
    None, or one per run, axis 0), so one compiled program serves any values of that shape.
    ``params``: the learner's (None: made here, :func:`~fedbandit_env.jax.learner.params_of`).
    ``ranked``, when given, receives at tracing whether the learner's ``act`` ranks any index
    through :func:`fedbandit_env.scores.note_scores` (else its NaN count means nothing).
    ``pulls_only``: whether the learner never takes a communication-only step (None: read by
    :func:`takes_communication_steps`; True: assumed, and tracing raises at an action whose
    ``pull`` is not the constant True). ``template``: the learner's params with their traced
    floats as slots (:func:`fedbandit_env.jax.traced_params.split`; ``learner`` then the
    :func:`~fedbandit_env.jax.traced_params.learner_template` stand-in): the program takes
    those floats as one more argument, a tuple of float32 scalars shared by every run.
    ``max_steps``: the most engine steps a run can take (None: :func:`max_engine_steps` of
    the configuration).

    Every loop has a trip count known when it compiles (docs/jax.md, "Rollout"): a learner
    that only pulls takes exactly ``horizon`` engine steps, one ``fori_loop``; one that takes
    communication-only steps runs chunks of :data:`CHUNK` masked steps, at most enough for
    ``max_steps``, behind a batch-level ``cond`` until every run has made its pulls
    (:func:`fedbandit_env.xp.bounded_while`), so the predicate is read once per chunk. A step whose pull reaches
    a checkpoint writes the run's cumulative regret into the curve, behind a batch-level
    ``cond`` (rare work: the other steps neither compute the regret nor touch the curve)."""
    params = params_of(learner, facts_of(env)) if params is None else params
    targets = jnp.asarray(np.asarray(steps, np.int32))
    num_checkpoints, horizon = len(steps), env.horizon
    if pulls_only is None:
        pulls_only = not takes_communication_steps(env, learner, params)
    max_steps = max_engine_steps(env) if max_steps is None else max_steps

    def one_run(key: jax.Array, env_params: EnvParams, values: tuple = ()):
        init, act = bound(learner, params if template is None else fill(template, values))
        k_env, k_agent, key = jax.random.split(key, 3)
        obs, env_state = env.reset(k_env, env_params)
        curve = jnp.zeros((num_checkpoints, env.num_agents), jnp.float32)
        zero = jnp.zeros((), jnp.int32)
        carry = _Carry(key, obs, env_state, init(k_agent), zero, curve, zero)

        def advance(c: _Carry) -> _Carry:
            key, k_act, k_step = jax.random.split(c.key, 3)
            with watching(TracedScores()) as scores:
                action, learner_state = act(k_act, c.learner, c.obs)
            if pulls_only and not (isinstance(action.pull, bool) and action.pull):
                raise _CommunicationSteps
            if ranked is not None:
                ranked.append(bool(scores.flags))
            nan = scores.any_nan().astype(jnp.int32)
            obs, env_state, _, _, _ = env.step(k_step, c.env, action, env_params)
            at = jnp.minimum(c.reached, num_checkpoints - 1)
            hit = (env_state.pulls > c.env.pulls) & (env_state.pulls == targets[at])

            def write(curve: jax.Array) -> jax.Array:  # the regret of the runs at a checkpoint
                row = jnp.where(hit, env.cumulative_regret(env_state), curve[at])
                return jax.lax.dynamic_update_index_in_dim(curve, row, at, 0)

            # rare work (a checkpoint is reached by few steps): only when a run reaches one
            curve = jax.lax.cond(any_run(hit), write, lambda curve: curve, c.curve)
            return _Carry(key, obs, env_state, learner_state, c.nan_steps + nan, curve,
                          c.reached + hit)  # fmt: skip

        if pulls_only:  # exactly horizon steps (a bad input is raised after the rollout)
            carry = jax.lax.fori_loop(0, horizon, lambda _, c: advance(c), carry)
        else:

            def live(c: _Carry) -> jax.Array:
                return (c.env.pulls < horizon) & (c.env.error[0] == 0)

            def masked(_, c: _Carry) -> _Carry:
                new = advance(c)
                return jax.tree_util.tree_map(lambda a, b: jnp.where(live(c), a, b), new, c)

            chunk = lambda c: jax.lax.fori_loop(0, CHUNK, masked, c)  # noqa: E731
            carry = bounded_while(jnp, live, chunk, carry, -(-max_steps // CHUNK))
        # a run stopped by a bad input keeps its regret at the stop for the checkpoints left
        rest = jnp.arange(num_checkpoints)[:, None] >= carry.reached
        curve = jnp.where(rest, env.cumulative_regret(carry.env), carry.curve)
        return curve, carry.env, carry.learner, carry.nan_steps

    if axes is None:  # the environment's default params, as compile-time constants
        if template is None:
            return jax.jit(jax.vmap(lambda key: one_run(key, None), axis_name=RUNS_AXIS))
        run = lambda key, values: one_run(key, None, values)  # noqa: E731
        return jax.jit(jax.vmap(run, in_axes=(0, None), axis_name=RUNS_AXIS))
    if template is None:
        return jax.jit(jax.vmap(one_run, in_axes=(0, axes), axis_name=RUNS_AXIS))
    return jax.jit(jax.vmap(one_run, in_axes=(0, axes, None), axis_name=RUNS_AXIS))


PROGRAM_CACHE_SIZE = 64
"""How many compiled rollouts the process keeps (least recently used dropped first)."""

_PROGRAMS: OrderedDict[tuple, tuple[Any, ...]] = OrderedDict()


def _fingerprint(obj: Any) -> tuple[str, Any]:
    """A key for ``obj``'s content: the digest of its pickle; an object that does not pickle
    is keyed by its identity (the cache entry then holds the object, so the id stays its)."""
    try:
        return ("sha256", hashlib.sha256(pickle.dumps(obj, protocol=5)).hexdigest())
    except Exception:  # noqa: BLE001 - anything unpicklable: keyed by identity
        return ("id", id(obj))


def program_key(
    env: FedBanditJaxEnv, attrs: Any, kind: type, params: Any, steps: np.ndarray, axes: Any,
    args: tuple,
) -> tuple:
    """What a compiled rollout depends on: the environment's configuration, the learner's
    class, attributes ``attrs`` and params (with traced floats: their templates,
    :mod:`fedbandit_env.jax.traced_params`), the checkpoints, the params axes and the
    arguments' shapes and dtypes (never the seeds' or the traced params' values)."""
    shapes = jax.tree_util.tree_map(lambda x: (np.shape(x), str(np.asarray(x).dtype)), args)
    return (
        _fingerprint((env.config, env.env_id)),
        f"{kind.__module__}.{kind.__qualname__}",
        _fingerprint(attrs),
        _fingerprint(params),
        np.asarray(steps).tobytes(),
        repr(axes),
        repr(jax.tree_util.tree_structure(args)),
        repr(shapes),
    )


_SEEN: dict[tuple, dict[str, bool]] = {}
"""What tracing learned about a learner of one class and settings (its float settings aside),
on any environment: ``"constants"`` (its traced params failed) and ``"pulls_only"`` (whether
its last program was the one of a learner that only pulls). Hints that save a trace: a wrong one
costs a trace or the chunked loop, never a wrong program."""


def _compile(env, learner, steps, axes, args, params, template, max_steps, seen) -> tuple:
    """Trace and compile the rollout: first as a learner that only pulls, unless ``seen``
    says it takes communication-only steps (that trace stops at the first act whose pull is
    not the constant True, then the chunked program is built)."""
    ranked: list[bool] = []
    lowered = None
    if seen.get("pulls_only", True):
        try:
            program = rollout_program(env, learner, steps, ranked, axes, params, True, template,
                                      max_steps)  # fmt: skip
            lowered = program.lower(*args)
        except _CommunicationSteps:
            ranked.clear()
    seen["pulls_only"] = lowered is not None
    if lowered is None:
        program = rollout_program(env, learner, steps, ranked, axes, params, False, template,
                                  max_steps)  # fmt: skip
        lowered = program.lower(*args)
    return lowered.compile(), ranked


def compiled_program(
    env: FedBanditJaxEnv, learner: Any, steps: np.ndarray, axes: EnvParams | None, args: tuple
) -> tuple[Any, list[bool], Any, bool, tuple]:
    """``(compiled, ranked, params, fresh, extra)``: the compiled rollout of ``learner`` on
    ``env`` for these checkpoints, params axes and argument shapes, the ``ranked`` flags its
    tracing recorded, the learner's params, whether it was compiled by this call, and the
    arguments to pass after ``args`` (the learner's traced floats, or none).

    Compiled once per process for each :func:`program_key`: another environment object of the
    same configuration, another learner object of the same class and settings, other seeds
    and other ``env_params`` values of the same shapes reuse it. The learner's finite float
    params are traced arguments (:mod:`fedbandit_env.jax.traced_params`), so learners that
    differ only in them (a sweep over epsilon) share a program too, unless the learner uses
    one in Python while tracing: then its params are compiled in and each setting compiles its
    own (docs/jax.md, "Compiling once")."""
    params = params_of(learner, facts_of(env))  # made and checked on every call (cheap)
    kind = type(learner)
    template, floats = split(params)
    stand_in, attrs = learner_template(learner)
    tries = []
    if floats:
        tries.append((stand_in, attrs, template, (values_of(floats),)))
    plain_attrs = vars(learner) if hasattr(learner, "__dict__") else learner
    max_steps = max_engine_steps(env, args[1] if len(args) > 1 else None)
    tries.append((learner, plain_attrs, None, ()))
    seen = _SEEN.setdefault((f"{kind.__module__}.{kind.__qualname__}", _fingerprint(attrs)), {})
    for who, who_attrs, slots, extra in tries:
        key = program_key(env, who_attrs, kind, params if slots is None else slots, steps,
                          axes, args + extra) + (max_steps,)  # fmt: skip
        entry = _PROGRAMS.get(key)
        if entry is None and slots is not None and seen.get("constants"):
            continue
        fresh = entry is None
        if fresh:
            try:
                compiled, ranked = _compile(env, who, steps, axes, args + extra, params, slots,
                                            max_steps, seen)  # fmt: skip
            except TRACE_ERRORS:
                if slots is None:
                    raise
                seen["constants"] = True  # it reads a float param in Python: every value too
                continue
            # the objects stay referenced while cached, so an identity key stays theirs
            _PROGRAMS[key] = (compiled, ranked, env, learner)
            while len(_PROGRAMS) > PROGRAM_CACHE_SIZE:
                _PROGRAMS.popitem(last=False)
        _PROGRAMS.move_to_end(key)
        compiled, ranked = _PROGRAMS[key][:2]
        return compiled, ranked, params, fresh, extra
    raise AssertionError("unreachable: the constants program is always tried")


def params_traced(env: FedBanditJaxEnv, learner: Any) -> bool:
    """Whether ``learner``'s rollout on ``env`` takes its float params as traced arguments
    (:mod:`fedbandit_env.jax.traced_params`), so that settings differing only in them share one
    compiled program; False when it has none, or reads one in Python (each setting then
    compiles its own). Traces the learner's ``init`` and two ``act`` steps with the
    environment (what the rollout traces of the learner); compiles nothing."""
    params = params_of(learner, facts_of(env))
    template, floats = split(params)
    if not floats:
        return False
    stand_in = learner_template(learner)[0]

    def steps(key: jax.Array, values: tuple) -> Any:
        init, act = bound(stand_in, fill(template, values))
        obs, state = env.reset(key)
        learner_state = init(key)
        for _ in range(2):  # the first step, then one from a stepped state
            with watching(TracedScores()):
                action, learner_state = act(key, learner_state, obs)
            obs, state, *_ = env.step(key, state, action)
        return learner_state

    try:
        jax.eval_shape(steps, jax.random.PRNGKey(0), values_of(floats))
    except TRACE_ERRORS:
        return False
    return True


def clear_programs() -> None:
    """Drop every compiled rollout this process keeps, and what tracing learned."""
    _PROGRAMS.clear()
    _SEEN.clear()


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
    compiled, ranked, params, fresh, extra = compiled_program(env, learner, steps, axes, args)
    compile_time = time.perf_counter() - start if fresh else 0.0  # 0: the process had it
    curves, final, learner_state, nan_steps = compiled(*args, *extra)
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
