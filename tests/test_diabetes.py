"""The gossip paper's real-data environment (Zhu et al., Sec. 5.2 and Fig. 2(c); docs/gossip.md)
on a shipped synthetic CSV with the real schema, and on the UCI file where the data folder
(``FEDBANDIT_DATA``, docs/reproductions.md) holds it."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

import fedbandit_env
from fedbandit_env import ConfigError
from fedbandit_env.bench import evaluate
from fedbandit_env.datasets.diabetes import load_diabetes_means
from fedbandit_env.datasets.files import DIABETES
from tests.helpers import data_file_or_skip

SAMPLE = Path(__file__).parent / "data" / "diabetic_data_sample.csv"
ENV = "FedBandit/DiabetesHospitals-v0"


def _expected_means(exclusive: bool) -> np.ndarray:
    """The pool means recomputed by hand from the CSV (contiguous thirds)."""
    rows = list(csv.DictReader(SAMPLE.open()))
    groups = [
        {"insulin"},
        {"metformin"},
        {"glipizide", "repaglinide"},
        {"glyburide", "pioglitazone", "tolazamide"},
    ]
    meds = [c for c in rows[0] if c in set().union(*groups) | {"nateglinide", "acarbose"}]
    out = np.zeros((3, 5))
    for h, part in enumerate(np.array_split(np.arange(len(rows)), 3)):
        pools = [[] for _ in range(5)]
        for i in part:
            r = rows[i]
            if any(r[c] in ("Up", "Down") for c in r if c in meds or c == "insulin"):
                continue
            steady = [any(r[m] == "Steady" for m in g) for g in groups]
            if exclusive and sum(steady) > 1:
                continue
            label = 1.0 if r["readmitted"] == ">30" else 0.0
            for k in range(4):
                if steady[k]:
                    pools[k].append(label)
            if not any(steady) and all(r[c] == "No" for c in meds):
                pools[4].append(label)
        out[h] = [np.mean(p) for p in pools]
    return out


@pytest.mark.parametrize("exclusive", [False, True])
def test_pool_means_match_a_hand_computation(exclusive):
    means = load_diabetes_means(SAMPLE, exclusive_arms=exclusive)
    assert means.shape == (3, 5)
    assert np.allclose(means, _expected_means(exclusive))


def test_env_uses_the_pool_means_and_local_best_arms_differ():
    env = fedbandit_env.make(ENV, data_path=str(SAMPLE), horizon=20)
    env.reset(seed=0)
    engine = env.unwrapped.engine
    assert np.allclose(engine.means[0], load_diabetes_means(SAMPLE))
    assert np.allclose(engine.global_expected[0], load_diabetes_means(SAMPLE).mean(axis=0))
    # the local best arms differ across hospitals (the paper's Sec. 5.2), and one hospital's local
    # best is not the global best, so no hospital can find it alone. Sample means per hospital:
    # best arm 2 (0.8), arms 2 and 3 tied (0.6), arm 3 (0.6); global best arm 3 (0.6 vs 0.533)
    local = engine.means[0]
    best_sets = [set(np.flatnonzero(row == row.max())) for row in local]
    assert best_sets == [{2}, {2, 3}, {3}]
    assert best_sets[0].isdisjoint(best_sets[2])
    global_best = int(np.argmax(engine.global_expected[0]))
    assert global_best == 3 and global_best not in best_sets[0]
    res = evaluate(ENV, "gossip_ucb", runs=2, env_kwargs={"data_path": str(SAMPLE), "horizon": 400})
    assert res.regret_per_agent.shape[0] == 2


def test_random_split_differs_and_is_seeded():
    a = load_diabetes_means(SAMPLE, split="random", seed=1)
    b = load_diabetes_means(SAMPLE, split="random", seed=1)
    assert np.array_equal(a, b) and not np.array_equal(a, load_diabetes_means(SAMPLE))


def test_missing_file_gives_a_clear_error(monkeypatch):
    monkeypatch.delenv("FEDBANDIT_DATA", raising=False)
    with pytest.raises(
        ConfigError, match=r"data_path: expected the path of diabetic_data.csv.*UCI"
    ):
        fedbandit_env.make(ENV)
    with pytest.raises(ConfigError, match=r"split: expected 'contiguous' or 'random'"):
        fedbandit_env.make(ENV, data_path=str(SAMPLE), split="shuffled")


# ------------------------------------------------------------ the UCI file (Fig. 2(c))

SHARED, needs_shared = data_file_or_skip(DIABETES)


def _pandas_pools(reward_map: str) -> tuple[np.ndarray, np.ndarray]:
    """Pool sizes and means per (hospital, arm) recomputed with pandas, vectorized, from the
    gzip file (contiguous thirds), independently of the loader's csv loop."""
    import pandas as pd

    from fedbandit_env.datasets.diabetes import ALL_MEDICATIONS, GROUPS, IGNORED

    df = pd.read_csv(SHARED, compression="gzip", dtype=str, keep_default_na=False)
    meds = [m for m in ALL_MEDICATIONS if m not in IGNORED and m in df.columns]
    assert len(df) == 101_766
    # the file has no "sitagliptin" column (the paper lists it in arm 4); its "citoglipton"
    # column, ignored by the loader, holds no Steady record
    assert "sitagliptin" not in df.columns and not df["citoglipton"].eq("Steady").any()
    y = (df["readmitted"] == ">30") if reward_map == "paper" else (df["readmitted"] != "<30")
    keep = ~df[meds].isin(["Up", "Down"]).any(axis=1)
    member = [df[[m for m in g if m in df.columns]].eq("Steady").any(axis=1) for g in GROUPS]
    member.append(df[meds].eq("No").all(axis=1))
    sizes, means = np.zeros((3, 5), dtype=np.int64), np.zeros((3, 5))
    for h, part in enumerate(np.array_split(np.arange(len(df)), 3)):
        rows = np.zeros(len(df), dtype=bool)
        rows[part] = True
        for k, mem in enumerate(member):
            sel = rows & keep.to_numpy() & mem.to_numpy()
            sizes[h, k] = sel.sum()
            means[h, k] = y.to_numpy()[sel].mean()
    return sizes, means


@needs_shared
@pytest.mark.parametrize("reward_map", ["paper", "no_record_positive"])
def test_shared_file_pools_match_an_independent_count(reward_map):
    """The loader reads the .csv.gz: per-arm record counts (arm 1 = steady insulin: 29,064 over
    the three hospitals, arm 2 = steady metformin: 14,184, arm 5 = no medication: 23,403) and
    the reward mapping agree with a pandas recount."""
    from fedbandit_env.datasets.diabetes import load_diabetes_pools, read_records

    assert len(read_records(SHARED)) == 101_766
    means, sizes = load_diabetes_pools(SHARED, reward_map=reward_map)
    ref_sizes, ref_means = _pandas_pools(reward_map)
    assert np.array_equal(sizes, ref_sizes)
    assert np.allclose(means, ref_means, rtol=0, atol=1e-12)
    assert sizes.sum(axis=0).tolist()[:2] == [29_064, 14_184] and sizes[:, 4].sum() == 23_403
    # the opposite mapping counts "no record" as a success: every pool mean rises
    if reward_map == "no_record_positive":
        assert np.all(means > load_diabetes_pools(SHARED)[0])


@pytest.mark.slow
@needs_shared
def test_shared_file_small_run_and_plain_csv(tmp_path):
    """A small Fed_UCB run on the hospital environment from the .csv.gz, and the same means
    from an uncompressed copy (.csv)."""
    import gzip
    import shutil

    plain = tmp_path / "diabetic_data.csv"
    with gzip.open(SHARED, "rb") as src, plain.open("wb") as dst:
        shutil.copyfileobj(src, dst)
    kw = {"split": "random", "seed": 0}
    assert np.array_equal(load_diabetes_means(SHARED, **kw), load_diabetes_means(plain, **kw))
    res = evaluate(
        ENV,
        "gossip_fed_ucb",
        runs=2,
        env_kwargs={"data_path": str(SHARED), "horizon": 205, **kw},
        agent_kwargs={"epsilon": 1.0},
    )
    assert res.regret_per_agent.shape[0] == 2 and np.all(res.regret_per_agent[:, -1] >= 0)


def test_the_data_folder_resolver(tmp_path, monkeypatch):
    """One resolver finds every data set: --data, else $FEDBANDIT_DATA; a clear error naming the
    variable and the expected file otherwise; a plain .csv stands in for a missing .csv.gz."""
    from fedbandit_env.datasets.files import DATA_VAR, data_file

    monkeypatch.delenv(DATA_VAR, raising=False)
    with pytest.raises(ConfigError, match=f"no data folder; set {DATA_VAR}"):
        data_file(DIABETES)
    with pytest.raises(ConfigError, match=f"expected {DIABETES} in the data folder"):
        data_file(DIABETES, tmp_path)
    plain = tmp_path / "diabetes-130-us" / "diabetic_data.csv"
    plain.parent.mkdir()
    plain.write_text(SAMPLE.read_text())
    monkeypatch.setenv(DATA_VAR, str(tmp_path))
    assert data_file(DIABETES) == plain
    # the environment finds the file through the variable when no data_path is given
    env = fedbandit_env.make(ENV, horizon=20)
    env.reset(seed=0)
    assert np.allclose(env.unwrapped.engine.means[0], load_diabetes_means(SAMPLE))
    monkeypatch.setenv(DATA_VAR, str(tmp_path / "missing"))
    with pytest.raises(ConfigError, match=f"{DATA_VAR} = .* is not a folder"):
        data_file(DIABETES)
