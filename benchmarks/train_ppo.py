"""Train PPO with one shared policy on a small heterogeneous federation, then put it on the bench.

CleanRL-style, top to bottom (docs/rl.md, "Training script and measured numbers"):

1. every agent of every env copy is one sub-env of the SB3 ``VecEnv`` adapter
   (``fedbandit_env.rl.sb3_vec_env.AgentsVecEnv``); each reset draws a new instance
   (``instance_seed=None``), so the policy must learn a bandit *algorithm*, not an instance;
2. observations are each agent's sufficient statistics plus its neighbours' (the adapter shares
   ``[counts, sums]`` over ``neighbors``); the training reward is minus the pseudo-regret of the
   pull against the global best arm (``reward_mode="regret"``, training-time information only);
3. PPO (stable-baselines3) trains; the script prints the training throughput in agent-steps/s;
4. the saved model runs as the registered learner ``sb3_policy`` (``baselines.SB3Policy``),
   sampled from its action distribution with the agents' RNG and greedily
   (``deterministic=True``), through ``fedbandit_env.bench.evaluate`` on fresh seeds of the same
   distribution, next to UCB1, the statistics-sharing UCB1, GossipUCB (``--compare``; every id
   must be registered, checked before training) and uniform play.

Writes ``ppo_regret.png``, ``ppo_results.md`` and the model ``ppo_fedbandit.zip`` into
``--out`` (git-ignored) and prints the Markdown table. Default scale runs in about a minute;
``--full`` trains 20x longer.

    python benchmarks/train_ppo.py            # small
    python benchmarks/train_ppo.py --full     # longer training
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import matplotlib
import record

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
from stable_baselines3 import PPO  # noqa: E402

import fedbandit_env  # noqa: E402
from fedbandit_env.bench import evaluate  # noqa: E402
from fedbandit_env.rl.sb3_vec_env import AgentsVecEnv  # noqa: E402

# ----------------------------------------------------------------------------- parameters
parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--env-id", default="FedBandit/Heterogeneous-v0")
parser.add_argument("--num-agents", type=int, default=5)
parser.add_argument("--num-arms", type=int, default=5)
parser.add_argument("--horizon", type=int, default=200)
parser.add_argument("--topology", default="ring")
parser.add_argument("--num-copies", type=int, default=16, help="env copies (runs) per rollout")
parser.add_argument("--total-timesteps", type=int, default=200_000, help="agent-steps")
parser.add_argument("--n-steps", type=int, default=200, help="PPO rollout length per sub-env")
parser.add_argument("--batch-size", type=int, default=2000)
parser.add_argument("--n-epochs", type=int, default=4)
parser.add_argument("--learning-rate", type=float, default=1e-3)
parser.add_argument("--gamma", type=float, default=0.5)
parser.add_argument("--ent-coef", type=float, default=0.003)
parser.add_argument("--net", type=int, nargs="+", default=[64, 64])
parser.add_argument("--seed", type=int, default=0, help="training seed (env runs and PPO)")
parser.add_argument("--eval-runs", type=int, default=50)
parser.add_argument("--eval-seed", type=int, default=1_000_000, help="disjoint from training")
parser.add_argument("--compare", nargs="+", default=["ucb1", "ucb1_shared", "gossip_ucb"])
parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
parser.add_argument("--out", default="benchmarks/out/train_ppo")
parser.add_argument("--full", action="store_true", help="train 20x longer")
record.add_json_option(parser)
args = parser.parse_args()
record.start(__file__, args)
if args.full:
    args.total_timesteps *= 20
unknown = sorted(set(args.compare) - set(fedbandit_env.list_agents()))
if unknown:
    parser.error(f"--compare: {unknown} not registered; registered: {fedbandit_env.list_agents()}")

torch.set_num_threads(args.threads)
out = Path(args.out)
out.mkdir(parents=True, exist_ok=True)
env_kwargs = {
    "num_agents": args.num_agents,
    "num_arms": args.num_arms,
    "horizon": args.horizon,
    "topology": args.topology,
    "instance_seed": None,  # every reset draws a new instance
}

# ----------------------------------------------------------------------------- training
venv = AgentsVecEnv(args.env_id, num_copies=args.num_copies, reward_mode="regret", **env_kwargs)
model = PPO(
    "MlpPolicy",
    venv,
    n_steps=args.n_steps,
    batch_size=args.batch_size,
    n_epochs=args.n_epochs,
    learning_rate=args.learning_rate,
    gamma=args.gamma,
    ent_coef=args.ent_coef,
    policy_kwargs={"net_arch": list(args.net)},
    seed=args.seed,
    device="cpu",
    verbose=0,
)
start = time.perf_counter()
model.learn(total_timesteps=args.total_timesteps)
train_time = time.perf_counter() - start
steps_per_s = model.num_timesteps / train_time
model_path = out / "ppo_fedbandit.zip"
model.save(model_path)
record.figure("PPO agent-steps", model.num_timesteps)
record.figure("PPO training s", train_time)
record.figure("PPO agent-steps/s", steps_per_s)
print(
    f"PPO: {model.num_timesteps} agent-steps in {train_time:.1f} s = {steps_per_s:.0f} "
    f"agent-steps/s ({venv.num_envs} sub-envs = {args.num_copies} copies x {args.num_agents})"
)

# ----------------------------------------------------------------------------- evaluation
results = {}
common = {"runs": args.eval_runs, "seed": args.eval_seed, "env_kwargs": env_kwargs}
# sampled: arms drawn from the policy's distribution with the agents' own RNG stream; greedy:
# model.predict(deterministic=True). A greedy policy cannot explore on its own: every agent starts
# from the same all-zero features, so it keeps pulling the one arm it first picked.
for mode, deterministic in (("sampled", False), ("greedy", True)):
    results[f"ppo ({mode})"] = evaluate(
        args.env_id,
        "sb3_policy",
        agent_kwargs={
            "model_path": str(model_path),
            "trust_model": True,  # our own file, just written
            "deterministic": deterministic,
        },
        **common,
    )
for agent_id in args.compare:
    results[agent_id] = evaluate(args.env_id, agent_id, **common)
results["uniform"] = evaluate(args.env_id, "uniform", **common)

# ----------------------------------------------------------------------------- report
lines = [
    f"Env `{args.env_id}` {env_kwargs}; {args.eval_runs} evaluation runs (seeds from "
    f"{args.eval_seed}, disjoint from training); PPO trained {model.num_timesteps} agent-steps "
    f"at {steps_per_s:.0f} agent-steps/s.",
    "",
    "| learner | final regret / agent (mean) | 95% CI | messages / run |",
    "|---|---|---|---|",
]
for name, res in sorted(results.items(), key=lambda kv: kv[1].final_regret_per_agent.mean()):
    final = res.final_regret_per_agent
    half = 1.96 * final.std(ddof=1) / np.sqrt(len(final))
    msgs = res.messages.sum(axis=1).mean()
    lines.append(f"| {name} | {final.mean():.2f} | ±{half:.2f} | {msgs:.0f} |")
table = "\n".join(lines)
(out / "ppo_results.md").write_text(table + "\n")
print(table)

fig, ax = plt.subplots(figsize=(6, 4))
for name, res in results.items():
    mean = res.regret_per_agent.mean(axis=0)
    ax.plot(res.steps, mean, label=name)
ax.set_xlabel("step t")
ax.set_ylabel("cumulative regret per agent")
ax.set_title(f"PPO vs baselines, {args.num_agents} agents on a {args.topology}")
ax.legend()
fig.tight_layout()
fig.savefig(out / "ppo_regret.png", dpi=120)
print(f"wrote {out / 'ppo_regret.png'}, {out / 'ppo_results.md'}, {model_path}")
