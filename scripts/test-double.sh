#!/usr/bin/env bash
# Two simulated GPUs on every CI run: the driver double (driver-double/,
# libfc_cuda_double.so and, for CUDA 11.x, libfc_cuda_double_11.so) loaded
# as the driver (FC_CUDA_LIBRARY) with 2 devices, at driver versions 11040,
# 12000, 12030 and 13000. At each version:
#   - the engine's seed test, unmodified, $FC_SEED_RUNS times (5), with
#     5 us a call (FC_DOUBLE_LATENCY_US: a real driver's calls take time,
#     which gives the other die's thread room to run while the captures
#     are open; with calls of no cost it may never be scheduled then);
#   - the C suite (ctest/run.sh --run-only), every C test;
#   - the seed test recording by stream capture (FC_RECORDING=capture): the
#     capture-mode shield under the double's capture rules;
#   - the seed test broken on purpose, which must FAIL: FC_RECORDING=capture
#     with FC_DOUBLE_FAULTS=capture-global (every capture GLOBAL, other
#     threads' calls unshielded: the engine's old code) and 20 us a call, so
#     that the other die's allocations land inside captures: the test is
#     not vacuous;
#   - the installed package's seed programs (ctest/install-check.sh
#     --run-only: pkg-config and CMake, shared and static);
#   - the Rust GPU suites (tests/gpu_*.rs, built by `cargo test --release`).
# Needs the release build (scripts/build.sh), ctest/build (ctest/run.sh)
# and the Rust test binaries; builds the double. Each part prints its own
# tally (the C suites' "N passed, N failed, N skipped", libtest's "test
# result:"), which scripts/test.sh counts. Exit status 1 when anything failed.
#
#   scripts/test-double.sh [VERSION...]     default: 11040 12000 12030 13000
# Env: FC_DOUBLE_DEVICES (2), FC_SEED_RUNS (5).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$ROOT"

VERSIONS=("$@")
[[ ${#VERSIONS[@]} -gt 0 ]] || VERSIONS=(11040 12000 12030 13000)
export FC_DOUBLE_DEVICES="${FC_DOUBLE_DEVICES:-2}" FC_SEED_RUNS="${FC_SEED_RUNS:-5}"
TARGET="${CARGO_TARGET_DIR:-$ROOT/target}/release"
SEED="$ROOT/ctest/build/bin/test_graph_capture_concurrency"
failed=0

log "building the driver double (fc-cuda-double-11, fc-cuda-double-12)"
cargo build --release -q -p fc-cuda-double-11 -p fc-cuda-double-12
[[ -d ctest/build/bin ]] || die "no ctest/build: run ctest/run.sh first (scripts/test.sh does)"

# The installed package's programs, built once (scripts/install.sh of the
# release build into a temporary prefix).
WORK=$(mktemp -d "${TMPDIR:-/tmp}/fc-double.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
if scripts/install.sh --prefix "$WORK/prefix" --no-build >"$WORK/install.log" 2>&1 &&
    bash ctest/install-check.sh --prefix "$WORK/prefix" --build-only "$WORK/pkg" >"$WORK/pkg.log" 2>&1; then
    INSTALLED=1
else
    cat "$WORK/install.log" "$WORK/pkg.log" 2>/dev/null | tail -n 30
    echo "FAIL  the installed package's programs did not build"
    echo "0 passed, 1 failed, 0 skipped"
    INSTALLED=0
    failed=1
fi

# The Rust GPU suites' binaries (already built; listed by cargo).
mapfile -t SUITES < <(cargo test --release -q -p fc-graph-tests --no-run --message-format=json 2>/dev/null |
    python3 -c 'import json,sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"].startswith("gpu_"):
        print(m["executable"])')
[[ ${#SUITES[@]} -gt 0 ]] || die "no Rust GPU suites found (cargo test --release -p fc-graph-tests --no-run)"

# expect_fail NAME CMD...: passes when CMD fails with the seed's verdict.
expect_fail() {
    local name=$1 out rc=0
    shift
    out=$("$@" 2>&1) || rc=$?
    printf '%s\n' "$out" | sed 's/^/    /' | tail -n 6
    if [[ $rc -ne 0 ]] && grep -q '^\[FAIL\] graph capture concurrency' <<<"$out" && grep -q 'destroyed' <<<"$out"; then
        echo "PASS  $name: the seed test failed, as it must"
        echo "1 passed, 0 failed, 0 skipped"
    else
        echo "FAIL  $name: the seed test did not fail (exit $rc)"
        echo "0 passed, 1 failed, 0 skipped"
        return 1
    fi
}

# run_version V: every part at driver version V (its output to stdout).
run_version() {
    local v=$1 lib start failed=0
    lib="$TARGET/libfc_cuda_double.so"
    [[ $v -lt 12000 ]] && lib="$TARGET/libfc_cuda_double_11.so"
    [[ -f $lib ]] || { echo "FAIL  no $lib"; echo "0 passed, 1 failed, 0 skipped"; return 1; }
    start=$SECONDS
    echo
    echo "=== driver double $v, $FC_DOUBLE_DEVICES devices ($lib)"
    export FC_CUDA_LIBRARY=$lib FC_DOUBLE_DRIVER_VERSION=$v
    if [[ -x $SEED ]]; then
        echo "--- seed test x$FC_SEED_RUNS"
        local i ok=0
        for ((i = 1; i <= FC_SEED_RUNS; i++)); do
            if FC_DOUBLE_LATENCY_US=5 "$SEED" >"$WORK/seed.$v.$i.log" 2>&1 && grep -q '^\[PASS\]' "$WORK/seed.$v.$i.log"; then
                ok=$((ok + 1))
            else
                sed 's/^/    /' "$WORK/seed.$v.$i.log"
            fi
        done
        tail -n 2 "$WORK/seed.$v.$FC_SEED_RUNS.log" | sed 's/^/    /'
        echo "seed test at $v: $ok/$FC_SEED_RUNS runs passed"
        echo "$ok passed, $((FC_SEED_RUNS - ok)) failed, 0 skipped"
        [[ $ok -eq $FC_SEED_RUNS ]] || failed=1
    fi
    # Each version runs its programs from a copy (their logs go beside them).
    cp -r ctest/build "$WORK/ctest.$v"
    echo "--- C suite"
    FC_SEED_RUNS=0 bash ctest/run.sh --run-only "$WORK/ctest.$v" || failed=1
    echo "--- seed test, recordings by stream capture"
    if [[ -x $SEED ]]; then
        if FC_RECORDING=capture FC_DOUBLE_LATENCY_US=5 "$SEED" | tail -n 3 | tee "$WORK/capture.$v.log" | sed 's/^/    /' &&
            grep -q '^\[PASS\]' "$WORK/capture.$v.log"; then
            echo "1 passed, 0 failed, 0 skipped"
        else
            echo "0 passed, 1 failed, 0 skipped"
            failed=1
        fi
        echo "--- seed test, broken on purpose (capture-global)"
        expect_fail "seed under capture-global" env FC_RECORDING=capture FC_DOUBLE_FAULTS=capture-global \
            FC_DOUBLE_LATENCY_US=20 "$SEED" || failed=1
    else
        echo "[SKIP] seed test: not built (no ../shared/seeds)"
        echo "0 passed, 0 failed, 2 skipped"
    fi
    if [[ $INSTALLED == 1 ]]; then
        echo "--- installed package"
        cp -r "$WORK/pkg" "$WORK/pkg.$v"
        FC_SEED_RUNS=1 FC_DOUBLE_LATENCY_US=5 bash ctest/install-check.sh --prefix "$WORK/prefix" --run-only "$WORK/pkg.$v" ||
            failed=1
    fi
    echo "--- Rust GPU suites"
    local s
    for s in "${SUITES[@]}"; do
        "$s" --test-threads=2 || failed=1
    done
    echo "double $v: $((SECONDS - start)) s, $([[ $failed -eq 0 ]] && echo ok || echo FAILED)"
    return $failed
}

# The versions run side by side (each its own processes, each loaded
# double its own state), two at a time; their logs are shown in order.
pids=()
for v in "${VERSIONS[@]}"; do
    run_version "$v" >"$WORK/$v.log" 2>&1 &
    pids+=($!)
    if [[ ${#pids[@]} -ge 2 ]]; then
        wait "${pids[0]}" || failed=1
        pids=("${pids[@]:1}")
    fi
done
for p in "${pids[@]}"; do wait "$p" || failed=1; done
for v in "${VERSIONS[@]}"; do cat "$WORK/$v.log"; done
unset FC_CUDA_LIBRARY FC_DOUBLE_DRIVER_VERSION
[[ $failed -eq 0 ]]
