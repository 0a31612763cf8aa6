"""The hyperparameter dataclasses of Gossip_UCB / Fed_UCB (agents.gossip_ucb) and of the
baselines (baselines.config): values are checked on construction, and an error names the
learner, the field and the expected value."""

from __future__ import annotations

import math

import pytest

from agents.gossip_ucb import FedUCBConfig, GossipConfig, GossipFedUCB, GossipUCB
from baselines.config import (
    CentralizedUCB1Config,
    EpsilonGreedyConfig,
    KLUCBConfig,
    LinUCBConfig,
    ThompsonBetaConfig,
    ThompsonGaussianConfig,
    UCB1Config,
)
from baselines.epsilon_greedy import EpsilonGreedy
from baselines.linucb import LinUCB
from baselines.oracle_ucb import CentralizedUCB1
from baselines.thompson import ThompsonBeta, ThompsonGaussian
from baselines.ucb import KLUCB, UCB1
from fedbandit_env.errors import ConfigError

BAD = [
    (GossipUCB, {"bonus_scale": -1.0}, "gossip_ucb: bonus_scale"),
    (GossipUCB, {"alpha1": -0.1}, "gossip_ucb: alpha1"),
    (GossipUCB, {"literal_line_order": "yes"}, "gossip_ucb: literal_line_order"),
    (GossipFedUCB, {"epsilon": 0.0}, "gossip_fed_ucb: epsilon"),
    (GossipFedUCB, {"dp_bonus_scale": -1.0}, "gossip_fed_ucb: dp_bonus_scale"),
    (GossipFedUCB, {"dp_log_floor": 0.5}, "gossip_fed_ucb: dp_log_floor"),
    (GossipFedUCB, {"noisy_init": 1.5}, "gossip_fed_ucb: noisy_init"),
    (
        GossipFedUCB,
        {"tree_index": "leaf"},
        "gossip_fed_ucb: tree_index: expected 'round' or 'pull'",
    ),
    (GossipFedUCB, {"privacy_levels": "x"}, "gossip_fed_ucb: privacy_levels: expected None or"),
    (GossipFedUCB, {"reward_clip": (1.0, 0.0)}, "gossip_fed_ucb: reward_clip: expected None or"),
    (UCB1, {"alpha": -1.0}, "ucb1: alpha"),
    (UCB1, {"scale": -1.0}, "ucb1: scale"),
    (KLUCB, {"precision": 0.9}, "kl_ucb: precision"),
    (KLUCB, {"bounds": (1.0, 0.0)}, "kl_ucb: bounds: expected finite low < high"),
    (EpsilonGreedy, {"epsilon": 2.0}, "epsilon_greedy: epsilon"),
    (ThompsonBeta, {"bounds": "0-1"}, "thompson_beta: bounds: expected"),
    (ThompsonGaussian, {"scale": -2.0}, "thompson_gaussian: scale"),
    (CentralizedUCB1, {"scale": math.nan}, "centralized_ucb1: scale"),
    (LinUCB, {"alpha": 1.0}, "linucb: alpha"),
]


@pytest.mark.parametrize(("cls", "kwargs", "message"), BAD, ids=[m for *_, m in BAD])
def test_a_bad_hyperparameter_names_the_learner_and_the_field(cls, kwargs, message):
    with pytest.raises(ConfigError, match=message):
        cls(**kwargs)


def test_configs_hold_the_checked_values_and_are_frozen():
    fed = GossipFedUCB(epsilon=2, reward_clip=[0, 1], dp_log_floor=3).config
    assert isinstance(fed, FedUCBConfig) and isinstance(fed, GossipConfig)
    assert fed.epsilon == 2.0 and fed.reward_clip == (0.0, 1.0) and fed.dp_log_floor == 3.0
    assert GossipFedUCB(epsilon=math.inf).privacy_epsilon == math.inf
    assert GossipUCB().config == GossipConfig("gossip_ucb")
    with pytest.raises(AttributeError):
        fed.epsilon = 1.0  # type: ignore[misc]
    assert UCB1().config == UCB1Config("ucb1")
    assert KLUCB(bounds=[0, 2]).config == KLUCBConfig("kl_ucb", bounds=(0.0, 2.0))
    assert EpsilonGreedy().config == EpsilonGreedyConfig("epsilon_greedy")
    assert ThompsonBeta().config == ThompsonBetaConfig("thompson_beta")
    assert ThompsonGaussian(1).config == ThompsonGaussianConfig("thompson_gaussian", 1.0)
    assert CentralizedUCB1().config == CentralizedUCB1Config("centralized_ucb1")
    assert LinUCB().config == LinUCBConfig("linucb")
