#!/usr/bin/env bash
# Builds, on a machine without a GPU, everything the GPU suite runs, into
# .bundle/ (git-ignored): Rust test binaries, the demo, the benchmark, the
# C test binaries and libfcgraph.so. Carry .bundle to the GPU machine and run
# scripts/gpu-suite.sh there.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
rm -rf .bundle && mkdir -p .bundle/tests .bundle/bin
cargo build --release --workspace --lib --examples --bins
cp target/release/examples/demo .bundle/bin/demo
cp target/release/fc-bench .bundle/bin/fc-bench
mkdir -p .bundle/lib && cp target/release/libfcgraph.so .bundle/lib/libfcgraph.so && ln -sf libfcgraph.so .bundle/lib/libfcgraph.so.0
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
for t in fc-graph-fc_graph capi-fcgraph capi-no_driver tests-gpu_core tests-gpu_breakable tests-gpu_pdl tests-no_driver; do
  [ -x ".bundle/tests/$t" ] || { echo "build-gpu-bundle: test binary $t is missing" >&2; exit 1; }
done
bash ctest/run.sh --build-only .bundle/ctest
# Debug info stays here; the carried copies are stripped (size limit).
strip .bundle/bin/* .bundle/tests/* .bundle/lib/*.so
git describe --always --dirty > .bundle/COMMIT 2>/dev/null || echo unknown > .bundle/COMMIT
du -sh .bundle
