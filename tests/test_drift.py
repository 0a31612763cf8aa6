"""The ``drift`` option (docs/time.md, "drift"): piecewise and smooth means on both engines,
dynamic regret against plain loops, and the checks by name."""

from __future__ import annotations

import math

import numpy as np
import pytest

import fedbandit_env
from fedbandit_env.bench.evaluate import evaluate
from fedbandit_env.drift import segment_of, smooth_means, variation
from fedbandit_env.errors import ConfigError

HOMOG = "FedBandit/Homogeneous-v0"
# Garivier & Moulines' switching instance (docs/time.md): arm 2 jumps to 0.9 for 3000 <= t < 5000
SWITCH = np.array([[0.5, 0.3, 0.4], [0.5, 0.3, 0.9], [0.5, 0.3, 0.4]])
SMOOTH = {"kind": "smooth", "period": 10, "amplitude": 0.3, "center": 0.5}


def _plain_means(t: int, drift: dict) -> np.ndarray:
    """The means (M,) at pull t, by the docs' definitions, one pull at a time."""
    if drift["kind"] == "smooth":
        m = 3
        return np.array([drift["center"] + drift["amplitude"]
                         * math.sin(2 * math.pi * t / drift["period"] + 2 * math.pi * k / m)
                         for k in range(m)])  # fmt: skip
    segment = sum(1 for c in drift["change_points"] if c <= t)
    return np.asarray(drift["means"][segment], float)


def _numpy_fixed_arm_regret(drift: dict, arm: int, horizon: int) -> np.ndarray:
    venv = fedbandit_env.make_vec(HOMOG, num_runs=2, num_agents=2, num_arms=3, horizon=horizon,
                                  means=[0.5, 0.3, 0.4], channels=(), drift=drift)  # fmt: skip
    venv.reset(seed=0)
    total = np.zeros((2, 2))
    for t in range(1, horizon + 1):
        _, _, info = venv.engine.step(np.full((2, 2), arm, np.int64))
        np.testing.assert_allclose(venv.engine.means[:, 0], np.tile(_plain_means(t, drift), (2, 1)))
        total += info.instant_regret
    return total


PIECEWISE = {"kind": "piecewise", "change_points": [6, 11], "means": SWITCH}


@pytest.mark.parametrize("drift", [PIECEWISE, SMOOTH], ids=["piecewise", "smooth"])
@pytest.mark.parametrize("arm", [0, 2])
def test_dynamic_regret_is_the_plain_loops_on_numpy(drift, arm):
    """Each pull is charged against the best arm of the means in force at that pull."""
    expected = sum(_plain_means(t, drift).max() - _plain_means(t, drift)[arm] for t in range(1, 21))
    np.testing.assert_allclose(_numpy_fixed_arm_regret(drift, arm, 20), expected, rtol=1e-12)


def test_the_switching_instance_by_hand():
    """Arm 0 always: regret 0 before pull 6, 0.4 per pull on 6..10 (arm 2 is best at 0.9),
    0 after pull 11; arm 2 always: 0.1 per pull outside 6..10."""
    np.testing.assert_allclose(_numpy_fixed_arm_regret(PIECEWISE, 0, 20), 5 * 0.4)
    np.testing.assert_allclose(_numpy_fixed_arm_regret(PIECEWISE, 2, 20), 15 * 0.1)


@pytest.mark.parametrize("drift", [PIECEWISE, SMOOTH], ids=["piecewise", "smooth"])
def test_jax_dynamic_regret_is_the_plain_loops(drift):
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    import fedbandit_env.jax as fj
    from fedbandit_env.jax.types import Action

    env = fj.make(HOMOG, num_agents=2, num_arms=3, horizon=20, means=[0.5, 0.3, 0.4],
                  channels=(), drift=drift)  # fmt: skip
    _, state = env.reset(jax.random.key(0))
    step = jax.jit(env.step)
    for t in range(1, 21):
        _, state, _, _, _ = step(jax.random.key(t), state, Action(jnp.zeros(2, jnp.int32), {}))
        np.testing.assert_allclose(np.asarray(state.means[0]), _plain_means(t, drift), atol=1e-6)
    expected = sum(_plain_means(t, drift).max() - _plain_means(t, drift)[0] for t in range(1, 21))
    np.testing.assert_allclose(np.asarray(env.cumulative_regret(state)), expected, rtol=1e-5)


def test_a_communication_step_moves_no_drift():
    """Drift time is the run's pull count: a step without a pull changes nothing."""
    venv = fedbandit_env.make_vec(HOMOG, num_runs=1, num_agents=2, num_arms=3, horizon=20,
                                  means=[0.5, 0.3, 0.4], channels=(), drift=SMOOTH)  # fmt: skip
    venv.reset(seed=0)
    before = venv.engine.means.copy()
    venv.engine.step(np.zeros((1, 2), np.int64), pull=False)
    np.testing.assert_array_equal(venv.engine.means, before)
    np.testing.assert_allclose(before[0, 0], _plain_means(1, SMOOTH))  # the first pull's means


@pytest.mark.parametrize("backend", ["numpy", "jax"])
def test_a_rate_redraws_the_instance_at_about_that_rate(backend):
    """``rate`` p: a change before each pull with probability p, the instance redrawn by the
    environment's generator (uniform means in [0, 1])."""
    if backend == "jax":
        pytest.importorskip("jax")
    rate, horizon, runs = 0.05, 150, 20
    changes, means = _changes(backend, rate, horizon, runs)
    n = horizon * runs  # about p n = 150 changes, sd about 11.9
    assert abs(changes - rate * n) < 4 * math.sqrt(n * rate * (1 - rate)), changes
    assert means.min() >= 0 and means.max() <= 1 and len(np.unique(means)) > 100


def _changes(backend: str, rate: float, horizon: int, runs: int) -> tuple[int, np.ndarray]:
    drift = {"kind": "piecewise", "rate": rate}
    kw = dict(num_agents=2, num_arms=3, horizon=horizon, channels=(), instance_seed=None,
              drift=drift)  # fmt: skip
    seen, changes = [], 0
    if backend == "numpy":
        venv = fedbandit_env.make_vec(HOMOG, num_runs=runs, **kw)
        venv.reset(seed=0)
        prev = venv.engine.means.copy()
        for _ in range(horizon):
            venv.engine.step(np.zeros((runs, 2), np.int64))
            now = venv.engine.means
            changes += int((now != prev).any(axis=(1, 2)).sum())
            seen.append(now.copy())
            prev = now.copy()
        return changes, np.stack(seen)
    import jax
    import jax.numpy as jnp

    import fedbandit_env.jax as fj
    from fedbandit_env.jax.types import Action

    env = fj.make(HOMOG, **kw)
    step = jax.jit(jax.vmap(env.step))
    keys = jax.random.split(jax.random.key(0), runs)
    _, state = jax.vmap(env.reset)(keys)
    prev = np.asarray(state.means)
    action = Action(jnp.zeros((runs, 2), jnp.int32), {}, jnp.ones(runs, bool))
    for t in range(horizon):
        _, state, _, _, _ = step(jax.random.split(jax.random.key(t + 1), runs), state, action)
        now = np.asarray(state.means)
        changes += int((now != prev).any(axis=(1, 2)).sum())
        seen.append(now)
        prev = now
    assert int(np.asarray(state.error)[:, 0].max()) == 0
    return changes, np.stack(seen)


def test_a_run_of_a_batch_drifts_as_its_seed_alone():
    kw = dict(num_agents=2, num_arms=3, horizon=50, channels=(), instance_seed=None,
              drift={"kind": "piecewise", "rate": 0.1})  # fmt: skip
    a = evaluate(HOMOG, "ucb1", runs=3, seed=4, env_kwargs=kw)
    b = evaluate(HOMOG, "ucb1", runs=1, seed=6, env_kwargs=kw)
    np.testing.assert_array_equal(a.regret_per_agent[2], b.regret_per_agent[0])


def test_no_drift_is_the_stationary_environment():
    kw = dict(num_agents=3, num_arms=4, horizon=60)
    plain = evaluate(HOMOG, "ucb1", runs=2, seed=1, env_kwargs=kw).regret_per_agent
    for off in (None, "none", {"kind": "none"}):
        same = evaluate(HOMOG, "ucb1", runs=2, seed=1, env_kwargs={**kw, "drift": off})
        np.testing.assert_array_equal(same.regret_per_agent, plain)


def test_the_shared_formulas():
    assert list(segment_of(np.array([1, 5, 6, 10, 11, 99]), (6, 11))) == [0, 0, 1, 1, 2, 2]
    got = smooth_means(np.array([0, 5]), 4, 20.0, 0.25, 0.5)
    assert got.shape == (2, 4)
    np.testing.assert_allclose(got[0], 0.5 + 0.25 * np.sin(np.pi * np.arange(4) / 2))
    np.testing.assert_allclose(got[1], 0.5 + 0.25 * np.sin(np.pi / 2 + np.pi * np.arange(4) / 2))
    # the switching instance: arm 2 moves by 0.5 twice
    means = np.repeat(SWITCH, [2, 3, 2], axis=0)
    assert variation(means) == pytest.approx(1.0)


BAD = [
    ("piecewise", "needs its settings"),
    ({"kind": "wobble"}, "drift: expected one of ('none', 'piecewise', 'smooth')"),
    (7, "drift: expected one of"),
    ({"kind": "piecewise", "rate": 0.1, "x": 1}, "unknown key(s) ['x'] for kind 'piecewise'"),
    ({"kind": "piecewise"}, "exactly one of 'change_points'"),
    ({"kind": "piecewise", "change_points": [5, 3]}, "strictly increasing pull indices in [2, 50]"),
    ({"kind": "piecewise", "change_points": [1]}, "drift: change_points: expected an int >= 2, got 1"),
    ({"kind": "piecewise", "change_points": [51]}, "expected an int <= 50"),
    ({"kind": "piecewise", "change_points": [3], "means": [[0.1] * 4]}, "expected shape (2, 4)"),
    ({"kind": "piecewise", "change_points": [3], "means": [[0.1] * 4, [1.5] * 4]},
     "finite numbers in [0, 1]"),
    ({"kind": "piecewise", "rate": 1.5}, "drift: rate: expected"),
    ({"kind": "piecewise", "rate": 0.1, "means": [[0.1] * 4]}, "with 'rate' every change redraws"),
    ({"kind": "smooth", "period": 10, "amplitude": 0.3}, "'smooth' expects 'center'"),
    ({"kind": "smooth", "period": 0, "amplitude": 0.3, "center": 0.5}, "drift: period: expected"),
    ({"kind": "smooth", "period": 9, "amplitude": 0.6, "center": 0.5}, "center +- amplitude"),
]  # fmt: skip


@pytest.mark.parametrize("value, message", BAD)
def test_a_bad_drift_is_refused_by_name_on_both_engines(value, message):
    kw = dict(num_agents=2, num_arms=4, horizon=50, drift=value)
    with pytest.raises(ConfigError, match="^drift") as numpy_err:
        fedbandit_env.make(HOMOG, **kw)
    assert message in str(numpy_err.value)
    pytest.importorskip("jax")
    import fedbandit_env.jax as fj

    with pytest.raises(ConfigError) as jax_err:
        fj.make(HOMOG, **kw)
    assert str(jax_err.value) == str(numpy_err.value)


def test_what_drift_does_not_accept():
    with pytest.raises(ConfigError, match="fixed means, so a piecewise drift needs 'means'"):
        fedbandit_env.make(HOMOG, means=[0.5, 0.3], drift={"kind": "piecewise",
                                                           "change_points": [3]})  # fmt: skip
    with pytest.raises(ConfigError, match="'rate' redraws the instance"):
        fedbandit_env.make(HOMOG, means=[0.5, 0.3], drift={"kind": "piecewise", "rate": 0.1})
    with pytest.raises(ConfigError, match=r"unknown key\(s\) \['amplitude', 'center'\] for kind "
                       "'smooth' in the linear family"):
        fedbandit_env.make("FedBandit/LinearContextual-v0", drift=SMOOTH)
    with pytest.raises(ConfigError, match=r"unknown key\(s\) \['means'\]"):
        fedbandit_env.make("FedBandit/LinearContextual-v0", drift=PIECEWISE)
    with pytest.raises(ConfigError, match="a data set's contexts and rewards are logged"):
        fedbandit_env.make("FedBandit/ClassificationContextual-v0",
                           drift={"kind": "piecewise", "rate": 0.1})  # fmt: skip
    with pytest.raises(ConfigError, match="global_means='generating' is not accepted"):
        fedbandit_env.make("FedBandit/Heterogeneous-v0", means=[0.5, 0.3], client_spread=0.1,
                           global_means="generating", instance_seed=None, drift=SMOOTH)  # fmt: skip


@pytest.mark.slow
def test_forgetting_pays_after_the_changes_and_costs_without_them():
    """Garivier & Moulines' checks on their switching instance (docs/time.md, N1-N3), K = 3
    Bernoulli arms, T = 10^4, one agent, 30 runs on the JAX backend; the tuned window and
    discount for Upsilon = 2 changes (tau = 430, gamma = 0.99646).

    N1: SW-UCB's and D-UCB's dynamic regret under the switches are below UCB1's by > 5 se.
    N2: on the stationary twin they pay for forgetting: not below UCB1's - 2 se.
    N3: the switches cost them little: |piecewise - stationary| < 0.25 x UCB1's excess."""
    pytest.importorskip("jax")
    runs, horizon = 30, 10_000
    base = dict(num_agents=1, num_arms=3, horizon=horizon, means=[0.5, 0.3, 0.4], channels=())
    switching = {**base, "drift": {"kind": "piecewise", "change_points": [3000, 5000],
                                   "means": SWITCH}}  # fmt: skip
    learners = {"ucb1": {}, "sw_ucb": {"changes": 2}, "discounted_ucb": {"changes": 2}}
    final = {}
    for name, kwargs in learners.items():
        for label, kw in (("piecewise", switching), ("stationary", base)):
            res = evaluate(HOMOG, name, runs=runs, seed=0, env_kwargs=kw, agent_kwargs=kwargs,
                           backend="jax")  # fmt: skip
            final[name, label] = res.final_regret_network

    def se(x):
        return x.std(ddof=1) / math.sqrt(len(x))

    ucb_p, ucb_s = final["ucb1", "piecewise"], final["ucb1", "stationary"]
    ucb_excess = ucb_p.mean() - ucb_s.mean()
    assert ucb_excess > 200  # UCB1 keeps pulling arm 2 long after pull 5000
    for name in ("sw_ucb", "discounted_ucb"):
        p, s = final[name, "piecewise"], final[name, "stationary"]
        assert p.mean() < ucb_p.mean() - 5 * math.hypot(se(p), se(ucb_p)), name  # N1
        assert s.mean() >= ucb_s.mean() - 2 * math.hypot(se(s), se(ucb_s)), name  # N2
        assert abs(p.mean() - s.mean()) < 0.25 * ucb_excess, name  # N3


@pytest.mark.slow
def test_the_time_page_examples_run():
    """docs/time.md's examples run as written (on the switching instance at T = 10^4, SW-UCB's
    dynamic regret is below UCB1's: the pull of arm 2 that UCB1 keeps after pull 5000; the
    event clocks; a delay of 200 pulls, fixed or random, costs UCB1 regret; fixed and random
    latencies; churn, whose absent clients send nothing)."""
    import re
    from pathlib import Path

    page = Path(__file__).resolve().parents[1] / "docs" / "time.md"
    blocks = re.findall(r"```python\n(.*?)```", page.read_text(), flags=re.S)
    assert blocks
    namespace: dict = {}
    for block in blocks:
        exec(compile(block, str(page), "exec"), namespace)  # noqa: S102
    assert namespace["env"].unwrapped.config.drift.kind == "smooth"
    assert namespace["ucb1"].final_regret_network.mean() > namespace["sw"].final_regret_network.mean()
    assert namespace["replayed"].unwrapped.config.clock.kind == "trace"  # the clock examples
    assert namespace["uniform"].regret_by_agent.shape[-1] == 10
    late, now = namespace["late"], namespace["now"]  # the delay example: a penalty
    assert late.final_regret_network.mean() > now.final_regret_network.mean()
    stale = namespace["stale"]  # the latency example: its messages were charged at send
    assert stale.env_kwargs["latency"] == 200 and stale.messages.sum() > 0
    assert namespace["randomly_late"].final_regret_network.mean() > now.final_regret_network.mean()
    assert namespace["jittered"].env_kwargs["latency"]["kind"] == "geometric"  # random latency
    assert namespace["away"].unwrapped.config.churn.kind == "schedule"  # the churn examples
    assert namespace["churned"].messages.sum() < namespace["everyone"].messages.sum()


LINEAR = "FedBandit/LinearContextual-v0"
LINEAR_DRIFTS = [{"kind": "smooth", "period": 8}, {"kind": "piecewise", "change_points": [3, 6]},
                 {"kind": "piecewise", "rate": 0.3}]  # fmt: skip


@pytest.mark.parametrize("drift", LINEAR_DRIFTS, ids=["smooth", "points", "rate"])
def test_theta_drifts_and_the_regret_is_against_the_current_theta(drift):
    """Linear family: each pull's regret is max_x <x, theta*(t)> - <x_t, theta*(t)> over the
    decision set shown, theta*(t) the theta* in force at that pull; a smooth drift turns theta*
    by 2 pi / period per pull (its norm kept; back to theta*(0) after one period)."""
    venv = fedbandit_env.make_vec(LINEAR, num_runs=2, horizon=16, channels=(), instance_seed=None,
                                  drift=drift)  # fmt: skip
    venv.reset(seed=0)
    eng = venv.engine
    theta0, prev, changes = eng.linear.theta.copy(), eng.linear.theta.copy(), 0
    for t in range(1, 17):
        shown = eng.linear.context.copy()
        _, _, info = eng.step(np.zeros((2, eng.num_agents), np.int64))
        theta = eng.linear.theta
        if drift["kind"] == "smooth":
            w = 2 * math.pi * t / 8
            u = (theta - math.cos(w) * theta0) / math.sin(w) if math.sin(w) > 1e-9 else None
            if u is not None:  # theta*(t) = cos(w t) theta0 + sin(w t) |theta0| u, u fixed
                u = u / np.linalg.norm(theta0, axis=1, keepdims=True)
                np.testing.assert_allclose(np.linalg.norm(u, axis=1), 1.0, rtol=1e-9)
                np.testing.assert_allclose((u * theta0).sum(axis=1), 0.0, atol=1e-12)
        expected = np.einsum("bnkd,bd->bnk", shown, theta)
        np.testing.assert_allclose(info.instant_regret, expected.max(axis=2) - expected[..., 0])
        changes += int((theta != prev).any(axis=1).sum())
        prev = theta.copy()
    if drift["kind"] == "smooth":
        np.testing.assert_allclose(theta, theta0, atol=1e-12)  # two full turns
        assert changes == 32
    elif "change_points" in drift:
        assert changes == 4  # two changes in each run
    else:
        assert 0 < changes < 32


@pytest.mark.parametrize("drift", LINEAR_DRIFTS[:2], ids=["smooth", "points"])
def test_theta_drifts_on_jax_and_the_regret_is_against_it(drift):
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    import fedbandit_env.jax as fj
    from fedbandit_env.jax.types import Action

    env = fj.make(LINEAR, horizon=16, channels=(), instance_seed=None, drift=drift)
    _, state = env.reset(jax.random.key(0))
    theta0, prev, changes, total = state.theta, state.theta, 0, 0.0
    step = jax.jit(env.step)
    for t in range(1, 17):
        shown = np.asarray(state.context)
        action = Action(jnp.zeros(env.num_agents, jnp.int32), {})
        _, state, _, _, _ = step(jax.random.key(t), state, action)
        expected = shown @ np.asarray(state.theta, np.float64)
        total = total + expected.max(axis=1) - expected[:, 0]
        changes += int(bool((state.theta != prev).any()))
        prev = state.theta
    np.testing.assert_allclose(np.asarray(env.cumulative_regret(state)), total, atol=1e-4)
    if drift["kind"] == "smooth":
        np.testing.assert_allclose(np.asarray(state.theta), np.asarray(theta0), atol=1e-5)
        assert changes == 16
    else:
        assert changes == 2
