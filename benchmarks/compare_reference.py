"""Agreement of two reference files, cell by cell: after a change that moves results (a bumped
results version), the new numbers must agree with the old ones within 3 standard errors.

    python benchmarks/compare_reference.py OLD.json NEW.json [--json PATH]

For every cell (matched by suite, label and cell hash) whose results version differs between the files,
prints the mean final network regret of each file over its seeds, the standard error of the
difference of the two means (independent seeds: ``sqrt(se_old^2 + se_new^2)``; paired seeds
share the environment's draws, so this is conservative) and the difference in those standard
errors, with a verdict (``agree`` when within 3). Cells whose version is the same must be
identical and are only counted. Exits 1 when a bumped cell disagrees.
"""

from __future__ import annotations

import argparse
import json
import math
import sys

import record


def _stats(values: list[float]) -> tuple[float, float]:
    n = len(values)
    mean = sum(values) / n
    if n < 2:
        return mean, math.inf
    var = sum((v - mean) ** 2 for v in values) / (n - 1)
    return mean, math.sqrt(var / n)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("old")
    parser.add_argument("new")
    record.add_json_option(parser)
    args = parser.parse_args()
    rec = record.start(__file__, args)
    old = {(c["suite"], c["label"], c["cell_hash"]): c for c in json.load(open(args.old))["cells"]}
    new = {(c["suite"], c["label"], c["cell_hash"]): c for c in json.load(open(args.new))["cells"]}
    rows, same, changed_same_version, worst = [], 0, [], 0.0
    for key in sorted(old.keys() & new.keys()):
        a, b = old[key], new[key]
        if a["results_version"] == b["results_version"]:
            same += 1
            if a["final_regret_network"] != b["final_regret_network"]:
                changed_same_version.append(key)
            continue
        ma, sa = _stats(a["final_regret_network"])
        mb, sb = _stats(b["final_regret_network"])
        se = math.sqrt(sa**2 + sb**2)
        z = (mb - ma) / se if se > 0 else (0.0 if mb == ma else math.inf)
        worst = max(worst, abs(z))
        rows.append(
            {
                "suite": key[0],
                "cell": key[1],
                "old version": a["results_version"].split(" / learner ")[-1],
                "new version": b["results_version"].split(" / learner ")[-1],
                "old mean": round(ma, 3),
                "new mean": round(mb, 3),
                "se of difference": round(se, 3),
                "difference / se": round(z, 2),
                "verdict": "agree" if abs(z) <= 3 else "DISAGREE",
            }
        )
    print(
        f"cells in both files: {len(old.keys() & new.keys())}; same version: {same}; bumped: {len(rows)}"
    )
    if changed_same_version:
        print(f"cells with the same version but different numbers: {changed_same_version}")
    if rows:
        print("| " + " | ".join(rows[0]) + " |")
        print("|" + "---|" * len(rows[0]))
        for r in rows:
            print("| " + " | ".join(str(v) for v in r.values()) + " |")
    print(f"largest |difference| / se: {worst:.2f}")
    rec.figure("largest |difference| / se", worst)
    rec.figure("cells with the same version but different numbers", len(changed_same_version))
    bad = [r for r in rows if r["verdict"] != "agree"] or changed_same_version
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
