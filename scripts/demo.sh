#!/usr/bin/env bash
# The main job: installs build dependencies, builds the library
# (target/release/libfcgraph.so and libfcgraph.a) and the `fcgraph` command
# in one release build (scripts/build.sh), then runs `fcgraph info` (driver,
# devices, optional driver features) and `fcgraph selftest` (capture +
# replay, concurrency, shield, breaks, pool on every device). Arguments go
# to selftest (e.g. --device 1).
#
# Without a CUDA driver, fcgraph exits 2 with one line: the build is fine and
# the checks need a GPU, so this script says so and exits 0. Any other
# failure is a failure.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
echo "built: target/release/libfcgraph.so (soname libfcgraph.so.0), libfcgraph.a, fcgraph"

# fcgraph_step ARGS...: runs target/release/fcgraph ARGS; returns 2 when it found no driver.
fcgraph_step() {
  local rc=0
  echo "== fcgraph $*"
  target/release/fcgraph "$@" || rc=$?
  case $rc in
  0) return 0 ;;
  2) return 2 ;;
  *) echo "demo: fcgraph $1 failed (exit $rc)" >&2; exit "$rc" ;;
  esac
}
nogpu() {
  echo "demo: the build is fine; fcgraph found no CUDA driver here, so info and selftest need a machine with a GPU."
  echo "      (install: scripts/install.sh --prefix DIR; tests: scripts/test.sh)"
  exit 0
}
fcgraph_step info || nogpu
fcgraph_step selftest "$@" || nogpu
