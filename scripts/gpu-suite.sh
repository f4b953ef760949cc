#!/usr/bin/env bash
# Runs the prebuilt bundle (scripts/build-gpu-bundle.sh) on the GPU machine:
# the demo, every Rust test binary, the C suite with the seed test 5 times,
# and (unless FC_NO_BENCH=1) the benchmark. Logs go to $OUT (or /tmp).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/fc-gpu}; mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
fails=0
run() { # name, command...
  local name=$1; shift
  echo "=== $name: $*"
  "$@" 2>&1 | tee "$OUT/$name.log"
  local rc=${PIPESTATUS[0]}
  echo "=== $name: exit $rc"
  [ "$rc" -eq 0 ] || fails=$((fails + 1))
}
{
  echo "date: $(date -u +%FT%TZ)"
  echo "commit: $(cat .bundle/COMMIT 2>/dev/null)"
  nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader
} | tee "$OUT/machine.txt"
run demo .bundle/bin/demo
for t in .bundle/tests/*; do
  run "$(basename "$t")" "$t" --test-threads=1
done
FC_SEED_RUNS=${FC_SEED_RUNS:-5} run ctest bash ctest/run.sh --run-only .bundle/ctest
if [ "${FC_NO_BENCH:-0}" != 1 ]; then
  run bench bash scripts/gpu-bench.sh .bundle/bin/fc-bench
fi
echo "=== gpu-suite: $fails step(s) failed"
exit $((fails > 0))
