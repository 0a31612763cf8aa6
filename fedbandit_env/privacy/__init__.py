"""Privacy mechanisms, vectorized over (runs B, agents N, arms M) where it applies.

See docs/privacy.md.

* :mod:`.calibration` — Laplace scale, Gaussian sigma (classic and analytic), validators.
* :mod:`.mechanisms` — ``LaplaceMechanism``, ``GaussianMechanism``, symmetric Gaussian matrices.
* :mod:`.dyadic` — dyadic block decompositions used by the tree counters.
* :mod:`.tree_counter` — binary-tree continual counter (Fed_UCB of Zhu, Zhu, Liu & Liu 2021,
  Algorithms 2–3).
* :mod:`.hybrid_counter` — Chan–Shi–Song hybrid counter (the DP recommender agents of Li, Song &
  Fragouli 2020).
* :mod:`.gram_tree` — tree-based Gaussian mechanism over Gram matrices (FedUCB of Dubey &
  Pentland, Section 4.3, Algorithm 2).
* :mod:`.accountant` — per-agent, per-channel ledger; basic, advanced and zCDP composition.

The empirical privacy audit (a lower bound on epsilon from samples) is a bench tool:
:mod:`fedbandit_env.bench.privacy_audit`.
"""

from fedbandit_env.privacy.accountant import (
    PrivacyAccountant,
    PrivacySpent,
    advanced_composition,
    basic_composition,
    pure_dp_zcdp_rho,
    zcdp_to_dp,
)
from fedbandit_env.privacy.calibration import (
    analytic_gaussian_sigma,
    check_delta,
    check_epsilon,
    check_sensitivity,
    classic_gaussian_sigma,
    gaussian_delta,
    gaussian_sigma,
    gaussian_zcdp_rho,
    laplace_scale,
)
from fedbandit_env.privacy.dyadic import blocks_containing, dyadic_blocks
from fedbandit_env.privacy.errors import (
    PrivacyBudgetWarning,
    PrivacyConfigError,
    PrivacyError,
)
from fedbandit_env.privacy.gram_tree import (
    GramRelease,
    GramTreeConstants,
    GramTreePrivatizer,
    linear_privacy_constants,
)
from fedbandit_env.privacy.hybrid_counter import (
    HybridCounter,
    hybrid_noise_std,
    hybrid_noise_variance,
)
from fedbandit_env.privacy.mechanisms import (
    GaussianMechanism,
    LaplaceMechanism,
    symmetric_gaussian_noise,
)
from fedbandit_env.privacy.tree_counter import TreeCounter

__all__ = [
    "GaussianMechanism",
    "GramRelease",
    "GramTreeConstants",
    "GramTreePrivatizer",
    "HybridCounter",
    "LaplaceMechanism",
    "PrivacyAccountant",
    "PrivacyBudgetWarning",
    "PrivacyConfigError",
    "PrivacyError",
    "PrivacySpent",
    "TreeCounter",
    "advanced_composition",
    "analytic_gaussian_sigma",
    "basic_composition",
    "blocks_containing",
    "check_delta",
    "check_epsilon",
    "check_sensitivity",
    "classic_gaussian_sigma",
    "dyadic_blocks",
    "gaussian_delta",
    "gaussian_sigma",
    "gaussian_zcdp_rho",
    "hybrid_noise_std",
    "hybrid_noise_variance",
    "laplace_scale",
    "linear_privacy_constants",
    "pure_dp_zcdp_rho",
    "symmetric_gaussian_noise",
    "zcdp_to_dp",
]
