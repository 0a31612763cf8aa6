"""The index baselines' formulas, one source for both engines (docs/architecture.md, "Shared
kernels").

Each function is written for one run with any leading batch axes against the array namespace
of its arguments (:mod:`fedbandit_env.xp`): the numpy learners (:mod:`baselines.ucb`,
:mod:`baselines.epsilon_greedy`, :mod:`baselines.thompson`) call them on (B, N, M) float64
arrays, the JAX learners (:mod:`baselines.jax.index`) on one run's (N, M) float32 arrays.
Random numbers come in as arguments (uniforms, normals): each engine draws them from its own
streams or keys.
"""

from __future__ import annotations

from typing import Any

from fedbandit_env.xp import fori_loop, namespace

ATTEMPTS = 4
"""Marsaglia-Tsang candidates per Gamma variate (:func:`gamma_marsaglia_tsang`)."""
KL_EPS = 1e-15
"""KL-UCB clips means into [KL_EPS, 1 - KL_EPS] (float64) before the logarithms."""


def unpulled_to_inf(index: Any, n: Any) -> Any:
    """``index`` with ``inf`` on arms of ``n <= 0``: every arm is tried once first."""
    xp = namespace(index, n)
    return xp.where(n > 0, index, xp.inf)


def ucb1_index(n: Any, s: Any, t: Any, alpha: float, scale: float) -> Any:
    """The UCB1 index of Auer, Cesa-Bianchi and Fischer (2002), ``s / n + scale sqrt(alpha ln t
    / n)`` (their ``x̄_j + sqrt(2 ln n / n_j)`` at ``alpha = 2``, ``scale = 1``), ``inf`` on
    unpulled arms (``n <= 0``); ``t`` broadcasts against ``n`` and is read as at least 1."""
    xp = namespace(n, s, t)
    safe = xp.maximum(n, 1.0)
    index = s / safe + scale * xp.sqrt(alpha * xp.log(xp.maximum(t, 1.0)) / safe)
    return unpulled_to_inf(index, n)


def discount_statistics(n: Any, s: Any, hit: Any, reward: Any, gamma: Any) -> Any:
    """D-UCB's discounted statistics after one more step (Garivier and Moulines 2011, Sec. 3):
    ``N_t(gamma, i) = gamma N_{t-1}(gamma, i) + 1{I_t = i}`` and the discounted reward sums
    alike; ``hit`` (..., M) the pulled arm's indicator, ``reward`` (...) its reward. Returns
    ``(n, s)``."""
    xp = namespace(n, s)
    return gamma * n + hit, gamma * s + xp.where(hit, reward[..., None], 0.0)


def window_statistics(n: Any, s: Any, hit: Any, reward: Any, out: Any, out_reward: Any) -> Any:
    """SW-UCB's statistics over an agent's last ``tau`` pulls after one more (Garivier and
    Moulines 2011, Sec. 4): the new pull (``hit``, ``reward``) in, the pull ``tau`` pulls ago
    (``out`` (..., M) its indicator, all False while fewer than ``tau`` were made;
    ``out_reward``) out. Returns ``(n, s)``."""
    xp = namespace(n, s)
    n = n + hit.astype(n.dtype) - out.astype(n.dtype)
    s = s + xp.where(hit, reward[..., None], 0.0) - xp.where(out, out_reward[..., None], 0.0)
    return n, s


def unit_reward(reward: Any, lo: float, hi: float) -> Any:
    """A reward in [lo, hi] mapped onto [0, 1] (clipped first)."""
    xp = namespace(reward)
    return (xp.clip(reward, lo, hi) - lo) / (hi - lo)


def bernoulli_kl(p: Any, q: Any) -> Any:
    """kl(p, q) = p ln(p/q) + (1-p) ln((1-p)/(1-q)), with p and q clipped into [eps, 1 - eps]:
    eps = :data:`KL_EPS` in float64, the float32 just below 1 for float32 (1 - 1e-15 rounds to
    1 there)."""
    xp = namespace(p, q)
    upper = 1.0 - max(KL_EPS, float(xp.finfo(p.dtype).epsneg))
    p = xp.clip(p, KL_EPS, upper)
    q = xp.clip(q, KL_EPS, upper)
    return p * xp.log(p / q) + (1.0 - p) * xp.log((1.0 - p) / (1.0 - q))


def kl_upper_bound(p: Any, level: Any, iterations: int) -> Any:
    """Largest q in [p, 1] with kl(p, q) <= level, by bisection (kl(p, .) increases on [p, 1]):
    ``iterations`` halvings (a loop over halvings, not agents or arms)."""
    xp = namespace(p, level)

    def halve(_: int, bracket: tuple[Any, Any]) -> tuple[Any, Any]:
        lo, hi = bracket
        mid = 0.5 * (lo + hi)
        ok = bernoulli_kl(p, mid) <= level
        return xp.where(ok, mid, lo), xp.where(ok, hi, mid)

    lo, _ = fori_loop(xp, iterations, halve, (p, xp.ones_like(p)))
    return lo


def kl_ucb_index(n: Any, s: Any, total: Any, c: float, iterations: int) -> Any:
    """KL-UCB (Garivier and Cappé 2011, Bernoulli KL): the largest q in [p_k, 1] with
    ``n_k kl(p_k, q) <= ln t + c ln ln t``, p_k = s_k / n_k clipped into [0, 1]; ``inf`` on
    unpulled arms."""
    xp = namespace(n, s, total)
    safe = xp.maximum(n, 1.0)
    log_t = xp.log(xp.maximum(total, 1.0))
    budget = log_t + c * xp.log(xp.maximum(log_t, 1.0))
    upper = kl_upper_bound(xp.clip(s / safe, 0.0, 1.0), budget / safe, iterations)
    return unpulled_to_inf(upper, n)


def empirical_mean_index(n: Any, s: Any) -> Any:
    """The greedy index of epsilon-greedy: ``s / n``, ``inf`` on unpulled arms."""
    xp = namespace(n, s)
    return unpulled_to_inf(s / xp.maximum(n, 1.0), n)


def epsilon_explore(u: Any, greedy: Any, epsilon: float, num_arms: int) -> Any:
    """Epsilon-greedy's final arm from two uniforms ``u`` (..., 2) per agent: with probability
    ``epsilon`` (``u[..., 0] < epsilon``) the arm ``floor(u[..., 1] M)``, else ``greedy``."""
    xp = namespace(u, greedy)
    random_arm = xp.minimum((u[..., 1] * num_arms).astype(greedy.dtype), num_arms - 1)
    return xp.where(u[..., 0] < epsilon, random_arm, greedy)


def bernoulli_trick(u: Any, p: Any) -> Any:
    """The Bernoulli trick of Agrawal and Goyal (2012, Algorithm 2): a success (1.0) where the
    uniform ``u`` falls below the reward's success probability ``p``."""
    return (u < p).astype(p.dtype)


def gamma_marsaglia_tsang(a: Any, normal: Any, uniform: Any) -> Any:
    """Gamma(a, 1) variates for a >= 1 (any shape S) from ``normal`` and ``uniform`` of shape
    (*S, ATTEMPTS): the first accepted Marsaglia-Tsang (2000) candidate, else the last one (its
    Wilson-Hilferty approximation): a fixed budget of random numbers per variate."""
    xp = namespace(a, normal, uniform)
    d = (a - 1.0 / 3.0)[..., None]
    c = 1.0 / xp.sqrt(9.0 * d)
    v = (1.0 + c * normal) ** 3
    positive = v > 0
    log_v = xp.log(xp.where(positive, v, 1.0))
    accept = positive & (xp.log(uniform) < 0.5 * normal**2 + d - d * v + d * log_v)
    first = xp.where(accept.any(axis=-1), xp.argmax(accept, axis=-1), ATTEMPTS - 1)
    chosen = xp.take_along_axis(d * xp.where(positive, v, 1.0), first[..., None], axis=-1)
    return chosen[..., 0]


def beta_posterior_sample(n: Any, s: Any, normal: Any, uniform: Any) -> Any:
    """A sample of Beta(1 + s_k, 1 + n_k - s_k) per arm (Beta(1, 1) priors, Agrawal and Goyal
    2012) as G1 / (G1 + G2) of two Gamma variates; ``normal`` and ``uniform`` (*n.shape, 2,
    ATTEMPTS); ``s`` is clipped into [0, n] first (received statistics may be noisy)."""
    xp = namespace(n, s, normal)
    s = xp.clip(s, 0.0, n)
    g = gamma_marsaglia_tsang(xp.stack([1.0 + s, 1.0 + n - s], axis=-1), normal, uniform)
    return g[..., 0] / (g[..., 0] + g[..., 1])


def gaussian_posterior_sample(n: Any, s: Any, z: Any, scale: float) -> Any:
    """A sample of N(s_k / (n_k + 1), scale^2 / (n_k + 1)) per arm from standard normals ``z``
    (Gaussian priors, Agrawal and Goyal 2013)."""
    xp = namespace(n, s, z)
    return z * scale / xp.sqrt(n + 1.0) + s / (n + 1.0)


def uniform_arm(u: Any, num_arms: int, dtype: Any) -> Any:
    """The uniform baseline's arm from one uniform ``u`` per agent: ``min(floor(u M), M - 1)``
    (``dtype`` the engine's integer type)."""
    xp = namespace(u)
    return xp.minimum((u * num_arms).astype(dtype), num_arms - 1)


def heard_maximum(heard: Any) -> Any:
    """Flooding's maximum over the messages that arrived (0 where none did): the aggregating
    delivery's ``value`` (``reduce="max"``), or the maximum over the slots of a padded
    delivery (``mask`` (..., D), ``payload`` (..., D, dim))."""
    if hasattr(heard, "value"):
        return heard.value
    xp = namespace(heard.payload)
    return xp.where(heard.mask[..., None], heard.payload, 0.0).max(axis=-2)
