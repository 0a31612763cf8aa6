"""Reproduce the three experiments of "Differentially-Private Federated Linear Bandits" (Fig. 1A-C).

    fedbandit reproduce linear                       # CI scale (T = 1500, 3 runs)
    fedbandit reproduce linear --claims docs/claims/linear-ci.json
    fedbandit reproduce linear --full --claims docs/claims/linear-full.json
    fedbandit reproduce linear --trend 6000 24000   # each claim against T
    fedbandit reproduce linear --paper-scale --backend jax --figures 1C \
        --claims docs/claims/linear-paper-1C.json   # the paper's scale, one figure (a GPU)
    python -m fedbandit_env.reproductions.linear ... # the same

Centralized FedUCB (`fed_lin_ucb`) on FedBandit/LinearContextual-v0 (theta* on the sphere per run,
K - 1 actions with mean in [0.5, 0.6] and one in [0.7, 0.8], Bernoulli rewards), per-agent regret:
1. Fig. 1A: regret against epsilon, one curve per M ("competitive even at large privacy budget";
   we read it as regret falling monotonically as epsilon grows, docs/linear.md);
2. Fig. 1B: communication, D = 0 (n = O(MT)), DisLinUCB's D = T ln(MT)/(dM) (n = O(M^1.5)) and
   Theorem 1's D (n = O(M log T)), private (eps = 1) and non-private: more communication, lower
   regret (Remark 1); private >= non-private (our prediction, docs/linear.md);
3. Fig. 1C: regret against d, "essentially a quadratic dependence" (log-log slope 2).
The rows are claims (fedbandit_env.bench.claims) with verdicts computed from the numbers; the
printed table renders from the same rows that ``--claims FILE`` writes. With theory constants the
private agent barely learns at small scale (docs/linear.md, "Why three claims fail"), so the
radius is multiplied by --beta-scale (stated in every output). claims.md also lists every
configuration run with its realized sync rounds, messages and privacy constants. The paper's
scale (T = 10^7, M up to 100, 100 runs) is out of reach on 2 cores: ``--full`` runs the CI grid
at T = 100000 (with the trend at T = 1500, 6000 and 24000; about half an hour of CPU, under an
hour on 2 cores), and every run prints the estimated CPU time of the paper's scale from the
measured cost per agent-step; ``--trend`` runs the experiments at several horizons and prints
each claim's verdict and numbers against T. Configurations run through the bench executors
(``--executor``, default joblib with ``--jobs 1``: the machine is shared).

``--backend jax`` runs every configuration as one compiled rollout of its runs on the JAX
backend (docs/jax.md), one after another in this process. ``--paper-scale`` (JAX only) is the
paper's scale: T = 10^7, 100 runs, M in {10, 25, 50, 100}, eight epsilons, d in 2..20 and M = 100
in Fig. 1B and 1C. ``--figures`` runs a subset of the experiments (a paper-scale figure is sized
for one GPU session); the claims of the others are reported as not run.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from agents.fed_lin_ucb import FedLinUCB
from fedbandit_env.bench import claims as C
from fedbandit_env.bench import evaluate
from fedbandit_env.linear_kernels import linear_privacy_constants
from fedbandit_env.reproductions import harness

PAPER = "DP federated linear bandits (Dubey & Pentland 2020)"
ENV = "FedBandit/LinearContextual-v0"
EVERY, DISLIN, THEOREM = "D = 0 (every trial)", "DisLinUCB D", "Theorem-1 D"
Z = 2.0  # an ordering is contradicted when reversed by more than Z standard errors
SLOPE_TARGET, SLOPE_TOL = 2.0, 0.5  # "essentially quadratic": log-log slope within 2 +- 0.5
# the paper's scale (Dubey & Pentland 2020, Fig. 1): T, runs, and the agent counts of its
# configurations
PAPER_T, PAPER_RUNS = 10_000_000, 100
PAPER_EPS = (0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, math.inf)
PAPER_M = (10, 25, 50, 100)
PAPER_DIMS = (2, 4, 6, 8, 10, 15, 20)


# ---------------------------------------------------------------- parameters (one block)
def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = harness.parser("linear", __doc__, executor="joblib", jobs=1, backend=True)
    p.add_argument(
        "--paper-scale",
        action="store_true",
        help="the paper's scale: T = 10^7, 100 runs and the paper's grids of epsilon, M and d "
        "(needs --backend jax, and a GPU to finish in minutes)",
    )
    p.add_argument(
        "--figures",
        nargs="+",
        choices=FIGURES,
        default=list(FIGURES),
        help="the experiments to run (default: all); the claims of the others are reported "
        "as not run",
    )
    p.add_argument(
        "--horizon", type=int, default=None, help="T (default 1500; --full 100000; paper 10^7)"
    )
    p.add_argument("--runs", type=int, default=None, help="runs per configuration (3; paper 100)")
    p.add_argument("--beta-scale", type=float, default=0.01)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--trend",
        type=int,
        nargs="+",
        default=None,
        metavar="T",
        help="also run every experiment at these horizons and print each claim "
        "against T (--full: 1500 6000 24000)",
    )
    p.add_argument("--trend-runs", type=int, default=None, help="runs per trend configuration")
    p.add_argument(
        "--ablation",
        action="store_true",
        help="also run non-private FedUCB with lambda = the private regularizer "
        "Lambda (epsilon = 1), no noise: Fig. 1B and 1C without the noise",
    )
    a = p.parse_args(argv)
    if a.paper_scale:
        if a.backend != "jax":
            p.error(
                "--paper-scale: expected --backend jax (the numpy engine would take about "
                "1000 days of CPU at T = 10^7; docs/jax.md, 'Paper scale')"
            )
        if a.full:
            p.error("--paper-scale: expected without --full (one scale at a time)")
    if a.ablation and len(a.figures) < len(FIGURES):
        p.error("--ablation: expected every figure (it compares with Fig. 1B and 1C)")
    if a.backend == "jax":  # one process compiles and owns the device; configurations in turn
        a.executor, a.jobs = "serial", 1
    return a


FIGURES = ("1A", "1B", "1C")


def grid(full: bool, paper: bool = False) -> dict[str, Any]:
    """The configurations of one scale: agent counts, epsilons, dimensions, M of Fig. 1B/C.
    ``--full`` keeps the CI grid and runs a 67 times longer horizon (the largest that fits
    in an hour of a shared 2-core machine); ``--paper-scale`` is the paper's grid (Fig. 1:
    M in 10..100, eight epsilons, d in 2..20, M = 100 in Fig. 1B and 1C)."""
    if paper:
        return {"agents": PAPER_M, "eps": PAPER_EPS, "dims": PAPER_DIMS, "m_comm": 100}
    return {"agents": (5, 10), "eps": (0.1, 1.0, 10.0, math.inf), "dims": (2, 4, 8), "m_comm": 10}


D_FIXED = 10


# ---------------------------------------------------------------- one configuration
def run_config(cfg: dict[str, Any]) -> dict[str, Any]:
    """Run one configuration (``runs`` seeds from ``seed``) on its backend; return its final
    per-agent regret per run, messages, realized syncs, privacy constants and cost."""
    T, M, d, eps = cfg["T"], cfg["M"], cfg["d"], cfg["eps"]
    kwargs: dict[str, Any] = {
        "beta_scale": cfg["beta_scale"], "sync_threshold": cfg["D"], "timing": cfg["timing"],
    }  # fmt: skip
    if math.isinf(eps):
        kwargs["private"] = False
        if cfg.get("lam") is not None:
            kwargs["lam"] = cfg["lam"]
    else:
        kwargs["epsilon"] = eps
    env_kwargs = {"num_agents": M, "dim": d, "num_arms": min(10, d * d), "horizon": T}
    cpu = time.process_time()
    if cfg.get("backend", "numpy") == "jax":
        params, finals, messages, syncs, clips, wall, compiling = _run_jax(cfg, kwargs, env_kwargs)
        constants, lam, D = params.constants, params.config.lam, params.threshold
    else:
        policy = FedLinUCB(**kwargs)
        res = evaluate(ENV, policy, runs=cfg["runs"], seed=cfg["seed"], env_kwargs=env_kwargs)
        finals, wall, compiling = res.final_regret_per_agent, res.wall_time, 0.0
        messages = res.messages.sum(axis=1)
        syncs, clips = policy.n_sync, policy.eig_clip_events
        constants, lam, D = policy.constants, policy.lam, policy.threshold
    cpu = time.process_time() - cpu
    c = constants
    ell = math.log(1.0 + T / (d * lam)) if c is None else c.ell
    return {
        **cfg,
        "finals": np.asarray(finals, float).tolist(),
        "messages": float(np.mean(messages)),
        "syncs": float(np.mean(syncs)),
        "bound": 2.0 * math.sqrt(d * T / D * ell) + 4.0 if D > 0 else None,
        "D_value": D,
        "constants": None
        if c is None
        else {
            "m": c.m,
            "sigma_N": c.sigma_N,
            "rho_min": c.rho_min,
            "rho_max": c.rho_max,
            "kappa": c.kappa,
        },
        "eig_clips": int(np.sum(clips)),
        "wall": wall,
        "compile": compiling,  # JAX: the seconds of wall spent compiling (0 on numpy)
        "cpu": cpu,
        "agent_steps": T * M * cfg["runs"],
    }


def _run_jax(
    cfg: dict[str, Any], kwargs: dict[str, Any], env_kwargs: dict[str, Any]
) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, np.ndarray, float]:
    """The configuration on the JAX backend (docs/jax.md): one compiled rollout of the runs'
    seeds with the JAX port of FedUCB; its params (agents.fed_lin_ucb.FedLinParams), final
    per-agent regret (runs,), messages (runs,), realized syncs (runs,), eigenvalue floors
    (runs,), the wall time (compile included) and the compile time."""
    import fedbandit_env.jax as fj
    from agents.jax.fed_lin_ucb import FedLinUCB as JaxFedLinUCB
    from fedbandit_env.bench.evaluate import env_kwargs_for

    learner = JaxFedLinUCB(**kwargs)
    env = fj.make(ENV, **env_kwargs_for(learner, ENV, env_kwargs))
    seeds = list(range(cfg["seed"], cfg["seed"] + cfg["runs"]))
    out = fj.rollout(env, learner, seeds, checkpoints=np.asarray([cfg["T"]]))
    state = out.learner_state
    return (
        out.params,
        out.regret_by_agent[:, -1].mean(axis=1),
        out.messages.sum(axis=1),
        np.asarray(state.n_sync),
        np.asarray(state.eig_clip_events),
        out.wall_time,
        out.compile_time,
    )


def configs(
    T: int,
    runs: int,
    g: dict[str, Any],
    seed: int,
    beta: float,
    latency: bool,
    figures: tuple[str, ...] = FIGURES,
    backend: str = "numpy",
) -> list[dict[str, Any]]:
    """Every configuration of the experiments ``figures`` (Fig. 1A = exp. 1, 1B = 2, 1C = 3)
    at horizon T on ``backend``."""
    out = _configs(T, runs, g, seed, beta, latency)
    wanted = {str(FIGURES.index(f) + 1) for f in figures}
    return [{**c, "backend": backend} for c in out if c["exp"] in wanted]


def _configs(
    T: int, runs: int, g: dict[str, Any], seed: int, beta: float, latency: bool
) -> list[dict[str, Any]]:
    base = {"T": T, "runs": runs, "seed": seed, "beta_scale": beta, "timing": "paper"}
    out = [
        {**base, "exp": "1", "M": m, "d": D_FIXED, "eps": e, "D": None}
        for m in g["agents"]
        for e in g["eps"]
    ]
    mc = g["m_comm"]
    dislin = T * math.log(mc * T) / (D_FIXED * mc)
    for label, thr in ((EVERY, 0.0), (DISLIN, dislin), (THEOREM, None)):
        for eps in (1.0, math.inf):
            out.append(
                {**base, "exp": "2", "regime": label, "M": mc, "d": D_FIXED, "eps": eps, "D": thr}
            )
            if latency:
                out.append(
                    {
                        **base,
                        "exp": "2",
                        "regime": label,
                        "M": mc,
                        "d": D_FIXED,
                        "eps": eps,
                        "D": thr,
                        "timing": "latency",
                    }
                )
    out += [
        {**base, "exp": "3", "M": mc, "d": d, "eps": eps, "D": None}
        for eps in (1.0, math.inf)
        for d in g["dims"]
    ]
    return out


def execute(cfgs: list[dict[str, Any]], a: argparse.Namespace) -> list[dict[str, Any]]:
    """Run the configurations on ``--executor`` with ``--jobs`` workers (harness.fan_out); one
    progress line per finished configuration on stderr, so an interrupted run still leaves its
    numbers. The results in the order of ``cfgs``."""
    out: list[dict[str, Any] | None] = [None] * len(cfgs)
    for i, r in harness.fan_out(run_config, cfgs, a.executor, a.jobs):
        mean, se = C.mean_se(r["finals"])
        print(
            f"[T={r['T']} runs={r['runs']}] exp {r['exp']} {r.get('regime', '')} M={r['M']} "
            f"d={r['d']} eps={r['eps']:g} timing={r['timing']}: regret {mean:.1f} (se "
            f"{se:.1f}), syncs {r['syncs']:.1f}, cpu {r['cpu']:.1f} s",
            file=sys.stderr,
            flush=True,
        )
        out[i] = r
    return out  # type: ignore[return-value]


# ---------------------------------------------------------------- measured quantities
def loglog_slope(dims: list[int], regrets: list[float]) -> float:
    r = np.maximum(np.asarray(regrets, dtype=float), 1e-12)
    return float(np.polyfit(np.log(dims), np.log(r), 1)[0])


def uniform_regret(T: int, d: int) -> float:
    """Expected per-agent regret of uniform play: T * 0.2 (K - 1)/K (mean gap of the decision sets, docs/linear.md)."""
    K = min(10, d * d)
    return T * 0.2 * (K - 1) / K


def summarize(results: list[dict[str, Any]]) -> dict[str, Any]:
    """The numbers every claim is computed from."""
    paper = [r for r in results if r["timing"] == "paper"]
    exp1: dict[int, list[tuple[float, float, float]]] = {}
    for r in paper:
        if r["exp"] == "1":
            exp1.setdefault(r["M"], []).append((r["eps"], *C.mean_se(r["finals"])))
    exp2 = {(r["regime"], r["eps"]): r for r in paper if r["exp"] == "2"}
    lat = {(r["regime"], r["eps"]): r for r in results if r["timing"] == "latency"}
    exp3: dict[float, list[dict[str, Any]]] = {}
    for r in paper:
        if r["exp"] == "3":
            exp3.setdefault(r["eps"], []).append(r)
    slopes = {}
    for eps, rows in exp3.items():
        dims = [r["d"] for r in rows]
        means = [C.mean_se(r["finals"])[0] for r in rows]
        per_run = np.array([r["finals"] for r in rows])  # (dims, runs)
        run_slopes = [loglog_slope(dims, per_run[:, k]) for k in range(per_run.shape[1])]
        se = (
            float(np.std(run_slopes, ddof=1) / math.sqrt(len(run_slopes)))
            if len(run_slopes) > 1
            else math.nan
        )
        big = [i for i, dd in enumerate(dims) if dd >= 4]
        slopes[eps] = {
            "dims": dims,
            "regret": means,
            "slope": loglog_slope(dims, means),
            "slope_se": se,
            "slope_d_ge_4": loglog_slope([dims[i] for i in big], [means[i] for i in big])
            if len(big) >= 2
            else math.nan,
            "slope_vs_uniform": loglog_slope(
                dims,
                [m / uniform_regret(rows[0]["T"], dd) for m, dd in zip(means, dims, strict=True)],
            ),
            "fraction_of_uniform": [
                m / uniform_regret(rows[0]["T"], dd) for m, dd in zip(means, dims, strict=True)
            ],
        }
    return {"exp1": exp1, "exp2": exp2, "latency": lat, "exp3": slopes, "log": paper}


# ---------------------------------------------------------------- claims
def pairs_from(values: list[tuple[float, float]]) -> list[tuple[float, float, float]]:
    """Consecutive (lower, higher, se of the difference) pairs of a claimed decreasing order."""
    return [(b[0], a[0], math.hypot(a[1], b[1])) for a, b in zip(values, values[1:], strict=False)]


def why(check: C.Check, cause: str) -> str:
    """The reason of a row that does not reproduce: the check's own words and the cause."""
    if check.verdict == "reproduced":
        return ""
    own = check.reason or f"outside the tolerance ({check.tolerance})"
    return f"{own}; {cause}" if cause else own


def not_run(figure: str, count: int, scale: dict[str, Any]) -> list[C.Claim]:
    """The ``count`` claims of ``figure`` when its experiment was left out (``--figures``):
    reported, not testable, so a claims file always lists every panel."""
    return [
        C.claim(
            paper=PAPER,
            figure=figure,
            text=f"claim {k + 1} of {figure} (its experiment was not run)",
            check=C.not_testable(f"not run in this invocation: --figures left out {figure}"),
            ours=None,
            scale=scale,
            source="paper",
        )
        for k in range(count)
    ]


def build_claims(s: dict[str, Any], scale: dict[str, Any]) -> list[C.Claim]:
    """The claims rows of every panel (Fig. 1A-C and Proposition 1) from :func:`summarize`;
    a panel whose experiment did not run is reported as not run."""
    rows: list[C.Claim] = []
    exp1 = s["exp1"]
    T = scale["T"]
    share = data_share(T, scale["M_fig1BC"], (1.0,))[1.0]
    paper_share = data_share(PAPER_T, 100, (1.0,))[1.0]
    regime = (
        f"the privacy regularizer M rho_min I outweighs the data: T / (d rho_min) = "
        f"{share:.3g} at epsilon 1 here against {paper_share:.3g} at the paper's scale "
        "(docs/linear.md)"
    )
    if exp1:
        # Fig. 1A, paper: "competitive even at large privacy budget" (no number, no plot values)
        ratio = {}
        for m, vals in exp1.items():
            priv = [v for v in vals if math.isfinite(v[0])]
            nonp = [v for v in vals if math.isinf(v[0])]
            if priv and nonp:
                ratio[f"M={m}"] = priv[0][1] / nonp[0][1]
        rows.append(
            C.claim(
                paper=PAPER,
                figure="Fig. 1A",
                text="per-agent regret after T against epsilon and M is competitive even at large "
                "privacy budget (ours: regret at the smallest epsilon / non-private)",
                check=C.not_testable(
                    "the paper states no number and no threshold for 'competitive', and the plot's "
                    "values are not in the text; ours shows the ratio"
                ),
                ours=ratio,
                scale=scale,
                source="paper",
            )
        )
        # Fig. 1A, our reading (docs/linear.md): regret falls monotonically as epsilon grows (every M)
        pairs, shown = [], {}
        for m, vals in exp1.items():
            pairs += pairs_from([(v[1], v[2]) for v in vals])
            shown[f"M={m}"] = [round(v[1], 1) for v in vals]
        check = C.ordered(pairs, z=Z)
        rows.append(
            C.claim(
                paper=PAPER,
                figure="Fig. 1A",
                text="regret falls monotonically as epsilon grows, every M (epsilon grid "
                + " / ".join(f"{v[0]:g}" for v in next(iter(exp1.values())))
                + ")",
                check=check,
                ours=shown,
                scale=scale,
                source="spec",
                reason=why(
                    check, regime + "; the private index is then nearly independent of epsilon"
                ),
            )
        )
    else:
        rows += not_run("Fig. 1A", 2, scale)
    if len(s["exp2"]) == 6:
        # Fig. 1B, paper (Remark 1): more communication, lower regret, private and non-private
        exp2 = s["exp2"]
        for eps, group in ((1.0, "private eps=1"), (math.inf, "non-private")):
            regs = sorted(
                (exp2[(lab, eps)] for lab in (EVERY, DISLIN, THEOREM)), key=lambda r: r["messages"]
            )  # least communication first: regret falls
            vals = [C.mean_se(r["finals"]) for r in regs]
            check = C.ordered(pairs_from(vals), z=Z)
            rows.append(
                C.claim(
                    paper=PAPER,
                    figure="Fig. 1B",
                    text=f"more communication, lower regret ({group}; regimes ordered by realized "
                    "messages)",
                    check=check,
                    reason=why(
                        check,
                        ""
                        if math.isinf(eps)
                        else regime + "; each sync replaces the "
                        "agents' exact own data by the privatized sums (noise and a 2 Lambda I "
                        "shift per release)",
                    ),
                    ours={
                        r["regime"]: f"{v[0]:.1f} ({r['messages']:.0f} msgs)"
                        for r, v in zip(regs, vals, strict=True)
                    },
                    scale=scale,
                    source="paper",
                )
            )
        # Fig. 1B, our prediction: private >= non-private at every communication level
        pp = []
        for lab in (EVERY, DISLIN, THEOREM):
            a, b = C.mean_se(exp2[(lab, math.inf)]["finals"]), C.mean_se(exp2[(lab, 1.0)]["finals"])
            pp.append((a[0], b[0], math.hypot(a[1], b[1])))
        rows.append(
            C.claim(
                paper=PAPER,
                figure="Fig. 1B",
                text="private (eps = 1) regret above non-private at every communication level",
                check=C.ordered(pp, z=Z),
                ours={
                    lab: f"{p[1]:.1f} vs {p[0]:.1f}"
                    for lab, p in zip((EVERY, DISLIN, THEOREM), pp, strict=True)
                },
                scale=scale,
                source="spec",
            )
        )
    else:
        rows += not_run("Fig. 1B", 3, scale)
    if 1.0 in s["exp3"]:
        # Fig. 1C, paper: essentially quadratic in d
        sl = s["exp3"][1.0]
        check = C.absolute_close(sl["slope"], SLOPE_TARGET, SLOPE_TOL)
        fractions = " / ".join(f"{f:.2f}" for f in sl["fraction_of_uniform"])
        rows.append(
            C.claim(
                paper=PAPER,
                figure="Fig. 1C",
                text="per-agent regret (private, eps = 1, M fixed) is essentially quadratic in d: "
                "log-log slope of final regret against d over the tested d",
                check=check,
                reason=why(
                    check,
                    f"the private regret is {fractions} of uniform play at d = "
                    f"{' / '.join(map(str, sl['dims']))}: {regime}",
                ),
                paper_value=SLOPE_TARGET,
                ours=round(sl["slope"], 3),
                scale=scale,
                source="paper",
                note=(
                    f"d = {sl['dims']}; regret {[round(v, 1) for v in sl['regret']]}; per-run slope "
                    f"se {sl['slope_se']:.3f}; alternatives: d >= 4 only {sl['slope_d_ge_4']:.3f}, "
                    f"regret / uniform-play regret {sl['slope_vs_uniform']:.3f}, non-private "
                    f"{s['exp3'][math.inf]['slope']:.3f}"
                ),
            )
        )
    else:
        rows += not_run("Fig. 1C", 1, scale)
    # Proposition 1 (paper): realized sync rounds within the bound
    for group, pick in (("non-private", math.isinf), ("private", math.isfinite)):
        ok = [
            r["syncs"] <= r["bound"] for r in s["log"] if r["bound"] is not None and pick(r["eps"])
        ]
        worst = max(
            (
                r["syncs"] / r["bound"]
                for r in s["log"]
                if r["bound"] is not None and pick(r["eps"])
            ),
            default=math.nan,
        )
        check = C.at_most(worst, 1.0)
        bounded = [r for r in s["log"] if r["bound"] is not None and pick(r["eps"])]
        if not bounded:
            check = C.not_testable("no configuration with D > 0 ran (--figures)")
        dis = s["exp2"].get((DISLIN, 1.0)) or max(
            bounded, key=lambda r: r["syncs"] / r["bound"], default=None
        )
        rows.append(
            C.claim(
                paper=PAPER,
                figure="Prop. 1",
                text=f"realized sync rounds <= 2 sqrt((dT/D) ell) + 4 in every configuration "
                f"({group}; worst ratio shown)",
                check=check,
                ours=f"{sum(ok)} of {len(ok)}; worst {worst:.2f}",
                reason=why(
                    check,
                    ""
                    if group == "non-private" or dis is None
                    else "the trigger's inflation term M (rho_max - rho_min) I keeps its "
                    "left side near d ln 2 after a sync, forcing one every ceil(D / (d ln 2)) "
                    f"trials whatever the data: with D = {dis['D_value']:.4g} (d = {dis['d']}), "
                    f"every {math.ceil(dis['D_value'] / (dis['d'] * math.log(2)))} trials, "
                    f"{dis['syncs']:.1f} syncs against a bound of {dis['bound']:.4g}",
                ),
                scale=scale,
                source="paper",
            )
        )
    return rows


# ---------------------------------------------------------------- reports
def fmt(value: float) -> str:
    return f"{value:.4g}"


def config_table(s: dict[str, Any], beta: float, runs: int) -> list[str]:
    lines = [
        f"## Configurations (delta = 0.1, alpha = 0.1, beta_scale = {beta}; means over {runs} "
        "runs)",
        "",
        "Syncs are realized (completed) sync rounds; the bound is Proposition 1's "
        "2 sqrt((dT/D) ell) + 4 (none for D = 0); messages are the ledger's totals (requests, "
        "uploads, downloads); m, sigma_N, rho_min = Lambda, rho_max = 3 Lambda and kappa are "
        "the paper's privacy constants (docs/linear.md) (non-private: rho = lambda = 1); eig. floors "
        "counts the synchronized "
        "W whose spectrum had to be floored; se is the standard error over runs.",
        "",
        "| exp. | M | d | epsilon | D | regret | se | syncs | Prop. 1 bound | messages | m | "
        "sigma_N | rho_min / rho_max | kappa | eig. floors |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for e in s["log"]:
        c = e["constants"]
        consts = (
            "– | – | λ = 1 | –"
            if c is None
            else f"{c['m']} | {fmt(c['sigma_N'])} | {fmt(c['rho_min'])} / {fmt(c['rho_max'])} "
            f"| {fmt(c['kappa'])}"
        )
        mean, se = C.mean_se(e["finals"])
        lines.append(
            f"| {e['exp']} | {e['M']} | {e['d']} | {e['eps']:g} | {fmt(e['D_value'])} | "
            f"{mean:.1f} | {se:.1f} | {e['syncs']:.1f} | "
            f"{'–' if e['bound'] is None else fmt(e['bound'])} | {e['messages']:.0f} | {consts} | "
            f"{e['eig_clips']} |"
        )
    return lines


def timing_table(s: dict[str, Any]) -> list[str]:
    if not s["latency"]:
        return []
    lines = [
        "",
        "## Timing (experiment 2): the paper's sync at the end of the triggering trial "
        '(default, a communication step) against timing="latency" (a sync 3 trials after its '
        "trigger)",
        "",
        "| regime | epsilon | regret paper | regret latency | syncs paper / latency | "
        "messages paper / latency |",
        "|---|---|---|---|---|---|",
    ]
    for lab in (EVERY, DISLIN, THEOREM):
        for eps in (1.0, math.inf):
            p, q = s["exp2"][(lab, eps)], s["latency"][(lab, eps)]
            lines.append(
                f"| {lab} | {eps:g} | {C.mean_se(p['finals'])[0]:.1f} | "
                f"{C.mean_se(q['finals'])[0]:.1f} | {p['syncs']:.1f} / {q['syncs']:.1f} | "
                f"{p['messages']:.0f} / {q['messages']:.0f} |"
            )
    return lines


def paper_scale_estimate(results: list[dict[str, Any]]) -> tuple[float, dict[str, float]]:
    """Seconds for the paper's scale (its grids, T = 10^7, 100 runs), from the measured seconds
    per agent-step of the rarely-syncing and the D = 0 configurations: CPU seconds of one core
    on numpy, wall seconds of the device on JAX, compiling excluded (a program compiles once,
    whatever the scale). A configuration that did not run (``--figures``) costs as the ones
    that did."""

    def cost(pick) -> float:
        rows = [r for r in results if pick(r)] or results
        spent = sum(
            r["wall"] - r.get("compile", 0.0) if r.get("backend") == "jax" else r["cpu"]
            for r in rows
        )
        return spent / max(sum(r["agent_steps"] for r in rows), 1)

    sparse = cost(lambda r: r["timing"] == "paper" and r["D"] is None and r["d"] == D_FIXED)
    every = cost(lambda r: r["timing"] == "paper" and r["D"] == 0.0)
    dislin = cost(lambda r: r["timing"] == "paper" and r.get("regime") == DISLIN)
    steps = PAPER_T * PAPER_RUNS
    exp1 = steps * len(PAPER_EPS) * sum(PAPER_M) * sparse
    exp2 = steps * 100 * 2 * (every + dislin + sparse)
    exp3 = steps * 100 * len(PAPER_DIMS) * sparse  # d-cost ignored: a lower bound for d > 10
    per = {
        "s per agent-step (Theorem-1 D)": sparse,
        "s per agent-step (D = 0)": every,
        "s per agent-step (DisLinUCB D)": dislin,
    }
    return exp1 + exp2 + exp3, per


def data_share(T: int, M: int, eps_grid: tuple[float, ...]) -> dict[float, float]:
    """Pooled data per direction at T over the privacy regularizer, (M T / d) / (M rho_min) =
    T / (d rho_min), at d = 10 for each finite epsilon (the paper's privacy constants, docs/linear.md)."""
    return {
        e: T / (D_FIXED * linear_privacy_constants(e, 0.1, D_FIXED, M, T, alpha=0.1).rho_min)
        for e in eps_grid
        if math.isfinite(e)
    }


def ablation(
    T: int, runs: int, g: dict[str, Any], a: argparse.Namespace, s: dict[str, Any]
) -> list[str]:
    """Non-private FedUCB whose regularizer is the private agent's (lambda = Lambda at epsilon
    = 1, the same M, d and T; no noise, kappa = 0) on the Fig. 1B regimes and the Fig. 1C
    dimensions, next to the private and the lambda = 1 agents of the same run."""
    mc = g["m_comm"]
    base = {
        "T": T,
        "runs": runs,
        "seed": a.seed,
        "beta_scale": a.beta_scale,
        "timing": "paper",
        "eps": math.inf,
        "M": mc,
        "backend": a.backend,
    }

    def lam(d: int) -> float:
        return linear_privacy_constants(1.0, 0.1, d, mc, T, alpha=0.1).rho_min

    cfgs = [
        {**base, "exp": "A", "regime": lab, "d": D_FIXED, "D": thr, "lam": lam(D_FIXED)}
        for lab, thr in ((EVERY, 0.0), (THEOREM, None))
    ]
    cfgs += [{**base, "exp": "A", "d": d, "D": None, "lam": lam(d)} for d in g["dims"]]
    res = execute(cfgs, a)
    lines = [
        "## Ablation: the private agent's regularizer without its noise",
        "",
        f"Non-private FedUCB with lambda = Lambda (epsilon = 1, M = {mc}, T = {T}), next to the "
        "private (epsilon = 1) and the non-private lambda = 1 agents of the same run "
        "(regret per agent, se).",
        "",
        "| configuration | lambda | lambda = Lambda, no noise | private eps = 1 | "
        "non-private lambda = 1 |",
        "|---|---|---|---|---|",
    ]
    for r in res[:2]:
        lab = r["regime"]
        p, n = s["exp2"][(lab, 1.0)], s["exp2"][(lab, math.inf)]
        lines.append(
            f"| Fig. 1B {lab}, d = {D_FIXED} | {fmt(r['lam'])} | "
            + " | ".join("{:.1f} ({:.1f})".format(*C.mean_se(x["finals"])) for x in (r, p, n))
            + " |"
        )
    dims = [r["d"] for r in res[2:]]
    for r in res[2:]:
        k = s["exp3"][1.0]["dims"].index(r["d"])
        p, n = s["exp3"][1.0]["regret"][k], s["exp3"][math.inf]["regret"][k]
        lines.append(
            f"| Fig. 1C d = {r['d']} | {fmt(r['lam'])} | {{:.1f}} ({{:.1f}})".format(
                *C.mean_se(r["finals"])
            )
            + f" | {p:.1f} | {n:.1f} |"
        )
    slope = loglog_slope(dims, [C.mean_se(r["finals"])[0] for r in res[2:]])
    lines.append(
        f"| Fig. 1C log-log slope | | {slope:.3f} | {s['exp3'][1.0]['slope']:.3f} | "
        f"{s['exp3'][math.inf]['slope']:.3f} |"
    )
    return lines


def measure(
    T: int, runs: int, g: dict[str, Any], a: argparse.Namespace, latency: bool
) -> tuple[list[dict[str, Any]], dict[str, Any], float]:
    start = time.perf_counter()
    cfgs = configs(T, runs, g, a.seed, a.beta_scale, latency, tuple(a.figures), a.backend)
    results = execute(cfgs, a)
    return results, summarize(results), time.perf_counter() - start


def figure(s: dict[str, Any], path: Path, title: str) -> Path | None:
    """Fig. 1A-C at ``path``, or ``None`` without matplotlib (the plots extra)."""
    plt = harness.pyplot()
    if plt is None:
        return None
    fig, axes = plt.subplots(1, 3, figsize=(16, 4))
    for m, vals in s["exp1"].items():
        finite = [v[0] for v in vals if math.isfinite(v[0])]
        xs = [v[0] if math.isfinite(v[0]) else 2 * max(finite) for v in vals]
        axes[0].errorbar(
            xs, [v[1] for v in vals], yerr=[v[2] for v in vals], marker="o", label=f"M={m}"
        )
    axes[0].set(
        xscale="log",
        xlabel="epsilon (rightmost: non-private)",
        ylabel="regret per agent",
        title="Fig. 1A: regret vs epsilon",
    )
    axes[0].legend() if s["exp1"] else None
    labels = [EVERY, DISLIN, THEOREM]
    for eps, style in ((1.0, "-o"), (math.inf, "--s")) if len(s["exp2"]) == 6 else ():
        axes[1].plot(
            labels,
            [C.mean_se(s["exp2"][(lab, eps)]["finals"])[0] for lab in labels],
            style,
            label="private eps=1" if math.isfinite(eps) else "non-private",
        )
    axes[1].set(ylabel="regret per agent", title="Fig. 1B: communication")
    axes[1].legend() if s["exp2"] else None
    for eps, sl in s["exp3"].items():
        axes[2].plot(
            sl["dims"], sl["regret"], marker="o", label=f"eps={eps:g} (slope {sl['slope']:.2f})"
        )
    axes[2].set(
        xscale="log",
        yscale="log",
        xlabel="d",
        ylabel="regret per agent",
        title="Fig. 1C: regret vs d",
    )
    axes[2].legend() if s["exp3"] else None
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def cost_line(backend: str, cpu: float, wall: float, device: str) -> str:
    """What this run's configurations cost, in the backend's unit."""
    if backend == "jax":
        return f"Wall time of this run: {wall:.0f} s on {device}, compiling included."
    return (
        f"CPU time of this run's configurations: {cpu:.0f} s of one core (wall {wall:.0f} s on "
        "a shared machine)."
    )


def estimate_line(backend: str, estimate: float, per: dict[str, float], device: str) -> str:
    """The estimated cost of the paper's scale from this run's cost per agent-step."""
    unit = f"wall s of {device}, compiling excluded" if backend == "jax" else "CPU s of one core"
    days = (
        f"{estimate / 3600:.3g} hours"
        if backend == "jax"
        else f"{estimate / 86400:.0f} days, {estimate / 2 / 86400:.0f} days on 2 cores"
    )
    return (
        f"Paper scale (T = 10^7, 100 runs, the paper's grids): estimated {estimate:.3g} {unit} "
        f"= {days} ({', '.join(f'{k} {v:.3g}' for k, v in per.items())})"
    )


def trend_table(trend: list[tuple[int, int, list[C.Claim]]]) -> list[str]:
    """Each claim's verdict and numbers at every horizon of ``--trend``."""
    head = "| claim | " + " | ".join(f"T = {T} ({r} runs)" for T, r, _ in trend) + " |"
    lines = ["## Trend of each claim with the horizon", "", head, "|---|" + "---|" * len(trend)]
    for k, first in enumerate(trend[0][2]):
        cells = [f"{rows[k].verdict}: {C._cell(rows[k].ours)}" for _, _, rows in trend]
        lines.append(f"| {first.figure}: {C._cell(first.claim)} | " + " | ".join(cells) + " |")
    return lines


def horizon_and_runs(a: argparse.Namespace) -> tuple[int, int]:
    """T and the runs per configuration of the chosen scale (``--horizon``/``--runs`` win)."""
    T = a.horizon or (PAPER_T if a.paper_scale else 100_000 if a.full else 1500)
    return T, a.runs or (PAPER_RUNS if a.paper_scale else 3)


def main(argv: list[str] | None = None) -> None:
    a = parse(argv)
    T, runs = horizon_and_runs(a)
    if a.full and a.trend is None:
        a.trend = [1500, 6000, 24_000]
    g = grid(a.full, a.paper_scale)
    harness.out_dir(a)
    start = time.perf_counter()
    results, s, _ = measure(T, runs, g, a, latency=not (a.full or a.paper_scale))
    scale = {
        "T": T,
        "runs": runs,
        "M": list(g["agents"]),
        "M_fig1BC": g["m_comm"],
        "d_fig1A": D_FIXED,
        "beta_scale": a.beta_scale,
        "backend": a.backend,
    }
    rows = build_claims(s, scale)
    trend = []
    for h in a.trend or []:
        r_runs = a.trend_runs or runs
        _, ts, _ = measure(h, r_runs, g, a, latency=False)
        trend.append((h, r_runs, build_claims(ts, {**scale, "T": h, "runs": r_runs})))
    wall = time.perf_counter() - start
    estimate, per = paper_scale_estimate(results)
    cpu = sum(r["cpu"] for r in results)
    title = f"FedUCB, T={T}, {runs} runs, beta_scale={a.beta_scale}"
    fig_path = figure(s, a.out / "fig1.png", title)

    # the trend goes into each row's note (the claims file keeps it)
    if trend:
        rows = [
            C.Claim(
                **{
                    **row.to_dict(),
                    "note": (row.note + "; " if row.note else "")
                    + "trend: "
                    + "; ".join(
                        f"T={h}: {tr[k].verdict} ({C._fmt(tr[k].ours)})" for h, _, tr in trend
                    ),
                }
            )
            for k, row in enumerate(rows)
        ]
    meta = {
        "title": "DP federated linear bandits (Fig. 1A-C)",
        "scale_name": "paper" if a.paper_scale else "full" if a.full else "CI",
        "figures": list(a.figures),
        **harness.backend_meta(a),
        "command": harness.command("linear", argv),
        "wall_time_s": round(wall, 1),
        "cpu_s": round(cpu, 1),
        "paper_scale_estimate_s": round(estimate),
        "beta_scale": a.beta_scale,
    }
    harness.write_claims(a, rows, meta)
    out = [
        f"# DP federated linear bandits: claims vs measured (T = {T}, {runs} runs, "
        f"beta_scale = {a.beta_scale}, wall {wall:.0f} s)",
        "",
        C.to_markdown(rows),
        "",
        "Fig. 1C alternatives (how the slope is measured): "
        + "; ".join(
            f"eps={eps:g}: all d {sl['slope']:.3f} (per-run se {sl['slope_se']:.3f}), d >= 4 "
            f"{sl['slope_d_ge_4']:.3f}, regret / uniform-play regret {sl['slope_vs_uniform']:.3f}"
            f" (fractions of uniform play {' / '.join(f'{f:.2f}' for f in sl['fraction_of_uniform'])})"
            for eps, sl in s["exp3"].items()
        ),
        "",
        "Pooled data per direction over the privacy regularizer, T / (d rho_min) at d = 10 "
        f"(M = {g['agents'][-1]}): this run (T = {T}) "
        + ", ".join(
            f"eps {e:g}: {v:.3g}" for e, v in data_share(T, g["agents"][-1], g["eps"]).items()
        )
        + "; paper (T = 10^7, M = 100) "
        + ", ".join(f"eps {e:g}: {v:.3g}" for e, v in data_share(PAPER_T, 100, g["eps"]).items()),
        "",
        cost_line(a.backend, cpu, wall, meta["device"]),
        "",
        estimate_line(a.backend, estimate, per, meta["device"]),
        "",
        *config_table(s, a.beta_scale, runs),
        *timing_table(s),
    ]
    if a.ablation:
        out += ["", *ablation(T, runs, g, a, s)]
    if a.backend == "jax":
        out.insert(2, f"Backend: JAX on {meta['device']}; the seconds below are wall seconds "
                   "of that device, compile included.\n")  # fmt: skip
    if trend:
        out += ["", *trend_table(sorted([(T, runs, rows), *trend], key=lambda x: x[0]))]
    (a.out / "claims.md").write_text("\n".join(out) + "\n")
    print("\n".join(out))
    if fig_path:
        print(f"\nfigure: {fig_path}")


if __name__ == "__main__":
    main()
