"""Validation helpers shared by every constructor (docs/limits.md).

One place decides what a number is, so every boundary (environment configs, channels, graphs,
privacy mechanisms and wrappers, data sets, learners) accepts the same values:

* an integer field accepts any :class:`numbers.Integral` (Python ``int``, ``numpy.int64``, ...)
  except ``bool``; a real field accepts any :class:`numbers.Real` (``float``, ``numpy.float32``,
  integers, ...) except ``bool``. Values are converted once, to ``int`` / ``float``, so a numpy
  scalar gives exactly the result of the Python number of the same value;
* a value of the wrong type is refused with a :class:`TypeError` subclass naming the field and the
  expected type; a value of the right type out of range with a :class:`ValueError` naming the
  field and the range (both are :class:`~fedbandit_env.errors.ConfigError`, which callers catch);
* sizes have documented maxima (:data:`MAX_HORIZON`) and the arrays a configuration would allocate
  are estimated up front and refused when they exceed :func:`memory_limit`, so a size that cannot
  fit ends in a clear error, never in ``MemoryError`` or ``OverflowError`` half-way through.

Everything here runs at construction; nothing is called in a step loop.
"""

from __future__ import annotations

import math
import numbers
import os
from collections.abc import Mapping
from typing import Any

import numpy as np

from fedbandit_env.errors import ConfigError

#: Largest horizon T: step counters stay exact in float64 (2**53) and fit int64 with room to spare.
MAX_HORIZON = 2**53
#: Largest number of agents N. Topology facts are computed only when asked for
#: (docs/bench.md, "Speed and scale"), so a federation's memory is linear in N; what asks for
#: all-pairs facts (a flood channel's N x N slots) is refused by the memory estimate instead.
MAX_AGENTS = 1_000_000
#: Documented ceiling of the memory one environment, channel or learner may allocate up front.
DEFAULT_MEMORY_LIMIT = 8 * 2**30
#: Environment variable that overrides :data:`DEFAULT_MEMORY_LIMIT` (bytes).
MEMORY_LIMIT_ENV = "FEDBANDIT_MEMORY_LIMIT"


class ConfigTypeError(ConfigError, TypeError):
    """A configuration value has the wrong type (a ConfigError and a TypeError)."""


def is_integral(value: Any) -> bool:
    """True for ints of any kind (numpy included), False for bools and everything else."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool | np.bool_)


def is_real(value: Any) -> bool:
    """True for real numbers of any kind (numpy included), False for bools and everything else."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool | np.bool_)


def _where(where: str, name: str) -> str:
    return f"{where}: {name}" if where else name


def _num(x: float) -> str:
    return f"{x:g}" if isinstance(x, float) else str(x)


def _bounds_text(low: Any, high: Any, low_open: bool, high_open: bool) -> str:
    if low == 0 and not low_open and high is None:
        return "non-negative"
    parts = []
    if low is not None:
        parts.append(f"{'>' if low_open else '>='} {_num(low)}")
    if high is not None:
        parts.append(f"{'<' if high_open else '<='} {_num(high)}")
    return " and ".join(parts)


def _expected(kind: str, bounds: str, hint: str) -> str:
    if bounds == "non-negative":
        text = "a finite non-negative number" if kind == "finite number" else f"a {bounds} {kind}"
    else:
        text = f"{'an' if kind == 'int' else 'a'} {kind} {bounds}".rstrip()
    return f"{text} ({hint})" if hint else text


def check_int(
    name: str,
    value: Any,
    *,
    minimum: int | None = None,
    maximum: int | None = None,
    where: str = "",
    hint: str = "",
    error: type[Exception] = ConfigError,
    type_error: type[Exception] = ConfigTypeError,
) -> int:
    """``value`` as a Python ``int`` in ``[minimum, maximum]``.

    ``where`` prefixes the message (an agent or learner id), ``hint`` follows the expectation;
    ``error`` / ``type_error`` are the classes raised for a bad value / a bad type (both take one
    message argument). A value error names the bound it violates."""
    field = _where(where, name)
    if not is_integral(value):
        bounds = " and ".join(
            part
            for part in (
                f">= {minimum}" if minimum is not None else "",
                f"<= {maximum}" if maximum is not None else "",
            )
            if part
        )
        expected = _expected("int", bounds, hint)
        raise type_error(f"{field}: expected {expected}, got {type(value).__name__} {value!r}")
    out = int(value)
    if minimum is not None and out < minimum:
        raise error(f"{field}: expected {_expected('int', f'>= {minimum}', hint)}, got {out}")
    if maximum is not None and out > maximum:
        limit = f"<= {maximum} (docs/limits.md)"
        raise error(f"{field}: expected {_expected('int', limit, hint)}, got {out}")
    return out


def check_real(
    name: str,
    value: Any,
    *,
    low: float | None = None,
    high: float | None = None,
    low_open: bool = False,
    high_open: bool = False,
    allow_inf: bool = False,
    where: str = "",
    hint: str = "",
    error: type[Exception] = ConfigError,
    type_error: type[Exception] = ConfigTypeError,
) -> float:
    """``value`` as a Python ``float``: finite (or ``+-inf`` when ``allow_inf``), never NaN, in
    the interval given by ``low`` / ``high`` (open ends with ``low_open`` / ``high_open``)."""
    field = _where(where, name)
    kind = "number" if allow_inf else "finite number"
    expected = _expected(kind, _bounds_text(low, high, low_open, high_open), hint)
    if not is_real(value):
        raise type_error(f"{field}: expected {expected}, got {type(value).__name__} {value!r}")
    try:
        out = float(value)
    except OverflowError:  # an int beyond the float range
        out = math.inf if value > 0 else -math.inf
    bad = math.isnan(out) or (math.isinf(out) and not allow_inf)
    if low is not None:
        bad = bad or (out <= low if low_open else out < low)
    if high is not None:
        bad = bad or (out >= high if high_open else out > high)
    if bad:
        raise error(f"{field}: expected {expected}, got {value!r}")
    return out


def check_flag(name: str, value: Any, *, where: str = "") -> bool:
    """``value`` as a ``bool`` (Python or numpy bool only; 0/1 and other objects are refused)."""
    if not isinstance(value, bool | np.bool_):
        raise ConfigTypeError(f"{_where(where, name)}: expected True or False, got {value!r}")
    return bool(value)


def check_probability(name: str, value: float, *, allow_one: bool = True) -> float:
    return check_real(name, value, low=0.0, high=1.0, high_open=not allow_one)


def check_choice(name: str, value: Any, choices: Any) -> Any:
    """``value`` if it is one of ``choices`` (a str, or None where listed), else a ConfigError."""
    if not (value is None or isinstance(value, str)) or value not in choices:
        raise ConfigError(f"{name}: expected one of {choices}, got {value!r}")
    return value


def check_horizon(value: Any, *, name: str = "horizon", where: str = "") -> int:
    """A horizon ``1 <= T <= MAX_HORIZON`` (docs/limits.md)."""
    return check_int(name, value, minimum=1, maximum=MAX_HORIZON, where=where)


def option_kind(option: str, value: Any, kinds: tuple[str, ...], forms: str) -> str:
    """The ``"kind"`` of an option given as a dict (drift, clock, reward_delay: docs/time.md),
    one of ``kinds``; else a ConfigError naming the option, the accepted kinds and ``forms``
    (the forms the option takes)."""
    if not isinstance(value, Mapping) or value.get("kind") not in kinds:
        got = value.get("kind") if isinstance(value, Mapping) else value
        raise ConfigError(f"{option}: expected one of {kinds} ({forms}), got {got!r}")
    return value["kind"]


def check_option_keys(option: str, value: Mapping, kind: str, accepted: Any, where: str = "") -> None:
    """A ConfigError naming the option and its unknown keys for ``kind`` (``where``: more
    context), unless every key of ``value`` is ``accepted``."""
    unknown = sorted(set(value) - set(accepted))
    if unknown:
        raise ConfigError(f"{option}: unknown key(s) {unknown} for kind {kind!r}{where}; "
                          f"accepted: {list(accepted)}")  # fmt: skip


def memory_limit() -> int:
    """Bytes one constructor may plan to allocate: ``FEDBANDIT_MEMORY_LIMIT`` if set, else the
    smaller of :data:`DEFAULT_MEMORY_LIMIT` and the machine's physical memory."""
    env = os.environ.get(MEMORY_LIMIT_ENV)
    if env:
        try:
            return max(0, int(env))
        except ValueError:
            raise ConfigError(
                f"{MEMORY_LIMIT_ENV}: expected a number of bytes, got {env!r}"
            ) from None
    try:
        physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        physical = DEFAULT_MEMORY_LIMIT
    return min(DEFAULT_MEMORY_LIMIT, int(physical))


def _gib(nbytes: float) -> str:
    return f"{nbytes / 2**30:.3g} GiB"


def check_memory(what: str, nbytes: float, formula: str) -> None:
    """Refuse a configuration whose arrays (``nbytes``, estimated by ``formula``) would not fit.

    The message names ``what`` (the arguments responsible), the estimate and the limit."""
    limit = memory_limit()
    if nbytes > limit:
        raise ConfigError(
            f"{what}: these sizes need about {_gib(nbytes)} ({formula}), more than the limit of "
            f"{_gib(limit)} (docs/limits.md; set {MEMORY_LIMIT_ENV} to change it)"
        )


__all__ = [
    "DEFAULT_MEMORY_LIMIT",
    "MAX_AGENTS",
    "MAX_HORIZON",
    "MEMORY_LIMIT_ENV",
    "ConfigTypeError",
    "check_choice",
    "check_flag",
    "check_horizon",
    "check_int",
    "check_memory",
    "check_probability",
    "check_real",
    "is_integral",
    "is_real",
    "memory_limit",
]
