#!/usr/bin/env bash
# gpu-coexist.sh - fc-graph beside other CUDA clients on the same GPU, in the
# same process (issue 9, item 5). Run on the GPU machine from the repo root,
# with the bundle of scripts/build-gpu-bundle.sh in .bundle/:
#
#   bash scripts/gpu-coexist.sh
#
# Builds, there:
#   libfcside.so       ctest/coexist/fc_side.c (the fc side: 26-kernel captures,
#                      replay, exact check) against .bundle/lib/libfcgraph.so
#   fc_side_selftest   verdict logic + 20 quiet iterations on an isolated context
#   foreign_cudart     ctest/coexist/foreign_cudart.cu with nvcc (client A)
# and runs client A (CUDA runtime thread: kernels, cudaDeviceSynchronize,
# cudaMalloc/cudaFree, GLOBAL captures) and client B (ctest/coexist/
# torch_coexist.py: torch.cuda.graph captures, eager work,
# torch.cuda.synchronize, empty_cache), each in three configurations:
#   primary-plain   primary context, begin/end      (invalidations counted; the
#                                                   control: at least one)
#   primary-retry   primary context, fc_graph_capture_ctx (required: 0 unrecovered)
#   isolated        isolated context, begin/end    (required: 0 failures on
#                                                   either side): a green context
#                                                   where the driver has them
#                                                   (CUDA 12.4+), else private;
#                                                   FC_ISOLATION=private forces
#                                                   cuCtxCreate
# and 0 wrong results everywhere. Prints a summary table (also written to
# $OUT/coexistence.md; logs in $OUT/coexist-*.log).
#
# Exit status: 0 when every required result holds, 1 when one is missed or a
# client's summary is missing, 2 when something could not be built.
#
# Environment:
#   OUT=/tmp/fc-coexist      where logs and the table go
#   COEXIST_DEVICE=0         the GPU
#   COEXIST_ITERS_A=20000    fc iterations per configuration, client A
#   COEXIST_ITERS_B=20000    fc iterations per configuration, client B
#   COEXIST_MAX_SECONDS=25   cap on each configuration's fc loop
#   COEXIST_MAX_TRIES=64     max_tries of fc_graph_capture_ctx
#   COEXIST_A_ARGS=""        extra arguments of foreign_cudart (--reps, --pause-us ...)
#   COEXIST_B_ARGS=""        extra arguments of torch_coexist.py (--work-elems ...)
#   COEXIST_WRAP=""          a command the clients run under, split on blanks, e.g.
#                            "cuda-gdb -q -batch -ex run -ex bt --args"
#   FC_ISOLATION=auto        what the isolated configuration gets: auto (green where
#                            possible), green, or private (the pre-green behaviour)
#   NVCC=nvcc  CC=gcc  PYTHON=python3  NVCC_ARCH=-arch=native
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
ROOT=$(pwd)
# Keep NVLink multicast off (the shared machines' rule), as gpu-suite.sh does.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1

OUT=${OUT:-/tmp/fc-coexist}
mkdir -p "$OUT"
DEVICE=${COEXIST_DEVICE:-0}
ITERS_A=${COEXIST_ITERS_A:-20000}
ITERS_B=${COEXIST_ITERS_B:-20000}
MAX_SECONDS=${COEXIST_MAX_SECONDS:-25}
MAX_TRIES=${COEXIST_MAX_TRIES:-64}
CC=${CC:-gcc}
PYTHON=${PYTHON:-python3}
LIBDIR="$ROOT/.bundle/lib"
SRC="$ROOT/ctest/coexist"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/fc-coexist.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

# log, die (lib.sh)
. "$ROOT/scripts/lib.sh"
LOG_PREFIX="[gpu-coexist] "

[ -f "$LIBDIR/libfcgraph.so" ] || die "$LIBDIR/libfcgraph.so is missing: run scripts/build-gpu-bundle.sh first"
[ -e "$LIBDIR/libfcgraph.so.0" ] || ln -sf libfcgraph.so "$LIBDIR/libfcgraph.so.0" 2> /dev/null ||
    die "$LIBDIR/libfcgraph.so.0 is missing"

NVCC=${NVCC:-}
if [ -z "$NVCC" ]; then
    NVCC=$(command -v nvcc || true)
    [ -n "$NVCC" ] || { [ -x /usr/local/cuda/bin/nvcc ] && NVCC=/usr/local/cuda/bin/nvcc; }
fi
command -v "${NVCC:-nvcc}" > /dev/null || die "nvcc not found (set NVCC=...)"

log "date $(date -u +%FT%TZ); bundle $(cat .bundle/COMMIT 2> /dev/null || echo unknown); $("$NVCC" --version | tail -n 1)"
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader 2> /dev/null | sed 's/^/[gpu-coexist] gpu /'

# ---------------------------------------------------------------- build
RPATH="$WORK:$LIBDIR"
"$CC" -std=c99 -O2 -g -Wall -Wextra -ffp-contract=off -fPIC -shared -I"$ROOT/include" -o "$WORK/libfcside.so" \
    "$SRC/fc_side.c" -L"$LIBDIR" -lfcgraph -Wl,-rpath,"$LIBDIR" || die "building libfcside.so failed"
"$CC" -std=c99 -O2 -Wall -Wextra -I"$ROOT/include" -o "$WORK/fc_side_selftest" "$SRC/fc_side_selftest.c" \
    -L"$WORK" -lfcside -L"$LIBDIR" -lfcgraph -Wl,-rpath,"$RPATH" || die "building fc_side_selftest failed"
read -r -a ARCH <<< "${NVCC_ARCH:--arch=native}"
build_a() { # extra nvcc flags...
    "$NVCC" -O2 -g "$@" -I"$SRC" -o "$WORK/foreign_cudart" "$SRC/foreign_cudart.cu" \
        -L"$WORK" -lfcside -L"$LIBDIR" -lfcgraph -lpthread -Xlinker -rpath -Xlinker "$RPATH"
}
if ! build_a "${ARCH[@]}"; then
    log "nvcc ${ARCH[*]} failed; building for nvcc's default architecture (PTX JIT-compiled by the driver)"
    build_a || die "building foreign_cudart with nvcc failed"
fi

# ---------------------------------------------------------------- run
fails=0
log "fc_side_selftest"
"$WORK/fc_side_selftest" 2>&1 | tee "$OUT/coexist-selftest.log"
[ "${PIPESTATUS[0]}" -eq 0 ] || { log "fc_side_selftest FAILED"; fails=$((fails + 1)); }

# ---------------------------------------------------------------- driver check
# The driver alone (ctest/coexist/driver_race.c, no fc-graph): one thread
# captures on a primary context while another loops cuCtxSynchronize on it.
# On driver 580 this crashes the process (SIGSEGV in cuCtxSynchronize) within
# seconds; the eager control (no capture) must not. Reported, not counted:
# a crash there is the driver's, and the primary-context rows below that die
# the same way are marked as such.
CUDA_INC=""
for d in "${CUDA_HOME:-/nonexistent}/include" /usr/local/cuda/include "$(dirname "$NVCC")/../include"; do
    [ -f "$d/cuda.h" ] && { CUDA_INC=$d; break; }
done
DRIVER_CRASHES=0
if [ -n "$CUDA_INC" ] && "$CC" -O2 -D_POSIX_C_SOURCE=200809L -I"$CUDA_INC" -o "$WORK/driver_race" "$SRC/driver_race.c" \
    -L"$CUDA_INC/../lib64/stubs" -lcuda -lpthread; then
    : > "$OUT/driver-race.log"
    for run in "eager -" "record thread_local" "record thread_local" "record thread_local" "record global" \
        "record global" "record relaxed" "record relaxed"; do
        read -r mode cmode <<< "$run"
        [ "$cmode" = - ] && cmode=""
        # shellcheck disable=SC2086 # an empty capture mode is no argument
        timeout 60 "$WORK/driver_race" "$ROOT/kernels/elementwise.ptx" "$mode" "${RACE_SECONDS:-3}" $cmode \
            >> "$OUT/driver-race.log" 2>&1
        rc=$?
        verdict="survived"
        [ "$rc" -eq 139 ] && verdict="CRASHED (SIGSEGV)" && [ "$mode" = record ] && DRIVER_CRASHES=$((DRIVER_CRASHES + 1))
        [ "$rc" -ne 0 ] && [ "$rc" -ne 139 ] && verdict="exit $rc"
        log "driver alone: $mode ${cmode:-(no capture)} vs a cuCtxSynchronize loop: $verdict"
        echo "RACE mode=$mode capture=${cmode:-none} rc=$rc" >> "$OUT/driver-race.log"
        if [ "$mode" = eager ] && [ "$rc" -ne 0 ]; then
            log "FAIL: the eager control must survive"
            fails=$((fails + 1))
        fi
    done
else
    log "driver check skipped: no cuda.h or the build failed"
fi

# ---------------------------------------------------------------- clients
# One process per client and configuration, so that one crash loses one row.
read -r -a WRAP <<< "${COEXIST_WRAP:-}"
: > "$OUT/coexist-cudart.log"
: > "$OUT/coexist-torch.log"
: > "$OUT/coexist-crashes.log"
log "isolated configuration: FC_ISOLATION=${FC_ISOLATION:-auto} (green where the driver has them, else private)"
for config in isolated primary-retry primary-plain; do
    log "client A: foreign_cudart --config $config"
    # shellcheck disable=SC2086 # extra arguments are split on purpose
    timeout 300 ${WRAP[@]+"${WRAP[@]}"} "$WORK/foreign_cudart" --device "$DEVICE" --iters "$ITERS_A" \
        --max-tries "$MAX_TRIES" --max-seconds "$MAX_SECONDS" --config "$config" ${COEXIST_A_ARGS:-} 2>&1 |
        tee -a "$OUT/coexist-cudart.log"
    rc=${PIPESTATUS[0]}
    log "client A $config exit $rc"
    [ "$rc" -eq 139 ] && echo "cudart $config" >> "$OUT/coexist-crashes.log"

    log "client B: torch_coexist.py --config $config"
    # shellcheck disable=SC2086
    timeout 300 ${WRAP[@]+"${WRAP[@]}"} "$PYTHON" "$SRC/torch_coexist.py" --fcside "$WORK/libfcside.so" \
        --fclib "$LIBDIR/libfcgraph.so" --device "$DEVICE" --iters "$ITERS_B" --max-tries "$MAX_TRIES" \
        --max-seconds "$MAX_SECONDS" --config "$config" ${COEXIST_B_ARGS:-} 2>&1 | tee -a "$OUT/coexist-torch.log"
    rc=${PIPESTATUS[0]}
    log "client B $config exit $rc"
    [ "$rc" -eq 139 ] && echo "torch $config" >> "$OUT/coexist-crashes.log"
done
export DRIVER_CRASHES

# ---------------------------------------------------------------- table
if ! "$PYTHON" - "$OUT/coexist-crashes.log" "$OUT/coexist-cudart.log" "$OUT/coexist-torch.log" "$OUT/coexistence.md" << 'EOF'
import os, shlex, sys

crashes_path, *logs, out = sys.argv[1:]
crashed = set()
try:
    crashed = {tuple(l.split()) for l in open(crashes_path) if l.strip()}
except OSError:
    pass
driver_crashes = int(os.environ.get("DRIVER_CRASHES", "0"))
rows = {}
for path in logs:
    try:
        lines = open(path, encoding="utf-8", errors="replace").read().splitlines()
    except OSError:
        continue
    for line in lines:
        if line.startswith("COEXIST "):
            kv = dict(t.split("=", 1) for t in shlex.split(line[len("COEXIST "):]) if "=" in t)
            rows[(kv.get("client"), kv.get("config"))] = kv

def g(kv, k):
    return kv.get(k, "?")

head = ("| client | configuration | verdict | fc ok / iterations | fc failed (invalidated / other) "
        "| recordings invalidated | graphs retried | max tries | tries histogram | fc wrong "
        "| foreign iterations | foreign calls | foreign failed (sync / alloc / capture / other) | foreign wrong |")
sep = "|" + "---|" * (head.count("|") - 1)
out_lines = [head, sep]
missing = 0
for client, name in (("cudart", "CUDA runtime (client A)"), ("torch", "PyTorch (client B)")):
    for config in ("primary-plain", "primary-retry", "isolated"):
        kv = rows.get((client, config))
        if kv is None and (client, config) in crashed and config != "isolated" and driver_crashes:
            # The process died in the driver the way driver_race.c dies
            # without fc-graph: the driver's crash, reported, not counted.
            out_lines.append(f"| {name} | {config} | DRIVER CRASH (SIGSEGV; reproduced without fc-graph) "
                             "| | | | | | | | | | | |")
            continue
        if kv is None:
            missing += 1
            why = "CRASHED" if (client, config) in crashed else "MISSING"
            out_lines.append(f"| {name} | {config} | {why} | | | | | | | | | | | |")
            continue
        out_lines.append(
            f"| {name} | {config} | {g(kv, 'verdict')} | {g(kv, 'fc_ok')} / {g(kv, 'fc_iters')} "
            f"| {g(kv, 'fc_failed')} ({g(kv, 'fc_failed_invalidated')} / {g(kv, 'fc_failed_other')}) "
            f"| {g(kv, 'fc_invalidated_recordings')} | {g(kv, 'fc_retried')} | {g(kv, 'fc_max_tries')} "
            f"| {g(kv, 'fc_tries')} | {g(kv, 'fc_wrong')} | {g(kv, 'foreign_iters')} | {g(kv, 'foreign_calls')} "
            f"| {g(kv, 'foreign_failed')} ({g(kv, 'foreign_sync_failed')} / {g(kv, 'foreign_alloc_failed')} / "
            f"{g(kv, 'foreign_capture_failed')} / {g(kv, 'foreign_other_failed')}) | {g(kv, 'foreign_wrong')} |"
        )
failing = [f"{c}/{k}: {kv.get('reason', '?')}" for (c, k), kv in sorted(rows.items()) if kv.get("verdict") != "PASS"]
text = "\n".join(out_lines) + "\n"
open(out, "w").write(text)
print("\n" + text)
for f in failing:
    print("[gpu-coexist] FAIL " + f)
if missing:
    print(f"[gpu-coexist] {missing} summary line(s) missing")
sys.exit(1 if failing or missing else 0)
EOF
then
    fails=$((fails + 1))
fi

if [ "$fails" -eq 0 ]; then
    log "all required results hold (table in $OUT/coexistence.md)"
    exit 0
fi
log "$fails step(s) missed a required result (see above and $OUT/coexist-*.log)"
exit 1
