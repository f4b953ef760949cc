#!/usr/bin/env bash
# The main job: installs build dependencies, builds libfcgraph.so (release)
# and runs the demo, which prints the driver and devices it finds and, with a
# GPU, captures, replays and checks a graph on each device.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
cargo build --release -p fcgraph-capi
echo "built: target/release/libfcgraph.so (soname libfcgraph.so.0)"
cargo run --release -q -p fc-graph --example demo -- "$@"
