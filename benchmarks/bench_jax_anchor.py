"""The JAX core against tight anchors: the project's rollouts beside a bare ``lax.scan`` of the
same algorithm, timed interleaved in one process, compile excluded, and XLA's bytes and FLOPs
per agent-step for every port.

Anchors (written here, one run each, ``vmap``ped over runs like the rollout; the environment's
own reward and decision-set functions, nothing else of the project):

* ``ucb1``: N independent UCB1 learners (index ``mean + sqrt(2 ln t / n)``, t the agent's pulls,
  exact ties broken uniformly by one uniform per arm, as the project's rule) on Bernoulli arms,
  regret ``counts @ gap``;
* ``ring-shared UCB1``: the same, each agent's statistics summed with its two ring neighbours'
  of the last step (the message-passing pattern of ``gossip_fed_ucb`` without its privacy);
* ``LinUCB``: N independent OFUL learners (Cholesky of V each step, the Proposition-2 radius)
  on the linear family's decision sets.

Pairs (the issue's targets, "vs anchor" is the port's agent-steps/s over the anchor's):
``ucb1`` vs ucb1 (>= 0.9x), ``gossip_fed_ucb`` (FedBandit/GossipPath10-v0) vs ring-shared UCB1
(>= 0.5x), ``linucb`` and ``fed_lin_ucb`` (private) vs LinUCB (>= 0.8x, >= 0.4x). Bytes and FLOPs
per agent-step come from ``cost_analysis()`` of one compiled engine step (the learner's act and
the environment's step) of B runs, divided by B x N; the anchors' from one step of theirs (XLA
counts a loop's body once, whatever its trip count: a lower bound for a step with a loop). It
also times a second ``evaluate(..., backend="jax")`` of one cell against numpy's (>= 0.8x).

    python benchmarks/bench_jax_anchor.py                    # CPU sizes, every port's bytes
    python benchmarks/bench_jax_anchor.py --scale gpu        # B = 10^4 / 100 runs (one GPU)
    python benchmarks/bench_jax_anchor.py --scale small --bytes-ports ucb1   # seconds (CI)

The record goes to ``benchmarks/results/bench_jax_anchor.json`` (docs/speed.md renders it).
Does not assert: the targets are read against the record (docs/jax.md, "Speed").
"""

from __future__ import annotations

import argparse
import time
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import record

SCALES = {
    # (runs of the multi-armed pairs, their horizon, runs of the linear pairs, their horizon,
    #  runs of the evaluate pair, its horizon)
    "small": (8, 60, 2, 20, 20, 60),
    "cpu": (1000, 1000, 10, 200, 1000, 400),
    "gpu": (10_000, 2000, 100, 500, 1000, 400),
}
MULTI = ("FedBandit/Homogeneous-v0", {"num_agents": 10, "num_arms": 10})
GOSSIP = ("FedBandit/GossipPath10-v0", {})
LINEAR = ("FedBandit/LinearContextual-v0", {"num_agents": 100, "num_arms": 10, "dim": 10})
PAIRS = {  # port: (setting, anchor, target ratio, target bytes ratio or None)
    "ucb1": (MULTI, "ucb1", 0.9, 1.3),
    "gossip_fed_ucb": (GOSSIP, "ring_ucb1", 0.5, 4.0),
    "linucb": (LINEAR, "linucb", 0.8, None),
    "fed_lin_ucb": (LINEAR, "linucb", 0.4, 4.0),
}
BYTES_SETTING = {"gossip_fed_ucb": GOSSIP, "gossip_ucb": GOSSIP, "linucb": LINEAR,
                 "centralized_linucb": LINEAR, "fed_lin_ucb": LINEAR}  # fmt: skip
"""The setting of a port's bytes and FLOPs (the others: bench_jax.py's)."""


# ------------------------------------------------------------------------------- anchors
class BanditCarry(NamedTuple):
    key: jax.Array
    counts: jax.Array  # (N, M) int32
    sums: jax.Array  # (N, M) float32
    shared: tuple  # ring anchor: last step's (counts, sums) of every agent


def ucb_anchor(num_agents: int, num_arms: int, horizon: int, ring: bool):
    """One run of N UCB1 learners (``ring``: statistics summed over each agent and its two ring
    neighbours, as of the last step) on Bernoulli arms; returns the final regret (N,)."""

    def index(counts, sums):
        n = counts.astype(jnp.float32)
        t = jnp.maximum(n.sum(axis=1, keepdims=True), 1.0)  # the agent's pulls (shared: heard)
        bonus = jnp.sqrt(2.0 * jnp.log(t) / jnp.maximum(n, 1.0))
        return jnp.where(counts > 0, sums / jnp.maximum(n, 1.0) + bonus, jnp.inf)

    def body_for(means):
        def body(c: BanditCarry, t):
            key, k, k_tie = jax.random.split(c.key, 3)
            counts, sums = c.counts, c.sums
            if ring:
                n, s = c.shared
                counts = n + jnp.roll(n, 1, axis=0) + jnp.roll(n, -1, axis=0)
                sums = s + jnp.roll(s, 1, axis=0) + jnp.roll(s, -1, axis=0)
            ucb = index(counts, sums)  # ties: uniformly at random, one uniform per arm
            u = jax.random.uniform(k_tie, ucb.shape)
            arm = jnp.argmax(jnp.where(ucb >= ucb.max(axis=1, keepdims=True), u, -1.0), axis=1)
            reward = jax.random.uniform(k, (num_agents,)) < means[arm]
            onehot = arm[:, None] == jnp.arange(num_arms)
            new_counts = c.counts + onehot
            new_sums = c.sums + jnp.where(onehot, reward[:, None].astype(jnp.float32), 0.0)
            shared = (new_counts, new_sums) if ring else ()
            return BanditCarry(key, new_counts, new_sums, shared), None

        return body

    def initial(key):
        k_inst, key = jax.random.split(key)
        means = jax.random.uniform(k_inst, (num_arms,))
        zeros = jnp.zeros((num_agents, num_arms))
        ints = jnp.zeros((num_agents, num_arms), jnp.int32)
        return means, BanditCarry(key, ints, zeros, (ints, zeros) if ring else ())

    def run(key):
        means, carry = initial(key)
        carry, _ = jax.lax.scan(body_for(means), carry, jnp.arange(1, horizon + 1))
        return carry.counts.astype(jnp.float32) @ (means.max() - means)

    return run, body_for, initial


class LinCarry(NamedTuple):
    key: jax.Array
    V: jax.Array  # (N, d, d)
    b: jax.Array  # (N, d)
    regret: jax.Array  # (N,)


def linucb_anchor(num_agents: int, num_arms: int, dim: int, horizon: int):
    """One run of N independent OFUL learners on the linear family's decision sets (the
    environment's own generator) with Bernoulli rewards; returns the final regret (N,)."""
    from fedbandit_env.jax import instances
    from fedbandit_env.linear import LinearSpec

    spec = LinearSpec(dim=dim)
    lam, sigma, alpha, s_norm = 1.0, 0.5, 0.1, 1.0

    def body_for(theta):
        def body(c: LinCarry, _):
            key, k_ctx, k_rew = jax.random.split(c.key, 3)
            x = instances.decision_sets(spec, k_ctx, theta, num_agents, num_arms)  # (N, K, d)
            chol = jnp.linalg.cholesky(c.V)
            theta_hat = jax.scipy.linalg.cho_solve((chol, True), c.b[..., None])[..., 0]
            z = jax.scipy.linalg.solve_triangular(chol, jnp.swapaxes(x, 1, 2), lower=True)
            width = jnp.sqrt((z * z).sum(axis=1))  # (N, K)
            logdet = 2.0 * jnp.log(jnp.diagonal(chol, axis1=1, axis2=2)).sum(axis=1)
            beta = sigma * jnp.sqrt(
                2.0 * jnp.log(2.0 / alpha) + logdet - dim * jnp.log(lam)
            ) + s_norm * jnp.sqrt(lam)
            ucb = jnp.einsum("nkd,nd->nk", x, theta_hat) + beta[:, None] * width
            arm = jnp.argmax(ucb, axis=1)
            chosen = x[jnp.arange(num_agents), arm]  # (N, d)
            expected = x @ theta  # (N, K)
            mean = expected[jnp.arange(num_agents), arm]
            reward = (jax.random.uniform(k_rew, (num_agents,)) < mean).astype(jnp.float32)
            V = c.V + chosen[:, :, None] * chosen[:, None, :]
            b = c.b + reward[:, None] * chosen
            return LinCarry(key, V, b, c.regret + expected.max(axis=1) - mean), None

        return body

    def initial(key):
        k_theta, key = jax.random.split(key)
        theta = jax.random.normal(k_theta, (dim,))
        theta = theta / jnp.linalg.norm(theta)
        eye = jnp.broadcast_to(lam * jnp.eye(dim), (num_agents, dim, dim))
        zeros = jnp.zeros(num_agents)
        return theta, LinCarry(key, eye, jnp.zeros((num_agents, dim)), zeros)

    def run(key):
        theta, carry = initial(key)
        carry, _ = jax.lax.scan(body_for(theta), carry, None, length=horizon)
        return carry.regret

    return run, body_for, initial


# ------------------------------------------------------------------------------- measuring
def _cost(compiled) -> dict[str, float]:
    ca = compiled.cost_analysis()
    ca = ca[0] if isinstance(ca, list) else ca
    return {"bytes": float(ca.get("bytes accessed", 0.0)), "flops": float(ca.get("flops", 0.0))}


def anchor_program(name: str, setting, horizon: int):
    """(jitted run over keys (B, 2) -> regret (B, N), one-step function, its carry maker)."""
    kwargs = setting[1]
    if name in ("ucb1", "ring_ucb1"):
        run, body_for, initial = ucb_anchor(*_shape(setting), horizon, ring=name == "ring_ucb1")
    else:
        n, k, d = kwargs["num_agents"], kwargs["num_arms"], kwargs["dim"]
        run, body_for, initial = linucb_anchor(n, k, d, horizon)

    def one(args, t):
        fixed, carry = args  # the run's means (bandits) or theta (linear)
        return body_for(fixed)(carry, t)[0]

    return jax.jit(jax.vmap(run)), one, initial


def _shape(setting) -> tuple[int, int]:
    import fedbandit_env.jax as fj

    env = fj.make(setting[0], **setting[1], horizon=10)
    return env.num_agents, env.num_arms


def anchor_cost(name: str, setting, runs: int) -> dict[str, float]:
    """Bytes and FLOPs per agent-step of one anchor step of ``runs`` runs."""
    _, one, carry_of = anchor_program(name, setting, 10)
    keys = jax.random.split(jax.random.PRNGKey(0), runs)
    args = jax.vmap(carry_of)(keys)
    t = jnp.ones(runs, jnp.int32)
    compiled = jax.jit(jax.vmap(one)).lower(args, t).compile()
    n = _shape(setting)[0] if name != "linucb" else setting[1]["num_agents"]
    return {k: v / (runs * n) for k, v in _cost(compiled).items()}


def port_env(port: str, setting, horizon: int):
    from bench_jax import SETTING

    import fedbandit_env.jax as fj
    from fedbandit_env.bench.evaluate import env_kwargs_for

    learner = fj.make_jax_agent(port, **SETTING.get(port, {}).get("agent_kwargs", {}))
    env_id, kwargs = setting
    kwargs = env_kwargs_for(learner, env_id, {**kwargs, "horizon": horizon})
    return fj.make(env_id, **kwargs), learner


def port_cost(port: str, setting, runs: int, rare: bool = False) -> dict[str, float]:
    """Bytes and FLOPs per agent-step of one engine step (act + step) of ``runs`` runs: a step
    without the rare work a learner puts behind a batch-level ``cond`` (``rare`` True: with
    it, as in a step where some run syncs or releases; fedbandit_env.jax.batch.traced_path)."""
    from fedbandit_env.jax.batch import traced_path
    from fedbandit_env.jax.learner import bound, params_of
    from fedbandit_env.jax.rollout import facts_of
    from fedbandit_env.scores import TracedScores, watching

    env, learner = port_env(port, setting, 1000)
    init, act = bound(learner, params_of(learner, facts_of(env)))

    def reset(key):
        k_env, k_agent = jax.random.split(key)
        obs, state = env.reset(k_env)
        return key, obs, state, init(k_agent)

    def one(carry):
        key, obs, state, ls = carry
        key, k_act, k_step = jax.random.split(key, 3)
        with watching(TracedScores()):
            action, ls = act(k_act, ls, obs)
        obs, state, *_ = env.step(k_step, state, action)
        return key, obs, state, ls

    carry = jax.vmap(reset)(jax.random.split(jax.random.PRNGKey(0), runs))
    with traced_path(rare):
        compiled = jax.jit(jax.vmap(one)).lower(carry).compile()
    return {k: v / (runs * env.num_agents) for k, v in _cost(compiled).items()}


def timed_pair(port: str, setting, anchor: str, runs: int, horizon: int, repeats: int):
    """(port agent-steps/s, anchor agent-steps/s, port regret, anchor regret, compile s of
    each), timed interleaved, compile excluded: the best of ``repeats`` each."""
    import fedbandit_env.jax as fj

    env, learner = port_env(port, setting, horizon)
    seeds = list(range(runs))
    first = fj.rollout(env, learner, seeds, checkpoints=[horizon])
    program, _, _ = anchor_program(anchor, setting, horizon)
    keys = jax.random.split(jax.random.PRNGKey(1), runs)
    start = time.perf_counter()
    compiled = program.lower(keys).compile()
    anchor_compile = time.perf_counter() - start
    port_times, anchor_times, regret = [], [], None
    for r in range(repeats):
        out = fj.rollout(env, learner, [s + (r + 1) * runs for s in seeds], checkpoints=[horizon])
        port_times.append(out.wall_time - out.compile_time)  # compile excluded
        start = time.perf_counter()
        regret = jax.block_until_ready(compiled(jax.random.split(jax.random.PRNGKey(r + 2), runs)))
        anchor_times.append(time.perf_counter() - start)
    agent_steps = runs * env.num_agents * horizon
    return {
        "port_rate": agent_steps / min(port_times),
        "anchor_rate": agent_steps / min(anchor_times),
        "port_regret": float(first.regret_by_agent[:, -1].mean()),
        "anchor_regret": float(np.asarray(regret).mean()),
        "port_compile_s": first.compile_time,
        "anchor_compile_s": anchor_compile,
    }


def evaluate_pair(runs: int, horizon: int) -> dict[str, float]:
    """A second ``evaluate(..., backend="jax")`` of one cell against numpy's, same cell."""
    from fedbandit_env.bench.evaluate import evaluate

    env_id, kwargs = MULTI
    kw = {**kwargs, "horizon": horizon}
    evaluate(env_id, "ucb1", runs=runs, seed=0, env_kwargs=kw, backend="jax")
    again = evaluate(env_id, "ucb1", runs=runs, seed=runs, env_kwargs=kw, backend="jax")
    slow = evaluate(env_id, "ucb1", runs=runs, seed=0, env_kwargs=kw)
    return {"jax_s": again.wall_time, "jax_compile_s": again.compile_time,
            "numpy_s": slow.wall_time, "ratio": slow.wall_time / again.wall_time}  # fmt: skip


EPSILONS = (0.5, 1.0, 2.0, 4.0)
SWEEP = {"ldp_ucb": ("epsilon", EPSILONS), "gossip_fed_ucb": ("epsilon", EPSILONS),
         "ucb1": ("alpha", (1.0, 2.0, 3.0, 4.0)), "linucb": ("alpha", (0.05, 0.1, 0.2, 0.4)),
         "byzres_ucb": ("f", (0, 1, 2, 3)), "fed_lin_ucb": ("epsilon", EPSILONS)}  # fmt: skip
"""Ports, the setting the sweep table varies (a float, or ByzRes-UCB's int f, a traced int32)
and its values (docs/jax.md, "Compiling once")."""


def sweep_compiles(port: str, setting, horizon: int) -> dict[str, float]:
    """Rollouts of ``port`` at each value of its :data:`SWEEP` setting, two runs each, in a
    process that holds no program: how many compiled, and their seconds."""
    import fedbandit_env.jax as fj

    env, _ = port_env(port, setting, horizon)
    fj.clear_programs()
    name, values = SWEEP[port]
    times = [fj.rollout(env, fj.make_jax_agent(port, **{name: value}), [0, 1],
                        checkpoints=[horizon]).compile_time for value in values]  # fmt: skip
    return {"compiles": sum(t > 0 for t in times), "compile_s": sum(times),
            "traced": fj.params_traced(env, fj.make_jax_agent(port))}  # fmt: skip


def main() -> None:
    from fedbandit_env.jax.learner import shipped_jax_agents
    from fedbandit_env.jax.rollout import describe_device

    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    p.add_argument("--scale", choices=sorted(SCALES), default="cpu", help="sizes (%(default)s)")
    p.add_argument("--pairs", nargs="*", default=list(PAIRS), help="ports timed against anchors")
    p.add_argument("--bytes-ports", nargs="*", default=None,
                   help="ports whose bytes per agent-step are printed (default: every port)")  # fmt: skip
    p.add_argument("--bytes-runs", type=int, default=100, help="B of the cost analysis")
    p.add_argument("--sweep-ports", nargs="*", default=list(SWEEP),
                   help="ports of the sweep table (default: every one)")  # fmt: skip
    p.add_argument("--repeats", type=int, default=3, help="timed calls of each (best kept)")
    p.add_argument("--skip-evaluate", action="store_true", help="skip the evaluate pair")
    record.add_json_option(p)
    args = p.parse_args()
    record.start(__file__, args)
    runs, horizon, lin_runs, lin_horizon, eval_runs, eval_horizon = SCALES[args.scale]
    device = describe_device()
    print(f"device: {device}; scale {args.scale}")
    record.figure("device", device)

    print(
        f"\nPorts against their anchors (agent-steps/s, compile excluded, best of {args.repeats})"
    )
    print("| port | anchor | B | T | port agent-steps/s | anchor agent-steps/s | vs anchor | "
          "target | port regret | anchor regret | port compile s |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for port in args.pairs:
        setting, anchor, target, _ = PAIRS[port]
        b, t = (lin_runs, lin_horizon) if setting is LINEAR else (runs, horizon)
        m = timed_pair(port, setting, anchor, b, t, args.repeats)
        ratio = m["port_rate"] / m["anchor_rate"]
        record.figure(f"{port} vs anchor ({device.split(':')[0]})", ratio)
        print(f"| {port} | {anchor} | {b} | {t} | {m['port_rate']:,.0f} | {m['anchor_rate']:,.0f} "
              f"| {ratio:.2f} | {target} | {m['port_regret']:.2f} | {m['anchor_regret']:.2f} "
              f"| {m['port_compile_s']:.1f} |")  # fmt: skip

    ports = shipped_jax_agents() if args.bytes_ports is None else args.bytes_ports
    print(f"\nXLA cost of one engine step per agent-step (B = {args.bytes_runs}); a step without "
          "the rare work behind a batch-level cond, and with it")  # fmt: skip
    print("| learner | bytes per agent-step | FLOPs per agent-step | with rare work: bytes | "
          "anchor | anchor's bytes | bytes vs anchor | target |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|")
    anchors: dict[str, dict[str, float]] = {}
    for port in ports:
        if port in PAIRS:
            setting, anchor, _, bytes_target = PAIRS[port]
        else:
            from bench_jax import SETTING

            raw = SETTING.get(port, {"env_id": MULTI[0], "kwargs": MULTI[1]})
            setting, anchor, bytes_target = (raw["env_id"], raw["kwargs"]), None, None
        setting = BYTES_SETTING.get(port, setting)
        try:
            cost = port_cost(port, setting, args.bytes_runs)
            rare = port_cost(port, setting, args.bytes_runs, rare=True)
        except Exception as err:  # noqa: BLE001 - a port this setting does not fit: said
            print(f"| {port} | not measured ({type(err).__name__}) | | | | | | |")
            continue
        cells = ["", "", "", ""]
        if anchor is not None:
            if anchor not in anchors:
                anchors[anchor] = anchor_cost(anchor, setting, args.bytes_runs)
            ref = anchors[anchor]["bytes"]
            cells = [anchor, f"{ref:,.0f}", f"{cost['bytes'] / ref:.2f}",
                     "" if bytes_target is None else f"{bytes_target}"]  # fmt: skip
            record.figure(f"{port} bytes vs anchor", cost["bytes"] / ref)
        record.figure(f"{port} bytes per agent-step", cost["bytes"])
        print(f"| {port} | {cost['bytes']:,.0f} | {cost['flops']:,.0f} | {rare['bytes']:,.0f} | "
              + " | ".join(cells) + " |")  # fmt: skip

    print("\nA sweep over one setting (4 values), each a rollout of 2 runs")
    print("| port | setting | values | params traced | programs compiled | compile s |")
    print("|---|---|---|---|---|---|")
    for port in args.sweep_ports:
        setting = PAIRS[port][0] if port in PAIRS else MULTI
        t = lin_horizon if setting is LINEAR else horizon
        m = sweep_compiles(port, setting, t)
        record.figure(f"{port} sweep: programs compiled", m["compiles"])
        name, values = SWEEP[port]
        print(f"| {port} | {name} | {', '.join(map(str, values))} | "
              f"{'yes' if m['traced'] else 'no'} | {m['compiles']} | {m['compile_s']:.1f} |")

    if not args.skip_evaluate:
        e = evaluate_pair(eval_runs, eval_horizon)
        print(f"\nA second evaluate(..., backend='jax') of one cell (ucb1, N = M = 10, "
              f"B = {eval_runs}, T = {eval_horizon}) against numpy's")  # fmt: skip
        print("| JAX s | its compile s | numpy s | JAX / numpy speed | target |")
        print("|---|---|---|---|---|")
        record.figure(f"second evaluate JAX / numpy B={eval_runs} ({device.split(':')[0]})",
                      e["ratio"])  # fmt: skip
        print(f"| {e['jax_s']:.2f} | {e['jax_compile_s']:.2f} | {e['numpy_s']:.2f} | "
              f"{e['ratio']:.2f} | 0.8 |")  # fmt: skip


if __name__ == "__main__":
    main()
