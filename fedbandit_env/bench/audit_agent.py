"""Targeted empirical privacy audits of whole learners (docs/privacy.md: claims are checked, not
trusted; docs/privacy.md "Auditing learners").

The neighbouring pair. Agent 0 of a small federation (3 agents on a ring unless the learner's
target says otherwise) is paid from a fixed 0/1 reward table in which every reward is 0 except,
in the neighbouring table, the reward of its pull at step 0 (Bernoulli rewards with means 0 or 1
are deterministic). That reward is the one record that differs.

The output. Every message of the federation (after the privacy wrapper when one is used) is a
release. A pilot of a few runs on both inputs *with the same seeds* (common random numbers)
locates the releases that carry the changed reward: exactly the (step, channel, agent,
coordinate) entries whose values differ between the two inputs. Nothing is hard-coded about when
a learner sends, so a learner whose message timing shifts is still audited on the right
releases. The audit then records only those candidates (agent 0's first ``max_candidates``)
over many independent batched runs (one vector environment of ``trials`` runs per input, whose
random numbers come from whole-batch draws: ``random_streams="block"``) and
hands the (trials, K) feature matrix to :func:`fedbandit_env.bench.privacy_audit.audit_samples`: the first
half selects the candidate release, a Laplace likelihood-ratio combination of all of them, the
threshold and the direction; the held-out half gives exact Clopper–Pearson bounds.

The claim. :data:`TARGETS` says, per private learner, the federation to audit on, the epsilon of
the single most exposed release (``per_release``: the declared epsilon when one release carries
the whole guarantee, the accountant's per-release share when the declaration covers a stream)
and how to build a broken variant (noise scale halved). The learner's declaration is
``TeamPolicy.privacy_epsilon`` read after ``reset`` (:func:`declared_claim`); a learner that
declares nothing or ``inf`` claims no privacy, and the audit just reports how much it leaks.
A lower bound, never a proof.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import math
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fedbandit_env.agent_registry import (
    agent_class,
    is_known,
    list_agents,
    lookup_agent,
    make_agent,
    without_trust_flags,
)
from fedbandit_env.bench.evaluate import declared_epsilon
from fedbandit_env.bench.privacy_audit import AuditResult, audit_samples
from fedbandit_env.block_streams import streams_for
from fedbandit_env.errors import ConfigError, UnknownIdError
from fedbandit_env.registration import make_vec
from fedbandit_env.seeding import BatchedRNG

ENV = "FedBandit/Homogeneous-v0"
MIN_TRIALS = 100
SENTINEL = -1.0e6  # feature value of a candidate release that was not sent in a run


# -- the audit's federations and targets -------------------------------------------------------
@dataclass(frozen=True)
class AuditTarget:
    """How one private learner is audited (docs/privacy.md "Auditing learners").

    ``horizon``, ``num_arms``, ``num_agents``, ``env`` and ``env_kwargs`` fix the federation;
    ``per_release(policy)`` is the epsilon of the most exposed single release (policy after
    ``reset``); ``wrapper(epsilon, num_arms)``, when set, gives the privacy wrapper's channel
    options (the learner itself is not private); ``note`` explains the per-release figure."""

    horizon: int = 16
    num_arms: int = 2
    num_agents: int = 3
    env: str = ENV
    env_kwargs: Mapping[str, Any] = field(default_factory=dict)
    per_release: Callable[[Any], float] | None = None
    wrapper: Callable[[float, int], dict[str, Any]] | None = None
    note: str = ""
    align: bool = True
    unit_context: bool = False
    broken_factor: float = 2.0
    audit_delta: Callable[[Any], float] | None = None


def _tree_per_release(policy: Any) -> float:
    return float(policy.counter.epsilon_per_block)


def _hybrid_per_release(policy: Any) -> float:
    # the first insertion into a hybrid counter is released with Lap(2D/epsilon): epsilon/2
    return float(policy.privacy_epsilon) / 2.0


def _declared(policy: Any) -> float:
    return float(policy.privacy_epsilon)


def shared_wrapper(epsilon: float, num_arms: int) -> dict[str, Any]:
    """The privacy wrapper's options for a ``*_shared`` learner (payload ``[counts, sums]``):
    Laplace per message at ``epsilon`` with the learner's own L1 sensitivity 1 (one reward in
    [0, 1] moves one ``sums`` entry by at most 1; ``clip=False``: clipping to a ball would mix
    the coordinates and weaken the audit without changing the guarantee)."""
    return {"neighbors": {"epsilon": float(epsilon), "sensitivity": 1.0, "clip": False}}


def _any_wrapper(
    agent_id: str, kwargs: dict[str, Any], tgt: AuditTarget
) -> Callable[[float, int], dict[str, Any]]:
    """The privacy wrapper's options for a learner without a target of its own: Laplace per
    message at the given epsilon on every channel it sends on, each payload clipped to the L1
    ball of radius 1/2 (sensitivity 1), so the guarantee holds whatever the learner sends."""
    policy = make_agent(agent_id, **kwargs)
    names = sorted(_build_env(tgt, policy, agent_id, 1).engine.channels)

    def options(epsilon: float, _num_arms: int) -> dict[str, Any]:
        return {name: {"epsilon": float(epsilon), "sensitivity": 1.0} for name in names}

    return options


def _gaussian_epsilon(mu: float, delta: float) -> float:
    """The exact (analytic, Balle & Wang 2018) epsilon at ``delta`` of a Gaussian mechanism
    whose sensitivity is ``mu`` noise standard deviations."""
    from fedbandit_env.privacy.calibration import gaussian_sigma

    lo, hi = 1e-9, 1e4
    if gaussian_sigma(mu, lo, delta) <= 1.0:  # delta alone covers the release: it is (0, delta)
        return 0.0
    for _ in range(200):  # sigma(eps) decreases in eps: find sigma(eps) = 1 for sensitivity mu
        mid = math.sqrt(lo * hi)
        if gaussian_sigma(mu, mid, delta) > 1.0:
            lo = mid
        else:
            hi = mid
    return math.sqrt(lo * hi)


def _gram_per_release(policy: Any) -> float:
    # one tree node: Frobenius sensitivity 2 Lt2, off-diagonal sd sigma_N, diagonal sqrt(2) sigma_N,
    # i.e. a Gaussian of sensitivity mu = sqrt(2) Lt2 / sigma_N sd (docs/privacy.md, zCDP check)
    c = policy.constants
    return _gaussian_epsilon(math.sqrt(2.0) * c.L_tilde_sq / c.sigma_N, float(policy.delta))


def _learner_delta(policy: Any) -> float:
    return float(policy.delta)


@dataclass(frozen=True)
class LinearAuditLimits:
    """What bounds every audit of a Gram-tree learner (docs/privacy.md, "Linear learners").

    One tree node releases ``z z^T`` (``z = [x, y]``) plus symmetric Gaussian noise
    (off-diagonal sd ``sigma_N``, diagonal ``sqrt(2) sigma_N``): a Gaussian mechanism whose
    shift is ``mu = ||Delta||_F / (sqrt(2) sigma_N)`` noise standard deviations.
    ``node_mu``: the worst case ``||Delta||_F = 2 Lt2``; ``pair_node_mu``: the audit's pair
    (``x = e_1``, reward 0 vs 1). One observation enters at most ``m`` nodes, so the whole
    transcript is at most a Gaussian of ``transcript_mu = sqrt(m) node_mu`` (= ``sqrt(2 rho)``),
    whose total variation ``transcript_tv`` bounds ``P_A(E) - P_B(E)`` for every event E. When
    it is below ``delta`` no event gives ``P_A(E) - delta > 0``: the exact epsilon of the whole
    transcript at ``delta`` (``transcript_epsilon``) is 0, and so is every audit's bound.
    ``rho`` is the accountant's zCDP of the stream and ``rho_epsilon`` its (loose) conversion
    to epsilon at ``delta``."""

    agent_id: str
    delta: float
    m: int
    sigma_N: float
    node_mu: float
    pair_node_mu: float
    transcript_mu: float
    transcript_tv: float
    transcript_epsilon: float
    rho: float
    rho_epsilon: float


def linear_audit_limits(
    agent_id: str, agent_kwargs: dict[str, Any] | None = None
) -> LinearAuditLimits:
    """:class:`LinearAuditLimits` of a Gram-tree learner on its audit federation."""
    from fedbandit_env.privacy.accountant import zcdp_to_dp

    tgt = target(agent_id)
    policy = make_agent(agent_id, **dict(agent_kwargs or {}))
    venv = _build_env(tgt, policy, agent_id, 1)
    venv.reset(seed=0)
    policy.reset(venv.facts, BatchedRNG.for_runs([0], "agents"))
    c = getattr(policy, "constants", None)
    if c is None or not hasattr(c, "sigma_N"):
        raise ConfigError(f"{agent_id}: audit: not a private Gram-tree learner (no constants)")
    z = np.zeros(c.d + 1)
    z[0] = 1.0
    z_neighbour = z.copy()
    z_neighbour[-1] = 1.0
    pair = float(np.linalg.norm(np.outer(z, z) - np.outer(z_neighbour, z_neighbour)))
    node_mu = math.sqrt(2.0) * c.L_tilde_sq / c.sigma_N
    transcript_mu = math.sqrt(c.m) * node_mu
    return LinearAuditLimits(
        agent_id=agent_id,
        delta=float(c.delta),
        m=int(c.m),
        sigma_N=float(c.sigma_N),
        node_mu=node_mu,
        pair_node_mu=pair / (math.sqrt(2.0) * c.sigma_N),
        transcript_mu=transcript_mu,
        transcript_tv=math.erf(transcript_mu / (2.0 * math.sqrt(2.0))),
        transcript_epsilon=_gaussian_epsilon(transcript_mu, float(c.delta)),
        rho=float(c.zcdp_rho),
        rho_epsilon=float(zcdp_to_dp(c.zcdp_rho, float(c.delta))),
    )


LINEAR_ENV = "FedBandit/LinearContextual-v0"

TARGETS: dict[str, AuditTarget] = {
    "fed_lin_ucb": AuditTarget(
        num_arms=2,
        env=LINEAR_ENV,
        env_kwargs={"dim": 2, "num_agents": 3, "instance_seed": 0},
        per_release=_gram_per_release,
        align=False,
        unit_context=True,
        broken_factor=50.0,
        audit_delta=_learner_delta,
        horizon=16,
        note="Gram tree: one node, Gaussian of Frobenius sensitivity 2 Lt2",
    ),
    "fed_lin_ucb_decentralized": AuditTarget(
        num_arms=2,
        env=LINEAR_ENV,
        env_kwargs={"dim": 2, "num_agents": 3, "instance_seed": 0},
        per_release=_gram_per_release,
        align=False,
        unit_context=True,
        broken_factor=50.0,
        audit_delta=_learner_delta,
        horizon=16,
        note="Gram tree: one node, Gaussian of Frobenius sensitivity 2 Lt2",
    ),
    "gossip_fed_ucb": AuditTarget(
        horizon=16,
        per_release=_tree_per_release,
        note="tree counter: the init pull's reward is one leaf at epsilon / levels, reused by "
        "every release",
    ),
    "dp_mw_ucb": AuditTarget(
        horizon=16, per_release=_hybrid_per_release, note="hybrid counter: first release eps/2"
    ),
    "dp_dec_ucb": AuditTarget(
        horizon=16, per_release=_hybrid_per_release, note="hybrid counter: first release eps/2"
    ),
    "cdp_mab": AuditTarget(horizon=176, per_release=_declared, note="one Laplace epoch mean"),
    "ddp_mab": AuditTarget(horizon=176, per_release=_declared, note="one Laplace epoch mean"),
    "hdp_mab": AuditTarget(horizon=176, per_release=_declared, note="one Laplace epoch mean"),
    "ldp_ucb": AuditTarget(
        horizon=16,
        per_release=_declared,
        note="local: one Laplace (or randomized-response) report per reward, made at the agent",
    ),
}
for _sid in (
    "ucb1_shared",
    "kl_ucb_shared",
    "epsilon_greedy_shared",
    "thompson_beta_shared",
    "thompson_gaussian_shared",
):
    TARGETS[_sid] = AuditTarget(
        horizon=8,
        per_release=None,
        wrapper=shared_wrapper,
        note="privacy wrapper: Laplace per message",
    )


def target(agent_id: str) -> AuditTarget:
    """The audit target of a learner id (a learner with no target of its own gets the default
    federation and no per-release figure); an unknown id raises :class:`UnknownIdError`."""
    if agent_id in TARGETS:
        return TARGETS[agent_id]
    if not is_known(agent_id):
        agent_class(agent_id)  # raises UnknownIdError with suggestions
        raise UnknownIdError(f"audit: unknown learner {agent_id!r}; known: {list_agents()}")
    return AuditTarget()


# -- broken variants (mutation check) ----------------------------------------------------------
def half_noise_variant(cls: type, factor: float = 2.0) -> type:
    """A broken copy of a private learner class: it runs its mechanisms at ``factor`` times the
    epsilon it is given (Laplace noise scale divided by ``factor``: halved by default) but
    declares the epsilon it was given."""

    default = inspect.signature(cls).parameters["epsilon"].default

    class HalfNoise(cls):  # type: ignore[misc, valid-type]
        def __init__(self, *args: Any, epsilon: float = default, **kwargs: Any):
            super().__init__(*args, epsilon=factor * epsilon, **kwargs)

        @property
        def privacy_epsilon(self) -> float | None:
            value = super().privacy_epsilon
            return None if value is None else float(value) / factor

    HalfNoise.__name__ = HalfNoise.__qualname__ = f"{cls.__name__}HalfNoise"
    return HalfNoise


# -- running the federation --------------------------------------------------------------------
def _reward_tables(horizon: int, num_arms: int) -> tuple[np.ndarray, np.ndarray]:
    base = np.zeros((horizon, num_arms))
    neighbour = base.copy()
    neighbour[0, :] = 1.0  # the reward of agent 0's pull at step 0, whichever arm it pulls
    return base, neighbour


def _build_env(
    tgt: AuditTarget, policy: Any, agent_id: str, num_runs: int, streams: str = "per_run"
) -> Any:
    kwargs = {
        "num_agents": tgt.num_agents,
        "num_arms": tgt.num_arms,
        "horizon": tgt.horizon,
        **dict(tgt.env_kwargs),
    }
    if tgt.env == ENV:
        kwargs.setdefault("topology", "ring")
    kwargs.setdefault("reward", "bernoulli")
    preview = make_vec(tgt.env, num_runs=1, **kwargs)
    channels = policy.channel_spec(preview.config)
    if not channels:
        raise ConfigError(f"{agent_id}: audit: the learner sends no messages, nothing to audit")
    return make_vec(tgt.env, num_runs=num_runs, channels=channels, random_streams=streams, **kwargs)


@contextlib.contextmanager
def _short_buffers(horizon: int) -> Iterator[None]:
    """Per-step random buffers sized to the audit's short horizon instead of 1024 steps.

    The per-run buffered streams (:class:`fedbandit_env.seeding.BufferedStream` and the privacy
    streams) draw a chunk of up to 1024 steps per run at a time; with 10^4-10^5 audit runs of a
    few steps that is most of the audit's time. The chunk is capped at the horizon while the
    audit's federations are built and run. Each run's draws are still a deterministic function
    of its seed (never of the batch size); they differ from a long-horizon run's draws, which the
    audit does not need to reproduce."""
    from fedbandit_env import seeding

    saved = seeding.MAX_CHUNK_STEPS
    seeding.MAX_CHUNK_STEPS = min(saved, max(1, int(horizon) + 1))
    try:
        yield
    finally:
        seeding.MAX_CHUNK_STEPS = saved


class _Recorder:
    """Records the releases of each step: all of them (pilot) or only the candidates.

    Per-arm payloads (a length that is a multiple of the number of arms ``num_arms``: blocks of
    one entry per arm) are *aligned* on agent 0's first pull: in every block, entry 0 is the arm
    agent 0 pulled at step 0, entry 1 the next arm, and so on. That pull happens before any
    reward is seen, so it does not depend on the data; revealing it to the audit costs no
    privacy, and it lets one candidate coordinate carry the changed reward in every run
    whichever arm the learner's tie-break chose."""

    def __init__(
        self, candidates: list[tuple[int, str, int, int]] | None, num_runs: int, num_arms: int
    ):
        self.candidates = candidates
        self.num_arms = num_arms if num_arms > 1 else 0
        self.first_arm = np.zeros(num_runs, dtype=np.int64)
        self.steps: list[dict[str, tuple[np.ndarray, np.ndarray]]] = []
        if candidates is not None:
            self.out = np.full((num_runs, len(candidates)), SENTINEL)
            self.by_step: dict[int, list[tuple[int, str, int, int]]] = {}
            for k, (t, ch, i, c) in enumerate(candidates):
                self.by_step.setdefault(t, []).append((k, ch, i, c))

    def _aligned(self, payload: np.ndarray) -> np.ndarray:
        m = self.num_arms
        dim = payload.shape[-1]
        if not m or dim % m or not self.first_arm.any():
            return payload
        blocks = payload.reshape(*payload.shape[:-1], dim // m, m)
        order = (np.arange(m)[None, :] + self.first_arm[:, None]) % m  # (B, M)
        index = np.broadcast_to(order[:, None, None, :], blocks.shape)
        return np.take_along_axis(blocks, index, axis=-1).reshape(payload.shape)

    def record(self, step: int, messages: Mapping[str, tuple[np.ndarray, np.ndarray]]) -> None:
        if self.candidates is None:
            self.steps.append(
                {
                    n: (np.array(s, dtype=bool), self._aligned(np.asarray(p, dtype=float)))
                    for n, (s, p) in messages.items()
                }
            )
            return
        for k, ch, i, c in self.by_step.get(step, ()):
            if ch in messages:
                send, payload = messages[ch]
                value = self._aligned(np.asarray(payload, dtype=float)[:, i : i + 1])[:, 0, c]
                self.out[:, k] = np.where(send[:, i], value, SENTINEL)


def _run(
    make_policy: Callable[[], Any],
    agent_id: str,
    tgt: AuditTarget,
    wrapper_options: dict[str, Any] | None,
    stream: np.ndarray,
    seeds: list[int],
    recorder: _Recorder,
    block: bool = True,
) -> None:
    """Run the audit's federation on the reward table ``stream`` for ``seeds``, recording the
    releases into ``recorder``: with ``block`` (default) the runs' random numbers come from a
    few whole-batch draws (``random_streams="block"``, :data:`fedbandit_env.block_streams.RandomStreams`), else from one seeded
    Generator per run and stream as in normal runs (random buffers capped at the horizon)."""
    with _short_buffers(tgt.horizon):
        num_runs = len(seeds)
        policy = make_policy()
        venv = _build_env(tgt, policy, agent_id, num_runs, "block" if block else "per_run")
        env_seeds = [s ^ 0x5EED for s in seeds]
        if wrapper_options is not None:
            from fedbandit_env.wrappers import PrivacyVectorWrapper

            venv = PrivacyVectorWrapper(venv, wrapper_options)
            privatize = venv.privatizer.privatize

            def capture(step: int, messages: Any, *args: Any) -> Any:
                out = privatize(step, messages, *args)
                recorder.record(step - 1, out)
                return out

            venv.privatizer.privatize = capture
        obs, _ = venv.reset(seed=env_seeds)
        policy.reset(venv.facts, streams_for("block" if block else "per_run", seeds, "agents"))
        engine = venv.engine
        aligned = not tgt.align
        t = 0  # engine steps: pulls and communication-only steps (docs/architecture.md)
        while not engine.truncated:
            if tgt.unit_context and obs.context is not None:
                # agent 0's actions are all e_1 (norm L = 1): the changed reward moves one
                # coordinate of its reward-weighted sum by exactly the reward difference
                context = np.array(obs.context, dtype=np.float64, copy=True)
                context[:, 0] = 0.0
                context[:, 0, ..., 0] = 1.0
                obs.context = context
            action = policy.act(obs)
            if wrapper_options is None:
                recorder.record(t, engine._check_messages(action.messages or {}))
            obs, *_ = venv.step(action.arms, action.messages, action.pull)
            t += 1
            if not aligned and (obs.pulls >= 1).all():
                recorder.first_arm = np.asarray(obs.last_arm[:, 0], dtype=np.int64).copy()
                aligned = True
            # the rewards the learner observes: the table's for agent 0's last pull (indexed by
            # its pull count, so communication steps do not move the stream), else 0
            k = np.clip(obs.pulls - 1, 0, tgt.horizon - 1)
            reward = np.zeros_like(obs.last_reward)
            reward[:, 0] = np.where(obs.pulls >= 1, stream[k, obs.last_arm[:, 0]], 0.0)
            obs.last_reward = reward


def locate(
    make_policy: Callable[[], Any],
    agent_id: str,
    tgt: AuditTarget,
    wrapper_options: dict[str, Any] | None,
    *,
    pilot: int = 64,
    seed: int = 0,
    max_candidates: int = 24,
    agent: int | None = 0,
    block: bool = True,
) -> list[tuple[int, str, int, int]]:
    """The releases that carry the changed reward: (step, channel, agent, coordinate) entries
    that differ between the two inputs under the same seeds, in time order (agent ``agent``'s
    only unless None), at most ``max_candidates``."""
    base, neighbour = _reward_tables(tgt.horizon, tgt.num_arms)
    seeds = [int(s) for s in np.random.default_rng([seed, 7]).integers(2**31, size=pilot)]
    rec_a, rec_b = _Recorder(None, pilot, tgt.num_arms), _Recorder(None, pilot, tgt.num_arms)
    _run(make_policy, agent_id, tgt, wrapper_options, base, seeds, rec_a, block)
    _run(make_policy, agent_id, tgt, wrapper_options, neighbour, seeds, rec_b, block)
    found: list[tuple[int, str, int, int]] = []
    # the two transcripts may differ in length: a learner whose communication-only steps depend
    # on its decisions (DP-MW-UCB's server rounds) can take a different number of engine steps
    # on the two inputs; releases are compared position by position over the common steps
    for t, (ma, mb) in enumerate(zip(rec_a.steps, rec_b.steps, strict=False)):
        for ch in sorted(ma):
            send_a, pay_a = ma[ch]
            send_b, pay_b = mb[ch]
            sent = send_a | send_b
            differs = (send_a != send_b)[..., None] | (
                sent[..., None] & ~np.isclose(pay_a, pay_b, rtol=0, atol=1e-12)
            )
            hits = differs.any(axis=0)  # (N, dim)
            agents = range(hits.shape[0]) if agent is None else (agent,)
            for i in agents:
                for c in np.flatnonzero(hits[i]):
                    found.append((t, ch, int(i), int(c)))
                    if len(found) >= max_candidates:
                        return found
    return found


# -- the audit ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class LearnerAudit:
    """An audit of one learner: ``result`` (the bound), the learner's ``declared`` epsilon, the
    ``per_release`` epsilon the audited releases carry (the claim the bound is compared with),
    the audited ``candidates`` and the wall-clock ``seconds``."""

    agent_id: str
    result: AuditResult
    scope: str
    declared: float | None
    per_release: float | None
    candidates: tuple[tuple[int, str, int, int], ...]
    seconds: float

    @property
    def epsilon_lower(self) -> float:
        return self.result.epsilon_lower

    @property
    def claim(self) -> float | None:
        """The epsilon the audited releases must respect (per-release, else declared)."""
        return self.per_release if self.per_release is not None else self.declared

    def exceeds_claim(self) -> bool:
        claim = self.claim
        return claim is not None and not math.isinf(claim) and self.result.exceeds(claim)


def _check_trials(agent_id: str, trials: Any) -> int:
    if isinstance(trials, bool) or not isinstance(trials, int | np.integer) or trials < MIN_TRIALS:
        raise ConfigError(
            f"{agent_id}: audit: trials: expected an int >= {MIN_TRIALS}, got {trials!r}"
        )
    return int(trials)


def _policy_factory(
    agent_id: str, kwargs: dict[str, Any], broken: bool, tgt: AuditTarget
) -> Callable[[], Any]:
    if broken and tgt.wrapper is None:
        cls = half_noise_variant(agent_class(agent_id), tgt.broken_factor)
        return lambda: cls(**kwargs)
    return lambda: make_agent(agent_id, **kwargs)


def declared_claim(
    agent_id: str,
    agent_kwargs: dict[str, Any] | None = None,
    *,
    horizon: int | None = None,
    num_arms: int | None = None,
) -> float | None:
    """The privacy epsilon the learner declares on the audit's federation (after ``reset``):
    a number, ``inf`` (not private) or None (no declaration)."""
    claim, _, _ = _claims(
        agent_id,
        dict(agent_kwargs or {}),
        target(agent_id),
        None,
        horizon=horizon,
        num_arms=num_arms,
    )
    return claim


def _claims(
    agent_id: str,
    kwargs: dict[str, Any],
    tgt: AuditTarget,
    wrapper_epsilon: float | None,
    *,
    horizon: int | None = None,
    num_arms: int | None = None,
) -> tuple[float | None, float | None, float]:
    if horizon is not None or num_arms is not None:
        tgt = AuditTarget(
            **{
                **tgt.__dict__,
                "horizon": horizon or tgt.horizon,
                "num_arms": num_arms or tgt.num_arms,
            }
        )
    if wrapper_epsilon is not None:
        return wrapper_epsilon, wrapper_epsilon, 0.0
    policy = make_agent(agent_id, **kwargs)
    venv = _build_env(tgt, policy, agent_id, 1)
    venv.reset(seed=0)
    policy.reset(venv.facts, BatchedRNG.for_runs([0], "agents"))
    declared = declared_epsilon(policy)
    per_release = None
    if declared is not None and not math.isinf(declared) and tgt.per_release is not None:
        per_release = tgt.per_release(policy)
    delta = tgt.audit_delta(policy) if tgt.audit_delta is not None else 0.0
    return declared, per_release, delta


def audit_learner(
    agent_id: str,
    agent_kwargs: dict[str, Any] | None = None,
    *,
    trials: int = 20_000,
    seed: int = 0,
    broken: bool = False,
    wrapper_epsilon: float | None = None,
    max_candidates: int = 24,
    confidence: float = 0.95,
    scope: str = "release",
    require_claim: bool = False,
    block: bool = True,
) -> LearnerAudit:
    """Audit a learner (see module): the bound on the epsilon of the releases that carry one
    changed reward, with the claim to compare it with.

    ``broken=True`` audits the learner's broken variant (noise scale halved) against the correct
    learner's claim. ``wrapper_epsilon`` runs the learner under the privacy wrapper with the
    target's channel options at that per-message epsilon (required for the ``*_shared``
    learners, which are not private by themselves).

    ``scope="release"`` (default) audits the first message that carries the changed reward
    (every coordinate of it is a candidate), against the per-release epsilon;
    ``scope="transcript"`` audits up to ``max_candidates`` releases together, with a fitted
    likelihood-ratio feature, against the declared epsilon of the whole stream (under the
    wrapper: the per-message epsilon times the number of audited messages, basic
    composition). ``require_claim`` (and ``broken``) refuse a learner that declares no finite
    epsilon. ``block=False`` draws every run's numbers from its own seeded Generators, as
    normal runs do (slower; the same bound in distribution, other numbers)."""
    started = time.perf_counter()
    tgt = target(agent_id)
    if scope not in ("release", "transcript"):
        raise ConfigError(
            f"{agent_id}: audit: scope: expected 'release' or 'transcript', got {scope!r}"
        )
    trials = _check_trials(agent_id, trials)
    kwargs = dict(agent_kwargs or {})
    if wrapper_epsilon is not None:
        if tgt.wrapper is None:
            tgt = dataclasses.replace(tgt, wrapper=_any_wrapper(agent_id, kwargs, tgt),
                                      per_release=None, note="privacy wrapper: Laplace per "
                                      "message, payloads clipped to sensitivity 1")  # fmt: skip
        if not (isinstance(wrapper_epsilon, int | float) and 0 < wrapper_epsilon < math.inf):
            raise ConfigError(
                f"{agent_id}: audit: wrapper_epsilon: expected a positive finite "
                f"number, got {wrapper_epsilon!r}"
            )
    declared, per_release, delta = _claims(agent_id, kwargs, tgt, wrapper_epsilon)
    if (broken or require_claim) and (declared is None or math.isinf(declared)):
        wrapped = sorted(k for k, v in TARGETS.items() if v.wrapper)
        raise ConfigError(
            f"{agent_id}: audit: the learner is not private (privacy_epsilon = "
            f"{'none declared' if declared is None else 'inf'}), so it has no claim to check"
            + (
                "; audit it under the privacy wrapper with wrapper_epsilon"
                if agent_id in wrapped
                else ""
            )
        )
    wrap = None
    if wrapper_epsilon is not None:
        wrap = tgt.wrapper(2.0 * wrapper_epsilon if broken else wrapper_epsilon, tgt.num_arms)
    make_policy = _policy_factory(agent_id, kwargs, broken, tgt)
    candidates = locate(
        make_policy, agent_id, tgt, wrap, seed=seed, max_candidates=max_candidates, block=block
    )
    if not candidates:
        raise ConfigError(
            f"{agent_id}: audit: no release of agent 0 depends on its reward "
            f"within {tgt.horizon} steps; nothing to audit"
        )
    if scope == "release":  # the first message that carries the changed reward
        first = candidates[0][:2]
        candidates = [c for c in candidates if c[:2] == first]
    elif wrapper_epsilon is not None:  # basic composition over the audited messages
        per_release = wrapper_epsilon * len({c[:2] for c in candidates})
    else:
        per_release = None
    base, neighbour = _reward_tables(tgt.horizon, tgt.num_arms)
    seq_a, seq_b = np.random.SeedSequence([int(seed), 16]).spawn(2)
    feats = []
    for stream, seq in ((base, seq_a), (neighbour, seq_b)):
        seeds = [
            int(s) for s in np.random.Generator(np.random.PCG64(seq)).integers(2**31, size=trials)
        ]
        rec = _Recorder(candidates, trials, tgt.num_arms)
        _run(make_policy, agent_id, tgt, wrap, stream, seeds, rec, block)
        feats.append(rec.out)
    names = [f"{ch}[t={t},agent={i},coord={c}]" for t, ch, i, c in candidates]
    result = audit_samples(
        feats[0],
        feats[1],
        confidence=confidence,
        delta=delta,
        likelihood_ratio=scope == "transcript",
        names=names,
    )
    return LearnerAudit(
        agent_id=agent_id,
        result=result,
        scope=scope,
        declared=declared,
        per_release=per_release,
        candidates=tuple(candidates),
        seconds=time.perf_counter() - started,
    )


def audit_agent(
    agent_id: str,
    agent_kwargs: dict[str, Any] | None = None,
    *,
    trials: int = 3000,
    seed: int = 0,
    confidence: float = 0.95,
    **options: Any,
) -> AuditResult:
    """The bound of :func:`audit_learner` alone."""
    return audit_learner(
        agent_id, agent_kwargs, trials=trials, seed=seed, confidence=confidence, **options
    ).result


def leaderboard_audits(
    rows: list[Any], *, trials: int = 3000, seed: int = 0, note: Callable[[str], None] = print
) -> dict[str, Any]:
    """Audits of the private learners among a store's rows, keyed by label, as the
    leaderboard's :class:`~fedbandit_env.bench.leaderboard.AuditMark` (the bound and the
    per-release claim it was checked against). A learner that cannot be audited here (no
    message, a plug-in whose id is unknown) is skipped with a note."""
    import json

    from fedbandit_env.bench.leaderboard import AuditMark

    marks: dict[str, Any] = {}
    for row in rows:
        if row.label in marks or row.epsilon is None or math.isinf(row.epsilon):
            continue
        if json.loads(row.config).get("backend", "numpy") != "numpy":
            continue  # the audit runs numpy learners (docs/bench.md, "Backends")
        if lookup_agent(row.agent_id) is None:  # a file's id is looked up, never imported
            note(
                f"leaderboard: {row.label} not audited: learner {row.agent_id!r} is not "
                "registered here"
            )
            marks[row.label] = None
            continue
        kwargs = without_trust_flags(json.loads(row.config).get("agent_kwargs", {}) or {})
        try:
            audit = audit_learner(row.agent_id, kwargs, trials=trials, seed=seed)
        except (ConfigError, UnknownIdError) as err:
            note(f"leaderboard: {row.label} not audited: {err}")
            marks[row.label] = None
            continue
        marks[row.label] = AuditMark(audit.epsilon_lower, audit.claim)
    return {k: v for k, v in marks.items() if v is not None}
