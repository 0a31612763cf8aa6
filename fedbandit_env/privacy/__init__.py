"""Privacy mechanisms, vectorized over (runs B, agents N, arms M) where it applies: calibration,
mechanisms, the tree, hybrid and Gram-tree counters and the accountant (docs/privacy.md). The
helpers the docs do not name here (validators, composition formulas, ...) are imported from their
modules. The empirical audit is a bench tool: :mod:`fedbandit_env.bench.privacy_audit`.
"""

from fedbandit_env.privacy.accountant import PrivacyAccountant, PrivacySpent
from fedbandit_env.privacy.calibration import gaussian_sigma
from fedbandit_env.privacy.dyadic import dyadic_blocks
from fedbandit_env.privacy.errors import (
    PrivacyBudgetWarning,
    PrivacyConfigError,
    PrivacyError,
)
from fedbandit_env.privacy.gram_tree import GramRelease, GramTreePrivatizer
from fedbandit_env.privacy.hybrid_counter import HybridCounter, hybrid_noise_variance
from fedbandit_env.privacy.mechanisms import (
    GaussianMechanism,
    LaplaceMechanism,
    symmetric_gaussian_noise,
)
from fedbandit_env.privacy.tree_counter import TreeCounter

__all__ = [
    "GaussianMechanism",
    "GramRelease",
    "GramTreePrivatizer",
    "HybridCounter",
    "LaplaceMechanism",
    "PrivacyAccountant",
    "PrivacyBudgetWarning",
    "PrivacyConfigError",
    "PrivacyError",
    "PrivacySpent",
    "TreeCounter",
    "dyadic_blocks",
    "gaussian_sigma",
    "hybrid_noise_variance",
    "symmetric_gaussian_noise",
]
