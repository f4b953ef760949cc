#!/usr/bin/env bash
# Every test: installs dependencies and the CUDA headers for the audit, then
#   - formatting and clippy;
#   - the Python tests of the benchmark report (bench/test_*.py, unittest);
#   - the Rust workspace tests (GPU suites skip visibly without a driver);
#   - the C ABI's handle table under AddressSanitizer (scripts/asan-handles.sh;
#     skips visibly without a nightly toolchain);
#   - the C suite (ctest/run.sh: the engine's seed test, built unmodified,
#     plus our own C tests) against target/release/libfcgraph.so;
#   - the install (ctest/install-check.sh): scripts/install.sh into a
#     temporary prefix, then the seed test built with pkg-config and with
#     CMake (find_package(fcgraph)), shared and static, and run;
#   - the Rust crate (scripts/check-crate.sh): fc-graph builds without
#     bindgen/libclang and its package carries its PTX.
set -euo pipefail
cd "$(dirname "$0")/.."
# Here the header audit, the header == exports check and the install checks
# must run, not skip.
export FC_REQUIRE_AUDIT=1 FC_REQUIRE_HEADER_CHECK=1 FC_REQUIRE_INSTALL_TOOLS=1
scripts/deps.sh
scripts/fetch-cuda-headers.sh
cargo fmt --all -- --check
python3 -m unittest discover -s bench -p 'test_*.py'
cargo clippy --workspace --all-targets -q -- -D warnings
cargo test --workspace --release
scripts/asan-handles.sh
scripts/miri.sh               # fc-graph and capi unit tests under Miri (installs the component; skips visibly)
scripts/build.sh              # libfcgraph.so/.a and fcgraph, built as demo.sh and install.sh build them
bash ctest/run.sh target/release
bash ctest/install-check.sh
scripts/check-crate.sh
