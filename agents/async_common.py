"""What the two asynchronous federated linear bandits share (docs/async-linear.md).

Li & Wang (AISTATS 2022, "Asynchronous Upper Confidence Bound Algorithms for Federated Linear
Bandits", Algorithm 1) and He, Wang, Min & Gu (NeurIPS 2022, "A Simple and Provably Efficient
Algorithm for Asynchronous Federated Contextual Linear Bandits", Algorithm 1) run under an event
clock: one client acts per event, and only it may talk to the server. Their server is a party
that pulls no arm; the team policy plays it:

* a client uploads on ``up``, a ``server`` channel with ``aggregate="sum"`` and ``reply="none"``:
  one message per upload, and the server reads what arrived (the delivery's ``aggregate``);
* the server answers on ``down``, a ``push`` channel: one addressed message per client it
  downloads to.

An event takes up to three engine steps: the pull; if the client's upload trigger fired, a
communication step with its upload (the upload holds the pull's reward, which the client sees in
the pull's observation); if the server then downloads to anyone, a communication step with the
downloads. The next pull comes after them, so a download reaches its client before the next
decision (the authors' code: both exchanges happen within the event). Communication steps cost
no pull (docs/architecture.md, "Communication steps").

The formulas both engines compute are here, written against an array namespace for one run
with leading batch axes (docs/architecture.md, "Shared kernels").
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np

from agents.channel_check import check_channel_spec, check_every_upload_counts
from fedbandit_env.engine import PULL, VecObservation
from fedbandit_env.errors import ConfigError
from fedbandit_env.policy import FederationFacts, TeamAction, TeamPolicy
from fedbandit_env.ties import argmax_first_near_ties
from fedbandit_env.validation import check_real
from fedbandit_env.xp import namespace, rounding_tolerance

UP, DOWN = "up", "down"
EVENT_CLOCKS = "'one_random', 'poisson' or 'trace'"
REFRESH = ("on_receive", "on_local_update")  # when a download reaches the decision statistics


def async_channel_spec(up_dim: int, down_dim: int) -> dict[str, dict[str, Any]]:
    """``up``: a ``server`` channel, aggregate "sum", no reply; ``down``: a ``push`` channel."""
    return {
        UP: {"kind": "server", "dim": up_dim, "aggregate": "sum", "reply": "none"},
        DOWN: {"kind": "push", "dim": down_dim},
    }


def check_async_federation(aid: str, facts: FederationFacts, up_dim: int, down_dim: int) -> None:
    """An event clock (one client per event: the protocol both papers analyse), and the two
    channels with every upload accepted (participation 1, no drops, no join schedule)."""
    if facts.clock == "sync":
        raise ConfigError(
            f"{aid}: clock: expected an event clock ({EVENT_CLOCKS}): one client acts per event "
            f"and talks to the server alone, got 'sync'"
        )
    check_channel_spec(aid, async_channel_spec(up_dim, down_dim), facts)
    check_every_upload_counts(aid, facts, (UP, DOWN),
                              "the server's statistics are the sum of every upload")  # fmt: skip


def check_ratio(aid: str, name: str, value: Any) -> float:
    """A determinant-ratio threshold: a real >= 1, or ``math.inf`` (never)."""
    return check_real(name, value, low=1.0, where=aid, allow_inf=True)


def log_threshold(ratio: float) -> float:
    """ln of a determinant-ratio threshold (``inf`` stays ``inf``: the trigger never fires)."""
    return math.inf if math.isinf(ratio) else math.log(ratio)


def ratio_fires(logdet_new: Any, logdet_ref: Any, log_ratio: Any) -> Any:
    """``det(V_new) / det(V_ref) > ratio`` in logs, strictly beyond rounding: the difference of
    the log-dets must pass ``ln ratio`` by more than the relative
    :func:`~fedbandit_env.xp.rounding_tolerance` (1e-12 in float64, 1e-5 in float32), so that a
    ratio equal to the threshold up to rounding (a unit-norm first pull doubles det(I)) does not
    fire on either engine. Li & Wang's upload and download triggers (Algorithm 1, strict ">" as
    the authors' code) and He et al.'s exchange trigger (Algorithm 1, ratio 1 + alpha);
    ``log_ratio = inf`` never fires."""
    xp = namespace(logdet_new, logdet_ref)
    tol = rounding_tolerance(xp.result_type(logdet_new, logdet_ref))
    return logdet_new - logdet_ref > log_ratio + tol * xp.maximum(1.0, xp.abs(log_ratio))


def ucb_scores(context: Any, v_inv: Any, theta: Any, width: Any) -> tuple[Any, Any]:
    """``<x, theta> + width ||x||_{V^-1}`` of every arm of the acting client's decision set
    ``context`` (..., K, d), and ``x^T V^-1 x`` (..., K): LinUCB's index (Li & Wang, Algorithm 1
    line 5; He et al., Algorithm 1 line 6)."""
    xp = namespace(context, v_inv)
    quad = (xp.matmul(context, v_inv) * context).sum(axis=-1)
    mean = xp.matmul(context, theta[..., None])[..., 0]
    return mean + width[..., None] * xp.sqrt(xp.maximum(quad, 0.0)), quad


@dataclass(frozen=True)
class OfulWidth:
    """OFUL's radius settings for :func:`agents.dislinucb.exploration_width` (no fixed
    ``alpha``): FedLinUCB's ``beta="theory"``."""

    lam: float
    delta: float
    R: float
    alpha: None = None


def check_oful(config: Any, aid: str) -> None:
    """Validate and set, on a frozen configuration, the OFUL fields both Li & Wang learners
    share: ``lam`` > 0, ``delta`` in (0, 1), ``R`` >= 0 and ``alpha`` >= 0 or None."""
    set_ = partial(object.__setattr__, config)
    set_("lam", check_real("lam", config.lam, low=0.0, low_open=True, where=aid))
    set_("delta", check_real("delta", config.delta, low=0.0, high=1.0, low_open=True,
                             high_open=True, where=aid))  # fmt: skip
    set_("R", check_real("R", config.R, low=0.0, where=aid))
    if config.alpha is not None:
        set_("alpha", check_real("alpha", config.alpha, low=0.0, where=aid))


def acting_arms(obs: VecObservation, v_inv: np.ndarray, b: np.ndarray,
                width: np.ndarray) -> np.ndarray:  # fmt: skip
    """The arms (B, N) of a step: the acting client c of each run plays the first arm within
    rounding of the best :func:`ucb_scores` with its ``v_inv`` (B, d, d), ``b`` (B, d) and
    ``width`` (B,); the others' arms (0) are not pulled."""
    runs = np.arange(len(width))
    c = obs.active.argmax(axis=1)
    theta = np.matmul(v_inv, b[..., None])[..., 0]
    scores, _ = ucb_scores(obs.context[runs, c], v_inv, theta, width)
    arms = np.zeros(obs.active.shape, dtype=np.int64)
    arms[runs, c] = argmax_first_near_ties(scores)
    return arms


def rank_one(v_inv: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A pull x into (V + x x^T): Sherman-Morrison's ``(V + x x^T)^-1`` from ``v_inv`` (R, d, d)
    and the matrix determinant lemma's ``ln(1 + x^T V^-1 x)`` (R,)."""
    u = np.matmul(v_inv, x[..., None])
    quad = (x * u[..., 0]).sum(axis=-1)
    grown = v_inv - np.matmul(u, u.swapaxes(-1, -2)) / (1.0 + quad)[:, None, None]
    return grown, np.log1p(np.maximum(quad, 0.0))


def pack(A: Any, b: Any, n: Any = None) -> Any:
    """The payload of statistics: ``A`` flattened (d^2), ``b`` (d) and, if given, ``n`` (1)."""
    xp = namespace(A, b)
    d = A.shape[-1]
    parts = [A.reshape(*A.shape[:-2], d * d), b]
    if n is not None:
        parts.append(n[..., None])
    return xp.concatenate(parts, axis=-1)


def unpack(payload: Any, dim: int) -> tuple[Any, Any, Any]:
    """``(A, b, n)`` of a :func:`pack`-ed payload (``n`` None without it)."""
    d = dim
    A = payload[..., : d * d].reshape(*payload.shape[:-1], d, d)
    b = payload[..., d * d : d * d + d]
    n = payload[..., d * d + d] if payload.shape[-1] > d * d + d else None
    return A, b, n


class AsyncEventTeam(TeamPolicy):
    """The steps of an event (module docstring), shared by both learners: each ``act`` takes
    what the last step brought (the server's downloads, :meth:`_receive`; an upload at the
    server, :meth:`_serve`; or a pull, :meth:`_fold`), then sends what is due (an upload or
    downloads, on a communication step) or decides the acting client's next pull
    (:meth:`_choose`). A learner calls :meth:`_start` in its ``reset``. It also keeps the
    staleness of its decisions (:meth:`staleness`)."""

    event_time = ("clock",)  # it needs one: one client acts per event
    _zeros: np.ndarray

    def _start(self, num_runs: int, num_agents: int, size: int, horizon: int) -> None:
        self._zeros = np.zeros((num_runs, num_agents, size))
        self._zeros.flags.writeable = False
        self._last_download = np.zeros((num_runs, num_agents), dtype=np.int64)  # its pull count
        self._age_sum = np.zeros(num_runs)
        self._decisions = np.zeros(num_runs, dtype=np.int64)
        self._horizon = horizon
        self._uploader = np.full(num_runs, -1, dtype=np.int64)  # who uploaded at the last step
        self._pushed = np.zeros((num_runs, num_agents), dtype=bool)  # the last step's downloads
        self._context: np.ndarray | None = None

    def act(self, obs: VecObservation) -> TeamAction:
        B, N = self._zeros.shape[:2]
        up_send = np.zeros((B, N), dtype=bool)
        down_send = np.zeros((B, N), dtype=bool)
        up_payload = down_payload = self._zeros
        if obs.step > 0:
            if self._pushed.any():
                self._receive(obs.deliveries[DOWN])
                got = self._pushed & obs.deliveries[DOWN].received
                self._last_download = np.where(got, obs.pulls[:, None], self._last_download)
            uploaded = (self._uploader >= 0) & (obs.deliveries[UP].count > 0)  # a live run's
            if uploaded.any():
                down_send, down_payload = self._serve(obs.deliveries[UP], uploaded)
            fresh = (obs.phase == PULL) & obs.pulled.any(axis=1)
            if fresh.any():
                up_send, up_payload = self._fold(obs, fresh)
        idle = ~(up_send.any(axis=1) | down_send.any(axis=1))
        down_send, down_payload = self._join(obs, idle, down_send, down_payload)
        self._uploader = np.where(up_send.any(axis=1), up_send.argmax(axis=1), -1)
        self._pushed = down_send
        talking = up_send.any(axis=1) | down_send.any(axis=1)
        self._context = obs.context
        self._age(obs, ~talking & (obs.pulls < self._horizon))  # a finished run decides none
        return TeamAction(
            self._choose(obs),
            {UP: (up_send, up_payload), DOWN: (down_send, down_payload)},
            ~talking if talking.any() else None,
        )

    def _age(self, obs: VecObservation, deciding: np.ndarray) -> None:
        """Staleness: at each decision, the events (pulls) since the acting client's last
        download (since the run's start if it never had one), summed per run."""
        c = obs.active.argmax(axis=1)
        age = obs.pulls - self._last_download[np.arange(len(c)), c]
        self._age_sum += np.where(deciding, age, 0)
        self._decisions += deciding

    def staleness(self) -> np.ndarray:
        """(B,) the mean over the run's decisions of the events since the acting client's last
        download (docs/async-linear.md, "Staleness"); NaN before any decision."""
        with np.errstate(invalid="ignore", divide="ignore"):
            return self._age_sum / self._decisions

    def _receive(self, down: Any) -> None:
        """The server's downloads that arrived, into the clients' statistics."""
        raise NotImplementedError

    def _join(self, obs: VecObservation, idle: np.ndarray, send: np.ndarray,
              payload: np.ndarray) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
        """Downloads to a client before its first decision, in the ``idle`` runs (no upload or
        download this step): none by default (Async-LinUCB's ``sync_on_join``)."""
        return send, payload

    def _serve(self, up: Any, runs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The server's side of an upload in ``runs``: (download mask (B, N), payloads)."""
        raise NotImplementedError

    def _fold(self, obs: VecObservation, fresh: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """A pull of the ``fresh`` runs into the statistics: (upload mask (B, N), payloads)."""
        raise NotImplementedError

    def _choose(self, obs: VecObservation) -> np.ndarray:
        """The arms (B, N): the acting client's choice (the others are not pulled)."""
        raise NotImplementedError
