"""Results versions: which code produced a stored row (docs/bench.md, "Results versions").

A row's results version is ``"fedbandit <package version> / env <env id> v<env version> /
learner <learner id> v<learner version>"``: the package version, the environment's registered
``version`` (:func:`fedbandit_env.register`, default 1) and the learner's ``version`` attribute
(``TeamPolicy.version`` / ``PerAgentLearner.version``, default 1), followed by the learner's
optional ``results_note`` in parentheses (the library adapters put the library's version there). A change that moves an
environment's or a learner's results bumps its version, so rows of the old code never pool with
rows of the new one: the store keys rows by (cell hash, results version, seed) and the
leaderboard ranks only rows of the current version, noting the stale ones.

Rows of the JAX backend (docs/bench.md, "Backends") end in ``" / backend jax v<JAX backend
version> (jax <JAX's version>)"`` (:func:`backend_suffix`): the JAX environment's own version
(:data:`JAX_BACKEND_VERSION`) and JAX's, whose random streams are not guaranteed from one JAX
release to the next. Numpy rows keep their versions as they were (no backend part), so a JAX row
never has a numpy row's version and the two are never pooled.

:data:`HISTORY` lists every bump; docs/bench.md ("Version history") shows it as the table that
:func:`history_markdown` renders (a test checks that the page and the data agree).
"""

from __future__ import annotations

import json
from typing import Any

from fedbandit_env.registration import spec

PRIVACY_WRAPPER_VERSION = 1
"""Results version of the privacy wrapper's part of a row (bumped when a change of the wrapper
moves the results of wrapped learners)."""

ADVERSARY_VERSION = 1
"""Results version of the part of a row of a cell with an adversary (``adversary=`` in its
environment kwargs, docs/adversary.md): such a row stores the honest agents' regret
(:func:`fedbandit_env.bench.store.rows_from_result`); bumped when what those rows hold changes."""

JAX_BACKEND_VERSION = 5
"""Results version of the JAX backend's part of a row (bumped when a change of
:mod:`fedbandit_env.jax` moves the results of JAX rows: its draws, its engine steps)."""

# Every results-version bump, newest first: (what changed version, the new version, why).
# A commit that bumps a version (a learner's ``version``, an environment's
# ``register(..., version=)``, the package version) adds its row at the top, here and in the
# table of docs/bench.md between the version-history markers: paste the output of
#     python -c "from fedbandit_env.bench.versions import history_markdown; print(history_markdown())"
HISTORY: tuple[tuple[str, str, str], ...] = (
    # --- add new rows below this line, newest first ---
    (
        "`async_lin_ucb`",
        "2",
        "the server keeps ln det(A_g - D_j + lambda I) per client and recomputes only the "
        "uploader's (another client's upload adds the same data to A_g and D_j), and a client's "
        "inverse and log-dets after a download are computed at its next decision: two "
        "`slogdet` per upload instead of one per seen client, so rounding may differ; 48 runs "
        "at the CI scale of Li & Wang's experiment (N = 30, d = 8, T = 3,000; gamma 1, 2, 5; "
        "both `refresh` settings) gave identical final regrets and messages",
    ),
    (
        "JAX backend (rows of `--backend jax`)",
        "5",
        "`fed_lin_ucb` and `fed_lin_ucb_decentralized` take their float params as arguments of "
        "the compiled program (a sweep over epsilon is one compile) where they compiled them in "
        "as constants: arithmetic on those params now runs in float32 inside the program, not "
        "in float64 before it, so some settings round otherwise and break near-ties otherwise "
        "(30 runs of 4 agents, d = 3: at T = 150, 19 runs moved, mean final regret 29.72 -> "
        "29.82, paired se 0.23; at T = 400 none moved); the other ports' programs are unchanged "
        "or bit-identical (a checkpoint's curve write moved behind a batch-level cond)",
    ),
    (
        "JAX backend (rows of `--backend jax`)",
        "4",
        "the linear kernels' triangular solve is a substitution over the static d that updates "
        "only the rows not yet solved (was one row a step of a masked `fori_loop`): the same "
        "operations on every element, but XLA fuses them otherwise inside the private linear "
        "learners' programs, so `fed_lin_ucb` and `fed_lin_ucb_decentralized` round their "
        "indices differently in the last float32 bits and may break a near-tie otherwise "
        "(30 runs of 4 agents, d = 3, T = 400: 13 runs moved, mean final regret 12.24 -> 12.26, "
        "0.03 se); `linucb` 0.78x -> 0.82-0.87x its anchor on CPU; the reference's 76 JAX "
        "cells rebuilt bit-identical (no near-tie of theirs moved)",
    ),
    (
        "JAX backend (rows of `--backend jax`)",
        "3",
        "the privacy counters and the Gram tree touch only the closing level and draw noise only "
        "for the blocks that close (threefry's original layout): `gossip_fed_ucb`, `dp_mw_ucb`, "
        "`dp_dec_ucb`, `fed_lin_ucb` and `fed_lin_ucb_decentralized` draw other numbers from the "
        "same laws and round differently in the last bits; `fed_lin_ucb`'s trigger is the "
        "determinant lemma on a kept factor; a learner's float settings are traced arguments "
        "of its program: in the reference's 76 JAX cells 40 are bit-identical, 24 differ in "
        "the last float32 bits of their regret curves (XLA's order of a float32 sum in the "
        "changed programs; same decisions, except one sync of one `dislinucb` run at the "
        "float32 edge of its threshold), 12 draw other numbers (the five learners above); "
        "every final regret within 2 se of version 2",
    ),
    (
        "JAX backend (rows of `--backend jax`)",
        "2",
        "the linear kernels (Cholesky factors, triangular solves, the eigendecomposition of "
        "FedUCB's spectrum floor) are plain XLA operations instead of jaxlib's LAPACK kernels, "
        "which deadlocked XLA:CPU's thread pool at 100 runs of 100 agents: the linear JAX "
        "learners round differently in the last bits; the JAX rollout also counts NaN indices "
        "(no number moves for the other learners)",
    ),
    (
        "`byzres_ucb`",
        "2",
        "f defaults to the environment's declared bound on Byzantine agents "
        "(`FederationFacts.byzantine_bound`; was 1): the robust suite runs it with the f of its "
        "attacks, and f = 0 on clean cells",
    ),
    (
        "`fed_mom_ucb`",
        "2",
        "lambda defaults to the environment's declared fraction f / N (was 0.2); new option "
        "`aggregate=\"mean\"` (the plain-mean ablation)",
    ),
    (
        "`robust_gosine`",
        "2",
        "the sticky sets are sized by the declared honest agents N - f by default (was N)",
    ),
    (
        "`coop_ucb2`",
        "2",
        "an arm whose count estimate is not positive has index +inf (was NaN under attacks); "
        "clean runs unchanged",
    ),
    (
        "`dp_dec_ucb`",
        "5",
        "an arm whose count estimate is not positive has index +inf (was NaN under attacks); "
        "clean runs unchanged",
    ),
    (
        "`ldp_ucb`",
        "2",
        "an arm without a count has index +inf and ln takes a total of at least 1 (was NaN, "
        "before the first sums with LDP-UCB-B and under attacks)",
    ),
    (
        "rows of a cell with an adversary (`adversary=` in its env kwargs)",
        "1",
        "new: such a row's final regret per agent, network regret and curve are the honest "
        "agents' (their mean, their sum; Byzantine and crashed agents are not scored, "
        "[adversary.md](adversary.md#honest-metrics)) and its version ends in ` / adversary v1`; "
        "rows of cells without an adversary keep their versions and numbers",
    ),
    (
        "JAX backend (rows of `--backend jax`)",
        "1",
        "new: rows run on the JAX backend end in ` / backend jax v1 (jax VERSION)` (the JAX "
        "backend's version and JAX's own), so they never pool with numpy rows; numpy rows keep "
        "their versions",
    ),
    (
        "`ucb1`",
        "3",
        "one index for both variants (`ucb1` and `ucb1_shared` compute the UCB1 index the same way)",
    ),
    (
        "`gossip_fed_ucb`",
        "6",
        "the Eq. (12) bonus is evaluated as the paper prints it",
    ),
    (
        "`gossip_ucb`",
        "3",
        "the Eq. (11) index is evaluated as the paper prints it",
    ),
    (
        "package (every row)",
        "0.2.0",
        "rows keep their regret curves at 100 log-spaced checkpoints instead of 60 (the "
        "reference file keeps all of them instead of 16); the numbers of every run are "
        "unchanged, the stored curves are finer, so rows of 0.1.0 are not pooled with new ones. "
        "Learners run under the privacy wrapper (`--privacy`) carry ` / privacy wrapper v1` in "
        "their version",
    ),
    (
        "`gossip_fed_ucb`",
        "5",
        "a release of a tree counter is the agent's exact running sum S plus the noise of the "
        "counter's blocks (`TreeCounter(exact_blocks=False)`), and the Eq. (12) bonus is computed "
        "from per-counter factors kept up to date at the pulled arms. Same formulas, mechanism "
        "and random streams, other roundings: a trajectory can move where two indices were "
        "within a few ulps. Final regret agrees with version 4 within 3 standard errors "
        "(`tests/test_gossip_fed_ucb_v5.py`)",
    ),
    (
        "`gossip_fed_ucb`",
        "4",
        "leaf rounds draw one standard Laplace per (run, agent), for the pulled arm's block, "
        'instead of one per (run, agent, arm) (`TreeCounter(noise_per="row")`); same mechanism '
        "and noise distribution, other streams. Final regret agrees with version 3 within 3 "
        "standard errors at epsilon 1 and 100 (`tests/test_gossip_fed_ucb_noise_layout.py`)",
    ),
    (
        "`dp_dec_ucb`",
        "4",
        "index ties are broken with one uniform per agent and step (`argmax_one_uniform`) "
        "instead of one per arm; the consensus mixing takes the neighbours' sum from the "
        "aggregating `neighbors` delivery and weights it by kappa/d_max once; ln^1.5 n of the "
        "privacy width is computed as ln n sqrt(ln n). Regret agrees with version 3 within 3 "
        "standard errors (`tests/test_dp_recsys_v4.py`)",
    ),
    (
        "`dp_mw_ucb`",
        "4",
        "ln^1.5 n of the privacy width is computed as ln n sqrt(ln n) instead of `** 1.5` (they "
        "differ in the last bits, which can flip an exact tie of indices); regret agrees with "
        "version 3 within 3 standard errors (`tests/test_dp_recsys_v4.py`)",
    ),
    (
        "`dp_mw_ucb`, `dp_dec_ucb`",
        "3",
        "their hybrid counters draw one standard Laplace per (run, agent) and step, for the "
        "pulled arm's counter, instead of one per (run, agent, arm) "
        '(`HybridCounter(noise_per="row")`); same mechanism and noise distribution, other '
        "streams. Final regret agrees with version 2 within 3 standard errors "
        "(`tests/test_dp_recsys_noise_layout.py`)",
    ),
    (
        "`dducb`, `coop_ucb2`, `gosine`, `ldp_ucb`, `fed1_ucb`, `fed2_ucb`, `dislinucb`",
        "1",
        "new: the field's standard baselines ([field.md](field.md))",
    ),
    (
        "`gossip_fed_ucb`",
        "3",
        "the privacy term of the Eq. (12) bonus uses ln max(n, 2) (`dp_log_floor=2`) instead of "
        "ln n, which is zero at n = 1 and let a very negative noisy first estimate strand its "
        "arm; finite-epsilon streams only. `dp_log_floor=1` gives version-2 behaviour "
        "([gossip.md](gossip.md#initial-sample))",
    ),
    (
        "`dp_mw_ucb`, `dp_dec_ucb`, `cdp_mab`, `ddp_mab`, `hdp_mab`, `fed_lin_ucb`, "
        "`fed_lin_ucb_decentralized`",
        "2",
        "the papers' timing by default: server rounds, uploads and synchronisations are "
        'communication-only steps ([architecture.md](architecture.md)); `timing="latency"` '
        "runs the version-1 protocol (same trajectories, recorded as version 2)",
    ),
    (
        "`ucb1`, `ucb1_shared`, `kl_ucb`, `kl_ucb_shared`, `epsilon_greedy`, "
        "`epsilon_greedy_shared`, `gossip_ucb`, `gossip_fed_ucb`",
        "2",
        "ties (and, for the gossip agents, lagging arms) are broken with one uniform per agent "
        "and step instead of one per arm; regret agrees with version 1 within 3 standard errors. "
        "`thompson_beta`, `thompson_gaussian`, their shared variants and `flooding` keep "
        "version 1: their trajectories are bit-identical",
    ),
)


def history_markdown() -> str:
    """:data:`HISTORY` as the Markdown table of docs/bench.md, "Version history"."""
    lines = ["| what | version | why |", "|---|---|---|"]
    lines += [f"| {what} | {version} | {why} |" for what, version, why in HISTORY]
    return "\n".join(lines)


def package_version() -> str:
    from fedbandit_env import __version__

    return __version__


def results_version(env_id: str, agent_id: str, policy: Any, backend: str = "numpy") -> str:
    """The results version of ``policy`` (a built learner, labelled ``agent_id``) on ``env_id``
    run on ``backend``."""
    version = int(getattr(policy, "version", 1))
    note = getattr(policy, "results_note", "")
    return _format(env_id, spec(env_id).version, agent_id, version, note) + backend_suffix(backend)


def _format(env_id: str, env_version: int, agent_id: str, version: int, note: str) -> str:
    return (
        f"fedbandit {package_version()} / env {env_id} v{env_version} / "
        f"learner {agent_id} v{version}" + (f" ({note})" if note else "")
    )


def jax_version() -> str:
    """The installed JAX's version (from its distribution's metadata: JAX is not imported)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("jax")
    except PackageNotFoundError:  # pragma: no cover - JAX on the path without metadata
        import jax

        return str(jax.__version__)


def backend_suffix(backend: str = "numpy") -> str:
    """The part of a results version that names the backend: empty for numpy (numpy rows keep
    the versions they always had), ``" / backend jax v1 (jax 0.10.2)"`` for the JAX backend."""
    if backend == "numpy":
        return ""
    return f" / backend {backend} v{JAX_BACKEND_VERSION} (jax {jax_version()})"


def wrapper_suffix(privacy: Any) -> str:
    """The part of a results version that names the privacy wrapper (empty without one)."""
    return f" / privacy wrapper v{PRIVACY_WRAPPER_VERSION}" if privacy else ""


def adversary_suffix(adversary: Any) -> str:
    """The part of a results version that says the row's cell has an adversary and so stores
    the honest agents' regret (empty without one, so other rows keep their versions)."""
    return "" if adversary is None else f" / adversary v{ADVERSARY_VERSION}"


def registered_results_version(
    env_id: str,
    agent_id: str,
    privacy: Any = None,
    backend: str = "numpy",
    adversary: Any = None,
) -> str | None:
    """The results version rows of (``env_id``, ``agent_id``) on ``backend`` get now, from the
    registries alone: the environment's registered version and the learner's class attributes
    (:func:`fedbandit_env.agent_registry.class_version`; on the JAX backend the JAX learner
    registry's, :func:`fedbandit_env.bench.backends.jax_class_version`). Nothing is built, and
    no module an id names is imported, so it is safe on ids read from a file; None when either
    id is not registered in this process (or the learner is a factory without a ``version``
    attribute, or the backend is not installed here)."""
    from fedbandit_env.agent_registry import class_version
    from fedbandit_env.bench.backends import BACKENDS, jax_class_version
    from fedbandit_env.errors import UnknownIdError

    if backend not in BACKENDS:
        return None
    try:
        env_version = spec(env_id).version
    except (UnknownIdError, TypeError):
        return None
    learner = class_version(agent_id) if backend == "numpy" else jax_class_version(agent_id)
    if learner is None:
        return None
    return (
        _format(env_id, env_version, agent_id, *learner)
        + wrapper_suffix(privacy)
        + adversary_suffix(adversary)
        + backend_suffix(backend)
    )


def current_results_version(
    env_id: str,
    agent_id: str,
    agent_kwargs: dict[str, Any],
    privacy: Any = None,
    backend: str = "numpy",
    adversary: Any = None,
) -> str:
    """The results version a run of (env, learner id, kwargs) on ``backend`` would get now
    (builds the learner to read its ``version``; for cells defined in code, never for ids read
    from a file: those use :func:`registered_results_version`)."""
    if backend == "numpy":
        from fedbandit_env.agent_registry import make_agent

        policy = make_agent(agent_id, **dict(agent_kwargs))
        return (results_version(env_id, agent_id, policy) + wrapper_suffix(privacy)
                + adversary_suffix(adversary))  # fmt: skip
    from fedbandit_env.bench.backends import jax_learner

    learner, _ = jax_learner(agent_id, dict(agent_kwargs))
    base = results_version(env_id, agent_id, learner)
    return base + wrapper_suffix(privacy) + adversary_suffix(adversary) + backend_suffix(backend)


def cell_results_version(cell: Any) -> str:
    """:func:`current_results_version` of a suite cell (its env, learner, kwargs, privacy,
    backend and adversary)."""
    return current_results_version(
        cell.env_id,
        cell.agent_id,
        cell.agent_kwargs,
        cell.privacy,
        cell.backend,
        cell.env_kwargs.get("adversary"),
    )


def row_version_key(row: Any) -> tuple[str, str, bool, str, bool | None]:
    """What a stored row's results version depends on, for
    :func:`registered_results_version`: env id, learner id, privacy wrapper, backend and
    whether the run had an adversary (None when not, so rows without one keep their key)."""
    config = json.loads(row.config)
    return (
        row.env_id,
        row.agent_id,
        bool(config.get("privacy")),
        row.backend,
        config.get("env_kwargs", {}).get("adversary") is not None or None,
    )
