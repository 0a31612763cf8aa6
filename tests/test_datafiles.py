"""The file validator (fedbandit_env.bench.datafiles): property tests. Whatever the bytes,
reading gives the value or a FileFormatError naming the source, never another exception; JSON
within the bounds parses to what was written; deep nesting, huge numbers, non-finite floats,
bad UTF-8 and long lines are refused."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fedbandit_env.bench import datafiles
from fedbandit_env.bench.datafiles import MAX_DEPTH, MAX_INT_DIGITS, FileFormatError, parse_json

SOURCE = "probe.json"

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=30,
)


def depth(value) -> int:
    if isinstance(value, list):
        return 1 + max((depth(v) for v in value), default=0)
    if isinstance(value, dict):
        return 1 + max((depth(v) for v in value.values()), default=0)
    return 0


@given(values)
@settings(max_examples=300, deadline=None)
def test_json_within_the_bounds_round_trips(value):
    assert depth(value) <= MAX_DEPTH
    assert parse_json(json.dumps(value), SOURCE) == value


@given(st.integers(min_value=1, max_value=100_000), st.sampled_from(["[", "{\"a\":"]))
@settings(max_examples=60, deadline=None)
def test_nesting_is_refused_beyond_the_bound_never_a_recursion_error(n, opener):
    closer = "]" if opener == "[" else "}"
    text = opener * n + "1" + closer * n
    if n <= MAX_DEPTH:
        parse_json(text, SOURCE)
    else:
        with pytest.raises(FileFormatError, match=f"{SOURCE}.*nested {n} deep"):
            parse_json(text, SOURCE)


@given(st.integers(min_value=1, max_value=12_000), st.booleans())
@settings(max_examples=60, deadline=None)
def test_integers_beyond_the_digit_limit_are_refused(digits, negative):
    text = ("-" if negative else "") + "7" * digits
    if digits <= MAX_INT_DIGITS:
        assert parse_json(f"[{text}]", SOURCE) == [int(text)]
    else:
        with pytest.raises(FileFormatError, match=f"{SOURCE}.*at most {MAX_INT_DIGITS} digits"):
            parse_json(f"[{text}]", SOURCE)


@pytest.mark.parametrize("text", ["[NaN]", "[Infinity]", "[-Infinity]", "[1e999]", "[-1e400]"])
def test_non_finite_numbers_are_refused(text):
    with pytest.raises(FileFormatError, match="finite"):
        parse_json(text, SOURCE)


@given(st.binary(max_size=200))
@settings(max_examples=300, deadline=None)
def test_any_bytes_parse_or_give_a_file_format_error(data):
    try:
        parse_json(data, SOURCE)
    except FileFormatError as err:
        assert SOURCE in str(err)


@given(values, st.data())
@settings(max_examples=200, deadline=None)
def test_truncated_text_parses_or_gives_a_file_format_error(value, data):
    text = json.dumps(value)
    cut = data.draw(st.integers(min_value=0, max_value=len(text)))
    try:
        parse_json(text[:cut], SOURCE)
    except FileFormatError as err:
        assert SOURCE in str(err)


@given(st.binary(min_size=1, max_size=50), st.integers(min_value=0, max_value=40))
@settings(max_examples=200, deadline=None)
def test_bad_utf8_names_the_offset(junk, at):
    text = json.dumps({"curve": [1.0, 2.0], "label": "ucb1"}).encode()
    data = text[:at] + b"\xff" + junk + text[at:]
    with pytest.raises(FileFormatError, match=f"{SOURCE}.*(not UTF-8|not JSON)"):
        parse_json(data, SOURCE)


def test_a_line_longer_than_the_bound_is_refused(monkeypatch):
    monkeypatch.setattr(datafiles, "MAX_LINE", 100)
    with pytest.raises(FileFormatError, match="line 2 is 201 characters"):
        parse_json("[\n" + "1," * 100 + "1\n]", SOURCE)


@given(st.lists(st.floats(allow_nan=True, allow_infinity=True) | st.integers() | st.text(max_size=3),
                max_size=6))  # fmt: skip
@settings(max_examples=300, deadline=None)
def test_expect_numbers_accepts_exactly_finite_numbers(items):
    ok = all(
        (isinstance(x, float) and math.isfinite(x))
        or (isinstance(x, int) and -(2**63) <= x < 2**63)
        for x in items
    )
    if ok:
        assert datafiles.expect_numbers(items, "f: cell 0: curve") == [float(x) for x in items]
    else:
        with pytest.raises(FileFormatError, match=r"f: cell 0: curve\[\d+\]"):
            datafiles.expect_numbers(items, "f: cell 0: curve")
