#!/usr/bin/env bash
# Every test: installs dependencies and the CUDA headers for the audit, then
# runs the Rust workspace tests (GPU suites skip visibly without a driver)
# and the C suite (ctest/run.sh: the engine's seed test, built unmodified,
# plus our own C tests).
set -euo pipefail
cd "$(dirname "$0")/.."
# Here the header audit and the header == exports check must run, not skip.
export FC_REQUIRE_AUDIT=1 FC_REQUIRE_HEADER_CHECK=1
scripts/deps.sh
scripts/fetch-cuda-headers.sh
cargo fmt --all -- --check
cargo clippy --workspace --all-targets -q -- -D warnings
cargo test --workspace --release
cargo build --release -p fcgraph-capi   # target/release/libfcgraph.so for the C suite
bash ctest/run.sh target/release
