"""Empirical audit (docs/privacy.md, "Empirical audit"): calibrated mechanisms audit at or below
their claim, under-noised ones are caught."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from fedbandit_env.bench.privacy_audit import (
    audit_epsilon,
    audit_output_mechanism,
    clopper_pearson,
    neighbouring_stream,
    regularized_beta,
)
from fedbandit_env.privacy import (
    GaussianMechanism,
    HybridCounter,
    LaplaceMechanism,
    PrivacyError,
    TreeCounter,
)
from fedbandit_env.seeding import BatchedRNG

STREAM = np.zeros(8)
NEIGHBOUR = neighbouring_stream(STREAM, 3, 1.0)


def summed(mechanism):
    """A scalar mechanism: the stream's sum released through ``mechanism`` (sensitivity 1)."""
    return lambda stream, rng, n: mechanism.privatize(np.full(n, stream.sum()), rng)


def test_calibrated_laplace_audits_at_or_below_its_epsilon():
    eps = 1.0
    result = audit_epsilon(
        summed(LaplaceMechanism(eps)), STREAM, NEIGHBOUR, trials=100_000, seed=1, batched=True
    )
    assert result.epsilon_lower <= eps
    assert not result.exceeds(eps)
    assert result.epsilon_lower > 0.8  # and the audit is tight enough to be meaningful


def test_half_scale_laplace_is_caught_above_its_claim():
    claimed = 1.0
    under = LaplaceMechanism(2 * claimed)  # half the scale the claim needs
    result = audit_epsilon(summed(under), STREAM, NEIGHBOUR, trials=100_000, seed=1, batched=True)
    assert result.exceeds(claimed)
    assert result.epsilon_lower > 1.5


@pytest.mark.parametrize("factor,caught", [(1.0, False), (0.5, True)])
def test_output_mechanism_audit_for_the_cli(factor, caught):
    eps, sens = 0.5, 2.0
    mech = LaplaceMechanism(eps / factor, sensitivity=sens)  # factor 0.5: half the scale
    result = audit_output_mechanism(mech, trials=100_000, seed=5)
    assert result.exceeds(eps) is caught
    with pytest.raises(PrivacyError, match="^mechanism: expected an object with privatize"):
        audit_output_mechanism(object())


def test_unbatched_mechanism_and_delta():
    mech = GaussianMechanism(1.0, 1e-3)
    result = audit_epsilon(
        lambda s, rng: float(mech.privatize(np.array(s.sum()), rng)),
        STREAM,
        NEIGHBOUR,
        trials=4_000,
        seed=2,
        delta=1e-3,
    )
    assert 0 <= result.epsilon_lower <= 1.0
    assert result.counts[1] == result.counts[3] == 2_000


def tree_agent(levels):
    """A whole private counter as the audited 'agent': it returns the release of every round."""

    def run(stream, rng, n):
        counter = TreeCounter(
            (n,),
            len(stream),
            1.0,
            rng=BatchedRNG([np.random.SeedSequence(int(rng.integers(2**63)))]),
            levels=levels,
        )
        releases = []
        for t, x in enumerate(stream, start=1):
            counter.insert(t, np.full((1, n), x))
            releases.append(counter.release()[0])
        return np.stack(releases, axis=1)  # (n, T)

    return run


def likelihood_feature(releases):
    """Optimal statistic for round 1 changing 0 -> 1 with every release at the same scale: the
    sum over the releases at t = 1, 2, 4 (the blocks holding round 1) of clip(2 x - 1, -1, 1)."""
    first_blocks = releases[:, [0, 1, 3]]
    return np.clip(2 * first_blocks - 1, -1, 1).sum(axis=1)


def test_whole_counter_audits_below_epsilon_and_an_unsplit_budget_is_caught():
    stream, neighbour = np.zeros(4), neighbouring_stream(np.zeros(4), 0, 1.0)
    ok = audit_epsilon(
        tree_agent(None),
        stream,
        neighbour,
        trials=60_000,
        seed=3,
        batched=True,
        featurizer=likelihood_feature,
    )
    assert not ok.exceeds(1.0) and ok.epsilon_lower > 0.7  # 3 blocks x epsilon/3: tight
    # levels=1 spends the whole epsilon on every block: round 1 sits in 3 blocks -> 3 epsilon
    bad = audit_epsilon(
        tree_agent(1),
        stream,
        neighbour,
        trials=60_000,
        seed=3,
        batched=True,
        featurizer=likelihood_feature,
    )
    assert bad.exceeds(1.0) and bad.epsilon_lower > 2.0


def test_hybrid_counter_transcript_audits_close_to_but_below_epsilon():
    eps = 1.0

    def run(stream, rng, n):
        c = HybridCounter(
            (n,),
            len(stream),
            eps,
            rng=BatchedRNG([np.random.SeedSequence(int(rng.integers(2**63)))]),
        )
        return np.stack([c.insert(np.full((1, n), x))[0] for x in stream], axis=1)  # (n, 8)

    def llr(releases):
        # the 5th of 8 items enters the p-sums (4,5] and (4,6] (Lap(4) each: k = 2) and the log-half
        # increment at count 8 (Lap(2)); this is the log-likelihood ratio over the transcript
        d = releases[:, [4, 5, 7]] - releases[:, [3]]
        return (np.clip(2 * d - 1, -1, 1) / np.array([4.0, 4.0, 2.0])).sum(axis=1)

    stream = np.zeros(8)
    result = audit_epsilon(
        run,
        stream,
        neighbouring_stream(stream, 4, 1.0),
        trials=60_000,
        seed=4,
        batched=True,
        featurizer=llr,
    )
    assert not result.exceeds(eps)
    assert result.epsilon_lower > 0.8  # the whole-transcript guarantee is tight


def test_vector_outputs_need_a_featurizer():
    with pytest.raises(PrivacyError, match="^featurizer: expected one scalar per output"):
        audit_epsilon(lambda s, rng: rng.random(3), STREAM, NEIGHBOUR, trials=50)
    with pytest.raises(PrivacyError, match="^trials: expected an int >= 20"):
        audit_epsilon(lambda s, rng: 0.0, STREAM, NEIGHBOUR, trials=5)


def test_identical_outputs_audit_to_zero():
    result = audit_epsilon(lambda s, rng: 1.0, STREAM, NEIGHBOUR, trials=200)
    assert result.epsilon_lower == 0.0


@pytest.mark.parametrize("k,n", [(0, 50), (3, 50), (30, 1000), (999, 1000), (5000, 100_000)])
def test_clopper_pearson_matches_scipy(k, n):
    lo, hi = clopper_pearson(k, n, 0.025)
    ref_lo = 0.0 if k == 0 else stats.beta.ppf(0.025, k, n - k + 1)
    ref_hi = 1.0 if k == n else stats.beta.ppf(0.975, k + 1, n - k)
    assert lo == pytest.approx(ref_lo, rel=1e-8, abs=1e-14)
    assert hi == pytest.approx(ref_hi, rel=1e-8, abs=1e-14)


@pytest.mark.parametrize("x,a,b", [(0.3, 2.5, 7.0), (0.9, 0.5, 0.5), (0.01, 100.0, 3.0)])
def test_regularized_beta_matches_scipy(x, a, b):
    assert regularized_beta(x, a, b) == pytest.approx(
        stats.beta.cdf(x, a, b), rel=1e-10, abs=1e-300
    )
    assert not math.isnan(regularized_beta(x, a, b))
