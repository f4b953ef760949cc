#!/usr/bin/env bash
# gpu-coexist.sh - fc-graph beside other CUDA clients on the same GPU, in the
# same process (issue 9, item 5). Run on the GPU machine from the repo root,
# with the bundle of scripts/build-gpu-bundle.sh in .bundle/:
#
#   bash scripts/gpu-coexist.sh
#
# Builds, there:
#   libfcside.so       ctest/coexist/fc_side.c (the fc side: 26-kernel recordings,
#                      instantiate, replay, exact check; cuBLAS opened at run time
#                      for isolated-cublas) against .bundle/lib/libfcgraph.so
#   fc_side_selftest   verdict logic, FC_RECORDING rules, the time cap's floor, and
#                      quiet loops on isolated, primary and (where cuBLAS is found)
#                      isolated-cublas contexts
#   foreign_cudart     ctest/coexist/foreign_cudart.cu with nvcc (client A)
# and runs client A (CUDA runtime thread: kernels, cudaDeviceSynchronize,
# cudaMalloc/cudaFree, GLOBAL captures) and client B (ctest/coexist/
# torch_coexist.py: torch.cuda.graph captures, eager work,
# torch.cuda.synchronize, empty_cache), one process per client and
# configuration, in these configurations:
#   primary-plain    primary context, begin/end, the default recording (built
#                    node by node: no stream captures). Required: 0 fc failures,
#                    0 invalidated recordings, 0 foreign failures, and at least
#                    1000 record + instantiate + replay iterations (the time cap
#                    never stops a loop before 1000; the count is printed).
#   primary-retry    primary context, fc_graph_capture_ctx, the default
#                    recording. Required: 0 fc failures, 0 invalidated
#                    recordings (no graph retried), 0 foreign failures.
#   isolated         isolated context, begin/end. Required: 0 failures on either
#                    side. A green context where the driver has them (CUDA
#                    12.4+), else private; FC_ISOLATION=private forces cuCtxCreate.
#   primary-capture  primary-plain with FC_RECORDING=capture: the old
#                    stream-capture path, the informational control. Expected to
#                    see invalidations; it may die in the driver (SIGSEGV in
#                    cuCtxSynchronize, docs/coexistence.md). Its outcome, a crash
#                    included, is reported in the table (verdict INFO); it never
#                    fails the script.
#   isolated-cublas  client B only: an isolated context whose recordings hold our
#                    kernels and a cuBLAS SGEMM on fc_ctx_stream(ctx) (so it
#                    records by stream capture), small integer matrices checked
#                    exactly. Required: 0 failures on either side. cuBLAS is
#                    $FC_CUBLAS_LIBRARY, else PyTorch's, else NVIDIA's wheels,
#                    else the system's; without one the row is SKIP with the
#                    reason (FC_REQUIRE_INTEROP=1 makes that a failure).
# and 0 wrong results in every required configuration. FC_RECORDING is
# removed from the clients' environment except for primary-capture (the
# library reads it once per process). Prints a summary table (also written
# to $OUT/coexistence.md; logs in $OUT/coexist-*.log) and, per row, the fc
# iterations run.
#
# Exit status: 0 when every required result holds, 1 when one is missed or a
# required client's summary is missing (a crash, a timeout), 2 when something
# could not be built or a setting is out of range.
#
# Environment:
#   OUT=/tmp/fc-coexist      where logs and the table go
#   COEXIST_DEVICE=0         the GPU
#   COEXIST_ITERS_A=20000    fc iterations per configuration, client A (>= 1000)
#   COEXIST_ITERS_B=20000    fc iterations per configuration, client B (>= 1000)
#   COEXIST_MAX_SECONDS=25   cap on each configuration's fc loop, applied only once
#                            1000 iterations ran
#   COEXIST_MAX_TRIES=64     max_tries of fc_graph_capture_ctx
#   COEXIST_TIMEOUT=300      seconds per client process
#   COEXIST_A_ARGS=""        extra arguments of foreign_cudart (--reps, --pause-us ...)
#   COEXIST_B_ARGS=""        extra arguments of torch_coexist.py (--work-elems ...)
#   COEXIST_WRAP=""          a command the clients run under, split on blanks, e.g.
#                            "cuda-gdb -q -batch -ex run -ex bt --args"
#   FC_ISOLATION=auto        what the isolated configurations get: auto (green where
#                            possible), green, or private (the pre-green behaviour)
#   FC_CUBLAS_LIBRARY        the cuBLAS of isolated-cublas (and of the selftest)
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
TIMEOUT=${COEXIST_TIMEOUT:-300}
MIN_ITERS=1000 # FC_SIDE_MIN_ITERS (fc_side.h): what primary-plain requires
CONFIGS_A="isolated primary-plain primary-retry primary-capture"
CONFIGS_B="isolated isolated-cublas primary-plain primary-retry primary-capture"
CC=${CC:-gcc}
PYTHON=${PYTHON:-python3}
LIBDIR="$ROOT/.bundle/lib"
SRC="$ROOT/ctest/coexist"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/fc-coexist.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

# log, die (lib.sh)
. "$ROOT/scripts/lib.sh"
LOG_PREFIX="[gpu-coexist] "

for v in ITERS_A ITERS_B; do
    case ${!v} in
    '' | *[!0-9]*) die "COEXIST_$v=${!v}: not a number" ;;
    esac
    [ "${!v}" -ge "$MIN_ITERS" ] || die "COEXIST_$v=${!v}: primary-plain requires at least $MIN_ITERS fc iterations"
done
case $TIMEOUT in '' | *[!0-9]*) die "COEXIST_TIMEOUT=$TIMEOUT: not a number" ;; esac

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
    "$SRC/fc_side.c" -L"$LIBDIR" -lfcgraph -ldl -Wl,-rpath,"$LIBDIR" || die "building libfcside.so failed"
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
# The selftest's cuBLAS: $FC_CUBLAS_LIBRARY, else NVIDIA's wheels of $PYTHON
# (torch_coexist.py's search), else fc_side's default names (the system's).
SELFTEST_CUBLAS=${FC_CUBLAS_LIBRARY:-$(PYTHONDONTWRITEBYTECODE=1 "$PYTHON" -c \
    'import sys; sys.path.insert(0, sys.argv[1]); import torch_coexist as t; print(t.wheel_cublas(-1) or "")' \
    "$SRC" 2> /dev/null)}
log "fc_side_selftest (FC_RECORDING unset; cuBLAS: ${SELFTEST_CUBLAS:-the default names})"
SELFTEST_ENV=(env -u FC_RECORDING)
[ -n "$SELFTEST_CUBLAS" ] && SELFTEST_ENV+=("FC_CUBLAS_LIBRARY=$SELFTEST_CUBLAS")
"${SELFTEST_ENV[@]}" "$WORK/fc_side_selftest" 2>&1 | tee "$OUT/coexist-selftest.log"
[ "${PIPESTATUS[0]}" -eq 0 ] || { log "fc_side_selftest FAILED"; fails=$((fails + 1)); }

# ---------------------------------------------------------------- driver check
# The driver alone (ctest/coexist/driver_race.c, no fc-graph): one thread
# captures on a primary context while another loops cuCtxSynchronize on it.
# On driver 580 this crashes the process (SIGSEGV in cuCtxSynchronize) within
# seconds; the eager control (no capture) must not. Reported, not counted:
# a crash there is the driver's, the one the primary-capture control (the
# old stream-capture path) may meet; the default recording builds its graphs
# without capturing and must never meet it.
CUDA_INC=""
for d in "${CUDA_HOME:-/nonexistent}/include" /usr/local/cuda/include "$(dirname "$NVCC")/../include"; do
    [ -f "$d/cuda.h" ] && { CUDA_INC=$d; break; }
done
DRIVER_CRASHES=0
DRIVER_RECORD_RUNS=0
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
        [ "$mode" = record ] && DRIVER_RECORD_RUNS=$((DRIVER_RECORD_RUNS + 1))
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
# One process per client and configuration, so that one crash loses one row,
# and FC_RECORDING (read once per process) is what the configuration needs.
read -r -a WRAP <<< "${COEXIST_WRAP:-}"
: > "$OUT/coexist-cudart.log"
: > "$OUT/coexist-torch.log"
: > "$OUT/coexist-rc.log"
log "isolated configurations: FC_ISOLATION=${FC_ISOLATION:-auto} (green where the driver has them, else private)"
log "fc iterations per configuration: client A $ITERS_A, client B $ITERS_B; the ${MAX_SECONDS} s cap applies" \
    "only after $MIN_ITERS"
# client_env CONFIG: the environment command of one run (ENVCMD).
client_env() {
    if [ "$1" = primary-capture ]; then
        ENVCMD=(env FC_RECORDING=capture) ENVDESC="FC_RECORDING=capture"
    else
        ENVCMD=(env -u FC_RECORDING) ENVDESC="FC_RECORDING unset"
    fi
}
# note_rc CLIENT CONFIG RC: for the table, and in words in the log.
note_rc() {
    local what="exit $3"
    [ "$3" -eq 124 ] && what="TIMED OUT after ${TIMEOUT}s"
    [ "$3" -eq 137 ] && what="KILLED (SIGKILL; timeout)"
    [ "$3" -gt 128 ] && [ "$3" -ne 137 ] && what="exit $3 (signal $(($3 - 128))$(kill -l $(($3 - 128)) 2> /dev/null |
        sed 's/^/, SIG/'))"
    log "client $1 $2 ($ENVDESC): $what"
    echo "$1 $2 $3" >> "$OUT/coexist-rc.log"
}
for config in $CONFIGS_A; do
    client_env "$config"
    log "client A: foreign_cudart --config $config"
    # shellcheck disable=SC2086 # extra arguments are split on purpose
    timeout --kill-after=10 "$TIMEOUT" "${ENVCMD[@]}" ${WRAP[@]+"${WRAP[@]}"} "$WORK/foreign_cudart" \
        --device "$DEVICE" --iters "$ITERS_A" --max-tries "$MAX_TRIES" --max-seconds "$MAX_SECONDS" \
        --config "$config" ${COEXIST_A_ARGS:-} 2>&1 | tee -a "$OUT/coexist-cudart.log"
    note_rc cudart "$config" "${PIPESTATUS[0]}"
done
for config in $CONFIGS_B; do
    client_env "$config"
    log "client B: torch_coexist.py --config $config"
    # shellcheck disable=SC2086
    timeout --kill-after=10 "$TIMEOUT" "${ENVCMD[@]}" ${WRAP[@]+"${WRAP[@]}"} "$PYTHON" "$SRC/torch_coexist.py" \
        --fcside "$WORK/libfcside.so" --fclib "$LIBDIR/libfcgraph.so" --device "$DEVICE" --iters "$ITERS_B" \
        --max-tries "$MAX_TRIES" --max-seconds "$MAX_SECONDS" --config "$config" ${COEXIST_B_ARGS:-} 2>&1 |
        tee -a "$OUT/coexist-torch.log"
    note_rc torch "$config" "${PIPESTATUS[0]}"
done
export DRIVER_CRASHES DRIVER_RECORD_RUNS CONFIGS_A CONFIGS_B MIN_ITERS

# ---------------------------------------------------------------- table
if ! "$PYTHON" - "$OUT/coexist-rc.log" "$OUT/coexistence.md" "$OUT/coexist-cudart.log" "$OUT/coexist-torch.log" \
    << 'EOF'
import os, shlex, signal, sys

rc_path, out, *logs = sys.argv[1:]
INFORMATIONAL = {"primary-capture"}  # the control: reported, never a failure
CLIENTS = (
    ("cudart", "CUDA runtime (client A)", os.environ.get("CONFIGS_A", "").split()),
    ("torch", "PyTorch (client B)", os.environ.get("CONFIGS_B", "").split()),
)
min_iters = int(os.environ.get("MIN_ITERS", "1000"))
driver_crashes = int(os.environ.get("DRIVER_CRASHES", "0"))
driver_runs = int(os.environ.get("DRIVER_RECORD_RUNS", "0"))

rcs = {}
try:
    for l in open(rc_path):
        parts = l.split()
        if len(parts) == 3:
            rcs[(parts[0], parts[1])] = int(parts[2])
except (OSError, ValueError):
    pass


def fields(line, prefix):
    return dict(t.split("=", 1) for t in shlex.split(line[len(prefix):]) if "=" in t)


rows, errors = {}, {}
for path in logs:
    try:
        lines = open(path, encoding="utf-8", errors="replace").read().splitlines()
    except OSError:
        continue
    for line in lines:
        try:
            if line.startswith("COEXIST "):
                kv = fields(line, "COEXIST ")
                rows[(kv.get("client"), kv.get("config"))] = kv
            elif line.startswith("COEXIST-ERRORS "):
                kv = fields(line, "COEXIST-ERRORS ")
                errors[(kv.get("client"), kv.get("config"))] = kv
        except ValueError:  # an unbalanced quote: a torn line
            print("[gpu-coexist] unreadable summary line: " + line[:200])


def how_it_ended(rc):
    """The client process's end in words ("" for exit 0)."""
    if rc is None:
        return "not run"
    if rc == 0:
        return ""
    if rc == 124:
        return "TIMED OUT"
    if rc > 128:
        try:
            name = signal.Signals(rc - 128).name
        except ValueError:
            name = "signal %d" % (rc - 128)
        return "CRASHED (%s)" % name + (" or timed out" if rc == 137 else "")
    return "exit %d" % rc


def g(kv, k):
    return kv.get(k, "?")


head = ("| client | configuration | FC_RECORDING | verdict | fc ok / iterations | fc failed (invalidated / other) "
        "| recordings invalidated | graphs retried | max tries | tries histogram | fc wrong "
        "| foreign iterations | foreign calls | foreign failed (sync / alloc / capture / other) | foreign wrong |")
ncols = head.count("|") - 1
sep = "|" + "---|" * ncols
out_lines, failing, counts, notes = [head, sep], [], [], []
driver_note = (f"; driver_race.c: {driver_crashes} of {driver_runs} capture runs crashed without fc-graph"
               if driver_runs else "")
for client, name, configs in CLIENTS:
    for config in configs:
        key = (client, config)
        kv, rc = rows.get(key), rcs.get(key)
        ended = how_it_ended(rc)
        info = config in INFORMATIONAL
        if kv is None:
            what = ended if ended else "exit 0"
            recording = "capture" if config == "primary-capture" else "auto"
            if info:
                verdict = f"INFO: {what}, no summary (old stream-capture path{driver_note})"
            else:
                verdict = f"FAIL: {what}, no summary"
                failing.append(f"{client}/{config}: {what}, no summary line")
            out_lines.append(f"| {name} | {config} | {recording} | {verdict} |" + " |" * (ncols - 4))
            continue
        v = kv.get("verdict", "?")
        if info:
            verdict = "INFO (control)" + (f"; then {ended}{driver_note}" if ended else "")
        elif v == "FAIL":
            verdict = "FAIL" + (f" ({ended})" if ended and rc != 1 else "")
            failing.append(f"{client}/{config}: {kv.get('reason', '?')}")
        elif v in ("PASS", "SKIP") and ended:
            verdict = f"FAIL ({v}, then {ended})"
            failing.append(f"{client}/{config}: {v} summary, then {ended}")
        elif v == "PASS":
            verdict = "PASS"
        elif v == "SKIP":
            why = kv.get("reason", "?").replace("skipped: ", "", 1)
            verdict = "SKIP (" + (why[:90] + ("..." if len(why) > 90 else "")).replace("|", "/") + ")"
        else:
            verdict = f"FAIL (verdict {v})"
            failing.append(f"{client}/{config}: unknown verdict {v}")
        out_lines.append(
            f"| {name} | {config} | {g(kv, 'recording')} | {verdict} | {g(kv, 'fc_ok')} / {g(kv, 'fc_iters')} "
            f"| {g(kv, 'fc_failed')} ({g(kv, 'fc_failed_invalidated')} / {g(kv, 'fc_failed_other')}) "
            f"| {g(kv, 'fc_invalidated_recordings')} | {g(kv, 'fc_retried')} | {g(kv, 'fc_max_tries')} "
            f"| {g(kv, 'fc_tries')} | {g(kv, 'fc_wrong')} | {g(kv, 'foreign_iters')} | {g(kv, 'foreign_calls')} "
            f"| {g(kv, 'foreign_failed')} ({g(kv, 'foreign_sync_failed')} / {g(kv, 'foreign_alloc_failed')} / "
            f"{g(kv, 'foreign_capture_failed')} / {g(kv, 'foreign_other_failed')}) | {g(kv, 'foreign_wrong')} |"
        )
        if v != "SKIP":
            capped = ", stopped by the time cap" if kv.get("fc_time_capped") == "1" else ""
            need = f" (at least {min_iters} required)" if config == "primary-plain" else ""
            counts.append(f"{client} {config}: {g(kv, 'fc_iters')} fc record + instantiate + replay iterations, "
                          f"{g(kv, 'fc_ok')} exact, in {g(kv, 'fc_seconds')} s{capped}{need}")
        e = errors.get(key, {})
        parts = [f"{label}: {e[f]}" for label, f in (("fc side", "fc_note"), ("first fc error", "fc_first_error"),
                                                     ("first foreign error", "foreign_first_error"))
                 if e.get(f, "none") != "none"]
        if v != "PASS" and kv.get("reason"):
            parts.append("reason: " + kv["reason"])
        if parts:
            notes.append(f"- {name}, {config}: " + "; ".join(parts))
text = "\n".join(out_lines) + "\n"
if notes:
    text += "\n" + "\n".join(notes) + "\n"
open(out, "w").write(text)
print("\n" + text)
for c in counts:
    print("[gpu-coexist] " + c)
for f in failing:
    print("[gpu-coexist] FAIL " + f)
sys.exit(1 if failing else 0)
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
