"""A learner's params as traced arguments of its compiled rollout (docs/jax.md, "Compiling once").

A learner's params (``make_params(facts)``, docs/jax.md, "Learners as pure functions") are a
frozen dataclass of its hyperparameters and derived constants. The rollout passes their finite
float fields, at any depth of nested dataclasses (a configuration, a counter's params; a plain
object of this project that params hold, such as a counter, is walked through its attributes), as
float32 scalars, arguments of the compiled program rather than constants compiled into it: the
program is keyed by everything else (:func:`split`'s template), so runs whose params differ only
in such floats (a sweep over epsilon, a confidence level, a noise scale) share one compile.

An int field is traced too where its dataclass names it in a ``TRACED_INTS`` class attribute
(ByzRes-UCB's ``f``, which only enters comparisons: a sweep over f shares a program), as an int32
scalar; a field named in ``REPORT_ONLY`` (a row's notes) is left out of the program and its key
(an :class:`Unread` stands in: reading it while tracing raises, and the program compiles with its
params as constants).

What stays a compile-time constant: other ints and bools (they size arrays and choose branches),
strings, None, arrays, tuples (of sizes, of bounds), and floats that are 0 or not finite
(``inf`` epsilon is "no privacy", a 0 scale "no noise": branches, which code tests with
:func:`fedbandit_env.xp.is_inf` and :func:`fedbandit_env.xp.is_zero`). A learner whose ``init`` or ``act`` uses one of its float params in Python (a branch,
``math.log``, a numpy call, a shape) cannot be traced that way; the rollout then compiles its
params in as before (:func:`fedbandit_env.jax.rollout.compiled_program`), and
:data:`TRACE_ERRORS` are what tracing raises then.
"""

from __future__ import annotations

import copy
import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

FLOAT32_MAX = float(np.finfo(np.float32).max)
FLOAT32_TINY = float(np.finfo(np.float32).tiny)

TRACE_ERRORS = (TypeError, ValueError)
"""What tracing a learner with traced float params raises when it uses one of them in Python:
JAX's concretization and conversion errors (``ConcretizationTypeError``,
``TracerBoolConversionError``, ``TracerArrayConversionError``, ``TracerIntegerConversionError``)
are all ``TypeError``s, as is an unhashable tracer; a check of a value (the project's
``ConfigError`` and ``PrivacyError``) is a ``ValueError``. The rollout then traces the learner
with its params as constants, where a genuine error raises again."""


@dataclass(frozen=True)
class Slot:
    """Where the template holds traced value number ``index`` (its pickle keys the program)."""

    index: int


def traceable(value: Any) -> bool:
    """Whether a field's value is traced: a Python or numpy float (not a bool), neither 0 nor
    infinite nor NaN (those choose branches: no noise, no privacy), that float32 holds without
    overflow or flushing to zero."""
    if isinstance(value, bool | np.bool_) or not isinstance(value, float | np.floating):
        return False
    size = abs(float(value))
    return math.isfinite(size) and FLOAT32_TINY <= size <= FLOAT32_MAX


OWN_PACKAGES = ("agents", "baselines", "fedbandit_env")
"""Plain objects of these packages held by params (a counter holding its own params) are
walked through their attributes, as dataclasses are."""


def _is_params(value: Any) -> bool:
    return dataclasses.is_dataclass(value) and not isinstance(value, type)


def _is_own_object(value: Any) -> bool:
    kind = type(value)
    return (
        not isinstance(value, type)
        and kind.__module__.split(".", 1)[0] in OWN_PACKAGES
        and hasattr(value, "__dict__")
        and not dataclasses.is_dataclass(value)
    )


def _fields(obj: Any) -> list[str]:
    """The names of the attributes walked: a dataclass's fields, a plain object's ``vars``."""
    if _is_params(obj):
        return [f.name for f in dataclasses.fields(obj) if hasattr(obj, f.name)]
    return list(vars(obj))


def _traced_int(value: Any) -> bool:
    """An int (not a bool) that int32 holds."""
    ok = isinstance(value, int | np.integer) and not isinstance(value, bool | np.bool_)
    return ok and -(2**31) <= int(value) < 2**31


def _replace_floats(obj: Any, mark: Callable[[Any, str], Any], where: str = "") -> Any:
    """``obj`` with each traced float (:func:`traceable`), and each int of a field its class
    names in ``TRACED_INTS``, replaced by ``mark(value, path)``, and each field named in
    ``REPORT_ONLY`` by an :class:`Unread`, through dataclasses and the plain objects of
    :data:`OWN_PACKAGES` (copied, no ``__init__`` runs) and dicts; an object with nothing
    replaced is returned as is."""
    if traceable(obj):
        return mark(float(obj), where)
    if type(obj) is dict:
        items = {k: _replace_floats(v, mark, f"{where}[{k!r}]") for k, v in obj.items()}
        return obj if all(items[k] is v for k, v in obj.items()) else items
    if not (_is_params(obj) or _is_own_object(obj)):
        return obj
    changed = {}
    ints = getattr(type(obj), "TRACED_INTS", ())
    report = getattr(type(obj), "REPORT_ONLY", ())
    for name in _fields(obj):
        old = getattr(obj, name)
        if name in report:
            changed[name] = Unread(f"{where}.{name}".lstrip("."))
            continue
        if name in ints and _traced_int(old):
            changed[name] = mark(int(old), f"{where}.{name}")
            continue
        new = _replace_floats(old, mark, f"{where}.{name}")
        if new is not old:
            changed[name] = new
    if not changed:
        return obj
    out = copy.copy(obj)
    for name, value in changed.items():
        object.__setattr__(out, name, value)
    return out


def split(params: Any) -> tuple[Any, tuple[float | int, ...]]:
    """``(template, values)``: ``params`` with each traced float and int replaced by its
    :class:`Slot`, and those values in slot order. Params that hold no traced value give
    ``(params, ())``; ``params`` itself is unchanged."""
    floats: list[float | int] = []

    def mark(value: float | int, where: str) -> Slot:
        floats.append(value)
        return Slot(len(floats) - 1)

    return _replace_floats(params, mark), tuple(floats)


def fill(template: Any, values: Any) -> Any:
    """The params of ``template`` with slot ``i`` holding ``values[i]`` (inside the compiled
    program: a float32 or int32 scalar tracer)."""
    if type(template) is Slot:
        return values[template.index]
    if type(template) is dict:
        return {k: fill(v, values) for k, v in template.items()}
    if not (_is_params(template) or _is_own_object(template)):
        return template
    out = copy.copy(template)
    for name in _fields(template):
        object.__setattr__(out, name, fill(getattr(template, name), values))
    return out


class Unread:
    """Stands for a float attribute of the learner object while its rollout is traced with
    traced params: any use (arithmetic, comparison, conversion, an array of it) raises a
    ``TypeError``, so a learner whose ``init`` or ``act`` reads its own float settings rather
    than its params is compiled with its params as constants (a program shared across such
    settings would be wrong)."""

    def __init__(self, where: str) -> None:
        self.where = where

    def _refuse(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError(f"learner attribute {self.where} read while tracing with traced params")

    def __repr__(self) -> str:
        return f"Unread({self.where})"

    __float__ = __int__ = __index__ = __bool__ = __complex__ = __array__ = _refuse
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _refuse
    __truediv__ = __rtruediv__ = __floordiv__ = __rfloordiv__ = __mod__ = __rmod__ = _refuse
    __pow__ = __rpow__ = __neg__ = __pos__ = __abs__ = __round__ = _refuse
    __lt__ = __le__ = __gt__ = __ge__ = __eq__ = __ne__ = _refuse
    __hash__ = object.__hash__


def learner_template(learner: Any) -> tuple[Any, Any]:
    """``(copy, key)``: a shallow copy of ``learner`` whose float settings (its attributes, as
    :func:`split` walks them) are :class:`Unread`, and the attributes with those floats replaced
    by a placeholder, what a program traced from the copy depends on. A learner without a
    ``__dict__`` is returned as is, keyed by itself."""
    if not hasattr(learner, "__dict__"):
        return learner, learner
    attrs = vars(learner)
    key = _replace_floats(attrs, lambda value, where: "float")
    unread = _replace_floats(attrs, lambda value, where: Unread(where.lstrip(".") or "?"))
    if unread is attrs:
        return learner, attrs
    stand_in = copy.copy(learner)
    stand_in.__dict__.update(unread)
    return stand_in, key


def values_of(floats: tuple[float | int, ...]) -> tuple[np.ndarray, ...]:
    """The program's argument for the traced values: a float32 scalar for a float, an int32
    scalar for an int."""
    return tuple(np.int32(x) if isinstance(x, int) else np.float32(x) for x in floats)
