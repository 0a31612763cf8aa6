"""Constructor fuzzing harness shared by ``tests/test_fuzz_constructors.py`` and
``benchmarks/fuzz_constructors.py`` (docs/limits.md, "Errors").

A case is ``(target, kwargs)``: ``target`` names a public constructor (``make`` of every
registered id, ``make_vec``, ``make_agent`` of every registered learner followed by a reset on a
small environment, the channel configs, the privacy-wrapper configs and the RL views) and
``kwargs`` are drawn from wrong types, huge integers, NaN and inf, numpy scalars, negative
numbers, misspelt names and plausible valid values. :func:`run_case` calls the constructor and
classifies the outcome: ``ok``, ``ValueError`` or ``TypeError`` whose message names one of the
arguments, or ``other`` (any other exception class, or a message that names no argument).
"""

from __future__ import annotations

import math
import signal
import warnings
from collections.abc import Callable
from contextlib import contextmanager
from typing import Any

import numpy as np
from hypothesis import strategies as st

import fedbandit_env
from fedbandit_env import list_agents, list_envs, make, make_agent, make_vec
from fedbandit_env.config import normalize_channels

CASE_TIMEOUT = 20.0  # seconds; a case that takes longer counts as a hang

# ------------------------------------------------------------------ values
HUGE_INTS = [2**31, 2**53 + 1, 2**63, 2**64, 10**30, -(2**63)]
SPECIAL_FLOATS = [math.nan, math.inf, -math.inf, 1e308, -1e308, 5e-324, 0.0, -0.0, 1e-300]


def numpy_scalars() -> st.SearchStrategy:
    ints = st.integers(-3, 12).flatmap(
        lambda v: st.sampled_from([np.int64(v), np.int32(v), np.int8(v), np.uint16(abs(v))])
    )
    floats = st.sampled_from([0.5, 1.0, 2.0, -1.0, 0.0, 1e-3, math.nan, math.inf]).flatmap(
        lambda v: st.sampled_from([np.float64(v), np.float32(v), np.float16(v)])
    )
    return st.one_of(ints, floats, st.just(np.bool_(True)))


def wild_values() -> st.SearchStrategy:
    """Values of every kind a user (or a typo) might pass."""
    return st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-5, 30),
        st.sampled_from(HUGE_INTS),
        st.floats(allow_nan=True, allow_infinity=True),
        st.sampled_from(SPECIAL_FLOATS),
        numpy_scalars(),
        st.text(max_size=6),
        st.sampled_from(["complete", "ring", "gaussian", "laplace", "wine", "iid", "paper", "1"]),
        st.lists(st.one_of(st.integers(-2, 5), st.floats(-2, 2)), max_size=4),
        st.tuples(st.floats(allow_nan=True), st.floats(allow_nan=True)),
        st.dictionaries(st.sampled_from(["kind", "dim", "sigma", "x"]), st.integers(-2, 5), max_size=2),
        st.just(object()),
        st.just(np.zeros((2, 2))),
    )


def misspell(name: str) -> st.SearchStrategy:
    return st.sampled_from([name + "s", name.upper(), name[:-1] or "x", "_" + name])


def kwargs_for(names: list[str], plausible: dict[str, list[Any]]) -> st.SearchStrategy:
    """A dict with a few of ``names`` (plausible or wild values) and maybe a misspelt name."""

    def value(name: str) -> st.SearchStrategy:
        good = plausible.get(name)
        if good:
            return st.one_of(st.sampled_from(good), wild_values())
        return wild_values()

    if not names:
        return st.dictionaries(st.text(min_size=1, max_size=5), wild_values(), max_size=1)

    @st.composite
    def build(draw):
        chosen = draw(st.lists(st.sampled_from(names), unique=True, max_size=min(4, len(names))))
        out = {name: draw(value(name)) for name in chosen}
        if draw(st.integers(0, 9)) == 0:
            out[draw(st.sampled_from(names).flatmap(misspell))] = draw(wild_values())
        return out

    return build()


ENV_PLAUSIBLE: dict[str, list[Any]] = {
    "num_agents": [1, 2, 3, 4, 6, np.int64(3)],
    "num_arms": [2, 3, 5, np.int32(4)],
    "horizon": [1, 3, 10, np.int64(7)],
    "family": ["heterogeneous", "homogeneous", "linear"],
    "means": [[0.1, 0.5, 0.9], [[0.1, 0.9], [0.4, 0.6], [0.3, 0.2]], [10**400, 0.5]],
    "instance": ["gossip", "commeff", "uniform"],
    "instance_seed": [None, 0, 3, np.int64(1)],
    "reward": ["bernoulli", {"kind": "gaussian", "sigma": 1.0}, {"kind": "gaussian", "sigma": np.float32(0.5)}],
    "topology": ["complete", "ring", "path", "star", "grid", "erdos_renyi", "random_regular"],
    "topology_kwargs": [{}, {"p": 0.5}, {"degree": 2}],
    "channels": [(), ("neighbors",), ("gossip",), ("server",), ("flood",), ("hierarchical",),
                 {"f": {"kind": "flood", "ttl": 2}}, {"s": {"kind": "server", "participation": 0.5}}],
    "c1": [0.0, 1.0, np.float32(2.0)],
    "c2": [0.0, 0.5, np.int64(1)],
    "dim": [2, 3, np.int64(4)],
    "theta": ["sphere", "gaussian"],
    "shared_decision_sets": [True, False],
    "dataset": ["wine", "iris", None],
    "features": [None, 2, 4, np.int64(3)],
    "split": ["iid", "dirichlet"],
    "dirichlet_alpha": [0.5, 1.0, np.float32(0.3)],
    "split_seed": [0, 1, np.int64(2)],
    "render_mode": [None, "ansi"],
    "num_runs": [1, 2, np.int64(2)],
    "data_path": [None, "/nonexistent/diabetic_data.csv"],
    "exclusive_arms": [True, False],
    "seed": [0, 1],
    # the event-time options (docs/time.md)
    "clock": ["sync", "one_random", {"kind": "poisson", "stragglers": {}}, {"kind": "trace"}],
    "drift": [{"kind": "piecewise", "rate": 0.5}, {"kind": "smooth", "period": 4},
              {"kind": "piecewise", "change_points": [2]}],
    "reward_delay": [2, {"kind": "geometric", "mean": 2, "max": 3},
                     {"kind": "pareto", "shape": 1.0, "max": 4}, {"kind": "uniform", "low": 2}],
    "latency": [1, {"kind": "uniform", "low": 1, "high": 2},
                {"kind": "per_link", "steps": [[0, 1, 1], [1, 0, 1], [1, 1, 0]]}],
    "churn": ["always", {"kind": "markov", "p_leave": 0.5, "p_join": 0.5},
              {"kind": "schedule", "absences": [[0, 1, 3]]}, {"kind": "schedule", "join_at": [1, 2]}],
}


def env_names(env_id: str) -> list[str]:
    accepted = fedbandit_env.spec(env_id).accepted_kwargs or tuple(ENV_PLAUSIBLE)
    return list(accepted)


def _small(env_id: str, kwargs: dict[str, Any]) -> dict[str, Any]:
    """Keep the default sizes of the big presets small unless the case sets them."""
    base = {}
    defaults = fedbandit_env.spec(env_id).kwargs
    names = env_names(env_id)
    for k, v in (("horizon", 5), ("num_agents", 3), ("num_arms", 4)):
        if k in names and k not in kwargs and (k != "num_arms" or "num_arms" in defaults):
            base[k] = v
    if env_id == "FedBandit/DiabetesHospitals-v0" and "data_path" not in kwargs:
        base["data_path"] = "/nonexistent/diabetic_data.csv"
    return {**base, **kwargs}


# ------------------------------------------------------------------ targets
def _make(env_id: str) -> Callable[[dict], Any]:
    def build(kwargs: dict) -> Any:
        env = make(env_id, **_small(env_id, kwargs))
        env.reset(seed=0)
        return env

    return build


def _make_vec(env_id: str) -> Callable[[dict], Any]:
    def build(kwargs: dict) -> Any:
        kwargs = dict(kwargs)
        num_runs = kwargs.pop("num_runs", 2)
        venv = make_vec(env_id, num_runs=num_runs, **_small(env_id, kwargs))
        venv.reset(seed=0)
        return venv

    return build


COMMEFF = ("FedBandit/Heterogeneous-v0", {"num_agents": 3, "num_arms": 3, "horizon": 300})
LEARNER_ENVS = {
    "cdp_mab": COMMEFF,
    "ddp_mab": COMMEFF,
    "hdp_mab": COMMEFF,
    "fed_lin_ucb": ("FedBandit/LinearContextual-v0", {"num_agents": 3, "num_arms": 3, "dim": 3}),
    "fed_lin_ucb_decentralized": (
        "FedBandit/LinearContextual-v0",
        {"num_agents": 3, "num_arms": 3, "dim": 3},
    ),
    "linucb": ("FedBandit/LinearContextual-v0", {"num_agents": 3, "num_arms": 3, "dim": 3}),
    "centralized_linucb": (
        "FedBandit/LinearContextual-v0",
        {"num_agents": 3, "num_arms": 3, "dim": 3},
    ),
    "dislinucb": ("FedBandit/LinearContextual-v0", {"num_agents": 3, "num_arms": 3, "dim": 3}),
    "byzres_ucb": ("FedBandit/Homogeneous-v0", {"num_agents": 3, "num_arms": 4}),
    "async_lin_ucb": (
        "FedBandit/LinearContextual-v0",
        {"num_agents": 3, "num_arms": 3, "dim": 3, "clock": "one_random"},
    ),
    "fed_lin_ucb_async": (
        "FedBandit/LinearContextual-v0",
        {"num_agents": 3, "num_arms": 3, "dim": 3, "clock": "one_random"},
    ),
    "sync_lin_ucb": (
        "FedBandit/LinearContextual-v0",
        {"num_agents": 3, "num_arms": 3, "dim": 3, "clock": "one_random"},
    ),
}
AGENT_PLAUSIBLE: dict[str, list[Any]] = {
    "epsilon": [0.5, 1.0, 2.0, np.float32(1.0), math.inf],
    "alpha": [0.1, 2.0, np.float32(0.5)],
    "scale": [None, 1.0, np.float32(0.5)],
    "delta": [None, 0.1, 1e-3],
    "rounds": [None, 2, np.int64(3)],
    "gamma": [1, 2, np.int64(1)],
    "privacy": ["paper", "none"],
    "clip": [(0.0, 1.0), (np.float32(0.0), 1)],
    "bounds": [None, (0.0, 1.0)],
    "lam": [1.0, np.float32(2.0)],
    "rho": [2.0, 3.0],
    "kappa": [None, 0.5],
    "delta_horizon": [None, 10],
    "num_syncs": [None, 2, np.int64(2)],
    "schedule": ["adaptive", "fixed"],
    "participation": [None, 0.5],
}


def _agent(agent_id: str) -> tuple[Callable[[dict], Any], list[str]]:
    import inspect

    from fedbandit_env.agent_registry import agent_class

    def build(kwargs: dict) -> Any:
        agent = make_agent(agent_id, **kwargs)
        env_id, env_kwargs = LEARNER_ENVS.get(
            agent_id, ("FedBandit/Heterogeneous-v0", {"num_agents": 3, "num_arms": 4})
        )
        from fedbandit_env.bench.evaluate import env_kwargs_for

        env_kwargs = env_kwargs_for(agent, env_id, {"horizon": 6, **env_kwargs})
        venv = make_vec(env_id, num_runs=2, **env_kwargs)
        obs, _ = venv.reset(seed=0)
        agent.reset(venv.facts, venv.agent_rng())
        for _ in range(10 * venv.horizon):  # communication steps take no pull
            if venv.engine.truncated:
                break
            action = agent.act(obs)
            obs, *_ = venv.step(action.arms, action.messages, action.pull)
        return agent

    try:
        names = [n for n in inspect.signature(agent_class(agent_id)).parameters if n != "self"]
    except (TypeError, ValueError):
        names = []
    return build, names


def _channel(kind: str) -> Callable[[dict], Any]:
    from fedbandit_env.config import make_topology
    from fedbandit_env.network import make_channel

    topo = make_topology("ring", 4, {})

    def build(kwargs: dict) -> Any:
        spec_ = normalize_channels({"c": {"kind": kind, **kwargs}}, default_dim=3)
        channel = make_channel("c", spec_["c"], topo, 1.0, 1.0)
        from fedbandit_env.seeding import BatchedRNG

        channel.reset(BatchedRNG.for_runs([0, 1], "network"))
        return channel

    return build


CHANNEL_OPTIONS = {
    "neighbors": ["dim", "drop_prob"],
    "gossip": ["dim", "drop_prob"],
    "server": ["dim", "drop_prob", "participation", "charge_broadcast", "aggregate", "join_round",
               "reply"],
    "flood": ["dim", "drop_prob", "ttl", "cost_model"],
    "hierarchical": ["dim", "drop_prob", "charge_broadcast"],
    "push": ["dim", "drop_prob"],
}
CHANNEL_PLAUSIBLE = {
    "dim": [1, 3, np.int64(2)],
    "drop_prob": [0.0, 0.5, np.float32(0.25)],
    "participation": [1.0, 0.5, np.float32(0.5)],
    "ttl": [None, 1, 2, 3, np.int64(2), 10**9],
    "cost_model": ["relay", "gis"],
    "charge_broadcast": [True, False],
    "aggregate": ["sum", "mean"],
    "join_round": [None, [0, 1, 0, 2], (0, 0, 0, 0)],
    "reply": ["broadcast", "none"],
}

PRIVACY_NAMES = ["epsilon", "mechanism", "sensitivity", "delta", "clip", "running_sum", "center"]
PRIVACY_WRAPPER_NAMES = ["budget", "composition", "delta_prime", "delta_budget"]
PRIVACY_PLAUSIBLE = {
    "epsilon": [0.5, 1.0, np.float32(2.0), 1e300, 1e-300],
    "mechanism": ["laplace", "gaussian"],
    "sensitivity": [1.0, 2.0, np.float32(1.0), 1e300],
    "delta": [0.0, 1e-5, 0.1],
    "clip": [True, False],
    "running_sum": [False, True],
    "center": [0.0, 0.5],
    "budget": [None, 10.0, 1e300],
    "composition": ["basic", "advanced", "zcdp", "best"],
    "delta_prime": [None, 1e-6],
    "delta_budget": [None, 1e-3],
}


def _privacy(view: str) -> Callable[[dict], Any]:
    from fedbandit_env.wrappers.privacy import PrivacyVectorWrapper, PrivacyWrapper

    def build(kwargs: dict) -> Any:
        kwargs = dict(kwargs)
        wrapper_kw = {k: kwargs.pop(k) for k in list(kwargs) if k in PRIVACY_WRAPPER_NAMES}
        channels = {"neighbors": kwargs}
        if view == "parallel":
            env = make("FedBandit/Heterogeneous-v0", num_agents=3, num_arms=3, horizon=4,
                       channels=("neighbors",))
            wrapped = PrivacyWrapper(env, channels, **wrapper_kw)
            wrapped.reset(seed=0)
            actions = {a: {"arm": 0, "messages": {"neighbors": {"send": 1,
                                                               "payload": np.full(3, 0.5)}}}
                       for a in env.agents}
            wrapped.step(actions)
        else:
            venv = make_vec("FedBandit/Heterogeneous-v0", num_runs=2, num_agents=3, num_arms=3,
                            horizon=4, channels=("neighbors",))
            wrapped = PrivacyVectorWrapper(venv, channels, **wrapper_kw)
            wrapped.reset(seed=0)
            arms = np.zeros((2, 3), dtype=np.int64)
            msgs = {"neighbors": (np.ones((2, 3), dtype=bool), np.full((2, 3, 3), 0.5))}
            wrapped.step(arms, msgs)
        return wrapped

    return build


RL_NAMES = {
    "one_learner": ["env_id", "peers", "learner", "reward_mode", "share", "num_agents",
                    "num_arms", "horizon"],
    "agents_vec_env": ["env_id", "num_copies", "reward_mode", "share", "num_agents", "num_arms",
                       "horizon"],
    "statistics_wrapper": ["share", "num_agents", "num_arms", "horizon"],
}
RL_PLAUSIBLE = {
    "env_id": ["FedBandit/Heterogeneous-v0", "FedBandit/Homogeneous-v0"],
    "peers": ["ucb1_shared", "uniform"],
    "learner": [0, 1, np.int64(2)],
    "reward_mode": ["local", "regret"],
    "share": [None, True, False],
    "num_copies": [1, 2, np.int64(2)],
    "num_agents": [2, 3],
    "num_arms": [2, 3],
    "horizon": [3, 5],
}


def _rl(view: str) -> Callable[[dict], Any]:
    def build(kwargs: dict) -> Any:
        kwargs = {"horizon": 5, **kwargs}
        if view == "one_learner":
            from fedbandit_env.rl import OneLearnerEnv

            env = OneLearnerEnv(**kwargs)
            env.reset(seed=0)
            env.step(0)
            return env
        if view == "agents_vec_env":
            from fedbandit_env.rl.sb3_vec_env import AgentsVecEnv

            env_id = kwargs.pop("env_id", "FedBandit/Heterogeneous-v0")
            env = AgentsVecEnv(env_id, **kwargs)
            env.reset()
            return env
        from fedbandit_env.rl import StatisticsObservationWrapper

        share = kwargs.pop("share", None)
        env = StatisticsObservationWrapper(make("FedBandit/Heterogeneous-v0", **kwargs), share)
        env.reset(seed=0)
        return env

    return build


def targets() -> dict[str, tuple[Callable[[dict], Any], st.SearchStrategy]]:
    """Every fuzzed constructor: name -> (build(kwargs), strategy of kwargs)."""
    out: dict[str, tuple[Callable[[dict], Any], st.SearchStrategy]] = {}
    for env_id in list_envs():
        names = env_names(env_id)
        out[f"make:{env_id}"] = (_make(env_id), kwargs_for(names, ENV_PLAUSIBLE))
        if fedbandit_env.spec(env_id).vector_entry_point is not None:
            out[f"make_vec:{env_id}"] = (
                _make_vec(env_id),
                kwargs_for([*names, "num_runs"], ENV_PLAUSIBLE),
            )
    for agent_id in list_agents():
        build, names = _agent(agent_id)
        if agent_id == "sb3_policy":  # never a model file: nothing is loaded (docs/rl.md)
            names = ["algo", "deterministic", "share"]
        out[f"make_agent:{agent_id}"] = (build, kwargs_for(names, AGENT_PLAUSIBLE))
    for kind, names in CHANNEL_OPTIONS.items():
        out[f"channel:{kind}"] = (_channel(kind), kwargs_for(names, CHANNEL_PLAUSIBLE))
    for view in ("parallel", "vector"):
        out[f"privacy:{view}"] = (
            _privacy(view),
            kwargs_for(PRIVACY_NAMES + PRIVACY_WRAPPER_NAMES, PRIVACY_PLAUSIBLE),
        )
    for view, names in RL_NAMES.items():
        out[f"rl:{view}"] = (_rl(view), kwargs_for(names, RL_PLAUSIBLE))
    return out


# ------------------------------------------------------------------ outcomes
class CaseTimeout(Exception):
    pass


@contextmanager
def time_limit(seconds: float):
    def handler(signum, frame):
        raise CaseTimeout(f"case took longer than {seconds} s")

    old = signal.signal(signal.SIGALRM, handler)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def names_an_argument(message: str, kwargs: dict[str, Any], extra: list[str]) -> bool:
    words = [str(k) for k in kwargs] + [repr(str(k)) for k in kwargs] + extra
    return any(w and w in message for w in words)


def run_case(build: Callable[[dict], Any], kwargs: dict[str, Any],
             names: list[str] | None = None) -> tuple[str, str]:
    """(outcome, detail): ``ok``, ``ValueError``, ``TypeError`` or ``other``."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with time_limit(CASE_TIMEOUT):
                build(dict(kwargs))
    except (ValueError, TypeError) as err:
        kind = "TypeError" if isinstance(err, TypeError) else "ValueError"
        message = str(err)
        if not names_an_argument(message, kwargs, names or []):
            return "other", f"{type(err).__name__} names no argument: {message}"
        return kind, message
    except BaseException as err:  # noqa: BLE001 - classify everything else as a failure
        if isinstance(err, KeyboardInterrupt):
            raise
        return "other", f"{type(err).__name__}: {err}"
    return "ok", ""


def fuzz(name: str, max_examples: int, record: Callable[[str, dict, str, str], None]) -> None:
    """Run ``max_examples`` derandomized hypothesis examples of target ``name``, calling
    ``record(name, kwargs, outcome, detail)`` for each."""
    from hypothesis import HealthCheck, given, settings

    build, strategy = targets()[name]
    names = _names_of(name)

    @settings(
        derandomize=True,
        max_examples=max_examples,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(strategy)
    def case(kwargs):
        outcome, detail = run_case(build, kwargs, names)
        record(name, kwargs, outcome, detail)

    case()


def _names_of(name: str) -> list[str]:
    group, _, key = name.partition(":")
    if group in ("make", "make_vec"):
        return [*env_names(key), "num_runs"]
    if group == "channel":
        return [*CHANNEL_OPTIONS[key], "channels", "ttl"]
    if group == "privacy":
        return PRIVACY_NAMES + PRIVACY_WRAPPER_NAMES
    if group == "rl":
        return [*RL_NAMES[key], "channels"]  # the env's default channels
    return [*AGENT_PLAUSIBLE, "model_path", "horizon"]  # the small env's horizon
