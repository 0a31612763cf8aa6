"""Attack policies: what the Byzantine agents send (docs/adversary.md, "Attacks").

An attack is a small object the engine asks, every step and for every channel it speaks on,
for the messages of the Byzantine agents: ``payload(channel_name, dim, view)`` returns a send
mask (B, N) and payloads (B, N, dim), of which only the Byzantine rows are used. ``view`` is an
:class:`AttackView`: the step, the messages the learner submitted on that channel this step
(a *rushing* adversary sees the honest messages before choosing its own) and, only for an
attack whose ``knowledge`` is ``"omniscient"``, the true global means, the best arm, the pull
counts the environment knows and the arms of the last pull. An oblivious attack's view holds
None in those fields.

Attacks are found by id in a registry (:func:`register_attack`, :func:`make_attack`,
:func:`list_attacks`); a configuration names an attack by its id, never by an import path.
Their random numbers come from the attack's own stream, a child of the run's ``adversary``
stream, so an attack's draws move no reward, network or learner stream.

The built-in attacks and the papers they come from are listed in docs/adversary.md: Zhu,
Koppel, Velasquez & Liu, "Byzantine-Resilient Decentralized Multi-Armed Bandits" (TMLR)
(``zhu_code``, ``zhu_intended``); Demirel, Yildirim & Tekin, "Federated Multi-Armed Bandits
Under Byzantine Attacks" (arXiv 2205.04134) (``flipped_means``); Vial, Shakkottai & Srikant's
malicious recommendations (``rec_naive``, ``rec_smart``).
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from fedbandit_env.adversary import payloads
from fedbandit_env.errors import ConfigError
from fedbandit_env.seeding import BatchedRNG, BufferedStream
from fedbandit_env.validation import ConfigTypeError, check_real

LAYOUTS = {
    "means": "[means (M), counts (M)], dim 2M",
    "arm": "an arm id, dim 1",
    "arm_means": "one mean per arm, dim M",
    "counts_sums": "[counts (M), sums (M)], dim 2M",
}
"""The payload layouts an attack may fill (``Attack.layout``) and a learner may declare for its
channels (``TeamPolicy.payload_layouts``); a layout attack runs only against a learner that
declares its layout on the channels it speaks on (docs/adversary.md, "Payload layouts").
``counts_sums`` (the share-statistics baselines) is declared but no built-in attack writes it."""

KNOWLEDGE = ("oblivious", "omniscient")

COUNT_MODES = ("max", "huge", "zero", "own")
"""How the mean-layout attacks fill the counts half of a [means (M), counts (M)] payload."""


@dataclass(frozen=True)
class AttackSpec:
    """The facts an attack may read at reset: sizes, the horizon, the channels it speaks on
    (name -> payload dim, and name -> kind), the topology and the environment family."""

    num_runs: int
    num_agents: int
    num_arms: int
    horizon: int
    channels: dict[str, int]
    channel_kinds: dict[str, str] = field(default_factory=dict)
    topology: Any = None
    family: str = "heterogeneous"


@dataclass
class AttackView:
    """What an attack sees when it chooses one channel's Byzantine messages in one step.

    ``send`` (B, N) and ``payload`` (B, N, dim) are the messages the learner submitted on the
    channel this step, every row (a crashed agent's row is already silenced; the Byzantine rows
    hold what the learner computed for those agents, which the attack may use as "its own"
    honest message); ``byzantine`` (B, N) marks the Byzantine agents and ``roles`` (B, N) int8
    the roles (0 honest, 1 Byzantine, 2 crashed). The honest messages of the step are the rows
    of :attr:`honest_send`.

    Omniscient attacks only (None for oblivious ones): ``means`` (B, M) the true global
    expected reward of each arm, ``best_arm`` (B,), ``pull_counts`` (B, N, M) every agent's
    pulls of each arm so far (this step's pull included) and ``last_arm`` (B, N) the arms of
    the last pull (-1 before the first)."""

    step: int
    send: np.ndarray
    payload: np.ndarray
    byzantine: np.ndarray
    roles: np.ndarray
    means: np.ndarray | None = None
    best_arm: np.ndarray | None = None
    pull_counts: np.ndarray | None = None
    last_arm: np.ndarray | None = None

    @property
    def honest_send(self) -> np.ndarray:
        """(B, N) bool: the non-Byzantine agents that send on this channel this step."""
        return payloads.honest_senders(self.send, self.byzantine)


class Attack:
    """Base class of the attack policies (module doc).

    Subclasses set ``knowledge`` (the default: ``"oblivious"`` or ``"omniscient"``),
    ``requires_omniscience`` (True when the attack reads the true means, the best arm or the
    pull counts, so it cannot run oblivious), ``layout`` (``None`` any payload dim, ``"means"``
    a [means (M), counts (M)] payload of dim 2M, ``"arm"`` an arm id of dim 1, ``"arm_means"``
    one mean per arm, dim M; see :data:`LAYOUTS`) and implement
    :meth:`payload`. :meth:`reset` checks every channel's layout and keeps the stream."""

    attack_id: str = ""
    knowledge: str = "oblivious"
    requires_omniscience: ClassVar[bool] = False
    needs_means: ClassVar[bool] = False
    layout: ClassVar[str | None] = None

    def reset(self, rng: BatchedRNG, roles: np.ndarray, spec: AttackSpec) -> None:
        """Start a batch of runs: ``rng`` is this attack's stream, ``roles`` (B, N) int8."""
        self.rng = rng
        self.roles = roles
        self.spec = spec
        self._streams: dict[tuple, BufferedStream] = {}
        for name, dim in spec.channels.items():
            self.check_channel(name, dim, spec)
        if self.needs_means and spec.family == "linear":
            raise ConfigError(
                f"attack {self.attack_id!r}: reads the arms' global means, which the linear "
                "family does not have (use a multi-armed family)"
            )
        self.setup(rng, roles, spec)

    def setup(self, rng: BatchedRNG, roles: np.ndarray, spec: AttackSpec) -> None:
        """Per-batch state of a subclass (its buffered streams); nothing by default."""

    def check_channel(self, name: str, dim: int, spec: AttackSpec) -> None:
        """Refuse a channel whose payload layout this attack cannot fill."""
        M = spec.num_arms
        expected = {"means": 2 * M, "arm": 1, "arm_means": M}.get(self.layout or "")
        if expected is not None and dim != expected:
            what = {
                "means": f"2M = {expected} ([means (M), counts (M)])",
                "arm": "1 (an arm id)",
                "arm_means": f"M = {expected} (one mean per arm)",
            }[self.layout]
            raise ConfigError(
                f"attack {self.attack_id!r}: channel {name!r}: expected payload dim {what}, "
                f"got {dim}"
            )

    def payload(self, channel_name: str, dim: int, view: AttackView) -> tuple[Any, Any]:
        """(send (B, N) bool, payload (B, N, dim)) of this channel; non-Byzantine rows ignored."""
        raise NotImplementedError

    # -- helpers ---------------------------------------------------------------------------
    def _stream(self, channel_name: str, kind: str, shape: tuple[int, ...]) -> BufferedStream:
        """A buffered per-step stream of this attack for one channel (made at first use; every
        channel draws every step, so each run's numbers do not depend on the others')."""
        key = (channel_name, kind, shape)
        if key not in self._streams:
            self._streams[key] = self.rng.child(f"{channel_name}/{kind}").buffered(kind, shape)
        return self._streams[key]

    def _everyone(self, view: AttackView) -> np.ndarray:
        return np.ones(view.send.shape, dtype=bool)

    def _means_payload(self, means: np.ndarray, counts: str, view: AttackView) -> tuple:
        """[means, counts] rows for every agent (:func:`payloads.means_payload`); ``means``
        broadcasts to (B, N, M), ``counts`` one of :data:`COUNT_MODES`."""
        spec = self.spec
        rows = payloads.means_payload(
            means, counts, view.payload, view.honest_send, spec.num_arms, huge_count(spec)
        )
        return self._everyone(view), rows


def huge_count(spec: AttackSpec) -> float:
    """The ``counts="huge"`` value: 10 T N, more than any count of pulls in the run."""
    return 10.0 * spec.horizon * spec.num_agents


def honest_max_counts(view: AttackView, num_arms: int) -> np.ndarray:
    """(B, M): per arm the largest count among this step's honest [means, counts] payloads (0
    in a run where no honest agent sends; :func:`payloads.honest_max_counts`)."""
    return payloads.honest_max_counts(view.payload, view.honest_send, num_arms)


def _check_counts(attack_id: str, counts: Any) -> str:
    if not isinstance(counts, str) or counts not in COUNT_MODES:
        raise ConfigError(
            f"attack {attack_id!r}: counts: expected one of {list(COUNT_MODES)}, got {counts!r}"
        )
    return counts


def _check_values(attack_id: str, values: Any) -> tuple[float, ...]:
    if isinstance(values, np.ndarray):
        values = values.tolist()
    if isinstance(values, str | bytes) or not isinstance(values, Sequence) or not values:
        raise ConfigTypeError(
            f"attack {attack_id!r}: values: expected a non-empty list of M numbers, got {values!r}"
        )
    where = f"attack {attack_id!r}"
    return tuple(check_real(f"values[{k}]", v, where=where) for k, v in enumerate(values))


# -- the built-in attacks -----------------------------------------------------------------------
class Silent(Attack):
    """``silent``: the Byzantine agents send nothing (oblivious)."""

    def payload(self, channel_name, dim, view):
        B, N = view.send.shape
        return np.zeros((B, N), dtype=bool), np.zeros((B, N, dim))


class Zeros(Attack):
    """``zeros``: every Byzantine agent sends a payload of zeros every step (oblivious)."""

    def payload(self, channel_name, dim, view):
        return self._everyone(view), np.zeros((*view.send.shape, dim))


class Gaussian(Attack):
    """``gaussian``: the Byzantine agent's own honest payload (what the learner computed for
    it) plus N(0, sigma^2) noise per coordinate, sent when the learner would have sent it
    (oblivious)."""

    def __init__(self, sigma: float = 1.0):
        self.sigma = check_real("sigma", sigma, low=0.0, where="attack 'gaussian'")

    def payload(self, channel_name, dim, view):
        noise = self._stream(channel_name, "normal", (view.send.shape[1], dim)).next()
        return view.send.copy(), view.payload + self.sigma * noise


class HeavyTailed(Attack):
    """``heavy_tailed``: the own honest payload plus ``scale`` times Student-t noise with ``df``
    degrees of freedom (default 1.5: finite mean, infinite variance), sent when the learner
    would have sent it (oblivious). The t draws are the inverse CDF of buffered uniforms."""

    def __init__(self, df: float = 1.5, scale: float = 1.0):
        self.df = check_real("df", df, low=0.0, low_open=True, where="attack 'heavy_tailed'")
        self.scale = check_real("scale", scale, low=0.0, where="attack 'heavy_tailed'")

    def payload(self, channel_name, dim, view):
        from scipy.special import stdtrit

        u = self._stream(channel_name, "uniform", (view.send.shape[1], dim)).next()
        u = np.clip(u, 2.0**-54, 1.0 - 2.0**-53)  # the open interval: t stays finite
        return view.send.copy(), view.payload + self.scale * stdtrit(self.df, u)


class Uniform(Attack):
    """``uniform(lo, hi)``: every coordinate uniform in [lo, hi), every step (oblivious)."""

    def __init__(self, lo: float = 0.0, hi: float = 1.0):
        self.lo = check_real("lo", lo, where="attack 'uniform'")
        self.hi = check_real("hi", hi, where="attack 'uniform'")
        if not self.hi > self.lo:
            raise ConfigError(f"attack 'uniform': hi: expected hi > lo = {self.lo:g}, got {hi!r}")

    def payload(self, channel_name, dim, view):
        u = self._stream(channel_name, "uniform", (view.send.shape[1], dim)).next()
        return self._everyone(view), self.lo + (self.hi - self.lo) * u


class Fixed(Attack):
    """``fixed(values, counts)``: a [means (M), counts (M)] payload (dim 2M) whose means are
    ``values`` (M numbers) and whose counts are ``counts``: ``"max"`` per arm the largest
    count among this step's honest payloads, ``"huge"`` 10 T N, ``"zero"`` 0 or ``"own"`` the
    counts of the learner's own payload for the agent. Sent every step. Knowledge: omniscient
    with ``counts="max"`` (it reads the honest messages to pass a count filter), oblivious
    otherwise."""

    layout = "means"

    def __init__(self, values: Any = None, counts: str = "max"):
        attack_id = type(self).attack_id or "fixed"
        if values is None:
            raise ConfigError(f"attack {attack_id!r}: values: expected a list of M numbers")
        self.values = _check_values(attack_id, values)
        self.counts = _check_counts(attack_id, counts)
        self.knowledge = "omniscient" if self.counts == "max" else "oblivious"

    def setup(self, rng, roles, spec):
        if len(self.values) != spec.num_arms:
            raise ConfigError(
                f"attack {self.attack_id!r}: values: expected M = {spec.num_arms} numbers, got "
                f"{len(self.values)}"
            )

    def payload(self, channel_name, dim, view):
        return self._means_payload(np.asarray(self.values), self.counts, view)


class ZhuCode(Fixed):
    """``zhu_code``: what the Byzantine agent of Zhu, Koppel, Velasquez & Liu's code sends
    (TMLR, "Byzantine-Resilient Decentralized Multi-Armed Bandits"): means 0 for every arm
    (its means are never set in the code) and per arm the largest honest count, so it passes
    the count filter (omniscient)."""

    attack_id = "zhu_code"

    def __init__(self):
        self.values = ()
        self.counts = "max"
        self.knowledge = "omniscient"

    def setup(self, rng, roles, spec):
        self.values = (0.0,) * spec.num_arms


ZHU_INTENDED_VALUES = (0.4, 0.5, 0.4, 0.3)


class ZhuIntended(Fixed):
    """``zhu_intended``: the Byzantine means that Zhu et al.'s code sets but never sends,
    [0.4, 0.5, 0.4, 0.3] by default (``values`` for another M), with the largest honest
    counts (omniscient)."""

    attack_id = "zhu_intended"

    def __init__(self, values: Any = ZHU_INTENDED_VALUES):
        super().__init__(values, counts="max")


class _TrueMeansAttack(Attack):
    """What the omniscient means attacks share: a [means, counts] payload whose means are a
    function of the true global means (:meth:`fake_means`), with ``counts`` as in ``fixed``."""

    knowledge = "omniscient"
    requires_omniscience = True
    needs_means = True
    layout = "means"

    def __init__(self, counts: str = "max"):
        self.counts = _check_counts(type(self).attack_id, counts)

    def fake_means(self, view: AttackView) -> np.ndarray:
        """(B, 1, M) the means every Byzantine agent reports."""
        raise NotImplementedError

    def payload(self, channel_name, dim, view):
        return self._means_payload(self.fake_means(view), self.counts, view)


class DemoteBest(_TrueMeansAttack):
    """``demote_best``: means 0 for the best arm and 1 for the others, the largest honest
    counts (omniscient)."""

    attack_id = "demote_best"

    def fake_means(self, view):
        return payloads.demote_best_means(view.best_arm, self.spec.num_arms)


class Reverse(_TrueMeansAttack):
    """``reverse``: means 1 - mu_k (the true global means reversed), the largest honest counts
    (omniscient)."""

    attack_id = "reverse"

    def fake_means(self, view):
        return payloads.reverse_means(view.means)


class FlippedMeans(Attack):
    """``flipped_means`` (Demirel, Yildirim & Tekin, "Federated Multi-Armed Bandits Under
    Byzantine Attacks", arXiv 2205.04134, the code's scenario-1 attack): per arm a fresh
    U[0, 0.1] mean for the arms within ``beta`` of the best (default 0.1886) and U[0.9, 1] for
    the others, with the largest honest counts (omniscient). The paper's Byzantine clients
    replace their samples; here the values are the means they report."""

    knowledge = "omniscient"
    requires_omniscience = True
    needs_means = True
    layout = "means"

    def __init__(self, beta: float = 0.1886, counts: str = "max"):
        self.beta = check_real("beta", beta, low=0.0, where="attack 'flipped_means'")
        self.counts = _check_counts("flipped_means", counts)

    def payload(self, channel_name, dim, view):
        M = self.spec.num_arms
        u = self._stream(channel_name, "uniform", (view.send.shape[1], M)).next()
        means = payloads.flipped_means(view.means, u, self.beta)
        return self._means_payload(means, self.counts, view)


class FedMoMSce1(Attack):
    """``fedmom_sce1``: the Byzantine clients of scenarios 1 and 3 of the authors' code of
    Demirel, Yildirim & Tekin, "Federated Multi-Armed Bandits Under Byzantine Attacks" (arXiv
    2205.04134; ``Byz_sample`` in Fed-MoM-UCB_sce1.py). Every pull of a Byzantine client is
    replaced by a fake draw, U[0, 0.1) for the beta-optimal arms (``mu* - mu_k < beta``, strict as
    in the code) and U[0.9, 1) for the others, one uniform per client and pull from the attack's
    own stream; its upload is the running mean of its fake draws per arm (0 for an arm it never
    pulled), sent when the learner would send for it. The payload holds one mean per arm (dim
    M, the ``server`` channel of ``fed_mom_ucb``). Omniscient: it reads the true means and the
    pull counts (the pulls of each step)."""

    knowledge = "omniscient"
    requires_omniscience = True
    needs_means = True
    layout = "arm_means"

    def __init__(self, beta: float = 0.1886):
        self.beta = check_real("beta", beta, low=0.0, low_open=True, where=f"attack {self._id()!r}")

    @classmethod
    def _id(cls) -> str:
        return "fedmom_sce2" if cls is FedMoMSce2 else "fedmom_sce1"

    def check_channel(self, name: str, dim: int, spec: AttackSpec) -> None:
        if dim != spec.num_arms:
            raise ConfigError(
                f"attack {self.attack_id!r}: channel {name!r}: expected payload dim M = "
                f"{spec.num_arms} (one sample mean per arm), got {dim}"
            )

    def setup(self, rng, roles, spec):
        B, N, M = spec.num_runs, spec.num_agents, spec.num_arms
        self._pulls: dict[str, np.ndarray] = {}  # pulls per run at the last call, per channel
        self._sums: dict[str, np.ndarray] = {}
        self._counts: dict[str, np.ndarray] = {}
        self._flat = (np.arange(B * N) * M).reshape(B, N)

    def fake_means(self, channel_name: str, view: AttackView) -> tuple[np.ndarray, np.ndarray]:
        """(running means of the fake draws (B, N, M), beta-optimal mask (B, M)) after this
        step's pulls: one fake draw per client for the arm it pulled (``last_arm``) in the
        runs whose pull count moved this step, none in a communication step."""
        B, N = view.send.shape
        M = self.spec.num_arms
        pulls = view.pull_counts[:, 0, :].sum(axis=1)  # (B,): every client pulls in lockstep
        if channel_name not in self._pulls:
            self._pulls[channel_name] = np.zeros(B, dtype=pulls.dtype)
            self._sums[channel_name] = np.zeros((B, N, M))
            self._counts[channel_name] = np.zeros((B, N, M))
        pulled = pulls != self._pulls[channel_name]  # (B,) the runs that pulled this step
        self._pulls[channel_name] = pulls
        u = self._stream(channel_name, "uniform", (N,)).next()  # (B, N), drawn every step
        means = np.asarray(view.means, dtype=np.float64)
        optimal = payloads.beta_optimal(means, self.beta)  # (B, M)
        sums, counts = self._sums[channel_name], self._counts[channel_name]
        if pulled.any():
            arm = np.maximum(view.last_arm, 0)
            near = np.take_along_axis(optimal, arm, axis=1)  # (B, N) the pulled arm's class
            draw = payloads.fake_draws(u, near)
            at = (self._flat + arm)[pulled]
            sums.reshape(-1)[at] += draw[pulled]
            counts.reshape(-1)[at] += 1.0
        if not view.send.any():  # the learner uploads nothing this step: nothing to send
            return np.zeros((B, N, M)), optimal
        return sums / np.maximum(counts, 1.0), optimal

    def payload(self, channel_name, dim, view):
        fake, _ = self.fake_means(channel_name, view)
        return view.send.copy(), fake


class FedMoMSce2(FedMoMSce1):
    """``fedmom_sce2``: the Byzantine clients of scenario 2 of the authors' code
    (Fed-MoM-UCB_sce2.py, ``Byz_sample``): fake U[0, 0.1) draws for the beta-optimal arms, as
    ``fedmom_sce1``, and honest draws N(mu_{m,k}, sigma^2) for the others. The honest part is
    the client's own honest payload (the learner's sample means of its real rewards), so the
    upload is the running mean of the fake draws on the beta-optimal arms and the honest
    sample mean elsewhere (omniscient)."""

    def payload(self, channel_name, dim, view):
        fake, optimal = self.fake_means(channel_name, view)
        return view.send.copy(), np.where(optimal[:, None, :], fake, view.payload)


class ALIE(Attack):
    """``alie`` ("a little is enough"): per coordinate, the mean minus ``z`` (default 1) times
    the standard deviation (population) of this step's honest payloads on the channel, the
    same for every Byzantine agent, sent every step; 0 in a run where no honest agent sends
    (omniscient by default: it reads every honest message of the step)."""

    knowledge = "omniscient"

    def __init__(self, z: float = 1.0):
        self.z = check_real("z", z, where="attack 'alie'")

    def payload(self, channel_name, dim, view):
        return self._everyone(view), np.array(payloads.alie(view.payload, view.honest_send, self.z))


class RecNaive(Attack):
    """``rec_naive`` (Vial, Shakkottai & Srikant's naive malicious recommendation): a uniformly
    random suboptimal arm, fresh for every Byzantine agent and step. It must know the best arm
    to leave it out, so it is omniscient by default (docs/adversary.md)."""

    knowledge = "omniscient"
    requires_omniscience = True
    needs_means = True
    layout = "arm"

    def payload(self, channel_name, dim, view):
        u = self._stream(channel_name, "uniform", (view.send.shape[1],)).next()
        arm = payloads.naive_recommendation(u, view.best_arm, self.spec.num_arms)
        return self._everyone(view), arm


class RecWorst(Attack):
    """``rec_worst``: the arm of lowest global mean (lowest id on ties; omniscient)."""

    knowledge = "omniscient"
    requires_omniscience = True
    needs_means = True
    layout = "arm"

    def payload(self, channel_name, dim, view):
        arm = payloads.worst_recommendation(view.means, view.send.shape[1])
        return self._everyone(view), arm


class RecSmart(Attack):
    """``rec_smart`` (Vial, Shakkottai & Srikant's smart malicious recommendation): a suboptimal
    arm the requester has little evidence on, ties broken uniformly at random per Byzantine
    agent and step (omniscient).

    * ``per_receiver=False`` (default, simplified): the same arm for every receiver, the
      suboptimal arm the honest agents have pulled least so far (their pull counts summed);
    * ``per_receiver=True``: each receiver i is told the suboptimal arm i itself has pulled
      least (payload (B, N, N, 1), on a channel that delivers per receiver: neighbors, gossip).
      The papers' attacker chooses among the requester's inactive arms; the pull counts are
      what the environment knows of that."""

    knowledge = "omniscient"
    requires_omniscience = True
    needs_means = True
    layout = "arm"

    def __init__(self, per_receiver: bool = False):
        if not isinstance(per_receiver, bool | np.bool_):
            raise ConfigError(
                f"attack 'rec_smart': per_receiver: expected True or False, got {per_receiver!r}"
            )
        self.per_receiver = bool(per_receiver)

    def payload(self, channel_name, dim, view):
        B, N = view.send.shape
        M = self.spec.num_arms
        if self.per_receiver:
            counts = view.pull_counts.astype(np.float64)  # (B, N, M): receiver i's own pulls
            counts[np.arange(B)[:, None], np.arange(N)[None, :], view.best_arm[:, None]] = np.inf
            u = self._stream(channel_name, "uniform", (N, N, M)).next()  # (B, from, to, M)
            arm = np.argmin(counts[:, None] + 0.5 * u, axis=3)  # integer counts: u breaks ties
            return self._everyone(view), arm[..., None].astype(np.float64)
        u = self._stream(channel_name, "uniform", (N, M)).next()
        arm = payloads.smart_recommendation(view.pull_counts, self.roles == 0, view.best_arm, u)
        return self._everyone(view), arm


# -- registry -------------------------------------------------------------------------------------
AttackFactory = Callable[..., Attack]

_ATTACKS: dict[str, AttackFactory] = {}


def register_attack(attack_id: str, factory: AttackFactory) -> None:
    """Register an attack class (or a factory returning an :class:`Attack`) under ``attack_id``;
    an existing id is replaced. ``make_attack(attack_id, **kwargs)`` calls ``factory(**kwargs)``."""
    if not isinstance(attack_id, str) or not attack_id:
        raise ConfigError(f"attack_id: expected a non-empty string, got {attack_id!r}")
    if not callable(factory):
        raise ConfigError(f"attack {attack_id!r}: factory: expected a callable, got {factory!r}")
    _ATTACKS[attack_id] = factory


def list_attacks() -> list[str]:
    """The registered attack ids, sorted."""
    return sorted(_ATTACKS)


def make_attack(attack_id: str, **kwargs: Any) -> Attack:
    """Build a registered attack; an unknown id, a bad keyword or a bad value raises a
    :class:`~fedbandit_env.errors.ConfigError` naming the attack (and the field)."""
    if not isinstance(attack_id, str) or attack_id not in _ATTACKS:
        close = difflib.get_close_matches(str(attack_id), list(_ATTACKS), n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise ConfigError(
            f"attack: unknown id {attack_id!r}; registered attacks: {list_attacks()}.{hint}"
        )
    try:
        attack = _ATTACKS[attack_id](**kwargs)
    except ConfigError:
        raise
    except TypeError as err:
        raise ConfigError(
            f"attack {attack_id!r}: bad keyword arguments {sorted(kwargs)}: {err}"
        ) from None
    if not callable(getattr(attack, "payload", None)) or not callable(
        getattr(attack, "reset", None)
    ):
        raise ConfigError(
            f"attack {attack_id!r}: the factory returned {type(attack).__name__}, which has no "
            "reset(rng, roles, spec) and payload(channel_name, dim, view)"
        )
    attack.attack_id = attack_id
    knowledge = getattr(attack, "knowledge", None)
    if knowledge not in KNOWLEDGE:
        raise ConfigError(
            f"attack {attack_id!r}: knowledge: expected one of {list(KNOWLEDGE)}, got {knowledge!r}"
        )
    return attack


def set_knowledge(attack: Attack, knowledge: str | None) -> Attack:
    """``attack`` with ``knowledge`` (None: keep its default); refuses ``"oblivious"`` for an
    attack that reads what only an omniscient adversary knows."""
    if knowledge is None:
        return attack
    if knowledge == "oblivious" and getattr(attack, "requires_omniscience", False):
        raise ConfigError(
            f"attack {attack.attack_id!r}: knowledge: expected 'omniscient' (it reads the true "
            "means, the best arm or the pull counts), got 'oblivious'"
        )
    attack.knowledge = knowledge
    return attack


BUILTIN_ATTACKS: Mapping[str, AttackFactory] = {
    "silent": Silent,
    "zeros": Zeros,
    "gaussian": Gaussian,
    "heavy_tailed": HeavyTailed,
    "uniform": Uniform,
    "fixed": Fixed,
    "zhu_code": ZhuCode,
    "zhu_intended": ZhuIntended,
    "demote_best": DemoteBest,
    "reverse": Reverse,
    "flipped_means": FlippedMeans,
    "alie": ALIE,
    "rec_naive": RecNaive,
    "rec_worst": RecWorst,
    "rec_smart": RecSmart,
}

BUILTIN_ATTACKS = {**BUILTIN_ATTACKS, "fedmom_sce1": FedMoMSce1, "fedmom_sce2": FedMoMSce2}

for _id, _factory in BUILTIN_ATTACKS.items():
    register_attack(_id, _factory)
