"""The attacks' payload formulas, one source for both engines (docs/adversary.md;
docs/architecture.md, "Shared kernels").

Written for one run with any leading batch axes against the array namespace of the arguments
(:mod:`fedbandit_env.xp`): :mod:`fedbandit_env.adversary.attacks` calls them on (B, N, ...)
float64 arrays, :mod:`fedbandit_env.jax.adversary` on one run's (N, ...) float32 arrays.
Shapes: ``payload`` (..., N, dim) the learner's messages of the step, ``honest_send``
(..., N) the honest agents that send, ``means`` (..., M) the true global means, ``best_arm``
(...) the best arm. Random numbers come in as arguments: each engine draws them from its own
streams or keys. Only the Byzantine rows of a result are used.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from fedbandit_env.xp import namespace


def honest_max_counts(payload: Any, honest_send: Any, num_arms: int) -> Any:
    """(..., M): per arm the largest count among this step's honest [means, counts] payloads,
    0 where no honest agent sends."""
    xp = namespace(payload, honest_send)
    counts = payload[..., num_arms : 2 * num_arms]
    top = xp.where(honest_send[..., None], counts, -xp.inf).max(axis=-2)
    return xp.where(xp.isfinite(top), top, 0.0)


def counts_half(mode: str, payload: Any, honest_send: Any, num_arms: int, huge: float) -> Any:
    """(..., N, M) the counts half of a [means, counts] payload: ``"own"`` the learner's own
    counts for the agent, ``"zero"``, ``"huge"`` (``huge`` = 10 T N) or ``"max"`` the largest
    honest count per arm (:func:`honest_max_counts`)."""
    xp = namespace(payload, honest_send)
    shape = (*honest_send.shape, num_arms)
    if mode == "own":
        return payload[..., num_arms : 2 * num_arms]
    if mode == "zero":
        return xp.zeros(shape, dtype=payload.dtype)
    if mode == "huge":
        return xp.full(shape, huge, dtype=payload.dtype)
    top = honest_max_counts(payload, honest_send, num_arms)
    return xp.broadcast_to(top[..., None, :], shape)


def means_payload(
    means: Any, mode: str, payload: Any, honest_send: Any, num_arms: int, huge: float
) -> Any:
    """(..., N, 2M) [means, counts] rows for every agent: ``means`` broadcasts to (..., N, M)
    (one row for everyone, or one per agent), the counts are :func:`counts_half`'s."""
    xp = namespace(payload, honest_send)
    shape = (*honest_send.shape, num_arms)
    means = xp.broadcast_to(xp.asarray(means, dtype=payload.dtype), shape)
    counts = counts_half(mode, payload, honest_send, num_arms, huge)
    return xp.concatenate([means, counts], axis=-1)


def demote_best_means(best_arm: Any, num_arms: int) -> Any:
    """(..., 1, M) ``demote_best``'s means: 0 for the best arm, 1 for the others."""
    return (np.arange(num_arms) != best_arm[..., None, None]) * 1.0


def reverse_means(means: Any) -> Any:
    """(..., 1, M) ``reverse``'s means: 1 - mu_k."""
    return (1.0 - means)[..., None, :]


def fake_draws(u: Any, low: Any) -> Any:
    """Demirel, Yildirim & Tekin's fake samples: ``0.1 u`` (in [0, 0.1)) where ``low``, else
    ``0.9 + 0.1 u`` (in [0.9, 1))."""
    xp = namespace(u, low)
    return xp.where(low, 0.1 * u, 0.9 + 0.1 * u)


def flipped_means(means: Any, u: Any, beta: float) -> Any:
    """(..., N, M) ``flipped_means``: a fresh low draw for the arms within ``beta`` of the best
    (``mu* - mu_k <= beta``), a high one for the others, from uniforms ``u`` (..., N, M)."""
    near = (means.max(axis=-1, keepdims=True) - means) <= beta  # (..., M)
    return fake_draws(u, near[..., None, :])


def beta_optimal(means: Any, beta: float) -> Any:
    """(..., M) the beta-optimal arms of ``fedmom_sce1`` and ``fedmom_sce2``: ``mu* - mu_k <
    beta`` (strict, as in the authors' code)."""
    return (means.max(axis=-1, keepdims=True) - means) < beta


def alie(payload: Any, honest_send: Any, z: float) -> Any:
    """(..., N, dim) ``alie``: per coordinate the mean minus ``z`` population standard
    deviations of this step's honest payloads, the same for every agent; 0 where no honest
    agent sends."""
    xp = namespace(payload, honest_send)
    heard = honest_send[..., None]
    n = heard.sum(axis=-2)  # (..., 1)
    safe = xp.maximum(n, 1)
    mean = xp.where(heard, payload, 0.0).sum(axis=-2) / safe
    var = xp.where(heard, (payload - mean[..., None, :]) ** 2, 0.0).sum(axis=-2) / safe
    value = xp.where(n > 0, mean - z * xp.sqrt(var), 0.0)  # (..., dim)
    return xp.broadcast_to(value[..., None, :], payload.shape)


def naive_recommendation(u: Any, best_arm: Any, num_arms: int) -> Any:
    """(..., N, 1) ``rec_naive``: from one uniform per agent ``u`` (..., N), one of the M - 1
    suboptimal arms uniformly, as a float payload."""
    xp = namespace(u, best_arm)
    k = xp.minimum((u * (num_arms - 1)).astype(best_arm.dtype), num_arms - 2)
    arm = k + (k >= best_arm[..., None])
    return arm[..., None] * 1.0


def worst_recommendation(means: Any, num_agents: int) -> Any:
    """(..., N, 1) ``rec_worst``: the arm of lowest global mean (lowest id on ties) for every
    agent, as a float payload."""
    xp = namespace(means)
    arm = xp.argmin(means, axis=-1) * 1.0
    return xp.broadcast_to(arm[..., None, None], (*arm.shape, num_agents, 1))


def smart_recommendation(pull_counts: Any, honest: Any, best_arm: Any, u: Any) -> Any:
    """(..., N, 1) ``rec_smart`` (``per_receiver=False``): the suboptimal arm the honest agents
    (``honest`` (..., N)) have pulled least (``pull_counts`` (..., N, M) summed), ties broken
    by uniforms ``u`` (..., N, M) per Byzantine agent (the integer counts plus half a uniform),
    as a float payload."""
    xp = namespace(pull_counts, u)
    counts = xp.where(honest[..., None], pull_counts, 0).sum(axis=-2) * 1.0  # (..., M)
    best = np.arange(counts.shape[-1]) == best_arm[..., None]
    counts = xp.where(best, xp.inf, counts)
    arm = xp.argmin(counts[..., None, :] + 0.5 * u, axis=-1)
    return arm[..., None] * 1.0


def honest_senders(send: Any, byzantine: Any) -> Any:
    """(..., N) bool: the agents that send on a channel this step and are not Byzantine."""
    return send & ~byzantine


def crashed_down(pulls_before: Any, crash_pull: Any) -> Any:
    """(..., N) bool: the crashed agents that are down in a step taken after ``pulls_before``
    (...) pulls: from their crash pull on, and in the communication steps right before it
    (``crash_pull`` (..., N); an agent that never crashes has a pull past the horizon)."""
    return pulls_before[..., None] >= crash_pull - 1


def honest_agents(roles: Any, like: Any) -> Any:
    """(..., N) bool: the honest agents (role 0), or every agent (the shape of ``like``) where
    there are no roles (no adversary)."""
    if roles is None:
        return namespace(like).ones(like.shape, dtype=bool)
    return roles == 0
