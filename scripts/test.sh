#!/usr/bin/env bash
# Every test: installs dependencies and the CUDA headers for the audit, then
# runs the Rust workspace tests (GPU suites skip visibly without a driver)
# and the C suite (ctest/run.sh: the engine's seed test, built unmodified,
# plus our own C tests).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
scripts/fetch-cuda-headers.sh
cargo fmt --all -- --check
cargo clippy --workspace --all-targets -q -- -D warnings
cargo test --workspace --release
cargo build --release -p fc-graph   # libfc_graph.so for the C suite
bash ctest/run.sh target/release
