#!/usr/bin/env bash
# Runs the prebuilt bundle (scripts/build-gpu-bundle.sh) on the GPU machine:
# the demo, the installed `fcgraph info` and `fcgraph selftest`, every Rust
# test binary, the C suite with the seed test 5 times, the seed test built
# against the install tree with pkg-config and CMake (shared and static; and
# rebuilt here where cc, pkg-config and cmake exist, else skipped visibly),
# and (unless FC_NO_BENCH=1) the benchmark.
#
# Results in $OUT (default /tmp/fc-gpu): gpu-suite.log (everything, in
# order), benchmarks.md, and bench.tar.gz (the benchmark's raw JSONL and
# logs). Exit status: the number of failed steps (0 = all passed).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
OUT=${OUT:-/tmp/fc-gpu}; mkdir -p "$OUT"
LOG="$OUT/gpu-suite.log"; : > "$LOG"
BENCH_OUT=$(mktemp -d "${TMPDIR:-/tmp}/fc-bench.XXXXXX")
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
fails=0
run() { # name, command...
  local name=$1; shift
  echo "=== $name: $*" | tee -a "$LOG"
  "$@" 2>&1 | tee -a "$LOG"
  local rc=${PIPESTATUS[0]}
  echo "=== $name: exit $rc" | tee -a "$LOG"
  [ "$rc" -eq 0 ] || fails=$((fails + 1))
}
{
  echo "date: $(date -u +%FT%TZ)"
  echo "bundle built from: $(cat .bundle/COMMIT 2>/dev/null)"
  nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader
} 2>&1 | tee -a "$LOG"
run demo .bundle/bin/demo
run fcgraph-info .bundle/prefix/bin/fcgraph info
run fcgraph-selftest .bundle/prefix/bin/fcgraph selftest
for t in .bundle/tests/*; do
  run "$(basename "$t")" "$t" --test-threads=1
done
FC_SEED_RUNS=${FC_SEED_RUNS:-5} run ctest bash ctest/run.sh --run-only .bundle/ctest
run install-consumers bash ctest/install-check.sh --prefix .bundle/prefix --run-only .bundle/consumers
run install-rebuild bash ctest/install-check.sh --prefix .bundle/prefix
if [ "${FC_NO_BENCH:-0}" != 1 ]; then
  OUT="$BENCH_OUT" run bench bash scripts/gpu-bench.sh .bundle/bin/fc-bench
  cp "$BENCH_OUT/benchmarks.md" "$OUT/" 2>/dev/null
  tar -czf "$OUT/bench.tar.gz" -C "$BENCH_OUT" . 2>/dev/null
fi
echo "=== gpu-suite: $fails step(s) failed" | tee -a "$LOG"
exit "$fails"
