"""Error types. Every message names the agent (where there is one), the field and what was expected."""

from __future__ import annotations


class FedBanditError(ValueError):
    """Base class of the suite's input errors."""


class ConfigError(FedBanditError):
    """An environment, channel or agent was configured with an invalid value."""


class ActionError(FedBanditError):
    """An agent submitted an invalid arm or message."""

    def __init__(self, agent: str, field: str, message: str):
        self.agent = agent
        self.field = field
        super().__init__(f"{agent}: {field}: {message}")


class HorizonError(FedBanditError):
    """The environment was stepped after its horizon (or before reset)."""


class CommunicationError(HorizonError):
    """A run took more communication-only steps in a row than the environment's
    ``max_communication_steps`` (docs/architecture.md, "Communication steps")."""


class UnknownIdError(FedBanditError, KeyError):
    """An environment or agent id is not registered."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


class StoreError(FedBanditError):
    """A results-store path is not a usable store (docs/reliability.md, "Store files")."""


class StoreWriteError(StoreError):
    """Writing a results store failed (a full disk, a file-size limit, a damaged file): the
    transaction was rolled back and nothing of it was written; the message names the store."""


class StoreConflictError(StoreError):
    """A run is already in the store with different numbers (docs/reliability.md, "Concurrent
    writers"): results never change silently."""


class LearnerError(FedBanditError):
    """A learner's own code raised, or returned something that is not a valid action.

    ``agent`` and ``run`` (the run's index in its batch) are set when known; ``evaluate`` adds
    the learner, the run's seed and the step to the message (docs/bench.md, "Errors")."""

    def __init__(self, message: str, agent: str | None = None, run: int | None = None):
        super().__init__(message)
        self.agent = agent
        self.run = run
