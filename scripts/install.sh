#!/usr/bin/env bash
# Installs libfcgraph like a C library:
#
#   PREFIX/lib/libfcgraph.so.X.Y.Z              soname libfcgraph.so.X
#   PREFIX/lib/libfcgraph.so.X -> libfcgraph.so.X.Y.Z
#   PREFIX/lib/libfcgraph.so   -> libfcgraph.so.X
#   PREFIX/lib/libfcgraph.a
#   PREFIX/include/cuda/fc_cuda.h
#   PREFIX/lib/pkgconfig/fcgraph.pc             pkg-config --cflags --libs fcgraph
#   PREFIX/lib/cmake/fcgraph/fcgraphConfig.cmake and fcgraphConfigVersion.cmake
#                                               find_package(fcgraph X.Y) -> fcgraph::fcgraph,
#                                               fcgraph::fcgraph_static
#   PREFIX/bin/fcgraph                          the command-line tool (info, selftest)
#   PREFIX/lib/debug/PREFIX/LIBDIR/libfcgraph.so.X.Y.Z.debug
#   PREFIX/lib/debug/PREFIX/bin/fcgraph.debug   their debug info, split off
#
# The version X.Y.Z is the workspace's (Cargo.toml, [workspace.package]).
#
# Installed files are stripped, as distributions ship them: the shared
# library and the tool lose their symbol tables and debug info (the shared
# library keeps its dynamic symbols), the static library its debug info
# (it keeps the symbols a link needs). The debug info of the shared library
# and the tool goes to compressed .debug files under PREFIX/lib/debug, at
# the files' own absolute paths, as distributions' -dbg/-debuginfo packages
# lay them out; each stripped file names its .debug file (with its CRC) in
# a .gnu_debuglink section, and a file with a build ID also gets
# lib/debug/.build-id/xx/rest.debug. gdb finds them after
# `set debug-file-directory PREFIX/lib/debug` (its default for PREFIX /usr).
# Needs objcopy, strip and readelf (binutils).
#
# Usage: scripts/install.sh [--prefix DIR] [--destdir DIR] [--libdir NAME] [--no-build]
#                           [--keep-debug | --no-debug-files]
#   --prefix DIR    where the files will live (default /usr/local)
#   --destdir DIR   stage the files under DIR (DIR/PREFIX/...), as packagers do;
#                   the installed files still name PREFIX
#   --libdir NAME   library folder under the prefix (default lib; e.g. lib64)
#   --no-build      install the existing release build (target/release) instead
#                   of running scripts/build.sh first (which installs missing
#                   build dependencies with apt-get: scripts/deps.sh)
#   --keep-debug    install the files as built, debug info inside (no stripping)
#   --no-debug-files  strip, and install no .debug files
# Environment: CARGO_TARGET_DIR (default target/), RUSTC (default rustc).
set -euo pipefail

# ROOT, die, usage, absolute, workspace_version
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

PREFIX=/usr/local DESTDIR_="" LIBDIR=lib BUILD=1 DEBUG=split
while [[ $# -gt 0 ]]; do
  case $1 in
  --prefix) [[ $# -ge 2 ]] || die "--prefix needs a folder"; PREFIX=$2; shift 2 ;;
  --prefix=*) PREFIX=${1#*=}; shift ;;
  --destdir) [[ $# -ge 2 ]] || die "--destdir needs a folder"; DESTDIR_=$2; shift 2 ;;
  --destdir=*) DESTDIR_=${1#*=}; shift ;;
  --libdir) [[ $# -ge 2 ]] || die "--libdir needs a name"; LIBDIR=$2; shift 2 ;;
  --libdir=*) LIBDIR=${1#*=}; shift ;;
  --no-build) BUILD=0; shift ;;
  --keep-debug) DEBUG=keep; shift ;;
  --no-debug-files) DEBUG=none; shift ;;
  -h | --help) usage; exit 0 ;;
  *) die "unknown argument '$1' (see --help)" ;;
  esac
done

# Absolute paths, without a trailing slash, whatever folder we were called from.
[[ -n $PREFIX ]] || die "--prefix is empty"
PREFIX=$(absolute "$PREFIX"); PREFIX=${PREFIX%/}; PREFIX=${PREFIX:-/}
[[ -z $DESTDIR_ ]] || { DESTDIR_=$(absolute "$DESTDIR_"); DESTDIR_=${DESTDIR_%/}; }
LIBDIR=${LIBDIR%/}
case $LIBDIR in "" | /* | *..* | *//*) die "--libdir must be a relative folder name such as lib or lib64, not '$LIBDIR'" ;; esac

# The version, from [workspace.package] of the workspace's Cargo.toml.
VERSION=$(workspace_version)
[[ $VERSION =~ ^([0-9]+)\.([0-9]+)\.([0-9]+)$ ]] || die "no X.Y.Z version in [workspace.package] of Cargo.toml (got '$VERSION')"
MAJOR=${BASH_REMATCH[1]} MINOR=${BASH_REMATCH[2]}

if [[ $DEBUG != keep ]]; then
  for tool in objcopy strip readelf; do
    have "$tool" || die "$tool not found: install binutils, or pass --keep-debug to install unstripped files"
  done
fi

if [[ $BUILD -eq 1 ]]; then
  "$ROOT/scripts/build.sh"
fi
TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"
TARGET="$(absolute "$TARGET")/release"
for f in libfcgraph.so libfcgraph.a fcgraph; do
  [[ -f $TARGET/$f ]] || die "$TARGET/$f is missing: build first (scripts/build.sh), or drop --no-build"
done
if command -v readelf >/dev/null; then
  soname=$(readelf -d "$TARGET/libfcgraph.so" | sed -n 's/.*(SONAME).*\[\(.*\)\].*/\1/p')
  [[ $soname == "libfcgraph.so.$MAJOR" ]] ||
    die "$TARGET/libfcgraph.so has soname '${soname:-none}', want libfcgraph.so.$MAJOR (stale build? rebuild it)"
fi

# What a program linking libfcgraph.a needs besides it, as rustc reports it
# for a static library made of our crates (the rlib of this build; Rust's
# standard library and libloading's -ldl); failing that, for an empty one.
probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
echo 'extern crate fcgraph;' >"$probe/probe.rs"
: >"$probe/empty.rs"
native_static_libs() { # native_static_libs RUSTC-ARGS...
  "${RUSTC:-rustc}" --edition 2021 --crate-type staticlib --crate-name probe --print native-static-libs \
    -o "$probe/libprobe.a" "$@" 2>&1 | sed -n 's/.*native-static-libs: //p'
}
native=$(native_static_libs --extern "fcgraph=$TARGET/libfcgraph.rlib" -L "dependency=$TARGET/deps" "$probe/probe.rs" || true)
if [[ -z $native ]]; then
  native=$(native_static_libs "$probe/empty.rs" || true)
  native=${native:+-ldl $native}
fi
if [[ -z $native ]]; then
  native="-ldl -lgcc_s -lutil -lrt -lpthread -lm -ldl -lc"
  echo "install.sh: ${RUSTC:-rustc} did not report native-static-libs; using the usual Linux list: $native" >&2
fi
# CMake wants library names ("m"), pkg-config flags ("-lm").
read -r -a native_words <<<"$native"
cmake_libs=$(printf '%s\n' "${native_words[@]}" | sed -n 's/^-l//p' | paste -sd ';' -)

# lib/cmake/fcgraph -> the prefix: one ".." per component of LIBDIR, plus two.
up=""
IFS=/ read -r -a parts <<<"$LIBDIR"
for _ in "${parts[@]}" cmake fcgraph; do up="$up../"; done
up=${up%/}

# render TEMPLATE DEST: the template with its @NAME@ fields filled in.
render() {
  local s
  s=$(<"$1")
  s=${s//@PREFIX@/"$PREFIX"}
  s=${s//@LIBDIR@/"$LIBDIR"}
  s=${s//@VERSION@/"$VERSION"}
  s=${s//@MAJOR@/"$MAJOR"}
  s=${s//@MAJOR_MINOR@/"$MAJOR.$MINOR"}
  s=${s//@LIBS_PRIVATE@/"$native"}
  s=${s//@STATIC_LINK_LIBRARIES@/"$cmake_libs"}
  s=${s//@CMAKE_TO_PREFIX@/"$up"}
  if grep -qE '@[A-Z_]+@' <<<"$s"; then
    die "$1: unfilled field $(grep -oE '@[A-Z_]+@' <<<"$s" | head -n 1)"
  fi
  printf '%s\n' "$s" >"$2"
  chmod 644 "$2"
}

D="$DESTDIR_$PREFIX"
D=${D%/}
lib="$D/$LIBDIR"
echo "installing fcgraph $VERSION from $TARGET into ${DESTDIR_:+$DESTDIR_ (staging) for }$PREFIX"
install -d "$lib" "$lib/pkgconfig" "$lib/cmake/fcgraph" "$D/include/cuda" "$D/bin"
install -m 755 "$TARGET/libfcgraph.so" "$lib/libfcgraph.so.$VERSION"
ln -sfn "libfcgraph.so.$VERSION" "$lib/libfcgraph.so.$MAJOR"
ln -sfn "libfcgraph.so.$MAJOR" "$lib/libfcgraph.so"
install -m 644 "$TARGET/libfcgraph.a" "$lib/libfcgraph.a"
install -m 644 "$ROOT/include/cuda/fc_cuda.h" "$D/include/cuda/fc_cuda.h"
install -m 755 "$TARGET/fcgraph" "$D/bin/fcgraph"

# split_debug FILE INSTALLED_PATH: moves FILE's debug info into
# $D/lib/debug/INSTALLED_PATH.debug, strips FILE and links it to that file.
dbg_root="$D/lib/debug"
split_debug() {
  local file=$1 dbg="$dbg_root$2.debug" id
  install -d "$(dirname "$dbg")"
  objcopy --only-keep-debug --compress-debug-sections=zlib "$file" "$dbg"
  chmod 644 "$dbg"
  strip --strip-unneeded --remove-section=.comment "$file"
  objcopy --add-gnu-debuglink="$dbg" "$file"
  id=$(readelf -n "$file" | sed -n 's/.*Build ID: *\([0-9a-f]*\).*/\1/p' | head -n 1)
  if [[ ${#id} -gt 2 ]]; then
    install -d "$dbg_root/.build-id/${id:0:2}"
    ln -sfn "$(realpath -m --relative-to="$dbg_root/.build-id/${id:0:2}" "$dbg")" \
      "$dbg_root/.build-id/${id:0:2}/${id:2}.debug"
  fi
}
sizes() { # the installed library and tool, in MB
  local f
  for f in "$lib/libfcgraph.so.$VERSION" "$lib/libfcgraph.a" "$D/bin/fcgraph"; do
    printf '%s %s MB; ' "${f#"$D/"}" "$(du -b "$f" | awk '{ printf "%.1f", $1 / 1e6 }')"
  done
}
if [[ $DEBUG == keep ]]; then
  echo "not stripped (--keep-debug): $(sizes)"
else
  before=$(sizes)
  if [[ $DEBUG == split ]]; then
    split_debug "$lib/libfcgraph.so.$VERSION" "$PREFIX/$LIBDIR/libfcgraph.so.$VERSION"
    split_debug "$D/bin/fcgraph" "$PREFIX/bin/fcgraph"
  else
    strip --strip-unneeded --remove-section=.comment "$lib/libfcgraph.so.$VERSION" "$D/bin/fcgraph"
  fi
  strip --strip-debug "$lib/libfcgraph.a"
  echo "as built: $before"
  echo "stripped: $(sizes)"
fi
render "$ROOT/packaging/fcgraph.pc.in" "$lib/pkgconfig/fcgraph.pc"
render "$ROOT/packaging/fcgraphConfig.cmake.in" "$lib/cmake/fcgraph/fcgraphConfig.cmake"
render "$ROOT/packaging/fcgraphConfigVersion.cmake.in" "$lib/cmake/fcgraph/fcgraphConfigVersion.cmake"

cat <<EOF
installed:
  $lib/libfcgraph.so.$VERSION (soname libfcgraph.so.$MAJOR), libfcgraph.so.$MAJOR, libfcgraph.so, libfcgraph.a
  $D/include/cuda/fc_cuda.h
  $lib/pkgconfig/fcgraph.pc
  $lib/cmake/fcgraph/fcgraphConfig.cmake, fcgraphConfigVersion.cmake
  $D/bin/fcgraph
EOF
if [[ $DEBUG == split ]]; then
  echo "  $dbg_root$PREFIX/$LIBDIR/libfcgraph.so.$VERSION.debug, $dbg_root$PREFIX/bin/fcgraph.debug"
  echo "    (debug info; gdb: set debug-file-directory $PREFIX/lib/debug)"
fi
cat <<EOF
use:
  cc app.c \$(PKG_CONFIG_PATH=$PREFIX/$LIBDIR/pkgconfig pkg-config --cflags --libs fcgraph)
  cmake -DCMAKE_PREFIX_PATH=$PREFIX ...   # find_package(fcgraph $MAJOR.$MINOR REQUIRED), fcgraph::fcgraph
EOF
