"""Errors and warnings of the privacy mechanisms."""

from __future__ import annotations

from fedbandit_env.errors import ConfigError, FedBanditError


class PrivacyError(FedBanditError):
    """A privacy parameter is invalid. The message names the parameter and what was expected,
    e.g. ``"epsilon: expected a positive number (or inf), got -1"``."""

    def __init__(self, parameter: str, expected: str, got: object):
        self.parameter = parameter
        self.expected = expected
        self.got = got
        super().__init__(f"{parameter}: expected {expected}, got {got!r}")


class PrivacyConfigError(PrivacyError, ConfigError):
    """A privacy wrapper option is invalid. ``parameter`` is the option's full path,
    ``where.field``, e.g. ``"privacy.channels.neighbors.epsilon: expected a positive finite
    number, got 0"``. It is both a :class:`PrivacyError` and a
    :class:`~fedbandit_env.errors.ConfigError`, so code catching either keeps working."""

    def __init__(self, where: str, field: str, expected: str, got: object):
        self.where = where
        self.field = field
        super().__init__(f"{where}.{field}" if field else where, expected, got)

    def at(self, where: str) -> PrivacyConfigError:
        """The same error, located at ``where`` (e.g. once the channel name is known)."""
        return PrivacyConfigError(where, self.field, self.expected, self.got)


class PrivacyBudgetWarning(UserWarning):
    """A mechanism refused a release because its privacy budget (tree capacity) is used up."""
