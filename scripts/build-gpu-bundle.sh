#!/usr/bin/env bash
# Builds, on a machine without a GPU, everything the GPU suite runs, into
# .bundle/ (git-ignored):
#   bin/        the demo, fc-bench and fcgraph
#   tests/      the Rust test binaries of fc-graph and tests/, and the driver
#               double (libfc_cuda_double*.so) that fc-graph's unit tests load
#   lib/        libfcgraph.so and its soname link libfcgraph.so.0
#   ctest/      the C suite (ctest/run.sh --build-only)
#   prefix/     an install tree made by scripts/install.sh (library, header,
#               pkg-config and CMake files, bin/fcgraph)
#   consumers/  the seed test built against prefix/ with pkg-config and with
#               CMake, shared and static (ctest/install-check.sh --build-only)
# Carry .bundle to the GPU machine and run scripts/gpu-suite.sh there.
set -euo pipefail
cd "$(dirname "$0")/.."
# As scripts/build.sh sets it: the same value keeps capi/build.rs's output fresh.
export FC_REQUIRE_HEADER_CHECK="${FC_REQUIRE_HEADER_CHECK:-1}"
scripts/build.sh   # deps, then libfcgraph.so/.a and fcgraph as demo.sh and install.sh build them
rm -rf .bundle && mkdir -p .bundle/tests .bundle/bin .bundle/lib
cargo build --release --workspace --lib --examples --bins
cp target/release/examples/demo target/release/fc-bench target/release/fcgraph .bundle/bin/
cp target/release/libfcgraph.so .bundle/lib/libfcgraph.so && ln -sf libfcgraph.so .bundle/lib/libfcgraph.so.0
# Test executables, as cargo reports them.
cargo test --release --workspace --no-run --message-format=json 2>/dev/null |
  python3 -c '
import json, shutil, sys
# The GPU machine runs the library and integration tests; the cuda-sys and
# benchmark tests are CPU-side checks that CI runs.
wanted = {"fc-graph", "capi", "tests"}  # crate folders
for line in sys.stdin:
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("reason") != "compiler-artifact" or not m.get("executable") or not m["profile"]["test"]:
        continue
    package = m["manifest_path"].rsplit("/", 2)[-2]
    if package not in wanted:
        continue
    dst = ".bundle/tests/" + package + "-" + m["target"]["name"]
    shutil.copy(m["executable"], dst)
    print("bundled", dst)
'
for t in fc-graph-fc_graph capi-fcgraph capi-no_driver tests-gpu_core tests-gpu_breakable tests-gpu_pdl \
  tests-gpu_coexist tests-gpu_cache tests-gpu_builder tests-gpu_recording tests-gpu_conditional tests-no_driver; do
  [ -x ".bundle/tests/$t" ] || { echo "build-gpu-bundle: test binary $t is missing" >&2; exit 1; }
done
# The driver double, beside the test binaries: fc-graph's unit tests load it
# (the double's tests run on the GPU machine too, as on CI).
cargo build --release -q -p fc-cuda-double-11 -p fc-cuda-double-12
cp target/release/libfc_cuda_double.so target/release/libfc_cuda_double_11.so .bundle/tests/
bash ctest/run.sh --build-only .bundle/ctest
scripts/install.sh --no-build --no-debug-files --prefix "$PWD/.bundle/prefix"
FC_REQUIRE_INSTALL_TOOLS=1 bash ctest/install-check.sh --prefix .bundle/prefix --build-only .bundle/consumers
# Debug info stays here; the carried copies are stripped (size limit). The
# libraries keep their symbol tables, so backtraces there name functions.
strip .bundle/bin/* .bundle/tests/tests-* .bundle/tests/capi-* .bundle/tests/fc-graph-* .bundle/ctest/bin/* .bundle/prefix/bin/fcgraph .bundle/consumers/bin/*
strip --strip-debug .bundle/lib/*.so .bundle/ctest/lib/*.so .bundle/tests/*.so "$(readlink -f .bundle/prefix/lib/libfcgraph.so.0)"
strip --strip-debug .bundle/prefix/lib/libfcgraph.a
git describe --always --dirty > .bundle/COMMIT 2>/dev/null || echo unknown > .bundle/COMMIT
du -sh .bundle
