#!/usr/bin/env bash
# Runs the prebuilt bundle (scripts/build-gpu-bundle.sh) on the GPU machine:
# the demo, the installed `fcgraph info` and `fcgraph selftest`, every Rust
# test binary, the C suite with the seed test 5 times, the seed test built
# against the install tree with pkg-config and CMake (shared and static; and
# rebuilt here where cc, pkg-config and cmake exist, else skipped visibly),
# the coexistence clients (scripts/gpu-coexist.sh: cudart and PyTorch on the
# same GPU; FC_NO_COEXIST=1 skips), cuBLAS and NCCL inside graphs
# (scripts/gpu-interop.sh; FC_NO_INTEROP=1 skips), the compute-sanitizer runs
# (scripts/gpu-sanitize.sh; FC_NO_SANITIZE=1 skips), and (unless
# FC_NO_BENCH=1) the benchmark (scripts/gpu-bench.sh, with the isolated and
# interop rows). FC_ONLY="step ..." runs only the named steps (names as in
# the log: demo, fcgraph, rust, ctest, install, coexist, interop, sanitize,
# bench).
#
# Results in $OUT (default /tmp/fc-gpu): gpu-suite.log (everything, in
# order), benchmarks.md, logs.tar.gz (each step's own logs and tables) and
# bench.tar.gz (the benchmark's raw JSONL and logs). Exit status: the number
# of failed steps (0 = all passed).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
OUT=${OUT:-/tmp/fc-gpu}; mkdir -p "$OUT"
LOG="$OUT/gpu-suite.log"; : > "$LOG"
BENCH_OUT=$(mktemp -d "${TMPDIR:-/tmp}/fc-bench.XXXXXX")
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
# run NAME CMD... (lib.sh): one step into $LOG; FAILS counts the failed ones.
. scripts/lib.sh
LOG_FILE=$LOG
{
  echo "date: $(date -u +%FT%TZ)"
  echo "bundle built from: $(cat .bundle/COMMIT 2>/dev/null)"
  nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader
} 2>&1 | tee -a "$LOG"
STEPS_OUT="$OUT/steps"; mkdir -p "$STEPS_OUT"
want() { # want STEP [SKIP_VAR]: whether the step runs
  [ -n "${2:-}" ] && [ "${!2:-0}" = 1 ] && return 1
  [ -z "${FC_ONLY:-}" ] && return 0
  case " $FC_ONLY " in *" $1 "*) return 0 ;; esac
  return 1
}
want demo && run demo .bundle/bin/demo
if want fcgraph; then
  run fcgraph-info .bundle/prefix/bin/fcgraph info
  run fcgraph-selftest .bundle/prefix/bin/fcgraph selftest
fi
if want rust; then
  for t in .bundle/tests/*; do
    [[ $t == *.so ]] && continue # the driver double the unit tests load
    run "$(basename "$t")" "$t" --test-threads=1
  done
fi
want ctest && FC_SEED_RUNS=${FC_SEED_RUNS:-5} run ctest bash ctest/run.sh --run-only .bundle/ctest
if want install; then
  run install-consumers bash ctest/install-check.sh --prefix .bundle/prefix --run-only .bundle/consumers
  run install-rebuild bash ctest/install-check.sh --prefix .bundle/prefix
fi
want coexist FC_NO_COEXIST && OUT="$STEPS_OUT/coexist" run coexist bash scripts/gpu-coexist.sh
want interop FC_NO_INTEROP && OUT="$STEPS_OUT/interop" FC_NO_BENCH=1 run interop bash scripts/gpu-interop.sh
if want sanitize FC_NO_SANITIZE && [ -f scripts/gpu-sanitize.sh ]; then
  OUT="$STEPS_OUT/sanitize" run sanitize bash scripts/gpu-sanitize.sh
fi
if want bench FC_NO_BENCH; then
  # The interop rows first (their programs are built there), then the
  # rounds of fc / raw / PyTorch, the isolated rows, the steps and the report.
  OUT="$BENCH_OUT" run bench-interop bash scripts/gpu-interop.sh
  OUT="$BENCH_OUT" BENCH_INTEROP_JSONL="$BENCH_OUT/bench-interop.jsonl" run bench bash scripts/gpu-bench.sh .bundle/bin/fc-bench
  cp "$BENCH_OUT/benchmarks.md" "$OUT/" 2>/dev/null
  tar -czf "$OUT/bench.tar.gz" -C "$BENCH_OUT" . 2>/dev/null
fi
tar -czf "$OUT/logs.tar.gz" -C "$STEPS_OUT" . 2>/dev/null
log "=== gpu-suite: $FAILS step(s) failed"
exit "$FAILS"
