#!/usr/bin/env bash
# Runs selected suites of the prebuilt bundle (scripts/build-gpu-bundle.sh)
# under NVIDIA compute-sanitizer, on the GPU machine, from the repo root:
#
#   bash scripts/gpu-sanitize.sh
#
# memcheck (--leak-check full) and synccheck. The library must make no
# failing driver call in normal operation, so the normal-path suites run
# with API-error reporting on (every failing driver call is an error):
#   the seed test, test_elementwise, test_replay, test_breakable,
#   test_user_kernel, the Rust gpu_core suite (without
#   shield_against_foreign_global_capture, whose control makes an
#   unshielded call fail on purpose), the Rust gpu_conditional suite and a
#   small storm.
# The bad-input suites provoke failing driver calls on purpose (garbage PTX,
# out of memory), so they run with --report-api-errors no; memory errors and
# leaks still count: test_hostile and test_errors.
#
# Results in $OUT (default /tmp/fc-sanitize): one log per tool and suite
# (<tool>-<suite>.log) and sanitize-summary.txt: a line per run with the
# sanitizer's "ERROR SUMMARY", the program's exit status and the time, and a
# last line per tool: "<tool>: N runs, E errors, F failed". Exit status:
# the number of runs with sanitizer errors, a failing program, a timeout or
# no ERROR SUMMARY (0 = clean).
#
# Env: COMPUTE_SANITIZER (path; else PATH, $CUDA_HOME/bin, /usr/local/cuda/bin),
#      FC_SANITIZE_TIMEOUT seconds per run (300), FC_SANITIZE_TOOLS
#      ("memcheck synccheck"), FC_SANITIZE_API_ERRORS (all: report every
#      failing CUDA API call of the normal-path suites; explicit or no).
# Small counts keep the whole script within about four minutes on an H200
# (the sanitizer slows kernels and API calls 10-100x).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
OUT=${OUT:-/tmp/fc-sanitize}
mkdir -p "$OUT"
SUMMARY="$OUT/sanitize-summary.txt"
: >"$SUMMARY"
TIMEOUT_S=${FC_SANITIZE_TIMEOUT:-300}
TOOLS=${FC_SANITIZE_TOOLS:-memcheck synccheck}
API_ERRORS=${FC_SANITIZE_API_ERRORS:-all}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
# The tests' timing-sensitive rules (a capture surviving other threads'
# work) do not hold under the sanitizer's own synchronisation: they say so.
export FC_UNDER_SANITIZER=1

# log (lib.sh) also writes every line into the summary.
. scripts/lib.sh
LOG_FILE=$SUMMARY

find_sanitizer() {
    local c
    for c in "${COMPUTE_SANITIZER:-}" "$(command -v compute-sanitizer 2>/dev/null)" \
        "${CUDA_HOME:-/nonexistent}/bin/compute-sanitizer" /usr/local/cuda/bin/compute-sanitizer \
        "$(dirname "$(command -v nvcc 2>/dev/null || echo /nonexistent/nvcc)")/compute-sanitizer"; do
        if [[ -n $c && -x $c ]]; then
            printf '%s\n' "$c"
            return 0
        fi
    done
    return 1
}

if ! SANITIZER=$(find_sanitizer); then
    log "gpu-sanitize: compute-sanitizer not found (set COMPUTE_SANITIZER); nothing was checked"
    exit 2
fi
BIN=.bundle/ctest/bin
TESTS=.bundle/tests
for need in "$BIN/test_elementwise" "$TESTS/tests-gpu_core"; do
    [[ -x $need ]] || {
        log "gpu-sanitize: $need missing: build the bundle first (scripts/build-gpu-bundle.sh)"
        exit 2
    }
done
{
    echo "date: $(date -u +%FT%TZ)"
    echo "bundle built from: $(cat .bundle/COMMIT 2>/dev/null || echo unknown)"
    echo "sanitizer: $SANITIZER ($("$SANITIZER" --version 2>/dev/null | grep -m1 -i version))"
    nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader 2>/dev/null
} | tee -a "$SUMMARY"

# The storm, small: its own memory check is not the point here (the
# sanitizer allocates device memory of its own), so its tolerance is wide.
STORM_ENV="FC_STORM_THREADS=2 FC_STORM_CAPTURES=24 FC_STORM_WARMUP=2 FC_STORM_CHURN=8 FC_STORM_MEM_TOLERANCE_MIB=65536"

# Suites: "name|api errors (report or no)|tools|environment|command".
SUITES=(
    "seed|report|memcheck synccheck||$BIN/test_graph_capture_concurrency"
    "test_elementwise|report|memcheck synccheck||$BIN/test_elementwise"
    "test_replay|report|memcheck||$BIN/test_replay"
    "test_breakable|report|memcheck synccheck||$BIN/test_breakable"
    "test_user_kernel|report|memcheck synccheck||$BIN/test_user_kernel"
    "gpu_core|report|memcheck||$TESTS/tests-gpu_core --test-threads=1 --skip shield_against_foreign_global_capture"
    # Conditional nodes, with the setters resolved by the driver and (its
    # last test, in a child process) linked with the device runtime.
    "gpu_conditional|report|memcheck||$TESTS/tests-gpu_conditional --test-threads=1"
    # Recordings that build, their node-by-node updates (foreign sections'
    # child nodes in place included), beside a foreign device-wide sync.
    "gpu_recording|report|memcheck||$TESTS/tests-gpu_recording --test-threads=1"
    # Foreign sections; own_stream_synchronised_while_recording synchronises
    # the capturing stream on purpose (the driver refuses it), so it runs
    # apart, with only memory errors counted.
    "test_foreign|report|memcheck|CT_SKIP=own_stream_synchronised_while_recording|$BIN/test_foreign"
    "test_foreign-misuse|no|memcheck|CT_ONLY=own_stream_synchronised_while_recording|$BIN/test_foreign"
    # One thread per device: no thread interferes with another's capture, so
    # every driver call the library makes must succeed (API errors reported).
    "storm-1thread|report|memcheck synccheck|$STORM_ENV FC_STORM_THREADS=1|$BIN/test_storm"
    # Several threads per device: the sanitizer's own synchronisation can
    # invalidate another thread's capture (a 901 the test excuses under
    # FC_UNDER_SANITIZER), so here only memory errors count.
    "storm|no|memcheck|$STORM_ENV|$BIN/test_storm"
    "test_hostile|no|memcheck||$BIN/test_hostile"
    "test_errors|no|memcheck||$BIN/test_errors"
)

failed=0
declare -A runs errors bad
run_one() { # tool name api env command...
    local tool=$1 name=$2 api=$3 vars=$4 log rc start secs n verdict
    shift 4
    log="$OUT/$tool-$name.log"
    local opts=(--tool "$tool" --print-limit 200)
    [[ $tool == memcheck ]] && opts+=(--leak-check full)
    if [[ $api == report ]]; then opts+=(--report-api-errors "$API_ERRORS"); else opts+=(--report-api-errors no); fi
    start=$(date +%s.%N)
    # shellcheck disable=SC2086 # the variables are split on purpose
    env $vars timeout "$TIMEOUT_S" "$SANITIZER" "${opts[@]}" "$@" >"$log" 2>&1
    rc=$?
    secs=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }')
    # One summary per process the sanitizer followed: their sum.
    n=$(grep -aoE 'ERROR SUMMARY: [0-9]+ error' "$log" | grep -oE '[0-9]+' | awk '{ s += $1 } END { if (NR) print s }')
    runs[$tool]=$((${runs[$tool]:-0} + 1))
    if [[ $rc -eq 124 ]]; then
        verdict="TIMEOUT after ${TIMEOUT_S}s"
    elif [[ -z $n ]]; then
        verdict="no ERROR SUMMARY (sanitizer did not finish; exit $rc)"
    elif [[ $n -ne 0 ]]; then
        verdict="ERRORS"
    elif [[ $rc -ne 0 ]]; then
        verdict="program failed (exit $rc)"
    else
        verdict="clean"
    fi
    errors[$tool]=$((${errors[$tool]:-0} + ${n:-0}))
    if [[ $verdict != clean ]]; then
        bad[$tool]=$((${bad[$tool]:-0} + 1))
        failed=$((failed + 1))
    fi
    log "$(printf '%-9s %-17s api-errors=%-8s ERROR SUMMARY: %s error(s)  exit %-3s %7ss  %s' \
        "$tool" "$name" "$([[ $api == report ]] && echo "$API_ERRORS" || echo no)" "${n:-?}" "$rc" "$secs" "$verdict")"
    if [[ $verdict != clean ]]; then
        grep -aE '^========= (Program hit|Invalid|Leaked|Race|Barrier|.*error)' "$log" | sort | uniq -c | sort -rn |
            head -8 | sed 's/^/      /' | tee -a "$SUMMARY"
        grep -aE '^\[FAIL\]' "$log" | head -5 | sed 's/^/      /' | tee -a "$SUMMARY"
    fi
}

for tool in $TOOLS; do
    for s in "${SUITES[@]}"; do
        IFS='|' read -r name api tools vars cmd <<<"$s"
        [[ " $tools " == *" $tool "* ]] || continue
        first=${cmd%% *}
        if [[ ! -x $first ]]; then
            log "$(printf '%-9s %-17s missing: %s' "$tool" "$name" "$first")"
            failed=$((failed + 1))
            continue
        fi
        # shellcheck disable=SC2086 # the command is split on purpose
        run_one "$tool" "$name" "$api" "$vars" $cmd
    done
done
for tool in $TOOLS; do
    log "$tool: ${runs[$tool]:-0} runs, ${errors[$tool]:-0} errors, ${bad[$tool]:-0} failed"
done
log "gpu-sanitize: $failed run(s) not clean (logs in $OUT)"
exit "$failed"
