"""Empirical privacy audit: a high-confidence lower bound on epsilon from samples.

DESIGN.md §4: claims are checked, not trusted. :func:`audit_epsilon` runs a randomized
``mechanism(stream, rng) -> output`` many times on two neighbouring inputs (e.g. reward streams
that differ in one entry), maps every output to a scalar with a ``featurizer``, and searches the
threshold events ``{f > c}`` and ``{f <= c}`` in both directions. For an (epsilon, delta)-DP
mechanism every event E satisfies ``P_A(E) <= e^epsilon P_B(E) + delta``, so

    epsilon >= ln((P_A(E) - delta) / P_B(E)).

To keep the bound honest the samples are split: the first part selects the event (vectorized
Wilson score bounds), the second estimates its two probabilities with exact Clopper–Pearson
bounds, each at level ``(1 - confidence)/2``; the reported ``epsilon_lower`` holds with
probability at least ``confidence``. A correct mechanism audits at or below its claim (up to
that failure probability); an audit above the claim is evidence of a bug.

The bound is only as strong as the featurizer: a lower bound, never a proof of privacy.
Clopper–Pearson uses a regularized incomplete beta function written here (Lentz's continued
fraction), so the module needs no scipy.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from fedbandit_env.privacy.calibration import check_delta
from fedbandit_env.privacy.errors import PrivacyError
from fedbandit_env.validation import is_integral

Mechanism = Callable[..., Any]
Featurizer = Callable[[Any], Any]


# -- exact binomial confidence bounds -----------------------------------------------------------
def _beta_continued_fraction(a: float, b: float, x: float) -> float:
    """Continued fraction of the incomplete beta function (modified Lentz method)."""
    tiny = 1e-300
    c = 1.0
    d = 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 10_000):
        # even step: m (b - m) x / ((a + 2m - 1)(a + 2m))
        num = m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m))
        d = 1.0 + num * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + num / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        # odd step: -(a + m)(a + b + m) x / ((a + 2m)(a + 2m + 1))
        num = -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))
        d = 1.0 + num * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + num / c
        c = c if abs(c) > tiny else tiny
        step = d * c
        h *= step
        if abs(step - 1.0) < 1e-15:
            break
    return h


def regularized_beta(x: float, a: float, b: float) -> float:
    """The regularized incomplete beta function ``I_x(a, b)`` for a, b > 0."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = (
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    )
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _beta_continued_fraction(a, b, x) / a
    return 1.0 - math.exp(log_front) * _beta_continued_fraction(b, a, 1.0 - x) / b


def _beta_quantile(q: float, a: float, b: float) -> float:
    lo, hi = 0.0, 1.0
    for _ in range(100):
        mid = 0.5 * (lo + hi)
        if regularized_beta(mid, a, b) < q:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-15:
            break
    return 0.5 * (lo + hi)


def clopper_pearson(k: int, n: int, alpha: float) -> tuple[float, float]:
    """One-sided exact bounds ``(lower, upper)`` on a binomial probability from k successes in
    n trials, each holding with probability ``1 - alpha``."""
    if n < 1 or not 0 <= k <= n:
        raise PrivacyError("k, n", "0 <= k <= n with n >= 1", (k, n))
    lower = 0.0 if k == 0 else _beta_quantile(alpha, k, n - k + 1)
    upper = 1.0 if k == n else _beta_quantile(1.0 - alpha, k + 1, n - k)
    return lower, upper


def _wilson(k: np.ndarray, n: int, z: float) -> tuple[np.ndarray, np.ndarray]:
    p = k / n
    denom = 1 + z**2 / n
    centre = (p + z**2 / (2 * n)) / denom
    half = z * np.sqrt(p * (1 - p) / n + z**2 / (4 * n**2)) / denom
    return np.clip(centre - half, 0, 1), np.clip(centre + half, 0, 1)


def _normal_quantile(q: float) -> float:
    lo, hi = -40.0, 40.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if 0.5 * math.erfc(-mid / math.sqrt(2)) < q:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


# -- the audit ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class AuditResult:
    """Outcome of :func:`audit_epsilon`.

    ``epsilon_lower``: the lower bound on epsilon (0 when no event shows a difference), valid with
    probability ``confidence``. ``epsilon_estimate``: the plug-in ``ln(P_A/P_B)`` of the selected
    event on the estimation samples. ``event``: e.g. ``"P[f > 0.52 | stream] vs neighbour"``.
    """

    epsilon_lower: float
    epsilon_estimate: float
    event: str
    threshold: float
    counts: tuple[int, int, int, int]  # (hits under A, samples A, hits under B, samples B)
    confidence: float
    trials: int
    delta: float

    def exceeds(self, claimed_epsilon: float) -> bool:
        """True when the audit proves the claim wrong (at the audit's confidence)."""
        return self.epsilon_lower > claimed_epsilon

    def __str__(self) -> str:
        return (
            f"epsilon >= {self.epsilon_lower:.4f} with confidence {self.confidence} "
            f"(estimate {self.epsilon_estimate:.4f}; event {self.event}; {self.trials} trials "
            f"per input)"
        )


def _sample(
    mechanism: Mechanism,
    data: Any,
    rng: np.random.Generator,
    trials: int,
    featurizer: Featurizer | None,
    batched: bool,
) -> np.ndarray:
    if batched:
        out = mechanism(data, rng, trials)
        feats = np.asarray(featurizer(out) if featurizer else out, dtype=np.float64)
    else:
        rows = []
        for _ in range(trials):
            out = mechanism(data, rng)
            rows.append(featurizer(out) if featurizer else out)
        feats = np.asarray(rows, dtype=np.float64)
    feats = feats.reshape(-1) if feats.ndim > 1 and feats.size == trials else feats
    if feats.shape != (trials,):
        raise PrivacyError(
            "featurizer",
            f"one scalar per output ({trials} values); pass a featurizer for vector outputs",
            f"shape {feats.shape}",
        )
    if not np.all(np.isfinite(feats)):
        raise PrivacyError("featurizer", "finite scalars", "NaN or inf")
    return feats


def _thresholds(pooled: np.ndarray, num_thresholds: int) -> np.ndarray:
    unique = np.unique(pooled)
    if unique.size <= num_thresholds:
        return unique
    qs = np.linspace(0.0, 1.0, num_thresholds + 2)[1:-1]
    return np.unique(np.quantile(pooled, qs, method="lower"))


def audit_epsilon(
    mechanism: Mechanism,
    stream: Any,
    neighbour: Any,
    *,
    trials: int = 20_000,
    seed: int = 0,
    featurizer: Featurizer | None = None,
    batched: bool = False,
    confidence: float = 0.95,
    delta: float = 0.0,
    num_thresholds: int = 64,
    selection_fraction: float = 0.5,
) -> AuditResult:
    """Empirical lower bound on the epsilon of ``mechanism`` from two neighbouring inputs.

    ``mechanism(stream, rng) -> output`` is called ``trials`` times per input (or once as
    ``mechanism(stream, rng, trials) -> outputs`` with a leading trial axis when ``batched``);
    ``rng`` is a ``numpy.random.Generator`` seeded from ``seed`` (one per input). A mechanism
    that uses a ``BatchedRNG`` can derive one from ``rng.integers(2**63)``. ``featurizer`` maps
    an output (batched: all outputs) to a scalar (one scalar per output), e.g. the last release
    of a counter or an agent's count of pulls of one arm. ``delta`` is the claimed delta.
    """
    if not is_integral(trials) or trials < 20:
        raise PrivacyError("trials", "an int >= 20", trials)
    trials = int(trials)
    if not 0.0 < float(confidence) < 1.0:
        raise PrivacyError("confidence", "a number in (0, 1)", confidence)
    if not 0.0 < float(selection_fraction) < 1.0:
        raise PrivacyError("selection_fraction", "a number in (0, 1)", selection_fraction)
    delta = check_delta(delta, allow_zero=True)
    if not is_integral(num_thresholds) or num_thresholds < 1:
        raise PrivacyError("num_thresholds", "an int >= 1", num_thresholds)
    num_thresholds = int(num_thresholds)
    seq_a, seq_b = np.random.SeedSequence(int(seed)).spawn(2)
    fa = _sample(
        mechanism, stream, np.random.Generator(np.random.PCG64(seq_a)), trials, featurizer, batched
    )
    fb = _sample(
        mechanism,
        neighbour,
        np.random.Generator(np.random.PCG64(seq_b)),
        trials,
        featurizer,
        batched,
    )
    n_sel = int(round(trials * float(selection_fraction)))
    n_sel = min(max(n_sel, 1), trials - 1)
    n_est = trials - n_sel
    alpha = (1.0 - float(confidence)) / 2.0

    # selection: every threshold event in both directions, scored with Wilson bounds
    cuts = _thresholds(np.concatenate([fa[:n_sel], fb[:n_sel]]), num_thresholds)
    z = _normal_quantile(1.0 - alpha)
    above_a = (fa[:n_sel, None] > cuts).sum(axis=0)
    above_b = (fb[:n_sel, None] > cuts).sum(axis=0)
    candidates = []  # (score, kind, direction, index)
    for kind, ka, kb in (("gt", above_a, above_b), ("le", n_sel - above_a, n_sel - above_b)):
        lo_a, hi_a = _wilson(ka.astype(float), n_sel, z)
        lo_b, hi_b = _wilson(kb.astype(float), n_sel, z)
        for direction, num, den in (("ab", lo_a, hi_b), ("ba", lo_b, hi_a)):
            with np.errstate(divide="ignore", invalid="ignore"):
                score = np.log(np.maximum(num - delta, 0.0) / den)
            score = np.where(np.isfinite(score), score, -np.inf)
            j = int(np.argmax(score))
            candidates.append((float(score[j]), kind, direction, j))
    _, kind, direction, j = max(candidates, key=lambda c: c[0])
    cut = float(cuts[j])

    # estimation on held-out samples, exact Clopper–Pearson
    first, second = (fa[n_sel:], fb[n_sel:]) if direction == "ab" else (fb[n_sel:], fa[n_sel:])
    if kind == "gt":
        k1, k0 = int((first > cut).sum()), int((second > cut).sum())
    else:
        k1, k0 = int((first <= cut).sum()), int((second <= cut).sum())
    lower1, _ = clopper_pearson(k1, n_est, alpha)
    _, upper0 = clopper_pearson(k0, n_est, alpha)
    bound = math.log((lower1 - delta) / upper0) if lower1 > delta else 0.0
    p1, p0 = k1 / n_est, k0 / n_est
    estimate = math.log((p1 - delta) / p0) if p1 > delta and p0 > 0 else math.inf
    if p1 <= delta:
        estimate = 0.0
    names = ("stream", "neighbour") if direction == "ab" else ("neighbour", "stream")
    op = ">" if kind == "gt" else "<="
    event = f"P[f {op} {cut:.6g} | {names[0]}] vs P[. | {names[1]}]"
    return AuditResult(
        epsilon_lower=max(0.0, bound),
        epsilon_estimate=estimate,
        event=event,
        threshold=cut,
        counts=(k1, n_est, k0, n_est),
        confidence=float(confidence),
        trials=int(trials),
        delta=delta,
    )


def neighbouring_stream(
    stream: np.ndarray, index: int | tuple[int, ...], value: float
) -> np.ndarray:
    """A copy of ``stream`` with the entry at ``index`` replaced by ``value`` (event-level
    neighbours)."""
    out = np.array(stream, dtype=np.float64, copy=True)
    out[index] = value
    return out


def audit_output_mechanism(
    mechanism: Any,
    *,
    trials: int = 100_000,
    seed: int = 0,
    confidence: float = 0.95,
) -> AuditResult:
    """Audit an output-perturbation mechanism (``privatize(values, rng)``, ``sensitivity`` and
    ``delta`` attributes, e.g. :class:`~fedbandit_env.privacy.mechanisms.LaplaceMechanism`) on
    the neighbouring scalars ``0`` and ``sensitivity``; compare the result with its epsilon."""
    sensitivity = getattr(mechanism, "sensitivity", None)
    if sensitivity is None or not callable(getattr(mechanism, "privatize", None)):
        raise PrivacyError(
            "mechanism", "an object with privatize(values, rng) and sensitivity", mechanism
        )

    def run(value: np.ndarray, rng: np.random.Generator, n: int) -> np.ndarray:
        return mechanism.privatize(np.full(n, float(value[0])), rng)

    return audit_epsilon(
        run,
        np.array([0.0]),
        np.array([float(sensitivity)]),
        trials=trials,
        seed=seed,
        batched=True,
        confidence=confidence,
        delta=float(getattr(mechanism, "delta", 0.0)),
    )
