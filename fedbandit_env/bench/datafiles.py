"""Files are data: the one validator for every file the package reads (docs/reliability.md,
"Files are data").

Reference files, the JSON columns and numbers of a results store, and claims files all pass
through here before anything else looks at them. The rules are the same for each:

* text is UTF-8 (a bad byte is an error naming its offset), and no line is longer than
  :data:`MAX_LINE` characters;
* JSON nests at most :data:`MAX_DEPTH` arrays and objects deep (checked before parsing, so a
  100,000-deep array never reaches the parser's recursion);
* an integer has at most :data:`MAX_INT_DIGITS` digits (Python's own int-from-string limit) and
  a field that holds a count, a seed or a step must also fit in int64; a float is finite
  (``1e999``, ``NaN`` and ``Infinity`` are refused);
* every error is a :class:`FileFormatError` (an input error: exit status 2 on the command line)
  whose message names the file, the cell or row, and the field.

Nothing read here is ever imported, unpickled or run: identifiers found in a file are looked up
in the registry of this process (:func:`fedbandit_env.agent_registry.lookup_agent`).
"""

from __future__ import annotations

import json
import math
import re
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from fedbandit_env.bench.flags import check_flags
from fedbandit_env.errors import FedBanditError

MAX_DEPTH = 32
"""Deepest nesting of JSON arrays and objects accepted in any file (the package's own files
nest at most 4 deep)."""
MAX_LINE = 1 << 22
"""Longest line accepted, in characters (a reference cell is one line of a few kB)."""
MAX_INT_DIGITS = sys.get_int_max_str_digits() if hasattr(sys, "get_int_max_str_digits") else 4300
"""Most digits of a JSON integer: Python's int-from-string limit (4300 by default)."""
INT64 = (-(2**63), 2**63 - 1)

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)


class FileFormatError(FedBanditError):
    """A file (or a store column) is not what the package writes; the message names the file,
    the cell or row, and the field."""


Error = Callable[[str], FedBanditError]


def _where(source: str, where: str, field: str) -> str:
    return ": ".join(part for part in (source, where, field) if part)


def decode_utf8(data: bytes, source: str, error: Error = FileFormatError) -> str:
    """``data`` as UTF-8 text, or an error naming the offset of the first bad byte."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        raise error(
            f"{source}: not UTF-8 text (byte {err.start}, line {line}: {err.reason})"
        ) from None


def check_lines(text: str, source: str, error: Error = FileFormatError) -> None:
    """Refuse a line longer than :data:`MAX_LINE` characters."""
    if len(text) <= MAX_LINE:
        return
    for number, line in enumerate(text.split("\n"), start=1):
        if len(line) > MAX_LINE:
            raise error(
                f"{source}: line {number} is {len(line):,} characters long (at most "
                f"{MAX_LINE:,}); a truncated or corrupted file?"
            )


def nesting_depth(text: str) -> int:
    """The deepest nesting of ``[``/``{`` outside JSON strings (0 for a scalar)."""
    if text.count("[") + text.count("{") <= 1:
        return int("[" in text or "{" in text)
    bare = _STRING.sub('""', text)
    codes = np.frombuffer(bare.encode("utf-8", "surrogatepass"), dtype=np.uint8)
    step = (np.isin(codes, (ord("["), ord("{"))).astype(np.int64)
            - np.isin(codes, (ord("]"), ord("}"))).astype(np.int64))  # fmt: skip
    return int(np.cumsum(step).max(initial=0))


def _parse_int(text: str) -> int:
    digits = len(text.lstrip("-"))
    if digits > MAX_INT_DIGITS:
        raise _NumberError(f"an integer of at most {MAX_INT_DIGITS} digits, got {digits} digits")
    return int(text)


def _parse_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _NumberError(f"a finite number, got {text[:40]}")
    return value


def _parse_constant(text: str) -> float:
    raise _NumberError(f"a finite number, got {text}")


class _NumberError(ValueError):
    pass


def parse_json(
    text: str | bytes,
    source: str,
    where: str = "",
    field: str = "",
    error: Error = FileFormatError,
    max_depth: int = MAX_DEPTH,
) -> Any:
    """Parse JSON under the module's rules; ``source``, ``where`` (cell or row) and ``field``
    locate an error."""
    place = _where(source, where, field)
    if isinstance(text, bytes | bytearray | memoryview):
        text = decode_utf8(bytes(text), place, error)
    if not isinstance(text, str):
        raise error(f"{place}: expected JSON text, got {type(text).__name__}")
    check_lines(text, place, error)
    depth = nesting_depth(text)
    if depth > max_depth:
        raise error(f"{place}: JSON nested {depth} deep (at most {max_depth})")
    try:
        return json.loads(
            text,
            parse_int=_parse_int,
            parse_float=_parse_float,
            parse_constant=_parse_constant,
        )
    except json.JSONDecodeError as err:
        raise error(
            f"{place} is not JSON ({err.msg} at line {err.lineno}, column {err.colno})"
        ) from None
    except _NumberError as err:
        raise error(f"{place}: expected {err}") from None
    except (RecursionError, ValueError) as err:  # defensive: the checks above should catch them
        raise error(f"{place}: not readable JSON ({type(err).__name__}: {err})") from None


def got(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def expect_int(
    value: Any,
    place: str,
    error: Error = FileFormatError,
    low: int = INT64[0],
    high: int = INT64[1],
) -> int:
    """An integer in [low, high] (int64 by default)."""
    if not is_int(value) or not low <= value <= high:
        raise error(f"{place}: expected an integer in [{low}, {high}], got {got(value)}")
    return value


def expect_float(
    value: Any, place: str, error: Error = FileFormatError, allow_inf: bool = False
) -> float:
    """A finite number (``inf`` too with ``allow_inf``); integers are accepted."""
    if not is_number(value):
        raise error(f"{place}: expected a number, got {got(value)}")
    if is_int(value) and not INT64[0] <= value <= INT64[1]:
        raise error(f"{place}: expected a number in float range, got {got(value)}")
    out = float(value)
    if math.isnan(out) or (math.isinf(out) and not allow_inf):
        raise error(f"{place}: expected a finite number, got {got(value)}")
    return out


def expect_numbers(
    values: Any,
    place: str,
    error: Error = FileFormatError,
    length: int | None = None,
    integer: bool = False,
) -> list:
    """A flat list of finite numbers (integers in int64 with ``integer``), of ``length`` if
    given."""
    what = "integers" if integer else "finite numbers"
    if not isinstance(values, list):
        raise error(f"{place}: expected a list of {what}, got {got(values)}")
    if length is not None and len(values) != length:
        raise error(f"{place}: expected {length} {what}, got {len(values)}")
    if _all_fine(values, integer):  # the common case, checked in bulk
        return list(values)
    check = expect_int if integer else expect_float
    return [check(v, f"{place}[{i}]", error) for i, v in enumerate(values)]


def _all_fine(values: list, integer: bool) -> bool:
    """Whether every value is an int64 integer (``integer``) or a finite float, in one pass of
    type checks and one numpy reduction; False sends the caller to the checks that name the
    first bad value."""
    if integer:
        return all(type(v) is int for v in values) and (
            not values or (INT64[0] <= min(values) and max(values) <= INT64[1])
        )
    return all(type(v) is float for v in values) and bool(
        np.isfinite(np.fromiter(values, dtype=np.float64, count=len(values))).all()
    )


def expect_str(value: Any, place: str, error: Error = FileFormatError, limit: int = 4096) -> str:
    if not isinstance(value, str):
        raise error(f"{place}: expected a string, got {got(value)}")
    if len(value) > limit:
        raise error(f"{place}: expected a string of at most {limit} characters, got {len(value)}")
    return value


def expect_object(value: Any, place: str, error: Error = FileFormatError) -> dict:
    if not isinstance(value, dict):
        raise error(f"{place}: expected a JSON object, got {got(value)}")
    return value


def read_text(path: Any, what: str, error: Error = FileFormatError, limit: int = 1 << 30) -> str:
    """A file's text (UTF-8) under the module's rules; ``what`` names the kind of file."""
    from pathlib import Path

    file = Path(path)
    try:
        size = file.stat().st_size
        if size > limit:
            raise error(f"{what}: {file} is {size:,} bytes (at most {limit:,})")
        data = file.read_bytes()
    except FileNotFoundError:
        raise error(f"{what}: {file} does not exist") from None
    except IsADirectoryError:
        raise error(f"{what}: {file} is a directory, not a file") from None
    except OSError as err:
        raise error(f"{what}: {file} is not readable ({err.strerror})") from None
    text = decode_utf8(data, f"{what}: {file}", error)
    check_lines(text, f"{what}: {file}", error)
    return text


# ------------------------------------------------------------------------- results-store rows
_TEXT_LIMITS = {
    "cell_hash": 64,
    "suite": 4096,
    "env_id": 4096,
    "agent_id": 4096,
    "label": 4096,
    "results_version": 4096,
    "env_key": MAX_LINE,
    "config": MAX_LINE,
    "steps": MAX_LINE,
    "curve": MAX_LINE,
}


BACKENDS = ("numpy", "jax")
"""The backends a stored cell may name (:data:`fedbandit_env.bench.backends.BACKENDS`)."""


def check_config(config: Any, place: str, error: Error = FileFormatError) -> dict:
    """A cell config as stored: ``{"env_id", "agent_id", "env_kwargs", "agent_kwargs"}``, and
    optionally ``"backend"`` (one of :data:`BACKENDS`; absent: numpy)."""
    expect_object(config, place, error)
    for key in ("env_id", "agent_id"):
        expect_str(config.get(key), f"{place}.{key}", error)
    for key in ("env_kwargs", "agent_kwargs"):
        expect_object(config.get(key), f"{place}.{key}", error)
    if "backend" in config:
        if config["backend"] not in BACKENDS[1:]:
            raise error(
                f"{place}.backend: expected one of {list(BACKENDS[1:])} (numpy cells name no "
                f"backend), got {got(config['backend'])}"
            )
        if config.get("privacy"):
            raise error(f"{place}.privacy: the privacy wrappers are numpy-only, and this cell "
                        f"runs on the {config['backend']} backend")  # fmt: skip
    return config


def config_backend(config: dict) -> str:
    """The backend of a (checked) cell config: its ``backend``, ``"numpy"`` when absent."""
    return str(config.get("backend", BACKENDS[0]))


def check_steps(steps: Any, place: str, horizon: int, error: Error = FileFormatError) -> list:
    """Checkpoints: increasing integers in [1, horizon], the last one the horizon."""
    steps = expect_numbers(steps, place, error, integer=True)
    if not steps or steps != sorted(set(steps)) or steps[0] < 1 or steps[-1] != horizon:
        raise error(f"{place}: expected increasing steps in [1, {horizon}] ending at the horizon")
    return steps


HASH_DIGITS = 16
"""Hex digits of a cell hash (:attr:`fedbandit_env.bench.suites.Cell.config_hash`)."""
_HEX = re.compile(r"[0-9a-f]+")


def check_cell_hash(value: Any, place: str, error: Error = FileFormatError) -> str:
    """A cell hash as the bench writes it: 16 lowercase hex digits."""
    if not isinstance(value, str) or len(value) != HASH_DIGITS or not _HEX.fullmatch(value):
        raise error(f"{place}: expected {HASH_DIGITS} lowercase hex digits, got {got(value)}")
    return value


def check_store_row(row: dict[str, Any], store: str, error: Error = FileFormatError) -> None:
    """A results-store row (columns by name) is what the store writes: text columns are text,
    numbers are finite numbers of the right kind, the JSON columns parse under the module's
    rules, and the curve has one value per checkpoint. The error names the store, the row
    (cell hash and seed) and the column."""
    where = f"{store}: row (cell {str(row.get('cell_hash'))[:64]!r}, seed {got(row.get('seed'))})"
    for name, limit in _TEXT_LIMITS.items():
        expect_str(row[name], f"{where}: {name}", error, limit)
    check_cell_hash(row["cell_hash"], f"{where}: cell_hash", error)
    flags = parse_json(expect_str(row.get("flags", "{}"), f"{where}: flags", error, 4096), where,
                       field="flags", error=error)  # fmt: skip
    check_flags(flags, f"{where}: flags", error)
    expect_int(row["seed"], f"{where}: seed", error, low=0)
    horizon = expect_int(row["horizon"], f"{where}: horizon", error, low=1)
    for name in ("messages", "floats"):
        expect_int(row[name], f"{where}: {name}", error, low=0)
    for name in ("final_regret_per_agent", "final_regret_network", "cost", "wall_time", "created"):
        expect_float(row[name], f"{where}: {name}", error)
    if expect_float(row.get("compile_time", 0.0), f"{where}: compile_time", error) < 0:
        raise error(f"{where}: compile_time: expected seconds >= 0, got {row['compile_time']}")
    if row["epsilon"] is not None:
        eps = expect_float(row["epsilon"], f"{where}: epsilon", error, allow_inf=True)
        if eps < 0:
            raise error(f"{where}: epsilon: expected a number >= 0, inf or NULL, got {eps}")
    config = parse_json(row["config"], where, field="config", error=error)
    check_config(config, f"{where}: config", error)
    env = expect_object(parse_json(row["env_key"], where, field="env_key", error=error),
                        f"{where}: env_key", error)  # fmt: skip
    expect_str(env.get("env_id"), f"{where}: env_key.env_id", error)
    expect_object(env.get("env_kwargs"), f"{where}: env_key.env_kwargs", error)
    steps = check_steps(parse_json(row["steps"], where, field="steps", error=error),
                        f"{where}: steps", horizon, error)  # fmt: skip
    curve = parse_json(row["curve"], where, field="curve", error=error)
    expect_numbers(curve, f"{where}: curve", error, length=len(steps))
