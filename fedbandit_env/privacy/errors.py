"""Errors and warnings of the privacy mechanisms."""

from __future__ import annotations

from fedbandit_env.errors import FedBanditError


class PrivacyError(FedBanditError):
    """A privacy parameter is invalid. The message names the parameter and what was expected,
    e.g. ``"epsilon: expected a positive number (or inf), got -1"``."""

    def __init__(self, parameter: str, expected: str, got: object):
        self.parameter = parameter
        self.expected = expected
        self.got = got
        super().__init__(f"{parameter}: expected {expected}, got {got!r}")


class PrivacyBudgetWarning(UserWarning):
    """A mechanism refused a release because its privacy budget (tree capacity) is used up."""
