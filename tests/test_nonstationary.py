"""D-UCB and SW-UCB (Garivier and Moulines 2011; docs/nonstationary.md), on both engines.

Their statistics are checked against plain loops over a hand-fed sequence of pulls, their limits
(nothing forgotten) against UCB1 bit for bit, their tunings against the paper's formulas, the
two engines against each other, and their settings' errors by name."""

from __future__ import annotations

import math

import numpy as np
import pytest

from baselines.nonstationary import DiscountedUCB, SlidingWindowUCB
from baselines.params import discount_tuning, forgetting_params, window_tuning
from fedbandit_env.bench.evaluate import evaluate
from fedbandit_env.engine import VecObservation
from fedbandit_env.errors import ConfigError
from fedbandit_env.policy import FederationFacts
from fedbandit_env.seeding import BatchedRNG

ENV = "FedBandit/Homogeneous-v0"
RUNS, N, M, T = 2, 3, 4, 40


def _facts(horizon: int = T) -> FederationFacts:
    import fedbandit_env.jax as fj

    env = fj.make(ENV, num_agents=N, num_arms=M, horizon=horizon)
    return FederationFacts.from_config(env.config, RUNS, env.twins)


def _pulls(steps: int, seed: int = 3) -> tuple[np.ndarray, np.ndarray]:
    """A fed sequence of (arm, reward) per step, run and agent: (steps, RUNS, N) each."""
    rng = np.random.default_rng(seed)
    return rng.integers(0, M, (steps, RUNS, N)), rng.random((steps, RUNS, N))


def _plain_discounted(arms, rewards, gamma, t):
    """N_t(gamma, i) and the discounted sums after pulls 0..t-1, one term at a time."""
    n, s = np.zeros((RUNS, N, M)), np.zeros((RUNS, N, M))
    for b in range(RUNS):
        for i in range(N):
            for u in range(t):
                weight = gamma ** (t - 1 - u)
                n[b, i, arms[u, b, i]] += weight
                s[b, i, arms[u, b, i]] += weight * rewards[u, b, i]
    return n, s


def _plain_window(arms, rewards, window, t):
    """Counts and sums of the last ``window`` of pulls 0..t-1, one term at a time."""
    n, s = np.zeros((RUNS, N, M)), np.zeros((RUNS, N, M))
    for b in range(RUNS):
        for i in range(N):
            for u in range(max(0, t - window), t):
                n[b, i, arms[u, b, i]] += 1
                s[b, i, arms[u, b, i]] += rewards[u, b, i]
    return n, s


def _feed_numpy(learner, arms, rewards, check):
    learner.reset(_facts(), BatchedRNG(np.random.SeedSequence(0).spawn(RUNS)))
    learner.act(VecObservation(0, np.full((RUNS, N), -1), np.zeros((RUNS, N)), {}))
    for t in range(1, len(arms) + 1):
        learner.act(VecObservation(t, arms[t - 1], rewards[t - 1], {}))
        check(learner, t)


@pytest.mark.parametrize("gamma", [0.9, 0.5, 1.0])
def test_discounted_statistics_are_the_discounted_sums(gamma):
    arms, rewards = _pulls(T)

    def check(learner, t):
        n, s = _plain_discounted(arms, rewards, gamma, t)
        np.testing.assert_allclose(learner.counts, n, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(learner.sums, s, rtol=1e-12, atol=1e-12)

    _feed_numpy(DiscountedUCB(gamma=gamma), arms, rewards, check)


@pytest.mark.parametrize("window", [1, 7, T, 5 * T])
def test_window_statistics_are_the_last_window_pulls(window):
    arms, rewards = _pulls(T)

    def check(learner, t):
        n, s = _plain_window(arms, rewards, window, t)
        np.testing.assert_array_equal(learner.counts, n)
        np.testing.assert_allclose(learner.sums, s, rtol=0, atol=1e-12)

    _feed_numpy(SlidingWindowUCB(window=window), arms, rewards, check)


def test_jax_statistics_are_the_plain_loops_too():
    import jax.numpy as jnp

    from baselines.jax.nonstationary import DiscountedUCB as JaxD
    from baselines.jax.nonstationary import SlidingWindowUCB as JaxSW
    from fedbandit_env.jax.types import PULL, Observation

    arms, rewards = _pulls(T)
    facts = _facts()
    for learner, plain in ((JaxD(gamma=0.8), lambda t: _plain_discounted(arms, rewards, 0.8, t)),
                           (JaxSW(window=6), lambda t: _plain_window(arms, rewards, 6, t))):  # fmt: skip
        params = learner.make_params(facts)
        import jax

        state = learner.init(jax.random.key(0), params)
        for t in range(1, T + 1):
            obs = Observation(t, jnp.asarray(arms[t - 1, 0], jnp.int32),
                              jnp.asarray(rewards[t - 1, 0], jnp.float32), {}, None,
                              jnp.asarray(PULL), jnp.asarray(t))  # fmt: skip
            _, state = learner.act(jax.random.key(t), state, obs, params)
            n, s = plain(t)
            np.testing.assert_allclose(np.asarray(state.counts), n[0], rtol=1e-5, atol=1e-5)
            np.testing.assert_allclose(np.asarray(state.sums), s[0], rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("backend", ["numpy", pytest.param("jax", marks=pytest.mark.slow)])
def test_nothing_forgotten_is_ucb1_bit_for_bit(backend):
    """Garivier and Moulines' limits: gamma = 1 and a window of T pulls give the UCB index with
    the same bonus (alpha = xi), and the same tie-break draws: UCB1's run exactly."""
    kw = dict(runs=3, seed=5, env_kwargs={"num_agents": N, "num_arms": M, "horizon": 150},
              backend=backend)  # fmt: skip
    ucb1 = evaluate(ENV, "ucb1", agent_kwargs={"alpha": 1.2}, **kw)
    for agent, kwargs in (("discounted_ucb", {"gamma": 1.0, "xi": 1.2}),
                          ("sw_ucb", {"window": 150, "xi": 1.2}),
                          ("sw_ucb", {"window": 10_000, "xi": 1.2})):  # fmt: skip
        other = evaluate(ENV, agent, agent_kwargs=kwargs, **kw)
        np.testing.assert_array_equal(other.regret_per_agent, ucb1.regret_per_agent)


def test_forgetting_changes_the_run():
    kw = dict(runs=3, seed=5, env_kwargs={"num_agents": N, "num_arms": M, "horizon": 150})
    ucb1 = evaluate(ENV, "ucb1", agent_kwargs={"alpha": 1.2}, **kw).regret_per_agent
    for agent, kwargs in (("discounted_ucb", {"gamma": 0.9, "xi": 1.2}),
                          ("sw_ucb", {"window": 20, "xi": 1.2})):  # fmt: skip
        assert not np.array_equal(evaluate(ENV, agent, agent_kwargs=kwargs, **kw).regret_per_agent,
                                  ucb1)  # fmt: skip


def test_default_tunings_are_the_papers():
    """gamma = 1 - sqrt(Upsilon / T) / (4 B) and tau = ceil(2 B sqrt(T ln T / Upsilon)), B the
    reward range: the spec's example T = 10^4, Upsilon = 2 gives 0.99646 and 429."""
    assert discount_tuning(10_000, 2, 1.0) == pytest.approx(1 - math.sqrt(2e-4) / 4)
    assert round(discount_tuning(10_000, 2, 1.0), 5) == 0.99646
    assert window_tuning(10_000, 2, 1.0) == 430  # ceil(429.19)
    facts = _facts(horizon=10_000)
    d = forgetting_params("discounted_ucb", DiscountedUCB(changes=2).config, facts)
    sw = forgetting_params("sw_ucb", SlidingWindowUCB(changes=2).config, facts)
    assert (d.gamma, d.xi, d.scale) == (discount_tuning(10_000, 2, 1.0), 0.5, 1.0)
    assert (sw.window, sw.slots, sw.xi) == (430, 430, 0.6)
    short = forgetting_params("sw_ucb", SlidingWindowUCB(window=500).config, _facts(horizon=90))
    assert (short.window, short.slots) == (500, 90)  # the ring never holds more than T pulls


@pytest.mark.parametrize("agent", ["discounted_ucb", "sw_ucb"])
def test_the_engines_agree(agent):
    kw = dict(runs=40, seed=2, env_kwargs={"num_agents": 2, "num_arms": 5, "horizon": 300})
    a = evaluate(ENV, agent, backend="numpy", **kw).final_regret_network
    b = evaluate(ENV, agent, backend="jax", **kw).final_regret_network
    se = math.sqrt(a.var(ddof=1) / len(a) + b.var(ddof=1) / len(b))
    assert abs(a.mean() - b.mean()) < 3 * se


@pytest.mark.parametrize(
    ("cls", "kwargs", "message"),
    [
        (DiscountedUCB, {"gamma": 0.0}, r"discounted_ucb: gamma: expected a finite number > 0 and <= 1, got 0"),
        (DiscountedUCB, {"gamma": 1.5}, r"discounted_ucb: gamma: expected .* <= 1, got 1.5"),
        (DiscountedUCB, {"xi": -1}, r"discounted_ucb: xi: expected a finite non-negative number"),
        (DiscountedUCB, {"changes": 0}, r"discounted_ucb: changes: expected an int >= 1, got 0"),
        (SlidingWindowUCB, {"window": 0}, r"sw_ucb: window: expected an int >= 1, got 0"),
        (SlidingWindowUCB, {"window": 2.5}, r"sw_ucb: window: expected an int >= 1, got float"),
        (SlidingWindowUCB, {"scale": -2}, r"sw_ucb: scale: expected a finite non-negative"),
    ],
)  # fmt: skip
@pytest.mark.parametrize("engine", ["numpy", "jax"])
def test_bad_settings_are_named(cls, kwargs, message, engine):
    if engine == "jax":  # the JAX port of the same id, from its own module
        from baselines.jax import nonstationary as ports

        cls = getattr(ports, cls.__name__)
    with pytest.raises(ConfigError, match=message):
        cls(**kwargs)


def test_a_default_discount_out_of_range_is_refused_by_name():
    with pytest.raises(ConfigError, match=r"discounted_ucb: gamma: the default .* pass gamma"):
        forgetting_params("discounted_ucb", DiscountedUCB(changes=10**6, scale=0.01).config,
                          _facts(horizon=100))  # fmt: skip


@pytest.mark.parametrize("agent", ["discounted_ucb", "sw_ucb"])
def test_the_linear_family_is_refused(agent):
    with pytest.raises(ConfigError, match=rf"{agent}: family"):
        evaluate("FedBandit/LinearContextual-v0", agent, runs=1, seed=0,
                 env_kwargs={"num_agents": 2, "num_arms": 3, "horizon": 10, "dim": 2})  # fmt: skip
