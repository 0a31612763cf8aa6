"""Throughput of the field-coverage agents next to ``gossip_ucb`` (vector view, environment
included).

    OMP_NUM_THREADS=1 python benchmarks/bench_field.py [--horizon 2000] [--runs 100]

Every agent plays the same cell: homogeneous Bernoulli family, N = 10 agents on a ring, M = 10
arms, B = 100 runs, T pulls (``--horizon``), with the channels its ``channel_spec`` asks for.
agent-steps/s = B * N * T / wall time of the whole episode (communication-only steps included,
so a learner that takes them pays for them). ``AGENTS`` is a plain list of (agent id, environment
keyword overrides); ids not yet installed are registered from pyproject.toml's entry points.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import fedbandit_env
from fedbandit_env.agent_registry import list_agents, make_agent, register_agent

BASE = {"family": "homogeneous", "num_agents": 10, "num_arms": 10, "topology": "ring",
        "reward": "bernoulli"}

AGENTS: list[tuple[str, dict]] = [
    ("gossip_ucb", {}),
    ("dducb", {}),
    ("coop_ucb2", {}),
    ("gosine", {}),
    ("ldp_ucb", {}),
]


def _ensure_registered() -> None:
    """Register the ids of this checkout's pyproject.toml that the installed metadata lacks."""
    try:
        import tomllib  # Python 3.11+
    except ImportError:  # pragma: no cover - 3.10: rely on the installed entry points
        return
    path = Path(__file__).resolve().parents[1] / "pyproject.toml"
    eps = tomllib.loads(path.read_text())["project"]["entry-points"]["fedbandit.agents"]
    known = set(list_agents())
    for agent_id, target in eps.items():
        if agent_id not in known:
            register_agent(agent_id, target)


def rate(agent_id: str, overrides: dict, runs: int, horizon: int) -> float:
    policy = make_agent(agent_id)
    kwargs = {**BASE, **overrides, "horizon": horizon}
    preview = fedbandit_env.make_vec("FedBandit/Homogeneous-v0", num_runs=1, **kwargs)
    channels = policy.channel_spec(preview.config) or {}
    venv = fedbandit_env.make_vec("FedBandit/Homogeneous-v0", num_runs=runs, channels=channels,
                                  **kwargs)
    obs, _ = venv.reset(seed=0)
    policy.reset(venv.facts, venv.agent_rng())
    start = time.perf_counter()
    while not venv.engine.truncated:
        action = policy.act(obs)
        obs, *_ = venv.step(action.arms, action.messages, action.pull)
    return runs * venv.num_agents * horizon / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--horizon", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=100)
    args = parser.parse_args()
    _ensure_registered()
    print(f"B={args.runs}, N=10 ring, M=10, T={args.horizon}")
    print("| agent | agent-steps/s | vs gossip_ucb |")
    print("|---|---|---|")
    base = None
    for agent_id, overrides in AGENTS:
        r = rate(agent_id, overrides, args.runs, args.horizon)
        base = r if agent_id == "gossip_ucb" else base
        ratio = f"{r / base:.2f}" if base else "-"
        print(f"| {agent_id} | {r:,.0f} | {ratio} |")


if __name__ == "__main__":
    main()
