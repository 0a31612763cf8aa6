"""Validation at every boundary (docs/limits.md): numbers of any numeric type, documented maxima,
sizes that cannot fit, the flood ttl cap, data-set splits and extreme privacy parameters."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

import fedbandit_env
from fedbandit_env import ConfigError, make_agent, make_vec
from fedbandit_env.privacy.errors import PrivacyError
from fedbandit_env.validation import (
    MAX_HORIZON,
    MEMORY_LIMIT_ENV,
    ConfigTypeError,
    check_int,
    check_real,
)

HET = "FedBandit/Heterogeneous-v0"


def play(venv, agent, steps, seed=0):
    """Cumulative regret and ledger totals after ``steps`` steps of ``agent`` on ``venv``."""
    obs, _ = venv.reset(seed=seed)
    agent.reset(venv.facts, venv.agent_rng())
    for _ in range(steps):
        action = agent.act(obs)
        obs, _, _, _, info = venv.step(action.arms, action.messages)
    total = venv.engine.ledger.total
    return info.cumulative_regret.copy(), total.messages.copy(), total.cost.copy()


def assert_same(a, b):
    for x, y in zip(a, b, strict=True):
        np.testing.assert_array_equal(x, y)


# ----------------------------------------------------------------- the helpers
@pytest.mark.parametrize("value", [3, np.int64(3), np.int32(3), np.uint8(3), np.int16(3)])
def test_check_int_accepts_every_integral_type_with_the_same_result(value):
    out = check_int("n", value, minimum=1)
    assert out == 3 and type(out) is int


@pytest.mark.parametrize("value", [0.5, np.float32(0.5), np.float64(0.5), np.float16(0.5)])
def test_check_real_accepts_every_real_type_with_the_same_result(value):
    out = check_real("x", value, low=0.0)
    assert out == 0.5 and type(out) is float


@pytest.mark.parametrize("value", [True, np.bool_(False), "3", 3.0, None, [3]])
def test_check_int_refuses_other_types_naming_field_and_type(value):
    with pytest.raises(TypeError, match=r"^n: expected an int >= 1, got") as info:
        check_int("n", value, minimum=1)
    assert isinstance(info.value, ConfigError) and isinstance(info.value, ConfigTypeError)


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, np.float32("nan")])
def test_check_real_refuses_nan_and_inf(value):
    with pytest.raises(ValueError, match="x: expected a finite number"):
        check_real("x", value)


# ------------------------------------------------- numpy scalars = Python numbers
def test_numpy_scalars_give_identical_environment_and_learner_results():
    py = make_vec(HET, num_runs=2, num_agents=3, num_arms=4, horizon=30, instance_seed=1, c2=0.5)
    np_ = make_vec(
        HET,
        num_runs=np.int64(2),
        num_agents=np.int64(3),
        num_arms=np.int32(4),
        horizon=np.int64(30),
        instance_seed=np.int64(1),
        c2=np.float32(0.5),
    )
    alpha = np.float32(1.5)
    a = play(py, make_agent("ucb1", alpha=float(alpha)), 30)
    b = play(np_, make_agent("ucb1", alpha=alpha), 30)
    assert_same(a, b)


@pytest.mark.parametrize(
    ("agent_id", "kwargs", "env_kwargs"),
    [
        ("gossip_fed_ucb", {"epsilon": np.float32(2.0)}, {}),
        ("dp_dec_ucb", {"epsilon": np.float32(2.0), "rho": np.float32(2.5)}, {}),
        ("epsilon_greedy", {"epsilon": np.float32(0.25)}, {}),
        ("kl_ucb", {"c": np.int64(1)}, {}),
        (
            "fed_lin_ucb_decentralized",
            {"gamma": np.int64(2), "epsilon": np.float32(1.0)},
            {"num_agents": 3, "num_arms": 3, "dim": np.int64(3)},
        ),
    ],
)
def test_numpy_learner_parameters_match_python_numbers(agent_id, kwargs, env_kwargs):
    env_id = "FedBandit/LinearContextual-v0" if "dim" in env_kwargs else HET
    env_kwargs = {"num_agents": 3, "num_arms": 4, "horizon": 12, **env_kwargs}
    python = {k: v.item() for k, v in kwargs.items()}
    runs = []
    for params in (kwargs, python):
        agent = make_agent(agent_id, **params)
        from fedbandit_env.bench.evaluate import env_kwargs_for

        venv = make_vec(env_id, num_runs=2, **env_kwargs_for(agent, env_id, env_kwargs))
        runs.append(play(venv, agent, 12))
    assert_same(*runs)


def test_numpy_dataset_parameters_match_python_numbers():
    pytest.importorskip("sklearn")
    env_id = "FedBandit/ClassificationContextual-v0"
    a = make_vec(env_id, num_runs=2, num_agents=4, horizon=5, features=np.int64(3),
                 split="dirichlet", dirichlet_alpha=np.float32(2.0), split_seed=np.int64(1))
    b = make_vec(env_id, num_runs=2, num_agents=4, horizon=5, features=3,
                 split="dirichlet", dirichlet_alpha=float(np.float32(2.0)), split_seed=1)
    oa, _ = a.reset(seed=0)
    ob, _ = b.reset(seed=0)
    np.testing.assert_array_equal(oa.context, ob.context)


def test_commeff_rounds_accept_numpy_ints():
    agent = make_agent("cdp_mab", rounds=np.int64(3), delta=np.float32(0.25))
    assert agent.config.rounds == 3 and type(agent.config.rounds) is int


# ----------------------------------------------------------- documented maxima
def test_horizon_past_the_maximum_is_a_clear_value_error():
    for horizon in (2**63, 10**30, MAX_HORIZON + 1):
        with pytest.raises(ValueError, match=r"horizon: expected an int <= 9007199254740992"):
            fedbandit_env.make(HET, horizon=horizon)
    env = fedbandit_env.make(HET, horizon=MAX_HORIZON)
    env.reset(seed=0)


def test_wrong_types_name_the_field_and_the_type():
    with pytest.raises(TypeError, match=r"num_agents: expected an int >= 1 and <= 1000000, got str '3'"):
        fedbandit_env.make(HET, num_agents="3")
    with pytest.raises(TypeError, match=r"c1: expected a finite non-negative number, got str"):
        fedbandit_env.make(HET, c1="1")
    with pytest.raises(TypeError, match=r"channels: expected a list of kinds or a mapping"):
        fedbandit_env.make(HET, channels=True)
    with pytest.raises(TypeError, match=r"topology_kwargs: expected a dict"):
        fedbandit_env.make(HET, topology_kwargs=3)


def test_sizes_that_cannot_fit_are_refused_up_front_with_the_estimate():
    with pytest.raises(ConfigError, match=r"num_runs/num_agents/num_arms: .* GiB"):
        make_vec(HET, num_runs=10**7, num_agents=10, num_arms=10**6)
    with pytest.raises(ConfigError, match=r"num_agents: .*GiB.*graph of 9000 nodes"):
        make_vec(HET, num_agents=9_000, topology="complete")
    with pytest.raises(ValueError, match=r"num_agents: expected an int <= 1000000"):
        make_vec(HET, num_agents=10**9, topology="ring")


def test_a_ring_of_100k_agents_builds_and_steps():
    """Lazy topology facts keep a federation linear in N (docs/limits.md)."""
    venv = make_vec(HET, num_agents=100_000, num_arms=2, topology="ring", horizon=3)
    obs, _ = venv.reset(seed=0)
    arms = np.zeros((1, 100_000), dtype=np.int64)
    obs, *_ = venv.step(arms, {})
    assert obs.last_arm.shape == (1, 100_000) and int(obs.pulls[0]) == 1


def test_received_payloads_count_in_the_estimate():
    """A neighbors channel delivers (B, N, max degree, dim) payloads: a complete graph of 1000
    agents with dim 20 and B = 100 is about 60 GiB, refused before the first step."""
    with pytest.raises(ConfigError, match=r"received payload floats=19980"):
        make_vec(HET, num_runs=100, num_agents=1000, num_arms=10,
                 channels={"n": {"kind": "neighbors", "dim": 20}})


@pytest.mark.slow
def test_linear_learners_refuse_gram_matrices_that_cannot_fit():
    venv = make_vec("FedBandit/LinearContextual-v0", num_runs=100, num_agents=100, dim=1000,
                    num_arms=2, horizon=3)
    venv.reset(seed=0)
    for agent_id in ("linucb", "fed_lin_ucb", "fed_lin_ucb_decentralized"):
        with pytest.raises(ConfigError, match=rf"^{agent_id}: num_runs/num_agents/dim: .*GiB"):
            make_agent(agent_id).reset(venv.facts, venv.agent_rng())


def test_the_memory_limit_is_configurable(monkeypatch):
    monkeypatch.setenv(MEMORY_LIMIT_ENV, str(10**6))
    with pytest.raises(ConfigError, match=rf"limit of .*{MEMORY_LIMIT_ENV}"):
        make_vec(HET, num_runs=100, num_agents=10, num_arms=1000)
    monkeypatch.delenv(MEMORY_LIMIT_ENV)
    make_vec(HET, num_runs=100, num_agents=10, num_arms=1000)


# ---------------------------------------------------------------- the flood ttl
@pytest.mark.parametrize("cost_model", ["relay", "gis"])
@pytest.mark.parametrize("drop_prob", [0.0, 0.3])
def test_flood_ttl_past_the_diameter_matches_diameter_plus_one(cost_model, drop_prob):
    """A 4-ring has diameter 2: ttl = 10^9 delivers and charges exactly what ttl = 3 does, and
    builds tables of the same size (no 30 GB)."""
    runs = []
    for ttl in (3, 10**9):
        opts = {"kind": "flood", "dim": 2, "ttl": ttl, "cost_model": cost_model,
                "drop_prob": drop_prob}
        v = make_vec(HET, num_runs=2, num_agents=4, num_arms=2, horizon=12, topology="ring",
                     channels={"f": opts})
        assert v.engine.channels["f"].ttl == 3
        assert v.facts.channels["f"]["ttl"] == ttl  # what the user asked for
        v.reset(seed=5)
        rng = np.random.default_rng(0)
        steps = []
        for t in range(12):
            send = rng.random((2, 4)) < 0.5
            payload = rng.standard_normal((2, 4, 2)) + t
            obs, _, _, _, info = v.step(np.zeros((2, 4), dtype=np.int64), {"f": (send, payload)})
            d = obs.deliveries["f"]
            steps.append(
                [*(getattr(d, f.name) for f in dataclasses.fields(d)),
                 info.ledger.step.messages, info.ledger.step.cost, info.ledger.step.floats]
            )
        runs.append((steps, v.engine.ledger.total))
    (a, ta), (b, tb) = runs
    for sa, sb in zip(a, b, strict=True):
        assert_same(sa, sb)
    assert_same([ta.messages, ta.floats, ta.cost], [tb.messages, tb.floats, tb.cost])


# ------------------------------------------------------------- data-set splits
def test_more_agents_than_samples_is_refused_naming_num_agents_and_the_count():
    pytest.importorskip("sklearn")
    with pytest.raises(ConfigError, match=r"num_agents: expected at most 178 .*got 200"):
        make_vec("FedBandit/ClassificationContextual-v0", num_agents=200, dataset="wine")


def test_a_dirichlet_split_leaving_an_agent_empty_names_num_agents_and_the_samples():
    pytest.importorskip("sklearn")
    with pytest.raises(ConfigError, match=r"num_agents: .* of the 150 samples of 'iris'"):
        make_vec("FedBandit/ClassificationContextual-v0", num_agents=120, dataset="iris",
                 split="dirichlet", dirichlet_alpha=0.01)


def test_every_agent_samples_only_its_own_share():
    pytest.importorskip("sklearn")
    v = make_vec("FedBandit/ClassificationContextual-v0", num_agents=178, dataset="wine",
                 horizon=3)
    v.reset(seed=0)
    process = v.engine.linear
    assert all(len(s) == 1 for s in process.shares)  # 178 samples, one each, none padded
    assert sorted(int(s[0]) for s in process.shares) == list(range(178))


# -------------------------------------------------------------- privacy extremes
@pytest.mark.parametrize("epsilon", [5e-324, 1e-310])
def test_a_tiny_epsilon_is_refused_instead_of_releasing_inf(epsilon):
    from fedbandit_env.privacy.mechanisms import LaplaceMechanism
    from fedbandit_env.privacy.tree_counter import TreeCounter

    with pytest.raises(PrivacyError, match=r"^epsilon: expected a value whose Laplace scale"):
        LaplaceMechanism(epsilon)
    with pytest.raises(PrivacyError, match=r"^epsilon: "):
        TreeCounter((2,), 8, epsilon, num_runs=1)


@pytest.mark.parametrize("epsilon", [1e300, 1e308])
@pytest.mark.parametrize("mechanism", ["laplace", "gaussian"])
def test_a_huge_epsilon_is_a_clear_error_not_zero_division_or_overflow(epsilon, mechanism):
    from fedbandit_env.wrappers.privacy import ChannelPrivacy, PrivacyVectorWrapper

    delta = 1e-5 if mechanism == "gaussian" else 0.0
    venv = make_vec(HET, num_agents=3, num_arms=3, horizon=3, channels=("neighbors",))
    with pytest.raises(PrivacyError, match=r"privacy\.channels\.neighbors\.epsilon: expected"):
        PrivacyVectorWrapper(
            venv, {"neighbors": {"epsilon": epsilon, "mechanism": mechanism, "delta": delta}}
        )
    with pytest.raises(PrivacyError, match="epsilon"):
        ChannelPrivacy(epsilon=epsilon, mechanism=mechanism, sensitivity=1e-300, delta=delta)


def test_a_laplace_scale_that_underflows_to_zero_is_refused():
    from fedbandit_env.privacy.mechanisms import LaplaceMechanism

    with pytest.raises(PrivacyError, match=r"Laplace scale is a finite positive float"):
        LaplaceMechanism(1e308, sensitivity=1e-300)


def test_numpy_epsilon_gives_the_same_noise_as_the_python_float():
    from fedbandit_env.privacy.mechanisms import LaplaceMechanism

    eps = np.float32(0.3)
    a = LaplaceMechanism(eps).privatize(np.zeros(5), np.random.default_rng(1))
    b = LaplaceMechanism(float(eps)).privatize(np.zeros(5), np.random.default_rng(1))
    np.testing.assert_array_equal(a, b)
    assert np.all(np.isfinite(a))


@pytest.mark.parametrize("epsilon", [5e-324, 1e-200])
def test_calibration_helpers_refuse_a_tiny_epsilon_instead_of_dividing_by_zero(epsilon):
    from fedbandit_env.privacy.calibration import classic_gaussian_sigma, laplace_scale
    from fedbandit_env.privacy.hybrid_counter import hybrid_noise_variance

    with pytest.raises(PrivacyError, match="^epsilon: "):
        hybrid_noise_variance(np.arange(5), epsilon)
    if epsilon == 5e-324:
        with pytest.raises(PrivacyError, match="^epsilon: "):
            laplace_scale(1.0, epsilon)
        with pytest.raises(PrivacyError, match="^epsilon: "):
            classic_gaussian_sigma(1.0, epsilon, 1e-5)


@pytest.mark.parametrize("epsilon", [1e200, 1e308])
def test_calibration_helpers_take_a_huge_epsilon_without_overflow(epsilon):
    from fedbandit_env.privacy.calibration import gaussian_sigma
    from fedbandit_env.privacy.hybrid_counter import hybrid_noise_variance

    np.testing.assert_array_equal(hybrid_noise_variance(np.arange(5), epsilon), np.zeros(5))
    with pytest.raises(PrivacyError, match="^epsilon: expected a value whose Gaussian sigma"):
        gaussian_sigma(1.0, epsilon, 1e-5)
