"""Suites: named sets of cells (environment + kwargs, learner + kwargs, runs, horizon).

docs/bench.md. A cell's identity is the SHA-256 of its canonical JSON (env id and kwargs with the
horizon, agent id and kwargs, and the backend when it is not numpy): the results store keys rows
by (cell hash, seed).

A suite lists explicit cells (learners with specific kwargs) and :class:`LearnerSweep` entries:
"every registered learner, with its default kwargs, on this environment". Sweeps are expanded
from the agent registry when the suite is run, so a learner installed later (an entry point of
the ``fedbandit.agents`` group) or registered at runtime (``register_agent``) joins ``standard``
and ``quick`` by itself. Whether a learner can run on an environment is decided by the learner:
:meth:`Suite.available` builds it, builds the environment with the channels it asks for and calls
its ``reset`` (its own validation of the federation's facts, before any step); a learner that
raises there is skipped, and the note says which and why (``fedbandit suite`` prints it).
"""

from __future__ import annotations

import difflib
import hashlib
import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from fedbandit_env.agent_registry import list_agents
from fedbandit_env.bench.backends import NUMPY, check_backend, learner_known, list_jax_learners
from fedbandit_env.bench.evaluate import incompatibility
from fedbandit_env.errors import ConfigError, UnknownIdError
from fedbandit_env.registration import list_envs, make_vec, spec


def _canonical(value: Any) -> Any:
    """JSON-able canonical form (inf as a string, tuples as lists, sorted dict keys)."""
    if isinstance(value, float) and math.isinf(value):
        return "inf" if value > 0 else "-inf"
    if isinstance(value, dict):
        return {str(k): _canonical(v) for k, v in sorted(value.items())}
    if isinstance(value, list | tuple):
        return [_canonical(v) for v in value]
    return value


@dataclass(frozen=True)
class Cell:
    """One (environment, learner) configuration evaluated on ``runs`` seeds from ``seed``."""

    env_id: str
    agent_id: str
    horizon: int
    runs: int = 10
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    agent_kwargs: dict[str, Any] = field(default_factory=dict)
    seed: int = 0
    label: str = ""
    privacy: dict[str, Any] = field(default_factory=dict)
    """Options of the privacy wrapper put around the learner's channels (``evaluate``'s
    ``privacy``; empty: none). Part of the cell's identity when given."""
    backend: str = NUMPY
    """Where the cell runs: ``"numpy"`` or ``"jax"`` (docs/bench.md, "Backends"). Part of the
    cell's identity when not numpy, so rows of two backends never share a cell."""

    def __post_init__(self) -> None:
        check_backend(self.backend)
        if self.privacy and self.backend != NUMPY:
            raise ConfigError(
                f"cell.privacy: the privacy wrappers are numpy-only, got backend {self.backend!r}"
            )
        if not isinstance(self.privacy, dict):
            raise ConfigError(
                f"cell.privacy: expected a dict of wrapper options, got {self.privacy!r}"
            )
        for name in ("horizon", "runs"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"cell.{name}: expected a positive int, got {value!r}")

    @property
    def config(self) -> dict[str, Any]:
        config = {
            "env_id": self.env_id,
            "env_kwargs": {**self.env_kwargs, "horizon": self.horizon},
            "agent_id": self.agent_id,
            "agent_kwargs": self.agent_kwargs,
        }
        if self.privacy:  # absent otherwise, so cells without a wrapper keep their hashes
            config["privacy"] = self.privacy
        if self.backend != NUMPY:  # absent for numpy, so numpy cells keep their hashes
            config["backend"] = self.backend
        return _canonical(config)

    @property
    def config_hash(self) -> str:
        text = json.dumps(self.config, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    @property
    def name(self) -> str:
        return self.label or self.agent_id

    @property
    def env_key(self) -> str:
        """The environment part of the config: cells with the same key are ranked together."""
        env = {"env_id": self.env_id, "env_kwargs": self.config["env_kwargs"]}
        return json.dumps(env, sort_keys=True)

    @property
    def seeds(self) -> list[int]:
        return list(range(self.seed, self.seed + self.runs))


@dataclass(frozen=True)
class LearnerSweep:
    """Every registered learner, with its default kwargs, on one environment configuration,
    except the ids in ``exclude`` (those the suite runs there with specific kwargs instead).
    On the JAX backend, every registered JAX learner (:func:`fedbandit_env.jax.list_jax_agents`;
    none without the ``jax`` extra)."""

    env_id: str
    horizon: int
    runs: int
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    exclude: tuple[str, ...] = ()
    backend: str = NUMPY

    def cells(self) -> list[Cell]:
        ids = list_agents() if self.backend == NUMPY else list_jax_learners()
        return [
            Cell(
                self.env_id,
                agent_id,
                self.horizon,
                self.runs,
                dict(self.env_kwargs),
                {},
                backend=self.backend,
            )  # fmt: skip
            for agent_id in ids
            if agent_id not in self.exclude
        ]


def sweepable_attacks() -> list[str]:
    """The registered attacks an attack sweep runs: those that build with their default
    keyword arguments (``fixed`` needs its ``values``, so a sweep leaves it out; a suite's own
    cells may still name it with its kwargs)."""
    from fedbandit_env.adversary import list_attacks, make_attack

    out = []
    for attack in list_attacks():
        try:
            make_attack(attack)
        except ConfigError:
            continue
        out.append(attack)
    return out


@dataclass(frozen=True)
class AttackSweep:
    """Every registered learner on one environment configuration, clean (no adversary, the
    f = 0 row) and, for each f in ``byzantine``, under every registered attack that builds with
    its default kwargs (:func:`sweepable_attacks`) with ``adversary =
    {"num_byzantine": f, "attack": id}`` (uniform placement). Expanded from both registries when
    the suite runs, so learners and attacks registered later join by themselves.

    Which cells run is decided by the learner and the attack (:func:`incompatibility`: the
    environment is made and reset with the adversary, where an attack checks the channels'
    payload layout, then the learner's ``reset`` runs): a learner that refuses the setting is
    skipped with its reason, and so is an attack that does not fit the learner's channels (e.g.
    a mean-layout attack on a channel of arm ids). A learner that declares no channels
    (``channel_spec`` None: it reads no message, so no attack reaches it) runs clean and under
    ``silent`` only (:meth:`refusal`), which gives the no-communication reference of the
    cooperation ratio on the same honest agents."""

    env_id: str
    horizon: int
    runs: int
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    byzantine: tuple[int, ...] = (1, 2)
    exclude: tuple[str, ...] = ()
    backend: str = NUMPY
    variants: tuple[tuple[str, dict[str, Any], str], ...] = ()
    """(agent id, agent kwargs, label) run like a registered learner, beside the defaults: the
    plain learners of a payload layout (a defence's ablation) and learners whose defaults do
    not fit the federation (:data:`ROBUST_VARIANTS`)."""

    def cells(self) -> list[Cell]:
        learners = [(a, {}, "") for a in list_agents() if a not in self.exclude]
        out = []
        for agent_id, kwargs, label in [*learners, *self.variants]:
            # the numpy ids: a JAX cell is a port of one of them
            out.append(Cell(self.env_id, agent_id, self.horizon, self.runs,
                            dict(self.env_kwargs), dict(kwargs), label=label,
                            backend=self.backend))  # fmt: skip
            for f in self.byzantine:
                for attack in sweepable_attacks():
                    adversary = {"num_byzantine": f, "attack": attack}
                    out.append(Cell(self.env_id, agent_id, self.horizon, self.runs,
                                    {**self.env_kwargs, "adversary": adversary}, dict(kwargs),
                                    label=label, backend=self.backend))  # fmt: skip
        return out

    def refusal(self, cell: Cell, memo: dict[Any, Any]) -> str | None:
        """Why a cell of this sweep cannot run, or None; what :func:`incompatibility` decides
        for other cells, with work shared by the cells of one :meth:`Suite.split` (``memo``):

        * the clean cell is :func:`incompatibility` itself; a learner that refuses the clean
          setting is skipped under every attack with that reason (it refuses the family or the
          graph, not the attack);
        * an attack other than ``silent`` on a learner that declares no channels is skipped;
        * otherwise the environment is made with the learner's channels, the adversary and the
          topology already built, and reset (the attack checks the channels' layout), and the
          learner's ``reset`` runs; an attack's layout refusal at one f holds at every f."""
        reason = self._numpy_refusal(replace(cell, backend=NUMPY), memo)
        if reason is not None or cell.backend == NUMPY:
            return reason
        # on another backend: the same cell must also build there (a port of the learner, the
        # attack's twin, the environment), or it is skipped as a backend gap
        key = ("backend", cell.backend, cell.config_hash)
        if key not in memo:
            memo[key] = mark_backend_gap(incompatibility(
                cell.env_id, cell.agent_id, {**cell.env_kwargs, "horizon": cell.horizon},
                cell.agent_kwargs, cell.backend))  # fmt: skip
        return memo[key]

    def _numpy_refusal(self, cell: Cell, memo: dict[Any, Any]) -> str | None:
        """:meth:`refusal` of the cell on the numpy engine (the learner's and the attack's
        decision, the same on every backend)."""
        clean = {k: v for k, v in cell.env_kwargs.items() if k != "adversary"}
        key = (cell.agent_id, json.dumps(_canonical([clean, cell.agent_kwargs]), sort_keys=True))
        if key not in memo:
            memo[key] = incompatibility(cell.env_id, cell.agent_id,
                                        {**clean, "horizon": cell.horizon}, cell.agent_kwargs)  # fmt: skip
        adversary = cell.env_kwargs.get("adversary")
        if memo[key] is not None or adversary is None:
            return memo[key]
        attack = adversary.get("attack")
        if (*key, "attack", attack) in memo:
            return memo[(*key, "attack", attack)]
        from fedbandit_env.agent_registry import make_agent
        from fedbandit_env.bench.evaluate import attack_misfit
        from fedbandit_env.errors import FedBanditError
        from fedbandit_env.policy import check_event_time
        from fedbandit_env.seeding import BatchedRNG

        try:
            channels, topology = self._preview(cell, clean, adversary, key, memo)
            kwargs = {**clean, "horizon": cell.horizon, "adversary": adversary,
                      "topology": topology}  # fmt: skip
            if channels is not None and "channels" not in clean:
                kwargs["channels"] = channels
            policy = make_agent(cell.agent_id, **cell.agent_kwargs)
            venv = make_vec(cell.env_id, num_runs=1, **kwargs)
            misfit = attack_misfit(cell.agent_id, policy, venv.config)
            if misfit:  # the attack's layout: the same at every f
                memo[(*key, "attack", attack)] = misfit
                return misfit
            venv.reset(seed=0)
            check_event_time(policy, venv.facts)
            policy.reset(venv.facts, BatchedRNG.for_runs([0], "agents"))
        except FedBanditError as err:
            reason = str(err)
        except Exception as err:  # a learner's bug: named, so one plug-in does not stop a suite
            reason = f"{type(err).__name__}: {err}"
        else:
            return None
        if reason.startswith(f"attack {attack!r}"):  # the attack's layout: the same at every f
            memo[(*key, "attack", attack)] = reason
        return reason

    @staticmethod
    def _preview(
        cell: Cell, clean: dict[str, Any], adversary: dict[str, Any], key: tuple, memo: dict
    ) -> tuple[Any, Any]:
        """The learner's channel spec on the clean setting with the adversary's declaration
        (a spec may read the declared f, e.g. Fed-MoM-UCB's group size) and the topology built
        for it."""
        from fedbandit_env.adversary.roles import AdversaryConfig

        f = AdversaryConfig.of(adversary).num_byzantine
        if ("preview", *key, f) not in memo:
            from fedbandit_env.agent_registry import make_agent

            policy = make_agent(cell.agent_id, **cell.agent_kwargs)
            preview = make_vec(cell.env_id, num_runs=1, **{**clean, "horizon": cell.horizon})
            config = replace(preview.config, adversary=AdversaryConfig.of(adversary))
            memo[("preview", *key, f)] = (policy.channel_spec(config), preview.config.topology)
        return memo[("preview", *key, f)]


FAMILY_BASELINES = {"linear": "linucb"}
DEFAULT_BASELINE = "ucb1"


def env_family(env_id: str, env_kwargs: dict[str, Any]) -> str | None:
    """The family of an environment configuration (None if it cannot be told)."""
    try:
        kwargs = {**spec(env_id).kwargs, **env_kwargs}
        if "family" in kwargs:
            return str(kwargs["family"])
        return str(make_vec(env_id, num_runs=1, **env_kwargs).config.family)
    except Exception:  # an unregistered id or kwargs this installation cannot build
        return None


def cell_agent_steps(cell: Cell) -> int:
    """Agent-steps of a cell: horizon x runs x agents (the agents from the cell's or the
    environment's kwargs, else from the built configuration)."""
    kwargs = {**spec(cell.env_id).kwargs, **cell.env_kwargs}
    agents = kwargs.get("num_agents")
    if agents is None:
        try:
            agents = make_vec(cell.env_id, num_runs=1, **cell.env_kwargs).config.num_agents
        except Exception:  # kwargs this installation cannot build: count one agent
            agents = 1
    return int(cell.horizon) * int(cell.runs) * int(agents)


AGENT_STEPS_PER_SECOND = {
    "multi-armed": 0.36e6,
    "linear": 0.14e6,
    "per-agent": 0.073e6,
    "library": 0.0085e6,
}
"""Serial agent-steps per second per family: the rate of a learner without a measured cost in
:data:`LEARNER_COST_US` (a learner registered later, a per-agent learner at the ``per-agent``
rate, a library adapter at the ``library`` rate, as ``python benchmarks/bench_per_agent.py``
printed them, docs/writing-agents.md)."""

LEARNER_COST_US: dict[str, float] = {
    "byzres_ucb": 4.328,
    "cdp_mab": 1.699,
    "centralized_linucb": 5.586,
    "centralized_ucb1": 1.51,
    "coop_ucb2": 4.458,
    "ddp_mab": 1.689,
    "dducb": 2.984,
    "dislinucb": 7.48,
    "dp_dec_ucb": 6.179,
    "dp_mw_ucb": 5.353,
    "epsilon_greedy": 1.999,
    "epsilon_greedy_shared": 2.812,
    "fed1_ucb": 2.43,
    "fed2_ucb": 2.473,
    "fed_lin_ucb": 9.096,
    "fed_lin_ucb_decentralized": 9.722,
    "fed_mom_ucb": 2.752,
    "flooding": 2.875,
    "gosine": 2.659,
    "gossip_fed_ucb": 5.838,
    "gossip_ucb": 3.892,
    "hdp_mab": 1.669,
    "kl_ucb": 8.432,
    "kl_ucb_shared": 9.218,
    "ldp_ucb": 5.25,
    "linucb": 5.463,
    "robust_gosine": 2.668,
    "thompson_beta": 4.394,
    "thompson_beta_shared": 5.178,
    "thompson_gaussian": 1.588,
    "thompson_gaussian_shared": 2.455,
    "ucb1": 1.966,
    "ucb1_shared": 2.786,
    "uniform": 1.607,
    # the learners that need an event clock, on the async suite's linear cells (N = 10, K = 10,
    # d = 5, 5 runs, T = 1000 events, the clock's cost included), timed once the same way
    "async_lin_ucb": 10.3,
    "fed_lin_ucb_async": 10.2,
    "sync_lin_ucb": 9.8,
}
"""Serial microseconds per agent-step of each shipped learner on a clean cell, as ``python
benchmarks/bench_suite_estimates.py`` measured them on the shared 2-core machine (its record,
``benchmarks/results/bench_suite_estimates.json``, keeps them): the cost of the learner's own
work, the engine's step and its checks, over horizon x runs x agents."""
CLOCK_FACTOR = 1.4
"""A cell under an event clock costs this times its learner's lock-step cost per agent-step (one
client pulls per step, but every agent's arrays move; ``benchmarks/bench_time_options.py`` prints
the clocks' cost per engine step against lock-step); not applied to the learners timed under a
clock above."""
CLOCKED = ("async_lin_ucb", "fed_lin_ucb_async", "sync_lin_ucb")
ADVERSARY_FACTOR = 1.58
"""A cell with an adversary costs this times its learner's clean cost per agent-step (the
median ratio :data:`LEARNER_COST_US` under attack / clean in the same record)."""
CELL_OVERHEAD_S = 0.006
"""Seconds per cell beyond its agent-steps (the environment built, the rows written)."""
CHECK_S_PER_CANDIDATE = 0.0005
"""Seconds per candidate cell to decide whether it runs (:meth:`Suite.split`: the learner
built, the environment built and reset)."""


def _rate_kind(cell: Cell) -> str:
    """Which :data:`AGENT_STEPS_PER_SECOND` rate a cell runs at."""
    from fedbandit_env.agent_registry import agent_class
    from fedbandit_env.per_agent import PerAgentLearner
    from fedbandit_env.policy import TeamPolicy

    if cell.agent_id.partition(":")[0] in ("mabwiser", "smpybandits"):
        return "library"
    try:
        cls = agent_class(cell.agent_id)
    except Exception:  # not resolvable here: the family's rate
        cls = None
    if isinstance(cls, type) and issubclass(cls, PerAgentLearner):
        return "per-agent"
    if cls is not None and not isinstance(cls, type) and not isinstance(cls, TeamPolicy):
        return "per-agent"  # a policy callable
    linear = env_family(cell.env_id, cell.env_kwargs) == "linear"
    return "linear" if linear else "multi-armed"


def cell_seconds(cell: Cell) -> float:
    """The serial seconds a cell is estimated to take: its agent-steps at its learner's
    measured cost (:data:`LEARNER_COST_US`; a family's rate for a learner without one), times
    :data:`ADVERSARY_FACTOR` under an adversary and :data:`CLOCK_FACTOR` under an event clock,
    plus :data:`CELL_OVERHEAD_S`."""
    steps = cell_agent_steps(cell)
    if cell.agent_id in LEARNER_COST_US:
        seconds = steps * LEARNER_COST_US[cell.agent_id] * 1e-6
    else:
        seconds = steps / AGENT_STEPS_PER_SECOND[_rate_kind(cell)]
    if cell.env_kwargs.get("adversary") is not None:
        seconds *= ADVERSARY_FACTOR
    if cell.env_kwargs.get("clock") not in (None, "sync") and cell.agent_id not in CLOCKED:
        seconds *= CLOCK_FACTOR
    return seconds + CELL_OVERHEAD_S


def estimated_seconds(cells: list[Cell], candidates: int = 0) -> float:
    """Serial wall-time estimate of a suite: ``cells`` (the ones that run, :func:`cell_seconds`
    each) and ``candidates`` checked first (:data:`CHECK_S_PER_CANDIDATE` each)."""
    return sum(cell_seconds(c) for c in cells) + candidates * CHECK_S_PER_CANDIDATE


BACKEND_GAP = "not on this backend: "
"""The prefix of a skip reason that is the backend's, not the learner's (:func:`backend_gap`):
the cell runs on numpy."""


def backend_gap(cell: Cell, missing: list[str]) -> str | None:
    """Why the JAX backend cannot run ``cell`` where numpy can, or None: a privacy wrapper
    (numpy-only), or a learner registered on numpy that has no JAX port. A numpy-only
    environment is found when the cell is built (:func:`mark_backend_gap`)."""
    if cell.privacy:
        return BACKEND_GAP + "a privacy wrapper (numpy-only, docs/privacy.md)"
    if cell.agent_id in missing and learner_known(cell.agent_id, NUMPY):
        return BACKEND_GAP + f"no {cell.backend} port of {cell.agent_id} (it runs on numpy)"
    return None


def mark_backend_gap(reason: str | None) -> str | None:
    """A skip reason of a JAX cell, prefixed with :data:`BACKEND_GAP` when the JAX backend's
    ``make`` refused the environment (a data-set id, an option it cannot honour)."""
    if reason is not None and "not on the JAX backend" in reason:
        return BACKEND_GAP + reason
    return reason


def default_baseline(env_id: str, env_kwargs: dict[str, Any]) -> str:
    """The learner a table is normalized to by default: ``linucb`` on the linear family
    (a multi-armed learner is no reference there), ``ucb1`` otherwise."""
    return FAMILY_BASELINES.get(env_family(env_id, env_kwargs) or "", DEFAULT_BASELINE)


@dataclass(frozen=True)
class Suite:
    """A named set of cells: explicit ``cells`` plus ``sweeps`` over every registered learner.

    ``baseline`` is the agent id regrets are normalized to; None (the default) picks it per
    environment with :func:`default_baseline`.
    """

    name: str
    cells: tuple[Cell, ...] = ()
    baseline: str | None = None
    description: str = ""
    sweeps: tuple[LearnerSweep | AttackSweep, ...] = ()
    left_out: tuple[tuple[str, Cell, str], ...] = ()
    """(backend, numpy cell, reason) of the cells :meth:`with_backend` could not move: a privacy
    wrapper is numpy-only, so such a cell is not even built on JAX; they are skipped with the
    reason like the cells :meth:`split` refuses."""

    def baseline_for(self, env_id: str, env_kwargs: dict[str, Any]) -> str:
        return self.baseline or default_baseline(env_id, env_kwargs)

    def with_backend(self, backend: str) -> Suite:
        """The same suite on ``backend``: every explicit cell and sweep moved there (same
        seeds; the cells' hashes change with the backend, so their rows are their own). A cell
        the backend cannot run (no port of its learner, a numpy-only environment or privacy
        wrapper) stays in the suite and is skipped with its reason (:meth:`split`)."""
        check_backend(backend)
        moved = [c for c in self.cells if backend == NUMPY or not c.privacy]
        left_out = tuple((backend, c, backend_gap(c, [])) for c in self.cells
                         if c not in moved)  # fmt: skip
        cells = tuple(replace(c, backend=backend) for c in moved)
        sweeps = tuple(replace(sw, backend=backend) for sw in self.sweeps)
        return Suite(self.name, cells, self.baseline, self.description, sweeps, left_out)

    def candidates(self) -> list[Cell]:
        """The explicit cells and the sweeps expanded over the registry as it is now."""
        return [cell for cell, _ in self._candidates()]

    def _candidates(self) -> list[tuple[Cell, AttackSweep | None]]:
        """Each candidate cell with the attack sweep that checks it first, if any
        (:meth:`AttackSweep.refusal`)."""
        out: list[tuple[Cell, AttackSweep | None]] = [(cell, None) for cell in self.cells]
        for sweep in self.sweeps:
            check = sweep if isinstance(sweep, AttackSweep) else None
            out.extend((cell, check) for cell in sweep.cells())
        return out

    def available(
        self, note: Callable[[str], None] = print, agent_id: str | None = None
    ) -> list[Cell]:
        """The candidate cells whose env and learner are registered here and whose learner
        accepts the environment (:func:`incompatibility`); only ``agent_id``'s when given.
        Skipped cells are noted with the reason, one line per environment and reason
        (``skipping on ENV: a, b: family: ...``)."""
        cells, skipped = self.split(agent_id)
        self.note_skipped(skipped, note)
        return cells

    def note_skipped(self, skipped: dict[tuple[str, str], list[str]],
                     note: Callable[[str], None]) -> None:  # fmt: skip
        """One note per environment and reason of :meth:`split`'s skipped cells."""
        for (env_id, reason), names in skipped.items():
            note(f"suite {self.name}: skipping on {env_id}: {', '.join(names)}: {reason}")

    def split(
        self, agent_id: str | None = None
    ) -> tuple[list[Cell], dict[tuple[str, str], list[str]]]:
        """The available cells, and the skipped cells' names by (env id, reason); only
        ``agent_id``'s cells when given."""
        envs = set(list_envs())
        memo: dict[Any, Any] = {}  # shared by an attack sweep's cells (AttackSweep.refusal)
        out = []
        skipped: dict[tuple[str, str], list[str]] = {}
        for _backend, cell, reason in self.left_out:
            if agent_id is None or cell.agent_id == agent_id:
                skipped.setdefault((cell.env_id, reason), []).append(cell.name)
        for cell, check in self._candidates():
            if agent_id is not None and cell.agent_id != agent_id:
                continue
            missing = [cell.env_id] if cell.env_id not in envs else []
            missing += [cell.agent_id] if not learner_known(cell.agent_id, cell.backend) else []
            if cell.backend != NUMPY and (gap := backend_gap(cell, missing)) is not None:
                reason = gap
            elif missing:
                reason = f"{missing} not registered in this installation"
                if cell.backend != NUMPY:
                    reason += f" (on the {cell.backend} backend)"
            elif check is not None:
                reason = check.refusal(cell, memo)
            else:
                reason = incompatibility(
                    cell.env_id,
                    cell.agent_id,
                    {**cell.env_kwargs, "horizon": cell.horizon},
                    cell.agent_kwargs,
                    cell.backend,
                )
                reason = mark_backend_gap(reason) if cell.backend != NUMPY else reason
            if reason is None:
                out.append(cell)
                continue
            reason = reason.removeprefix(f"{cell.agent_id}: ")
            names = skipped.setdefault((cell.env_id, reason), [])
            if cell.name not in names:  # an attack sweep refuses one learner many times
                names.append(cell.name)
        return out, skipped

    def backend_summary(self, cells: list[Cell], skipped: dict[tuple[str, str], list[str]]
                        ) -> str | None:  # fmt: skip
        """For a suite on a backend other than numpy: one line that names every cell the
        backend cannot run (:func:`backend_gap`: no port, a numpy-only environment or wrapper)
        and how many it runs; None on numpy or when it runs them all."""
        backends = {c.backend for c, _ in self._candidates()} - {NUMPY}
        backends |= {backend for backend, _cell, _reason in self.left_out}
        if not backends:
            return None
        gaps = {key: names for key, names in skipped.items() if key[1].startswith(BACKEND_GAP)}
        if not gaps:
            return None
        backend = ", ".join(sorted(backends))
        count = sum(len(names) for names in gaps.values())
        parts = "; ".join(f"{', '.join(names)} on {env}: {reason.removeprefix(BACKEND_GAP)}"
                          for (env, reason), names in sorted(gaps.items()))  # fmt: skip
        return (f"suite {self.name} on the {backend} backend: runs {len(cells)} cells; "
                f"{count} cannot run there ({parts})")  # fmt: skip

    def skip_summary(
        self, skipped: dict[tuple[str, str], list[str]], cells: list[Cell] | None = None
    ) -> str | None:
        """One line for the skipped cells of :meth:`split`: the learners skipped on each
        environment, without the reasons (``fedbandit suite --verbose`` prints those). With
        ``cells`` (the cells that run), a learner that runs some cells of an environment is
        not called skipped there: the line counts its skipped cells instead (an attack sweep's
        attacks that do not fit the learner's channels)."""
        if not skipped:
            return None
        ran = {(c.env_id, c.name) for c in cells or ()}
        whole: dict[str, set[str]] = {}
        partial: dict[str, set[str]] = {}
        for (env_id, _reason), names in skipped.items():
            for name in names:
                side = partial if (env_id, name) in ran else whole
                side.setdefault(env_id, set()).add(name)
        parts = [f"on {env}: {', '.join(sorted(n))}" for env, n in whole.items()]
        if not any(isinstance(sw, AttackSweep) for sw in self.sweeps):
            count = sum(len(names) for names in skipped.values())
            return (f"suite {self.name}: skipping {'; '.join(parts)} ({count} cells whose "
                    "learner does not accept the environment; --verbose says why)")  # fmt: skip
        some = sorted({n for names in partial.values() for n in names})
        if some:
            parts.append(f"the attacks that do not fit {len(some)} learners which run otherwise "
                         f"({', '.join(some)})")  # fmt: skip
        return (
            f"suite {self.name}: skipping {'; '.join(parts)} ({len(skipped)} reasons: a learner "
            "that refuses the setting, or an attack that does not fit its channels; --verbose "
            "says which)"
        )


def _grid(env_id, env_kwargs, agents, horizon, runs) -> tuple[Cell, ...]:
    cells = []
    for agent in agents:
        agent_id, kwargs, label = agent if isinstance(agent, tuple) else (agent, {}, "")
        cells.append(
            Cell(
                env_id,
                agent_id,
                horizon,
                runs,
                dict(env_kwargs),
                dict(kwargs),
                label=label or agent_id,
            )
        )
    return tuple(cells)


def _every_learner(env_id, env_kwargs, horizon, runs, explicit=()) -> tuple[tuple, tuple]:
    """Explicit cells and a sweep over every other registered learner, on one environment."""
    cells = _grid(env_id, env_kwargs, explicit, horizon, runs)
    exclude = tuple(sorted({c.agent_id for c in cells}))
    return cells, (LearnerSweep(env_id, horizon, runs, dict(env_kwargs), exclude),)


HETERO_SMALL = {"num_agents": 5, "num_arms": 5, "topology": "ring", "instance": "gossip"}
HOMO_SMALL = {"num_agents": 5, "num_arms": 5, "topology": "ring"}

LINEAR_SMALL = {"num_agents": 5, "num_arms": 5, "dim": 5}


def _open_suite(name: str, blocks: tuple, description: str) -> Suite:
    """A suite of every registered learner on each block ``(env id, env kwargs, horizon, runs,
    explicit cells)``; a learner with explicit cells on a block is not swept there."""
    cells: tuple[Cell, ...] = ()
    sweeps: tuple[LearnerSweep, ...] = ()
    for env_id, env_kwargs, horizon, runs, explicit in blocks:
        more_cells, more_sweeps = _every_learner(env_id, env_kwargs, horizon, runs, explicit)
        cells += more_cells
        sweeps += more_sweeps
    return Suite(name, cells, None, description, sweeps)


FED_MOM_CELL = ("fed_mom_ucb", {"clients": "environment"}, "fed_mom_ucb clients=N")
"""Fed-MoM-UCB derives its number of clients from T and its Byzantine fraction (tens to hundreds,
docs/fed-mom-ucb.md) and refuses a smaller federation; the open suites run it on their own N
agents instead."""

QUICK_HOMOGENEOUS = {**HOMO_SMALL, "instance_seed": None}
"""The quick suite's homogeneous block draws a new instance per seed: on one fixed instance with
wide gaps the elimination agents (cdp_mab, ddp_mab, hdp_mab) commit after the same rounds in every
run and all seeds give the same regret (docs/bench.md, "The quick suite")."""

QUICK_LINEAR_EXPLICIT = (
    ("fed_lin_ucb", {}, ""),
    ("fed_lin_ucb", {"private": False}, "fed_lin_ucb non-private"),
    ("fed_lin_ucb_decentralized", {}, ""),
    ("fed_lin_ucb_decentralized", {"private": False}, "fed_lin_ucb_decentralized non-private"),
)
"""The FedUCB agents at their defaults (epsilon 1: the privacy noise dominates at T = 2000) and
without noise, which shows the algorithms' curves bending within the quick suite's horizon."""

LINEAR_EXPLICIT = (
    ("fed_lin_ucb", {"epsilon": 1.0}, ""),
    ("fed_lin_ucb", {"private": False}, "fed_lin_ucb non-private"),
    ("fed_lin_ucb_decentralized", {"epsilon": 1.0, "gamma": 1}, ""),
)

FIELD_MAB = ("dducb", "coop_ucb2", "fed1_ucb", "fed2_ucb", "gosine", "ldp_ucb")
"""The multi-armed field agents (docs/field.md); each runs on the field
environments its ``reset`` accepts, the others are skipped with its reason."""
FIELD_BASELINES = ("ucb1", "ucb1_shared", "gossip_ucb", "centralized_ucb1")
FIELD_LINEAR = (
    "dislinucb",
    ("fed_lin_ucb", {"epsilon": 1.0}, "fed_lin_ucb eps=1"),
    ("fed_lin_ucb", {"private": False}, "fed_lin_ucb non-private"),
    "linucb",
    "centralized_linucb",
)


def _field_suite() -> Suite:
    """The field agents next to the baselines of their papers: heterogeneous and homogeneous
    rings (N = 10, M = 10) and the linear family (N = 10, d = 10), T = 10^4, 10 seeds. Ids that
    are not registered in this installation are skipped by :meth:`Suite.available`."""
    ring = {**HETERO_SMALL, "num_agents": 10, "num_arms": 10}
    homo = {**HOMO_SMALL, "num_agents": 10, "num_arms": 10}
    cells = (
        _grid("FedBandit/Heterogeneous-v0", ring, FIELD_MAB + FIELD_BASELINES, 10_000, 10)
        + _grid("FedBandit/Homogeneous-v0", homo, FIELD_MAB + FIELD_BASELINES, 10_000, 10)
        + _grid("FedBandit/LinearContextual-v0", {"num_agents": 10}, FIELD_LINEAR, 10_000, 10)
    )
    return Suite(
        "field",
        cells,
        None,
        "The field's standard baselines (DDUCB, coop-UCB2, Fed1/Fed2-UCB, GosInE, LDP-UCB on "
        "heterogeneous and homogeneous rings of 10 agents with 10 arms; DisLinUCB with FedUCB "
        "private and not on the linear family, N = 10, d = 10) next to ucb1, ucb1_shared, "
        "gossip_ucb and the centralized oracles; 10 seeds, T = 10^4.",
    )


SUITES: dict[str, Suite] = {
    "quick": _open_suite(
        "quick",
        (
            (
                "FedBandit/Heterogeneous-v0",
                HETERO_SMALL,
                2000,
                10,
                (("gossip_fed_ucb", {"epsilon": 5.0}, "gossip_fed_ucb eps=5"), FED_MOM_CELL),
            ),
            (
                "FedBandit/Homogeneous-v0",
                QUICK_HOMOGENEOUS,
                2000,
                10,
                (("gossip_fed_ucb", {"epsilon": 5.0}, "gossip_fed_ucb eps=5"), FED_MOM_CELL),
            ),
            ("FedBandit/LinearContextual-v0", LINEAR_SMALL, 2000, 10, QUICK_LINEAR_EXPLICIT),
        ),
        "Every registered learner that accepts the environment (default kwargs; gossip_fed_ucb "
        "at epsilon 5; the FedUCB agents also without noise; fed_mom_ucb with the environment's "
        "agents as its clients) on three small environments: "
        "heterogeneous and homogeneous rings of 5 agents with 5 arms (the homogeneous one draws "
        "a new instance per seed), and a linear contextual one (5 agents, K = 5, d = 5); "
        "10 seeds, T = 2000.",
    ),
    "standard": _open_suite(
        "standard",
        (
            (
                "FedBandit/Heterogeneous-v0",
                {**HETERO_SMALL, "num_agents": 10, "num_arms": 10},
                10_000,
                20,
                (("gossip_fed_ucb", {"epsilon": 2.0}, "gossip_fed_ucb eps=2"), FED_MOM_CELL),
            ),
            (
                "FedBandit/Homogeneous-v0",
                {**HOMO_SMALL, "num_agents": 10, "num_arms": 10},
                10_000,
                20,
                (("gossip_fed_ucb", {"epsilon": 2.0}, "gossip_fed_ucb eps=2"), FED_MOM_CELL),
            ),
            ("FedBandit/LinearContextual-v0", {"num_agents": 10}, 10_000, 20, LINEAR_EXPLICIT),
        ),
        "All three families (heterogeneous and homogeneous rings of 10 agents with 10 arms, "
        "linear contextual with 10 agents), every registered learner that accepts the "
        "environment (every reference agent and baseline, default kwargs; gossip_fed_ucb at "
        "epsilon 2; fed_lin_ucb private and not; fed_mom_ucb with the environment's agents as its "
        "clients), 20 seeds, T = 10^4.",
    ),
    "gossip": Suite(
        "gossip",
        _grid(
            "FedBandit/GossipTriangle-v0",
            {},
            ("gossip_ucb", "ucb1", "centralized_ucb1")
            + tuple(
                ("gossip_fed_ucb", {"epsilon": e}, f"gossip_fed_ucb eps={e:g}")
                for e in (1.0, 2.0, 5.0)
            ),
            100_005,
            20,
        ),
        description="Gossip paper setting (a), T = 10^5 rounds.",
    ),
    "dp_recsys": Suite(
        "dp_recsys",
        _grid(
            "FedBandit/Homogeneous-v0",
            {
                "num_agents": 20,
                "num_arms": 10,
                "topology": "ring",
                "reward": {"kind": "gaussian", "sigma": 0.1},
            },
            ("ucb1", "ucb1_shared")
            + tuple(
                ("dp_dec_ucb", {"epsilon": e}, f"dp_dec_ucb eps={e:g}") for e in (1.5, 2.0, 5.0)
            )
            + tuple(("dp_mw_ucb", {"epsilon": e}, f"dp_mw_ucb eps={e:g}") for e in (1.5, 2.0, 5.0)),
            10_000,
            10,
        ),
        description="DP recommender paper: M=20, K=10, cycle C20.",
    ),
    "linear": Suite(
        "linear",
        _grid(
            "FedBandit/LinearContextual-v0",
            {"num_agents": 20, "dim": 10, "num_arms": 10},
            ("linucb", "centralized_linucb")
            + tuple(
                (
                    "fed_lin_ucb",
                    {"epsilon": e, "beta_scale": 0.01},
                    f"fed_lin_ucb eps={e:g} beta_scale=0.01",
                )
                for e in (0.1, 1.0, 10.0)
            )
            + (
                (
                    "fed_lin_ucb",
                    {"private": False, "beta_scale": 0.01},
                    "fed_lin_ucb non-private beta_scale=0.01",
                ),
            ),
            5000,
            10,
        ),
        baseline="linucb",
        description="DP federated linear bandits: M=20, d=10, K=10, T=5000, beta_scale=0.01.",
    ),
    "commeff": Suite(
        "commeff",
        _grid(
            "FedBandit/Homogeneous-v0",
            {"num_agents": 50, "num_arms": 100, "topology": "star", "c1": 25.0},
            ("ucb1",)
            + tuple(("cdp_mab", {"epsilon": e}, f"cdp_mab eps={e:g}") for e in (0.1, 0.5, 1.0))
            + (("ddp_mab", {"epsilon": 1.0}, "ddp_mab eps=1 (star)"),),
            10_000,
            5,
        ),
        description="Commeff paper: M=50, K=100, T=10^4 (Fig. 4 and the star of Fig. 10).",
    ),
}


SUITES["field"] = _field_suite()

STRAGGLERS = {"kind": "poisson", "stragglers": {"frac": 0.2, "slowdown": 0.1}}
CHURN = {"kind": "markov", "p_leave": 0.01, "p_join": 0.1}
"""The async suite's churn: a client leaves with probability 0.01 before a pull and returns with
0.1 (a share 10/11 present in the long run)."""
ASYNC_LINEAR = {"num_agents": 10, "num_arms": 10, "dim": 5,
                "reward": {"kind": "gaussian", "sigma": 0.1}}  # fmt: skip
SUITES["async"] = _open_suite(
    "async",
    tuple(
        (env_id, {**kwargs, **option}, 1000, 5, ())
        for env_id, kwargs, options in (
            ("FedBandit/Homogeneous-v0", QUICK_HOMOGENEOUS,
             ({"clock": "one_random"}, {"clock": STRAGGLERS}, {"reward_delay": 20},
              {"latency": 20}, {"churn": CHURN},
              {"drift": {"kind": "piecewise", "change_points": [400, 700]}})),
            ("FedBandit/LinearContextual-v0", ASYNC_LINEAR,
             ({"clock": "one_random"}, {"clock": STRAGGLERS}, {"churn": CHURN})),
        )
        for option in options
    ),  # fmt: skip
    "Every registered learner that accepts the event-time option (docs/time.md), one option "
    "per block: a homogeneous ring of 5 agents with 5 arms (a new instance per seed) under one "
    "uniformly random client per event, Poisson clocks with a fifth of the clients ten times "
    "slower, a reward delay of 20 pulls, a latency of 20 engine steps, Markov churn (leave 0.01, "
    "return 0.1 per pull) and two change points of the means; a linear contextual federation "
    "(10 clients, K = 10, d = 5, noise sd 0.1) under the two event clocks and under the churn. "
    "5 seeds, T = 1000 (events under a clock).",
)

ROBUST_TOPOLOGIES = (
    ("complete", {}),
    ("ring", {}),
    ("random_regular", {"topology_kwargs": {"degree": 4}}),
)
"""The graphs of the robust suite: complete, ring and a random 4-regular graph."""
ROBUST_SCALES = {
    "robust": {"num_agents": 8, "num_arms": 4, "horizon": 1000, "runs": 5},
    "robust_full": {"num_agents": 20, "num_arms": 4, "horizon": 10_000, "runs": 20},
}
"""The robust suite's size: the default (a few minutes on a laptop) and ``robust_full``. Four
arms, so that every built-in attack of the means layout fits (``zhu_intended``'s default values
are four means)."""


ROBUST_VARIANTS: tuple[tuple[str, dict[str, Any], str], ...] = (
    ("byzres_ucb", {"fusion": "mean"}, "byzres_ucb fusion=mean"),
    ("fed_mom_ucb", {"clients": "environment"}, "fed_mom_ucb clients=N"),
    (
        "fed_mom_ucb",
        {"clients": "environment", "aggregate": "mean"},
        "fed_mom_ucb clients=N aggregate=mean",
    ),
)
"""The robust suite's learners beside the registered defaults, so that every layout attack
meets a defence and a plain learner of its layout (docs/adversary.md, "The robust suite"):
[means, counts] ByzRes-UCB and its plain mean; one mean per arm Fed-MoM-UCB on the suite's N
clients (its default derives tens of clients from T and refuses N = 8) and its plain mean;
arm ids GosInE (plain) and robust GosInE, both registered."""
ROBUST_EXCLUDE = ("fed_mom_ucb",)
"""Registered learners the suite runs only as :data:`ROBUST_VARIANTS`."""


def robust_suite(name: str = "robust") -> Suite:
    """Every registered learner on the homogeneous family, clean and under every attack that
    fits its channels at f = 1 and 2 Byzantine agents (:class:`AttackSweep`), on complete, ring
    and random 4-regular graphs, a new instance per seed; ``name`` picks the scale
    (:data:`ROBUST_SCALES`)."""
    scale = ROBUST_SCALES[name]
    base = {"num_agents": scale["num_agents"], "num_arms": scale["num_arms"],
            "instance_seed": None}  # fmt: skip
    sweeps = tuple(
        AttackSweep(
            "FedBandit/Homogeneous-v0",
            scale["horizon"],
            scale["runs"],
            {**base, "topology": topology, **extra},
            exclude=ROBUST_EXCLUDE,
            variants=ROBUST_VARIANTS,
        )  # fmt: skip
        for topology, extra in ROBUST_TOPOLOGIES
    )
    return Suite(
        name,
        (),
        None,
        f"Byzantine robustness: every registered learner on the homogeneous family (N = "
        f"{scale['num_agents']}, K = {scale['num_arms']}, a new instance per seed), with the "
        f"plain mean of each robust learner and fed_mom_ucb on the N clients, clean and under "
        f"every registered attack that fits its channels with f = 1 and 2 Byzantine agents "
        f"(uniform placement; robust learners take f from the environment), on complete, ring "
        f"and random 4-regular graphs; {scale['runs']} seeds, T = {scale['horizon']}.",
        sweeps,
    )


SUITES["robust"] = robust_suite("robust")
SUITES["robust_full"] = robust_suite("robust_full")


def get_suite(name: str) -> Suite:
    if name not in SUITES:
        close = difflib.get_close_matches(str(name), list(SUITES), n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise UnknownIdError(f"suite {name!r} is not defined; suites: {sorted(SUITES)}.{hint}")
    return SUITES[name]
