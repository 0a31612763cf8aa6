"""DP-Dec-UCB under its default ``timing="paper"`` (Algorithm 2 as printed: every round is a
communication step, then the pull): the consensus invariants as written, and an independent plain
loop of Algorithm 2's pseudocode written here that plays the same arms in every round on the
environment's rewards (non-private: the streams align; the graph constants of a ring are the
only input taken from the agent, they are checked against a reference table elsewhere)."""

from __future__ import annotations

import math

import networkx as nx
import numpy as np
import pytest

from agents import DPDecentralizedUCB
from fedbandit_env.engine import COMMUNICATION
from fedbandit_env.errors import ConfigError
from tests.dp_recsys_helpers import rollout

K = 4


def plain_dec_ucb(P, c, T, rho, sigma, reward, tie):
    """Algorithm 2 non-private, line by line (H = exact running sums). ``reward(t, i, a)``;
    ``tie(t, i, candidates)`` picks among exactly tied arms (the agent's random tie-break)."""
    M = P.shape[0]
    nhat, shat = np.zeros((M, K)), np.zeros((M, K))
    xi, ds = np.zeros((M, K)), np.zeros((M, K))
    last, total = np.zeros((M, K)), np.zeros((M, K))
    played, snapshots = [], []
    for t in range(1, T + 1):
        nhat, shat = P @ (nhat + xi), P @ (shat + ds)
        xi, ds = np.zeros((M, K)), np.zeros((M, K))
        snapshots.append((nhat.copy(), shat.copy()))
        row = []
        for i in range(M):
            if t <= K:
                a = t - 1
            else:
                index = []
                for j in range(K):
                    nn = nhat[i, j]
                    w = sigma * math.sqrt(2 * rho * (nn + c[i]) / (M * nn) * math.log(t) / nn)
                    index.append(shat[i, j] / nn + w)
                index = np.array(index)
                best = np.flatnonzero(index == index.max())
                a = int(best[0]) if len(best) == 1 else tie(t, i, best)
            r = min(max(reward(t, i, a), 0.0), 1.0)
            total[i, a] += r
            ds[i, a] = total[i, a] - last[i, a]
            last[i, a] = total[i, a]
            xi[i, a] = 1.0
            row.append(a)
        played.append(row)
    return np.array(played), snapshots


def _paper_run(topology, num_agents, horizon, epsilon=math.inf, **agent):
    snapshots = {}

    def hook(step, policy, action):  # after the mixing of each round, before its pull
        if action.pull is None:
            snapshots[len(snapshots) + 1] = (policy.nhat.copy(), policy.shat.copy())

    policy = DPDecentralizedUCB(epsilon=epsilon, **agent)
    out = rollout(
        policy, runs=2, topology=topology, num_agents=num_agents, horizon=horizon, hook=hook
    )
    return policy, out, snapshots


@pytest.mark.parametrize(("topology", "kappa"), [("complete", 4 / 5), ("ring", None)])
def test_paper_timing_matches_the_plain_loop_step_for_step(topology, kappa):
    M, T = 5, 150
    agent = {} if kappa is None else {"kappa": kappa}
    policy, out, snaps = _paper_run(topology, M, T, **agent)
    pulled = out["pulls"]
    assert len(pulled) == 2 * T and np.array_equal(pulled[:, 0], np.arange(2 * T) % 2 == 1)
    graph = nx.complete_graph(M) if topology == "complete" else nx.cycle_graph(M)
    k = kappa if kappa is not None else 2 / 3  # d_max / (d_max + 1) on the ring
    L = nx.laplacian_matrix(graph, nodelist=range(M)).toarray().astype(float)
    P = np.eye(M) - k / max(d for _, d in graph.degree()) * L
    c = np.zeros(M) if topology == "complete" else policy.c  # Lemma 2 constants (ring)
    for b in range(2):
        arms = out["arms"][pulled[:, b], b]
        rewards = out["rewards"][pulled[:, b], b]

        def follow(t, i, candidates, mine=arms):
            assert mine[t - 1, i] in candidates
            return int(mine[t - 1, i])

        played, plain_snaps = plain_dec_ucb(
            P, c, T, 2.0, 1.0, lambda t, i, a, r=rewards: r[t - 1, i], follow
        )
        assert np.array_equal(arms, played)
        for t in (1, K + 1, T // 2, T):
            np.testing.assert_allclose(snaps[t][0][b], plain_snaps[t - 1][0], atol=1e-9)
            np.testing.assert_allclose(snaps[t][1][b], plain_snaps[t - 1][1], atol=1e-9)
    messages = out["venv"].engine.ledger.total.messages.sum(axis=1)
    assert np.all(messages == T * 2 * graph.number_of_edges())  # 2K numbers per edge and way


@pytest.mark.parametrize("epsilon", [2.0, math.inf])
def test_invariants_of_section_4_5_as_written(epsilon):
    """nhat == 1 at round K + 1; nhat >= 1 after; column sums equal the network's counts and
    private sums of rounds 1..t-1 (no shift)."""
    policy, out, snaps = _paper_run("ring", 6, 80, epsilon)
    pulled = out["pulls"][:, 0]
    arms = out["arms"][pulled]
    assert np.array_equal(arms[:K, 0, 0], np.arange(K))
    np.testing.assert_allclose(snaps[K + 1][0], 1.0, rtol=0, atol=1e-12)
    counts = np.zeros((2, 6, K))
    b, i = np.indices((2, 6))
    for t in range(1, 81):
        if t > K:
            assert snaps[t][0].min() >= 1.0 - 1e-12
        np.testing.assert_allclose(snaps[t][0].sum(axis=1), counts.sum(axis=1), atol=1e-9)
        counts[b, i, arms[t - 1]] += 1


def test_every_round_is_a_communication_step_then_a_pull():
    policy, out, _ = _paper_run("ring", 6, 40)
    pulls = out["pulls"][:, 0]
    sends = out["sends"]["neighbors"][:, 0]
    assert sends[~pulls].all() and not sends[pulls].any()
    assert out["venv"].engine.step_count == 80
    assert policy.config.timing == "paper"
    assert COMMUNICATION == 1


@pytest.mark.parametrize("timing", ["Paper", None, 3])
def test_bad_timing(timing):
    with pytest.raises(ConfigError, match=r"dp_dec_ucb: timing: expected 'paper'"):
        DPDecentralizedUCB(timing=timing)
