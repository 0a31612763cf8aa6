"""Empirical privacy audit: a high-confidence lower bound on epsilon from samples.

Claims are checked, not trusted (docs/privacy.md, "Empirical audit"). :func:`audit_epsilon` runs
a randomized ``mechanism(stream, rng) -> output`` many times on two neighbouring inputs (e.g.
reward streams that differ in one entry), maps every output to a scalar with a ``featurizer``,
and searches the threshold events ``{f > c}`` and ``{f <= c}`` in both directions. For an
(epsilon, delta)-DP mechanism every event E satisfies ``P_A(E) <= e^epsilon P_B(E) + delta``, so

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
    return audit_samples(
        fa,
        fb,
        confidence=confidence,
        delta=delta,
        num_thresholds=num_thresholds,
        selection_fraction=selection_fraction,
    )


def _laplace_llr(
    sel_a: np.ndarray, sel_b: np.ndarray, columns: list[int]
) -> Callable[[np.ndarray], np.ndarray] | None:
    """A likelihood-ratio featurizer fitted on the selection samples only: each column is modelled
    as a Laplace law around its median (scale: mean absolute deviation) under either input, and
    the feature is the sum of the columns' log-likelihood ratios
    ``(|x - m_A| - |x - m_B|) / b`` (Nasr et al. 2021: the optimal test of a shift)."""
    terms = []
    for k in columns:
        a, b = sel_a[:, k], sel_b[:, k]
        m_a, m_b = float(np.median(a)), float(np.median(b))
        scale = 0.5 * (float(np.mean(np.abs(a - m_a))) + float(np.mean(np.abs(b - m_b))))
        if m_a != m_b and scale > 0 and math.isfinite(scale):
            terms.append((k, m_a, m_b, scale))
    if not terms:
        return None

    def llr(f: np.ndarray) -> np.ndarray:
        out = np.zeros(f.shape[0])
        for k, m_a, m_b, scale in terms:
            out += (np.abs(f[:, k] - m_a) - np.abs(f[:, k] - m_b)) / scale
        return out

    return llr


def audit_samples(
    fa: np.ndarray,
    fb: np.ndarray,
    *,
    confidence: float = 0.95,
    delta: float = 0.0,
    num_thresholds: int = 64,
    selection_fraction: float = 0.5,
    likelihood_ratio: bool = False,
    names: list[str] | None = None,
) -> AuditResult:
    """The audit of :func:`audit_epsilon` on featurized samples: ``fa`` and ``fb`` are (trials,)
    or (trials, K) arrays of finite features of the outputs on the two inputs.

    With K columns (e.g. every release of a transcript that can carry the changed record) the
    first ``selection_fraction`` of the samples selects the column, the threshold event and the
    direction (Jagielski et al. 2020's threshold test over candidate outputs); with
    ``likelihood_ratio`` a summed Laplace log-likelihood-ratio column fitted on the selection
    samples competes too. The held-out samples then bound the selected event's two
    probabilities with exact Clopper–Pearson intervals, so the bound holds with probability
    ``confidence`` whatever was searched.
    """
    fa = np.asarray(fa, dtype=np.float64)
    fb = np.asarray(fb, dtype=np.float64)
    fa = fa[:, None] if fa.ndim == 1 else fa
    fb = fb[:, None] if fb.ndim == 1 else fb
    if fa.ndim != 2 or fa.shape != fb.shape or fa.shape[0] < 20:
        raise PrivacyError(
            "features", "two (trials,) or (trials, K) arrays of one shape, trials >= 20", fa.shape
        )
    if not (np.all(np.isfinite(fa)) and np.all(np.isfinite(fb))):
        raise PrivacyError("featurizer", "finite scalars", "NaN or inf")
    trials, width = fa.shape
    labels = (
        list(names) if names is not None else [f"f{k}" if width > 1 else "f" for k in range(width)]
    )
    n_sel = int(round(trials * float(selection_fraction)))
    n_sel = min(max(n_sel, 1), trials - 1)
    n_est = trials - n_sel
    alpha = (1.0 - float(confidence)) / 2.0
    starts = [0] * width  # where each column's selection samples start
    if likelihood_ratio and n_sel >= 40:
        # fitted on the first half of the selection samples, scored on the second half
        llr = _laplace_llr(fa[: n_sel // 2], fb[: n_sel // 2], list(range(width)))
        if llr is not None:
            fa = np.column_stack([fa, llr(fa)])
            fb = np.column_stack([fb, llr(fb)])
            labels.append("llr")
            starts.append(n_sel // 2)

    # selection: every threshold event of every column in both directions, Wilson-scored
    # one column: the plain level; several: Bonferroni over the columns' events, so that the
    # selection prefers events whose advantage survives (the winner's curse of a wide search)
    searched = len(starts) * 4 * num_thresholds if len(starts) > 1 else 1
    z = _normal_quantile(1.0 - alpha / searched)
    candidates = []  # (score, kind, direction, column, cut)
    for col, start in enumerate(starts):
        sa, sb = fa[start:n_sel, col], fb[start:n_sel, col]
        size = n_sel - start
        cuts = _thresholds(np.concatenate([sa, sb]), num_thresholds)
        above_a = (sa[:, None] > cuts).sum(axis=0)
        above_b = (sb[:, None] > cuts).sum(axis=0)
        for kind, ka, kb in (("gt", above_a, above_b), ("le", size - above_a, size - above_b)):
            lo_a, hi_a = _wilson(ka.astype(float), size, z)
            lo_b, hi_b = _wilson(kb.astype(float), size, z)
            for direction, num, den in (("ab", lo_a, hi_b), ("ba", lo_b, hi_a)):
                with np.errstate(divide="ignore", invalid="ignore"):
                    score = np.log(np.maximum(num - delta, 0.0) / den)
                score = np.where(np.isfinite(score), score, -np.inf)
                j = int(np.argmax(score))
                candidates.append((float(score[j]), kind, direction, col, float(cuts[j])))
    _, kind, direction, col, cut = max(candidates, key=lambda c: c[0])

    # estimation on held-out samples, exact Clopper–Pearson
    ea, eb = fa[n_sel:, col], fb[n_sel:, col]
    first, second = (ea, eb) if direction == "ab" else (eb, ea)
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
    who = ("stream", "neighbour") if direction == "ab" else ("neighbour", "stream")
    op = ">" if kind == "gt" else "<="
    event = f"P[{labels[col]} {op} {cut:.6g} | {who[0]}] vs P[. | {who[1]}]"
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
