"""Validated configuration of a federated multi-armed bandit environment (docs/environments.md)."""

from __future__ import annotations

import dataclasses
import difflib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import networkx as nx
import numpy as np

from fedbandit_env.adversary.roles import AdversaryConfig
from fedbandit_env.churn import Churn, churn_option
from fedbandit_env.clock import Clock, clock_option
from fedbandit_env.delay import RandomDelay, delay_option
from fedbandit_env.drift import Drift, drift_option
from fedbandit_env.errors import ConfigError
from fedbandit_env.graphs import GRAPH_KINDS, GraphError, Topology
from fedbandit_env.instances import GENERATORS, Instance, fixed_instance, gaussian_clients
from fedbandit_env.latency import LinkLatency, latency_option
from fedbandit_env.linear import LinearSpec, arms_option
from fedbandit_env.network import CHANNEL_KINDS
from fedbandit_env.rewards import RewardModel, make_reward_model
from fedbandit_env.validation import (
    MAX_AGENTS,
    ConfigTypeError,
    check_horizon,
    check_int,
    check_memory,
    check_real,
    is_integral,
    is_real,
)

FAMILIES = ("heterogeneous", "homogeneous", "linear")
LINEAR_KWARGS = ("dim", "theta", "shared_decision_sets", "dataset", "arms")
DEFAULT_GENERATOR = {"heterogeneous": "gossip", "homogeneous": "uniform"}
DEFAULT_NUM_AGENTS, DEFAULT_NUM_ARMS = 3, 5
GLOBAL_MEANS = ("average", "generating")
"""What regret is judged against: the average of the agents' local means, or (with
``client_spread``) the means the local ones were drawn around."""
CLIENT_INSTANCE = "gaussian_clients"
"""The ``instance`` label of an environment made with ``client_spread``."""


def _positive_int(name: str, value: Any, minimum: int = 1, maximum: int | None = None) -> int:
    return check_int(name, value, minimum=minimum, maximum=maximum)


def _cost(name: str, value: Any) -> float:
    return check_real(name, value, low=0.0)


def _choice(name: str, value: Any, choices: Any) -> Any:
    """``value`` if it is a str among ``choices``, else a ConfigError listing them."""
    if not isinstance(value, str):
        raise ConfigTypeError(
            f"{name}: expected one of {tuple(choices)}, got {type(value).__name__} {value!r}"
        )
    if value not in choices:
        raise ConfigError(f"{name}: expected one of {tuple(choices)}, got {value!r}")
    return value


# Bytes per edge of a networkx graph (adjacency dicts both ways), for the size estimate.
_NX_EDGE_BYTES = 400
_NX_NODE_BYTES = 600  # a networkx node with its adjacency dicts and the neighbour tables


def _estimated_edges(topology: Any, n: int, kwargs: Any) -> float:
    kwargs = kwargs if isinstance(kwargs, Mapping) else {}
    if isinstance(topology, nx.Graph):
        return float(topology.number_of_edges())
    if not isinstance(topology, str):
        return 2.0 * n  # refused by make_topology
    if topology == "complete":
        return n * (n - 1) / 2
    if topology == "erdos_renyi" and is_real(kwargs.get("p")):
        return max(0.0, min(1.0, float(kwargs["p"]))) * n * (n - 1) / 2 + n
    if topology == "random_regular" and is_integral(kwargs.get("degree")):
        return min(float(kwargs["degree"]), n) * n / 2
    return 2.0 * n


def check_sizes(
    num_agents: int, num_arms: int, num_runs: int = 1, channels: Mapping[str, Any] | None = None,
    topology: Any = None, topology_kwargs: Mapping[str, Any] | None = None, dim: int = 0,
) -> None:
    """Refuse sizes whose arrays would not fit (docs/limits.md): the topology's graph (its facts
    are lazy, so nothing N x N is built up front) and the engine's per-run arrays
    (B x N x (M + dims))."""
    n, m, b = num_agents, num_arms, num_runs
    if topology is not None and not isinstance(topology, Topology):
        edges = _estimated_edges(topology, n, topology_kwargs)
        check_memory(
            "num_agents",
            _NX_NODE_BYTES * n + _NX_EDGE_BYTES * edges,
            f"num_agents={n}: a graph of {n} nodes and {edges:.3g} edges",
        )
    degree = 1
    if isinstance(topology, Topology):
        degree = int(topology.neighbors.shape[1])
    dims = 0  # payload floats one agent may receive per step, over all channels
    for o in (channels or {}).values():
        d = int(o.get("dim", m)) if is_integral(o.get("dim", m)) else 0
        slots = {"neighbors": degree, "flood": n}.get(o.get("kind"), 1)
        dims += d * slots
    per_run = 8.0 * n * (8 * m + 4 * dims + (m * (dim + 2) if dim else 0))
    check_memory(
        "num_runs/num_agents/num_arms",
        b * per_run,
        f"about 8 bytes x B={b} x N={n} x (8 M + 4 x received payload floats"
        + (" + M (d + 2)" if dim else "")
        + f") with M={m}, received payload floats={dims}" + (f", d={dim}" if dim else ""),
    )


def _flag(name: str, value: Any) -> bool:
    if not isinstance(value, bool | np.bool_):
        raise ConfigTypeError(f"{name}: expected True or False, got {value!r}")
    return bool(value)


def _sizes_from_means(means: Any, num_agents: Any, num_arms: Any) -> tuple[Any, Any]:
    """(num_agents, num_arms) implied by a fixed instance; explicit values must agree."""
    try:
        shape = np.shape(np.asarray(means, dtype=np.float64))
    except (TypeError, ValueError, OverflowError):
        raise ConfigError(
            "means: expected a vector of M means or an N x M matrix of numbers"
        ) from None
    if len(shape) not in (1, 2):
        raise ConfigError(f"means: expected a vector (M,) or a matrix (N, M), got shape {shape}")
    implied = {"num_arms": shape[-1], "num_agents": shape[0] if len(shape) == 2 else None}
    given = {"num_arms": num_arms, "num_agents": num_agents}
    for name, want in implied.items():
        have = given[name]
        if want is None:
            continue
        if have is None:
            given[name] = want
        elif not is_integral(have) or have != want:
            raise ConfigError(
                f"{name}: means has shape {shape}, so expected {name}={want} (or leave it out), "
                f"got {have!r}"
            )
    return given["num_agents"], given["num_arms"]


def make_topology(topology: Any, num_agents: int, topology_kwargs: Mapping[str, Any]) -> Topology:
    """A :class:`Topology` from a kind name, a networkx graph, ``"hybrid"`` or a Topology."""
    if isinstance(topology, Topology):
        if topology.num_agents != num_agents:
            raise ConfigError(
                f"topology: has {topology.num_agents} agents, expected num_agents={num_agents}"
            )
        return topology
    if not isinstance(topology_kwargs, Mapping):
        raise ConfigTypeError(
            f"topology_kwargs: expected a dict of graph parameters, got {topology_kwargs!r}"
        )
    kwargs = dict(topology_kwargs)
    try:
        if topology == "hybrid":
            sizes = kwargs.pop("sizes", None)
            if (
                not isinstance(sizes, list | tuple | np.ndarray)
                or not all(is_integral(v) for v in np.ravel(sizes))
                or sum(int(v) for v in np.ravel(sizes)) != num_agents
            ):
                raise ConfigError(
                    f"topology_kwargs.sizes: expected component sizes summing to "
                    f"num_agents={num_agents}, got {sizes!r}"
                )
            return Topology.hybrid(sizes, **kwargs)
        if not isinstance(topology, str | nx.Graph):
            raise ConfigError(
                f"topology: expected a kind name, a networkx Graph or a Topology, got {topology!r}"
            )
        if isinstance(topology, str) and topology not in GRAPH_KINDS:
            kinds = [*GRAPH_KINDS, "hybrid"]
            close = difflib.get_close_matches(topology, kinds, n=1)
            hint = f" Did you mean {close[0]!r}?" if close else ""
            raise ConfigError(
                f"topology: unknown kind {topology!r}; expected one of {', '.join(kinds)}, a "
                f"networkx Graph or a Topology.{hint}"
            )
        return Topology.from_graph(topology, num_agents, **kwargs)
    except GraphError as err:
        raise ConfigError(f"topology: {err}") from None
    except TypeError as err:
        raise ConfigError(f"topology_kwargs: {err}") from None


ChannelsSpec = Sequence[str] | Mapping[str, Mapping[str, Any] | str] | None


def normalize_channels(spec: ChannelsSpec, default_dim: int) -> dict[str, dict[str, Any]]:
    """Channel specs as ``{name: {"kind": ..., "dim": ..., **options}}``.

    Accepts a list of kinds (each channel named after its kind, payload dim ``default_dim``) or a
    mapping from channel name to a kind or a dict of options (``kind`` defaults to the name).
    """
    if spec is None:
        return {}
    if isinstance(spec, str):
        raise ConfigError(
            f"channels: expected a list of kinds or a mapping, got the string {spec!r}"
        )
    if not isinstance(spec, Mapping | list | tuple):
        raise ConfigTypeError(
            f"channels: expected a list of kinds or a mapping {{name: kind or options}}, "
            f"got {spec!r}"
        )
    if isinstance(spec, Mapping):
        items = list(spec.items())
    else:
        items = [(kind, {"kind": kind}) for kind in spec]
    out: dict[str, dict[str, Any]] = {}
    for name, options in items:
        if not isinstance(name, str):
            raise ConfigError(f"channels: expected channel names (str), got {name!r}")
        if isinstance(options, str):
            options = {"kind": options}
        if not isinstance(options, Mapping):
            raise ConfigError(f"channels.{name}: expected a kind or a dict of options")
        opts = {"kind": name, "dim": default_dim, **options}
        if not isinstance(opts["kind"], str) or opts["kind"] not in CHANNEL_KINDS:
            raise ConfigError(
                f"channels.{name}.kind: expected one of {sorted(CHANNEL_KINDS)}, got {opts['kind']!r}"
            )
        if name in out:
            raise ConfigError(f"channels: the name {name!r} is used twice")
        out[str(name)] = dict(opts)
    return out


@dataclass(frozen=True)
class EnvConfig:
    """Everything that defines an environment; build it with :func:`make_config`."""

    num_agents: int
    num_arms: int
    horizon: int
    family: str
    reward: RewardModel
    topology: Topology
    channels: dict[str, dict[str, Any]]
    c1: float
    c2: float
    instance: str
    instance_seed: int | None
    fixed: Instance | None = None
    linear: LinearSpec | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    max_communication_steps: int = 64
    adversary: AdversaryConfig | None = None
    """Byzantine and crashed agents (docs/adversary.md); None: every agent is honest."""
    client_spread: float | None = None
    """sigma_c of ``instance="gaussian_clients"``: local means ~ N(client_means, sigma_c^2)."""
    client_means: np.ndarray | None = None
    """The generating means (M,) of ``client_spread``."""
    global_means: str = "average"
    """``"average"`` or ``"generating"`` (:data:`GLOBAL_MEANS`)."""
    drift: Drift | None = None
    """Drifting means (:mod:`fedbandit_env.drift`, docs/time.md); None: stationary."""
    clock: Clock | None = None
    """Who pulls at an event (:mod:`fedbandit_env.clock`, docs/time.md); None: lock-step."""
    reward_delay: int | RandomDelay | None = None
    """A reward's delay in pulls, fixed or random (:mod:`fedbandit_env.delay`, docs/time.md);
    None: none."""
    latency: int | LinkLatency | None = None
    """Every message's added delay in engine steps, fixed, per link or random
    (:mod:`fedbandit_env.latency`); None: none."""
    churn: Churn | None = None
    """Clients that leave and join (:mod:`fedbandit_env.churn`, docs/time.md); None: none."""

    def draw_instance(self, rng: np.random.Generator) -> Instance:
        if self.fixed is not None:
            return self.fixed
        if self.client_spread is not None:
            inst = gaussian_clients(
                self.client_means,
                self.num_agents,
                self.client_spread,
                self.global_means == "generating",
                rng,
            )
            self.reward.validate(inst.means)
            return inst
        inst = GENERATORS[self.instance](self.num_agents, self.num_arms, rng)
        self.reward.validate(inst.means)
        return inst

    def shared_instance(self) -> Instance | None:
        """The instance every run uses, or None when each run draws its own."""
        if self.linear is not None:
            return None
        if self.fixed is not None:
            return self.fixed
        if self.instance_seed is None:
            return None
        return self.draw_instance(np.random.default_rng(self.instance_seed))


DEFAULT_HORIZON = 1000


def resolve_max_cycles(horizon: Any, max_cycles: Any, default: Any = None) -> Any:
    """``max_cycles`` is an alias of ``horizon`` (PettingZoo's name for the episode length)."""
    if max_cycles is None:
        return default if horizon is None else horizon
    if horizon is not None and horizon != max_cycles:
        raise ConfigError(
            f"max_cycles: an alias of horizon; got horizon={horizon!r} and "
            f"max_cycles={max_cycles!r}, give one of them (or equal values)"
        )
    return max_cycles


def make_config(
    *,
    num_agents: int | None = None,
    num_arms: int | None = None,
    horizon: int | None = None,
    family: str = "heterogeneous",
    means: Any = None,
    instance: str | None = None,
    instance_seed: int | None = 0,
    reward: Any = "bernoulli",
    topology: Any = "complete",
    topology_kwargs: Mapping[str, Any] | None = None,
    channels: Any = ("neighbors", "gossip"),
    c1: float = 1.0,
    c2: float = 1.0,
    dim: int | None = None,
    theta: str = "sphere",
    shared_decision_sets: bool = False,
    dataset: Any = None,
    arms: Any = "paper",
    max_cycles: int | None = None,
    max_communication_steps: int = 64,
    adversary: Any = None,
    client_spread: float | None = None,
    global_means: str = "average",
    drift: Any = None,
    clock: Any = None,
    reward_delay: Any = None,
    latency: Any = None,
    churn: Any = None,
) -> EnvConfig:
    """Validate the keyword arguments of an environment (multi-armed or linear family).

    ``num_agents`` and ``num_arms`` default to 3 and 5, or to the shape of ``means`` (an N x M
    matrix gives both, a vector gives M); an explicit value that contradicts ``means`` raises.
    ``dim``, ``theta``, ``shared_decision_sets``, ``dataset`` and ``arms`` (the decision sets'
    generator) belong to the linear family (:mod:`fedbandit_env.linear`); there ``num_arms`` is K, the size of each decision set, and
    ``instance_seed`` fixes theta* (None: a new theta* per run seed). ``max_cycles`` is
    PettingZoo's name for ``horizon`` (default 1000); both given with different values raise.
    ``max_communication_steps``: the most communication-only steps a run may take in a row
    (docs/architecture.md, "Communication steps"); one more raises a ``CommunicationError``.
    ``adversary``: None (every agent honest, the default), or a dict or
    :class:`~fedbandit_env.adversary.AdversaryConfig` of Byzantine and crashed agents
    (docs/adversary.md). ``client_spread`` sigma_c >= 0 (heterogeneous family, with ``means``
    a vector mu of M generating means): every run draws its client local means
    ``mu[i, k] ~ N(mu_k, sigma_c^2)`` from its ``instance`` stream (with ``instance_seed=None``;
    an int seed draws one instance for every run), the setting of Demirel, Yildirim & Tekin
    (arXiv 2205.04134). ``global_means``: ``"average"`` (default: regret against the average of
    the local means) or ``"generating"`` (against mu; needs ``client_spread``). ``drift``: None
    (stationary, the default) or a piecewise or smooth drift of the means, with dynamic regret
    (:mod:`fedbandit_env.drift`, docs/time.md). ``clock``: None or ``"sync"`` (lock-step, the
    default) or an event clock, one client pulling per step (:mod:`fedbandit_env.clock`,
    docs/time.md). ``reward_delay``: None or 0 (the default), a fixed delay d in pulls before
    a reward reaches its agent, or a random one (geometric, uniform, Pareto) (:mod:`fedbandit_env.delay`, docs/time.md). ``latency``: None or 0
    (the default) or a fixed delay L in engine steps added to every message
    (:mod:`fedbandit_env.latency`, docs/time.md). ``churn``: None (nobody leaves, the default)
    or a schedule or Markov chain of clients leaving and joining (:mod:`fedbandit_env.churn`,
    docs/time.md)."""
    config = _make_config(
        num_agents=num_agents,
        num_arms=num_arms,
        horizon=horizon,
        family=family,
        means=means,
        instance=instance,
        instance_seed=instance_seed,
        reward=reward,
        topology=topology,
        topology_kwargs=topology_kwargs,
        channels=channels,
        c1=c1,
        c2=c2,
        dim=dim,
        theta=theta,
        shared_decision_sets=shared_decision_sets,
        dataset=dataset,
        max_cycles=max_cycles,
        arms=arms,
    )
    config = _client_spread(config, means, instance, client_spread, global_means)
    limit = _positive_int("max_communication_steps", max_communication_steps)
    adv = AdversaryConfig.of(adversary)
    if adv is not None:
        adv = adv.resolve(config.num_agents, config.horizon)
    moving = _drift(config, drift)
    events = clock_option(clock, num_agents=config.num_agents, horizon=config.horizon)
    if events is not None and adv is not None:
        raise ConfigError("clock: an event clock is not combined with adversary= yet (the roles "
                          "count every agent's pulls at every step); use clock='sync'")  # fmt: skip
    delay = delay_option(reward_delay, horizon=config.horizon)
    if delay is not None and adv is not None:
        raise ConfigError("reward_delay: a delay is not combined with adversary= yet (the "
                          "attacks read the pulls' rewards at once); use reward_delay=None")  # fmt: skip
    lag = latency_option(latency, horizon=config.horizon, num_agents=config.num_agents)
    if lag is not None and adv is not None:
        raise ConfigError("latency: a latency is not combined with adversary= yet (the attacks "
                          "and the robust learners assume the channels' own timing); use "
                          "latency=None")  # fmt: skip
    away = churn_option(churn, num_agents=config.num_agents, horizon=config.horizon)
    if away is not None and adv is not None:
        raise ConfigError("churn: churn is not combined with adversary= yet (the roles count "
                          "every agent's pulls and messages at every step); use churn=None")  # fmt: skip
    if away is not None and events is not None and events.kind == "trace":
        raise ConfigError("churn: expected None with clock kind 'trace' (a replayed event order "
                          "already says who was there), got a churn")  # fmt: skip
    return dataclasses.replace(config, max_communication_steps=limit, adversary=adv, drift=moving,
                               clock=events, reward_delay=delay, latency=lag,
                               churn=away)  # fmt: skip


def _drift(config: EnvConfig, value: Any) -> Drift | None:
    """The validated ``drift`` option of ``config`` (:func:`fedbandit_env.drift.drift_option`)."""
    if value is None:
        return None
    if config.global_means != "average":
        raise ConfigError(
            "drift: regret under drift is against the average of the current local means; "
            f"global_means={config.global_means!r} is not accepted with it"
        )
    bounds = config.reward.bounds if config.linear is None else (-math.inf, math.inf)
    return drift_option(
        value, horizon=config.horizon, num_agents=config.num_agents, num_arms=config.num_arms,
        family=config.family, bounds=bounds, fixed_means=config.fixed is not None,
        dataset=config.linear is not None and config.linear.dataset is not None,
    )  # fmt: skip


def _client_spread(
    config: EnvConfig, means: Any, instance: Any, client_spread: Any, global_means: Any
) -> EnvConfig:
    """``config`` with the ``client_spread`` / ``global_means`` options validated and set."""
    _choice("global_means", global_means, GLOBAL_MEANS)
    if client_spread is None:
        if global_means != "average":
            raise ConfigError(
                "global_means: 'generating' expects client_spread (the local means' spread "
                "around the generating means), got client_spread=None"
            )
        return config
    spread = check_real("client_spread", client_spread, low=0.0)
    if config.family != "heterogeneous":
        raise ConfigError(
            f"client_spread: only for the heterogeneous family, got family {config.family!r}"
        )
    mu = None if means is None else np.asarray(means, dtype=np.float64)
    if mu is None or mu.ndim != 1:
        raise ConfigError(
            "means: client_spread expects a vector of M generating means, got "
            + ("none" if mu is None else f"shape {mu.shape}")
        )
    if instance is not None:
        raise ConfigError(
            f"instance: client_spread draws its own instance ({CLIENT_INSTANCE!r}); leave "
            f"instance out, got {instance!r}"
        )
    mu = mu.copy()
    mu.setflags(write=False)
    return dataclasses.replace(
        config,
        fixed=None,
        instance=CLIENT_INSTANCE,
        client_spread=spread,
        client_means=mu,
        global_means=global_means,
    )


def _make_config(
    *,
    num_agents,
    num_arms,
    horizon,
    family,
    means,
    instance,
    instance_seed,
    reward,
    topology,
    topology_kwargs,
    channels,
    c1,
    c2,
    dim,
    theta,
    shared_decision_sets,
    dataset,
    max_cycles,
    arms="paper",
) -> EnvConfig:
    horizon = resolve_max_cycles(horizon, max_cycles, default=DEFAULT_HORIZON)
    _choice("family", family, FAMILIES)
    if means is not None and family == "linear":
        raise ConfigError("means: a fixed instance is for the multi-armed families, not 'linear'")
    if means is not None:
        num_agents, num_arms = _sizes_from_means(means, num_agents, num_arms)
    num_agents = DEFAULT_NUM_AGENTS if num_agents is None else num_agents
    num_arms = DEFAULT_NUM_ARMS if num_arms is None else num_arms
    if family == "linear":
        return _linear_config(
            num_agents,
            num_arms,
            horizon,
            reward,
            topology,
            topology_kwargs,
            channels,
            c1,
            c2,
            dim,
            theta,
            shared_decision_sets,
            instance_seed,
            dataset,
            arms,
        )
    if (
        dim is not None
        or not (isinstance(theta, str) and theta == "sphere")
        or shared_decision_sets is not False
        or dataset is not None
        or not (isinstance(arms, str) and arms == "paper")
    ):
        raise ConfigError(
            f"dim/theta/shared_decision_sets/arms: only for the linear family, not {family!r}"
        )
    n = _positive_int("num_agents", num_agents, maximum=MAX_AGENTS)
    m = _positive_int("num_arms", num_arms, minimum=2)
    horizon = check_horizon(horizon)
    reward_model = make_reward_model(reward)
    generator = DEFAULT_GENERATOR[family] if instance is None else instance
    _choice("instance", generator, sorted(GENERATORS))
    if family == "homogeneous" and generator != "uniform":
        raise ConfigError(f"instance: the homogeneous family uses 'uniform', got {generator!r}")
    if family == "heterogeneous" and generator == "uniform":
        raise ConfigError("instance: the heterogeneous family expects 'gossip' or 'commeff'")
    if instance_seed is not None:
        instance_seed = _positive_int("instance_seed", instance_seed, minimum=0)
    fixed = None
    if means is not None:
        fixed = fixed_instance(means, n)
        reward_model.validate(fixed.means)
        if family == "homogeneous" and not fixed.is_homogeneous:
            raise ConfigError(
                "means: the homogeneous family expects one mean vector for all agents"
            )
    chans = normalize_channels(channels, default_dim=m)
    check_sizes(n, m, 1, chans, topology, topology_kwargs)
    topo = make_topology(topology, n, {} if topology_kwargs is None else topology_kwargs)
    return EnvConfig(
        num_agents=n,
        num_arms=m,
        horizon=horizon,
        family=family,
        reward=reward_model,
        topology=topo,
        channels=chans,
        c1=_cost("c1", c1),
        c2=_cost("c2", c2),
        instance=generator,
        instance_seed=instance_seed,
        fixed=fixed,
    )


def _linear_config(
    num_agents,
    num_arms,
    horizon,
    reward,
    topology,
    topology_kwargs,
    channels,
    c1,
    c2,
    dim,
    theta,
    shared,
    instance_seed,
    dataset=None,
    arms="paper",
) -> EnvConfig:
    n = _positive_int("num_agents", num_agents, maximum=MAX_AGENTS)
    k = _positive_int("num_arms", num_arms, minimum=2)
    horizon = check_horizon(horizon)
    model = make_reward_model(reward)
    if model.name not in ("bernoulli", "gaussian"):
        raise ConfigError(
            f"reward: the linear family supports 'bernoulli' or 'gaussian', got {model.name!r}"
        )
    spec = LinearSpec(
        dim=10 if dim is None else dim,
        theta=theta,
        shared_decision_sets=_flag("shared_decision_sets", shared),
        reward=model.name,
        sigma=getattr(model, "sigma", 0.5),
        dataset=dataset,
        arms=arms_option(arms),
    )
    if isinstance(spec.arms, tuple) and spec.arms[1] < k:
        raise ConfigError(f"arms.size: expected a pool of at least num_arms = {k} vectors (a "
                          f"decision set draws K of them without replacement), got {spec.arms[1]}")  # fmt: skip
    if instance_seed is not None:
        instance_seed = _positive_int("instance_seed", instance_seed, minimum=0)
    chans = normalize_channels(channels, default_dim=k)
    check_sizes(n, k, 1, chans, topology, topology_kwargs, dim=spec.dim)
    return EnvConfig(
        num_agents=n,
        num_arms=k,
        horizon=horizon,
        family="linear",
        reward=model,
        topology=make_topology(topology, n, {} if topology_kwargs is None else topology_kwargs),
        channels=chans,
        c1=_cost("c1", c1),
        c2=_cost("c2", c2),
        instance="linear",
        instance_seed=instance_seed,
        linear=spec,
        extra={"dim": spec.dim},
    )
