"""fedbandit_env: PettingZoo environments for federated, differentially private bandits.

``env = fedbandit_env.make("FedBandit/Heterogeneous-v0", num_agents=3, num_arms=5)`` gives a
PettingZoo ``ParallelEnv``; ``fedbandit_env.make_vec(id, num_runs=B)`` the batched vector view.
"""

from fedbandit_env import privacy
from fedbandit_env.agent_registry import list_agents, make_agent, register_agent
from fedbandit_env.byzantine_envs import register_byzantine_envs
from fedbandit_env.engine import VecInfo, VecObservation
from fedbandit_env.envs import register_builtin_envs
from fedbandit_env.errors import (
    ActionError,
    CommunicationError,
    ConfigError,
    FedBanditError,
    HorizonError,
    LearnerError,
    UnknownIdError,
)
from fedbandit_env.parallel_env import FedBanditParallelEnv
from fedbandit_env.per_agent import PerAgentLearner
from fedbandit_env.policy import (
    MULTI_ARMED,
    FederationFacts,
    ParallelPolicyAdapter,
    TeamAction,
    TeamPolicy,
    require_family,
    run_episode,
)
from fedbandit_env.privacy.errors import PrivacyBudgetWarning, PrivacyError
from fedbandit_env.registration import (
    EnvSpec,
    list_envs,
    make,
    make_aec,
    make_vec,
    register,
    spec,
)
from fedbandit_env.vector_env import FedBanditVectorEnv

register_builtin_envs()
register_byzantine_envs()  # the Byzantine papers' presets (docs/adversary.md)

# --- RL views (docs/rl.md): registers the Gymnasium single-agent view FedBandit/OneLearner-v0 ---
from fedbandit_env.rl import register_gymnasium_envs  # noqa: E402

register_gymnasium_envs()
# --- end RL views ---

__version__ = "0.2.0"

__all__ = [
    "ActionError",
    "CommunicationError",
    "ConfigError",
    "EnvSpec",
    "FedBanditError",
    "FedBanditParallelEnv",
    "FedBanditVectorEnv",
    "FederationFacts",
    "HorizonError",
    "LearnerError",
    "MULTI_ARMED",
    "ParallelPolicyAdapter",
    "PerAgentLearner",
    "PrivacyBudgetWarning",
    "PrivacyError",
    "TeamAction",
    "TeamPolicy",
    "UnknownIdError",
    "VecInfo",
    "VecObservation",
    "list_agents",
    "list_envs",
    "make",
    "make_aec",
    "make_agent",
    "make_vec",
    "privacy",
    "register",
    "register_agent",
    "require_family",
    "run_episode",
    "spec",
]
