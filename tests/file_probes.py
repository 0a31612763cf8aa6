"""Damaged and malformed files, as a user receives them (docs/reliability.md, "Files are
data"): the cases the tests run through the readers and `benchmarks/probe_files.py` counts.

* :func:`store_damage` — ways a results store gets damaged: truncated at many offsets (a full
  disk), pages zeroed or overwritten, header fields broken, and rows whose columns were edited
  (JSON that is not JSON, numbers stored as text, short or deeply nested curves, huge numbers,
  bad UTF-8).
* :func:`reference_damage` — malformed reference files: deep nesting, huge integers in every
  numeric field, NaN and infinities, bad UTF-8, truncations, long lines, wrong types.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path

PAGE = 4096


def _truncate(at: float | int) -> Callable[[Path], None]:
    def damage(path: Path) -> None:
        data = path.read_bytes()
        cut = at if isinstance(at, int) else int(len(data) * at)
        path.write_bytes(data[:cut])

    return damage


def _overwrite(offset: int | Callable[[int], int], data: bytes) -> Callable[[Path], None]:
    def damage(path: Path) -> None:
        raw = bytearray(path.read_bytes())
        at = offset(len(raw)) if callable(offset) else offset
        raw[at : at + len(data)] = data
        path.write_bytes(bytes(raw[: max(len(raw), at)]))

    return damage


def _sql(statement: str, *params) -> Callable[[Path], None]:
    """An edit made with SQL by someone else's tool (the file stays a valid database)."""

    def damage(path: Path) -> None:
        conn = sqlite3.connect(path)
        conn.execute(statement, params)
        conn.commit()
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.close()
        for suffix in ("-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)

    return damage


DEEP = "[" * 100_000 + "]" * 100_000
HUGE = "9" * 5000


def store_damage(size: int) -> dict[str, Callable[[Path], None]]:
    """Damage cases of a store file of ``size`` bytes (its pages are ``PAGE`` bytes)."""
    pages = max(1, min(size // PAGE, 8))
    cases: dict[str, Callable[[Path], None]] = {}
    for frac in (0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99):
        cases[f"truncated at {frac:.0%}"] = _truncate(frac)
    for cut in (16, 50, 99, 100, 101, PAGE - 1, PAGE, PAGE + 1):
        cases[f"truncated at byte {cut}"] = _truncate(cut)
    cases["truncated one byte short"] = _truncate(size - 1)
    for page in range(pages):
        cases[f"page {page + 1} zeroed"] = _overwrite(page * PAGE, bytes(PAGE))
        cases[f"page {page + 1} overwritten with 0xff"] = _overwrite(page * PAGE, b"\xff" * PAGE)
    cases["page size field 0"] = _overwrite(16, b"\x00\x00")
    cases["page size field 1000"] = _overwrite(16, (1000).to_bytes(2, "big"))
    cases["write version 9"] = _overwrite(18, b"\x09\x09")
    cases["reserved bytes 200"] = _overwrite(20, b"\xc8")
    cases["database size 1 page"] = _overwrite(28, (1).to_bytes(4, "big"))
    cases["schema format 9"] = _overwrite(44, (9).to_bytes(4, "big"))
    cases["text encoding 7"] = _overwrite(56, (7).to_bytes(4, "big"))
    cases["root page of the last page zeroed"] = _overwrite(lambda n: n - PAGE, bytes(PAGE))
    rows = {
        "curve is not JSON": ("UPDATE runs SET curve = ?", "[1, 2,"),
        "config is not JSON": ("UPDATE runs SET config = ?", "{env_id: x}"),
        "steps is not JSON": ("UPDATE runs SET steps = ?", "one, two"),
        "env_key is not JSON": ("UPDATE runs SET env_key = ?", "<env>"),
        "regret stored as text": ("UPDATE runs SET final_regret_per_agent = ?", "lots"),
        "messages stored as text": ("UPDATE runs SET messages = ?", "many"),
        "seed stored as text": (
            "UPDATE runs SET seed = ? WHERE rowid = (SELECT min(rowid) FROM runs)",
            "first",
        ),
        "horizon 0": ("UPDATE runs SET horizon = ?", 0),
        "short curve": ("UPDATE runs SET curve = ?", "[1.0, 2.0]"),
        "deeply nested curve": ("UPDATE runs SET curve = ?", DEEP),
        "5000-digit integer in a curve": ("UPDATE runs SET curve = ?", f"[{HUGE}]"),
        "401-digit integer in steps": ("UPDATE runs SET steps = ?", "[" + "9" * 401 + "]"),
        "NaN in a curve": ("UPDATE runs SET curve = ?", "[NaN]"),
        "1e999 in a curve": ("UPDATE runs SET curve = ?", "[1e999]"),
        "curve is bad UTF-8 bytes": ("UPDATE runs SET curve = ?", b"[\xff\xfe]"),
        "config is a list": ("UPDATE runs SET config = ?", "[1, 2]"),
        "config without agent_kwargs": (
            "UPDATE runs SET config = ?",
            json.dumps({"env_id": "x", "agent_id": "y", "env_kwargs": {}}),
        ),
        "epsilon negative": ("UPDATE runs SET epsilon = ?", -1.0),
        "epsilon stored as text": ("UPDATE runs SET epsilon = ?", "private"),
        "cost stored as the text NaN": ("UPDATE runs SET cost = ?", "NaN"),
        "regret is infinite": ("UPDATE runs SET final_regret_network = ?", float("inf")),
        "agent_id is a number": ("UPDATE runs SET agent_id = ?", 7),
        "label is a blob": ("UPDATE runs SET label = ?", b"\x00\x01"),
        "steps not increasing": ("UPDATE runs SET steps = ?", "[3, 2, 1]"),
        "results_version is a blob": ("UPDATE runs SET results_version = ?", b"v\x00"),
        "runs table dropped": ("DROP TABLE runs",),
        "a column dropped": ("ALTER TABLE runs DROP COLUMN curve",),
    }
    for name, (statement, *params) in rows.items():
        cases[name] = _sql(statement, *params)
    return cases


def reference_damage(text: str) -> dict[str, str | bytes]:
    """Malformed versions of a valid reference file's ``text``."""
    header, _, rest = text.partition("\n")
    first, _, tail = rest.partition("\n")
    cell = json.loads(first.rstrip(","))

    def with_cell(**changes: str) -> str:
        raw = json.dumps(cell, sort_keys=True, separators=(",", ":"))
        for key, value in changes.items():
            old = json.dumps(cell[key], separators=(",", ":"))
            raw = raw.replace(f'"{key}":{old}', f'"{key}":{value}', 1)
        return f"{header}\n{raw},\n{tail}"

    n = len(cell["seeds"])
    curve = json.dumps(cell["curves"][0], separators=(",", ":"))
    return {
        "arrays nested 100,000 deep": f"{header}\n{DEEP},\n{rest}",
        "a 5,000-digit integer": with_cell(seeds=f"[{HUGE}]"),
        "401-digit integers in messages": with_cell(messages=json.dumps([10**400] * n)),
        "401-digit integers in a curve": with_cell(
            curves="[" + ",".join([curve.replace("[", "[" + "9" * 401 + ",", 1)] * n) + "]"
        ),
        "20-digit integers in floats": with_cell(floats=json.dumps([10**19] * n)),
        "NaN in a final regret": with_cell(final_regret_per_agent="[" + ",".join(["NaN"] * n) + "]"),
        "Infinity in a cost": with_cell(cost="[" + ",".join(["Infinity"] * n) + "]"),
        "1e999 in a curve": with_cell(curves="[" + ",".join(["[1e999]"] * n) + "]"),
        "bad UTF-8": text.encode()[:200] + b"\xff\xfe" + text.encode()[200:],
        "truncated in the middle": text[: len(text) // 2],
        "truncated in a number": text[: text.index("0.", 500) + 3],
        "a 5-million-character line": f"{header}\n" + "[" + "1," * 2_500_000 + "1],\n" + rest,
        "empty file": "",
        "not JSON": "reference results\n",
        "seeds as text": with_cell(seeds='"0-9"'),
        "negative messages": with_cell(messages=json.dumps([-1] * n)),
        "a curve per seed missing": with_cell(curves=json.dumps(cell["curves"][:-1])),
        "horizon as a float": text.replace('"horizon":', '"horizon":1.5,"x":', 1),
        "cells is an object": text.replace('"cells": [', '"cells": {"a": [', 1),
        "a cell is a number": f"{header}\n42,\n{rest}",
    }
