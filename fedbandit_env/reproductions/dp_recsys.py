"""Reproduce the experiment of Li, Song & Fragouli, "Federated Recommendation System via Differential
Privacy" (Section IV; docs/dp-recsys.md) with the suite's reference agents.

Protocol (the paper's Section IV): M = 20 agents on the cycle C_20, K = 10 arms with means 0.9, 0.8, ..., 0.0,
Gaussian rewards N(mu, 0.1^2) (the agents clip to [0, 1] for their counters), DP-Dec-UCB
(``dp_dec_ucb``) with kappa = d_max/(d_max+1) = 2/3 and index sigma = 1; sweep A: epsilon in
{1.5, 2, 5} at rho = 2; sweep B: rho in {1.2, 2, 4} at epsilon = 2; a non-private reference
(epsilon = inf), also without clipping (the reference prototype's non-private run). Extra (the paper
has no experiment for it): DP-MW-UCB (``dp_mw_ucb``) with Bernoulli rewards and epsilon in
{1.5, 2, 5, inf}. Regret = network-total cumulative pseudo-regret R(t), mean +- std over paired
seeds (the same seeds for every configuration).

Prints and writes to ``--out`` the claims table (one row per statement of the paper's Section IV
and per prediction of ours (docs/dp-recsys.md), verdicts computed by fedbandit_env.bench.claims), our R(t) next
to the reference prototype's numbers (docs/dp-recsys.md), a timing table (the default paper timing next to
``timing="latency"``) and a figure (with the ``plots`` extra); ``--claims FILE`` writes the rows
as a claims file (docs/reproductions.md).

    fedbandit reproduce dp-recsys            # CI scale: T = 2500, 10 seeds (~1 min)
    fedbandit reproduce dp-recsys --full     # T = 10^4, 20 seeds, + T = 10^5 (1 seed)
    fedbandit reproduce dp-recsys --paper-scale --backend jax   # T = 10^5, 100 runs (a GPU)
    python -m fedbandit_env.reproductions.dp_recsys ...   # the same

``--backend jax`` runs every configuration on the compiled JAX backend (docs/jax.md), one
after another in this process. ``--paper-scale`` (JAX only) is the paper's grid (M = 20 on
C_20, K = 10, epsilon in {1.5, 2, 5} at rho = 2 and rho in {1.2, 2, 4} at epsilon = 2, the
DP-MW-UCB sweep) at T = 10^5 with 100 runs per configuration, also for the long runs: the
paper states neither T nor its number of runs (docs/dp-recsys.md, "Scale").

Every configuration is one task of fedbandit_env.reproductions.harness.run_tasks (``--executor
joblib --jobs 2`` runs them in two processes, ``--executor ray`` on Ray; the numbers do not
depend on the executor).
"""

from __future__ import annotations

import math
import time

import numpy as np

from agents import DPDecentralizedUCB, DPMasterWorkerUCB
from agents.graph_constants import graph_constants
from fedbandit_env.bench import claims as C
from fedbandit_env.bench.evaluate import default_checkpoints
from fedbandit_env.bench.executors import EvalTask
from fedbandit_env.graphs import consensus_weights, default_kappa, make_graph
from fedbandit_env.reproductions import harness

# ------------------------------------------------------------------------------ parameters
parser = harness.parser("dp-recsys", __doc__, executor=None, backend=True)
harness.add_paper_scale(parser, "T = 10^5 and 100 runs per configuration of Sec. IV's grid")
parser.add_argument("--agents", type=int, default=20, help="M, agents on the cycle C_M")
parser.add_argument("--arms", type=int, default=10, help="K, arms with evenly spaced means")
parser.add_argument("--horizon", type=int, default=None, help="T (default 2500, --full 10^4)")
parser.add_argument("--seeds", type=int, default=None, help="runs per config (10, --full 20)")
parser.add_argument("--long-horizon", type=int, default=None, help="1-seed long run (--full 10^5)")
parser.add_argument("--seed", type=int, default=0, help="first run seed")
parser.add_argument(
    "--delta-horizon",
    type=int,
    default=10_000,
    help="the T in delta (default 10^4, the paper-scale T, so that R(t) at t <= T compares with "
    "the prototype's numbers; 0: the run's own T)",
)
parser.add_argument(
    "--reward-sigma",
    type=float,
    default=0.1,
    help="Gaussian reward std (rewards are clipped to [0, 1] for the counters; docs/dp-recsys.md)",
)
args = parser.parse_args()
harness.check_paper_scale(parser, args)

M, K = args.agents, args.arms
PAPER_SCALE = args.paper_scale
T = args.horizon or (100_000 if PAPER_SCALE else 10_000 if args.full else 2_500)
SEEDS = args.seeds or (100 if PAPER_SCALE else 20 if args.full else 10)
EXECUTOR = harness.executor_of(args)
LONG_T = args.long_horizon
if LONG_T is None:
    LONG_T = 100_000 if (args.full or PAPER_SCALE) else 0
LONG_SEEDS = SEEDS if PAPER_SCALE else 1  # the long runs: 1 seed at --full, all at paper scale
T_DELTA = args.delta_horizon or None
MEANS = np.linspace(0.9, 0.0, K)
ENV = "FedBandit/Homogeneous-v0"
GAUSSIAN = {"kind": "gaussian", "sigma": args.reward_sigma}
SWEEP_A = [1.5, 2.0, 5.0]  # epsilon at rho = 2
SWEEP_B = [1.2, 2.0, 4.0]  # rho at epsilon = 2
MW_EPS = [1.5, 2.0, 5.0, math.inf]
CLIP_SHOWN = (0.9, 0.8, 0.1, 0.0)
UNCLIPPED = (-100.0, 100.0)  # no clipping of N(mu, 0.1^2) rewards in practice (epsilon = inf)
CHECKPOINTS = [t for t in (100, 1000, 2500, 5000, 10_000) if t <= T]
SCALE_NAME = "paper" if PAPER_SCALE else "full" if args.full else "CI"
# the reference prototype (docs/dp-recsys.md; NOT the paper): R(100), R(1000), R(2500), R(5000), R(10^4), and
# the std of R(10^4) over its 10 seeds
PROTOTYPE_DEC = {
    "eps=1.5, rho=2": ((846, 7375, 15212, 23305, 30747), 273),
    "eps=2, rho=2": ((832, 6930, 13480, 19270, 23942), 265),
    "eps=5, rho=2": ((803, 5270, 8198, 9819, 10897), 89),
    "eps=2, rho=1.2": ((808, 5814, 9615, 12033, 13477), 231),
    "eps=2, rho=4": ((857, 7882, 17532, 29424, 44034), 268),
    "non-private, rho=2": ((758, 2428, 2798, 3031, 3240), 9),
}
PROTOTYPE_MW = {
    "eps=1.5": ((355, 7389, 18711, 33137, 54045), 332),
    "eps=2": ((329, 7868, 17688, 30269, 46805), 246),
    "eps=5": ((312, 6662, 13306, 19837, 26373), 230),
    "non-private": ((599, 2840, 4341, 5638, 6976), 99),
}
PROTOTYPE_AT = (100, 1000, 2500, 5000, 10_000)
PROTOTYPE_SEEDS = 10
out_dir = harness.out_dir(args)
PAPER = "dp-recsys"
DEC_ID, MW_ID = DPDecentralizedUCB.agent_id, DPMasterWorkerUCB.agent_id
SCALE = {"T": T, "runs": SEEDS, "agents": M, "arms": K}


def fmt_eps(eps: float) -> str:
    return "non-private" if math.isinf(eps) else f"eps={eps:g}"


def learner(agent_id: str, **kwargs):
    """The learner of a task and its backend: the numpy agent, or its JAX port with
    ``--backend jax`` (fedbandit_env.reproductions.harness.learner)."""
    return harness.learner(args, agent_id, **kwargs)


def task(built, horizon: int, seeds: int, reward) -> EvalTask:
    """One configuration: ``built`` = (learner, backend) of :func:`learner`; the regret is
    recorded at the default checkpoints and at the prototype's (CHECKPOINTS)."""
    agent, backend = built
    env_kwargs = {
        "num_agents": M,
        "means": MEANS,
        "horizon": horizon,
        "topology": "ring",
        "reward": reward,
    }
    attrs = ("decision_rounds",) if agent.agent_id == DPMasterWorkerUCB.agent_id else ()
    steps = np.union1d(default_checkpoints(horizon), [t for t in CHECKPOINTS if t <= horizon])
    return EvalTask(ENV, agent, runs=seeds, seed=args.seed, env_kwargs=env_kwargs,
                    checkpoints=steps, attrs=attrs, backend=backend)  # fmt: skip


def clipped_mean(mu: float, sigma: float, lo: float = 0.0, hi: float = 1.0) -> float:
    """E[clip(X, lo, hi)] for X ~ N(mu, sigma^2): the mean the agent's counters see (docs/dp-recsys.md)."""
    cdf = lambda z: 0.5 * (1.0 + math.erf(z / math.sqrt(2.0)))  # noqa: E731
    pdf = lambda z: math.exp(-0.5 * z * z) / math.sqrt(2.0 * math.pi)  # noqa: E731
    a, b = (lo - mu) / sigma, (hi - mu) / sigma
    return lo * cdf(a) + hi * (1 - cdf(b)) + mu * (cdf(b) - cdf(a)) + sigma * (pdf(a) - pdf(b))


def at(result: dict, t: int) -> np.ndarray:
    return result["R"][:, int(np.searchsorted(result["steps"], t))]


# ------------------------------------------------------------------------------ graph constants
G = make_graph("ring", M)
KAPPA = default_kappa(G)
CONST = graph_constants(consensus_weights(G, KAPPA), kappa=KAPPA)

# ------------------------------------------------------------------------------ runs
DEC = {f"eps={eps:g}, rho=2": {"epsilon": eps, "rho": 2.0} for eps in SWEEP_A}
for rho in SWEEP_B:
    DEC.setdefault(f"eps=2, rho={rho:g}", {"epsilon": 2.0, "rho": rho})
DEC["non-private, rho=2"] = {"epsilon": math.inf}
UNCLIPPED_KEY = "non-private, rho=2, no clipping"
tasks: dict[tuple[str, str], EvalTask] = {}
for key, kw in DEC.items():
    for timing in ("paper", "latency"):
        agent = learner(DEC_ID, delta_horizon=T_DELTA, timing=timing, **kw)
        tasks["dec", timing, key] = task(agent, T, SEEDS, GAUSSIAN)
tasks["dec", "paper", UNCLIPPED_KEY] = task(
    learner(DEC_ID, epsilon=math.inf, clip=UNCLIPPED, delta_horizon=T_DELTA), T, SEEDS, GAUSSIAN
)
for eps in MW_EPS:
    for timing in ("paper", "latency"):
        agent = learner(MW_ID, epsilon=eps, delta_horizon=T_DELTA, timing=timing)
        tasks["mw", timing, fmt_eps(eps)] = task(agent, T, SEEDS, "bernoulli")
LONG_KEYS = ["eps=1.5, rho=2", "eps=2, rho=2", "eps=5, rho=2", "eps=2, rho=1.2", "eps=2, rho=4"]
if LONG_T:
    for key in LONG_KEYS:
        tasks["long", "paper", key] = task(learner(DEC_ID, **DEC[key]), LONG_T, LONG_SEEDS,
                                           GAUSSIAN)  # fmt: skip

start = time.perf_counter()
done = harness.run_tasks(tasks, args)
wall = time.perf_counter() - start
results: dict[tuple[str, str], dict[str, dict]] = {}
for (group, timing, key), (res, extra) in done.items():
    results.setdefault((group, timing), {})[key] = {
        "steps": res.steps,
        "R": res.regret_network,  # (seeds, checkpoints)
        "messages": res.messages.sum(axis=1),
        "wall": res.wall_time,
        "decision_rounds": extra.get("decision_rounds"),
    }
dec, dec_latency = results["dec", "paper"], results["dec", "latency"]
mw, mw_latency = results["mw", "paper"], results["mw", "latency"]
long = results.get(("long", "paper"), {})


# ------------------------------------------------------------------------------ claims
def final(r: dict) -> np.ndarray:
    return r["R"][:, -1]


def se(x: np.ndarray) -> float:
    return float(x.std(ddof=1) / math.sqrt(len(x))) if len(x) > 1 else math.nan


def steps_se(results: dict, keys: list[str]) -> list[float]:
    """Standard errors of the paired differences of R(T) between consecutive configurations."""
    return [se(final(results[b]) - final(results[a])) for a, b in zip(keys, keys[1:], strict=False)]


def margins(results: dict, keys: list[str], decreasing: bool) -> float:
    """Smallest margin between consecutive R(T) in the stated direction, in seed std (the
    larger per-run standard deviation of the two)."""
    out = []
    for a, b in zip(keys, keys[1:], strict=False):
        fa, fb = final(results[a]), final(results[b])
        margin = (fa.mean() - fb.mean()) if decreasing else (fb.mean() - fa.mean())
        spread = max(fa.std(ddof=1), fb.std(ddof=1)) if len(fa) > 1 else math.nan
        out.append(margin / max(spread, 1e-9))
    return float(min(out))


def means(results: dict, keys: list[str]) -> list[float]:
    return [float(final(results[k]).mean()) for k in keys]


def prototype_check(results: dict, prototype: dict, keys: list[str]) -> tuple[C.Check, dict]:
    """Our R(t) against the prototype's at t = T, or at t = 10^4 when T is longer (the
    paper scale), within 3 se of the difference. The prototype prints its std only at 10^4;
    at an earlier checkpoint its se is scaled by R(t) / R(10^4)."""
    instance = M == 20 and K == 10 and T >= PROTOTYPE_AT[0] and T_DELTA == 10_000
    instance = instance and args.reward_sigma == 0.1 and (T in PROTOTYPE_AT or T > 10_000)
    if not instance:
        why = (
            "the prototype's instance is M = 20, K = 10, sigma = 0.1, delta with T = 10^4 and "
            f"T in {PROTOTYPE_AT} or beyond; this run differs"
        )
        return C.not_testable(why), {}
    t_ref = T if T in PROTOTYPE_AT else PROTOTYPE_AT[-1]
    idx = PROTOTYPE_AT.index(t_ref)
    ours, targets, ses = [], [], []
    for key in keys:
        values, std = prototype[key]
        target = values[idx]
        proto_se = std / math.sqrt(PROTOTYPE_SEEDS) * target / values[-1]
        mine = at(results[key], t_ref)
        ours.append(float(mine.mean()))
        targets.append(float(target))
        ses.append(math.hypot(se(mine), proto_se))
    shown = {k: f"{o:,.0f} [{t:,.0f}]" for k, o, t in zip(keys, ours, targets, strict=False)}
    return C.all_z_close(ours, targets, ses, z=3.0), shown


rows: list[C.Claim] = []
a_keys = ["eps=1.5, rho=2", "eps=2, rho=2", "eps=5, rho=2"]
a_all = [*a_keys, "non-private, rho=2"]
b_keys = ["eps=2, rho=1.2", "eps=2, rho=2", "eps=2, rho=4"]
eps_values = dict(zip(a_all, ["1.5", "2", "5", "inf"], strict=False))
direction = "increases" if means(dec, a_keys)[-1] > means(dec, a_keys)[0] else "decreases"
rows.append(
    C.claim(
        paper=PAPER,
        figure="Fig. 2(a)",
        text="Sec. IV, literally: regret increases with epsilon (epsilon in {1.5, 2, 5}, rho = 2)",
        check=C.ordered_steps(means(dec, a_keys), steps_se(dec, a_keys), increasing=True, z=3),
        ours={f"eps={eps_values[k]}": m for k, m in zip(a_keys, means(dec, a_keys), strict=False)},
        scale=SCALE,
        reason=f"measured: regret {direction} as epsilon grows. We read the sentence as a "
        "typo (docs/dp-recsys.md): the privacy width is proportional to 1/epsilon, Theorem 4's privacy term "
        "falls as epsilon grows, and the same paragraph concludes that the runs show a "
        "privacy/regret trade-off (next row)",
    )
)
rows.append(
    C.claim(
        paper=PAPER,
        figure="Fig. 2(a)",
        text="Sec. IV: the runs show a trade-off between regret and privacy (more privacy, i.e. "
        "smaller epsilon, more regret; non-private at the bottom)",
        check=C.ordered_steps(means(dec, a_all), steps_se(dec, a_all), increasing=False, z=3),
        ours={f"eps={eps_values[k]}": m for k, m in zip(a_all, means(dec, a_all), strict=False)},
        scale=SCALE,
    )
)
rows.append(
    C.claim(
        paper=PAPER,
        figure="Fig. 2(b)",
        text="Sec. IV: regret increases with rho (rho in {1.2, 2, 4}, epsilon = 2)",
        check=C.ordered_steps(means(dec, b_keys), steps_se(dec, b_keys), increasing=True, z=3),
        ours={k.split(", ")[1]: m for k, m in zip(b_keys, means(dec, b_keys), strict=False)},
        scale=SCALE,
    )
)
rows.append(
    C.claim(
        paper=PAPER,
        figure="Fig. 2(a), 2(b)",
        text="magnitudes of the regret curves",
        check=C.not_testable(
            "the paper prints no number: no axis value in the text, and T, the arm means, sigma, "
            "kappa, the number of runs and whether regret is per agent or network-total are "
            "not stated (docs/dp-recsys.md)"
        ),
        ours={k: m for k, m in zip(a_all, means(dec, a_all), strict=False)},
        scale=SCALE,
    )
)
rows.append(
    C.claim(
        paper=PAPER,
        figure="Fig. 2(a)",
        text="Prediction 1 (our reading of Sec. IV): R(T; eps=1.5) > R(T; eps=2) > R(T; eps=5) > "
        "R(T; non-private), margins far larger than the seed spread",
        check=C.at_least(margins(dec, a_all, decreasing=True), 3.0),
        ours=round(margins(dec, a_all, decreasing=True), 2),
        scale=SCALE,
        source="spec",
        note="ours: the smallest margin in seed std",
    )
)
rows.append(
    C.claim(
        paper=PAPER,
        figure="Fig. 2(b)",
        text="Prediction 2: R(T; rho=1.2) < R(T; rho=2) < R(T; rho=4), margins far larger than "
        "the seed spread",
        check=C.at_least(margins(dec, b_keys, decreasing=False), 3.0),
        ours=round(margins(dec, b_keys, decreasing=False), 2),
        scale=SCALE,
        source="spec",
        note="ours: the smallest margin in seed std",
    )
)
growth = {}
for name, group in (("dec", dec), ("mw", mw)):
    for key, r in group.items():
        first = at(r, T // 2).mean()
        growth[f"{name} {key}"] = float((final(r).mean() - first) / max(first, 1e-9))
worst = max(growth, key=growth.get)
rows.append(
    C.claim(
        paper=PAPER,
        figure="Fig. 2(a), 2(b)",
        text="Prediction 3 (shape, inferred): sublinear, R(T) - R(T/2) < R(T/2) "
        "for every configuration",
        check=C.at_most(max(growth.values()), 0.999999),
        ours={"largest (R(T) - R(T/2)) / R(T/2)": growth[worst], "at": worst},
        scale=SCALE,
        source="spec",
    )
)
mw_keys = ["eps=1.5", "eps=2", "eps=5", "non-private"]
rows.append(
    C.claim(
        paper=PAPER,
        figure="Alg. 1 (no figure)",
        text="Prediction 4: DP-MW-UCB, R(T; 1.5) > R(T; 2) > R(T; 5) > R(T; non-private), "
        "margins far larger than the seed spread (the paper has no experiment for Alg. 1)",
        check=C.at_least(margins(mw, mw_keys, decreasing=True), 3.0),
        ours=round(margins(mw, mw_keys, decreasing=True), 2),
        scale=SCALE,
        source="spec",
        note="ours: the smallest margin in seed std",
    )
)
private_keys = [k for k in DEC if k != "non-private, rho=2"]
check, shown = prototype_check(dec, PROTOTYPE_DEC, private_keys)
rows.append(
    C.claim(
        paper=PAPER,
        figure="Prototype",
        text="DP-Dec-UCB, private configurations: R(T) equals the reference prototype's "
        "within 3 se",
        check=check,
        ours=shown or None,
        scale=SCALE,
        source="spec",
    )
)
check, shown = prototype_check(dec, PROTOTYPE_DEC, ["non-private, rho=2"])
rows.append(
    C.claim(
        paper=PAPER,
        figure="Prototype",
        text="DP-Dec-UCB, non-private (rewards clipped to [0, 1], the agent's default): R(T) "
        "equals the prototype within 3 se",
        check=check,
        ours=shown or None,
        scale=SCALE,
        source="spec",
        reason=""
        if check.verdict != "not reproduced"
        else "the agent clips rewards to [0, 1] also at epsilon = inf; the prototype's "
        "non-private run does not (next row: without clipping it agrees). Clipping moves the "
        f"means the counters see (0.9 -> {clipped_mean(0.9, args.reward_sigma):.3f}, 0.0 -> "
        f"{clipped_mean(0.0, args.reward_sigma):.3f}) and shrinks the gaps 0.9-0.8 and 0.1-0.0 "
        "(docs/dp-recsys.md)",
    )
)
unclipped = {"non-private, rho=2": dec[UNCLIPPED_KEY]}
check, shown = prototype_check(unclipped, PROTOTYPE_DEC, ["non-private, rho=2"])
rows.append(
    C.claim(
        paper=PAPER,
        figure="Prototype",
        text="DP-Dec-UCB, non-private without clipping (clip = (-100, 100)): R(T) equals the "
        "prototype within 3 se",
        check=check,
        ours=shown or None,
        scale=SCALE,
        source="project",
        reason=""
        if check.verdict != "not reproduced"
        else "clipping accounts for "
        f"{final(dec['non-private, rho=2']).mean() - final(dec[UNCLIPPED_KEY]).mean():,.0f} of "
        "the non-private gap to the prototype (previous row); the rest is at the edge of the "
        "tolerance (our runs against the prototype's 10; docs/dp-recsys.md)",
    )
)
lat, pap = final(dec_latency["non-private, rho=2"]), final(dec["non-private, rho=2"])
rows.append(
    C.claim(
        paper=PAPER,
        figure="Prototype",
        text='DP-Dec-UCB, non-private: timing="latency" (one step late) changes R(T) by at most '
        "1 % against the paper timing",
        check=C.relative_close(float(lat.mean()), float(pap.mean()), 0.01),
        ours={"latency": lat.mean(), "paper": pap.mean()},
        scale=SCALE,
        source="project",
    )
)
check, shown = prototype_check(mw, PROTOTYPE_MW, mw_keys)
rows.append(
    C.claim(
        paper=PAPER,
        figure="Prototype",
        text="DP-MW-UCB (Bernoulli): R(T) equals the prototype within 3 se for every epsilon",
        check=check,
        ours=shown or None,
        scale=SCALE,
        source="spec",
    )
)
if long:
    ratios = {
        k: float((at(r, LONG_T).mean() - at(r, 10_000).mean()) / at(r, 10_000).mean())
        for k, r in long.items()
    }
    long_check = C.at_most(max(ratios.values()), 0.999999)
else:
    ratios = None
    long_check = C.not_testable("needs the T = 10^5 runs of --full (--long-horizon)")
rows.append(
    C.claim(
        paper=PAPER,
        figure="Long run",
        text="T = 10^5, 1 run per private configuration: the curves flatten, "
        "R(10^5) - R(10^4) < R(10^4)",
        check=long_check,
        ours=ratios,
        scale={"T": LONG_T, "runs": LONG_SEEDS, "agents": M, "arms": K},
        source="spec",
    )
)

# ------------------------------------------------------------------------------ table
lines = [
    f"# DP recommender paper (Li, Song & Fragouli) — reproduction, T = {T}, {SEEDS} seeds, M = {M}, K = {K}",
    "",
    f"Cycle C_{M}, kappa = {KAPPA:.4f} (d_max/(d_max+1)), c0 = {CONST.c0:.2f}, "
    f"c_i in [{CONST.c.min():.1f}, {CONST.c.max():.1f}] (numpy eigh, per agent). "
    f"delta uses T = {T_DELTA or T}. Wall time {wall:.0f} s ({EXECUTOR}"
    + (f", {args.jobs} jobs" if EXECUTOR == "joblib" else "")
    + ").",
    "",
    "Means the counters see with rewards clipped to [0, 1] (docs/dp-recsys.md; arms 0.9, 0.8, 0.1, 0.0): "
    + ", ".join(f"{mu:.1f} -> {clipped_mean(mu, args.reward_sigma):.4f}" for mu in CLIP_SHOWN)
    + f"; the gaps 0.9-0.8 and 0.1-0.0 become "
    f"{clipped_mean(0.9, args.reward_sigma) - clipped_mean(0.8, args.reward_sigma):.4f} and "
    f"{clipped_mean(0.1, args.reward_sigma) - clipped_mean(0.0, args.reward_sigma):.4f}.",
    "",
    "## Claims",
    "",
    C.to_markdown(rows),
    "",
    "## DP-Dec-UCB: R(t) mean ± std (network total); [reference prototype, not the paper; "
    "T = 10^4, 10 seeds, delta with T = 10^4]",
    "",
    "| config | " + " | ".join(f"R({t})" for t in CHECKPOINTS) + " | R(T)/M |",
    "|---|" + "---|" * (len(CHECKPOINTS) + 1),
]


def curve_row(name: str, r: dict, proto: tuple | None) -> str:
    cells = []
    for t in CHECKPOINTS:
        v = at(r, t)
        ref = f" [{proto[0][PROTOTYPE_AT.index(t)]:,}]" if proto is not None else ""
        cells.append(f"{v.mean():,.0f} ± {v.std():,.0f}{ref}")
    return f"| {name} | " + " | ".join(cells) + f" | {final(r).mean() / M:,.1f} |"


proto_ok = M == 20 and K == 10
for key, r in dec.items():
    proto = PROTOTYPE_DEC.get(key if key != UNCLIPPED_KEY else "non-private, rho=2")
    lines.append(curve_row(key, r, proto if proto_ok else None))
lines += [
    "",
    "## DP-MW-UCB (Bernoulli rewards): R(t), decision rounds and messages",
    "",
    "| config | "
    + " | ".join(f"R({t})" for t in CHECKPOINTS)
    + " | decision rounds | messages (every round would be) |",
    "|---|" + "---|" * (len(CHECKPOINTS) + 2),
]
for key, r in mw.items():
    row = curve_row(key, r, PROTOTYPE_MW.get(key) if proto_ok else None)
    rounds = r["decision_rounds"].mean()
    every = 2 * M * (T - K)
    row = row.rsplit(" | ", 1)[0] + f" | {rounds:,.0f} | {r['messages'].mean():,.0f} ({every:,}) |"
    lines.append(row)
lines += [
    "",
    '## Timing: the papers\' protocols (default) against timing="latency"',
    "",
    "Paper timing runs every server round / consensus round as a communication-only step "
    "(docs/architecture.md); latency sends with the pulls and uses the replies one step later. "
    "R(T): network total, mean ± std over the same seeds.",
    "",
    "| agent | config | R(T) paper | R(T) latency | decision rounds paper / latency | "
    "messages paper / latency |",
    "|---|---|---|---|---|---|",
]
for name, paper_runs, latency_runs in (
    ("dp_dec_ucb", dec, dec_latency),
    ("dp_mw_ucb", mw, mw_latency),
):
    for key, lat_r in latency_runs.items():
        r = paper_runs[key]
        if name == "dp_mw_ucb":
            rounds = f"{r['decision_rounds'].mean():,.0f} / {lat_r['decision_rounds'].mean():,.0f}"
        else:
            rounds = "every round"
        lines.append(
            f"| {name} | {key} | {final(r).mean():,.0f} ± {final(r).std():,.0f} | "
            f"{final(lat_r).mean():,.0f} ± {final(lat_r).std():,.0f} | {rounds} | "
            f"{r['messages'].mean():,.0f} / {lat_r['messages'].mean():,.0f} |"
        )
if long:
    grid = [t for t in (1000, 10_000, 30_000, 100_000) if t <= LONG_T]
    lines += [
        "",
        f"## Long run, {LONG_SEEDS} seed(s), T = {LONG_T} (delta uses this T)",
        "",
        "| config | " + " | ".join(f"R({t})" for t in grid) + " |",
        "|---|" + "---|" * len(grid),
        *[
            f"| {k} | " + " | ".join(f"{at(r, t).mean():,.0f}" for t in grid) + " |"
            for k, r in long.items()
        ],
    ]
table = "\n".join(lines) + "\n"
(out_dir / "dp_recsys.md").write_text(table)
print(table)
harness.write_claims(
    args,
    rows,
    {
        "title": "DP recommender paper (Li, Song & Fragouli)",
        "scale_name": SCALE_NAME,
        "command": harness.command("dp-recsys"),
        "wall_time_s": wall,
        "executor": EXECUTOR,
        **harness.backend_meta(args),
        **harness.numpy_fallbacks(args, tasks),
    },
)

# ------------------------------------------------------------------------------ figure
plt = harness.pyplot()  # None without matplotlib (the plots extra): no figure
if plt is not None:
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.5))
    panels = [
        ("DP-Dec-UCB, sweep A (rho = 2)", dec, a_all),
        ("DP-Dec-UCB, sweep B (epsilon = 2)", dec, [*b_keys, "non-private, rho=2"]),
        ("DP-MW-UCB (Bernoulli)", mw, mw_keys),
    ]
    for ax, (title, group, keys) in zip(axes, panels, strict=True):
        for key in keys:
            r = group[key]
            mean, std = r["R"].mean(axis=0), r["R"].std(axis=0)
            ax.plot(r["steps"], mean, label=key)
            ax.fill_between(r["steps"], mean - std, mean + std, alpha=0.2)
        ax.set_title(title)
        ax.set_xlabel("t")
        ax.set_ylabel("network regret R(t)")
        ax.legend(fontsize=8)
    fig.suptitle(f"M = {M}, K = {K}, C_{M}, T = {T}, {SEEDS} seeds (mean ± std)")
    fig.tight_layout()
    fig.savefig(out_dir / "dp_recsys.png", dpi=120)
    print(f"wrote {out_dir / 'dp_recsys.md'} and {out_dir / 'dp_recsys.png'}")
else:
    print(f"wrote {out_dir / 'dp_recsys.md'}")
