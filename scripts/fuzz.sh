#!/usr/bin/env bash
# Coverage-guided fuzzing (cargo-fuzz, libFuzzer, AddressSanitizer) of the
# C ABI and of the inputs that take user bytes, on the driver double (no
# GPU). Each target runs for a fixed time from the committed seeds
# (fuzz/seeds/<target>) and the corpus it grew before (fuzz/corpus/, not
# committed), with its dictionary (fuzz/dict/); then every input in
# fuzz/regressions/<target> (inputs that once crashed, each fixed) runs
# once. docs/fuzzing.md says what each target checks and what the long run
# found.
#
#   scripts/fuzz.sh [TARGET...]     default: every target
#
# Targets and their times (FUZZ_SECONDS scales them: 60 gives these):
#   c_api_calls      60 s at driver 13000, 30 s at 11040 (its own double)
#   ptx_module_load  30 s, bucket_lists 20 s, dot_names 20 s
# A line per run: "[PASS] fuzz <target>@<version>: <execs> execs, <edges>
# coverage edges, corpus <n> inputs", or "[FAIL] ..." with the crash, the
# input (fuzz/artifacts/<target>/) and the calls it made; then the tally
# "N passed, N failed, N skipped" that scripts/test.sh counts.
#
# Set-up: the nightly toolchain (scripts/miri.sh installs it too) and
# cargo-fuzz (installed with `cargo install cargo-fuzz --locked` when
# missing); skips visibly ("[SKIP] fuzz: ...") only when they cannot be had.
# Env: FUZZ_SECONDS (60).
set -uo pipefail
. "$(dirname "$0")/lib.sh"
cd "$ROOT" || exit 1

SCALE=${FUZZ_SECONDS:-60}
TARGETS=("$@")
[[ ${#TARGETS[@]} -gt 0 ]] || TARGETS=(c_api_calls ptx_module_load bucket_lists dot_names)

skip() {
    echo "[SKIP] fuzz: $*"
    echo "0 passed, 0 failed, 1 skipped"
    exit 0
}
if ! rustup run nightly rustc --version > /dev/null 2>&1; then
    rustup toolchain install nightly --profile minimal > /dev/null 2>&1 || skip "no nightly toolchain could be installed"
fi
if ! cargo +nightly fuzz --version > /dev/null 2>&1; then
    log "installing cargo-fuzz"
    cargo install cargo-fuzz --locked -q || skip "cargo-fuzz could not be installed"
fi

log "building the driver double and the fuzz targets (nightly, AddressSanitizer)"
cargo build --release -q -p fc-cuda-double-11 -p fc-cuda-double-12 || die "the driver double did not build"
(cd fuzz && cargo +nightly fuzz build -O --debug-assertions) || die "the fuzz targets did not build"
BIN=fuzz/target/x86_64-unknown-linux-gnu/release
LIB=$ROOT/target/release

passed=0 failed=0
# fuzz_one TARGET SECONDS VERSION DOUBLE MAX_LEN
fuzz_one() {
    local t=$1 secs=$2 version=$3 double=$4 max_len=$5 corpus log dict=()
    secs=$(((secs * SCALE + 59) / 60))
    corpus=fuzz/corpus/$t
    log=$(mktemp "${TMPDIR:-/tmp}/fc-fuzz-$t.XXXXXX")
    mkdir -p "$corpus" "fuzz/artifacts/$t"
    [[ -f fuzz/dict/$t.dict ]] && dict=(-dict="fuzz/dict/$t.dict")
    FC_DOUBLE_DRIVER_VERSION=$version FC_CUDA_LIBRARY=$LIB/$double \
        "$BIN/$t" -max_total_time="$secs" -max_len="$max_len" -timeout=20 -rss_limit_mb=4096 \
        -print_final_stats=1 \
        -artifact_prefix="fuzz/artifacts/$t/" "${dict[@]}" "$corpus" "fuzz/seeds/$t" > "$log" 2>&1
    local rc=$?
    local execs edges size
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
    edges=$(grep -oE 'cov: [0-9]+' "$log" | tail -n 1 | grep -oE '[0-9]+')
    size=$(find "$corpus" -type f | wc -l)
    if [[ $rc -eq 0 ]]; then
        echo "[PASS] fuzz $t@$version: ${execs:-?} execs in ${secs} s, ${edges:-?} coverage edges, corpus $size inputs"
        passed=$((passed + 1))
    else
        local crash
        crash=$(sed -n "s/.*Test unit written to \(.*\)$/\1/p" "$log" | tail -n 1)
        echo "[FAIL] fuzz $t@$version: exit $rc after ${execs:-?} execs; input: ${crash:-none}"
        grep -vE '^(#[0-9]+|	|INFO:|\[|MS:|"|###)' "$log" | head -n 60
        if [[ -n $crash && -f $crash ]]; then
            echo "--- the calls the input makes (FC_FUZZ_TRACE), the last 40:"
            FC_FUZZ_TRACE=1 FC_DOUBLE_DRIVER_VERSION=$version FC_CUDA_LIBRARY=$LIB/$double \
                "$BIN/$t" -runs=1 "$crash" 2>&1 | grep '^fuzz:' | tail -n 40
        fi
        failed=$((failed + 1))
    fi
    rm -f "$log"
}

# replay TARGET VERSION DOUBLE: the fixed crashes, once each.
replay() {
    local t=$1 version=$2 double=$3 f
    [[ -d fuzz/regressions/$t ]] || return 0
    for f in fuzz/regressions/"$t"/*; do
        [[ -f $f ]] || continue
        if FC_DOUBLE_DRIVER_VERSION=$version FC_CUDA_LIBRARY=$LIB/$double "$BIN/$t" -runs=1 "$f" > /dev/null 2>&1; then
            echo "[PASS] fuzz regression $t/$(basename "$f")@$version"
            passed=$((passed + 1))
        else
            echo "[FAIL] fuzz regression $t/$(basename "$f")@$version: crashes again"
            failed=$((failed + 1))
        fi
    done
}

for t in "${TARGETS[@]}"; do
    case $t in
        c_api_calls)
            replay "$t" 13000 libfc_cuda_double.so
            replay "$t" 11040 libfc_cuda_double_11.so
            fuzz_one "$t" 60 13000 libfc_cuda_double.so 4096
            fuzz_one "$t" 30 11040 libfc_cuda_double_11.so 4096
            ;;
        ptx_module_load) replay "$t" 13000 libfc_cuda_double.so; fuzz_one "$t" 30 13000 libfc_cuda_double.so 8192 ;;
        bucket_lists) replay "$t" 13000 libfc_cuda_double.so; fuzz_one "$t" 20 13000 libfc_cuda_double.so 4096 ;;
        dot_names) replay "$t" 13000 libfc_cuda_double.so; fuzz_one "$t" 20 13000 libfc_cuda_double.so 1024 ;;
        *) die "unknown fuzz target $t" ;;
    esac
done
echo "$passed passed, $failed failed, 0 skipped"
[[ $failed -eq 0 ]]
