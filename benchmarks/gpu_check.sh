#!/usr/bin/env bash
# One prepared check of the JAX core on a GPU machine (docs/jax.md, "A GPU machine"), at most
# 8 minutes, everything written under $OUT:
#   device.txt               what JAX sees
#   bench_jax_anchor.json    the ports against their tight anchors at GPU sizes (ucb1 and
#                            gossip_fed_ucb at B = 10^4; linucb and fed_lin_ucb at B = 100 runs of
#                            M = 100 agents), bytes and FLOPs per agent-step (+ .txt as printed)
#   linear-1B-slice.json     the linear paper's Fig. 1B at its own grid (M = 100, the three sync
#                            rules, private and not), T = 20,000, 100 runs: its claims file, whose
#                            meta holds the estimated time of the paper's full scale (+ .txt)
#   estimates.json           that estimate, and each timed port's agent-steps/s
#
#   OUT=/tmp/out bash benchmarks/gpu_check.sh                           # GPU sizes
#   GPU_CHECK_SCALE=small OUT=/tmp/out bash benchmarks/gpu_check.sh     # CPU (CI): every stage,
#                                   small (ucb1's pair and sweep, the CI grid of Fig. 1B)
#
# The machine has no network: JAX is the one installed there. The package is installed from the
# checkout; a dependency the machine lacks is taken from the wheels in $GPU_CHECK_WHEELS
# (default benchmarks/wheels, carried with the checkout; `pip download` them beforehand).
set -euo pipefail
cd "$(dirname "$0")/.."
: "${OUT:?set OUT to the folder the records go to}"
SCALE="${GPU_CHECK_SCALE:-gpu}"
WHEELS="${GPU_CHECK_WHEELS:-benchmarks/wheels}"
PY="${PYTHON:-python3}"
mkdir -p "$OUT"
PORTS="ucb1 gossip_fed_ucb linucb fed_lin_ucb"
case "$SCALE" in
  gpu) HORIZON=20000 RUNS=100 GRID=--paper-scale EXTRA="" ;;
  # the CI's check that every stage runs: one pair, the linear paper's CI grid
  small) HORIZON=20 RUNS=2 GRID="" EXTRA="--skip-evaluate --sweep-ports ucb1" PORTS=ucb1 ;;
  *) echo "GPU_CHECK_SCALE: expected gpu or small, got $SCALE" >&2; exit 2 ;;
esac

if ! "$PY" -c "import fedbandit_env.jax, agents.jax" >/dev/null 2>&1; then
  "$PY" -m pip install --quiet --no-index --find-links "$WHEELS" --no-build-isolation -e .
fi
"$PY" -c "import jax; print(jax.__version__, jax.devices())" | tee "$OUT/device.txt"

# shellcheck disable=SC2086  # the word lists split on purpose
timeout 300 "$PY" benchmarks/bench_jax_anchor.py --scale "$SCALE" --pairs $PORTS \
  --bytes-ports $PORTS $EXTRA --json "$OUT/bench_jax_anchor.json" \
  | tee "$OUT/bench_jax_anchor.txt"

# shellcheck disable=SC2086
timeout 150 "$PY" -m fedbandit_env.reproductions.linear --backend jax $GRID \
  --figures 1B --horizon "$HORIZON" --runs "$RUNS" --out "$OUT/linear" \
  --claims "$OUT/linear-1B-slice.json" | tee "$OUT/linear-1B-slice.txt"

"$PY" - "$OUT" <<'EOF'
import json
import sys
from pathlib import Path

out = Path(sys.argv[1])
meta = json.loads((out / "linear-1B-slice.json").read_text())["meta"]
anchor = json.loads((out / "bench_jax_anchor.json").read_text())
rates = {
    row["port"]: row["port agent-steps/s"]
    for table in anchor.get("tables", [])
    for row in table.get("rows", [])
    if "port agent-steps/s" in row
}
estimates = {
    "device": meta.get("device"),
    "linear paper full scale (T = 10^7, 100 runs, Fig. 1A-C), estimated hours":
        meta.get("paper_scale_estimate_s", 0) / 3600,
    "agent-steps/s": rates,
}
(out / "estimates.json").write_text(json.dumps(estimates, indent=1))
print(json.dumps(estimates, indent=1))
EOF
