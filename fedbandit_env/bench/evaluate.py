"""``evaluate``: run one (env, learner) cell for many seeds through the vector view (docs/bench.md).

The B runs are stepped together and the environment is built once; regret curves are recorded
at checkpoint steps (all steps for short horizons, a log- and linear-spaced grid of at most 400
steps otherwise), so memory is O(B N) whatever the horizon; the final values are the exact
cumulative regrets at the horizon.

``backend="jax"`` runs the cell on the compiled JAX backend instead (docs/bench.md, "Backends";
:func:`fedbandit_env.jax.rollout`): same checkpoints, same result fields, a JAX learner (a port
of a numpy learner by the same id, or the user's own) and its own results version.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fedbandit_env.agent_registry import make_agent
from fedbandit_env.bench.backends import JAX, NUMPY, check_backend, jax_backend, jax_learner
from fedbandit_env.bench.flags import CLIP_WARNING
from fedbandit_env.bench.versions import (
    adversary_suffix,
    backend_suffix,
    results_version,
    wrapper_suffix,
)
from fedbandit_env.checkpoints import CHECKPOINTS, check_checkpoints, default_checkpoints
from fedbandit_env.engine import PULL
from fedbandit_env.errors import ConfigError, FedBanditError, LearnerError
from fedbandit_env.network import LINK_TYPES
from fedbandit_env.per_agent import as_team_policy
from fedbandit_env.policy import TeamPolicy, check_event_time
from fedbandit_env.registration import make_vec
from fedbandit_env.scores import ScoreWatch, watching
from fedbandit_env.seeding import BatchedRNG

FULL_CURVE_MAX = 2 * CHECKPOINTS
"""Horizons up to this keep every step: the grid would not be smaller."""


@dataclass
class EvalResult:
    """Outcome of one cell: per-run curves at ``steps`` and per-run totals."""

    env_id: str
    agent_id: str
    seeds: list[int]
    steps: np.ndarray
    regret_per_agent: np.ndarray  # (runs, checkpoints): network regret / N
    regret_network: np.ndarray  # (runs, checkpoints): summed over agents
    regret_by_agent: np.ndarray  # (runs, checkpoints, agents): each agent's own regret
    messages: np.ndarray  # (runs, link types)
    floats: np.ndarray
    cost: np.ndarray
    wall_time: float
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    agent_kwargs: dict[str, Any] = field(default_factory=dict)
    privacy_epsilon: float | None = None  # the learner's declaration (TeamPolicy), read after reset
    results_version: str = ""  # package / environment / learner versions (docs/bench.md)
    backend: str = NUMPY  # "numpy" or "jax" (docs/bench.md, "Backends")
    roles: np.ndarray | None = None  # (runs, agents) int8 with an adversary (docs/adversary.md)
    learner_state: Any = None  # JAX backend: the learner's final state, batched over runs
    # flags (docs/bench.md, "Flags"; fedbandit_env.bench.flags)
    nan_index_steps: np.ndarray | None = None  # (runs,) steps with a NaN index; None: unwatched
    notes: tuple[str, ...] = ()  # the learner's notes on its setting (TeamPolicy.notes)
    epsilon_per_release: float | None = None  # privacy wrapper: epsilon of one release
    epsilon_composed: np.ndarray | None = None  # privacy wrapper: (runs,) composed over the run
    clipped_fraction: np.ndarray | None = None  # privacy wrapper: (runs,) payload coords clipped
    staleness: np.ndarray | None = None  # (runs,) events since the acting client's last download
    compile_time: float = 0.0  # JAX backend: seconds of compiling, included in wall_time

    @property
    def run_time(self) -> float:
        """Seconds of running: ``wall_time`` less ``compile_time``."""
        return max(self.wall_time - self.compile_time, 0.0)

    @property
    def final_regret_per_agent(self) -> np.ndarray:
        return self.regret_per_agent[:, -1]

    @property
    def final_regret_network(self) -> np.ndarray:
        return self.regret_network[:, -1]

    @property
    def honest(self) -> np.ndarray:
        """(runs, agents) bool: the honest agents (all of them without an adversary)."""
        if self.roles is None:
            runs, _, agents = self.regret_by_agent.shape
            return np.ones((runs, agents), dtype=bool)
        return self.roles == 0

    @property
    def honest_regret_mean(self) -> np.ndarray:
        """(runs,): the mean over honest agents of their final cumulative regret (docs/adversary.md,
        "Honest metrics"); :attr:`final_regret_per_agent` without an adversary."""
        if self.roles is None:
            return self.final_regret_per_agent
        return self.honest_regret_sum / self.honest.sum(axis=1)

    @property
    def honest_regret_max(self) -> np.ndarray:
        """(runs,): the largest final cumulative regret of an honest agent."""
        final = self.regret_by_agent[:, -1, :]
        return np.where(self.honest, final, -np.inf).max(axis=1)

    @property
    def honest_regret_sum(self) -> np.ndarray:
        """(runs,): the honest agents' final cumulative regrets summed;
        :attr:`final_regret_network` without an adversary."""
        if self.roles is None:
            return self.final_regret_network
        return np.where(self.honest, self.regret_by_agent[:, -1, :], 0.0).sum(axis=1)

    def summary(self) -> dict[str, Any]:
        return {
            "env_id": self.env_id,
            "agent_id": self.agent_id,
            "runs": len(self.seeds),
            "horizon": int(self.steps[-1]),
            "final_regret_per_agent_mean": float(self.final_regret_per_agent.mean()),
            "final_regret_network_mean": float(self.final_regret_network.mean()),
            "messages_mean": float(self.messages.sum(axis=1).mean()),
            "floats_mean": float(self.floats.sum(axis=1).mean()),
            "cost_mean": float(self.cost.sum(axis=1).mean()),
            "link_types": list(LINK_TYPES),
            "privacy_epsilon": _json_epsilon(self.privacy_epsilon),
            "results_version": self.results_version,
            "backend": self.backend,
            "wall_time": self.wall_time,
            "compile_time": self.compile_time,
            "run_time": self.run_time,
            **self._honest_summary(),
            **self._flags_summary(),
        }

    def _flags_summary(self) -> dict[str, Any]:
        """The flags' run totals (docs/bench.md, "Flags"): only the ones recorded."""
        out: dict[str, Any] = {}
        if self.nan_index_steps is not None:
            out["nan_index_steps"] = int(self.nan_index_steps.sum())
            out["nan_index_runs"] = int((self.nan_index_steps > 0).sum())
        if self.notes:
            out["notes"] = list(self.notes)
        if self.epsilon_per_release is not None:
            out["epsilon_per_release"] = self.epsilon_per_release
            out["epsilon_composed"] = _json_epsilon(float(self.epsilon_composed.max()))
            out["clipped_fraction"] = float(self.clipped_fraction.mean())
        if self.staleness is not None:
            out["staleness"] = float(np.nanmean(self.staleness))
        return out

    def _honest_summary(self) -> dict[str, float]:
        """The honest metrics' means over runs, only with an adversary (docs/adversary.md)."""
        if self.roles is None:
            return {}
        return {
            "honest_regret_mean": float(self.honest_regret_mean.mean()),
            "honest_regret_max": float(self.honest_regret_max.mean()),
            "honest_regret_sum": float(self.honest_regret_sum.mean()),
        }


def _json_epsilon(epsilon: float | None) -> float | str | None:
    """JSON has no infinity: a non-private declaration is the string ``"inf"``."""
    if epsilon is None:
        return None
    return "inf" if math.isinf(epsilon) else float(epsilon)


def _policy(
    agent: Any, agent_kwargs: dict[str, Any], name: str | None = None
) -> tuple[TeamPolicy, str]:
    """The learner as a team policy and its row label: ``name``, else the id, the learner's
    ``agent_id``, its class name, or a policy callable's ``module:qualname``."""
    if isinstance(agent, str):
        return make_agent(agent, **agent_kwargs), name or agent
    policy = as_team_policy(agent, name, agent_kwargs)
    label = name or policy.agent_id
    if not label:
        label = agent.__name__ if isinstance(agent, type) else type(agent).__name__
    return policy, label


def env_kwargs_for(
    policy: TeamPolicy, env_id: str, env_kwargs: dict[str, Any] | None
) -> dict[str, Any]:
    """``env_kwargs`` plus, when they name no channels, the learner's ``channel_spec``."""
    env_kwargs = dict(env_kwargs or {})
    if "channels" not in env_kwargs:
        preview = make_vec(env_id, num_runs=1, **env_kwargs).config
        wanted = policy.channel_spec(preview)
        if wanted is not None:
            env_kwargs["channels"] = wanted
    return env_kwargs


def _build(
    policy: TeamPolicy, env_id: str, runs: int, env_kwargs: dict[str, Any] | None
) -> tuple[dict[str, Any], Any]:
    """The vector env of ``runs`` runs and the kwargs that describe it, built once.

    Same environment as ``make_vec(env_id, runs, **env_kwargs_for(...))``: when ``env_kwargs``
    names no channels, the env is built with the default channels and the learner's
    ``channel_spec`` is read from it; only if the learner asks for other channels is the engine
    built again, reusing the topology already built (no second graph construction).
    """
    env_kwargs = dict(env_kwargs or {})
    venv = make_vec(env_id, num_runs=runs, **env_kwargs)
    if "channels" in env_kwargs:
        return env_kwargs, venv
    wanted = policy.channel_spec(venv.config)
    if wanted is None:
        return env_kwargs, venv
    env_kwargs["channels"] = wanted
    venv = make_vec(env_id, num_runs=runs, **{**env_kwargs, "topology": venv.config.topology})
    return env_kwargs, venv


def attack_misfit(agent_id: str, policy: Any, config: Any) -> str | None:
    """Why the adversary of an environment configuration (``EnvConfig``, built with the
    learner's channels; a preset's own adversary included) does not fit the learner, or None
    (docs/adversary.md, "Payload layouts"):

    * an attack other than ``silent`` on a learner that reads no channel (``channel_spec``
      None): no message of the attack reaches it;
    * a layout attack (``Attack.layout``: it writes payloads of a given meaning, e.g. [means,
      counts]) on a channel whose layout the learner does not declare as that one
      (``TeamPolicy.payload_layouts``): the attack would overwrite, say, [counts, sums] with
      means and counts and measure nothing the label says.

    One line naming the learner, the attack and both layouts."""
    from fedbandit_env.adversary import make_attack
    from fedbandit_env.adversary.attacks import LAYOUTS

    adversary = config.adversary
    if adversary is None or adversary.attack == "silent" or adversary.num_byzantine == 0:
        return None
    spec_of = getattr(policy, "channel_spec", None)
    if (spec_of(config) if callable(spec_of) else None) is None:
        return (
            f"{agent_id}: sends no messages (no channel), so no message of attack "
            f"{adversary.attack!r} reaches it; run it clean or under 'silent' (the "
            "no-communication reference)"
        )
    layout = make_attack(adversary.attack, **dict(adversary.attack_kwargs)).layout
    if layout is None:
        return None
    declared = dict(getattr(policy, "payload_layouts", {}) or {})
    spoken = adversary.channels or tuple(config.channels)
    wrong = {name: declared.get(name) for name in spoken if declared.get(name) != layout}
    if not wrong:
        return None
    theirs = ", ".join(
        f"{name}: {have!r} ({LAYOUTS[have]})" if have else f"{name}: no declared layout"
        for name, have in wrong.items()
    )
    return (
        f"{agent_id}: attack {adversary.attack!r} writes payload layout {layout!r} "
        f"({LAYOUTS[layout]}) and the learner's channels carry {theirs} "
        "(TeamPolicy.payload_layouts); pair the attack with a learner of its layout"
    )


def check_attack_fits(agent_id: str, policy: Any, config: Any) -> None:
    """Raise :func:`attack_misfit`'s reason as a :class:`ConfigError`."""
    reason = attack_misfit(agent_id, policy, config)
    if reason is not None:
        raise ConfigError(reason)


def declared_epsilon(policy: Any, params: Any = None) -> float | None:
    """The learner's ``privacy_epsilon`` declaration (None when it declares nothing): a JAX
    learner's ``params.privacy_epsilon`` where its params have one (a guarantee that depends on
    the federation, e.g. ``N_eff * epsilon``), else the learner's."""
    source = params if hasattr(params, "privacy_epsilon") else policy
    value = getattr(source, "privacy_epsilon", None)
    return None if value is None else float(value)


def incompatibility(
    env_id: str,
    agent: str,
    env_kwargs: dict[str, Any] | None = None,
    agent_kwargs: dict[str, Any] | None = None,
    backend: str = NUMPY,
) -> str | None:
    """Why a registered learner cannot run on an environment, or None if it can.

    Decided by the learner itself: it is built with ``agent_kwargs``, the environment is built
    (one run) with the channels the learner asks for, and the learner's own ``reset`` validates
    the federation's facts, the same call that precedes the first step of a real run; with an
    adversary the environment is reset first, where the attack checks that it fits the
    channels (docs/adversary.md). A :class:`FedBanditError`
    (e.g. "family: expected 'linear'") is an incompatibility; so is any other exception, which
    the reason names with its type, so that one broken plug-in does not stop a suite.
    On the JAX backend the JAX learner is built, the JAX environment too (an environment the
    backend refuses is the reason) and the learner's ``init`` checks the facts; nothing is
    compiled.
    """
    try:
        if check_backend(backend) == JAX:
            _jax_init(env_id, agent, env_kwargs, agent_kwargs)
            return None
        policy, label = _policy(agent, dict(agent_kwargs or {}))
        kwargs = env_kwargs_for(policy, env_id, env_kwargs)
        venv = make_vec(env_id, num_runs=1, **kwargs)
        check_attack_fits(label, policy, venv.config)
        if kwargs.get("adversary") is not None:  # the attack checks the channels at reset
            venv.reset(seed=0)
        check_event_time(policy, venv.facts)
        policy.reset(venv.facts, BatchedRNG.for_runs([0], "agents"))
    except FedBanditError as err:
        return str(err)
    except Exception as err:  # a learner's bug or missing optional dependency
        return f"{type(err).__name__}: {err}"
    return None


def _jax_init(
    env_id: str,
    agent: Any,
    env_kwargs: dict[str, Any] | None,
    agent_kwargs: dict[str, Any] | None,
) -> None:
    """Build the JAX learner and environment and run the learner's ``init`` once (its checks
    of the federation's facts, in Python): what :func:`incompatibility` asks of a JAX cell."""
    fj = jax_backend()
    learner, label = jax_learner(agent, dict(agent_kwargs or {}))
    _, env = _build_jax(fj, learner, env_id, env_kwargs, label)
    import jax

    init, _ = fj.bind(learner, fj.facts_of(env))  # make_params checks the facts
    init(jax.random.PRNGKey(0))


def _build_jax(
    fj: Any, learner: Any, env_id: str, env_kwargs: dict[str, Any] | None, agent_id: str
):
    """The JAX environment and the kwargs that describe it: ``env_kwargs`` plus, when they name
    no channels, the learner's ``channel_spec`` (as :func:`_build` does on numpy; the
    topology already built is reused). The JAX adversary checks the channels when the
    environment is made, so the channels are read from a preview without it, and the attack
    is checked against the learner's layouts (:func:`check_attack_fits`) before the
    environment is made with both."""
    from fedbandit_env.config import make_config
    from fedbandit_env.registration import spec

    env_kwargs = dict(env_kwargs or {})
    built: dict[str, Any] = {}
    if "channels" not in env_kwargs:
        preview = fj.make(env_id, **{k: v for k, v in env_kwargs.items() if k != "adversary"})
        spec_of = getattr(learner, "channel_spec", None)
        config = preview.config  # with the adversary's declaration (a spec may read its f)
        if env_kwargs.get("adversary") is not None:
            from fedbandit_env.adversary.roles import AdversaryConfig

            adversary = AdversaryConfig.of(env_kwargs["adversary"])
            config = dataclasses.replace(config, adversary=adversary)
        wanted = spec_of(config) if callable(spec_of) else None
        if wanted is not None:
            env_kwargs["channels"] = wanted
        built = {"topology": preview.config.topology}  # not built twice
    # the JAX adversary checks the channels' dims when the environment is made: the learner's
    # layouts are checked first, on the configuration (a preset's own adversary included)
    config = make_config(**{**spec(env_id).kwargs, **env_kwargs, **built})
    check_attack_fits(agent_id, learner, config)
    return env_kwargs, fj.make(env_id, **{**env_kwargs, **built})


WRAPPER_OPTIONS = ("budget", "composition", "delta_prime", "delta_budget")


def privacy_wrapper_args(privacy: Any, channels: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """The :class:`~fedbandit_env.wrappers.PrivacyVectorWrapper` arguments of a ``privacy``
    option: ``{"channels": {name: options}, "budget": ..., ...}``, or the options of one
    channel (``{"epsilon": 1.0, "sensitivity": 2.0}``) applied to every channel in
    ``channels``; the wrapper-level keys (:data:`WRAPPER_OPTIONS`) may sit beside either."""
    from fedbandit_env.privacy.errors import PrivacyConfigError

    if not isinstance(privacy, dict) or not privacy:
        raise PrivacyConfigError(
            "privacy", "", 'a non-empty JSON object such as {"epsilon": 1.0}', privacy
        )
    wrapper = {k: v for k, v in privacy.items() if k in WRAPPER_OPTIONS}
    rest = {k: v for k, v in privacy.items() if k not in WRAPPER_OPTIONS}
    if "channels" in rest:
        unknown = sorted(set(rest) - {"channels"})
        if unknown:
            raise PrivacyConfigError(
                "privacy", "", f"'channels' and options among {list(WRAPPER_OPTIONS)}", unknown
            )
        return dict(rest["channels"]), wrapper
    return {name: dict(rest) for name in channels}, wrapper


@contextlib.contextmanager
def _learner_errors(agent_id: str, venv: Any, method: str) -> Iterator[None]:
    """A learner's own exception as a :class:`LearnerError` that names the learner, the agent
    (when the adapter knows it), the run's seed and the step (docs/bench.md, "Errors"); the
    project's input errors (a bad action, a bad configuration) pass as they are."""
    try:
        yield
    except FedBanditError as err:
        if not isinstance(err, LearnerError):
            raise
        seeds = list(venv.seeds)
        where = (f"run seed {seeds[err.run]}" if err.run is not None
                 else f"run seeds {seeds[0]}..{seeds[-1]}" if len(seeds) > 1
                 else f"run seed {seeds[0]}")  # fmt: skip
        raise LearnerError(f"{err} ({where}, step {venv.engine.step_count + 1})",
                           err.agent, err.run) from err  # fmt: skip
    except Exception as err:
        seeds = list(venv.seeds)
        runs = f"run seeds {seeds[0]}..{seeds[-1]}" if len(seeds) > 1 else f"run seed {seeds[0]}"
        raise LearnerError(
            f"{agent_id}: all agents: {method} raised {type(err).__name__}: {err} ({runs}, "
            f"step {venv.engine.step_count + 1}; a batched learner acts for every run at once)"
        ) from err


def evaluate(
    env_id: str,
    agent: Any,
    runs: int = 10,
    seed: int = 0,
    env_kwargs: dict[str, Any] | None = None,
    agent_kwargs: dict[str, Any] | None = None,
    checkpoints: np.ndarray | None = None,
    name: str | None = None,
    privacy: dict[str, Any] | None = None,
    backend: str = NUMPY,
) -> EvalResult:
    """Run ``runs`` seeds (``seed``, ``seed+1``, ...) of a learner on an environment.

    ``agent`` is an id (registered, ``module:attr``, ``mabwiser:<LearningPolicy>``,
    ``smpybandits:<Policy>``), a ``TeamPolicy`` or ``PerAgentLearner`` class or instance, or a
    PettingZoo parallel-view policy callable ``policy(observations, infos) -> actions``
    (:mod:`fedbandit_env.per_agent`); ``name`` labels the result (default: the id, the
    learner's ``agent_id`` or the callable's ``module:qualname``). When ``env_kwargs`` names no
    channels, the learner's ``channel_spec`` decides which channels the environment gets.

    ``privacy`` wraps the learner's channels with
    :class:`~fedbandit_env.wrappers.PrivacyVectorWrapper` (any learner, docs/privacy.md
    "Privacy wrappers"): ``{"epsilon": 1.0}`` privatizes every channel with those options,
    ``{"channels": {"neighbors": {...}}, "budget": 20}`` chooses channels and wrapper options.
    The result's ``privacy_epsilon`` is then the largest epsilon any agent spent in any run,
    from the wrapper's accountant, and its results version names the wrapper.

    ``backend="jax"`` (docs/bench.md, "Backends") runs the cell on the JAX backend: ``agent``
    is a JAX learner id (:func:`fedbandit_env.jax.make_jax_agent`: a port's id, one registered
    with :func:`~fedbandit_env.jax.register_jax_agent`, or ``module:attr``), a JAX learner
    class or a learner object (``init`` and ``act``); the environment is
    :func:`fedbandit_env.jax.make` of the same id and kwargs, run by
    :func:`fedbandit_env.jax.rollout` on the same seeds and checkpoints. ``wall_time`` then
    includes compiling. ``privacy`` wrappers are numpy-only. Needs the ``jax`` extra.
    """
    if check_backend(backend) == JAX:
        if privacy is not None:
            raise ConfigError(
                "privacy: the privacy wrappers are numpy-only; run wrapped learners with "
                "backend='numpy' (or give the JAX learner its own mechanism)"
            )
        return _evaluate_jax(env_id, agent, runs, seed, env_kwargs, agent_kwargs, checkpoints,
                             name)  # fmt: skip
    agent_kwargs = dict(agent_kwargs or {})
    policy, agent_id = _policy(agent, agent_kwargs, name)
    env_kwargs, venv = _build(policy, env_id, runs, env_kwargs)
    check_attack_fits(agent_id, policy, venv.config)
    if privacy is not None:
        from fedbandit_env.wrappers import PrivacyVectorWrapper

        channels, wrapper = privacy_wrapper_args(privacy, venv.engine.channels)
        venv = PrivacyVectorWrapper(venv, channels, **wrapper)
    if checkpoints is None:
        steps = default_checkpoints(venv.horizon)
    else:
        steps = check_checkpoints(checkpoints, venv.horizon)
    start = time.perf_counter()
    obs, reset_info = venv.reset(seed=seed)
    check_event_time(policy, venv.facts)
    with _learner_errors(agent_id, venv, "reset"):
        policy.reset(venv.facts, venv.agent_rng())
    curve = np.zeros((runs, len(steps), venv.num_agents))
    k = np.zeros(runs, dtype=np.int64)  # next checkpoint of each run
    rows = np.arange(runs)
    last = len(steps) - 1
    watch = ScoreWatch(runs)  # the NaN indices of the learner (docs/bench.md, "Flags")
    with watching(watch):
        while not venv.engine.truncated:
            with _learner_errors(agent_id, venv, "act"):
                action = policy.act(obs)
            watch.close_step()
            obs, _, _, _, info = venv.step(action.arms, action.messages, action.pull)
            # a run reaches its checkpoints in pulls (communication steps do not count)
            hit = (obs.phase == PULL) & (k <= last) & (obs.pulls == steps[np.minimum(k, last)])
            if hit.any():
                curve[rows[hit], k[hit]] = info.cumulative_regret[hit]
                k += hit
    wall = time.perf_counter() - start
    total = venv.engine.ledger.total
    epsilon = declared_epsilon(policy)
    version = results_version(env_id, agent_id, policy)
    wrapper: dict[str, Any] = {}
    if privacy is not None:
        wrapper = _wrapper_flags(venv.privatizer, agent_id)
        epsilon = float(wrapper["epsilon_composed"].max())
        version += wrapper_suffix(privacy)
    version += adversary_suffix(env_kwargs.get("adversary"))
    return EvalResult(
        env_id=env_id,
        agent_id=agent_id,
        seeds=list(venv.seeds),
        steps=steps,
        regret_per_agent=curve.mean(axis=2),
        regret_network=curve.sum(axis=2),
        regret_by_agent=curve,
        messages=total.messages.copy(),
        floats=total.floats.copy(),
        cost=total.cost.copy(),
        wall_time=wall,
        env_kwargs=env_kwargs,
        agent_kwargs=agent_kwargs,
        privacy_epsilon=epsilon,
        results_version=version,
        roles=getattr(reset_info, "roles", None),
        nan_index_steps=watch.nan_steps if watch.seen else None,
        notes=learner_notes(policy),
        staleness=learner_staleness(policy),
        **wrapper,
    )


def learner_staleness(policy: Any, state: Any = None) -> np.ndarray | None:
    """(runs,) the learner's staleness diagnostic (docs/bench.md, "Flags"): a numpy learner's
    ``staleness()`` after the run, a JAX learner's ``staleness(final state)``; None for a
    learner without one."""
    method = getattr(policy, "staleness", None)
    if not callable(method):
        return None
    return np.asarray(method() if state is None else method(state), np.float64)


def learner_notes(policy: Any, params: Any = None) -> tuple[str, ...]:
    """The learner's notes on its setting: a JAX learner's ``params.notes`` (params protocol),
    else ``notes()`` after reset (``TeamPolicy.notes``; none for a learner without it)."""
    if params is not None and hasattr(params, "notes"):
        return tuple(str(n) for n in params.notes)
    notes = getattr(policy, "notes", None)
    return tuple(str(n) for n in notes()) if callable(notes) else ()


def _wrapper_flags(privatizer: Any, agent_id: str) -> dict[str, Any]:
    """The privacy wrapper's flags of a run batch: the per-release epsilon asked for, each
    run's composed epsilon (its largest agent's) and clipped fraction; warns when more than
    :data:`~fedbandit_env.bench.flags.CLIP_WARNING` of a run's payload coordinates were
    clipped (docs/privacy.md, "Clipping")."""
    clipped = privatizer.clipped_fraction()
    worst = float(clipped.max())
    if worst > CLIP_WARNING:
        sensitivity = ", ".join(f"{name}: sensitivity {cfg.sensitivity:g} (L1/L2 radius "
                                f"{cfg.sensitivity / 2:g} around {cfg.center})"
                                for name, cfg in privatizer.channels.items())  # fmt: skip
        warnings.warn(
            f"{agent_id}: privacy wrapper clipped {100 * worst:.0f}% of the payload coordinates "
            f"in a run ({sensitivity}); the learner's messages are not what it computed: set "
            'sensitivity (and center) to the payloads\' range (docs/privacy.md, "Clipping")',
            ClippingWarning,
            stacklevel=3,
        )
    return {
        "epsilon_per_release": float(privatizer.epsilon_per_release),
        "epsilon_composed": privatizer.info().epsilon_spent.max(axis=1),
        "clipped_fraction": clipped,
    }


class ClippingWarning(UserWarning):
    """The privacy wrapper clipped more than 1 % of a run's payload coordinates."""


def _evaluate_jax(
    env_id: str,
    agent: Any,
    runs: int,
    seed: int,
    env_kwargs: dict[str, Any] | None,
    agent_kwargs: dict[str, Any] | None,
    checkpoints: np.ndarray | None,
    name: str | None,
) -> EvalResult:
    """:func:`evaluate` on the JAX backend: one compiled rollout of ``runs`` seeds."""
    if isinstance(runs, bool) or not isinstance(runs, int) or runs < 1:
        raise ConfigError(f"runs: expected a positive int, got {runs!r}")
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise ConfigError(f"seed: expected an int >= 0 (the first run's seed), got {seed!r:.80}")
    fj = jax_backend()
    agent_kwargs = dict(agent_kwargs or {})
    learner, agent_id = jax_learner(agent, agent_kwargs, name)
    env_kwargs, env = _build_jax(fj, learner, env_id, env_kwargs, agent_id)
    steps = default_checkpoints(env.horizon) if checkpoints is None else checkpoints
    seeds = list(range(int(seed), int(seed) + runs))
    with _jax_learner_errors(agent_id, seeds):
        result = fj.rollout(env, learner, seeds, steps)
    curve = result.regret_by_agent
    return EvalResult(
        env_id=env_id,
        agent_id=agent_id,
        seeds=result.seeds,
        steps=np.asarray(result.steps, np.int64),
        regret_per_agent=curve.mean(axis=2),
        regret_network=curve.sum(axis=2),
        regret_by_agent=curve,
        messages=np.asarray(result.messages, np.int64),
        floats=np.asarray(result.floats, np.int64),
        cost=np.asarray(result.cost, np.float64),
        wall_time=result.wall_time,
        env_kwargs=env_kwargs,
        agent_kwargs=agent_kwargs,
        privacy_epsilon=declared_epsilon(learner, result.params),
        results_version=_jax_version(env_id, agent_id, learner, env_kwargs.get("adversary")),
        backend=JAX,
        learner_state=result.learner_state,
        roles=result.roles,
        nan_index_steps=result.nan_index_steps,
        notes=learner_notes(learner, result.params),
        staleness=learner_staleness(learner, result.learner_state),
        compile_time=result.compile_time,
    )


def _jax_version(env_id: str, agent_id: str, learner: Any, adversary: Any) -> str:
    """The results version of a JAX row: the numpy part, the adversary's suffix, then the
    backend's (the order of :func:`~fedbandit_env.bench.versions.registered_results_version`)."""
    numpy_part = results_version(env_id, agent_id, learner)
    return numpy_part + adversary_suffix(adversary) + backend_suffix(JAX)


@contextlib.contextmanager
def _jax_learner_errors(agent_id: str, seeds: list[int]) -> Iterator[None]:
    """A JAX learner's own exception (raised in ``init`` or while ``act`` is traced) as a
    :class:`LearnerError` naming the learner and the runs; the project's errors (a bad action
    recorded inside ``jit``, a configuration ``init`` refuses) pass as they are."""
    try:
        yield
    except FedBanditError:
        raise
    except Exception as err:
        runs = f"run seeds {seeds[0]}..{seeds[-1]}" if len(seeds) > 1 else f"run seed {seeds[0]}"
        raise LearnerError(
            f"{agent_id}: all agents: the JAX learner raised {type(err).__name__}: {err} "
            f"({runs}; a JAX learner is traced once for every run)"
        ) from err
