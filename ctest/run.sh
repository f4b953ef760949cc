#!/usr/bin/env bash
# ctest/run.sh - builds and runs the C test suite of libfcgraph.
#
#   ctest/run.sh [LIBDIR]            build (into ctest/build/) and run everything
#   ctest/run.sh --build-only OUTDIR only build: OUTDIR/bin/<tests>, OUTDIR/lib/libfcgraph.so
#                                    (+ OUTDIR/include and a copy of this script)
#   ctest/run.sh --run-only DIR      run the prebuilt DIR/bin/* against DIR/lib
#
# The library comes from LIBDIR (libfcgraph.so in it), else $FC_LIBDIR, else
# `cargo build --release -p fcgraph-capi` (target/release). The installed
# library (scripts/install.sh) is checked by ctest/install-check.sh.
# Checks: SONAME is libfcgraph.so.0; the header's fc_* functions and the .so's
# exported fc_* symbols are the same set; ctest/exports.h (the hostile
# tests' table) lists every header function; the header compiles as C99
# (-pedantic) and C++11 (-Wall -Wextra -Werror). Programs: the engine's seed
# test, test_graph_capture_concurrency.c, from $FC_SEED_DIR (default
# ../shared/seeds/ beside the repository; given by the project, AGPL, never
# copied into the repository; FC_SEED_RUNS=N runs it N times, 0 not at all),
# and
# ctest/test_*.c. Without the seed, its build and its run are each counted
# as skipped, with the path looked at. A program that exits 0 printing
# [SKIP] and no [PASS] counts as skipped. Last line:
#   N passed, N failed, N skipped
# Env: FC_SEED_DIR, FC_SEED_RUNS (default 1), FC_TEST_TIMEOUT seconds per
#      program (900), CC (gcc), CXX (g++).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
CC="${CC:-gcc}"
CXX="${CXX:-g++}"
# test_cublas / test_nccl open cuBLAS / NCCL at run time and skip visibly
# without them (FC_CUBLAS_LIBRARY, FC_NCCL_LIBRARY; scripts/gpu-interop.sh
# finds PyTorch's copies and runs them with FC_REQUIRE_INTEROP=1).
TESTS=(test_no_gpu test_exit_paths test_bad_env test_elementwise test_replay test_errors test_breakable test_break_latch test_user_kernel
    test_foreign test_cublas test_nccl test_cache test_hostile test_storm)
SEED_NAME=test_graph_capture_concurrency
SEED_DIR="${FC_SEED_DIR:-$ROOT/../shared/seeds}"
SEED_SRC="$SEED_DIR/$SEED_NAME.c"
SEED_RUNS="${FC_SEED_RUNS:-1}"
TIMEOUT_S="${FC_TEST_TIMEOUT:-900}"

NAME_WIDTH=40
SKIP_DETAIL_CHARS=100
# section, record, finish, run_prog; and scripts/lib.sh's log, die, usage
# shellcheck source=ctest/report.sh
. "$HERE/report.sh"

# ---- the library -------------------------------------------------------------

lib_in() { # lib_in DIR -> path of the library in DIR
    local f
    for f in libfcgraph.so; do
        if [[ -f "$1/$f" ]]; then
            printf '%s\n' "$1/$f"
            return 0
        fi
    done
    return 1
}

locate_lib() { # locate_lib [LIBDIR] -> path of the built library
    local dir=${1:-${FC_LIBDIR:-}}
    if [[ -n $dir ]]; then
        lib_in "$dir" || die "no libfcgraph.so in $dir"
        return 0
    fi
    command -v cargo >/dev/null || die "no LIBDIR, no FC_LIBDIR and no cargo to build the library"
    log "building: cargo build --release -p fcgraph-capi" >&2
    (cd "$ROOT" && cargo build --release -p fcgraph-capi) >&2 || die "cargo build --release -p fcgraph-capi failed"
    lib_in "${CARGO_TARGET_DIR:-$ROOT/target}/release" || die "cargo built no libfcgraph.so"
}

# ---- checks ------------------------------------------------------------------

check_soname() { # check_soname LIB
    local soname
    if ! command -v readelf >/dev/null; then
        record SKIP "soname" "readelf not found"
        return 0
    fi
    soname=$(readelf -d "$1" | sed -n 's/.*(SONAME).*\[\(.*\)\].*/\1/p')
    log "SONAME of $1: ${soname:-<none>}"
    if [[ $soname == libfcgraph.so.0 ]]; then
        record PASS "soname" "libfcgraph.so.0"
    else
        record FAIL "soname" "is '${soname:-<none>}', want libfcgraph.so.0"
    fi
}

header_functions() { # header_functions HEADER: fc_* functions it declares
    # Preprocess (drops comments), then take identifiers followed by '('.
    # The typedef (*fc_break_fn)(...) has ')' after the name and is skipped.
    "$CC" -E -P -x c "$1" | grep -oE '\bfc_[A-Za-z0-9_]+[[:space:]]*\(' | sed 's/[[:space:](]//g' | sort -u
}

check_exports() { # check_exports LIB HEADER
    local lib=$1 header=$2 tmp missing extra
    if ! command -v nm >/dev/null || ! command -v "$CC" >/dev/null; then
        record SKIP "exports == header" "nm or $CC not found"
        return 0
    fi
    tmp=$(mktemp -d)
    header_functions "$header" >"$tmp/declared"
    nm -D --defined-only "$lib" | awk '{print $NF}' | sed 's/@.*//' | grep -E '^fc_' | sort -u >"$tmp/exported" || true
    missing=$(comm -23 "$tmp/declared" "$tmp/exported" | tr '\n' ' ')
    extra=$(comm -13 "$tmp/declared" "$tmp/exported" | tr '\n' ' ')
    log "header declares $(wc -l <"$tmp/declared") fc_* functions; the library exports $(wc -l <"$tmp/exported") fc_* symbols"
    rm -rf "$tmp"
    if [[ -z $missing && -z $extra ]]; then
        record PASS "exports == header"
    else
        [[ -n $missing ]] && log "  declared in the header but not exported: $missing"
        [[ -n $extra ]] && log "  exported but not declared in the header: $extra"
        record FAIL "exports == header" "missing: ${missing:-none}; undeclared: ${extra:-none}"
    fi
}

check_matrix_covers_exports() { # check_matrix_covers_exports HEADER TABLE
    local header=$1 table=$2 tmp missing extra
    tmp=$(mktemp -d)
    header_functions "$header" >"$tmp/declared"
    grep -oE 'CT_EXPORT\(fc_[A-Za-z0-9_]+' "$table" | sed 's/CT_EXPORT(//' | sort -u >"$tmp/listed"
    missing=$(comm -23 "$tmp/declared" "$tmp/listed" | tr '\n' ' ')
    extra=$(comm -13 "$tmp/declared" "$tmp/listed" | tr '\n' ' ')
    rm -rf "$tmp"
    if [[ -z $missing && -z $extra ]]; then
        record PASS "hostile tests cover every export"
    else
        record FAIL "hostile tests cover every export" "not in ctest/exports.h: ${missing:-none}; not in the header: ${extra:-none}"
    fi
}

check_header_compiles() { # check_header_compiles INCLUDE_DIR
    local inc=$1 out
    if out=$(printf '#include "cuda/fc_cuda.h"\nint fc_ctest_tu;\n' |
        "$CC" -std=c99 -pedantic -Wall -Wextra -Werror -fsyntax-only -x c -I "$inc" - 2>&1); then
        record PASS "header as C99 -pedantic"
    else
        log "$out"
        record FAIL "header as C99 -pedantic"
    fi
    if ! command -v "$CXX" >/dev/null; then
        record SKIP "header as C++11" "$CXX not found"
        return 0
    fi
    if out=$(printf '#include "cuda/fc_cuda.h"\nstatic_assert(FC_OK == 0, "FC_OK");\nint fc_ctest_tu;\n' |
        "$CXX" -std=c++11 -Wall -Wextra -Werror -fsyntax-only -x c++ -I "$inc" - 2>&1); then
        record PASS "header as C++11"
    else
        log "$out"
        record FAIL "header as C++11"
    fi
}

# ---- building ----------------------------------------------------------------

# build_all OUT LIB: copies LIB to OUT/lib/libfcgraph.so, runs the checks and
# compiles every program into OUT/bin (rpath $ORIGIN/../lib).
build_all() {
    local out=$1 lib=$2 t
    mkdir -p "$out/bin" "$out/lib"
    if [[ ! "$lib" -ef "$out/lib/libfcgraph.so" ]]; then
        rm -f "$out/lib/libfcgraph.so" "$out/lib/libfcgraph.so.0"
        cp "$lib" "$out/lib/libfcgraph.so"
    fi
    # The programs record the soname, libfcgraph.so.0, as their dependency.
    ln -sf libfcgraph.so "$out/lib/libfcgraph.so.0"
    log "library: $lib -> $out/lib/libfcgraph.so"

    section checks
    check_soname "$out/lib/libfcgraph.so"
    check_exports "$out/lib/libfcgraph.so" "$ROOT/include/cuda/fc_cuda.h"
    check_matrix_covers_exports "$ROOT/include/cuda/fc_cuda.h" "$HERE/exports.h"
    check_header_compiles "$ROOT/include"

    section build
    local link=(-L "$out/lib" -lfcgraph -lpthread -lm -ldl '-Wl,-rpath,$ORIGIN/../lib')
    if [[ -f $SEED_SRC ]]; then
        rm -f "$out/bin/$SEED_NAME"
        log "$CC -std=c11 -O2 -Wall -Wextra -I include $SEED_SRC ... -o $out/bin/$SEED_NAME"
        if "$CC" -std=c11 -O2 -Wall -Wextra -I "$ROOT/include" "$SEED_SRC" "${link[@]}" -o "$out/bin/$SEED_NAME"; then
            record PASS "build $SEED_NAME"
        else
            record FAIL "build $SEED_NAME"
        fi
    else
        log "no seed at $SEED_SRC; skipping it (set FC_SEED_DIR to the folder holding $SEED_NAME.c)"
        record SKIP "build $SEED_NAME" "no $SEED_SRC (FC_SEED_DIR)"
    fi
    for t in "${TESTS[@]}"; do
        rm -f "$out/bin/$t"
        if build_one "$out" "$t" "${link[@]}"; then
            record PASS "build $t"
        else
            record FAIL "build $t"
        fi
    done
}

# cxx_part_of NAME: the C++ file (without .cpp) linked into ctest/NAME.c, if
# any. test_exit_paths needs exit_paths_cxx.cpp (its C++ destructors); without
# $CXX it is built with -DFC_NO_CXX and those scenarios print [SKIP].
cxx_part_of() {
    case $1 in
    test_exit_paths) echo exit_paths_cxx ;;
    esac
}

# build_one OUT NAME LINK...: compiles ctest/NAME.c (and its C++ part) into
# OUT/bin/NAME.
build_one() {
    local out=$1 t=$2 cxx_part obj rc
    shift 2
    local cflags=(-std=c11 -O2 -Wall -Wextra -Werror -ffp-contract=off -I "$ROOT/include" -I "$HERE")
    cxx_part=$(cxx_part_of "$t")
    if [[ -z $cxx_part ]]; then
        log "$CC ${cflags[*]} ctest/$t.c ... -o $out/bin/$t"
        "$CC" "${cflags[@]}" "$HERE/$t.c" "$@" -o "$out/bin/$t"
        return
    fi
    if ! command -v "$CXX" >/dev/null; then
        log "$CXX not found: $t is built without its C++ part (-DFC_NO_CXX)"
        "$CC" "${cflags[@]}" -DFC_NO_CXX "$HERE/$t.c" "$@" -o "$out/bin/$t"
        return
    fi
    obj=$(mktemp -d)
    log "$CC ${cflags[*]} -c ctest/$t.c; $CXX -std=c++11 -c ctest/$cxx_part.cpp; $CXX ... -o $out/bin/$t"
    rc=0
    "$CC" "${cflags[@]}" -c "$HERE/$t.c" -o "$obj/$t.o" &&
        "$CXX" -std=c++11 -O2 -Wall -Wextra -Werror -I "$ROOT/include" -c "$HERE/$cxx_part.cpp" -o "$obj/$cxx_part.o" &&
        "$CXX" "$obj/$t.o" "$obj/$cxx_part.o" "$@" -o "$out/bin/$t" || rc=$?
    rm -rf "$obj"
    return $rc
}

# ---- running -----------------------------------------------------------------

# run_all DIR: runs DIR/bin/* (seed FC_SEED_RUNS times), logs in DIR/logs.
run_all() {
    local dir=$1 logs t i ok before
    logs="$dir/logs"
    mkdir -p "$logs" 2>/dev/null && [[ -w $logs ]] || logs=$(mktemp -d)
    section run
    log "binaries: $dir/bin, logs: $logs"
    if command -v ldd >/dev/null && [[ -x $dir/bin/${TESTS[0]} ]]; then
        log "resolved: $(ldd "$dir/bin/${TESTS[0]}" | grep libfcgraph || echo 'libfcgraph not resolved')"
    fi
    if [[ $SEED_RUNS == 0 ]]; then
        log "seed: not run here (FC_SEED_RUNS=0: its caller runs it)"
    elif [[ -x $dir/bin/$SEED_NAME ]]; then
        [[ $SEED_RUNS =~ ^[0-9]+$ ]] || die "FC_SEED_RUNS must be a number, got '$SEED_RUNS'"
        ok=0
        for ((i = 1; i <= SEED_RUNS; i++)); do
            before=$PASSED
            run_prog "$SEED_NAME [$i/$SEED_RUNS]" "$dir/bin/$SEED_NAME" "$logs/$SEED_NAME.$i.log"
            [[ $PASSED -gt $before ]] && ok=$((ok + 1))
        done
        log "seed: $ok/$SEED_RUNS runs passed"
    else
        log "no seed binary ($dir/bin/$SEED_NAME); skipping it"
        record SKIP "$SEED_NAME" "not built: no seed source (FC_SEED_DIR, default ../shared/seeds/)"
    fi
    for t in "${TESTS[@]}"; do
        if [[ -x $dir/bin/$t ]]; then
            run_prog "$t" "$dir/bin/$t" "$logs/$t.log"
        else
            record FAIL "$t" "no binary $dir/bin/$t"
        fi
    done
}

# ---- main --------------------------------------------------------------------

case "${1:-}" in
-h | --help)
    usage
    exit 0
    ;;
--build-only)
    [[ $# -eq 2 ]] || die "usage: ctest/run.sh --build-only OUTDIR"
    mkdir -p "$2"
    OUT="$(cd "$2" && pwd)"
    LIB=$(locate_lib "")
    build_all "$OUT" "$LIB"
    mkdir -p "$OUT/include/cuda"
    cp "$ROOT/include/cuda/fc_cuda.h" "$OUT/include/cuda/fc_cuda.h"
    if [[ "$HERE/run.sh" != "$OUT/run.sh" ]]; then cp "$HERE/run.sh" "$OUT/run.sh"; fi
    log "built into $OUT; run there with: $OUT/run.sh --run-only $OUT"
    finish
    ;;
--run-only)
    [[ $# -eq 2 ]] || die "usage: ctest/run.sh --run-only DIR"
    DIR="$(cd "$2" && pwd)"
    [[ -f $DIR/lib/libfcgraph.so ]] || die "no $DIR/lib/libfcgraph.so"
    section checks
    check_soname "$DIR/lib/libfcgraph.so"
    for H in "$DIR/include/cuda/fc_cuda.h" "$ROOT/include/cuda/fc_cuda.h"; do
        if [[ -f $H ]]; then
            check_exports "$DIR/lib/libfcgraph.so" "$H"
            break
        fi
    done
    run_all "$DIR"
    finish
    ;;
-*)
    die "unknown option $1 (see --help)"
    ;;
*)
    [[ $# -le 1 ]] || die "usage: ctest/run.sh [LIBDIR]"
    OUT="$HERE/build"
    LIB=$(locate_lib "${1:-}")
    build_all "$OUT" "$LIB"
    run_all "$OUT"
    finish
    ;;
esac
