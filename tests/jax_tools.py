"""Shared checks of the JAX ports (docs/jax.md, "Tests"): agreement in distribution with the
numpy twin, same key same bits, the light cone, and a step-by-step trajectory recorder."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

jax = pytest.importorskip("jax")

import fedbandit_env.jax as fj  # noqa: E402
from fedbandit_env.bench.evaluate import evaluate  # noqa: E402
from fedbandit_env.jax.env import replace_env  # noqa: E402
from fedbandit_env.jax.rollout import run_keys  # noqa: E402

AGREEMENT_RUNS = 200


def agreement(
    env_id: str,
    agent_id: str,
    env_kwargs: dict[str, Any],
    agent_kwargs: dict[str, Any] | None = None,
    runs: int = AGREEMENT_RUNS,
    exact_messages: bool = True,
) -> tuple[Any, Any]:
    """Run the numpy learner and its JAX port on the same environment for ``runs`` seeds and
    assert: mean final network regret within 3 standard errors of the difference; message
    and float counts exactly equal (per run) when ``exact_messages`` (deterministic counts),
    else their means within 3 standard errors. Returns (numpy result, JAX result)."""
    agent_kwargs = dict(agent_kwargs or {})
    ref = evaluate(env_id, agent_id, runs=runs, seed=0, env_kwargs=env_kwargs,
                   agent_kwargs=agent_kwargs)  # fmt: skip
    env = fj.make(env_id, **ref.env_kwargs)
    out = fj.rollout(env, fj.make_jax_agent(agent_id, **agent_kwargs), list(range(runs)))
    a = ref.final_regret_network
    b = out.regret_by_agent[:, -1].sum(axis=1)
    se = math.sqrt(a.var(ddof=1) / runs + b.var(ddof=1) / runs)
    # float32 rounding of JAX's regret (docs/jax.md, "Numbers") for a deterministic regret
    assert abs(a.mean() - b.mean()) <= 3 * se + 1e-6 * max(1.0, abs(a.mean())), (
        f"{agent_id}: numpy {a.mean():.3f} vs JAX {b.mean():.3f}, 3 se = {3 * se:.3f}"
    )
    if exact_messages:
        np.testing.assert_array_equal(np.sort(ref.messages.sum(1)), np.sort(out.messages.sum(1)))
        np.testing.assert_array_equal(np.sort(ref.floats.sum(1)), np.sort(out.floats.sum(1)))
    else:
        for x, y in ((ref.messages, out.messages), (ref.floats, out.floats)):
            x, y = x.sum(1).astype(float), y.sum(1).astype(float)
            se = math.sqrt(x.var(ddof=1) / runs + y.var(ddof=1) / runs)
            assert abs(x.mean() - y.mean()) <= 3 * se + 1e-9, (x.mean(), y.mean(), se)
    return ref, out


def same_bits(env: Any, learner: Any, seeds: list[int]) -> None:
    """Two rollouts with the same seeds give the same bits."""
    a = fj.rollout(env, learner, seeds)
    b = fj.rollout(env, learner, seeds)
    np.testing.assert_array_equal(a.regret_by_agent, b.regret_by_agent)
    np.testing.assert_array_equal(a.messages, b.messages)


def trajectory(env: Any, learner: Any, seeds: list[int], steps: int,
               perturb_agent: int | None = None, at: int = 0) -> dict[str, np.ndarray]:  # fmt: skip
    """Step ``steps`` engine steps of ``seeds`` (vmapped, jitted step by step) and record each
    step's arms (T, B, N) and payloads {channel: (T, B, N, dim)}. With ``perturb_agent``, that
    agent's reward parameters are changed before step ``at`` (its means flipped and arm 0
    raised by 3; in the linear family its decision sets scaled), the light cone's probe."""
    init, act = fj.bind(learner, fj.facts_of(env))
    keys = run_keys(seeds)

    def start(key):
        k_env, k_agent, key = jax.random.split(key, 3)
        obs, state = env.reset(k_env)
        return key, obs, state, init(k_agent)

    def advance(key, obs, state, lstate):
        key, k_act, k_step = jax.random.split(key, 3)
        action, lstate = act(k_act, lstate, obs)
        obs, state, *_ = env.step(k_step, state, action)
        payloads = {n: m[1] if isinstance(m, tuple) else m for n, m in action.messages.items()}
        sends = {n: m[0] for n, m in action.messages.items() if isinstance(m, tuple)}
        return (key, obs, state, lstate), (action.arms, payloads, sends)

    start = jax.jit(jax.vmap(start))
    advance = jax.jit(jax.vmap(advance))
    carry = start(keys)
    arms, payloads = [], []
    for t in range(1, steps + 1):
        if perturb_agent is not None and t == at:
            key, obs, state, lstate = carry
            j = perturb_agent
            if state.means is not None:
                means = state.means.at[:, j, :].set(1.0 - state.means[:, j, :])
                state = replace_env(state, means=means.at[:, j, 0].add(3.0))
            else:
                state = replace_env(state, context=state.context.at[:, j].multiply(-1.0))
            carry = (key, obs, state, lstate)
        carry, (a, p, s) = advance(*carry)
        arms.append(np.asarray(a))
        payloads.append({n: np.where(np.asarray(s[n])[..., None], np.asarray(v), 0.0)
                         if n in s else np.asarray(v) for n, v in p.items()})  # fmt: skip
    return {
        "arms": np.stack(arms),
        "payloads": {n: np.stack([p[n] for p in payloads]) for n in payloads[0]},
    }


def assert_light_cone(env: Any, learner: Any, j: int, steps: int = 60, at: int = 15,
                      seeds: tuple[int, ...] = (0, 1, 2, 3), max_hops: int | None = None,
                      expect_spread: bool = True) -> None:  # fmt: skip
    """Agent j's change at step ``at`` reaches agent i no earlier than ``hop distance`` steps
    later (``max_hops`` overrides the distance, e.g. 1 for a server channel's one-step
    broadcast), and, with ``expect_spread``, reaches some other agent (not vacuous)."""
    base = trajectory(env, learner, list(seeds), steps)
    moved = trajectory(env, learner, list(seeds), steps, perturb_agent=j, at=at)
    dist = env.config.topology.hop_distances
    seen_elsewhere = False
    for i in range(env.num_agents):
        diff = (base["arms"][:, :, i] != moved["arms"][:, :, i]).any(axis=1)
        for name, p in base["payloads"].items():
            diff |= (p[:, :, i] != moved["payloads"][name][:, :, i]).any(axis=(1, 2))
        changed = np.nonzero(diff)[0]
        if changed.size == 0:
            continue
        first_step = changed[0] + 1
        hops = dist[i, j] if max_hops is None else (0 if i == j else max_hops)
        assert first_step > at + hops, (i, j, first_step, at, hops)
        seen_elsewhere |= i != j
    assert seen_elsewhere or not expect_spread, "no other agent saw the change (vacuous)"
