"""Views for learning agents (docs/rl.md): sufficient-statistics features, a PettingZoo observation
wrapper, a Gymnasium single-agent view (``FedBandit/OneLearner-v0``) and, in
:mod:`fedbandit_env.rl.sb3_vec_env` (needs the ``rl`` extra), the agents-as-VecEnv adapter for
stable-baselines3."""

from fedbandit_env.rl.features import (
    STATISTICS_PROTOCOL,
    StatisticsFeatures,
    declared_protocol,
    statistics_channel,
)
from fedbandit_env.rl.parallel_wrapper import StatisticsObservationWrapper
from fedbandit_env.rl.single_agent import GYM_ID, OneLearnerEnv, register_gymnasium_envs

__all__ = [
    "GYM_ID",
    "STATISTICS_PROTOCOL",
    "OneLearnerEnv",
    "StatisticsFeatures",
    "StatisticsObservationWrapper",
    "declared_protocol",
    "register_gymnasium_envs",
    "statistics_channel",
]
