"""Reproduce Figs. 4–12 of Li & Song (seed 004, specs/commeff.md §4) with CDP/DDP/HDP-MAB.

Readable top to bottom: parameters, one block per figure, then the table of the §4.6 predictions
against our measured values. Settings of §4.4: Bernoulli arms, means ~ U[0, 1] drawn per seed,
pseudo-regret (network total, the paper plots it per agent), paired seeds (seed s is the same
instance and reward stream in every cell), eps = 1 where the paper gives none, the R-schedule's
delta = the oracle minimum gap of each run's instance, random graph G(50, 0.1) / components
G(20, 0.2), case 2 sizes {53, 24, 10, 6, 7}.

    python benchmarks/reproduce_commeff.py            # small scale (K = 20, T = 3000, 3 seeds)
    python benchmarks/reproduce_commeff.py --full     # paper scale (K = 100, T = 10^4, 20 seeds)

Writes fig4.png … fig12.png and predictions.md into --out (git-ignored) and prints the table,
with a timing table: the agents' default paper timing (§1.7) next to ``timing="latency"``.
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

import fedbandit_env  # noqa: E402
from agents import CDPMAB, DDPMAB, HDPMAB  # noqa: E402
from agents.commeff.single import SingleMAB  # noqa: E402
from fedbandit_env.bench import evaluate  # noqa: E402

# ------------------------------------------------------------------ parameters
parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
parser.add_argument("--full", action="store_true", help="paper scale: K=100, T=1e4, 20 seeds")
parser.add_argument("--arms", type=int, default=None, help="K (default 20, --full 100)")
parser.add_argument("--horizon", type=int, default=None, help="T (default 3000, --full 10^4)")
parser.add_argument("--seeds", type=int, default=None, help="runs per cell (default 3, --full 20)")
parser.add_argument("--seed", type=int, default=0, help="first run seed")
parser.add_argument("--figs", default="4,5,6,7,8,10,11,12", help="comma-separated figure numbers")
parser.add_argument("--out", default="benchmarks/out/commeff", help="output folder")
args = parser.parse_args()

K = args.arms or (100 if args.full else 20)
T = args.horizon or (10_000 if args.full else 3000)
SEEDS = args.seeds or (20 if args.full else 3)
FIGS = {int(f) for f in args.figs.split(",") if f}
M_CENTRAL, C1_CENTRAL = 50, 25.0  # Figs. 4-7, 10 (§4.1, §4.2)
M_HYBRID, C1_HYBRID, C2 = 100, 50.0, 1.0  # Figs. 11-12 (§4.3)
M_SMALL, K_SMALL, T_SMALL = 5, 10, 10_000  # Fig. 8 (§4.5; single agents need T >= 3971)
EPSILONS = [0.1, 0.3, 0.5, 1.0, math.inf]
PARTICIPATION = [0.2, 0.4, 0.6, 0.8, 1.0]
ROUNDS = [2, 3, 4, 5]
CASES = {  # Table II, case 2 with the sizes summing to 100 (A18)
    1: ([20] * 5, "complete", {}),
    2: ([53, 24, 10, 6, 7], "complete", {}),
    3: ([100], "complete", {}),
    4: ([20] * 5, "erdos_renyi", {"p": 0.2}),
    5: ([20] * 5, "star", {}),
    6: ([1] * 100, "complete", {}),
}
OUT = Path(args.out)
OUT.mkdir(parents=True, exist_ok=True)
HOMOG, HETERO = "FedBandit/Homogeneous-v0", "FedBandit/Heterogeneous-v0"
BASE = dict(num_arms=K, horizon=T, instance_seed=None)
print(f"commeff reproduction: K={K}, T={T}, seeds={SEEDS}, figs={sorted(FIGS)}")

rows: list[tuple[str, str, str, str]] = []  # (item, prediction, measured, verdict)
timings: dict[str, float] = {}


def run(env_id, policy, **env_kwargs):
    """One cell: SEEDS paired runs; returns the EvalResult."""
    horizon = env_kwargs["horizon"]
    steps = np.unique(np.linspace(1, horizon, 200).round().astype(np.int64))
    return evaluate(
        env_id, policy, runs=SEEDS, seed=args.seed, env_kwargs=env_kwargs, checkpoints=steps
    )


def oracle_gaps(env_id, **env_kwargs):
    """Each run's oracle minimum gap (A6), read from the instances the env draws for its seeds."""
    venv = fedbandit_env.make_vec(env_id, num_runs=SEEDS, channels=(), **env_kwargs)
    venv.reset(seed=args.seed)
    gaps = []
    for inst in venv.engine.instances:
        top = np.sort(inst.global_means)[::-1]
        gaps.append(float(max(top[0] - top[1], 1e-6)))
    return tuple(gaps)


def final(res):
    return res.final_regret_network


def fmt(x):
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.3g}"


def verdict(ok):
    return "yes" if ok else "NO"


def curves(ax, results, title, per_agent=True):
    for label, res in results.items():
        y = res.regret_per_agent if per_agent else res.regret_network
        m, s = y.mean(axis=0), y.std(axis=0)
        ax.plot(res.steps, m, label=label)
        ax.fill_between(res.steps, m - s, m + s, alpha=0.2)
    ax.set_xlabel("t")
    ax.set_ylabel("per-agent regret" if per_agent else "regret")
    ax.set_title(title)
    ax.legend(fontsize=7)


def save(fig, name):
    fig.tight_layout()
    fig.savefig(OUT / name, dpi=110)
    plt.close(fig)


cdp_reference = None  # unconstrained CDP-MAB at eps = 1 (Figs. 4, 7, 10)

# ------------------------------------------------------------------ Fig. 4: privacy level
if 4 in FIGS or 7 in FIGS or 10 in FIGS:
    start = time.perf_counter()
    fig4 = {}
    for eps in EPSILONS if 4 in FIGS else [1.0]:
        fig4[eps] = run(HOMOG, CDPMAB(epsilon=eps), num_agents=M_CENTRAL, c1=C1_CENTRAL, **BASE)
    cdp_reference = fig4[1.0]
    timings["fig4"] = time.perf_counter() - start
if 4 in FIGS:
    fig, ax = plt.subplots(figsize=(5, 4))
    curves(ax, {f"eps={e}": r for e, r in fig4.items()}, f"Fig. 4: CDP-MAB, M={M_CENTRAL}, K={K}")
    save(fig, "fig4.png")
    means = [final(fig4[e]).mean() for e in EPSILONS]
    ok = all(a > b for a, b in zip(means[:4], means[1:4], strict=False)) and means[4] <= means[3]
    rows.append(
        (
            "1 (Fig. 4)",
            "final regret strictly decreasing in eps in {0.1, 0.3, 0.5, 1}; eps=inf <= eps=1",
            ", ".join(f"eps={e}: {fmt(m)}" for e, m in zip(EPSILONS, means, strict=True)),
            verdict(ok),
        )
    )

# ------------------------------------------------------------------ Fig. 5: participation
if 5 in FIGS:
    start = time.perf_counter()
    fig5 = {
        p: run(HOMOG, CDPMAB(participation=p), num_agents=M_CENTRAL, c1=C1_CENTRAL, **BASE)
        for p in PARTICIPATION
    }
    timings["fig5"] = time.perf_counter() - start
    fig, ax = plt.subplots(figsize=(5, 4))
    curves(ax, {f"p={p}": r for p, r in fig5.items()}, "Fig. 5: CE-CDP-MAB, participation p")
    save(fig, "fig5.png")
    reg = [final(fig5[p]).mean() for p in PARTICIPATION]
    cost = [fig5[p].cost.sum(axis=1).mean() for p in PARTICIPATION]
    ok = all(np.diff(reg) < 0) and all(np.diff(cost) > 0)
    rows.append(
        (
            "2 (Fig. 5)",
            "final regret decreasing in p; cost increasing in p",
            ", ".join(
                f"p={p}: {fmt(r)} / cost {fmt(c)}"
                for p, r, c in zip(PARTICIPATION, reg, cost, strict=True)
            ),
            verdict(ok),
        )
    )

# ------------------------------------------------------------------ Fig. 6: round budget R
if 6 in FIGS or 7 in FIGS:
    gaps = oracle_gaps(HOMOG, num_agents=M_CENTRAL, **BASE)
if 6 in FIGS:
    start = time.perf_counter()
    fig6 = {
        R: run(HOMOG, CDPMAB(rounds=R, delta=gaps), num_agents=M_CENTRAL, c1=C1_CENTRAL, **BASE)
        for R in ROUNDS
    }
    timings["fig6"] = time.perf_counter() - start
    fig, ax = plt.subplots(figsize=(5, 4))
    curves(ax, {f"R={R}": r for R, r in fig6.items()}, "Fig. 6: CE-CDP-MAB, round budget R")
    save(fig, "fig6.png")
    reg = [final(fig6[R]).mean() for R in ROUNDS]
    rows.append(
        (
            "3 (Fig. 6)",
            "final regret non-increasing in R in {2..5}",
            ", ".join(f"R={R}: {fmt(r)}" for R, r in zip(ROUNDS, reg, strict=True)),
            verdict(all(np.diff(reg) <= 0)),
        )
    )

# ------------------------------------------------------------------ Fig. 7: regret vs cost
if 7 in FIGS:
    start = time.perf_counter()
    grid = {}
    for p in PARTICIPATION:
        for R in ROUNDS:
            pol = CDPMAB(rounds=R, delta=gaps, participation=p)
            res = run(HOMOG, pol, num_agents=M_CENTRAL, c1=C1_CENTRAL, **BASE)
            nominal = C1_CENTRAL * math.ceil(p * M_CENTRAL) * R
            grid[p, R] = (res.cost.sum(axis=1).mean(), final(res).mean(), nominal)
    timings["fig7"] = time.perf_counter() - start
    ref_cost, ref_reg = cdp_reference.cost.sum(axis=1).mean(), final(cdp_reference).mean()
    fig, ax = plt.subplots(figsize=(5, 4))
    for p in PARTICIPATION:
        pts = np.array([grid[p, R][:2] for R in ROUNDS])
        ax.plot(pts[:, 0], pts[:, 1], "o-", label=f"p={p} (R=2..5)")
    ax.plot([ref_cost], [ref_reg], "k*", ms=12, label="CDP-MAB, eps=1")
    ax.set_xlabel("total communication cost")
    ax.set_ylabel("final regret (network)")
    ax.set_yscale("log")
    ax.set_title("Fig. 7: regret vs cost, eps=1")
    ax.legend(fontsize=7)
    save(fig, "fig7.png")
    top = max(grid, key=lambda key: grid[key][0])
    c15, r15, _ = grid[1.0, 5]
    rows.append(
        (
            "4 (Fig. 7)",
            "(p=1, R=5) has the highest cost, close to unconstrained CDP; regret close to eps=1",
            f"highest cost at p={top[0]}, R={top[1]}; (1,5): cost {fmt(c15)} vs CDP {fmt(ref_cost)}"
            f", regret {fmt(r15)} vs CDP {fmt(ref_reg)} (ratio {r15 / ref_reg:.2f})",
            verdict(top == (1.0, 5) and 0.5 <= c15 / ref_cost <= 1.5 and r15 / ref_reg <= 1.5),
        )
    )

# ------------------------------------------------------------------ Fig. 8: heterogeneity
if 8 in FIGS:
    start = time.perf_counter()
    small = dict(num_agents=M_SMALL, num_arms=K_SMALL, horizon=T_SMALL, instance_seed=None)
    hetero = dict(small, instance="commeff")
    fig8 = {
        "CDP homog.": run(HOMOG, CDPMAB(), **small),
        "CDP heterog.": run(HETERO, CDPMAB(), **hetero),
        "Single homog.": run(HOMOG, SingleMAB(), channels=(), **small),
        "Single heterog.": run(HETERO, SingleMAB(), channels=(), **hetero),
    }
    timings["fig8"] = time.perf_counter() - start
    fig, ax = plt.subplots(figsize=(5, 4))
    curves(ax, fig8, f"Fig. 8: M={M_SMALL}, K={K_SMALL}")
    save(fig, "fig8.png")
    f = {k: final(v).mean() for k, v in fig8.items()}
    half = len(fig8["CDP homog."].steps) // 2

    def slope(res):
        y = res.regret_per_agent.mean(axis=0)
        return (y[-1] - y[half]) / (res.steps[-1] - res.steps[half])

    ok = (
        abs(f["CDP homog."] / f["CDP heterog."] - 1) < 0.3
        and f["Single homog."] / f["CDP homog."] > 2
        and slope(fig8["Single heterog."]) > 2 * slope(fig8["CDP heterog."])
    )
    rows.append(
        (
            "5 (Fig. 8)",
            "CDP homog ~ heterog; Single homog >> CDP (order M); Single heterog grows linearly",
            f"CDP {fmt(f['CDP homog.'])} / {fmt(f['CDP heterog.'])}; Single/CDP = "
            f"{f['Single homog.'] / f['CDP homog.']:.2f}; late slope Single heterog "
            f"{slope(fig8['Single heterog.']):.3f} vs CDP {slope(fig8['CDP heterog.']):.3f}",
            verdict(ok),
        )
    )

# ------------------------------------------------------------------ Fig. 10: decentralized graphs
if 10 in FIGS:
    start = time.perf_counter()
    graphs = {
        "Complete": ("complete", {}),
        "Star": ("star", {}),
        "Random": ("erdos_renyi", {"p": 0.1}),
        "Ring": ("ring", {}),
    }
    fig10 = {
        name: run(
            HOMOG, DDPMAB(), num_agents=M_CENTRAL, topology=g, topology_kwargs=tk, c2=C2, **BASE
        )
        for name, (g, tk) in graphs.items()
    }
    timings["fig10"] = time.perf_counter() - start
    fig, axes = plt.subplots(1, 2, figsize=(9, 4))
    curves(axes[0], {**fig10, "CDP": cdp_reference}, f"Fig. 10: DDP-MAB, M={M_CENTRAL}")
    cost = {n: r.cost.sum(axis=1).mean() for n, r in fig10.items()}
    axes[1].bar(list(cost), list(cost.values()))
    axes[1].set_ylabel("total communication cost (c2=1)")
    save(fig, "fig10.png")
    reg = {n: final(r).mean() for n, r in fig10.items()}
    exact = np.array_equal(final(fig10["Complete"]), final(cdp_reference))
    ok = (
        exact
        and reg["Star"] <= reg["Random"] <= reg["Ring"]
        and cost["Star"] < cost["Random"] < cost["Complete"]
        and abs(cost["Ring"] / cost["Complete"] - 1) < 0.1
    )
    rows.append(
        (
            "6 (Fig. 10)",
            "Complete == CDP exactly; regret Star <= Random <= Ring; cost Star < Random < "
            "Complete ~ Ring",
            f"Complete == CDP: {exact}; regret "
            + ", ".join(f"{n} {fmt(v)}" for n, v in reg.items())
            + "; cost "
            + ", ".join(f"{n} {fmt(v)}" for n, v in cost.items()),
            verdict(ok),
        )
    )

# ------------------------------------------------------------------ Fig. 11: hybrid cases
if 11 in FIGS:
    start = time.perf_counter()
    fig11 = {}
    for case, (sizes, graph, params) in CASES.items():
        topo = {"sizes": sizes, "component_graph": graph, **params}
        fig11[case] = run(
            HOMOG,
            HDPMAB(),
            num_agents=M_HYBRID,
            topology="hybrid",
            topology_kwargs=topo,
            c1=C1_HYBRID,
            c2=C2,
            **BASE,
        )
    timings["fig11"] = time.perf_counter() - start
    fig, axes = plt.subplots(1, 2, figsize=(9, 4))
    curves(axes[0], {f"case {c}": r for c, r in fig11.items()}, f"Fig. 11: HDP-MAB, M={M_HYBRID}")
    cost = {c: r.cost.sum(axis=1).mean() for c, r in fig11.items()}
    axes[1].bar([f"case {c}" for c in cost], list(cost.values()))
    axes[1].set_ylabel("total communication cost")
    save(fig, "fig11.png")
    reg = {c: final(r).mean() for c, r in fig11.items()}
    same = all(np.array_equal(final(fig11[c]), final(fig11[1])) for c in (2, 3, 5, 6))
    ok = (
        same
        and reg[4] >= reg[1]
        and cost[5] < cost[4] < cost[1] < cost[2] < cost[3]
        and cost[6] > 3 * cost[1]
    )
    rows.append(
        (
            "7 (Fig. 11)",
            "regret cases 1,2,3,5,6 identical, 4 slightly higher; cost 5 < 4 < 1 < 2 < 3, 1 << 6",
            f"1,2,3,5,6 identical: {same}; regret "
            + ", ".join(f"{c}: {fmt(v)}" for c, v in reg.items())
            + "; cost "
            + ", ".join(f"{c}: {fmt(v)}" for c, v in cost.items()),
            verdict(ok),
        )
    )

# ------------------------------------------------------------------ Fig. 12: heterogeneous, 3 structures
if 12 in FIGS:
    start = time.perf_counter()
    het = dict(BASE, num_agents=M_HYBRID, instance="commeff", c1=C1_HYBRID, c2=C2)
    sizes, graph, params = CASES[4]
    fig12 = {
        "CDP": run(HETERO, CDPMAB(), **het),
        "DDP (G(100, 0.05))": run(
            HETERO, DDPMAB(), topology="erdos_renyi", topology_kwargs={"p": 0.05}, **het
        ),
        "HDP (case 4)": run(
            HETERO,
            HDPMAB(),
            topology="hybrid",
            topology_kwargs={"sizes": sizes, "component_graph": graph, **params},
            **het,
        ),
    }
    timings["fig12"] = time.perf_counter() - start
    fig, ax = plt.subplots(figsize=(5, 4))
    curves(ax, fig12, f"Fig. 12: heterogeneous, M={M_HYBRID}, K={K}")
    save(fig, "fig12.png")
    reg = {n: final(r).mean() for n, r in fig12.items()}
    names = list(reg)
    ok = reg[names[0]] < reg[names[2]] < reg[names[1]]
    rows.append(
        (
            "8 (Fig. 12)",
            "heterogeneous: regret CDP < HDP < DDP",
            ", ".join(f"{n}: {fmt(v)}" for n, v in reg.items()),
            verdict(ok),
        )
    )

# ------------------------------------------------------------------ controlled delay checks
# On random instances the delay regret of DDP/HDP (a few hundred) is far below the seed noise that
# the shifted schedules bring (different reward draws per slot, borderline eliminations). A fixed
# instance whose gaps (0.17, 0.35, ...) sit away from the 2C(r) thresholds (about 0.24 * 2^(1-r))
# makes the eliminations deterministic (K = 6), so the
# paired differences isolate the regret of the greedy delay slots (items 6, 7, 8 again).
SPACED = np.array([0.9, 0.73, 0.55, 0.4, 0.25, 0.1])  # gaps away from the 2C(r) thresholds
CTL = dict(num_arms=6, horizon=min(T, 3000), means=SPACED)


def paired(worse, better):
    """Mean paired difference of final regrets and its standard error."""
    d = final(worse) - final(better)
    return d.mean(), d.std(ddof=1) / math.sqrt(len(d)) if len(d) > 1 else 0.0


def heterogeneous_means(num_agents, mu, rng):
    """§4.4 recipe around fixed global means: mu + w_k (u - mean u), w_k <= 0.3, in [0, 1]."""
    dev = rng.uniform(-1.0, 1.0, (num_agents, len(mu)))
    dev -= dev.mean(axis=0)
    w = np.minimum(0.3, np.minimum(mu, 1.0 - mu) / np.abs(dev).max(axis=0))
    return mu + w * dev


if 10 in FIGS:
    ctl = {
        name: run(HOMOG, DDPMAB(), num_agents=M_CENTRAL, topology=g, topology_kwargs=tk, **CTL)
        for name, (g, tk) in graphs.items()
    }
    ctl_cdp = run(HOMOG, CDPMAB(), num_agents=M_CENTRAL, **CTL)
    steps = [paired(ctl[b], ctl[a]) for a, b in (("Star", "Random"), ("Random", "Ring"))]
    exact = np.array_equal(final(ctl["Complete"]), final(ctl_cdp))
    rows.append(
        (
            "6b (Fig. 10, controlled)",
            "paired: Complete == CDP; regret Star < Random < Ring (delay regret)",
            f"Complete == CDP: {exact}; Random - Star {steps[0][0]:.1f} ± {steps[0][1]:.1f}, "
            f"Ring - Random {steps[1][0]:.1f} ± {steps[1][1]:.1f} (mean ± s.e.)",
            verdict(exact and all(m > 2 * e for m, e in steps)),
        )
    )
if 11 in FIGS:
    ctl = {}
    for case, (sizes, graph, params) in CASES.items():
        topo = {"sizes": sizes, "component_graph": graph, **params}
        ctl[case] = run(
            HOMOG, HDPMAB(), num_agents=M_HYBRID, topology="hybrid", topology_kwargs=topo, **CTL
        )
    same = all(np.array_equal(final(ctl[c]), final(ctl[1])) for c in (2, 3, 5, 6))
    gap, err = paired(ctl[4], ctl[1])
    rows.append(
        (
            "7b (Fig. 11, controlled)",
            "paired: cases 1,2,3,5,6 identical; case 4 higher",
            f"identical: {same}; case 4 - case 1 = {gap:.1f} ± {err:.1f}",
            verdict(same and gap > 2 * err),
        )
    )
if 12 in FIGS:
    local = heterogeneous_means(M_HYBRID, SPACED, np.random.default_rng(args.seed))
    het_ctl = dict(CTL, num_agents=M_HYBRID, means=local)
    sizes, graph, params = CASES[4]
    c_cdp = run(HETERO, CDPMAB(), **het_ctl)
    c_ddp = run(HETERO, DDPMAB(), topology="erdos_renyi", topology_kwargs={"p": 0.05}, **het_ctl)
    c_hdp = run(
        HETERO,
        HDPMAB(),
        topology="hybrid",
        topology_kwargs={"sizes": sizes, "component_graph": graph, **params},
        **het_ctl,
    )
    (g1, e1), (g2, e2) = paired(c_hdp, c_cdp), paired(c_ddp, c_hdp)
    rows.append(
        (
            "8b (Fig. 12, controlled)",
            "paired, heterogeneous: CDP < HDP < DDP",
            f"HDP - CDP {g1:.1f} ± {e1:.1f}, DDP - HDP {g2:.1f} ± {e2:.1f}; local best != global "
            f"best at {int((local.argmax(axis=1) != 0).sum())} of {M_HYBRID} agents",
            verdict(g1 > 2 * e1 and g2 > 2 * e2),
        )
    )

# ------------------------------------------------------------------ timing: paper vs latency
# The agents run §1.7 by default (timing="paper": the round's upload is a communication-only
# step); timing="latency" sends the upload with a pull (one greedy slot more per round).
start = time.perf_counter()
timing_rows = []
for name, cls, env in (
    ("CDP-MAB", CDPMAB, {"c1": C1_CENTRAL}),
    ("DDP-MAB star", DDPMAB, {"topology": "star", "c2": C2}),
    ("DDP-MAB ring", DDPMAB, {"topology": "ring", "c2": C2}),
):
    cells = {}
    for timing in ("paper", "latency"):
        pol = cls(timing=timing)
        res = run(HOMOG, pol, num_agents=M_CENTRAL, **env, **BASE)
        slots = pol.delay + (0 if timing == "paper" else 1)
        cells[timing] = (final(res), pol.rounds_done.mean(), slots, res.cost.sum(axis=1).mean())
    (rp, np_, sp, cp), (rl, nl, sl, cl) = cells["paper"], cells["latency"]
    timing_rows.append(
        f"| {name} | {fmt(rp.mean())} | {fmt(rl.mean())} | {np_:.1f} / {nl:.1f} | {sp} / {sl} | "
        f"{fmt(cp)} / {fmt(cl)} |"
    )
timings["timing"] = time.perf_counter() - start

# ------------------------------------------------------------------ table
lines = [
    f"# commeff reproduction (K={K}, T={T}, {SEEDS} paired seeds; final regret = network total, "
    "mean over seeds)",
    "",
    "| §4.6 item | paper's claim (prediction) | measured | holds |",
    "|---|---|---|---|",
    *[f"| {a} | {b} | {c} | {d} |" for a, b, c, d in rows],
    "",
    f"Timing (M={M_CENTRAL}, eps=1): the paper's protocol (default, rounds as communication "
    'steps, §1.7) against timing="latency" (one upload slot more per round).',
    "",
    "| agent | final regret paper | final regret latency | rounds paper / latency | "
    "pulled slots per round paper / latency | cost paper / latency |",
    "|---|---|---|---|---|---|",
    *timing_rows,
    "",
    "Wall time per figure (s): " + ", ".join(f"{k} {v:.1f}" for k, v in timings.items()),
]
table = "\n".join(lines)
(OUT / "predictions.md").write_text(table + "\n")
print(table)
print(f"figures and table in {OUT}/")
