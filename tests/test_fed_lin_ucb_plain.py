"""Private centralized FedUCB against an independent plain loop written here (the paper's
privatizer and instance generator, Proposition 2's constants, Algorithm 1 with the trigger and
sync moment of docs/linear.md and the spectrum floor), with its own random streams: on a small
instance the mean final per-agent regret agrees with ``fed_lin_ucb`` within 3 standard errors,
for D = 0 and Theorem 1's D. This is the implementation check behind the linear reproduction's
failed claims (docs/linear.md)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from agents.fed_lin_ucb import FedLinUCB
from fedbandit_env.bench import evaluate

ENV = "FedBandit/LinearContextual-v0"
M, D_DIM, K, T, RUNS = 3, 3, 5, 150, 40
BETA_SCALE, SIGMA, ALPHA, DELTA, S = 0.01, 0.5, 0.1, 0.1, 1.0


def constants(eps: float, d: int, n_agents: int, horizon: int) -> dict[str, float]:
    """The privacy constants with n = T (adaptive schedule), L = B = 1, and Theorem 1's D."""
    m = 1 + math.ceil(math.log2(horizon))
    lt2 = 2.0
    log_term = 2.0 * math.log(2.0 * horizon * n_agents / ALPHA)
    sigma_n = 4.0 * math.sqrt(m) * lt2 * math.log(2.0 / DELTA) / eps
    lam = math.sqrt(32.0) * m * lt2 * math.log(4.0 / DELTA) * (4 * math.sqrt(d) + log_term) / eps
    kappa = math.sqrt(m * lt2 * (math.sqrt(d) + log_term) / (math.sqrt(2.0) * eps))
    ell = math.log(3.0 + horizon / (d * lam))
    return {
        "m": m,
        "sigma_N": sigma_n,
        "Lambda": lam,
        "kappa": kappa,
        "D": 2.0 * horizon * d / (ell + 1.0),
    }


class Tree:
    """The binary-counter Gaussian mechanism of the paper's tree mechanism for one agent (plain
    Python)."""

    def __init__(self, d: int, sigma_n: float, lam: float, m: int, rng: np.random.Generator):
        self.d, self.sigma_n, self.lam, self.rng = d, sigma_n, lam, rng
        self.k = 0
        self.exact = [np.zeros((d + 1, d + 1)) for _ in range(m)]
        self.noise = [np.zeros((d + 1, d + 1)) for _ in range(m)]

    def release(self, Q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        self.k += 1
        i = (self.k & -self.k).bit_length() - 1  # lowest set bit
        self.exact[i] = Q + sum(self.exact[j] for j in range(i))
        n_hat = self.rng.normal(0.0, self.sigma_n, size=(self.d + 1, self.d + 1))
        self.noise[i] = (n_hat + n_hat.T) / math.sqrt(2.0)
        for j in range(i):
            self.exact[j] = np.zeros_like(Q)
            self.noise[j] = np.zeros_like(Q)
        P = sum(self.exact[j] + self.noise[j] for j in range(len(self.exact)) if self.k >> j & 1)
        d = self.d
        return P[:d, :d] + 2.0 * self.lam * np.eye(d), P[:d, d]


def decision_set(theta: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """The instance generator: K unit actions, K - 1 with mean in [0.5, 0.6] and one in [0.7, 0.8],
    shuffled."""
    means = np.concatenate([rng.uniform(0.7, 0.8, 1), rng.uniform(0.5, 0.6, K - 1)])
    rng.shuffle(means)
    xs = []
    for c in means:
        w = rng.standard_normal(len(theta))
        w -= (w @ theta) * theta
        w /= np.linalg.norm(w)
        xs.append(c * theta + math.sqrt(1.0 - c * c) * w)
    return np.array(xs), means


def plain_run(eps: float, D: float | None, seed: int) -> float:
    """One run of private FedUCB (Algorithm 1 with the repairs of docs/linear.md and the spectrum
    floor); final per-agent pseudo-regret."""
    rng = np.random.default_rng(seed)
    d = D_DIM
    c = constants(eps, d, M, T)
    rho_min, rho_max, kappa = c["Lambda"], 3.0 * c["Lambda"], c["kappa"]
    threshold = c["D"] if D is None else D
    theta = rng.standard_normal(d)
    theta /= np.linalg.norm(theta)
    trees = [Tree(d, c["sigma_N"], c["Lambda"], c["m"], rng) for _ in range(M)]
    W = M * rho_min * np.eye(d)
    w = np.zeros(d)
    U = [np.zeros((d, d)) for _ in range(M)]
    u = [np.zeros(d) for _ in range(M)]
    Q = [np.zeros((d + 1, d + 1)) for _ in range(M)]
    inflate = M * (rho_max - rho_min) * np.eye(d)
    delta, regret = 0, 0.0
    for _ in range(T):
        trigger = False
        for i in range(M):
            xs, means = decision_set(theta, rng)
            V = W + U[i]
            Vinv = np.linalg.inv(V)
            theta_bar = Vinv @ (w + u[i])
            radicand = 2 * math.log(2 / ALPHA) + np.linalg.slogdet(V)[1] - d * math.log(M * rho_min)
            beta = BETA_SCALE * (
                SIGMA * math.sqrt(max(radicand, 0.0))
                + S * math.sqrt(M * rho_max)
                + kappa * math.sqrt(M)
            )
            scores = [x @ theta_bar + beta * math.sqrt(max(x @ Vinv @ x, 0.0)) for x in xs]
            a = int(np.argmax(scores))
            x = xs[a]
            y = float(rng.random() < means[a])
            regret += means.max() - means[a]
            U[i] += np.outer(x, x)
            u[i] += y * x
            z = np.append(x, y)
            Q[i] += np.outer(z, z)
            lhs = np.linalg.slogdet(W + U[i] + inflate)[1] - np.linalg.slogdet(W)[1]
            if (delta + 1) * lhs >= threshold:
                trigger = True
        if trigger:
            releases = [trees[i].release(Q[i]) for i in range(M)]
            W = sum(r[0] for r in releases)
            w = sum(r[1] for r in releases)
            vals, vecs = np.linalg.eigh(W)
            if vals[0] < rho_min:  # floor the spectrum at rho_min
                W = (vecs * np.maximum(vals, rho_min)) @ vecs.T
            U = [np.zeros((d, d)) for _ in range(M)]
            u = [np.zeros(d) for _ in range(M)]
            Q = [np.zeros((d + 1, d + 1)) for _ in range(M)]
            delta = 0
        else:
            delta += 1
    return regret / M


def agent_finals(eps: float, D: float | None) -> tuple[np.ndarray, FedLinUCB]:
    policy = FedLinUCB(epsilon=eps, sync_threshold=D, beta_scale=BETA_SCALE)
    res = evaluate(
        ENV,
        policy,
        runs=RUNS,
        seed=0,
        env_kwargs={"num_agents": M, "dim": D_DIM, "num_arms": K, "horizon": T},
    )
    return res.final_regret_per_agent, policy


def test_plain_constants_match_agent():
    _, policy = agent_finals(1.0, None)
    c = constants(1.0, D_DIM, M, T)
    assert policy.constants.m == c["m"]
    for ours, theirs in (
        (policy.constants.sigma_N, c["sigma_N"]),
        (policy.constants.rho_min, c["Lambda"]),
        (policy.constants.kappa, c["kappa"]),
        (policy.threshold, c["D"]),
    ):
        assert ours == pytest.approx(theirs, rel=1e-9)


@pytest.mark.parametrize("D", [0.0, None], ids=["D=0", "Theorem-1 D"])
def test_plain_loop_agrees_with_agent_within_3_se(D):
    agent, _ = agent_finals(1.0, D)
    plain = np.array([plain_run(1.0, D, 1000 + k) for k in range(RUNS)])
    se = math.hypot(agent.std(ddof=1), plain.std(ddof=1)) / math.sqrt(RUNS)
    assert abs(agent.mean() - plain.mean()) <= 3 * se, (agent.mean(), plain.mean(), se)
