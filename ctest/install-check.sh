#!/usr/bin/env bash
# ctest/install-check.sh - checks an installed libfcgraph the way its users
# meet it: the install tree's files, then a C program built against it with
# pkg-config and with CMake (find_package(fcgraph 0.1), fcgraph::fcgraph and
# fcgraph::fcgraph_static), each linked once against libfcgraph.so and once
# against libfcgraph.a, then run.
#
#   ctest/install-check.sh                        install (scripts/install.sh) into a
#                                                 temporary prefix, check, build, run
#   ctest/install-check.sh --prefix DIR           the same for the install tree in DIR
#                                                 (no cargo needed)
#   ctest/install-check.sh --prefix DIR --build-only OUT   check, build into OUT/bin
#   ctest/install-check.sh --prefix DIR --run-only OUT     run OUT/bin/* against DIR/lib
#
# The program is the engine's seed test ../shared/seeds/
# test_graph_capture_concurrency.c ($FC_SEED, or in $FC_SEED_DIR), unmodified; where that folder
# is absent, ctest/test_errors.c. Without a GPU the programs print [SKIP] and
# exit 0, which counts as skipped; exit 0 with [PASS] and no [FAIL] passes;
# anything else fails. Last line: N passed, N failed, N skipped.
# A tree moved after installing works: CMake's package finds its prefix
# itself, pkg-config gets --define-prefix, programs run with
# LD_LIBRARY_PATH=DIR/lib.
# Env: FC_REQUIRE_INSTALL_TOOLS=1 makes a missing cc, pkg-config or cmake a
#      failure (scripts/test.sh, CI) instead of a skip; FC_SEED_RUNS (1);
#      FC_TEST_TIMEOUT seconds per program (900); CC (cc).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
CC="${CC:-cc}"
SEED_RUNS="${FC_SEED_RUNS:-1}"
TIMEOUT_S="${FC_TEST_TIMEOUT:-900}"
REQUIRE_TOOLS="${FC_REQUIRE_INSTALL_TOOLS:-0}"

TOOLS_MISSING=0
NAME_WIDTH=56
SKIP_DETAIL_CHARS=90
# log, section, record, finish, run_prog
# shellcheck source=ctest/report.sh
. "$HERE/report.sh"
check() { # check NAME DETAIL COMMAND...: PASS when COMMAND succeeds
    local name=$1 detail=$2
    shift 2
    if "$@"; then record PASS "$name" "$detail"; else record FAIL "$name" "$detail"; fi
}
have_tool() { # have_tool TOOL WHAT: true when TOOL exists; else records a skip/fail
    command -v "$1" >/dev/null && return 0
    TOOLS_MISSING=1
    if [[ $REQUIRE_TOOLS == 1 ]]; then
        record FAIL "$2" "$1 not found (FC_REQUIRE_INSTALL_TOOLS=1)"
    else
        record SKIP "$2" "$1 not found on this machine"
    fi
    return 1
}
same_nonempty() { test -s "$1" && cmp -s "$1" "$2"; }
soname_of() { readelf -d "$1" | sed -n 's/.*(SONAME).*\[\(.*\)\].*/\1/p'; }
needs_libfcgraph() { readelf -d "$1" | grep -q 'NEEDED.*\[libfcgraph\.so'; }
no_libfcgraph() { ! needs_libfcgraph "$1"; }
needs_soname() { readelf -d "$1" | grep -q "NEEDED.*\[libfcgraph\.so\.$MAJOR\]"; }

# ---- the version this tree should hold ------------------------------------

VERSION=$(workspace_version)
[[ $VERSION =~ ^([0-9]+)\.([0-9]+)\.([0-9]+)$ ]] || die "no X.Y.Z version in [workspace.package] of Cargo.toml"
MAJOR=${BASH_REMATCH[1]} MINOR=${BASH_REMATCH[2]}

# ---- the install tree ------------------------------------------------------

check_tree() { # check_tree PREFIX
    local p=$1 lib=$1/lib f missing=""
    section "install tree: $p"
    for f in "lib/libfcgraph.so.$VERSION" "lib/libfcgraph.so.$MAJOR" lib/libfcgraph.so lib/libfcgraph.a \
        include/cuda/fc_cuda.h lib/pkgconfig/fcgraph.pc lib/cmake/fcgraph/fcgraphConfig.cmake \
        lib/cmake/fcgraph/fcgraphConfigVersion.cmake bin/fcgraph; do
        [[ -e $p/$f ]] || missing="$missing $f"
    done
    check "files" "${missing:+missing:$missing}" test -z "$missing"
    check "symlinks" "libfcgraph.so -> .so.$MAJOR -> .so.$VERSION" \
        test "$(readlink "$lib/libfcgraph.so" 2>/dev/null)" = "libfcgraph.so.$MAJOR" -a \
        "$(readlink "$lib/libfcgraph.so.$MAJOR" 2>/dev/null)" = "libfcgraph.so.$VERSION"
    if command -v readelf >/dev/null; then
        local soname
        soname=$(soname_of "$lib/libfcgraph.so.$VERSION" 2>/dev/null || true)
        check "soname" "${soname:-none} (want libfcgraph.so.$MAJOR)" test "$soname" = "libfcgraph.so.$MAJOR"
    else
        record SKIP "soname" "readelf not found"
    fi
    check "header" "include/cuda/fc_cuda.h is the repository's" \
        cmp -s "$p/include/cuda/fc_cuda.h" "$ROOT/include/cuda/fc_cuda.h"
    if command -v nm >/dev/null; then
        local t
        t=$(mktemp -d)
        nm -D --defined-only "$lib/libfcgraph.so.$VERSION" | awk '$2 == "T" && $3 ~ /^fc_/ { print $3 }' | sort -u >"$t/so"
        nm --defined-only "$lib/libfcgraph.a" 2>/dev/null | awk '$2 == "T" && $3 ~ /^fc_/ { print $3 }' | sort -u >"$t/a"
        check "static exports" "$(wc -l <"$t/a") fc_* functions in libfcgraph.a, $(wc -l <"$t/so") in the .so" \
            same_nonempty "$t/a" "$t/so"
        rm -rf "$t"
    else
        record SKIP "static exports" "nm not found"
    fi
}

# ---- the programs ----------------------------------------------------------

SRC="${FC_SEED:-${FC_SEED_DIR:-$ROOT/../shared/seeds}/test_graph_capture_concurrency.c}"
EXTRA_INC=()
pick_source() {
    if [[ ! -f $SRC ]]; then
        log "no seed test at $SRC (../shared is absent); building ctest/test_errors.c instead"
        SRC="$HERE/test_errors.c"
        EXTRA_INC=(-I "$HERE")
    fi
    NAME=$(basename "$SRC" .c)
}

# pc_flags ARGS...: pkg-config ARGS for fcgraph; a moved tree gets --define-prefix.
PC_EXTRA=()
pc_flags() { pkg-config "${PC_EXTRA[@]+"${PC_EXTRA[@]}"}" "$@" fcgraph; }

build_pkgconfig() { # build_pkgconfig PREFIX OUT
    local p=$1 out=$2 cflags libs static_libs libdir
    section "build with pkg-config"
    have_tool "$CC" "build $NAME (pkg-config)" || return 0
    have_tool pkg-config "build $NAME (pkg-config)" || return 0
    export PKG_CONFIG_PATH="$p/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
    if [[ "$(cd "$(pkg-config --variable=prefix fcgraph)" 2>/dev/null && pwd -P)" != "$(cd "$p" && pwd -P)" ]]; then
        log "fcgraph.pc names $(pkg-config --variable=prefix fcgraph) (tree moved): adding --define-prefix"
        PC_EXTRA=(--define-prefix)
    fi
    check "pkg-config --modversion" "$(pc_flags --modversion)" test "$(pc_flags --modversion)" = "$VERSION"
    cflags=$(pc_flags --cflags)
    libs=$(pc_flags --libs)
    libdir=$(pc_flags --variable=libdir)
    log "pkg-config --cflags --libs fcgraph: $cflags $libs"
    # The static build links the archive by file name (-l:libfcgraph.a; the
    # folder also holds the .so) plus Libs.private.
    static_libs=$(pc_flags --static --libs | awk '{ for (i = 1; i <= NF; i++) if ($i == "-lfcgraph") $i = "-l:libfcgraph.a"; print }')
    log "static: pkg-config --static --libs fcgraph: $static_libs"
    # shellcheck disable=SC2086 # the flags are words
    check "build $NAME.pkgconfig" "cc ... \$(pkg-config --cflags --libs fcgraph)" \
        "$CC" -std=c11 -O2 -Wall -Wextra "${EXTRA_INC[@]+"${EXTRA_INC[@]}"}" "$SRC" -o "$out/bin/$NAME.pkgconfig" \
        $cflags $libs -pthread "-Wl,-rpath,$libdir"
    # shellcheck disable=SC2086
    check "build $NAME.pkgconfig-static" "cc ... \$(pkg-config --static ...) with libfcgraph.a" \
        "$CC" -std=c11 -O2 -Wall -Wextra "${EXTRA_INC[@]+"${EXTRA_INC[@]}"}" "$SRC" -o "$out/bin/$NAME.pkgconfig-static" \
        $cflags $static_libs -pthread
    # Libs.private must list everything the archive needs: with the compiler
    # driver's default libraries left out, they are all that is linked.
    # shellcheck disable=SC2086
    check "Libs.private is complete" "links with -nodefaultlibs and only pkg-config --static's libraries" \
        "$CC" -std=c11 -O2 "${EXTRA_INC[@]+"${EXTRA_INC[@]}"}" "$SRC" -o "$TMP/nodefaultlibs" \
        $cflags -nodefaultlibs $static_libs
    linkage "$out/bin/$NAME.pkgconfig" shared
    linkage "$out/bin/$NAME.pkgconfig-static" static
}

build_cmake() { # build_cmake PREFIX OUT
    local p=$1 out=$2 b=$TMP/cmake-build v found want
    section "build with CMake"
    have_tool "$CC" "build $NAME (CMake)" || return 0
    have_tool cmake "build $NAME (CMake)" || return 0
    rm -rf "$b"
    local cfg=(cmake -S "$HERE/cmake-consumer" -B "$b" -DCMAKE_BUILD_TYPE=Release "-DCMAKE_C_COMPILER=$CC"
        "-DCMAKE_PREFIX_PATH=$p" "-DFCGRAPH_CONSUMER_SOURCE=$SRC")
    [[ ${#EXTRA_INC[@]} -eq 0 ]] || cfg+=("-DFCGRAPH_CONSUMER_INCLUDE=${EXTRA_INC[1]}")
    log "${cfg[*]}"
    if "${cfg[@]}" >"$TMP/cmake-configure.log" 2>&1 && grep -E '^-- fcgraph ' "$TMP/cmake-configure.log" &&
        cmake --build "$b" >"$TMP/cmake-build.log" 2>&1; then
        cp "$b/consumer_shared" "$out/bin/$NAME.cmake"
        cp "$b/consumer_static" "$out/bin/$NAME.cmake-static"
        record PASS "build $NAME.cmake" "find_package(fcgraph 0.1), fcgraph::fcgraph"
        record PASS "build $NAME.cmake-static" "fcgraph::fcgraph_static"
        linkage "$out/bin/$NAME.cmake" shared
        linkage "$out/bin/$NAME.cmake-static" static
    else
        cat "$TMP/cmake-configure.log" "$TMP/cmake-build.log" 2>/dev/null || true
        record FAIL "build $NAME.cmake" "see the CMake output above"
    fi
    # The version file: same major version, at least the one asked for.
    local probe="$TMP/cmake-probe"
    rm -rf "$probe"
    for v in "$MAJOR.$MINOR" "$VERSION" "$MAJOR.$((MINOR + 1))" "$((MAJOR + 1)).0"; do
        case $v in "$MAJOR.$MINOR" | "$VERSION") want=1 ;; *) want=0 ;; esac
        found=$(cmake -S "$HERE/cmake-consumer" -B "$probe" "-DCMAKE_C_COMPILER=$CC" "-DCMAKE_PREFIX_PATH=$p" \
            "-DFCGRAPH_PROBE_VERSION=$v" 2>&1 | sed -n 's/.*fcgraph-probe: .* found=\([^ ]*\).*/\1/p')
        case $found in 1 | TRUE | ON) found=1 ;; *) found=0 ;; esac
        check "find_package(fcgraph $v)" "$([[ $found == 1 ]] && echo found || echo 'not found') (want $([[ $want == 1 ]] && echo found || echo 'not found'))" \
            test "$found" = "$want"
    done
}

# check_stripped PREFIX: scripts/install.sh's default: the shared library
# and the tool carry no debug info, each names its split-off .debug file
# in .gnu_debuglink, and that file holds the debug info.
check_stripped() {
    local p=$1 f dbg
    section "stripped files, debug info apart"
    have_tool readelf "stripped install" || return 0
    for f in "$p/lib/libfcgraph.so.$VERSION" "$p/bin/fcgraph"; do
        dbg="$p/lib/debug$f.debug"
        check "$(basename "$f") stripped" "no .debug_info or .symtab" \
            bash -c '! readelf -S "$1" | grep -qE "\.debug_info|\.symtab"' _ "$f"
        check "$(basename "$f") .gnu_debuglink" "names $(basename "$dbg")" \
            bash -c 'readelf -p .gnu_debuglink "$1" 2>/dev/null | grep -qF "$2"' _ "$f" "$(basename "$dbg")"
        check "$(basename "$dbg")" "holds .debug_info" bash -c 'readelf -S "$1" | grep -q "\.debug_info"' _ "$dbg"
    done
    check "libfcgraph.a without debug info" "strip --strip-debug" \
        bash -c '! readelf -S "$1" 2>/dev/null | grep -q "\.debug_info"' _ "$p/lib/libfcgraph.a"
}

linkage() { # linkage BINARY shared|static: the binary depends on libfcgraph.so.N or not
    local bin=$1 kind=$2
    [[ -x $bin ]] || return 0
    command -v readelf >/dev/null || { record SKIP "linkage $(basename "$bin")" "readelf not found"; return 0; }
    if [[ $kind == shared ]]; then
        check "linkage $(basename "$bin")" "NEEDED libfcgraph.so.$MAJOR" \
            needs_soname "$bin"
    else
        check "linkage $(basename "$bin")" "no libfcgraph.so dependency" no_libfcgraph "$bin"
    fi
}

run_all() { # run_all PREFIX OUT
    local p=$1 out=$2 bin name i resolved lib real_lib rc
    section "run (against $p/lib)"
    mkdir -p "$out/logs"
    real_lib=$(cd "$p/lib" && pwd -P)
    # Programs built elsewhere (--run-only: the GPU bundle) have a run path
    # naming the place they were built against; they find the tree here
    # through LD_LIBRARY_PATH. The others must find it by their run path.
    if [[ $MODE == run-only ]]; then
        export LD_LIBRARY_PATH="$p/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    fi
    [[ $SEED_RUNS =~ ^[0-9]+$ ]] || die "FC_SEED_RUNS must be a number, got '$SEED_RUNS'"
    local found=0
    for bin in "$out"/bin/*; do
        [[ -x $bin ]] || continue
        found=1
        name=$(basename "$bin")
        if needs_libfcgraph "$bin" 2>/dev/null && command -v ldd >/dev/null; then
            lib=$(ldd "$bin" | awk '/libfcgraph\.so/ { print $3 }')
            resolved=$(cd "$(dirname "$lib")" 2>/dev/null && pwd -P || echo "?")
            check "resolve $name" "libfcgraph.so.$MAJOR -> ${lib:-not found}" test "$resolved" = "$real_lib"
        fi
        for ((i = 1; i <= SEED_RUNS; i++)); do
            run_prog "$name [$i/$SEED_RUNS]" "$bin" "$out/logs/$name.$i.log"
        done
    done
    if [[ $found -eq 0 && $TOOLS_MISSING -eq 1 && $REQUIRE_TOOLS != 1 ]]; then
        record SKIP "run" "nothing built (tools missing)"
    elif [[ $found -eq 0 ]]; then
        record FAIL "run" "no programs in $out/bin"
    fi
    # The installed command: exit 0 (info printed) or 2 (no driver, one line).
    if [[ -x $p/bin/fcgraph ]]; then
        log ""
        log "--- $p/bin/fcgraph info"
        set +e
        "$p/bin/fcgraph" info 2>&1 | tee "$out/logs/fcgraph-info.log"
        rc=${PIPESTATUS[0]}
        set -e
        case $rc in
        0) record PASS "bin/fcgraph info" "exit 0" ;;
        2) record SKIP "bin/fcgraph info" "exit 2 (no driver): $(head -c 80 "$out/logs/fcgraph-info.log")" ;;
        *) record FAIL "bin/fcgraph info" "exit $rc" ;;
        esac
    fi
}

# ---- main ------------------------------------------------------------------

PREFIX="" MODE=all OUT=""
while [[ $# -gt 0 ]]; do
    case $1 in
    --prefix) [[ $# -ge 2 ]] || die "--prefix needs a folder"; PREFIX=$2; shift 2 ;;
    --build-only | --run-only) [[ $# -ge 2 ]] || die "$1 needs a folder"; MODE=${1#--}; OUT=$2; shift 2 ;;
    -h | --help) usage; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
    esac
done

TMP=$(mktemp -d "${TMPDIR:-/tmp}/fc-install-check.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
if [[ -z $PREFIX ]]; then
    [[ $MODE == all ]] || die "--$MODE needs --prefix"
    PREFIX="$TMP/prefix"
    section "install into a temporary prefix"
    log "scripts/install.sh --prefix $PREFIX"
    "$ROOT/scripts/install.sh" --prefix "$PREFIX"
    check_stripped "$PREFIX"
fi
[[ -d $PREFIX ]] || die "no install tree at $PREFIX"
PREFIX=$(cd "$PREFIX" && pwd)
[[ -n $OUT ]] || OUT="$TMP/out"
mkdir -p "$OUT/bin"
OUT=$(cd "$OUT" && pwd)

case $MODE in
all | build-only)
    check_tree "$PREFIX"
    pick_source
    log "program: $SRC"
    rm -f "$OUT"/bin/*
    build_pkgconfig "$PREFIX" "$OUT"
    build_cmake "$PREFIX" "$OUT"
    [[ $MODE == build-only ]] || run_all "$PREFIX" "$OUT"
    ;;
run-only)
    run_all "$PREFIX" "$OUT"
    ;;
esac
finish
