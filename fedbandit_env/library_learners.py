"""Other bandit libraries' single-agent policies as per-agent learners (docs/learners.md).

Ids ``mabwiser:<LearningPolicy>`` (e.g. ``mabwiser:UCB1`` with agent_kwargs
``{"alpha": 1.0}``) and ``smpybandits:<Policy>`` (e.g. ``smpybandits:Thompson``) resolve here
without registration (:mod:`fedbandit_env.agent_registry`); every other keyword argument is
passed through to the library's policy. Each agent runs its own independent copy of the policy
on its own rewards (no communication), seeded from its own generator.

* :class:`MABWiserLearner`: ``MAB(arms, LearningPolicy.<name>(**kwargs), seed=...)``, fitted on
  nothing at reset, then ``partial_fit([arm], [reward])`` after every pull and ``predict()`` for
  the next arm. MABWiser gives an untried arm the expectation 0 (not infinity), so its UCB1 may
  never try an arm; with ``init_each_arm=True`` (the default, UCB1 as published) the adapter
  plays each arm once, in order, before asking the policy. Extra ``mabwiser``.
* :class:`SMPyBanditsLearner`: ``Policies.<name>(nbArms, **kwargs)`` with ``startGame()``,
  ``choice()`` and ``getReward(arm, reward)``; ``lower`` and ``amplitude`` default to the
  environment's reward bounds when the policy takes them. SMPyBandits draws from numpy's global
  random state, so the adapter swaps in the agent's own state (seeded from its generator) around
  every call and restores the caller's: results are reproducible and the global state is left
  as it was. Extra ``smpybandits`` (SMPyBandits imports ``scipy.special.btdtri``, removed in
  SciPy 1.14, so the extra pins ``scipy<1.14``, which needs numpy < 2.3: it cannot share an
  environment with the ``test`` extra; see docs/writing-agents.md).

A missing library raises a :class:`~fedbandit_env.errors.ConfigError` naming the extra.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import inspect
from typing import Any

import numpy as np

from fedbandit_env.errors import ConfigError
from fedbandit_env.per_agent import PerAgentLearner, last_pull
from fedbandit_env.policy import MULTI_ARMED, FederationFacts, require_family


def _require(module: str, extra: str, agent_id: str) -> Any:
    try:
        return importlib.import_module(module)
    except ImportError as err:
        raise ConfigError(
            f"{agent_id}: needs the {extra} package, which is not installed or cannot be "
            f"imported ({err}); pip install 'fedbandit[{extra}]' (in a checkout: "
            f"pip install -e '.[{extra}]')"
        ) from None


def _library_version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


class MABWiserLearner(PerAgentLearner):
    """One MABWiser ``MAB`` per agent (module doc)."""

    @classmethod
    def class_results_note(cls) -> str:
        """The results note of every MABWiser learner: the library's version."""
        return f"mabwiser {_library_version('mabwiser')}"

    def __init__(self, policy: str, init_each_arm: bool = True, **kwargs: Any):
        self.agent_id = f"mabwiser:{policy}"  # type: ignore[misc]
        mab = _require("mabwiser.mab", "mabwiser", self.agent_id)
        factory = getattr(mab.LearningPolicy, policy, None)
        known = sorted(
            n for n in dir(mab.LearningPolicy) if n[0].isupper() and not n.startswith("Lin")
        )
        if policy.startswith("Lin"):
            raise ConfigError(
                f"{self.agent_id}: contextual policies need contexts; expected one of {known}"
            )
        if factory is None or not inspect.isclass(factory):
            raise ConfigError(f"mabwiser: policy: expected one of {known}, got {policy!r}")
        try:
            self._learning_policy = factory(**kwargs)
        except (TypeError, ValueError) as err:
            raise ConfigError(
                f"{self.agent_id}: bad keyword arguments {sorted(kwargs)}: {err}"
            ) from None
        self._mab = mab
        self.init_each_arm = bool(init_each_arm)
        self.results_note = self.class_results_note()

    def reset(self, agent: str, facts: FederationFacts, rng: np.random.Generator) -> None:
        require_family(self.agent_id, facts, MULTI_ARMED)
        self.num_arms = facts.num_arms
        self.model = self._mab.MAB(
            list(range(facts.num_arms)), self._learning_policy, seed=int(rng.integers(2**31))
        )
        self.model.fit([], [])
        self.pulls = 0

    def act(self, observation: dict[str, Any]) -> int:
        pull = last_pull(observation)
        if pull is not None:
            self.model.partial_fit([pull[0]], [pull[1]])
            self.pulls += 1
        if self.init_each_arm and self.pulls < self.num_arms:
            return self.pulls
        return int(self.model.predict())


class SMPyBanditsLearner(PerAgentLearner):
    """One SMPyBandits policy per agent (module doc)."""

    @classmethod
    def class_results_note(cls) -> str:
        """The results note of every SMPyBandits learner: the library's version."""
        return f"SMPyBandits {_library_version('SMPyBandits')}"

    def __init__(self, policy: str, **kwargs: Any):
        self.agent_id = f"smpybandits:{policy}"  # type: ignore[misc]
        policies = _require("SMPyBandits.Policies", "smpybandits", self.agent_id)
        cls = getattr(policies, policy, None)
        if cls is None or not inspect.isclass(cls):
            known = sorted(n for n in dir(policies) if n[0].isupper())
            raise ConfigError(f"smpybandits: policy: expected one of {known}, got {policy!r}")
        try:
            inspect.signature(cls).bind(2, **kwargs)  # nbArms and the kwargs, before any run
        except TypeError as err:
            raise ConfigError(
                f"{self.agent_id}: bad keyword arguments {sorted(kwargs)}: {err}"
            ) from None
        except ValueError:  # no signature to check
            pass
        self._cls = cls
        self.kwargs = kwargs
        self.results_note = self.class_results_note()

    def _call(self, method: Any, *args: Any) -> Any:
        """Call into SMPyBandits with this agent's own global-RNG state swapped in (module doc):
        the only use of numpy's global state, confined to the library's calls."""
        saved = np.random.get_state()  # noqa: NPY002
        np.random.set_state(self._state)  # noqa: NPY002
        try:
            return method(*args)
        finally:
            self._state = np.random.get_state()  # noqa: NPY002
            np.random.set_state(saved)  # noqa: NPY002

    def reset(self, agent: str, facts: FederationFacts, rng: np.random.Generator) -> None:
        require_family(self.agent_id, facts, MULTI_ARMED)
        kwargs = dict(self.kwargs)
        params = inspect.signature(self._cls).parameters
        lo, hi = facts.reward_bounds
        if "lower" in params and np.isfinite(lo):
            kwargs.setdefault("lower", float(lo))
        if "amplitude" in params and np.isfinite(hi - lo):
            kwargs.setdefault("amplitude", float(hi - lo))
        self._state = np.random.RandomState(int(rng.integers(2**31))).get_state()
        try:
            self.model = self._cls(facts.num_arms, **kwargs)
        except TypeError as err:
            raise ConfigError(
                f"{self.agent_id}: bad keyword arguments {sorted(self.kwargs)}: {err}"
            ) from None
        self._call(self.model.startGame)

    def act(self, observation: dict[str, Any]) -> int:
        pull = last_pull(observation)
        if pull is not None:
            self._call(self.model.getReward, pull[0], pull[1])
        return int(self._call(self.model.choice))
