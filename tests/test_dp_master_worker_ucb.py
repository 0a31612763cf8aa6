"""DP-MW-UCB (docs/dp-recsys.md, Algorithm 1): lock step, the doubling decision schedule, messages
only in decision rounds, the index fed by the counters, determinism and bad input, under both
timings: ``"paper"`` (communication steps, the default) is checked step for step and in distribution
against independent plain-loop implementations of Algorithm 1 and the hybrid counter written here;
``"latency"`` against a plain loop with the one-step round trip."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

import fedbandit_env
from agents import DPMasterWorkerUCB
from agents.dp_master_worker_ucb import is_power_of_two
from fedbandit_env import ConfigError
from fedbandit_env.network.ledger import AGENT_SERVER
from fedbandit_env.privacy import hybrid_noise_variance
from tests.dp_recsys_helpers import MEANS, rollout

K = 4
EPSILONS = [2.0, math.inf]


def _run(epsilon: float, timing: str = "latency", **kwargs):
    policy = DPMasterWorkerUCB(epsilon=epsilon, timing=timing)
    return rollout(policy, runs=3, horizon=150, **kwargs)


@pytest.mark.parametrize("epsilon", EPSILONS)
def test_lock_step_all_agents_play_the_same_arm_every_step(epsilon):
    out = _run(epsilon)
    arms = out["arms"]  # (T, B, N)
    assert (arms == arms[:, :, :1]).all()
    assert np.array_equal(arms[:K, 0, 0], np.arange(K))  # round robin
    assert (arms[K, :, :] == 0).all()  # the latency step K+1 repeats arm 0
    assert len(np.unique(arms[K + 1 :])) > 1  # it does switch arms


@pytest.mark.parametrize("epsilon", EPSILONS)
def test_decisions_follow_the_doubling_schedule(epsilon):
    out = _run(epsilon)
    horizon = out["arms"].shape[0]
    send = out["sends"]["server"]  # (T, B, N)
    assert (send == send[:, :, :1]).all()
    for b in range(send.shape[1]):
        uploads = np.flatnonzero(send[:, b, 0]) + 1  # steps with an upload
        assert uploads[0] == K + 1 and not send[:K, b].any()
        # result of the decision uploaded at step d = the arm played at step d + 1
        results = np.full(horizon + 2, -1)
        for d in uploads:
            results[d] = out["arms"][d, b, 0] if d < horizon else -2
        expected = np.zeros(horizon + 1, dtype=bool)
        eta, prev = 1, None
        for t in range(K + 1, horizon + 1):
            if t > K + 1:
                eta += 1
            if is_power_of_two(np.array(eta)):
                expected[t] = True
                if results[t] != prev:
                    eta = 1
                prev = results[t]
        assert np.array_equal(np.flatnonzero(expected), uploads)
        # hold lengths: between two decisions the played arm never changes
        arms = out["arms"][:, b, 0]
        for d0, d1 in zip(uploads[:-1], uploads[1:], strict=True):
            assert (arms[d0:d1] == arms[d0]).all()  # steps d0+1 .. d1 (arms[s-1] = step s)


def test_messages_only_in_decision_rounds_and_the_ledger_shows_it():
    out = _run(2.0)
    send = out["sends"]["server"]
    decisions = send[:, :, 0].sum(axis=0)  # (B,)
    horizon, N = send.shape[0], send.shape[2]
    assert (decisions < horizon - K).all()  # strictly fewer than every round
    ledger = out["venv"].engine.ledger.total.messages[:, AGENT_SERVER]
    assert np.array_equal(ledger, decisions * 2 * N)  # N uploads + N broadcasts per decision


@pytest.mark.parametrize("epsilon", EPSILONS)
def test_index_is_built_from_the_counter_outputs(epsilon):
    """Each upload equals s/n + sqrt(2 ln t/n) + upsilon(n)/n with s the counters' outputs, and
    the counters' outputs are the exact clipped sums plus the counter noise (none at inf)."""
    seen = []

    def hook(t, policy, action):
        send, payload = action.messages["server"]
        if send.any():
            n = policy.counts
            lninv = 4 * math.log(150)  # delta = T^-4
            priv = 0.0 if math.isinf(epsilon) else lninv / epsilon * np.log(n) ** 1.5 / n
            expected = policy.sums.value / n + np.sqrt(2 * math.log(t) / n) + priv
            np.testing.assert_allclose(payload[send], expected[send], rtol=1e-12, atol=1e-12)
            seen.append(t)

    policy = DPMasterWorkerUCB(epsilon=epsilon, timing="latency")
    out = rollout(policy, runs=3, horizon=150, hook=hook)
    assert len(seen) > 10
    # the counters hold steps 1..T-1 (the last reward is folded in by a next act that never comes)
    arms, rewards = out["arms"][:-1], np.clip(out["rewards"][:-1], 0.0, 1.0)
    T, B, N = arms.shape
    exact = np.zeros((B, N, K))
    b, i = np.indices((B, N))
    for t in range(T):
        exact[b, i, arms[t]] += rewards[t]
    assert np.array_equal(policy.counts.sum(axis=2), np.full((B, N), T))
    noise = policy.sums.value - exact
    if math.isinf(epsilon):
        np.testing.assert_allclose(noise, 0.0, atol=1e-9)
    else:
        # the hybrid counters' releases, with noise of the closed-form size (the hybrid mechanism)
        counter = policy.sums.counter
        np.testing.assert_array_equal(policy.sums.value, counter.release())
        np.testing.assert_allclose(counter.exact(), exact, atol=1e-9)
        z2 = noise**2 / hybrid_noise_variance(counter.counts, epsilon)
        assert 0.3 < z2.mean() < 3.0


def test_non_private_regret_is_far_below_uniform():
    out = rollout(
        DPMasterWorkerUCB(epsilon=math.inf),
        runs=2,
        num_agents=5,
        means=MEANS,
        horizon=1500,
        reward="bernoulli",
    )
    regret = out["info"].cumulative_regret.sum(axis=1)  # network total (B,)
    uniform = 5 * 1500 * (0.9 - MEANS.mean())
    assert (regret < 0.4 * uniform).all()  # measured: about 0.26


def _steps_of_run(out, b, key="arms"):
    """Run b's rows of a rollout, over its own engine steps (it may finish before the others)."""
    live = np.flatnonzero(out["pulls"][:, b]).max() + 1
    return out[key][:live, b] if key != "payloads" else out[key]["server"][:live, b]


@pytest.mark.parametrize("timing", ["paper", "latency"])
@pytest.mark.parametrize("epsilon", EPSILONS)
def test_determinism_and_batch_independence(epsilon, timing):
    a = _run(epsilon, timing, seed=5)
    b = _run(epsilon, timing, seed=5)
    assert np.array_equal(a["arms"], b["arms"])
    assert np.array_equal(a["payloads"]["server"], b["payloads"]["server"])
    policy = DPMasterWorkerUCB(epsilon=epsilon, timing=timing)
    alone = rollout(policy, runs=1, seed=6, horizon=150)
    assert np.array_equal(alone["arms"][:, 0], _steps_of_run(a, 1))
    assert np.array_equal(alone["payloads"]["server"][:, 0], _steps_of_run(a, 1, "payloads"))


# ------------------------------------------------------------------------------ bad input


@pytest.mark.parametrize("epsilon", [0, -1.0, math.nan, "2", None, True])
def test_bad_epsilon(epsilon):
    with pytest.raises(ConfigError, match=r"dp_mw_ucb: epsilon"):
        DPMasterWorkerUCB(epsilon=epsilon)


@pytest.mark.parametrize("clip", [(1.0, 0.0), (0.0, math.inf), (0.0,)])
def test_bad_clip(clip):
    with pytest.raises(ConfigError, match=r"dp_mw_ucb: clip"):
        DPMasterWorkerUCB(clip=clip)


def _reset(policy, **kwargs):
    venv = fedbandit_env.make_vec(
        "FedBandit/Homogeneous-v0", num_runs=1, num_agents=4, num_arms=K, **kwargs
    )
    venv.reset(seed=0)
    policy.reset(venv.facts, venv.agent_rng())
    return venv


@pytest.mark.parametrize(("timing", "steps"), [("paper", K), ("latency", K + 1)])
def test_horizon_shorter_than_initialisation(timing, steps):
    with pytest.raises(ConfigError, match=rf"dp_mw_ucb: horizon: expected more than {steps}"):
        _reset(
            DPMasterWorkerUCB(timing=timing),
            horizon=steps,
            channels={"server": {"kind": "server", "dim": K}},
        )


@pytest.mark.parametrize("timing", ["Paper", "", None, 1, "instant"])
def test_bad_timing(timing):
    with pytest.raises(ConfigError, match=r"dp_mw_ucb: timing: expected 'paper'.* or 'latency'"):
        DPMasterWorkerUCB(timing=timing)


@pytest.mark.parametrize(
    ("channels", "pattern"),
    [
        (("neighbors",), r"dp_mw_ucb: channels.server: expected a 'server' channel of dim 4"),
        ({"server": {"kind": "server", "dim": 3}}, r"dp_mw_ucb: channels.server: expected kind"),
        (
            {"server": {"kind": "server", "dim": K, "aggregate": "sum"}},
            r"dp_mw_ucb: channels.server: expected aggregate 'mean'",
        ),
        (
            {"server": {"kind": "server", "dim": K, "participation": 0.5}},
            r"dp_mw_ucb: channels.server: expected aggregate 'mean' with participation",
        ),
    ],
)
def test_missing_or_wrong_channel(channels, pattern):
    with pytest.raises(ConfigError, match=pattern):
        _reset(DPMasterWorkerUCB(), horizon=50, channels=channels)


def test_wrong_family():
    venv = fedbandit_env.make_vec(
        "FedBandit/Homogeneous-v0",
        num_runs=1,
        num_agents=4,
        num_arms=K,
        channels={"server": {"kind": "server", "dim": K}},
    )
    venv.reset(seed=0)
    facts = dataclasses.replace(venv.facts, family="linear")
    with pytest.raises(ConfigError, match=r"dp_mw_ucb: family"):
        DPMasterWorkerUCB().reset(facts, venv.agent_rng())


def test_registered_id_and_non_private_variant():
    policy = fedbandit_env.make_agent("dp_mw_ucb", epsilon=math.inf)
    assert isinstance(policy, DPMasterWorkerUCB) and math.isinf(policy.config.epsilon)
    assert "dp_mw_ucb" in fedbandit_env.list_agents()


def test_matches_a_plain_loop_reference_of_section_3_3_with_latency():
    """A scalar re-implementation of Algorithm 1 (non-private, M = 3) with the one-step latency,
    replayed on the recorded rewards, plays exactly the same arms (run 0)."""
    policy = DPMasterWorkerUCB(epsilon=math.inf, timing="latency")
    out = rollout(policy, runs=1, num_agents=3, horizon=200)
    arms, rewards = out["arms"][:, 0], np.clip(out["rewards"][:, 0], 0, 1)
    M, T = 3, arms.shape[0]
    n = [[0] * K for _ in range(M)]
    s = [[0.0] * K for _ in range(M)]
    eta, prev, held, pending = 1, None, 0, None
    for t in range(1, T + 1):
        if t <= K:
            arm = t - 1
        else:
            if pending is not None:  # the server's reply to the upload of step t - 1
                if prev is None or pending != prev:
                    eta = 1
                prev = held = pending
                pending = None
            if t > K + 1:
                eta += 1
            if eta & (eta - 1) == 0:
                index = [
                    sum(s[i][j] / n[i][j] + math.sqrt(2 * math.log(t) / n[i][j]) for i in range(M))
                    / M
                    for j in range(K)
                ]
                pending = max(range(K), key=lambda j: (index[j], -j))  # lowest index on ties
            arm = held
        assert (arms[t - 1] == arm).all(), t
        for i in range(M):
            n[i][arm] += 1
            s[i][arm] += rewards[t - 1, i]


# ------------------------------------------------------------------ paper timing (Algorithm 1 as printed)


class PlainHybridCounter:
    """The hybrid counter of Chan, Shi & Song (one scalar counter, its own Generator)."""

    def __init__(self, eps: float, rng: np.random.Generator):
        self.eps, self.rng = eps, rng
        self.c, self.S, self.Z, self.base = 0, 0.0, 0.0, 0.0
        self.k, self.b, self.tau = 0, 0.0, 0
        self.alpha, self.alpha_hat = [], []

    def lap(self, scale: float) -> float:
        return float(self.rng.laplace(0.0, scale))

    def insert(self, x: float) -> float:
        x = min(max(x, 0.0), 1.0)
        self.c += 1
        self.S += x
        if self.c & (self.c - 1) == 0:
            k = self.c.bit_length() - 1
            self.Z += self.lap(2.0 / self.eps)
            self.base = self.S + self.Z
            self.k, self.b, self.tau = k, 2.0 * k / self.eps, 0
            self.alpha, self.alpha_hat = [0.0] * k, [0.0] * k
            return self.base
        self.tau += 1
        i = (self.tau & -self.tau).bit_length() - 1
        self.alpha[i] = x + sum(self.alpha[:i])
        for j in range(i):
            self.alpha[j] = self.alpha_hat[j] = 0.0
        self.alpha_hat[i] = self.alpha[i] + self.lap(self.b)
        return self.base + sum(self.alpha_hat[j] for j in range(self.k) if self.tau >> j & 1)


def plain_mw_ucb(M, K, T, eps, pull, rng=None):
    """Algorithm 1 line by line. ``pull(t, i, a)`` returns agent i's reward of arm a in round t.
    Returns (the arm of every round, decision rounds, messages: M uploads + M broadcasts per
    decision round)."""
    ln_inv_delta = 4 * math.log(T)
    private = not math.isinf(eps)
    H = [[PlainHybridCounter(eps, rng) for _ in range(K)] for _ in range(M)] if private else None
    n = [[0] * K for _ in range(M)]
    s = [[0.0] * K for _ in range(M)]
    played = []

    def take(t, i, a):
        r = pull(t, i, a)
        s[i][a] = H[i][a].insert(r) if private else s[i][a] + min(max(r, 0.0), 1.0)
        n[i][a] += 1

    for t in range(1, K + 1):
        for i in range(M):
            take(t, i, t - 1)
        played.append(t - 1)
    eta, a_prev, decisions = 1, None, 0
    for t in range(K + 1, T + 1):
        if eta & (eta - 1) == 0:
            I = [[0.0] * K for _ in range(M)]
            for i in range(M):
                for j in range(K):
                    v = ln_inv_delta / eps * math.log(n[i][j]) ** 1.5 if private else 0.0
                    I[i][j] = s[i][j] / n[i][j] + math.sqrt(2 * math.log(t) / n[i][j]) + v / n[i][j]
            avg = [sum(I[i][j] for i in range(M)) / M for j in range(K)]
            a = max(range(K), key=lambda j: (avg[j], -j))
            decisions += 1
            if a != a_prev:
                eta = 1
        else:
            a = a_prev
        for i in range(M):
            take(t, i, a)
        played.append(a)
        eta += 1
        a_prev = a
    return played, decisions, 2 * M * decisions


def test_paper_timing_matches_the_plain_loop_step_for_step():
    """Non-private: the plain Algorithm 1 loop, fed the rewards the environment drew for each pull,
    plays exactly the same arm in every round, decides in the same rounds, and every decision
    round is one communication step (upload, average back) before its pull."""
    M, T = 3, 300
    policy = DPMasterWorkerUCB(epsilon=math.inf)
    out = rollout(policy, runs=2, num_agents=M, horizon=T)
    for b in range(2):
        pulled = out["pulls"][:, b]
        arms = out["arms"][pulled, b]  # (T, M): the arms of the pulls only
        rewards = out["rewards"][pulled, b]
        assert arms.shape[0] == T and (arms == arms[:, :1]).all()
        played, decisions, messages = plain_mw_ucb(
            M, K, T, math.inf, lambda t, i, a, r=rewards: r[t - 1, i]
        )
        assert arms[:, 0].tolist() == played
        steps = int(np.flatnonzero(pulled).max()) + 1
        assert steps - T == decisions == policy.decision_rounds[b]  # one step per decision
        talk = ~pulled[:steps]
        assert (out["sends"]["server"][:steps, b][talk]).all()  # uploads only when talking
        assert not out["sends"]["server"][:steps, b][~talk].any()
        ledger = out["venv"].engine.ledger.total.messages[b, AGENT_SERVER]
        assert ledger == messages


@pytest.mark.parametrize("epsilon", [2.0, math.inf])
def test_paper_timing_agrees_in_distribution_with_the_plain_loop(epsilon):
    """Regret, decision rounds and messages of 24 runs of the agent and of the plain loop (its
    own counters and rewards) agree within 3 standard errors."""
    M, T, runs = 4, 600, 24
    means = np.array([0.9, 0.6, 0.5, 0.1])
    out = rollout(
        DPMasterWorkerUCB(epsilon=epsilon),
        runs=runs,
        num_agents=M,
        horizon=T,
        means=means,
        reward="bernoulli",
        seed=100,
    )
    policy_regret = out["info"].cumulative_regret.sum(axis=1)
    ledger = out["venv"].engine.ledger.total.messages[:, AGENT_SERVER]
    policy_decisions = ledger / (2 * M)
    rng = np.random.default_rng(2024)
    plain_regret, plain_decisions, plain_messages = [], [], []
    for _ in range(runs):
        played, decisions, messages = plain_mw_ucb(
            M, K, T, epsilon, lambda t, i, a: float(rng.random() < means[a]), rng
        )
        plain_regret.append(M * sum(means[0] - means[a] for a in played))
        plain_decisions.append(decisions)
        plain_messages.append(messages)
    for x, y in [
        (policy_regret, plain_regret),
        (policy_decisions, plain_decisions),
        (ledger, plain_messages),
    ]:
        x, y = np.asarray(x, float), np.asarray(y, float)
        se = math.sqrt(x.var(ddof=1) / len(x) + y.var(ddof=1) / len(y))
        assert abs(x.mean() - y.mean()) <= 3 * se + 1e-9, (x.mean(), y.mean(), se)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("epsilon", "spec"), [(1.5, 2425), (2.0, 2698), (5.0, 2836), (math.inf, 3340)]
)
def test_paper_timing_decision_rounds_of_section_3_4(epsilon, spec):
    """The reproduction's lock-step instance: M = 20, K = 10, means 0.9..0.0 (Bernoulli), T = 10^4,
    10 runs: the mean number of decision rounds is within 10 % of the reference prototype (about 12
    s per epsilon)."""
    policy = DPMasterWorkerUCB(epsilon=epsilon)
    rollout(
        policy,
        runs=10,
        num_agents=20,
        num_arms=10,
        horizon=10**4,
        means=np.linspace(0.9, 0.0, 10),
        reward="bernoulli",
    )
    assert abs(policy.decision_rounds.mean() / spec - 1.0) < 0.10, policy.decision_rounds.mean()
