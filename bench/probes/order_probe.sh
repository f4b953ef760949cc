#!/usr/bin/env bash
# Probe: does the position of the recapture_update rows in a process change
# their timing? Runs raw_bench and fc-bench (K=260 only, one device, pinned
# like scripts/gpu-bench.sh) alternately, ROUNDS times each:
#   raw       raw_bench: recapture_update right after that mode's other rows
#   fc-full   fc-bench: every K row first, then the feature rows
#   fc-feat   fc-bench --features-only: the feature rows first thing
# and prints each variant's recapture_update medians per round. With PINS
# (space-separated taskset CPU lists, default "2-5" as gpu-bench.sh), every
# round runs the three variants once per CPU list.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROUNDS=${ROUNDS:-4}
K=${K:-260}
OUT=${OUT:-/tmp/order-probe}
mkdir -p "$OUT"
. scripts/find-cuda-include.sh
inc=$(find_cuda_include | head -n1)
lib=$( (ldconfig -p 2> /dev/null || true) | awk '/libcuda\.so\.1 /{print $NF; exit}')
gcc -O2 -std=c11 -I"$inc" bench/raw/raw_bench.c -o "$OUT/raw_bench" "${lib:--lcuda}" -lpthread
PINS=${PINS:-2-5}
FC=.bundle/bin/fc-bench
probe() { # name cmd...
    local name=$1
    shift
    taskset -c "$pin" "$@" > "$OUT/$name.$pin.$r.jsonl" 2> "$OUT/$name.$pin.$r.log" || echo "$name $pin round $r failed: $?"
}
for r in $(seq 1 "$ROUNDS"); do
    for pin in $PINS; do
        probe raw "$OUT/raw_bench" kernels/elementwise.ptx --kernels "$K" --no-multi-gpu
        probe fc-full "$FC" --kernels "$K" --no-multi-gpu
        probe fc-feat "$FC" --kernels "$K" --features-only
    done
done
python3 - "$OUT" "$ROUNDS" "$PINS" <<'PY'
import json, os, sys
out, rounds, pins = sys.argv[1], int(sys.argv[2]), sys.argv[3].split()
for pin in pins:
    for name in ["raw", "fc-full", "fc-feat"]:
        rows = {}
        for r in range(1, rounds + 1):
            for line in open(f"{out}/{name}.{pin}.{r}.jsonl"):
                try:
                    o = json.loads(line)
                except ValueError:
                    continue
                if "median_us" in o and o["row"].startswith(os.environ.get("ROWS", "recapture_update")):
                    rows.setdefault(o["row"], []).append(round(o["median_us"], 1))
        for row in sorted(rows):
            print(f"cpu {pin:5s} {name:8s} {row:28s} {rows[row]}")
PY
