"""Private FedUCB (`fed_lin_ucb`) against the independent plain loop of tests/test_fed_lin_ucb_plain.py.

A development script (it imports the tests, so it is not part of the package): run it from a
source checkout.

    python benchmarks/reproduce_linear_plain.py

The plain loop restates the paper's Algorithm 1 (Dubey & Pentland 2020, with its privacy
constants and the instance of its experiments; docs/linear.md) line by line with its own
random streams; both run the same small instance (M = 3, d = 3, K = 5, T = 150, beta_scale = 0.01, 40
runs each). Prints the mean final per-agent regret of each (standard errors), their difference
in standard errors, and the expected regret of uniform play, for D = 0 and Theorem 1's D at
epsilon 1 and Theorem 1's D at epsilon 0.1 and 10: the orderings that the reproduction's claims
test (docs/linear.md, "Why three claims fail").
"""

from __future__ import annotations

import math

import numpy as np

from tests.test_fed_lin_ucb_plain import D_DIM, RUNS, K, M, T, agent_finals, plain_run


def main() -> None:
    uniform = T * 0.2 * (K - 1) / K
    print(f"M = {M}, d = {D_DIM}, K = {K}, T = {T}, {RUNS} runs each; uniform play {uniform:.1f}")
    print("| epsilon | D | agent | plain loop | difference / se |")
    print("|---|---|---|---|---|")
    for eps, D in ((1.0, 0.0), (1.0, None), (0.1, None), (10.0, None)):
        a, _ = agent_finals(eps, D)
        p = np.array([plain_run(eps, D, 1000 + k) for k in range(RUNS)])
        sa, sp = a.std(ddof=1) / math.sqrt(RUNS), p.std(ddof=1) / math.sqrt(RUNS)
        z = (a.mean() - p.mean()) / math.hypot(sa, sp)
        label = "0" if D == 0.0 else "Theorem 1"
        print(
            f"| {eps:g} | {label} | {a.mean():.2f} ({sa:.2f}) | {p.mean():.2f} ({sp:.2f}) | "
            f"{z:+.2f} |"
        )


if __name__ == "__main__":
    main()
