"""The gossip paper's real-data environment: UCI "Diabetes 130-US hospitals" (Zhu et al.,
"Federated Bandit: A Gossiping Approach", Sec. 5.2 and Fig. 2(c); docs/gossip.md).

The data are never downloaded: pass the path of ``diabetic_data.csv`` or of its gzip copy
``diabetic_data.csv.gz`` as ``data_path=``, or keep it in the data folder named by the
``FEDBANDIT_DATA`` environment variable, as ``diabetes-130-us/diabetic_data.csv.gz``
(:mod:`fedbandit_env.datasets.files`). Processing follows the paper's Sec. 5.2:

* reward 1 iff ``readmitted == ">30"`` (``reward_map="paper"``; ``"no_record_positive"`` is the
  opposite mapping the paper's section 5.2 rejects: reward 1 unless ``readmitted == "<30"``);
  records with any medication ``Up``/``Down`` are dropped;
* arms 1-4: records in which some medication of group g is ``Steady`` (pools may overlap;
  tolazamide in group 4, citoglipton ignored — docs/gossip.md); arm 5: records in which
  every medication column is ``No``; ``exclusive_arms=True`` keeps only records whose steady
  medications all fall in one group;
* three hospitals: contiguous thirds in file order (``split="contiguous"``, the paper's bias) or
  a seeded random split (``split="random"``);
* agent i pulling arm k draws a record with replacement from its own pool, which is exactly a
  Bernoulli reward with the pool's mean label, so the environment is the heterogeneous family with
  ``means`` = the 3 x 5 matrix of pool means; the global mean is their unweighted average.
"""

from __future__ import annotations

import csv
import functools
import gzip
import io
import os
from pathlib import Path
from typing import Any

import numpy as np

from fedbandit_env.datasets.files import DATA_VAR, DIABETES, find_data_file
from fedbandit_env.errors import ConfigError
from fedbandit_env.validation import ConfigTypeError, check_int

GROUPS: tuple[tuple[str, ...], ...] = (
    ("insulin",),
    ("metformin",),
    ("repaglinide", "glipizide", "rosiglitazone", "acarbose", "miglitol", "troglitazone"),
    (
        "nateglinide",
        "chlorpropamide",
        "glyburide",
        "examide",
        "glimepiride",
        "acetohexamide",
        "tolbutamide",
        "pioglitazone",
        "sitagliptin",
        "glyburide-metformin",
        "glipizide-metformin",
        "glimepiride-pioglitazone",
        "metformin-rosiglitazone",
        "metformin-pioglitazone",
        "tolazamide",
    ),
)
IGNORED = ("citoglipton",)
ALL_MEDICATIONS = (
    "metformin",
    "repaglinide",
    "nateglinide",
    "chlorpropamide",
    "glimepiride",
    "acetohexamide",
    "glipizide",
    "glyburide",
    "tolbutamide",
    "pioglitazone",
    "rosiglitazone",
    "acarbose",
    "miglitol",
    "troglitazone",
    "tolazamide",
    "examide",
    "citoglipton",
    "insulin",
    "glyburide-metformin",
    "glipizide-metformin",
    "glimepiride-pioglitazone",
    "metformin-rosiglitazone",
    "metformin-pioglitazone",
)
NUM_HOSPITALS, NUM_ARMS = 3, 5
REWARD_MAPS = ("paper", "no_record_positive")


def resolve_path(data_path: str | os.PathLike | None) -> Path:
    if data_path is not None and not isinstance(data_path, str | os.PathLike):
        raise ConfigTypeError(
            f"data_path: expected the path (str or os.PathLike) of diabetic_data.csv, "
            f"got {type(data_path).__name__} {data_path!r}"
        )
    path = data_path or find_data_file(DIABETES)
    if not path or not Path(path).is_file():
        raise ConfigError(
            f"data_path: expected the path of diabetic_data.csv (or .csv.gz), got {path!r} "
            "(file not found). "
            "Download 'Diabetes 130-US hospitals for years 1999-2008' from the UCI Machine "
            f"Learning Repository and pass data_path=... or set {DATA_VAR} to the folder that "
            f"holds {DIABETES}; nothing is downloaded."
        )
    return Path(path)


def _label(readmitted: str, reward_map: str) -> float:
    if reward_map == "paper":  # ">30" works; "<30" and no record do not (section 5.2)
        return 1.0 if readmitted == ">30" else 0.0
    return 0.0 if readmitted == "<30" else 1.0  # no record counted as a success


def _check_reward_map(reward_map: Any) -> str:
    if not isinstance(reward_map, str) or reward_map not in REWARD_MAPS:
        raise ConfigError(f"reward_map: expected one of {REWARD_MAPS}, got {reward_map!r}")
    return reward_map


@functools.lru_cache(maxsize=2)
def _read(path: str, mtime_ns: int, size: int) -> tuple[dict[str, str], ...]:
    """The records of a .csv or .csv.gz file (cached per file version)."""
    del mtime_ns, size  # cache key only
    if path.endswith(".gz"):
        with gzip.open(path, "rb") as raw:
            text = io.TextIOWrapper(raw, newline="")
            return tuple(csv.DictReader(text))
    with open(path, newline="") as f:
        return tuple(csv.DictReader(f))


def read_records(data_path: str | os.PathLike | None = None) -> tuple[dict[str, str], ...]:
    """All records of diabetic_data.csv(.gz) as dicts (column -> string), in file order."""
    path = resolve_path(data_path)
    stat = path.stat()
    rows = _read(str(path), stat.st_mtime_ns, stat.st_size)
    required = {"readmitted", "insulin", "metformin"}
    if not rows or not required <= set(rows[0]):
        raise ConfigError(
            f"data_path: {path} lacks the columns {sorted(required)} of diabetic_data.csv"
        )
    return rows


def _arm_labels(
    rows: list[dict[str, str]], exclusive: bool, reward_map: str = "paper"
) -> tuple[np.ndarray, np.ndarray]:
    """(records x arms) membership and the 0/1 labels of the usable records."""
    meds = [m for m in ALL_MEDICATIONS if m not in IGNORED and m in rows[0]]
    member, labels = [], []
    for row in rows:
        values = [row[m] for m in meds]
        if any(v in ("Up", "Down") for v in values):
            continue
        steady = [any(row.get(m) == "Steady" for m in group if m in row) for group in GROUPS]
        none = all(v == "No" for v in values)
        if exclusive and sum(steady) > 1:
            continue
        member.append([*steady, none])
        labels.append(_label(row["readmitted"], reward_map))
    return np.array(member, dtype=bool).reshape(-1, NUM_ARMS), np.array(labels)


def load_diabetes_pools(
    data_path: str | os.PathLike | None = None,
    split: str = "contiguous",
    exclusive_arms: bool = False,
    seed: int = 0,
    reward_map: str = "paper",
) -> tuple[np.ndarray, np.ndarray]:
    """Pool means and pool sizes, both 3 x 5 (hospital i, arm k), of the paper's Sec. 5.2 (module docstring)."""
    if not isinstance(split, str) or split not in ("contiguous", "random"):
        raise ConfigError(f"split: expected 'contiguous' or 'random', got {split!r}")
    if not isinstance(exclusive_arms, bool | np.bool_):
        raise ConfigTypeError(f"exclusive_arms: expected True or False, got {exclusive_arms!r}")
    seed = check_int("seed", seed, minimum=0)
    reward_map = _check_reward_map(reward_map)
    rows = read_records(data_path)
    order = np.arange(len(rows))
    if split == "random":
        order = np.random.default_rng(seed).permutation(len(rows))
    means = np.zeros((NUM_HOSPITALS, NUM_ARMS))
    sizes = np.zeros((NUM_HOSPITALS, NUM_ARMS), dtype=np.int64)
    for h, part in enumerate(np.array_split(order, NUM_HOSPITALS)):
        member, labels = _arm_labels([rows[i] for i in part], exclusive_arms, reward_map)
        counts = member.sum(axis=0)
        if np.any(counts == 0):
            empty = [k + 1 for k in np.nonzero(counts == 0)[0]]
            raise ConfigError(f"data_path: hospital {h} has no record for arm(s) {empty}")
        means[h] = (member * labels[:, None]).sum(axis=0) / counts
        sizes[h] = counts
    return means, sizes


def load_diabetes_means(
    data_path: str | os.PathLike | None = None,
    split: str = "contiguous",
    exclusive_arms: bool = False,
    seed: int = 0,
    reward_map: str = "paper",
) -> np.ndarray:
    """The 3 x 5 matrix of pool means (hospital i, arm k) of the paper's Sec. 5.2 (module docstring)."""
    return load_diabetes_pools(data_path, split, exclusive_arms, seed, reward_map)[0]


def medication_effects(
    data_path: str | os.PathLike | None = None, reward_map: str = "paper"
) -> dict[str, tuple[float, int]]:
    """Section 5.2's per-medication view on the whole file: for each medication, the mean reward
    of the records (no ``Up``/``Down`` anywhere) in which it is ``Steady``, minus the mean reward
    of the records with no medication at all, and the number of such records. A negative
    difference is what the paper calls a medication with a negative effect."""
    reward_map = _check_reward_map(reward_map)
    rows = read_records(data_path)
    meds = [m for m in ALL_MEDICATIONS if m in rows[0]]
    steady_sum = dict.fromkeys(meds, 0.0)
    steady_n = dict.fromkeys(meds, 0)
    none_sum, none_n = 0.0, 0
    for row in rows:
        values = [row[m] for m in meds]
        if any(v in ("Up", "Down") for v in values):
            continue
        y = _label(row["readmitted"], reward_map)
        if all(v == "No" for v in values):
            none_sum += y
            none_n += 1
            continue
        for m, v in zip(meds, values, strict=True):
            if v == "Steady":
                steady_sum[m] += y
                steady_n[m] += 1
    base = none_sum / none_n if none_n else float("nan")
    return {
        m: (steady_sum[m] / steady_n[m] - base if steady_n[m] else float("nan"), steady_n[m])
        for m in meds
    }


def env_kwargs(
    data_path, split, exclusive_arms, seed, kwargs, reward_map: str = "paper"
) -> dict[str, Any]:
    """The engine keyword arguments of ``FedBandit/DiabetesHospitals-v0``."""
    means = load_diabetes_means(data_path, split, exclusive_arms, seed, reward_map)
    defaults = {
        "horizon": 1_000_000 + NUM_ARMS,
        "topology": "complete",
        "channels": ("neighbors", "gossip"),
    }
    return {**defaults, **kwargs, "family": "heterogeneous", "means": means, "reward": "bernoulli"}
