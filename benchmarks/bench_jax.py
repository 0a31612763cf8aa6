"""JAX backend speed: each port's agent-steps/s on the JAX backend and on the numpy engine.

For every JAX port (fedbandit_env.jax.list_jax_agents() builtins) and every batch size B in
``--runs`` (default 100 and 10^4), prints side by side in one run: the JAX rollout's
agent-steps/s (compiled once, then timed on a second call with other seeds: compile excluded,
compile time printed apart), the numpy engine's agent-steps/s (``evaluate`` through the vector
view, on the same environment and horizon) and their ratio; and the device JAX ran on. An
agent-step is one agent's pull (B x N x T per rollout). Does not assert: the machines are shared
and noisy; the floors are in docs/jax.md and rendered by render_speed_page.py.

    python benchmarks/bench_jax.py                         # every port, B = 100 and 10^4
    python benchmarks/bench_jax.py --ports ucb1 --runs 10000 --horizon 10000
    python benchmarks/bench_jax.py --numpy-max-runs 1000    # skip numpy above 1000 runs

Settings (the issue's goals): multi-armed ports on FedBandit/Heterogeneous-v0 with N = 10
agents on a ring, M = 10 arms; the gossip ports on FedBandit/GossipPath10-v0 (N = 10, M = 10);
the linear ports on FedBandit/LinearContextual-v0 with 100 agents, K = 10, d = 10.
"""

from __future__ import annotations

import argparse

import numpy as np
import record

MULTI = {"env_id": "FedBandit/Heterogeneous-v0",
         "kwargs": {"num_agents": 10, "num_arms": 10, "topology": "ring"}}  # fmt: skip
GOSSIP = {"env_id": "FedBandit/GossipPath10-v0", "kwargs": {}}
LINEAR = {"env_id": "FedBandit/LinearContextual-v0",
          "kwargs": {"num_agents": 100, "num_arms": 10, "dim": 10}}  # fmt: skip
DP_RECSYS = {"env_id": "FedBandit/Homogeneous-v0",
             "kwargs": {"num_agents": 20, "num_arms": 10, "topology": "ring",
                        "reward": {"kind": "gaussian", "sigma": 0.1}}}  # fmt: skip
HOMOG10 = {"env_id": "FedBandit/Homogeneous-v0", "kwargs": {"num_agents": 10, "num_arms": 10}}
SETTING = {
    "gossip_ucb": GOSSIP,
    "gossip_fed_ucb": GOSSIP,
    "linucb": LINEAR,
    "centralized_linucb": LINEAR,
    "fed_lin_ucb": LINEAR,
    "fed_lin_ucb_decentralized": {"env_id": "FedBandit/LinearContextual-v0",
                                  "kwargs": {"num_agents": 10, "num_arms": 10, "dim": 5,
                                             "topology": "ring"}},
    "dislinucb": {"env_id": "FedBandit/LinearContextual-v0",
                  "kwargs": {"num_agents": 10, "num_arms": 10, "dim": 10}},
    "ldp_ucb": {"env_id": "FedBandit/Homogeneous-v0",
                "kwargs": {"num_agents": 10, "num_arms": 10, "topology": "ring"}},
    "dp_mw_ucb": DP_RECSYS,
    "dp_dec_ucb": DP_RECSYS,
    **{port: {"env_id": "FedBandit/Homogeneous-v0",  # epoch 1 fits T = 200 (70 pulls)
              "kwargs": {"num_agents": 50, "num_arms": 10, "topology": "star"}}
       for port in ("cdp_mab", "ddp_mab", "hdp_mab")},
    "byzres_ucb": {"env_id": "FedBandit/Homogeneous-v0",
                   "kwargs": {"num_agents": 10, "num_arms": 4, "topology": "complete"}},
    "fed_mom_ucb": {**HOMOG10, "kwargs": {**HOMOG10["kwargs"],
                                          "reward": {"kind": "gaussian", "sigma": 0.5}},
                    "agent_kwargs": {"clients": "environment"}},
    "robust_gosine": {"env_id": "FedBandit/Homogeneous-v0",
                      "kwargs": {"num_agents": 10, "num_arms": 20, "topology": "complete"}},
}  # fmt: skip
"""Per port: the environment (id and kwargs), optional ``agent_kwargs`` and an optional
``min_horizon`` (a learner whose first epoch needs more pulls than ``--horizon``)."""


def jax_rate(agent_id: str, runs: int, horizon: int) -> tuple[float, float, str]:
    """(agent-steps/s, compile seconds, device) of the JAX rollout of ``runs`` runs."""
    import fedbandit_env.jax as fj
    from fedbandit_env.bench.evaluate import env_kwargs_for

    setting = SETTING.get(agent_id, MULTI)
    horizon = max(horizon, setting.get("min_horizon", 0))
    learner = fj.make_jax_agent(agent_id, **setting.get("agent_kwargs", {}))
    kwargs = env_kwargs_for(learner, setting["env_id"], {**setting["kwargs"], "horizon": horizon})
    env = fj.make(setting["env_id"], **kwargs)
    first = fj.rollout(env, learner, list(range(runs)), checkpoints=np.array([horizon]))
    again = fj.rollout(env, learner, list(range(runs, 2 * runs)), checkpoints=np.array([horizon]))
    run_time = again.wall_time - again.compile_time
    return runs * env.num_agents * horizon / run_time, first.compile_time, again.device


def numpy_rate(agent_id: str, runs: int, horizon: int) -> float:
    """Agent-steps/s of the numpy engine (``evaluate``) on the same setting."""
    from fedbandit_env.bench.evaluate import evaluate

    setting = SETTING.get(agent_id, MULTI)
    horizon = max(horizon, setting.get("min_horizon", 0))
    kwargs = {**setting["kwargs"], "horizon": horizon}
    res = evaluate(setting["env_id"], agent_id, runs=runs, env_kwargs=kwargs,
                   agent_kwargs=setting.get("agent_kwargs", {}),
                   checkpoints=np.array([horizon]))  # fmt: skip
    return runs * res.regret_by_agent.shape[2] * horizon / res.wall_time


def main() -> None:
    import fedbandit_env.jax as fj
    from fedbandit_env.jax.learner import shipped_jax_agents
    from fedbandit_env.jax.rollout import describe_device

    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--ports", nargs="*", default=shipped_jax_agents(), help="port ids (default: all)")
    p.add_argument("--runs", type=int, nargs="*", default=[100, 10_000], help="batch sizes B")
    p.add_argument("--horizon", type=int, default=200, help="pulls per run T (%(default)s)")
    p.add_argument("--numpy-max-runs", type=int, default=10_000,
                   help="skip the numpy engine above this B (it is slow there)")  # fmt: skip
    record.add_json_option(p)
    args = p.parse_args()
    record.start(__file__, args)
    unknown = sorted(set(args.ports) - set(fj.list_jax_agents()))
    if unknown:
        p.error(f"--ports: no JAX port {unknown}; ports: {fj.list_jax_agents()}")
    device = describe_device()
    print(f"device: {device}; T = {args.horizon}")
    record.figure("device", device)
    for runs in args.runs:
        print(f"\nB = {runs}")
        print("| port | JAX agent-steps/s | compile s | numpy agent-steps/s | JAX / numpy |")
        print("|---|---|---|---|---|")
        for agent_id in args.ports:
            fast, compile_s, _ = jax_rate(agent_id, runs, args.horizon)
            platform = device.split(":")[0]
            record.figure(f"{agent_id} JAX agent-steps/s B={runs} ({platform})", fast)
            if runs <= args.numpy_max_runs:
                slow = numpy_rate(agent_id, runs, args.horizon)
                ratio = f"{fast / slow:.2f}"
                slow_cell = f"{slow:,.0f}"
                record.figure(f"{agent_id} JAX / numpy B={runs} ({platform})", fast / slow)
            else:
                ratio = slow_cell = "not run"
            print(f"| {agent_id} | {fast:,.0f} | {compile_s:.1f} | {slow_cell} | {ratio} |")


if __name__ == "__main__":
    main()
