"""Byzantine and crashed agents on the JAX backend: the twin of :mod:`fedbandit_env.adversary`
(docs/adversary.md, docs/jax.md).

``fedbandit_env.jax.make(id, adversary={...})`` builds a :class:`JaxAdversary` from the
validated numpy :class:`~fedbandit_env.adversary.Adversary` of the same configuration: the
numpy side resolves the config against N and T, resets once on a probe run (so an unknown
attacked channel, a payload dim the attack's layout cannot fill, a means attack in the linear
family, ``fixed`` values of the wrong length are refused with the numpy messages), and the
JAX side reads the attack's validated constants from it. Everything after that is pure:

* :meth:`JaxAdversary.init` draws the run's roles (N,) (0 honest, 1 Byzantine, 2 crashed) and
  crash pulls (N,) from the run's key, once per run, as the numpy placements draw them per run
  (table below); the deterministic placements are the numpy rows themselves.
* :meth:`JaxAdversary.channel` is called by ``env.step`` for every channel, every step, before
  the channel transmits: the crashed agents that are down are silenced, and on an attacked
  channel the Byzantine agents' send flags and payloads are the attack's (the same formulas as
  the numpy attacks, random numbers from the step's key); on a channel left out of
  ``adversary.channels`` the Byzantine agents send nothing.
* Scoring is the numpy engine's: every agent's pseudo-regret and ``cumulative_regret`` are
  computed as before (the learner acts and is rewarded for every agent); the honest metrics
  count only role 0, which ``info["honest"]`` and ``state.adversary.roles`` give.

| placement | JAX draw (per run, from the run's key) |
|---|---|
| ``uniform`` | a uniform permutation of the N ids: the first f Byzantine, the next ``num_crashed`` crashed |
| ``local_f`` | as ``uniform``, drawn again (in loops of known trip count) until every honest agent has at most ``local_f`` Byzantine neighbours; after 1,000 draws ``state.error`` holds the failure and ``check_state`` raises the numpy message |
| ``code_fedmom`` | f ids uniform **with** replacement; the distinct ones Byzantine |
| ``fixed``, ``first``, ``max_degree``, ``min_degree`` | the numpy roles (the same in every run) |

``crash_at="uniform"`` draws one pull in [1, T] per agent (every agent's, as numpy does).

Deviations from the numpy twin: the random numbers are JAX's, not the numpy streams', so the
two backends agree in distribution (roles, attack noise), not bit for bit; ``heavy_tailed``
draws its Student-t noise with ``jax.random.t`` instead of the inverse CDF of clipped uniforms
(the same law); payloads and statistics are float32. The attack's key is ``fold_in`` of the
step's (and reset's) key, so the reward, instance and network draws of a run do not move when
the roles change (numpy's separate ``adversary`` stream). Refused on JAX, by name, at ``make``:
per-receiver attacks (``rec_smart`` with ``per_receiver=True``: "per-receiver attacks run on
the numpy engine only") and attacks registered at run time (no JAX twin). The JAX ledger has
no Byzantine column (``byzantine_messages``): the channels' charges are not split by sender.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from fedbandit_env.adversary import attacks as np_attacks
from fedbandit_env.adversary import payloads
from fedbandit_env.adversary.roles import (
    BYZANTINE,
    CRASHED,
    HONEST,
    LOCAL_F_TRIES,
    Adversary,
    AdversaryConfig,
    draw_roles,
)
from fedbandit_env.block_streams import streams_for
from fedbandit_env.errors import ConfigError
from fedbandit_env.xp import bounded_while

ADVERSARY_TAG = 0x61647673
"""``jax.random.fold_in`` tag of the adversary's keys (reset and step): a key of its own, so
no other draw of the run moves."""

PER_RECEIVER = "per-receiver attacks run on the numpy engine only"


class AdversaryState(NamedTuple):
    """The adversary's part of a run's state: ``roles`` (N,) int32 (0 honest, 1 Byzantine, 2
    crashed), ``crash_pull`` (N,) int32 (the pull from which a crashed agent is down, T + 1 for
    the others), ``attack`` {channel: the attack's state on it} (``()`` for a memoryless
    attack) and ``ok`` () bool: the placement was found (False only for ``local_f`` after
    1,000 draws)."""

    roles: jnp.ndarray
    crash_pull: jnp.ndarray
    attack: dict[str, Any]
    ok: jnp.ndarray


class View(NamedTuple):
    """What the attack sees on one channel in one step of one run (the numpy
    :class:`~fedbandit_env.adversary.AttackView` without the batch axis): ``send`` (N,) and
    ``payload`` (N, dim) the learner's messages (down agents already silenced), ``byzantine``
    (N,), ``roles`` (N,); the omniscient facts ``means`` (M,) the global expected rewards,
    ``best_arm`` (), ``pull_counts`` (N, M) this step's pulls included, ``last_arm`` (N,); and
    ``pulling`` () whether this step pulled (the numpy attacks read it from the pull counts)."""

    step: jnp.ndarray
    send: jnp.ndarray
    payload: jnp.ndarray
    byzantine: jnp.ndarray
    roles: jnp.ndarray
    means: jnp.ndarray
    best_arm: jnp.ndarray
    pull_counts: jnp.ndarray
    last_arm: jnp.ndarray
    pulling: jnp.ndarray

    @property
    def honest_send(self) -> jnp.ndarray:
        """(N,) the non-Byzantine agents that send on this channel this step."""
        return payloads.honest_senders(self.send, self.byzantine)


# -- the attacks ----------------------------------------------------------------------------------
class JaxAttack:
    """The JAX twin of one numpy attack (after its reset): ``init(dim)`` the per-channel state,
    ``payload(key, state, dim, view) -> (send (N,), payload (N, dim), state)``; only the
    Byzantine rows are used."""

    def __init__(self, twin: np_attacks.Attack, num_agents: int, num_arms: int, horizon: int):
        self.twin = twin
        self.n, self.m, self.horizon = num_agents, num_arms, horizon

    def init(self, dim: int) -> Any:
        return ()

    def payload(self, key, state, dim: int, view: View):
        raise NotImplementedError

    # helpers (the numpy Attack's)
    def everyone(self) -> jnp.ndarray:
        return jnp.ones(self.n, bool)

    def means_payload(self, means: jnp.ndarray, mode: str, view: View):
        """[means, counts] rows for every agent (:func:`payloads.means_payload`, the counts of
        ``mode``, ``"huge"`` = 10 T N)."""
        huge = 10.0 * self.horizon * self.n
        rows = payloads.means_payload(means, mode, view.payload, view.honest_send, self.m, huge)
        return self.everyone(), rows


class Silent(JaxAttack):
    """``silent``: nothing."""

    def payload(self, key, state, dim, view):
        return jnp.zeros(self.n, bool), jnp.zeros((self.n, dim), jnp.float32), state


class Zeros(JaxAttack):
    """``zeros``: a payload of zeros every step."""

    def payload(self, key, state, dim, view):
        """Twice: the wrapper only (JAX: the step's key, the state returned; numpy: the
        attack's streams and attributes); the payload is a line of arithmetic or
        :mod:`fedbandit_env.adversary.payloads`'s."""
        return self.everyone(), jnp.zeros((self.n, dim), jnp.float32), state


class Gaussian(JaxAttack):
    """``gaussian``: own honest payload + N(0, sigma^2) per coordinate, when the learner sends."""

    def payload(self, key, state, dim, view):
        """Twice: the wrapper only (JAX: the step's key, the state returned; numpy: the
        attack's streams and attributes); the payload is a line of arithmetic or
        :mod:`fedbandit_env.adversary.payloads`'s."""
        noise = jax.random.normal(key, (self.n, dim), jnp.float32)
        return view.send, view.payload + self.twin.sigma * noise, state


class HeavyTailed(JaxAttack):
    """``heavy_tailed``: own honest payload + scale x Student-t(df), when the learner sends
    (``jax.random.t``; numpy: the inverse CDF of clipped uniforms, the same law)."""

    def payload(self, key, state, dim, view):
        t = jax.random.t(key, self.twin.df, (self.n, dim), jnp.float32)
        return view.send, view.payload + self.twin.scale * t, state


class Uniform(JaxAttack):
    """``uniform(lo, hi)``: every coordinate uniform in [lo, hi), every step."""

    def payload(self, key, state, dim, view):
        u = jax.random.uniform(key, (self.n, dim), jnp.float32)
        lo, hi = self.twin.lo, self.twin.hi
        return self.everyone(), lo + (hi - lo) * u, state


class Fixed(JaxAttack):
    """``fixed`` / ``zhu_code`` / ``zhu_intended``: [values, counts] every step."""

    def payload(self, key, state, dim, view):
        values = jnp.asarray(np.asarray(self.twin.values, np.float32))
        send, payload = self.means_payload(values[None, :], self.twin.counts, view)
        return send, payload, state


class DemoteBest(JaxAttack):
    """``demote_best``: means 0 for the best arm and 1 for the others, with ``counts``."""

    def payload(self, key, state, dim, view):
        fake = payloads.demote_best_means(view.best_arm, self.m)
        return (*self.means_payload(fake, self.twin.counts, view), state)


class Reverse(JaxAttack):
    """``reverse``: means 1 - mu_k, with ``counts``."""

    def payload(self, key, state, dim, view):
        fake = payloads.reverse_means(view.means)
        return (*self.means_payload(fake, self.twin.counts, view), state)


class FlippedMeans(JaxAttack):
    """``flipped_means``: fresh U[0, 0.1] for the arms within beta of the best, U[0.9, 1] for
    the others, with ``counts``."""

    def payload(self, key, state, dim, view):
        u = jax.random.uniform(key, (self.n, self.m), jnp.float32)
        fake = payloads.flipped_means(view.means, u, self.twin.beta)
        return (*self.means_payload(fake, self.twin.counts, view), state)


class FedMoMSce1(JaxAttack):
    """``fedmom_sce1``: the running mean per arm of one fake draw per pull (U[0, 0.1) for the
    arms with mu* - mu_k < beta, U[0.9, 1) for the others), sent when the learner sends; the
    state is the fake draws' (sums, counts) (N, M) on the channel."""

    def init(self, dim):
        z = jnp.zeros((self.n, self.m), jnp.float32)
        return (z, z)

    def fake_means(self, key, state, view):
        sums, counts = state
        u = jax.random.uniform(key, (self.n,), jnp.float32)
        optimal = payloads.beta_optimal(view.means, self.twin.beta)  # (M,)
        arm = jnp.maximum(view.last_arm, 0)
        draw = payloads.fake_draws(u, optimal[arm])
        hit = (arm[:, None] == jnp.arange(self.m)) & view.pulling
        sums = sums + jnp.where(hit, draw[:, None], 0.0)
        counts = counts + hit.astype(jnp.float32)
        fake = jnp.where(view.send.any(), sums / jnp.maximum(counts, 1.0), 0.0)
        return fake, optimal, (sums, counts)

    def payload(self, key, state, dim, view):
        """Twice: the wrapper only (JAX: the step's key, the state returned; numpy: the
        attack's streams and attributes); the payload is a line of arithmetic or
        :mod:`fedbandit_env.adversary.payloads`'s."""
        fake, _, state = self.fake_means(key, state, view)
        return view.send, fake, state


class FedMoMSce2(FedMoMSce1):
    """``fedmom_sce2``: ``fedmom_sce1`` on the beta-optimal arms, its own honest payload on the
    others."""

    def payload(self, key, state, dim, view):
        """Twice: the wrapper only (JAX: the step's key, the state returned; numpy: the
        attack's streams and attributes); the payload is a line of arithmetic or
        :mod:`fedbandit_env.adversary.payloads`'s."""
        fake, optimal, state = self.fake_means(key, state, view)
        return view.send, jnp.where(optimal[None, :], fake, view.payload), state


class ALIE(JaxAttack):
    """``alie``: per coordinate the mean minus z population standard deviations of this step's
    honest payloads (0 where no honest agent sends), the same for every Byzantine agent."""

    def payload(self, key, state, dim, view):
        """Twice: the wrapper only (JAX: the step's key, the state returned; numpy: the
        attack's streams and attributes); the payload is a line of arithmetic or
        :mod:`fedbandit_env.adversary.payloads`'s."""
        return self.everyone(), payloads.alie(view.payload, view.honest_send, self.twin.z), state


class RecNaive(JaxAttack):
    """``rec_naive``: a uniformly random suboptimal arm per agent and step."""

    def payload(self, key, state, dim, view):
        u = jax.random.uniform(key, (self.n,), jnp.float32)
        return self.everyone(), payloads.naive_recommendation(u, view.best_arm, self.m), state


class RecWorst(JaxAttack):
    """``rec_worst``: the arm of lowest global mean (lowest id on ties)."""

    def payload(self, key, state, dim, view):
        """Twice: the wrapper only (JAX: the step's key, the state returned; numpy: the
        attack's streams and attributes); the payload is a line of arithmetic or
        :mod:`fedbandit_env.adversary.payloads`'s."""
        return self.everyone(), payloads.worst_recommendation(view.means, self.n), state


class RecSmart(JaxAttack):
    """``rec_smart`` (``per_receiver=False``): the suboptimal arm the honest agents have pulled
    least (their counts summed), ties at random per Byzantine agent and step."""

    def payload(self, key, state, dim, view):
        u = jax.random.uniform(key, (self.n, self.m), jnp.float32)
        honest = view.roles == HONEST
        arm = payloads.smart_recommendation(view.pull_counts, honest, view.best_arm, u)
        return self.everyone(), arm, state


JAX_ATTACKS: dict[type, type[JaxAttack]] = {
    np_attacks.Silent: Silent,
    np_attacks.Zeros: Zeros,
    np_attacks.Gaussian: Gaussian,
    np_attacks.HeavyTailed: HeavyTailed,
    np_attacks.Uniform: Uniform,
    np_attacks.Fixed: Fixed,
    np_attacks.ZhuCode: Fixed,
    np_attacks.ZhuIntended: Fixed,
    np_attacks.DemoteBest: DemoteBest,
    np_attacks.Reverse: Reverse,
    np_attacks.FlippedMeans: FlippedMeans,
    np_attacks.FedMoMSce1: FedMoMSce1,
    np_attacks.FedMoMSce2: FedMoMSce2,
    np_attacks.ALIE: ALIE,
    np_attacks.RecNaive: RecNaive,
    np_attacks.RecWorst: RecWorst,
    np_attacks.RecSmart: RecSmart,
}
"""The numpy attack class -> its JAX twin (by class, so an id registered again with another
class has no twin)."""


def jax_attack_of(twin: np_attacks.Attack, where: str, n: int, m: int, horizon: int) -> JaxAttack:
    """The JAX twin of a (reset) numpy attack, or a ConfigError naming what is numpy-only."""
    attack_id = twin.attack_id
    if isinstance(twin, np_attacks.RecSmart) and twin.per_receiver:
        raise ConfigError(
            f"{where}: adversary: attack {attack_id!r} (per_receiver=True): not on the JAX "
            f"backend ({PER_RECEIVER})"
        )
    cls = JAX_ATTACKS.get(type(twin))
    if cls is None:
        raise ConfigError(
            f"{where}: adversary: attack {attack_id!r}: not on the JAX backend (only the "
            f"built-in attacks have JAX twins: {sorted(_builtin_ids())}; an attack registered "
            "at run time runs on the numpy engine only)"
        )
    return cls(twin, n, m, horizon)


def _builtin_ids() -> list[str]:
    return [i for i, f in np_attacks.BUILTIN_ATTACKS.items() if f in JAX_ATTACKS]


# -- roles and the step -----------------------------------------------------------------------------
class JaxAdversary:
    """The roles of a run and their effect on each step's messages (module doc), built from
    the validated numpy :class:`~fedbandit_env.adversary.Adversary`."""

    def __init__(self, config: Any, twins: dict[str, Any], where: str = ""):
        adv: AdversaryConfig = config.adversary
        spec = np_attacks.AttackSpec(
            num_runs=1,
            num_agents=config.num_agents,
            num_arms=config.num_arms,
            horizon=config.horizon,
            channels={name: ch.dim for name, ch in twins.items()},
            channel_kinds={name: ch.kind for name, ch in twins.items()},
            topology=config.topology,
            family=config.family,
        )
        self.twin = Adversary(adv, spec)
        # one numpy reset on a probe run: every check numpy makes at reset, with its message
        self.twin.reset(streams_for("per_run", [0], "adversary"), [0], spec)
        self.config = adv
        self.where = where
        self.n, self.m, self.horizon = config.num_agents, config.num_arms, config.horizon
        self.f, self.crashed = adv.num_byzantine, adv.num_crashed
        self.placement = adv.placement
        self.active = adv.active
        self.attacked = tuple(self.twin.attacked)
        self.dims = {name: ch.dim for name, ch in twins.items()}
        self.attack = jax_attack_of(self.twin.attack, where, self.n, self.m, self.horizon)
        self.attack_id = self.twin.attack.attack_id
        self.neighbors = np.asarray(config.topology.neighbors, np.int32)
        self.static_roles = None
        if self.placement in ("fixed", "first", "max_degree", "min_degree"):
            rng = streams_for("per_run", [0], "adversary").child("roles")
            self.static_roles = np.asarray(draw_roles(adv, config.topology, rng, [0])[0], np.int32)

    # ------------------------------------------------------------------ reset
    def init(self, key: jax.Array) -> AdversaryState:
        """The run's roles, crash pulls and attack states, drawn from ``key`` (the run's
        adversary key)."""
        k_roles, k_crash = jax.random.split(key)
        roles, ok = self.draw_roles(k_roles)
        crashed = roles == CRASHED
        if self.config.crash_at == "uniform":
            at = jax.random.randint(k_crash, (self.n,), 1, self.horizon + 1, jnp.int32)
        else:
            at = jnp.full(self.n, int(self.config.crash_at), jnp.int32)
        crash_pull = jnp.where(crashed, at, self.horizon + 1).astype(jnp.int32)
        attack = {name: self.attack.init(self.dims[name]) for name in self.attacked}
        return AdversaryState(roles, crash_pull, attack, ok)

    def draw_roles(self, key: jax.Array) -> tuple[jnp.ndarray, jnp.ndarray]:
        """(roles (N,) int32, found ()) for the placement (table in the module doc)."""
        n, f, c = self.n, self.f, self.crashed
        if self.static_roles is not None:
            return jnp.asarray(self.static_roles), jnp.asarray(True)
        if self.placement == "code_fedmom":
            ids = jax.random.randint(key, (f,), 0, n, jnp.int32)
            return jnp.zeros(n, jnp.int32).at[ids].set(BYZANTINE), jnp.asarray(True)

        def uniform(k):
            order = jax.random.permutation(k, n)
            roles = jnp.zeros(n, jnp.int32).at[order[:f]].set(BYZANTINE)
            return roles.at[order[f : f + c]].set(CRASHED)

        if self.placement == "uniform":
            return uniform(key), jnp.asarray(True)
        # local_f: draw again until every honest agent has at most local_f Byzantine neighbours
        valid = jnp.asarray(self.neighbors >= 0)
        at = jnp.asarray(np.where(self.neighbors >= 0, self.neighbors, 0))

        def fits(roles):
            byz = (roles == BYZANTINE)[at] & valid
            worst = jnp.where(roles == HONEST, byz.sum(axis=1), 0)
            return (worst <= self.config.local_f).all()

        def body(carry):
            k, tries, _, _ = carry
            k, k_draw = jax.random.split(k)
            roles = uniform(k_draw)
            return k, tries + 1, roles, fits(roles)

        def cond(carry):
            _, tries, _, ok = carry
            return ~ok & (tries < LOCAL_F_TRIES)

        start = (key, jnp.zeros((), jnp.int32), jnp.zeros(n, jnp.int32), jnp.asarray(False))
        _, _, roles, ok = bounded_while(jnp, cond, body, start, LOCAL_F_TRIES)
        return roles, ok

    # ------------------------------------------------------------------- step
    def down(self, state: AdversaryState, pulls_before: jnp.ndarray) -> jnp.ndarray:
        """(N,) the crashed agents that are down in a step taken after ``pulls_before`` pulls:
        from their crash pull on and in the communication steps right before it."""
        return payloads.crashed_down(pulls_before, state.crash_pull)

    def channel(self, key, state: AdversaryState, name: str, send, payload, down, facts: dict):
        """One channel's (send, payload, attack state) after the roles: the down agents
        silenced, the Byzantine rows the attack's on an attacked channel (silent on the
        others). ``facts``: step, means, best_arm, pull_counts, last_arm, pulling."""
        if not self.active:
            return send, payload, None
        send = send & ~down
        byzantine = state.roles == BYZANTINE
        if name not in self.attacked:
            return send & ~byzantine, payload, None
        view = View(send=send, payload=payload, byzantine=byzantine, roles=state.roles, **facts)
        a_send, a_payload, a_state = self.attack.payload(
            key, state.attack[name], self.dims[name], view
        )
        a_send = jnp.asarray(a_send, bool)
        a_payload = jnp.asarray(a_payload, jnp.float32)
        speak = byzantine & a_send
        send = jnp.where(byzantine, a_send, send)
        payload = jnp.where(speak[:, None], a_payload, payload)
        return send, payload, a_state


def honest(state: Any) -> jnp.ndarray:
    """(..., N) bool: the honest agents of a state (every agent without an adversary)."""
    adv = getattr(state, "adversary", None)
    return payloads.honest_agents(None if adv is None else adv.roles, state.last_arm)
